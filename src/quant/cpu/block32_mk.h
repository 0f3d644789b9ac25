// Fused dot/gemm microkernels for the 32-element block formats with Q8_0 / Q8_1 activations
// (Q4_0, Q4_1, Q5_0, Q5_1, MXFP4, NVFP4), in the f32 order of ggml's x86 vec_dot
// (src/quant/ggml_lanes.h), so that every ISA returns llama.cpp's bits:
//   per 32-element group g (one activation block) and per (weight row, activation row):
//     isum[8] = lane sums of 4 products each, exact int32 (weights as unsigned u = w + off,
//               minus off * lane sums of the activations)
//     acc     = fma(scale_w * scale_a, float(isum), acc)       (8 f32 lanes)
//   then hsum_float_8(acc) (+ the Q4_1/Q5_1 m*s terms, fma'd in a scalar).
// Weights are never expanded beyond one 32-element group in registers.
//
// Included only by ISA translation units (legacy_avx2.cpp, legacy_avx512.cpp). Everything is
// a template over the TU's own Ops type (anonymous namespace there), so every instantiation
// has internal linkage and code compiled for one ISA is never linked into another's callers.
// Ops provides:
//   static __m256i dot4(__m256i u, __m256i s)  // lane l = sum_i u[4l+i] * s[4l+i], u8 x s8
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "quant/cpu/simd_avx2.h"
#include "quant/formats_fp4.h"
#include "quant/formats_legacy.h"

namespace df::cpu::block32 {

inline constexpr int kGroup = 32;

// 16 packed nibbles -> 32 bytes: low nibbles (elements 0-15), then high (16-31).
template <class Ops>
__m256i nibbles(const uint8_t* qs) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(raw), _mm_srli_epi16(raw, 4), 1);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

// The fifth bits of Q5 blocks as 0x10 in each byte whose bit is set.
template <class Ops>
__m256i fifth_bits(const uint8_t* qh) {
  uint32_t bits;
  __builtin_memcpy(&bits, qh, 4);
  const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                         0x0101010101010101, 0x0000000000000000);
  __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), shuf);
  const __m256i bit = _mm256_set1_epi64x(0x8040201008040201);
  bytes = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
  return _mm256_and_si256(bytes, _mm256_set1_epi8(0x10));
}

// E2M1 nibbles -> unsigned bytes kvalues + 12 (offset 12).
template <class Ops>
__m256i fp4_values(__m256i nib) {
  const __m256i table = _mm256_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0,
                                         12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
  return _mm256_shuffle_epi8(table, nib);
}

// ---------------- weight policies ----------------
// quants(w, g): the 32 weights of group g as unsigned bytes (w + kOffset), element order.
// scale(w, g, da): per-lane f32 scale of group g times the activation scale vector da, in
//                  ggml's operand order (the product is rounded once, as ggml's).
// kMins: Q4_1 / Q5_1 add m * s per group. kPairs: MXFP4's two alternating accumulators.

template <class Ops>
struct PQ4_0 {
  using Block = df::BlockQ4_0;
  using ABlock = BlockQ8_0;
  static constexpr int kGroupsPerBlock = 1, kOffset = 8;
  static constexpr bool kMins = false, kPairs = false;
  static __m256i quants(const Block* w, int64_t g) { return nibbles<Ops>(w[g].qs); }
  static __m256 scale(const Block* w, int64_t g, __m256 da) {
    return _mm256_mul_ps(simd::fp16x8(w[g].d), da);
  }
};

template <class Ops>
struct PQ5_0 {
  using Block = df::BlockQ5_0;
  using ABlock = BlockQ8_0;
  static constexpr int kGroupsPerBlock = 1, kOffset = 16;
  static constexpr bool kMins = false, kPairs = false;
  static __m256i quants(const Block* w, int64_t g) {
    return _mm256_or_si256(nibbles<Ops>(w[g].qs), fifth_bits<Ops>(w[g].qh));
  }
  static __m256 scale(const Block* w, int64_t g, __m256 da) {
    return _mm256_mul_ps(simd::fp16x8(w[g].d), da);
  }
};

template <class Ops>
struct PQ4_1 {
  using Block = df::BlockQ4_1;
  using ABlock = df::BlockQ8_1;
  static constexpr int kGroupsPerBlock = 1, kOffset = 0;
  static constexpr bool kMins = true, kPairs = false;
  static __m256i quants(const Block* w, int64_t g) { return nibbles<Ops>(w[g].qs); }
  static __m256 scale(const Block* w, int64_t g, __m256 da) {
    return _mm256_mul_ps(simd::fp16x8(w[g].d), da);
  }
  static float min(const Block* w, int64_t g) { return simd::fp16(w[g].m); }
};

template <class Ops>
struct PQ5_1 {
  using Block = df::BlockQ5_1;
  using ABlock = df::BlockQ8_1;
  static constexpr int kGroupsPerBlock = 1, kOffset = 0;
  static constexpr bool kMins = true, kPairs = false;
  static __m256i quants(const Block* w, int64_t g) {
    return _mm256_or_si256(nibbles<Ops>(w[g].qs), fifth_bits<Ops>(w[g].qh));
  }
  static __m256 scale(const Block* w, int64_t g, __m256 da) {
    return _mm256_mul_ps(simd::fp16x8(w[g].d), da);
  }
  static float min(const Block* w, int64_t g) { return simd::fp16(w[g].m); }
};

template <class Ops>
struct PMxfp4 {
  using Block = df::BlockMxfp4;
  using ABlock = BlockQ8_0;
  static constexpr int kGroupsPerBlock = 1, kOffset = 12;
  static constexpr bool kMins = false, kPairs = true;
  static __m256i quants(const Block* w, int64_t g) { return fp4_values<Ops>(nibbles<Ops>(w[g].qs)); }
  static float scale_w(const Block* w, int64_t g) {
    const uint8_t e = w[g].e;
    const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
    float f;
    __builtin_memcpy(&f, &bits, 4);
    return f;
  }
  // ggml: dy * e8m0_half(e)
  static __m256 scale(const Block* w, int64_t g, __m256 da) {
    return _mm256_mul_ps(da, _mm256_set1_ps(scale_w(w, g)));
  }
};

// NVFP4: a 64-element block is two groups; group h of block b holds sub-blocks 2h, 2h+1
// (16 elements each: byte j of a sub-block holds elements j and j + 8).
template <class Ops>
struct PNvfp4 {
  using Block = df::BlockNvfp4;
  using ABlock = BlockQ8_0;
  static constexpr int kGroupsPerBlock = 2, kOffset = 12;
  static constexpr bool kMins = false, kPairs = false;
  static __m256i quants(const Block* w, int64_t g) {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[g / 2].qs + 16 * (g % 2)));
    const __m128i m = _mm_set1_epi8(0x0f);
    const __m128i lo = _mm_and_si128(raw, m), hi = _mm_and_si128(_mm_srli_epi16(raw, 4), m);
    // sub-block 0: lo bytes 0-7 then hi bytes 0-7; sub-block 1: lo 8-15 then hi 8-15
    const __m256i nib = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi64(lo, hi)),
                                                _mm_unpackhi_epi64(lo, hi), 1);
    return fp4_values<Ops>(nib);
  }
  // ue4m3 of the two sub-block scales, lanes 0-3 and 4-7, times dy (ggml: ue4m3(d) * dy)
  static __m256 scale(const Block* w, int64_t g, __m256 da) {
    const uint8_t* d = w[g / 2].d + 2 * (g % 2);
    return _mm256_mul_ps(_mm256_setr_ps(ue4m3(d[0]), ue4m3(d[0]), ue4m3(d[0]), ue4m3(d[0]), ue4m3(d[1]),
                                        ue4m3(d[1]), ue4m3(d[1]), ue4m3(d[1])),
                         da);
  }
  static float ue4m3(uint8_t x) {
    if (x == 0x7f) return 0.0f;
    const uint32_t v = x & 0x7fu;
    if (v < 8) return static_cast<float>(v) * 0x1p-10f;
    const uint32_t bits = (v << 20) + (119u << 23);
    float f;
    __builtin_memcpy(&f, &bits, 4);
    return f;
  }
};

// ---------------- the microkernel (gemm_tiled.h interface) ----------------

template <class Ops, template <class> class Policy, int Rows, int Cols, int RowsDecode>
struct Mk {
  using P = Policy<Ops>;
  using WB = typename P::Block;
  using AB = typename P::ABlock;
  static constexpr int kRows = Rows, kCols = Cols, kRowsDecode = RowsDecode;
  static constexpr bool kShapeFree = true;  // one f32 chain per output in every tile
  static constexpr int kAcc = P::kPairs ? 2 : 1;

  template <int R, int C>
  static void tile(int64_t n, const uint8_t* const* wp, const uint8_t* const* ap, float* out) {
    const WB* w[R];
    const AB* a[C];
    for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const WB*>(wp[r]);
    for (int c = 0; c < C; ++c) a[c] = reinterpret_cast<const AB*>(ap[c]);
    __m256 acc[kAcc][R][C];
    float summs[R][C];
    for (int p = 0; p < kAcc; ++p)
      for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) acc[p][r][c] = _mm256_setzero_ps();
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) summs[r][c] = 0.0f;
    const int64_t ng = n / kGroup;
    const int64_t ng_main = P::kPairs ? ng & ~int64_t{1} : ng;
    const __m256i off = _mm256_set1_epi8(static_cast<char>(P::kOffset));
    for (int64_t g = 0; g < ng_main; ++g) {
      const int p = P::kPairs ? static_cast<int>(g & 1) : 0;
      __m256i aq[C], corr[C];
      __m256 da[C];
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        aq[c] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[c][g].qs));
        if constexpr (P::kOffset != 0) corr[c] = Ops::dot4(off, aq[c]);
        da[c] = simd::fp16x8(a[c][g].d);
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m256i u = P::quants(w[r], g);
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) {
          __m256i isum = Ops::dot4(u, aq[c]);
          if constexpr (P::kOffset != 0) isum = _mm256_sub_epi32(isum, corr[c]);
          acc[p][r][c] = _mm256_fmadd_ps(P::scale(w[r], g, da[c]), _mm256_cvtepi32_ps(isum), acc[p][r][c]);
          if constexpr (P::kMins)
            summs[r][c] = __builtin_fmaf(P::min(w[r], g), simd::fp16(a[c][g].s), summs[r][c]);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) {
        const __m256 v = kAcc == 2 ? _mm256_add_ps(acc[0][r][c], acc[kAcc - 1][r][c]) : acc[0][r][c];
        float s = simd::hsum(v);
        if constexpr (P::kMins) s += summs[r][c];
        if constexpr (P::kPairs) {
          if (ng_main < ng) {  // MXFP4's last odd block: scalar fma of the whole block sum
            const int64_t g = ng_main;
            __m256i isum = _mm256_sub_epi32(Ops::dot4(P::quants(w[r], g), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[c][g].qs))),
                                            Ops::dot4(off, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[c][g].qs))));
            __m128i t = _mm_add_epi32(_mm256_castsi256_si128(isum), _mm256_extracti128_si256(isum, 1));
            t = _mm_add_epi32(t, _mm_unpackhi_epi64(t, t));
            t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 1));
            const float scale = simd::fp16(a[c][g].d) * P::scale_w(w[r], g);
            s = __builtin_fmaf(scale, static_cast<float>(_mm_cvtsi128_si32(t)), s);
          }
        }
        out[r * C + c] = s;
      }
  }
};

}  // namespace df::cpu::block32
