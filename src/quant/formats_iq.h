// The IQ formats ("i-quants"): weights as indices into fixed grids of small magnitudes, with
// sign codes and sub-block scales (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S), or
// 4-bit indices into one non-linear table (IQ4_NL, IQ4_XS). Block layouts follow ggml's
// ggml-common.h; grids are in iq_tables.h.
//
// dequantize_ref is bit exact with ggml's dequantize_row_* (the same f32 operations in the
// same order). Activations: Q8_K for all but IQ4_NL, which uses Q8_0 (ggml-cpu
// type_traits_cpu). dot_ref computes what ggml-cpu's AVX2 vec_dot computes, as exact
// integer sums per block, scaled in f32 per block:
//   IQ2_XXS, IQ2_XS, IQ2_S : 0.125 * sum_b d_b * isum_b,  isum_b = sum_g (2 s_g + 1) * (w . a)_g
//   IQ3_XXS                : 0.25  * sum_b d_b * isum_b   (same form)
//   IQ3_S                  :         sum_b d_b * isum_b   (same form)
//   IQ1_S, IQ1_M           : sum_b d_b * isum_b + 0.125 * sum_b d_b * dsum_b, the second
//                            term the +-1/8 grid shift, from the activation's bsums (IQ1_S)
//                            or its 8-element sums (IQ1_M)
//   IQ4_XS                 : sum_b d_b * sum_g (s_g - 32) * (v . a)_g
//   IQ4_NL                 : sum_b (da_b * dw_b) * (v . a)_b   (32-element Q8_0 blocks)
// with d_b = fp16(weight scale) * activation scale, g over each format's scale groups
// (32 or 16 elements) and the grid magnitudes w carrying their signs. ggml accumulates the
// same block terms in 8 f32 lanes, so results differ from it only in f32 summation order.
// No reference quantisers: ggml's need importance matrices and grid search tables.
#pragma once
#include <cstdint>

#include "quant/blocks.h"
#include "quant/format.h"
#include "quant/formats_q8.h"

namespace df::quant {

// Common shape of the IQ formats with Q8_K activations.
template <GgmlType T, class B>
struct FormatIqK {
  static constexpr GgmlType type = T;
  static constexpr int64_t block_elems = kQK_K;
  using Block = B;
  using Act = FormatQ8_K;
  static void dequantize_ref(const Block* src, float* dst, int64_t nb);
  static float dot_ref(const Block* w, const Act::Block* a, int64_t nb);
};

using FormatIQ2_XXS = FormatIqK<GgmlType::IQ2_XXS, BlockIQ2_XXS>;
using FormatIQ2_XS = FormatIqK<GgmlType::IQ2_XS, BlockIQ2_XS>;
using FormatIQ2_S = FormatIqK<GgmlType::IQ2_S, BlockIQ2_S>;
using FormatIQ3_XXS = FormatIqK<GgmlType::IQ3_XXS, BlockIQ3_XXS>;
using FormatIQ3_S = FormatIqK<GgmlType::IQ3_S, BlockIQ3_S>;
using FormatIQ1_S = FormatIqK<GgmlType::IQ1_S, BlockIQ1_S>;
using FormatIQ1_M = FormatIqK<GgmlType::IQ1_M, BlockIQ1_M>;
using FormatIQ4_XS = FormatIqK<GgmlType::IQ4_XS, BlockIQ4_XS>;

struct FormatIQ4_NL {
  static constexpr GgmlType type = GgmlType::IQ4_NL;
  static constexpr int64_t block_elems = kQK4_NL;
  using Block = BlockIQ4_NL;
  using Act = FormatQ8_0;
  static void dequantize_ref(const Block* src, float* dst, int64_t nb);
  static float dot_ref(const Block* w, const Act::Block* a, int64_t nb);
};

static_assert(WeightFormat<FormatIQ2_XXS> && WeightFormat<FormatIQ2_XS> &&
              WeightFormat<FormatIQ2_S> && WeightFormat<FormatIQ3_XXS> &&
              WeightFormat<FormatIQ3_S> && WeightFormat<FormatIQ1_S> &&
              WeightFormat<FormatIQ1_M> && WeightFormat<FormatIQ4_XS> &&
              WeightFormat<FormatIQ4_NL>);

}  // namespace df::quant
