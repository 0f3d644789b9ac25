// The list of formats this build computes with. A new format: write its struct
// (formats_*.h / .cpp), add it here, mark it supported in types.cpp.
#pragma once
#include "quant/format.h"
#include "quant/formats_float.h"
#include "quant/formats_q8.h"

namespace df::quant {

using WeightFormats = TypeList<FormatF32, FormatF16, FormatBF16, FormatQ8_0>;
// Formats activations are rounded to (the vec_dot_type of some weight format).
using ActFormats = TypeList<FormatF32, FormatF16, FormatBF16, FormatQ8_0>;

}  // namespace df::quant
