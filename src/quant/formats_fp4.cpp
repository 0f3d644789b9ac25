#include "quant/formats_fp4.h"

#include <cmath>

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

float FormatMxfp4::dot_ref(const Block* w, const Act::Block* a, int64_t nb) {
  float s = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    int32_t isum = 0;
    for (int j = 0; j < kQKMxfp4 / 2; ++j) {
      isum += int32_t{kValuesFp4[w[b].qs[j] & 0x0f]} * a[b].qs[j];
      isum += int32_t{kValuesFp4[w[b].qs[j] >> 4]} * a[b].qs[j + kQKMxfp4 / 2];
    }
    s += static_cast<float>(isum) * (fp16_to_fp32(a[b].d) * detail::e8m0_to_fp32_half(w[b].e));
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

float FormatNvfp4::dot_ref(const Block* w, const Act::Block* a, int64_t nb) {
  float sum = 0.0f;
  for (int64_t b = 0; b < nb; ++b)
    for (int s = 0; s < kQKNvfp4 / kQKNvfp4Sub; ++s) {
      const BlockQ8_0& ab = a[2 * b + s / 2];
      const int8_t* qa = ab.qs + (s % 2) * kQKNvfp4Sub;
      const uint8_t* q = w[b].qs + s * (kQKNvfp4Sub / 2);
      int32_t isum = 0;
      for (int j = 0; j < kQKNvfp4Sub / 2; ++j) {
        isum += int32_t{kValuesFp4[q[j] & 0x0f]} * qa[j];
        isum += int32_t{kValuesFp4[q[j] >> 4]} * qa[j + kQKNvfp4Sub / 2];
      }
      sum += static_cast<float>(isum) *
             (fp16_to_fp32(ab.d) * detail::ue4m3_to_fp32_half(w[b].d[s]));
    }
  return sum;
}

}  // namespace df::quant
