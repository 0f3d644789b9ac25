#include "quant/formats_q1q2.h"

#include <cmath>
#include <cstring>

#include "quant/ggml_lanes.h"

namespace df::quant {

void FormatQ1_0::dequantize_ref(const Block* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(src[i].d);
    const float neg_d = -d;
    for (int j = 0; j < kQK1_0; ++j) dst[i * kQK1_0 + j] = (src[i].qs[j / 8] >> (j % 8)) & 1 ? d : neg_d;
  }
}

void FormatQ1_0::quantize_ref(const float* x, Block* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK1_0) {
    float sum_abs = 0.0f;
    for (int j = 0; j < kQK1_0; ++j) sum_abs += std::fabs(x[j]);
    dst[i].d = fp32_to_fp16(sum_abs / kQK1_0);
    std::memset(dst[i].qs, 0, sizeof dst[i].qs);
    for (int j = 0; j < kQK1_0; ++j)
      if (x[j] >= 0.0f) dst[i].qs[j / 8] = static_cast<uint8_t>(dst[i].qs[j / 8] | (1u << (j % 8)));
  }
}

// ggml's AVX2 order (ggml_lanes.h): per weight block, lanes d(a_0) * isum_0, then
// fma(d(a_k), isum_k, .) for the other Q8_0 blocks k, then fma(dw, block, acc).
float FormatQ1_0::dot_ref(const Block* w, const Act::Block* a, int64_t nb) {
  detail::Lanes8 acc;
  for (int64_t i = 0; i < nb; ++i) {
    detail::Lanes8 block;
    for (int k = 0; k < 4; ++k) {
      const BlockQ8_0& ab = a[4 * i + k];
      int8_t sgn[32];
      for (int j = 0; j < 32; ++j) {
        const int e = 32 * k + j;
        sgn[j] = (w[i].qs[e / 8] >> (e % 8)) & 1 ? 1 : -1;
      }
      int32_t isum[8] = {};
      detail::add_lanes(sgn, ab.qs, 1, isum);
      if (k == 0)
        block.mul(fp16_to_fp32(ab.d), isum);
      else
        block.fma(fp16_to_fp32(ab.d), isum);
    }
    acc.fma(fp16_to_fp32(w[i].d), block);
  }
  return acc.hsum();
}

void FormatQ2_0::dequantize_ref(const Block* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(src[i].d);
    for (int j = 0; j < kQK2_0; ++j) {
      const int q = (src[i].qs[j / 4] >> (2 * (j % 4))) & 3;
      dst[i * kQK2_0 + j] = static_cast<float>(q - 1) * d;
    }
  }
}

void FormatQ2_0::quantize_ref(const float* x, Block* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK2_0) {
    float amax = 0.0f;
    for (int j = 0; j < kQK2_0; ++j) {
      const float v = std::fabs(x[j]);
      if (v > amax) amax = v;
    }
    const float id = amax > 0.0f ? 1.0f / amax : 0.0f;
    dst[i].d = fp32_to_fp16(amax);
    std::memset(dst[i].qs, 0, sizeof dst[i].qs);
    for (int j = 0; j < kQK2_0; ++j) {
      int q = static_cast<int>(std::round(x[j] * id)) + 1;  // ties away from zero, as roundf
      q = q < 0 ? 0 : q > 3 ? 3 : q;
      dst[i].qs[j / 4] = static_cast<uint8_t>(dst[i].qs[j / 4] | (q << (2 * (j % 4))));
    }
  }
}

// ggml's generic code (x86 has no SIMD Q2_0 vec_dot), scalar, with GCC's contractions:
// per weight block sumi = fma(d(a_k), isum_k, sumi) over its two Q8_0 blocks, then
// sum = fma(dw, sumi, sum).
float FormatQ2_0::dot_ref(const Block* w, const Act::Block* a, int64_t nb) {
  float sum = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    float block = 0.0f;
    for (int k = 0; k < 2; ++k) {
      const BlockQ8_0& ab = a[2 * i + k];
      int32_t isum = 0;
      for (int j = 0; j < 32; ++j) {
        const int e = 32 * k + j;
        isum += (((w[i].qs[e / 4] >> (2 * (e % 4))) & 3) - 1) * ab.qs[j];
      }
      block = std::fma(fp16_to_fp32(ab.d), static_cast<float>(isum), block);
    }
    sum = std::fma(fp16_to_fp32(w[i].d), block, sum);
  }
  return sum;
}

}  // namespace df::quant
