// AVX-512 VNNI GEMM for the 32-element block formats whose group scale is one number per
// (weight row, group): Q4_0 and Q5_0 weights with Q8_0 activations (prompt prefill, 4+
// activation rows; Q8_0 weights: q8_lanes_vnni512.h). Included only by legacy_avx512.cpp; templates over its policies
// (block32_mk.h), so every instantiation has internal linkage.
//
// Numerics: every output follows block32::Mk's order exactly (ggml's vec_dot):
//   per group g:  isum[8] = exact int32 lane sums (vpdpbusd of the unsigned weights u with
//                           the activation quants, starting from -offset * lane sums)
//                 acc[8]  = fma(float(isum), S, acc)      S = scale_w * scale_a
//   then hsum_float_8(acc).
// S is exact in f32 (a product of two fp16 values, or of a power of two and an fp16), so
// computing it once per (row, token, group) ahead of the tile changes no bit.
//
// Layout per call (per thread scratch, never shrunk):
//   activations: AGroup[token][group] {quants, -offset * lane sums} and their scales by
//                tiles of kCols tokens, ad[tile][group][8];
//   weights:     per tile of kRows rows, u[group][row] (the 32 unsigned quants) and the
//                scalar scales wd[group][row], unpacked once and swept over all tokens;
//   S:           per (row tile, token tile), s[group][row][8] = wd * ad, then read by the
//                tile as an embedded broadcast ({1to8}), so the fma needs no multiply.
// Tile: kRows weight rows x kCols tokens of 8-lane ymm accumulators: per (row, token,
// group) one vpdpbusd, one vcvtdq2ps and one vfmadd with a broadcast memory operand.
#pragma once
#include <immintrin.h>

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "quant/blocks.h"
#include "quant/cpu/block32_mk.h"
#include "quant/cpu/simd_avx2.h"

namespace df::cpu::block32v {

constexpr int kRows = 4, kCols = 6;

struct alignas(64) AGroup {  // one token's group
  __m256i q;                 // activation quants (signed)
  __m256i nc;                // -offset * lane sums of q
};
struct alignas(32) F8 {      // 8 floats
  float v[8];
};
struct alignas(32) WGroup {  // one weight row's group
  __m256i u;                 // unsigned quants
};

template <class P>
struct Gemm {
  // out[r * C + c] = dot(weight row r, token c), r < R, c < C
  template <int R, int C>
  static void tile(int64_t ng, const WGroup* wu, const float* s, const AGroup* a, float* out) {
    __m256 acc[R][C];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
    for (int64_t g = 0; g < ng; ++g) {
      __m256i u[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) u[r] = wu[g * kRows + r].u;
      const float* sg = s + g * kRows * 8;
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        const AGroup& ag = a[c * ng + g];
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const __m256i isum = _mm256_dpbusd_epi32(ag.nc, u[r], ag.q);
          acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(sg[r * 8 + c]), acc[r][c]);
        }
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) out[r * C + c] = simd::hsum(acc[r][c]);
  }

  using TileFn = void (*)(int64_t, const WGroup*, const float*, const AGroup*, float*);
  template <int... Rs, int... Cs>
  static constexpr std::array<std::array<TileFn, kCols>, kRows> make_table(std::integer_sequence<int, Rs...>,
                                                                           std::integer_sequence<int, Cs...>) {
    std::array<std::array<TileFn, kCols>, kRows> t{};
    auto row = [&]<int R>(std::integral_constant<int, R>) { ((t[R][Cs] = &tile<R + 1, Cs + 1>), ...); };
    (row(std::integral_constant<int, Rs>{}), ...);
    return t;
  }
  static constexpr auto kTiles =
      make_table(std::make_integer_sequence<int, kRows>{}, std::make_integer_sequence<int, kCols>{});

  struct Scratch {
    std::vector<AGroup> act;   // [token][group]
    std::vector<float> ad;     // [token tile][group][8]
    std::vector<WGroup> wu;    // [group][row]
    std::vector<float> wd;     // [group][row]
    std::vector<F8> s;         // [group][row]
  };

  template <class T>
  static T* grow(std::vector<T>& v, int64_t n) {
    if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
    return v.data();
  }

  // Kernels::gemm's contract, n_act >= 1.
  static void run(int64_t n, const uint8_t* W, size_t w_stride, int64_t i0, int64_t i1, const uint8_t* act,
                  size_t act_stride, int64_t n_act, float* Y, int64_t ldy) {
    thread_local Scratch sc;
    const int64_t ng = n / block32::kGroup, n_tiles = (n_act + kCols - 1) / kCols;
    AGroup* ap = grow(sc.act, n_act * ng);
    float* ad = grow(sc.ad, n_tiles * ng * 8);
    WGroup* wu = grow(sc.wu, ng * kRows);
    float* wd = grow(sc.wd, ng * kRows);
    float* s = reinterpret_cast<float*>(grow(sc.s, ng * kRows));
    const __m256i off = _mm256_set1_epi8(static_cast<char>(P::kOffset));
    for (int64_t c = 0; c < n_act; ++c) {
      const auto* a = reinterpret_cast<const BlockQ8_0*>(act + static_cast<size_t>(c) * act_stride);
      float* adc = ad + (c / kCols) * ng * 8 + c % kCols;
      for (int64_t g = 0; g < ng; ++g) {
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[g].qs));
        ap[c * ng + g].q = q;
        ap[c * ng + g].nc = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_dpbusd_epi32(_mm256_setzero_si256(), off, q));
        adc[g * 8] = simd::fp16(a[g].d);
      }
    }
    for (int64_t i = i0; i < i1; i += kRows) {
      const int R = static_cast<int>(i1 - i < kRows ? i1 - i : kRows);
      for (int r = 0; r < kRows; ++r) {
        if (r >= R) {  // rows past R: scale 0, so that S is computed for a full tile (never read)
          for (int64_t g = 0; g < ng; ++g) wd[g * kRows + r] = 0.0f;
          continue;
        }
        const auto* w = reinterpret_cast<const typename P::Block*>(W + static_cast<size_t>(i + r) * w_stride);
        for (int64_t g = 0; g < ng; ++g) {
          wu[g * kRows + r].u = P::quants(w, g);
          wd[g * kRows + r] = _mm256_cvtss_f32(P::scale(w, g, _mm256_set1_ps(1.0f)));
        }
      }
      for (int64_t t = 0; t < n_tiles; ++t) {
        const int64_t c0 = t * kCols;
        const int C = static_cast<int>(n_act - c0 < kCols ? n_act - c0 : kCols);
        for (int64_t g = 0; g < ng; ++g) {
          const __m256 dv = _mm256_loadu_ps(ad + (t * ng + g) * 8);
#pragma GCC unroll 4
          for (int r = 0; r < kRows; ++r)
            _mm256_store_ps(s + (g * kRows + r) * 8, _mm256_mul_ps(_mm256_set1_ps(wd[g * kRows + r]), dv));
        }
        float out[kRows * kCols];
        kTiles[R - 1][C - 1](ng, wu, s, ap + c0 * ng, out);
        for (int c = 0; c < C; ++c)
          for (int r = 0; r < R; ++r) Y[(c0 + c) * ldy + i + r] = out[r * C + c];
      }
    }
  }
};

}  // namespace df::cpu::block32v
