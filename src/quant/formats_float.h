// Plain floating-point formats: F32, F16 (IEEE half), BF16. One element per "block".
// Semantics follow ggml (ggml.c type_traits, ggml-cpu type_traits_cpu, vec.cpp):
//   - each is its own activation format (vec_dot_type F32 / F16 / BF16);
//   - F16 rounding is round-to-nearest-even with F16C's NaN handling (see types.cpp);
//   - BF16 rounding is ggml's ggml_compute_fp32_to_bf16 (nearest even, NaN quietened, no
//     denormal flush), used by both quantize_ref and quantize_act, as ggml-cpu does;
//   - dot_ref converts both sides to f32 and accumulates sequentially in f32 with FMA.
//     ggml's x86 SIMD path accumulates in f32 lanes (its scalar fallback in double); the
//     products of two halves / two bf16 are exact in f32, so only summation order differs.
#pragma once
#include <cstdint>

#include "quant/format.h"

namespace df::quant {

struct FormatF32 {
  static constexpr GgmlType type = GgmlType::F32;
  static constexpr int64_t block_elems = 1;
  using Block = float;
  using Act = FormatF32;
  static void dequantize_ref(const Block* src, float* dst, int64_t nb);
  static void quantize_ref(const float* src, Block* dst, int64_t nb);
  static void quantize_act(const float* src, Block* dst, int64_t nb);
  static float dot_ref(const Block* w, const Act::Block* a, int64_t nb);
};

struct FormatF16 {
  static constexpr GgmlType type = GgmlType::F16;
  static constexpr int64_t block_elems = 1;
  using Block = uint16_t;  // IEEE binary16 bits
  using Act = FormatF16;
  static void dequantize_ref(const Block* src, float* dst, int64_t nb);
  static void quantize_ref(const float* src, Block* dst, int64_t nb);
  static void quantize_act(const float* src, Block* dst, int64_t nb);
  static float dot_ref(const Block* w, const Act::Block* a, int64_t nb);
};

struct FormatBF16 {
  static constexpr GgmlType type = GgmlType::BF16;
  static constexpr int64_t block_elems = 1;
  using Block = uint16_t;  // bfloat16 bits (top half of an f32)
  using Act = FormatBF16;
  static void dequantize_ref(const Block* src, float* dst, int64_t nb);
  static void quantize_ref(const float* src, Block* dst, int64_t nb);
  static void quantize_act(const float* src, Block* dst, int64_t nb);
  static float dot_ref(const Block* w, const Act::Block* a, int64_t nb);
};

static_assert(WeightFormat<FormatF32> && WeightFormat<FormatF16> && WeightFormat<FormatBF16>);

}  // namespace df::quant
