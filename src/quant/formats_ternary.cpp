#include "quant/formats_ternary.h"

#include <cmath>

#include "quant/ggml_lanes.h"

namespace df::quant {
namespace {

constexpr uint8_t kPow3[6] = {1, 3, 9, 27, 81, 243};

// Trit n of a TQ1_0 byte: (byte * 3^n mod 256) * 3 / 256, in {0, 1, 2}.
int trit(uint8_t byte, int n) {
  const uint8_t q = static_cast<uint8_t>(byte * kPow3[n]);
  return (q * 3) >> 8;
}

// ggml's MAX(amax, fabsf(v)) = amax > v ? amax : v (a NaN input propagates).
float amax_of(const float* x, int n) {
  float amax = 0.0f;
  for (int j = 0; j < n; ++j) {
    const float v = std::fabs(x[j]);
    amax = amax > v ? amax : v;
  }
  return amax;
}

// ggml: lroundf(x * id) + 1 (ties away from zero); inputs are within [-1, 1] * amax.
int ternary_code(float x, float id) { return static_cast<int>(std::lround(x * id)) + 1; }

// 5 (or 4, then shifted up one trit) codes as one byte: ceil(v * 256 / 243).
uint8_t pack_trits(uint8_t v) { return static_cast<uint8_t>((uint16_t{v} * 256 + 242) / 243); }

}  // namespace

void tq1_0_values(const BlockTQ1_0& b, int8_t out[kQK_K]) {
  int k = 0;
  for (int n = 0; n < 5; ++n)
    for (int m = 0; m < 32; ++m) out[k++] = static_cast<int8_t>(trit(b.qs[m], n) - 1);
  for (int n = 0; n < 5; ++n)
    for (int m = 0; m < 16; ++m) out[k++] = static_cast<int8_t>(trit(b.qs[32 + m], n) - 1);
  for (int n = 0; n < 4; ++n)
    for (int j = 0; j < 4; ++j) out[k++] = static_cast<int8_t>(trit(b.qh[j], n) - 1);
}

void tq2_0_values(const BlockTQ2_0& b, int8_t out[kQK_K]) {
  for (int j = 0; j < 64; j += 32)
    for (int l = 0; l < 4; ++l)
      for (int m = 0; m < 32; ++m) out[4 * j + 32 * l + m] = static_cast<int8_t>(((b.qs[j + m] >> (2 * l)) & 3) - 1);
}

void FormatTQ1_0::dequantize_ref(const Block* src, float* dst, int64_t nb) {
  int8_t v[kQK_K];
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(src[i].d);
    tq1_0_values(src[i], v);
    for (int j = 0; j < kQK_K; ++j) dst[i * kQK_K + j] = static_cast<float>(v[j]) * d;
  }
}

void FormatTQ2_0::dequantize_ref(const Block* src, float* dst, int64_t nb) {
  int8_t v[kQK_K];
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(src[i].d);
    tq2_0_values(src[i], v);
    for (int j = 0; j < kQK_K; ++j) dst[i * kQK_K + j] = static_cast<float>(v[j]) * d;
  }
}

void FormatTQ1_0::quantize_ref(const float* x, Block* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    Block& y = dst[i];
    const float d = amax_of(x, kQK_K);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y.d = fp32_to_fp16(d);
    for (int m = 0; m < 32; ++m) {  // 160 elements, 5 per byte (stride 32)
      uint8_t q = 0;
      for (int n = 0; n < 5; ++n) q = static_cast<uint8_t>(q * 3 + ternary_code(x[m + 32 * n], id));
      y.qs[m] = pack_trits(q);
    }
    x += 160;
    for (int m = 0; m < 16; ++m) {  // 80 elements, 5 per byte (stride 16)
      uint8_t q = 0;
      for (int n = 0; n < 5; ++n) q = static_cast<uint8_t>(q * 3 + ternary_code(x[m + 16 * n], id));
      y.qs[32 + m] = pack_trits(q);
    }
    x += 80;
    for (int j = 0; j < 4; ++j) {  // 16 elements, 4 per byte (stride 4), top trit first
      uint8_t q = 0;
      for (int m = 0; m < 4; ++m) q = static_cast<uint8_t>(q * 3 + ternary_code(x[j + 4 * m], id));
      y.qh[j] = pack_trits(static_cast<uint8_t>(q * 3));
    }
    x += 16;
  }
}

void FormatTQ2_0::quantize_ref(const float* x, Block* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    Block& y = dst[i];
    const float d = amax_of(x, kQK_K);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y.d = fp32_to_fp16(d);
    for (int j = 0; j < 64; j += 32) {
      for (int m = 0; m < 32; ++m) {
        uint8_t q = 0;
        for (int n = 0; n < 4; ++n) q = static_cast<uint8_t>(q + ((ternary_code(x[m + 32 * n], id) & 3) << (2 * n)));
        y.qs[j + m] = q;
      }
      x += 128;
    }
  }
}

namespace {

// ggml's AVX2 order (ggml_lanes.h). ggml forms the block's integer sum in 16-bit lanes:
// lane m (elements 2m, 2m+1 of each 32-element group) accumulates q * a over all groups,
// minus the activation's bsums[m] (the sum of elements 16m .. 16m+15); pairs of those lanes
// become the 8 int32 lanes. So lane l = sum over groups of q * a at elements 4l .. 4l+3,
// minus bsums[2l] + bsums[2l+1]: the total is sum((q - 1) * a), the lanes differ from it.
// Then acc[l] = fma(float(isum[l]), da * dw, acc[l]).
template <class B>
float ternary_dot(const B* w, const BlockQ8_K* a, int64_t nb, void (*values)(const B&, int8_t*)) {
  detail::Lanes8 acc;
  int8_t v[kQK_K];
  for (int64_t i = 0; i < nb; ++i) {
    values(w[i], v);
    for (auto& x : v) x = static_cast<int8_t>(x + 1);  // the stored digit q
    int32_t isum[8];
    for (int l = 0; l < 8; ++l) isum[l] = -(a[i].bsums[2 * l] + a[i].bsums[2 * l + 1]);
    for (int g = 0; g < kQK_K / 32; ++g) detail::add_lanes(v + 32 * g, a[i].qs + 32 * g, 1, isum);
    acc.fma(a[i].d * fp16_to_fp32(w[i].d), isum);
  }
  return acc.hsum();
}

}  // namespace

float FormatTQ1_0::dot_ref(const Block* w, const Act::Block* a, int64_t nb) {
  return ternary_dot(w, a, nb, &tq1_0_values);
}

float FormatTQ2_0::dot_ref(const Block* w, const Act::Block* a, int64_t nb) {
  return ternary_dot(w, a, nb, &tq2_0_values);
}

}  // namespace df::quant
