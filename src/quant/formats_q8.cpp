#include "quant/formats_q8.h"

#include <cmath>
#include <cstring>

#include "quant/ggml_scalar.h"

namespace df::quant {
namespace {

// The scaled value v = x * id is in [-127, 127] except when amax is so small (< ~3.7e-37)
// that id overflows to inf (then v is inf or NaN, and d rounds to fp16 zero anyway). Those
// cases follow what x86 code does, without C++ undefined behaviour:
//   ref: ggml's (int8_t)roundf(v) compiles to cvttss2si, whose out-of-range result
//        0x80000000 truncates to 0;
//   act: cvtps2dq gives 0x80000000, which the saturating packs turn into -128.
bool fits_int32(float r) { return r >= -2147483648.0f && r < 2147483648.0f; }

int8_t q8_round_ref(float v) {
  const float r = std::round(v);  // ties away from zero
  return fits_int32(r) ? static_cast<int8_t>(static_cast<uint32_t>(static_cast<int32_t>(r)))
                       : int8_t{0};
}

int8_t q8_round_act(float v) {
  const float r = std::nearbyint(v);  // ties to even (default rounding mode), as cvtps2dq
  if (!fits_int32(r)) return -128;
  return static_cast<int8_t>(r < -128.0f ? -128.0f : r > 127.0f ? 127.0f : r);
}

}  // namespace

void FormatQ8_0::dequantize_ref(const Block* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = fp16_to_fp32(src[b].d);
    for (int j = 0; j < kQK8_0; ++j) dst[b * kQK8_0 + j] = static_cast<float>(src[b].qs[j]) * d;
  }
}

void FormatQ8_0::quantize_ref(const float* src, Block* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float* x = src + b * kQK8_0;
    float amax = 0.0f;
    for (int j = 0; j < kQK8_0; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK8_0; ++j)
      dst[b].qs[j] = q8_round_ref(x[j] * id);
  }
}

void FormatQ8_0::quantize_act(const float* src, Block* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float* x = src + b * kQK8_0;
    float amax = 0.0f;
    for (int j = 0; j < kQK8_0; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    dst[b].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK8_0; ++j) dst[b].qs[j] = q8_round_act(x[j] * id);
  }
}

float FormatQ8_0::dot_ref(const Block* w, const Act::Block* a, int64_t nb) {
  float s = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    int32_t isum = 0;
    for (int j = 0; j < kQK8_0; ++j) isum += int32_t{w[b].qs[j]} * int32_t{a[b].qs[j]};
    s += static_cast<float>(isum) * (fp16_to_fp32(w[b].d) * fp16_to_fp32(a[b].d));
  }
  return s;
}

// ---- Q8_1 ----

void FormatQ8_1::dequantize_ref(const Block* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = fp16_to_fp32(src[b].d);
    for (int j = 0; j < kQK8_1; ++j) dst[b * kQK8_1 + j] = static_cast<float>(src[b].qs[j]) * d;
  }
}

void FormatQ8_1::quantize_ref(const float* src, Block* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float* x = src + b * kQK8_1;
    float amax = 0.0f;
    for (int j = 0; j < kQK8_1; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = fp32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < kQK8_1; ++j) {
      dst[b].qs[j] = detail::round_to_int8_ref(x[j] * id);
      sum += dst[b].qs[j];
    }
    dst[b].s = fp32_to_fp16(static_cast<float>(sum) * d);
  }
}

void FormatQ8_1::quantize_act(const float* src, Block* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float* x = src + b * kQK8_1;
    float amax = 0.0f;
    for (int j = 0; j < kQK8_1; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    dst[b].d = fp32_to_fp16(d);
    uint32_t sum = 0;  // int32 lanes added with wrap-around, as vpaddd
    for (int j = 0; j < kQK8_1; ++j) {
      const int32_t q = detail::cvtps_epi32(std::nearbyint(x[j] * id));
      sum += static_cast<uint32_t>(q);
      dst[b].qs[j] = detail::sat_int8(q);
    }
    dst[b].s = fp32_to_fp16(d * static_cast<float>(static_cast<int32_t>(sum)));
  }
}

// ---- Q8_K ----

void FormatQ8_K::dequantize_ref(const Block* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b)
    for (int j = 0; j < kQK_K; ++j) dst[b * kQK_K + j] = src[b].d * static_cast<float>(src[b].qs[j]);
}

void FormatQ8_K::quantize_ref(const float* src, Block* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float* x = src + b * kQK_K;
    float max = 0.0f, amax = 0.0f;
    for (int j = 0; j < kQK_K; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    Block& y = dst[b];
    if (amax == 0.0f) {
      std::memset(&y, 0, sizeof(y));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQK_K; ++j) {
      const int v = detail::nearest_int(iscale * x[j]);
      y.qs[j] = static_cast<int8_t>(v < 127 ? v : 127);
    }
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += y.qs[16 * g + j];
      y.bsums[g] = static_cast<int16_t>(sum);
    }
    y.d = 1.0f / iscale;
  }
}

void FormatQ8_K::quantize_act(const float* src, Block* dst, int64_t nb) { quantize_ref(src, dst, nb); }

}  // namespace df::quant
