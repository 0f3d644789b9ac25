// The K-quants: super-blocks of 256 elements with quantised sub-block scales (block
// layouts: ggml-common.h). All take Q8_K activations (ggml type_traits_cpu).
//   Q2_K: 16 sub-blocks of 16, 2-bit q, 4-bit scale and min:  w = d*sc*q - dmin*m
//   Q3_K: 16 sub-blocks of 16, 3-bit q (2 low bits + high-bit mask, q - 4 in [-4, 3]),
//         6-bit scales offset by 32:                         w = d*(sc - 32)*(q - 4)
//   Q4_K: 8 sub-blocks of 32, 4-bit q, 6-bit scale and min:   w = d*sc*q - dmin*m
//   Q5_K: as Q4_K with a fifth bit per element (qh)
//   Q6_K: 16 sub-blocks of 16, 6-bit q (4 low + 2 high bits), int8 scales:
//                                                            w = d*sc*(q - 32)
// Element order within a super-block (e = element index):
//   Q2_K / Q3_K: chunk c = e/128, j = (e%128)/32, l = e%32: 2 bits at qs[32c + l] >> 2j;
//                Q3_K's high bit: hmask[l] bit 4c + j (set = no -4 offset). Scale e/16.
//   Q4_K / Q5_K: chunk g = e/64: qs[32g + e%32], low nibble for e%64 < 32, else high;
//                Q5_K's fifth bit: qh[e%32] bit e/32. Scale/min e/32, packed 6-bit
//                (ggml's get_scale_min_k4).
//   Q6_K:        c = e/128, j = (e%128)/32, l = e%32: low 4 bits from ql[64c + 32(j%2) + l]
//                (low nibble for j < 2, high for j >= 2), high 2 bits qh[32c + l] >> 2j.
//                Scale e/16.
//
// quantize_ref = ggml's quantize_row_*_ref (no importance weights), bit exact.
// dot_ref, per super-block, with exact int32 sums isum = sum over sub-blocks of scale * sum(q*a)
// and msum = sum of min * (Q8_K bsums):
//   s += float(isum) * (da * fp16(d)) - float(msum) * (da * fp16(dmin))
// as ggml's x86 vec_dot (which splits isum/msum over int32 lanes before converting to f32:
// only the f32 rounding of partial sums and the summation order differ).
#pragma once
#include <cstdint>

#include "quant/blocks.h"
#include "quant/format.h"
#include "quant/formats_q8.h"

namespace df::quant {

// One super-block unpacked: quants in element order (offsets applied: Q3_K in [-4, 3],
// Q6_K in [-32, 31]), integer scale and min per sub-block (16 or 8 of them).
struct KUnpacked {
  int8_t q[kQK_K];
  int32_t scale[16];
  int32_t min[16];  // Q2_K / Q4_K / Q5_K only
};
void unpack(const BlockQ2_K& b, KUnpacked& u);
void unpack(const BlockQ3_K& b, KUnpacked& u);
void unpack(const BlockQ4_K& b, KUnpacked& u);
void unpack(const BlockQ5_K& b, KUnpacked& u);
void unpack(const BlockQ6_K& b, KUnpacked& u);
// Scale j and min j (j < 8) of the packed 6-bit Q4_K / Q5_K scales.
void scale_min_k4(const uint8_t* scales, int j, uint8_t& sc, uint8_t& m);

template <GgmlType T, class B>
struct FormatK {
  static constexpr GgmlType type = T;
  static constexpr int64_t block_elems = kQK_K;
  using Block = B;
  using Act = FormatQ8_K;
  static void dequantize_ref(const Block* src, float* dst, int64_t nb);
  static void quantize_ref(const float* src, Block* dst, int64_t nb);
  static float dot_ref(const Block* w, const Act::Block* a, int64_t nb);
};
// Explicitly instantiated in formats_kquant.cpp.
using FormatQ2_K = FormatK<GgmlType::Q2_K, BlockQ2_K>;
using FormatQ3_K = FormatK<GgmlType::Q3_K, BlockQ3_K>;
using FormatQ4_K = FormatK<GgmlType::Q4_K, BlockQ4_K>;
using FormatQ5_K = FormatK<GgmlType::Q5_K, BlockQ5_K>;
using FormatQ6_K = FormatK<GgmlType::Q6_K, BlockQ6_K>;
extern template struct FormatK<GgmlType::Q2_K, BlockQ2_K>;
extern template struct FormatK<GgmlType::Q3_K, BlockQ3_K>;
extern template struct FormatK<GgmlType::Q4_K, BlockQ4_K>;
extern template struct FormatK<GgmlType::Q5_K, BlockQ5_K>;
extern template struct FormatK<GgmlType::Q6_K, BlockQ6_K>;

static_assert(WeightFormat<FormatQ2_K> && WeightFormat<FormatQ3_K> && WeightFormat<FormatQ4_K> &&
              WeightFormat<FormatQ5_K> && WeightFormat<FormatQ6_K>);

}  // namespace df::quant
