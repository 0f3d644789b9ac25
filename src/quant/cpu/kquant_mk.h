// Fused dot/gemm microkernels for the K-quants (Q2_K .. Q6_K) with Q8_K activations, in the
// f32 order of ggml's x86 vec_dot (src/quant/ggml_lanes.h and formats_kquant.cpp's
// dot_ref), so that every ISA returns llama.cpp's bits. Per super-block and per (weight row,
// activation row):
//   sumi[8] = exact int32 lane sums: lane l holds the elements e with (e % 32) / 4 == l,
//             each product times its sub-block scale (u8 x s8 pair products, then int16 x
//             int16 with the scale: vpmaddubsw + vpmaddwd / vpdpwssd)
//   acc     = fma(da * dw, float(sumi), acc)  (+ the format's min terms, see dot_ref)
// Weights are unpacked 32 elements at a time in registers, never to memory.
//
// Included only by kquant_avx2.cpp / kquant_avx512.cpp; templates over the TU's own Ops type
// (internal linkage, see block32_mk.h). Ops provides
//   static __m256i acc_scaled(__m256i acc, __m256i u, __m256i a, __m256i s16)
//     // acc + per lane l: sum_i u[4l+i] * a[4l+i] * s16 (u8 x s8 products, u <= 63)
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "quant/cpu/simd_avx2.h"
#include "quant/formats_kquant.h"

namespace df::cpu::kquant {

using df::BlockQ2_K;
using df::BlockQ3_K;
using df::BlockQ4_K;
using df::BlockQ5_K;
using df::BlockQ6_K;

// Scale vectors. A super-block's scales are kept as 16 bytes in both 128-bit halves of a
// ymm; s16 for group v (elements 32v .. 32v+31) is one vpshufb away:
//   16-element sub-blocks (Q2_K, Q3_K, Q6_K): int16 sc[2v] in the low half, sc[2v+1] high
//   32-element sub-blocks (Q4_K, Q5_K):       int16 sc[v] everywhere
// Signed scales are shuffled into both bytes of each int16 and shifted right arithmetically.
template <class Ops>
inline __m256i bytes_both_halves(__m128i b) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(b), b, 1);
}

template <class Ops, bool Pairs, bool Signed>
inline __m256i scale16(__m256i scale_bytes, int v) {
  const int lo = Pairs ? 2 * v : v, hi = Pairs ? 2 * v + 1 : v;
  const char top_lo = Signed ? static_cast<char>(lo) : static_cast<char>(0x80);
  const char top_hi = Signed ? static_cast<char>(hi) : static_cast<char>(0x80);
  const __m256i idx = _mm256_setr_epi8(
      static_cast<char>(lo), top_lo, static_cast<char>(lo), top_lo, static_cast<char>(lo), top_lo,
      static_cast<char>(lo), top_lo, static_cast<char>(lo), top_lo, static_cast<char>(lo), top_lo,
      static_cast<char>(lo), top_lo, static_cast<char>(lo), top_lo, static_cast<char>(hi), top_hi,
      static_cast<char>(hi), top_hi, static_cast<char>(hi), top_hi, static_cast<char>(hi), top_hi,
      static_cast<char>(hi), top_hi, static_cast<char>(hi), top_hi, static_cast<char>(hi), top_hi,
      static_cast<char>(hi), top_hi);
  const __m256i s = _mm256_shuffle_epi8(scale_bytes, idx);
  return Signed ? _mm256_srai_epi16(s, 8) : s;
}

template <class Ops>
inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// The packed 6-bit scales and mins of Q4_K / Q5_K as bytes: sc[0..7] in bytes 0-7 and
// m[0..7] in 8-15 (ggml's kmask shuffle; same values as quant::scale_min_k4).
template <class Ops>
inline __m128i scales_mins_k4(const uint8_t* packed) {
  uint32_t u[4];
  std::memcpy(u, packed, 12);
  const uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
  u[3] = ((u[2] >> 4) & kmask2) | (((u[1] >> 6) & kmask3) << 4);
  const uint32_t uaux = u[1] & kmask1;
  u[1] = (u[2] & kmask2) | (((u[0] >> 6) & kmask3) << 4);
  u[2] = uaux;
  u[0] &= kmask1;
  return _mm_setr_epi32(static_cast<int>(u[0]), static_cast<int>(u[1]), static_cast<int>(u[2]),
                        static_cast<int>(u[3]));
}

// Per-format policies. Scales(b) decodes one super-block's scales; quants(b, v) gives the 32
// weights of group v as unsigned bytes u; s16(v) the int16 scale vector of group v. Where u
// is offset (Q3_K: u = q + 4), kOffset says so and the kernel subtracts
// offset * scale * (activation lane sums).

template <class Ops>
struct PQ2_K {
  using Block = BlockQ2_K;
  static constexpr int kOffset = 0;
  struct Scales {
    __m256i bytes;
    Scales() = default;
    explicit Scales(const Block& b)
        : bytes(bytes_both_halves<Ops>(
              _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)), _mm_set1_epi8(0x0f)))) {}
    __m256i s16(int v) const { return scale16<Ops, true, false>(bytes, v); }
  };
  static __m256i quants(const Block& b, int v) {
    const __m256i bits = load256<Ops>(b.qs + 32 * (v / 4));
    return _mm256_and_si256(_mm256_srli_epi16(bits, 2 * (v % 4)), _mm256_set1_epi8(3));
  }
};

template <class Ops>
struct PQ3_K {
  using Block = BlockQ3_K;
  static constexpr int kOffset = 4;
  struct Scales {
    __m256i bytes;  // the 16 6-bit scales minus 32, as int8
    Scales() = default;
    explicit Scales(const Block& b) {
      uint32_t a[3];
      std::memcpy(a, b.scales, 12);
      const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
      const __m128i s = _mm_setr_epi32(static_cast<int>((a[0] & kmask2) | (((a[2] >> 0) & kmask1) << 4)),
                                       static_cast<int>((a[1] & kmask2) | (((a[2] >> 2) & kmask1) << 4)),
                                       static_cast<int>(((a[0] >> 4) & kmask2) | (((a[2] >> 4) & kmask1) << 4)),
                                       static_cast<int>(((a[1] >> 4) & kmask2) | (((a[2] >> 6) & kmask1) << 4)));
      bytes = bytes_both_halves<Ops>(_mm_sub_epi8(s, _mm_set1_epi8(32)));
    }
    __m256i s16(int v) const { return scale16<Ops, true, true>(bytes, v); }
  };
  // q + 4 = low 2 bits | (high bit << 2); the high bit of element l of group v is hmask[l] bit v
  static __m256i quants(const Block& b, int v) {
    const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(load256<Ops>(b.qs + 32 * (v / 4)), 2 * (v % 4)),
                                        _mm256_set1_epi8(3));
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(load256<Ops>(b.hmask), v), _mm256_set1_epi8(1));
    return _mm256_or_si256(lo, _mm256_slli_epi16(hi, 2));
  }
};

template <class Ops>
struct PQ4_K {
  using Block = BlockQ4_K;
  static constexpr int kOffset = 0;
  struct Scales {  // also Q5_K's (same 12-byte packing)
    __m128i sm;    // sc[0..7], m[0..7]
    __m256i bytes;
    Scales() = default;
    explicit Scales(const uint8_t* packed) : sm(scales_mins_k4<Ops>(packed)), bytes(bytes_both_halves<Ops>(sm)) {}
    explicit Scales(const Block& b) : Scales(b.scales) {}
    explicit Scales(const BlockQ5_K& b) : Scales(b.scales) {}
    __m256i s16(int v) const { return scale16<Ops, false, false>(bytes, v); }
    __m128i mins16() const { return _mm_cvtepu8_epi16(_mm_unpackhi_epi64(sm, sm)); }
  };
  static __m256i quants(const Block& b, int v) {
    const __m256i bits = load256<Ops>(b.qs + 32 * (v / 2));
    return _mm256_and_si256(v % 2 ? _mm256_srli_epi16(bits, 4) : bits, _mm256_set1_epi8(0x0f));
  }
};

template <class Ops>
struct PQ5_K {
  using Block = BlockQ5_K;
  static constexpr int kOffset = 0;
  using Scales = typename PQ4_K<Ops>::Scales;
  static __m256i quants(const Block& b, int v) {
    const __m256i bits = load256<Ops>(b.qs + 32 * (v / 2));
    const __m256i lo = _mm256_and_si256(v % 2 ? _mm256_srli_epi16(bits, 4) : bits, _mm256_set1_epi8(0x0f));
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(load256<Ops>(b.qh), v), _mm256_set1_epi8(1));
    return _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
  }
};

template <class Ops>
struct PQ6_K {
  using Block = BlockQ6_K;
  static constexpr int kOffset = 0;  // u = q + 32; the 32 is removed through the bsums
  struct Scales {
    __m256i bytes;
    Scales() = default;
    explicit Scales(const Block& b)
        : bytes(bytes_both_halves<Ops>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)))) {}
    __m256i s16(int v) const { return scale16<Ops, true, true>(bytes, v); }
  };
  static __m256i quants(const Block& b, int v) {
    const int c = v / 4, j = v % 4;
    const __m256i l4 = load256<Ops>(b.ql + 64 * c + 32 * (j % 2));
    const __m256i lo = _mm256_and_si256(j < 2 ? l4 : _mm256_srli_epi16(l4, 4), _mm256_set1_epi8(0x0f));
    const __m256i h = _mm256_and_si256(_mm256_srli_epi16(load256<Ops>(b.qh + 32 * c), 2 * j), _mm256_set1_epi8(3));
    return _mm256_or_si256(lo, _mm256_slli_epi16(h, 4));
  }
};

template <class Ops, template <class> class Policy, int Rows, int Cols, int RowsDecode>
struct Mk {
  using P = Policy<Ops>;
  using WB = typename P::Block;
  using AB = df::BlockQ8_K;
  static constexpr int kRows = Rows, kCols = Cols, kRowsDecode = RowsDecode;
  // one f32 chain per output in every tile (the U integer chains add exactly)
  static constexpr bool kShapeFree = true;
  static constexpr bool kQ2 = std::is_same_v<WB, BlockQ2_K>, kQ4 = std::is_same_v<WB, BlockQ4_K>,
                        kQ5 = std::is_same_v<WB, BlockQ5_K>, kQ6 = std::is_same_v<WB, BlockQ6_K>;

  // One super-block's f32 step of an output: weight block wb, activation block ab, their
  // exact scaled lane sums si (with the unpacked scales sc of wb).
  static void step(const WB& wb, const AB& ab, const typename P::Scales& sc, __m256i si, __m256& acc,
                   __m128& acc_m, float& summs) {
    const float dw = simd::fp16(wb.d);
    const float d = ab.d * dw;
    const __m256i bsums = load256<Ops>(ab.bsums);
    if constexpr (kQ2) {
      const float dmin = -ab.d * simd::fp16(wb.dmin);
      const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(
          _mm_srli_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.scales)), 4), _mm_set1_epi8(0x0f)));
      acc = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(_mm256_madd_epi16(mins, bsums)), acc);
    }
    if constexpr (kQ6) {
      const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.scales)));
      si = _mm256_sub_epi32(si, _mm256_slli_epi32(_mm256_madd_epi16(bsums, sc16), 5));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(si), acc);
    if constexpr (kQ4 || kQ5) {
      const float dmin = -ab.d * simd::fp16(wb.dmin);
      // bsum pairs per 32-element sub-block: hadd(bsums[0..7], bsums[8..15])
      const __m128i q8s = _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
      const __m128i prod = _mm_madd_epi16(sc.mins16(), q8s);
      if constexpr (kQ4) {
        acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(prod), acc_m);
      } else {
        __m128i t = _mm_add_epi32(prod, _mm_unpackhi_epi64(prod, prod));
        t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 1));
        summs = __builtin_fmaf(dmin, static_cast<float>(_mm_cvtsi128_si32(t)), summs);
      }
    }
  }
  // The output after the last super-block.
  static float finish(__m256 acc, __m128 acc_m, float summs) {
    float s = simd::hsum(acc);
    if constexpr (kQ4) {
      __m128 m = _mm_add_ps(acc_m, _mm_movehl_ps(acc_m, acc_m));
      m = _mm_add_ss(m, _mm_movehdup_ps(m));
      s += _mm_cvtss_f32(m);
    }
    if constexpr (kQ5) s += summs;
    return s;
  }

  // Decode tiles (one or two outputs: a GEMV over planar rows, the rows of a tile following one
  // another in memory) prefetch the weight stream this many bytes ahead of the super-block they
  // read, into L1 and, further, into L2 (as the repacked Q4_0 / Q4_K kernels do): a lone core
  // streaming a matrix keeps more lines in flight than its hardware prefetchers do. Prefetches
  // change no value; past a matrix's end they are dropped hints.
  static constexpr int64_t kPrefetchL1 = 2048, kPrefetchL2 = 8192;

  template <int R, int C>
  static void tile(int64_t n, const uint8_t* const* wp, const uint8_t* const* ap, float* out) {
    // independent integer chains per output: 2 when the tile is small (vec_dot, decode)
    constexpr int U = R * C >= 4 ? 1 : 2;
    constexpr bool kPrefetch = R * C <= 2;
    const WB* w[R];
    const AB* a[C];
    for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const WB*>(wp[r]);
    for (int c = 0; c < C; ++c) a[c] = reinterpret_cast<const AB*>(ap[c]);
    __m256 acc[R][C];
    __m128 acc_m[R][C];  // Q4_K's 4-lane min accumulator
    float summs[R][C];   // Q5_K's scalar min accumulator
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) {
        acc[r][c] = _mm256_setzero_ps();
        acc_m[r][c] = _mm_setzero_ps();
        summs[r][c] = 0.0f;
      }
    const __m256i offset = _mm256_set1_epi8(static_cast<char>(P::kOffset));
    const int64_t nb = n / df::kQK_K;
    for (int64_t b = 0; b < nb; ++b) {
      __m256i sumi[U][R][C];
#pragma GCC unroll 2
      for (int k = 0; k < U; ++k)
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
          for (int c = 0; c < C; ++c) sumi[k][r][c] = _mm256_setzero_si256();
      if constexpr (kPrefetch) {
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const char* p = reinterpret_cast<const char*>(&w[r][b]);
#pragma GCC unroll 4
          for (int l = 0; l < static_cast<int>(sizeof(WB)); l += 64) {
            _mm_prefetch(p + kPrefetchL1 + l, _MM_HINT_T0);
            _mm_prefetch(p + kPrefetchL2 + l, _MM_HINT_T1);
          }
        }
      }
      typename P::Scales scales[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) scales[r] = typename P::Scales(w[r][b]);
#pragma GCC unroll 8
      for (int v = 0; v < 8; ++v) {
        __m256i av[C];
#pragma GCC unroll 4
        for (int c = 0; c < C; ++c) av[c] = load256<Ops>(a[c][b].qs + 32 * v);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const __m256i u = P::quants(w[r][b], v);
          const __m256i s16 = scales[r].s16(v);
#pragma GCC unroll 4
          for (int c = 0; c < C; ++c) {
            __m256i& acc_i = sumi[v % U][r][c];
            acc_i = Ops::acc_scaled(acc_i, u, av[c], s16);
            if constexpr (P::kOffset != 0)
              acc_i = Ops::acc_scaled(acc_i, offset, av[c], _mm256_sub_epi16(_mm256_setzero_si256(), s16));
          }
        }
      }
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int c = 0; c < C; ++c) {
          __m256i si = sumi[0][r][c];
          if constexpr (U == 2) si = _mm256_add_epi32(si, sumi[U - 1][r][c]);
          step(w[r][b], a[c][b], scales[r], si, acc[r][c], acc_m[r][c], summs[r][c]);
        }
    }
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) out[r * C + c] = finish(acc[r][c], acc_m[r][c], summs[r][c]);
  }
};

}  // namespace df::cpu::kquant
