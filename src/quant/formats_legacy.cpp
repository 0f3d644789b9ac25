#include "quant/formats_legacy.h"

#include <cfloat>
#include <cmath>
#include <cstring>

#include "quant/ggml_lanes.h"

namespace df::quant {
namespace {

// (int8_t)(v) / (uint8_t)(v) of a float in ggml's reference quantisers as compiled for
// x86: cvttss2si (truncation; 0x80000000 when out of range or NaN), low byte kept.
uint8_t trunc_low_byte(float v) {
  const bool fits = v > -2147483904.0f && v < 2147483648.0f;  // NaN fails both
  return fits ? static_cast<uint8_t>(static_cast<uint32_t>(static_cast<int32_t>(v))) : uint8_t{0};
}

// MIN(hi, (int8_t)v) as ggml writes it, returned as the stored unsigned quant.
uint8_t trunc_min(float v, int hi) {
  const int q = static_cast<int8_t>(trunc_low_byte(v));
  return static_cast<uint8_t>(q < hi ? q : hi);
}

// amax-signed max (first element of largest magnitude), as the _0 quantisers pick it.
float signed_absmax(const float* x) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kQK4; ++j)
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  return max;
}

void min_max(const float* x, float& min, float& max) {
  min = FLT_MAX;
  max = -FLT_MAX;
  for (int j = 0; j < kQK4; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
}

uint32_t load_qh(const uint8_t* qh) {
  uint32_t v;
  std::memcpy(&v, qh, 4);
  return v;
}

// dot of 32-element blocks in ggml's lane order: acc = fma(dw * da, lane sums, acc) per
// block; with Mins, summs = fma(mw, sa, summs) per block, added after the horizontal sum.
template <bool Mins, class B, class A, class Unpack>
float dot_lanes(const B* w, const A* a, int64_t nb, Unpack unpack) {
  detail::Lanes8 acc;
  float summs = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    int8_t q[kQK4];
    unpack(w[b], q);
    int32_t isum[8] = {};
    detail::add_lanes(q, a[b].qs, 1, isum);
    acc.fma(fp16_to_fp32(w[b].d) * fp16_to_fp32(a[b].d), isum);
    if constexpr (Mins) summs = std::fma(fp16_to_fp32(w[b].m), fp16_to_fp32(a[b].s), summs);
  }
  return Mins ? acc.hsum() + summs : acc.hsum();
}

}  // namespace

void unpack_q4(const uint8_t* qs, int8_t* q) {
  for (int j = 0; j < kQK4 / 2; ++j) {
    q[j] = static_cast<int8_t>(qs[j] & 0x0f);
    q[j + kQK4 / 2] = static_cast<int8_t>(qs[j] >> 4);
  }
}

void unpack_q5(const uint8_t* qs, const uint8_t* qh, int8_t* q) {
  const uint32_t h = load_qh(qh);
  unpack_q4(qs, q);
  for (int j = 0; j < kQK4; ++j) q[j] = static_cast<int8_t>(q[j] | (((h >> j) & 1u) << 4));
}

// ---- Q4_0 ----

void FormatQ4_0::dequantize_ref(const Block* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = fp16_to_fp32(src[b].d);
    int8_t q[kQK4];
    unpack_q4(src[b].qs, q);
    for (int j = 0; j < kQK4; ++j) dst[b * kQK4 + j] = static_cast<float>(q[j] - 8) * d;
  }
}

void FormatQ4_0::quantize_ref(const float* src, Block* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float* x = src + b * kQK4;
    const float d = signed_absmax(x) / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK4 / 2; ++j) {
      const uint8_t q0 = trunc_min(x[j] * id + 8.5f, 15);
      const uint8_t q1 = trunc_min(x[j + kQK4 / 2] * id + 8.5f, 15);
      dst[b].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

float FormatQ4_0::dot_ref(const Block* w, const Act::Block* a, int64_t nb) {
  return dot_lanes<false>(w, a, nb, [](const Block& b, int8_t* q) {
    unpack_q4(b.qs, q);
    for (int j = 0; j < kQK4; ++j) q[j] = static_cast<int8_t>(q[j] - 8);
  });
}

// ---- Q4_1 ----

void FormatQ4_1::dequantize_ref(const Block* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = fp16_to_fp32(src[b].d), m = fp16_to_fp32(src[b].m);
    int8_t q[kQK4];
    unpack_q4(src[b].qs, q);
    for (int j = 0; j < kQK4; ++j) dst[b * kQK4 + j] = static_cast<float>(q[j]) * d + m;
  }
}

void FormatQ4_1::quantize_ref(const float* src, Block* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float* x = src + b * kQK4;
    float min, max;
    min_max(x, min, max);
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = fp32_to_fp16(d);
    dst[b].m = fp32_to_fp16(min);
    for (int j = 0; j < kQK4 / 2; ++j) {
      const uint8_t q0 = trunc_min((x[j] - min) * id + 0.5f, 15);
      const uint8_t q1 = trunc_min((x[j + kQK4 / 2] - min) * id + 0.5f, 15);
      dst[b].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

float FormatQ4_1::dot_ref(const Block* w, const Act::Block* a, int64_t nb) {
  return dot_lanes<true>(w, a, nb, [](const Block& b, int8_t* q) { unpack_q4(b.qs, q); });
}

// ---- Q5_0 ----

void FormatQ5_0::dequantize_ref(const Block* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = fp16_to_fp32(src[b].d);
    int8_t q[kQK4];
    unpack_q5(src[b].qs, src[b].qh, q);
    for (int j = 0; j < kQK4; ++j) dst[b * kQK4 + j] = static_cast<float>(q[j] - 16) * d;
  }
}

void FormatQ5_0::quantize_ref(const float* src, Block* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float* x = src + b * kQK4;
    const float d = signed_absmax(x) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = fp32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < kQK4 / 2; ++j) {
      const uint8_t q0 = trunc_min(x[j] * id + 16.5f, 31);
      const uint8_t q1 = trunc_min(x[j + kQK4 / 2] * id + 16.5f, 31);
      dst[b].qs[j] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= static_cast<uint32_t>((q0 >> 4) & 1u) << j;
      qh |= static_cast<uint32_t>((q1 >> 4) & 1u) << (j + kQK4 / 2);
    }
    std::memcpy(dst[b].qh, &qh, 4);
  }
}

float FormatQ5_0::dot_ref(const Block* w, const Act::Block* a, int64_t nb) {
  return dot_lanes<false>(w, a, nb, [](const Block& b, int8_t* q) {
    unpack_q5(b.qs, b.qh, q);
    for (int j = 0; j < kQK4; ++j) q[j] = static_cast<int8_t>(q[j] - 16);
  });
}

// ---- Q5_1 ----

void FormatQ5_1::dequantize_ref(const Block* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float d = fp16_to_fp32(src[b].d), m = fp16_to_fp32(src[b].m);
    int8_t q[kQK4];
    unpack_q5(src[b].qs, src[b].qh, q);
    for (int j = 0; j < kQK4; ++j) dst[b * kQK4 + j] = static_cast<float>(q[j]) * d + m;
  }
}

void FormatQ5_1::quantize_ref(const float* src, Block* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float* x = src + b * kQK4;
    float min, max;
    min_max(x, min, max);
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = fp32_to_fp16(d);
    dst[b].m = fp32_to_fp16(min);
    uint32_t qh = 0;
    for (int j = 0; j < kQK4 / 2; ++j) {
      // (uint8_t)(v + 0.5f) in ggml: no clamp
      const uint8_t q0 = trunc_low_byte((x[j] - min) * id + 0.5f);
      const uint8_t q1 = trunc_low_byte((x[j + kQK4 / 2] - min) * id + 0.5f);
      dst[b].qs[j] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= static_cast<uint32_t>((q0 >> 4) & 1u) << j;
      qh |= static_cast<uint32_t>((q1 >> 4) & 1u) << (j + kQK4 / 2);
    }
    std::memcpy(dst[b].qh, &qh, 4);
  }
}

float FormatQ5_1::dot_ref(const Block* w, const Act::Block* a, int64_t nb) {
  return dot_lanes<true>(w, a, nb, [](const Block& b, int8_t* q) { unpack_q5(b.qs, b.qh, q); });
}

}  // namespace df::quant
