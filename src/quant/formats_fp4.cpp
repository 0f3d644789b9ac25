#include "quant/formats_fp4.h"

#include <cmath>

#include "quant/ggml_lanes.h"
#include "quant/ggml_scalar.h"

namespace df::quant {
namespace {

// ggml's best_index_mxfp4: the first table entry nearest to x at scale e.
uint8_t best_index(float x, float e) {
  int best = 0;
  float best_err = std::fabs(static_cast<float>(kValuesFp4[0]) * e - x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(static_cast<float>(kValuesFp4[i]) * e - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return static_cast<uint8_t>(best);
}

// (uint8_t)(v) for a float as x86 code converts it (cvttss2si, low byte; 0 when out of range).
uint8_t trunc_low_byte(float v) {
  const bool fits = v > -2147483904.0f && v < 2147483648.0f;
  return fits ? static_cast<uint8_t>(static_cast<uint32_t>(static_cast<int32_t>(v))) : uint8_t{0};
}

}  // namespace

// ---- MXFP4 ----

void FormatMxfp4::dequantize_ref(const Block* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = detail::e8m0_to_fp32_half(src[b].e);
    for (int j = 0; j < kQKMxfp4 / 2; ++j) {
      dst[b * kQKMxfp4 + j] = static_cast<float>(kValuesFp4[src[b].qs[j] & 0x0f]) * d;
      dst[b * kQKMxfp4 + j + kQKMxfp4 / 2] = static_cast<float>(kValuesFp4[src[b].qs[j] >> 4]) * d;
    }
  }
}

void FormatMxfp4::quantize_ref(const float* src, Block* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float* x = src + b * kQKMxfp4;
    float amax = 0.0f;
    for (int j = 0; j < kQKMxfp4; ++j)
      if (amax < std::fabs(x[j])) amax = std::fabs(x[j]);
    const uint8_t e =
        amax > 0.0f ? trunc_low_byte(std::floor(std::log2(amax)) - 2.0f + 127.0f) : uint8_t{0};
    const float d = detail::e8m0_to_fp32_half(e);
    dst[b].e = e;
    for (int j = 0; j < kQKMxfp4 / 2; ++j)
      dst[b].qs[j] = static_cast<uint8_t>(best_index(x[j], d) | (best_index(x[j + kQKMxfp4 / 2], d) << 4));
  }
}

// ggml's AVX2 order: blocks in pairs, even blocks into one 8-lane accumulator and odd blocks
// into another, summed lane-wise before the horizontal sum; a last odd block is added as
// fma(dy * scale, float(isum), sum).
float FormatMxfp4::dot_ref(const Block* w, const Act::Block* a, int64_t nb) {
  detail::Lanes8 acc[2];
  auto lane_sums = [&](int64_t b, int32_t* isum) {
    int8_t q[kQKMxfp4];
    for (int j = 0; j < kQKMxfp4 / 2; ++j) {
      q[j] = kValuesFp4[w[b].qs[j] & 0x0f];
      q[j + kQKMxfp4 / 2] = kValuesFp4[w[b].qs[j] >> 4];
    }
    detail::add_lanes(q, a[b].qs, 1, isum);
  };
  auto scale = [&](int64_t b) { return fp16_to_fp32(a[b].d) * detail::e8m0_to_fp32_half(w[b].e); };
  int64_t b = 0;
  for (; b + 1 < nb; b += 2)
    for (int u = 0; u < 2; ++u) {
      int32_t isum[8] = {};
      lane_sums(b + u, isum);
      acc[u].fma(scale(b + u), isum);
    }
  detail::Lanes8 both;
  for (int l = 0; l < 8; ++l) both.v[l] = acc[0].v[l] + acc[1].v[l];
  float s = both.hsum();
  if (b < nb) {
    int32_t isum[8] = {};
    lane_sums(b, isum);
    int32_t t = 0;
    for (int32_t v : isum) t += v;
    s = std::fma(scale(b), static_cast<float>(t), s);
  }
  return s;
}

// ---- NVFP4 ----

void FormatNvfp4::dequantize_ref(const Block* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b)
    for (int s = 0; s < kQKNvfp4 / kQKNvfp4Sub; ++s) {
      const float d = detail::ue4m3_to_fp32_half(src[b].d[s]);
      float* y = dst + b * kQKNvfp4 + s * kQKNvfp4Sub;
      const uint8_t* q = src[b].qs + s * (kQKNvfp4Sub / 2);
      for (int j = 0; j < kQKNvfp4Sub / 2; ++j) {
        y[j] = static_cast<float>(kValuesFp4[q[j] & 0x0f]) * d;
        y[j + kQKNvfp4Sub / 2] = static_cast<float>(kValuesFp4[q[j] >> 4]) * d;
      }
    }
}

void FormatNvfp4::quantize_ref(const float* src, Block* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b)
    for (int s = 0; s < kQKNvfp4 / kQKNvfp4Sub; ++s) {
      const float* x = src + b * kQKNvfp4 + s * kQKNvfp4Sub;
      float amax = 0.0f;
      for (int j = 0; j < kQKNvfp4Sub; ++j)
        if (amax < std::fabs(x[j])) amax = std::fabs(x[j]);
      const uint8_t ue = detail::fp32_to_ue4m3(amax / 6.0f);
      dst[b].d[s] = ue;
      const float d = detail::ue4m3_to_fp32_half(ue);
      uint8_t* q = dst[b].qs + s * (kQKNvfp4Sub / 2);
      for (int j = 0; j < kQKNvfp4Sub / 2; ++j)
        q[j] = static_cast<uint8_t>(best_index(x[j], d) | (best_index(x[j + kQKNvfp4Sub / 2], d) << 4));
    }
}

// ggml's AVX2 order: one 8-lane accumulator; per block two fmas (Q8_0 blocks 2b and 2b+1),
// lanes 0-3 scaled by sub-block 2h, lanes 4-7 by 2h+1, scale = ue4m3(d) * dy.
float FormatNvfp4::dot_ref(const Block* w, const Act::Block* a, int64_t nb) {
  detail::Lanes8 acc;
  for (int64_t b = 0; b < nb; ++b)
    for (int h = 0; h < 2; ++h) {
      const BlockQ8_0& ab = a[2 * b + h];
      int8_t q[32];
      for (int s = 0; s < 2; ++s) {
        const uint8_t* qs = w[b].qs + (2 * h + s) * (kQKNvfp4Sub / 2);
        for (int j = 0; j < kQKNvfp4Sub / 2; ++j) {
          q[16 * s + j] = kValuesFp4[qs[j] & 0x0f];
          q[16 * s + j + kQKNvfp4Sub / 2] = kValuesFp4[qs[j] >> 4];
        }
      }
      int32_t isum[8] = {};
      detail::add_lanes(q, ab.qs, 1, isum);
      const float dy = fp16_to_fp32(ab.d);
      const float s0 = detail::ue4m3_to_fp32_half(w[b].d[2 * h]) * dy;
      const float s1 = detail::ue4m3_to_fp32_half(w[b].d[2 * h + 1]) * dy;
      const float scale[8] = {s0, s0, s0, s0, s1, s1, s1, s1};
      acc.fma(scale, isum);
    }
  return acc.hsum();
}

}  // namespace df::quant
