// Q1_0 and Q2_0: sign / 2-bit formats with one fp16 scale per block (ggml's block_q1_0,
// block_q2_0), with Q8_0 activations (ggml-cpu type_traits_cpu), so one weight block spans
// several activation blocks.
//   Q1_0: 128 elements, bit j of the block (qs[j / 8] bit j % 8) set = +d, clear = -d;
//         quantize_ref: d = mean |x| (f32 sum in order), bit = x >= 0.
//   Q2_0: 64 elements, 2 bits each (element j in qs[j / 4] bits 2 (j % 4)), value (q - 1) d,
//         q - 1 in {-1, 0, 1, 2}; quantize_ref: d = amax, q = clamp(roundf(x / d) + 1, 0, 3).
// dequantize_ref / quantize_ref are bit exact with ggml. dot_ref, as ggml's vec_dot (AVX2
// for Q1_0, the generic code for Q2_0, which has no x86 SIMD version):
//   sum_b fp16(dw_b) * (sum_k fp16(da_k) * isum_k) over the Q8_0 blocks k of weight block b.
#pragma once
#include <cstdint>

#include "quant/blocks.h"
#include "quant/format.h"
#include "quant/formats_q8.h"

namespace df::quant {

struct FormatQ1_0 {
  static constexpr GgmlType type = GgmlType::Q1_0;
  static constexpr int64_t block_elems = kQK1_0;
  using Block = BlockQ1_0;
  using Act = FormatQ8_0;
  static void dequantize_ref(const Block* src, float* dst, int64_t nb);
  static void quantize_ref(const float* src, Block* dst, int64_t nb);
  static float dot_ref(const Block* w, const Act::Block* a, int64_t nb);
};

struct FormatQ2_0 {
  static constexpr GgmlType type = GgmlType::Q2_0;
  static constexpr int64_t block_elems = kQK2_0;
  using Block = BlockQ2_0;
  using Act = FormatQ8_0;
  static void dequantize_ref(const Block* src, float* dst, int64_t nb);
  static void quantize_ref(const float* src, Block* dst, int64_t nb);
  static float dot_ref(const Block* w, const Act::Block* a, int64_t nb);
};

static_assert(WeightFormat<FormatQ1_0> && WeightFormat<FormatQ2_0>);
static_assert(QuantizableFormat<FormatQ1_0> && QuantizableFormat<FormatQ2_0>);

}  // namespace df::quant
