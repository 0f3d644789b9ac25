// AVX-512 GEMM for the K-quants without an offset (Q2_K, Q4_K, Q5_K, Q6_K; registered for
// Q4_K and Q5_K, where it measured faster: kquant_avx512.cpp) with Q8_K
// activations (prompt prefill, 4+ activation rows). Included only by kquant_avx512.cpp;
// templates over its Ops type, so every instantiation has internal linkage.
//
// Numerics: every output follows kquant::Mk's order exactly (ggml's vec_dot): the same exact
// int32 lane sums per super-block (Ops::acc_scaled over the 8 groups; integer adds in any
// order are exact) and the same f32 step per super-block (Mk::step), then Mk::finish. So a
// row's bits equal the one-row kernel's for any number of rows.
//
// Per call (per thread scratch, never shrunk): a tile of kRows weight rows is unpacked once
// per super-block and group into WGroup{unsigned quants, int16 scale vector} (64 bytes), and
// the rows' scales into P::Scales, then swept over all tokens in tiles of kCols; the
// activations are read in place (Q8_K rows). Tile: kRows x kCols ymm int32 accumulators,
// per (row, token, group) one vpmaddubsw and one vpdpwssd.
#pragma once
#include <immintrin.h>

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "quant/cpu/kquant_mk.h"

namespace df::cpu::kquantv {

constexpr int kRows = 4, kCols = 4;

struct alignas(64) WGroup {  // one weight row's group (32 elements) of a super-block
  __m256i u;                 // unsigned quants
  __m256i s16;               // int16 scale vector (Policy::Scales::s16)
};

template <class Ops, template <class> class Policy>
struct Gemm {
  using MK = kquant::Mk<Ops, Policy, 1, 1, 1>;
  using P = typename MK::P;
  using WB = typename MK::WB;
  using AB = typename MK::AB;
  using Scales = typename P::Scales;
  static_assert(P::kOffset == 0, "Q3_K's offset term is not in this kernel");

  // One weight row's super-block, unpacked for the f32 step (Mk::step's operands).
  struct alignas(32) RowBlock {
    __m256i sc16;     // Q6_K: int16 scales; Q2_K: int16 mins
    __m128i mins16;   // Q4_K, Q5_K: int16 mins
    float dw, ndmin;  // fp16(d), -fp16(dmin)
  };
  // One activation row's super-block: its scale and Q4_K/Q5_K's bsum pairs.
  struct alignas(16) ActBlock {
    __m128i q8s;
    float d;
  };
  static constexpr bool kMinPairs = MK::kQ4 || MK::kQ5;

  static RowBlock row_block(const WB& wb) {
    RowBlock rb{};
    rb.dw = simd::fp16(wb.d);
    if constexpr (MK::kQ6)
      rb.sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.scales)));
    if constexpr (MK::kQ2) {
      rb.ndmin = -simd::fp16(wb.dmin);
      rb.sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(
          _mm_srli_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.scales)), 4), _mm_set1_epi8(0x0f)));
    }
    if constexpr (kMinPairs) {
      rb.ndmin = -simd::fp16(wb.dmin);
      rb.mins16 = Scales(wb).mins16();
    }
    return rb;
  }

  // Mk::step with its scale products taken from sd = ab.d * dw and sm = ab.d * -dmin (the
  // same products: x * -y == -(x * y), and -x * y == x * -y, exactly).
  static void step(const RowBlock& rb, const AB& ab, const ActBlock& aq, const float& sd, const float& sm,
                   __m256i si, __m256& acc, __m128& acc_m, float& summs) {
    if constexpr (MK::kQ2)
      acc = _mm256_fmadd_ps(_mm256_set1_ps(sm), _mm256_cvtepi32_ps(_mm256_madd_epi16(rb.sc16, kquant::load256<Ops>(ab.bsums))),
                            acc);
    if constexpr (MK::kQ6)
      si = _mm256_sub_epi32(si, _mm256_slli_epi32(_mm256_madd_epi16(kquant::load256<Ops>(ab.bsums), rb.sc16), 5));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(sd), _mm256_cvtepi32_ps(si), acc);
    if constexpr (kMinPairs) {
      const __m128i prod = _mm_madd_epi16(rb.mins16, aq.q8s);
      if constexpr (MK::kQ4) {
        acc_m = _mm_fmadd_ps(_mm_set1_ps(sm), _mm_cvtepi32_ps(prod), acc_m);
      } else {
        __m128i t = _mm_add_epi32(prod, _mm_unpackhi_epi64(prod, prod));
        t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 1));
        summs = __builtin_fmaf(sm, static_cast<float>(_mm_cvtsi128_si32(t)), summs);
      }
    }
  }

  // out[r * C + c] = dot(weight row r, token c); wg[(b * 8 + v) * kRows + r], rb[b * kRows + r],
  // aq[c][b] (stride nb), sd / sm[(b * kRows + r) * 4 + c]
  template <int R, int C>
  static void tile(int64_t nb, const WGroup* wg, const RowBlock* rb, const ActBlock* aq, const float* sd,
                   const float* sm, const AB* const* a, float* out) {
    __m256 acc[R][C];
    __m128 acc_m[R][C];
    float summs[R][C];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) {
        acc[r][c] = _mm256_setzero_ps();
        acc_m[r][c] = _mm_setzero_ps();
        summs[r][c] = 0.0f;
      }
    for (int64_t b = 0; b < nb; ++b) {
      __m256i sumi[R][C];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int c = 0; c < C; ++c) sumi[r][c] = _mm256_setzero_si256();
      const WGroup* wb = wg + b * 8 * kRows;
#pragma GCC unroll 8
      for (int v = 0; v < 8; ++v) {
        __m256i u[R], s[R];
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          u[r] = wb[v * kRows + r].u;
          s[r] = wb[v * kRows + r].s16;
        }
#pragma GCC unroll 4
        for (int c = 0; c < C; ++c) {
          const __m256i av = kquant::load256<Ops>(a[c][b].qs + 32 * v);
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r) sumi[r][c] = Ops::acc_scaled(sumi[r][c], u[r], av, s[r]);
        }
      }
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int c = 0; c < C; ++c)
          step(rb[b * kRows + r], a[c][b], aq[c * nb + b], sd[(b * kRows + r) * 4 + c], sm[(b * kRows + r) * 4 + c],
               sumi[r][c], acc[r][c], acc_m[r][c], summs[r][c]);
    }
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) out[r * C + c] = MK::finish(acc[r][c], acc_m[r][c], summs[r][c]);
  }

  using TileFn = void (*)(int64_t, const WGroup*, const RowBlock*, const ActBlock*, const float*, const float*,
                          const AB* const*, float*);
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
    std::vector<WGroup> wg;    // [super-block][group][row]
    std::vector<RowBlock> rb;  // [super-block][row]
    std::vector<ActBlock> aq;  // [token][super-block]
    std::vector<float> sd, sm; // [super-block][row][4]
  };
  template <class T>
  static T* grow(std::vector<T>& v, int64_t n) {
    if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
    return v.data();
  }

  // Kernels::gemm's contract.
  static void run(int64_t n, const uint8_t* W, size_t w_stride, int64_t i0, int64_t i1, const uint8_t* act,
                  size_t act_stride, int64_t n_act, float* Y, int64_t ldy) {
    static_assert(kCols == 4);
    thread_local Scratch scr;
    const int64_t nb = n / df::kQK_K;
    WGroup* wg = grow(scr.wg, nb * 8 * kRows);
    RowBlock* rb = grow(scr.rb, nb * kRows);
    ActBlock* aq = grow(scr.aq, n_act * nb);
    float* sd = grow(scr.sd, nb * kRows * 4);
    float* sm = grow(scr.sm, nb * kRows * 4);
    auto act_row = [&](int64_t c) { return reinterpret_cast<const AB*>(act + static_cast<size_t>(c) * act_stride); };
    for (int64_t c = 0; c < n_act; ++c)
      for (int64_t b = 0; b < nb; ++b) {
        const AB& ab = act_row(c)[b];
        aq[c * nb + b].d = ab.d;
        if constexpr (kMinPairs) {
          const __m256i bsums = kquant::load256<Ops>(ab.bsums);
          aq[c * nb + b].q8s = _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
        }
      }
    for (int64_t i = i0; i < i1; i += kRows) {
      const int R = static_cast<int>(i1 - i < kRows ? i1 - i : kRows);
      for (int r = 0; r < R; ++r) {
        const WB* w = reinterpret_cast<const WB*>(W + static_cast<size_t>(i + r) * w_stride);
        for (int64_t b = 0; b < nb; ++b) {
          const Scales s(w[b]);
          rb[b * kRows + r] = row_block(w[b]);
          for (int v = 0; v < 8; ++v) {
            WGroup& g = wg[(b * 8 + v) * kRows + r];
            g.u = P::quants(w[b], v);
            g.s16 = s.s16(v);
          }
        }
      }
      for (int64_t c0 = 0; c0 < n_act; c0 += kCols) {
        const int C = static_cast<int>(n_act - c0 < kCols ? n_act - c0 : kCols);
        const AB* a[kCols];
        float adv[4] = {0, 0, 0, 0};
        for (int c = 0; c < C; ++c) a[c] = act_row(c0 + c);
        for (int64_t b = 0; b < nb; ++b) {
          for (int c = 0; c < C; ++c) adv[c] = a[c][b].d;
          const __m128 d4 = _mm_loadu_ps(adv);
          for (int r = 0; r < R; ++r) {
            _mm_storeu_ps(sd + (b * kRows + r) * 4, _mm_mul_ps(d4, _mm_set1_ps(rb[b * kRows + r].dw)));
            _mm_storeu_ps(sm + (b * kRows + r) * 4, _mm_mul_ps(d4, _mm_set1_ps(rb[b * kRows + r].ndmin)));
          }
        }
        float out[kRows * kCols];
        kTiles[R - 1][C - 1](nb, wg, rb, aq + c0 * nb, sd, sm, a, out);
        for (int c = 0; c < C; ++c)
          for (int r = 0; r < R; ++r) Y[(c0 + c) * ldy + i + r] = out[r * C + c];
      }
    }
  }
};

}  // namespace df::cpu::kquantv
