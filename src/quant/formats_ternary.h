// Ternary formats for BitNet b1.58 / TriLM style weights in {-1, 0, +1} times a block scale
// (ggml's block_tq1_0, block_tq2_0), with Q8_K activations (ggml-cpu type_traits_cpu).
//   TQ1_0: 5 trits per byte (base 3, stored as ceil(v * 256 / 243) so that the trit n is
//          the top "digit" of (byte * 3^n mod 256) * 3 / 256), 4 per byte in qh;
//          element order: qs[0..32) x 5 trits, qs[32..48) x 5, qh[0..4) x 4.
//   TQ2_0: 2 bits per element (q - 1, q in {0, 1, 2}; a stray 3 reads as +2 everywhere),
//          element 32 * (j / 32) * 4 + 32 * l + (j % 32) in bits 2l of qs[j].
// dequantize_ref / quantize_ref are bit exact with ggml's dequantize_row_tq*_0 /
// quantize_row_tq*_0_ref. dot_ref = sum_b (da_b * fp16(dw_b)) * isum_b with isum_b the exact
// integer sum of (q - 1) * a, which ggml's AVX2 vec_dot forms as sum(q * a) - bsums.
#pragma once
#include <cstdint>

#include "quant/blocks.h"
#include "quant/format.h"
#include "quant/formats_q8.h"

namespace df::quant {

struct FormatTQ1_0 {
  static constexpr GgmlType type = GgmlType::TQ1_0;
  static constexpr int64_t block_elems = kQK_K;
  using Block = BlockTQ1_0;
  using Act = FormatQ8_K;
  static void dequantize_ref(const Block* src, float* dst, int64_t nb);
  static void quantize_ref(const float* src, Block* dst, int64_t nb);
  static float dot_ref(const Block* w, const Act::Block* a, int64_t nb);
};

struct FormatTQ2_0 {
  static constexpr GgmlType type = GgmlType::TQ2_0;
  static constexpr int64_t block_elems = kQK_K;
  using Block = BlockTQ2_0;
  using Act = FormatQ8_K;
  static void dequantize_ref(const Block* src, float* dst, int64_t nb);
  static void quantize_ref(const float* src, Block* dst, int64_t nb);
  static float dot_ref(const Block* w, const Act::Block* a, int64_t nb);
};

static_assert(WeightFormat<FormatTQ1_0> && WeightFormat<FormatTQ2_0>);
static_assert(QuantizableFormat<FormatTQ1_0> && QuantizableFormat<FormatTQ2_0>);

// Element values (q - 1 in {-1, 0, 1}; TQ2_0 may hold 2) of one block in element order.
void tq1_0_values(const BlockTQ1_0& b, int8_t out[kQK_K]);
void tq2_0_values(const BlockTQ2_0& b, int8_t out[kQK_K]);

}  // namespace df::quant
