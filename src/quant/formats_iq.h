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

#include "quant/format.h"
#include "quant/formats_q8.h"

namespace df {

struct BlockIQ2_XXS {
  uint16_t d;                  // fp16 scale
  uint16_t qs[quant::kQK_K / 8];      // per 32 elements: 4 grid bytes, then 4 x 7-bit sign codes + 4-bit scale
};
static_assert(sizeof(BlockIQ2_XXS) == 66);

struct BlockIQ2_XS {
  uint16_t d;
  uint16_t qs[quant::kQK_K / 8];      // per 8 elements: 9-bit grid index | 7-bit sign code << 9
  uint8_t scales[quant::kQK_K / 32];  // two 4-bit scales per 32 elements (one per 16)
};
static_assert(sizeof(BlockIQ2_XS) == 74);

struct BlockIQ2_S {
  uint16_t d;
  uint8_t qs[quant::kQK_K / 4];       // [0, 32): grid index low bytes; [32, 64): sign bytes
  uint8_t qh[quant::kQK_K / 32];      // grid index bits 8-9, 2 per 8 elements
  uint8_t scales[quant::kQK_K / 32];  // two 4-bit scales per 32 elements
};
static_assert(sizeof(BlockIQ2_S) == 82);

struct BlockIQ3_XXS {
  uint16_t d;
  uint8_t qs[3 * quant::kQK_K / 8];   // [0, 64): grid indices (4 elements each);
                               // [64, 96): per 32 elements 4 x 7-bit sign codes + 4-bit scale
};
static_assert(sizeof(BlockIQ3_XXS) == 98);

struct BlockIQ3_S {
  uint16_t d;
  uint8_t qs[quant::kQK_K / 4];       // grid index low bytes (4 elements each)
  uint8_t qh[quant::kQK_K / 32];      // grid index bit 8
  uint8_t signs[quant::kQK_K / 8];    // one sign bit per element
  uint8_t scales[quant::kQK_K / 64];  // two 4-bit scales per 64 elements
};
static_assert(sizeof(BlockIQ3_S) == 110);

struct BlockIQ1_S {
  uint16_t d;
  uint8_t qs[quant::kQK_K / 8];       // grid index low bytes (8 elements each)
  uint16_t qh[quant::kQK_K / 32];     // per 32 elements: 4 x 3 index bits, 3-bit scale, delta sign
};
static_assert(sizeof(BlockIQ1_S) == 50);

struct BlockIQ1_M {
  uint8_t qs[quant::kQK_K / 8];       // grid index low bytes
  uint8_t qh[quant::kQK_K / 16];      // per 8 elements: 3 index bits + delta sign (a nibble)
  uint8_t scales[quant::kQK_K / 32];  // 3-bit scales per 16 elements; the fp16 block scale is
                               // spread over the top nibble of each 16-bit word
};
static_assert(sizeof(BlockIQ1_M) == 56);

constexpr int kQK4_NL = 32;
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kQK4_NL / 2];     // element j: low nibble of qs[j], element j+16: high nibble
};
static_assert(sizeof(BlockIQ4_NL) == 18);

struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;           // bits 4-5 of the 6-bit scales, 2 per 32 elements
  uint8_t scales_l[quant::kQK_K / 64];  // bits 0-3 of the scales, a nibble per 32 elements
  uint8_t qs[quant::kQK_K / 2];       // per 32 elements as IQ4_NL
};
static_assert(sizeof(BlockIQ4_XS) == 136);

}  // namespace df

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
