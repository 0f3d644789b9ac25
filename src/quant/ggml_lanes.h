// Scalar emulation of the f32 accumulation order of ggml's x86 vec_dot kernels (the AVX2
// code paths, which ggml's AVX-512 builds also compile), so that the reference dot products
// (dot_ref) and every SIMD kernel tested against them produce the same bits as llama.cpp's
// CPU backend:
//   - an 8-lane f32 accumulator; lane l of a 32-element group holds the exact int32 sum of
//     elements 4l .. 4l+3 (vpmaddubsw + vpmaddwd or vpdpbusd), times an integer sub-block
//     scale where the format has one;
//   - per block (or super-block), acc[l] = fma(scale, float(isum[l]), acc[l]) in block
//     order (GCC contracts ggml's mul + add), or acc[l] = scale * float(isum[l]) for a
//     block's first term (vmulps);
//   - the final horizontal sum hsum_float_8: (a0+a4 + a2+a6) + (a1+a5 + a3+a7), in the
//     order of its extract/movehl/movehdup adds;
//   - extra scalar terms (Q4_1/Q5_1 m*s, Q5_K mins) accumulated with fma, as GCC contracts
//     them in ggml's build, and added last.
// This is ggml's order, not plain mathematics: the plain reference is quant/dot_math.h.
// Internal linkage on purpose (see format.h): included by baseline translation units only.
#pragma once
#include <cmath>
#include <cstdint>

namespace df::quant::detail {

struct Lanes8 {
  float v[8] = {0, 0, 0, 0, 0, 0, 0, 0};

  // v[l] = fma(scale, float(isum[l]), v[l])
  void fma(float scale, const int32_t* isum) {
    for (int l = 0; l < 8; ++l) v[l] = std::fma(scale, static_cast<float>(isum[l]), v[l]);
  }
  // per-lane scales (NVFP4: 4 lanes per 16-element sub-block)
  void fma(const float* scale, const int32_t* isum) {
    for (int l = 0; l < 8; ++l) v[l] = std::fma(scale[l], static_cast<float>(isum[l]), v[l]);
  }
  // v[l] = fma(scale, x[l], v[l])
  void fma(float scale, const Lanes8& x) {
    for (int l = 0; l < 8; ++l) v[l] = std::fma(scale, x.v[l], v[l]);
  }
  // v[l] = scale * float(isum[l]) (a block's first term, vmulps)
  void mul(float scale, const int32_t* isum) {
    for (int l = 0; l < 8; ++l) v[l] = scale * static_cast<float>(isum[l]);
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

}  // namespace df::quant::detail
