// Scalar emulation of the f32 accumulation order of ggml's x86 vec_dot kernels (the AVX2
// code paths, which ggml's AVX-512 builds also compile), so that the reference dot products
// and every SIMD kernel produce the same bits as llama.cpp's CPU backend:
//   - an 8-lane f32 accumulator; lane l of a 32-element group holds the exact int32 sum of
//     elements 4l .. 4l+3 (vpmaddubsw + vpmaddwd or vpdpbusd);
//   - per block (or super-block), acc[l] = fma(scale, float(isum[l]), acc[l]), in block order;
//   - the final horizontal sum hsum_float_8: (a0+a4 + a2+a6) + (a1+a5 + a3+a7), in the
//     order of its extract/movehl/movehdup adds;
//   - extra scalar terms (Q4_1/Q5_1 m*s, Q5_K mins) accumulated with fma, as GCC contracts
//     them in ggml's build, and added last.
// Internal linkage on purpose (see format.h).
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
  // ggml's hsum_float_8
  float hsum() const {
    const float r0 = v[4] + v[0], r1 = v[5] + v[1], r2 = v[6] + v[2], r3 = v[7] + v[3];
    return (r0 + r2) + (r1 + r3);
  }
};

// isum[l] += sum of w[4l + i] * a[4l + i], i < 4, for one group of 32 elements.
static inline void add_lane_sums(const int8_t* w, const int8_t* a, int32_t* isum) {
  for (int l = 0; l < 8; ++l)
    for (int i = 0; i < 4; ++i) isum[l] += int32_t{w[4 * l + i]} * int32_t{a[4 * l + i]};
}

}  // namespace df::quant::detail
