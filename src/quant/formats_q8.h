// Q8_0: blocks of 32 int8 quants with one fp16 scale (block struct in types.h).
// Its own activation format (ggml type_traits_cpu: vec_dot_type Q8_0).
//
// Two quantisers, because ggml has two that round differently:
//   quantize_ref  = ggml's quantize_row_q8_0_ref (used to write model files):
//                   d = amax/127, id = d ? 1/d : 0, q = roundf(x*id)  (ties away from zero)
//   quantize_act  = ggml-cpu's quantize_row_q8_0 as built for x86 with AVX/AVX2, which is
//                   what llama.cpp runs on activations on this class of machine
//                   (ggml-cpu/arch/x86/quants.c): d = amax/127,
//                   id = amax ? 127/amax : 0, q = round-to-nearest-even(x*id).
//   The two differ in the multiplier (1/(amax/127) vs 127/amax, which can differ in the last
//   bit) and in how ties round.
// dot_ref = sum over blocks of float(int sum of qw*qa) * (fp16(dw) * fp16(da)), in f32,
// as ggml_vec_dot_q8_0_q8_0 (its SIMD path accumulates per-lane partial sums instead).
#pragma once
#include <cstdint>

#include "quant/blocks.h"
#include "quant/format.h"

namespace df::quant {

struct FormatQ8_0 {
  static constexpr GgmlType type = GgmlType::Q8_0;
  static constexpr int64_t block_elems = kQK8_0;
  using Block = BlockQ8_0;
  using Act = FormatQ8_0;
  static void dequantize_ref(const Block* src, float* dst, int64_t nb);
  static void quantize_ref(const float* src, Block* dst, int64_t nb);
  static void quantize_act(const float* src, Block* dst, int64_t nb);
  static float dot_ref(const Block* w, const Act::Block* a, int64_t nb);
};

static_assert(WeightFormat<FormatQ8_0>);

// Q8_1: Q8_0 plus s = fp16(d * sum(qs)), the activation format of Q4_1 / Q5_1
// (ggml type_traits_cpu: vec_dot_type Q8_1). Not a weight format.
//   quantize_ref = ggml's quantize_row_q8_1_ref: id = 1/d, roundf (ties away), s from the
//                  int8 quants.
//   quantize_act = ggml-cpu's quantize_row_q8_1 on x86 (AVX/AVX2 path, also in the AVX-512
//                  builds): id = 127/amax, nearest-even rounding (vroundps), s from the
//                  int32 quants before saturation, summed with int32 wrap-around.
//   dequantize_ref = qs * d (ggml has no to_float for Q8_1).
struct FormatQ8_1 {
  static constexpr GgmlType type = GgmlType::Q8_1;
  static constexpr int64_t block_elems = kQK8_1;
  using Block = BlockQ8_1;
  static void dequantize_ref(const Block* src, float* dst, int64_t nb);
  static void quantize_ref(const float* src, Block* dst, int64_t nb);
  static void quantize_act(const float* src, Block* dst, int64_t nb);
};
static_assert(ActFormat<FormatQ8_1>);

// Q8_K: super-blocks of 256 int8 quants with an f32 scale and the sums of each 16 quants,
// the activation format of the K-quants (ggml type_traits_cpu: vec_dot_type Q8_K).
//   quantize_ref = quantize_act = ggml's quantize_row_q8_K_ref, which is what ggml-cpu's
//                  x86 quantize_row_q8_K calls: the element of largest magnitude (first on
//                  ties) is max, iscale = -127/max, q = min(127, nearest_int(iscale * x)),
//                  d = 1/iscale. An all-zero block gets d = 0, qs = 0 and (here) bsums = 0;
//                  ggml leaves that block's bsums unwritten.
//   dequantize_ref = d * qs.
struct FormatQ8_K {
  static constexpr GgmlType type = GgmlType::Q8_K;
  static constexpr int64_t block_elems = kQK_K;
  using Block = BlockQ8_K;
  static void dequantize_ref(const Block* src, float* dst, int64_t nb);
  static void quantize_ref(const float* src, Block* dst, int64_t nb);
  static void quantize_act(const float* src, Block* dst, int64_t nb);
};
static_assert(ActFormat<FormatQ8_K>);

}  // namespace df::quant
