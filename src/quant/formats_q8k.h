// Q8_K: the activation format of the K-quants, IQ and TQ formats (ggml's block_q8_K): blocks
// of 256 int8 quants with an f32 scale and the sums of each 16 quants (used by formats with
// an offset or delta term: TQ1_0, TQ2_0, IQ1_S, ...).
//
// quantize_ref = quantize_act = ggml's quantize_row_q8_K_ref, which is also what ggml-cpu's
// from_float runs on x86 (arch/x86/quants.c calls the reference):
//   max = the element of largest |x| (first one on ties); iscale = -127/max;
//   q = nearest_int(iscale * x) (round to nearest even via the 1.5*2^23 trick), at most 127;
//   d = 1/iscale; bsums[j] = sum of q[16j .. 16j+16).
//   All-zero block: d = 0, q = 0 and ggml leaves bsums unwritten; we write zeros.
// Never produces -128: |iscale * x| <= 127 (up to rounding of the product to 127).
#pragma once
#include <cstdint>

#include "quant/format.h"

namespace df {

constexpr int kQK_K = 256;  // elements of a K-quant super-block

struct BlockQ8_K {
  float d;                     // scale
  int8_t qs[kQK_K];            // quants
  int16_t bsums[kQK_K / 16];   // sums of 16 quants
};
static_assert(sizeof(BlockQ8_K) == 292);

}  // namespace df

namespace df::quant {

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
