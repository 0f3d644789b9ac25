// The legacy 32-element block formats Q4_0, Q4_1, Q5_0, Q5_1 (block layouts: ggml-common.h).
//   Q4_0: w = d * (q - 8),  q in [0, 15]          activations Q8_0
//   Q4_1: w = d * q + m,    q in [0, 15]          activations Q8_1
//   Q5_0: w = d * (q - 16), q in [0, 31]          activations Q8_0
//   Q5_1: w = d * q + m,    q in [0, 31]          activations Q8_1
// Nibble order (all four): byte j holds element j (low nibble) and element j + 16 (high).
// Q5's fifth bits: bit j of qh (little-endian u32) belongs to element j.
//
// quantize_ref = ggml's quantize_row_*_ref (bit exact, tests/models/test_dequant_ref.cpp).
// dot_ref, per block b, with the exact int32 sum isum = sum(q_w * q_a) (offset removed for
// _0 types):
//   _0: s += float(isum) * (fp16(dw) * fp16(da))
//   _1: s += float(isum) * (fp16(dw) * fp16(da)) + fp16(mw) * fp16(sa)
// as ggml's x86 vec_dot (which keeps the m*s terms in a separate scalar sum and the rest in
// f32 lanes: only the f32 summation order differs).
#pragma once
#include <cstdint>

#include "quant/blocks.h"
#include "quant/format.h"
#include "quant/formats_q8.h"

namespace df::quant {

struct FormatQ4_0 {
  static constexpr GgmlType type = GgmlType::Q4_0;
  static constexpr int64_t block_elems = kQK4;
  using Block = BlockQ4_0;
  using Act = FormatQ8_0;
  static void dequantize_ref(const Block* src, float* dst, int64_t nb);
  static void quantize_ref(const float* src, Block* dst, int64_t nb);
  static float dot_ref(const Block* w, const Act::Block* a, int64_t nb);
};

struct FormatQ4_1 {
  static constexpr GgmlType type = GgmlType::Q4_1;
  static constexpr int64_t block_elems = kQK4;
  using Block = BlockQ4_1;
  using Act = FormatQ8_1;
  static void dequantize_ref(const Block* src, float* dst, int64_t nb);
  static void quantize_ref(const float* src, Block* dst, int64_t nb);
  static float dot_ref(const Block* w, const Act::Block* a, int64_t nb);
};

struct FormatQ5_0 {
  static constexpr GgmlType type = GgmlType::Q5_0;
  static constexpr int64_t block_elems = kQK4;
  using Block = BlockQ5_0;
  using Act = FormatQ8_0;
  static void dequantize_ref(const Block* src, float* dst, int64_t nb);
  static void quantize_ref(const float* src, Block* dst, int64_t nb);
  static float dot_ref(const Block* w, const Act::Block* a, int64_t nb);
};

struct FormatQ5_1 {
  static constexpr GgmlType type = GgmlType::Q5_1;
  static constexpr int64_t block_elems = kQK4;
  using Block = BlockQ5_1;
  using Act = FormatQ8_1;
  static void dequantize_ref(const Block* src, float* dst, int64_t nb);
  static void quantize_ref(const float* src, Block* dst, int64_t nb);
  static float dot_ref(const Block* w, const Act::Block* a, int64_t nb);
};

static_assert(WeightFormat<FormatQ4_0> && WeightFormat<FormatQ4_1> && WeightFormat<FormatQ5_0> &&
              WeightFormat<FormatQ5_1>);

// Unpacked quants of one block (element order), shared by the reference code and tests.
void unpack_q4(const uint8_t* qs, int8_t* q /*[32]*/);                        // [0, 15]
void unpack_q5(const uint8_t* qs, const uint8_t* qh, int8_t* q /*[32]*/);     // [0, 31]

}  // namespace df::quant
