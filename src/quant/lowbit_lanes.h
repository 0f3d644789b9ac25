// The f32 accumulation order of ggml's x86 vec_dot kernels (their AVX2 code, which the
// AVX-512 builds compile too), emulated in scalar code so that the reference dot products of
// the IQ / TQ / Q1_0 / Q2_0 formats, and the SIMD kernels tested against them, give the same
// bits as llama.cpp's CPU backend:
//   - 8 f32 lanes; lane l of a 32-element group holds the exact int32 sum over its
//     elements 4l .. 4l+3 (vpmaddubsw + vpmaddwd);
//   - per block acc[l] = fma(d, float(isum[l]), acc[l]) (GCC contracts ggml's mul + add);
//   - the horizontal sum of hsum_float_8: (a0+a4 + a2+a6) + (a1+a5 + a3+a7).
// Internal linkage on purpose (see format.h): included by baseline translation units only.
#pragma once
#include <cmath>
#include <cstdint>

namespace df::quant::lowbit {

struct Lanes8 {
  float v[8] = {0, 0, 0, 0, 0, 0, 0, 0};

  // v[l] = fma(d, float(isum[l]), v[l])
  void fma(float d, const int32_t* isum) {
    for (int l = 0; l < 8; ++l) v[l] = std::fma(d, static_cast<float>(isum[l]), v[l]);
  }
  // v[l] = d[l] * float(isum[l]) (a block's first term, vmulps)
  void mul(float d, const int32_t* isum) {
    for (int l = 0; l < 8; ++l) v[l] = d * static_cast<float>(isum[l]);
  }
  void fma(float d, const Lanes8& x) {
    for (int l = 0; l < 8; ++l) v[l] = std::fma(d, x.v[l], v[l]);
  }
  void add(const Lanes8& x) {
    for (int l = 0; l < 8; ++l) v[l] += x.v[l];
  }
  // ggml's hsum_float_8
  float hsum() const {
    const float r0 = v[4] + v[0], r1 = v[5] + v[1], r2 = v[6] + v[2], r3 = v[7] + v[3];
    return (r0 + r2) + (r1 + r3);
  }
};

// isum[l] += scale * (sum of w[4l + t] * a[4l + t], t < 4) for one group of 32 elements.
static inline void add_lanes(const int8_t* w, const int8_t* a, int32_t scale, int32_t* isum) {
  for (int l = 0; l < 8; ++l) {
    int32_t s = 0;
    for (int t = 0; t < 4; ++t) s += int32_t{w[4 * l + t]} * int32_t{a[4 * l + t]};
    isum[l] += scale * s;
  }
}

}  // namespace df::quant::lowbit
