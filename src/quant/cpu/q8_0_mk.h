// The Q8_0 microkernel (gemm_tiled.h interface) in AVX2 code, for the AVX2 and AVX-512
// translation units (kernels_avx2.cpp, kernels_avx512.cpp): as ggml's AVX2
// ggml_vec_dot_q8_0_q8_0, |w| (unsigned) times a with w's sign (vpsignb), vpmaddubsw +
// vpmaddwd into exact int32 lane sums (lane l: elements 4l .. 4l+3 of a block), converted
// and FMA'd with fp16(dw)*fp16(da) into f32 lanes. vpmaddubsw cannot saturate here:
// |w| <= 128, |a| <= 127 (quantize_act never produces -128), so a pair sum is at most
// 2*128*127 = 32512.
//
// The f32 order is fixed per output, whatever the tile (issue 15: a row computed in a tile
// of several gives the bits of the row alone): two 8-lane accumulators, the even blocks
// into the first and the odd ones into the second, then hsum_float_8(acc0 + acc1). Small
// tiles (decode: 1 x 1) interleave the two chains; large ones make one pass over the even
// blocks and one over the odd blocks, so that the tile needs no more registers than one
// accumulator per output.
//
// Templates over the translation unit's own Tag type (anonymous namespace there), so that
// every instantiation has internal linkage and the AVX-512 build of this code is never
// linked into AVX2 callers.
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "quant/blocks.h"
#include "quant/cpu/simd_avx2.h"

namespace df::cpu::q8 {

template <class Tag, int Rows, int Cols>
struct MkQ8_0 {
  static constexpr int kRows = Rows, kCols = Cols, kRowsDecode = 1;
  using Block = BlockQ8_0;

  static __m256i quants(const Block& b) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
  }
  static __m256 scale(const Block& b) { return _mm256_set1_ps(simd::fp16(b.d)); }

  // acc[r][c] += fp16(dw) * fp16(da) * (lane sums of w[r][b] . a[c][b])
  template <int R, int C>
  static void step(const Block* const* w, const Block* const* a, int64_t b, __m256 (&acc)[R][C]) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i wq[R], wabs[R];
    __m256 wd[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      wq[r] = quants(w[r][b]);
      wabs[r] = _mm256_sign_epi8(wq[r], wq[r]);
      wd[r] = scale(w[r][b]);
    }
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const __m256i aq = quants(a[c][b]);
      const __m256 ad = scale(a[c][b]);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m256i p16 = _mm256_maddubs_epi16(wabs[r], _mm256_sign_epi8(aq, wq[r]));
        const __m256i p32 = _mm256_madd_epi16(p16, ones);
        acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p32), _mm256_mul_ps(wd[r], ad), acc[r][c]);
      }
    }
  }

  template <int R, int C>
  static void tile(int64_t n, const uint8_t* const* wp, const uint8_t* const* ap, float* out) {
    const Block* w[R];
    const Block* a[C];
    for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const Block*>(wp[r]);
    for (int c = 0; c < C; ++c) a[c] = reinterpret_cast<const Block*>(ap[c]);
    __m256 acc[2][R][C];
#pragma GCC unroll 8
    for (int u = 0; u < 2; ++u)
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) acc[u][r][c] = _mm256_setzero_ps();
    const int64_t nb = n / kQK8_0;
    if constexpr (R * C <= 2) {
      int64_t b = 0;
      for (; b + 2 <= nb; b += 2) {
        step<R, C>(w, a, b, acc[0]);
        step<R, C>(w, a, b + 1, acc[1]);
      }
      if (b < nb) step<R, C>(w, a, b, acc[0]);
    } else {
      for (int64_t b = 0; b < nb; b += 2) step<R, C>(w, a, b, acc[0]);
      for (int64_t b = 1; b < nb; b += 2) step<R, C>(w, a, b, acc[1]);
    }
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) out[r * C + c] = simd::hsum(_mm256_add_ps(acc[0][r][c], acc[1][r][c]));
  }
};

}  // namespace df::cpu::q8
