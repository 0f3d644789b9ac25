// The list of formats this build computes with. A new format: write its struct
// (formats_*.h / .cpp), add it here, mark it supported in types.cpp.
#pragma once
#include "quant/format.h"
#include "quant/formats_float.h"
#include "quant/formats_fp4.h"
#include "quant/formats_iq.h"
#include "quant/formats_kquant.h"
#include "quant/formats_legacy.h"
#include "quant/formats_q1q2.h"
#include "quant/formats_q8.h"
#include "quant/formats_ternary.h"

namespace df::quant {

using WeightFormats = TypeList<FormatF32, FormatF16, FormatBF16, FormatQ8_0,
                               FormatQ4_0, FormatQ4_1, FormatQ5_0, FormatQ5_1,
                               FormatQ2_K, FormatQ3_K, FormatQ4_K, FormatQ5_K, FormatQ6_K,
                               FormatMxfp4, FormatNvfp4,
                               // IQ, ternary and 1/2-bit formats (formats_iq.h, formats_ternary.h,
                               // formats_q1q2.h)
                               FormatIQ1_S, FormatIQ1_M, FormatIQ2_XXS, FormatIQ2_XS, FormatIQ2_S,
                               FormatIQ3_XXS, FormatIQ3_S, FormatIQ4_NL, FormatIQ4_XS, FormatTQ1_0,
                               FormatTQ2_0, FormatQ1_0, FormatQ2_0>;
// Formats activations are rounded to (the vec_dot_type of some weight format).
using ActFormats = TypeList<FormatF32, FormatF16, FormatBF16, FormatQ8_0,
                            FormatQ8_1, FormatQ8_K>;

}  // namespace df::quant
