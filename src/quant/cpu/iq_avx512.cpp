// AVX-512 kernels (F, BW, VL, DQ, VNNI + BMI2) for the IQ, ternary and 1-2 bit formats.
// Called only after best_isa() has checked the CPU (kernels.cpp).
//
// Numerics: the same exact int32 block sums as the scalar reference and ggml's AVX2
// vec_dot, 64 elements per instruction: weights decoded to unsigned magnitudes plus a
// 64-bit sign mask that negates the activation bytes (vpsubb under mask), vpmaddubsw +
// vpmaddwd with the sub-block scales (grid formats) or vpdpbusd (formats without
// sub-block scales); block sums scaled by the block's f32 scale into 16 f32 lanes. Only the
// order of f32 additions differs from the reference.
//
// Grid entries are fetched with vpgatherqq / vpgatherdd; sign codes with parity bits are
// expanded in a 64-bit register (pdep + a parity fold) straight into the sign mask.
#include <immintrin.h>

#include <cstring>

// GCC 12's AVX-512 intrinsics trip -Wuninitialized through _mm512_undefined_* (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "quant/cpu/gemm_tiled.h"
#include "quant/cpu/kernels_isa.h"
#include "quant/formats.h"
#include "quant/iq_tables.h"

namespace df::cpu {
namespace {

using quant::kIq1sGrid;
using quant::kIq2sGrid;
using quant::kIq2xsGrid;
using quant::kIq2xxsGrid;
using quant::kIq3sGrid;
using quant::kIq3xxsGrid;
using quant::kIq4nlValues;

inline uint32_t load_u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t load_u64(const void* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline float fp16(uint16_t h) { return _cvtsh_ss(h); }

// 8 sign bytes from 8 seven-bit codes (one per byte): bit 7 = parity of the code, so that
// each group of 8 has an even number of negative signs (ggml's ksigns_iq2xs).
inline uint64_t signs_from_codes(uint64_t codes) {
  uint64_t p = codes ^ (codes >> 4);
  p ^= p >> 2;
  p ^= p >> 1;
  return codes | ((p & 0x0101010101010101ull) << 7);
}
// The four 7-bit sign codes in bits 0-27 of each of two 32-bit words, as 8 bytes.
inline uint64_t codes_of(uint32_t a, uint32_t b) {
  return _pdep_u64(a & 0x0fffffffu, 0x7f7f7f7full) | (_pdep_u64(b & 0x0fffffffu, 0x7f7f7f7full) << 32);
}

// int16 scale lanes for 64 elements: per 32 (2 values) or per 16 (4 values).
inline __m512i scales2(int s0, int s1) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(static_cast<short>(s0))),
                            _mm256_set1_epi16(static_cast<short>(s1)), 1);
}
inline __m512i scales4(uint64_t four_int16) {
  const __m512i idx = _mm512_set_epi64(0x0003000300030003ll, 0x0003000300030003ll, 0x0002000200020002ll,
                                       0x0002000200020002ll, 0x0001000100010001ll, 0x0001000100010001ll, 0, 0);
  return _mm512_permutexvar_epi16(idx, _mm512_castsi128_si512(_mm_cvtsi64_si128(static_cast<long long>(four_int16))));
}
// 4 scale nibbles n (in the low nibbles of 4 bytes of v... as 16-bit lanes) -> 2 n + 1.
inline uint64_t odd_scales4(uint64_t nibbles16) { return (nibbles16 << 1) | 0x0001000100010001ull; }

// Grid rows of 8 bytes for 8 indices (epi64 lanes) / of 4 bytes for 16 indices (epi32 lanes).
// kGather: vpgather; otherwise scalar loads inserted into the vector (faster on Zen 4,
// where vpgatherqq zmm costs more than 8 loads + 7 inserts).
constexpr bool kGather = true;
inline __m512i gather8(const uint64_t* table, __m512i idx) {
  if constexpr (kGather) {
    return _mm512_i64gather_epi64(idx, reinterpret_cast<const long long*>(table), 8);
  } else {
    alignas(64) uint64_t i[8];
    _mm512_store_si512(i, idx);
    return _mm512_set_epi64(static_cast<long long>(table[i[7]]), static_cast<long long>(table[i[6]]),
                            static_cast<long long>(table[i[5]]), static_cast<long long>(table[i[4]]),
                            static_cast<long long>(table[i[3]]), static_cast<long long>(table[i[2]]),
                            static_cast<long long>(table[i[1]]), static_cast<long long>(table[i[0]]));
  }
}
inline __m512i gather16(const uint32_t* table, __m512i idx) {
  if constexpr (kGather) {
    return _mm512_i32gather_epi32(idx, reinterpret_cast<const int*>(table), 4);
  } else {
    alignas(64) uint32_t i[16];
    _mm512_store_si512(i, idx);
    return _mm512_set_epi32(static_cast<int>(table[i[15]]), static_cast<int>(table[i[14]]), static_cast<int>(table[i[13]]),
                            static_cast<int>(table[i[12]]), static_cast<int>(table[i[11]]), static_cast<int>(table[i[10]]),
                            static_cast<int>(table[i[9]]), static_cast<int>(table[i[8]]), static_cast<int>(table[i[7]]),
                            static_cast<int>(table[i[6]]), static_cast<int>(table[i[5]]), static_cast<int>(table[i[4]]),
                            static_cast<int>(table[i[3]]), static_cast<int>(table[i[2]]), static_cast<int>(table[i[1]]),
                            static_cast<int>(table[i[0]]));
  }
}
inline __m512i bytes_to_epi64(uint64_t v) { return _mm512_cvtepu8_epi64(_mm_cvtsi64_si128(static_cast<long long>(v))); }

// ---------------- IQ formats with Q8_K activations ----------------

// 64 elements (sub-blocks 2p, 2p+1) of a weight row: unsigned magnitudes, the mask of
// negative elements, int16 scale lanes, and (IQ1) the mask of negative grid shifts.
struct Pair {
  __m512i mag, sc;
  __mmask64 neg, dneg;
};

struct DecIQ2_XXS {
  using Block = BlockIQ2_XXS;
  static constexpr float kFinal = 0.125f;
  static constexpr bool kDelta = false;
  static float scale(const Block& b) { return fp16(b.d); }
  static void decode(const Block& b, int p, Pair& o) {
    uint32_t aux[4];
    std::memcpy(aux, b.qs + 8 * p, 16);  // idx0, signs0, idx1, signs1
    o.mag = gather8(kIq2xxsGrid, bytes_to_epi64(aux[0] | (uint64_t{aux[2]} << 32)));
    o.neg = signs_from_codes(codes_of(aux[1], aux[3]));
    o.sc = scales2(2 * (aux[1] >> 28) + 1, 2 * (aux[3] >> 28) + 1);
  }
};

struct DecIQ2_XS {
  using Block = BlockIQ2_XS;
  static constexpr float kFinal = 0.125f;
  static constexpr bool kDelta = false;
  static float scale(const Block& b) { return fp16(b.d); }
  static void decode(const Block& b, int p, Pair& o) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 8 * p));
    o.mag = gather8(kIq2xsGrid, _mm512_cvtepu16_epi64(_mm_and_si128(q, _mm_set1_epi16(511))));
    const __m128i codes = _mm_packus_epi16(_mm_srli_epi16(q, 9), _mm_setzero_si128());
    o.neg = signs_from_codes(static_cast<uint64_t>(_mm_cvtsi128_si64(codes)));
    uint16_t sc;
    std::memcpy(&sc, b.scales + 2 * p, 2);
    o.sc = scales4(odd_scales4(_pdep_u64(sc, 0x000f000f000f000full)));
  }
};

struct DecIQ2_S {
  using Block = BlockIQ2_S;
  static constexpr float kFinal = 0.125f;
  static constexpr bool kDelta = false;
  static float scale(const Block& b) { return fp16(b.d); }
  static void decode(const Block& b, int p, Pair& o) {
    uint16_t qh, sc;
    std::memcpy(&qh, b.qh + 2 * p, 2);
    std::memcpy(&sc, b.scales + 2 * p, 2);
    const __m512i lo = bytes_to_epi64(load_u64(b.qs + 8 * p));
    const __m512i hi = _mm512_slli_epi64(bytes_to_epi64(_pdep_u64(qh, 0x0303030303030303ull)), 8);
    o.mag = gather8(kIq2sGrid, _mm512_or_si512(lo, hi));
    o.neg = load_u64(b.qs + kQK_K / 8 + 8 * p);
    o.sc = scales4(odd_scales4(_pdep_u64(sc, 0x000f000f000f000full)));
  }
};

struct DecIQ3_XXS {
  using Block = BlockIQ3_XXS;
  static constexpr float kFinal = 0.25f;
  static constexpr bool kDelta = false;
  static float scale(const Block& b) { return fp16(b.d); }
  static void decode(const Block& b, int p, Pair& o) {
    const __m512i idx = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * p)));
    o.mag = gather16(kIq3xxsGrid, idx);
    const uint32_t a0 = load_u32(b.qs + kQK_K / 4 + 8 * p), a1 = load_u32(b.qs + kQK_K / 4 + 8 * p + 4);
    o.neg = signs_from_codes(codes_of(a0, a1));
    o.sc = scales2(2 * (a0 >> 28) + 1, 2 * (a1 >> 28) + 1);
  }
};

struct DecIQ3_S {
  using Block = BlockIQ3_S;
  static constexpr float kFinal = 1.0f;
  static constexpr bool kDelta = false;
  static float scale(const Block& b) { return fp16(b.d); }
  static void decode(const Block& b, int p, Pair& o) {
    uint16_t qh;
    std::memcpy(&qh, b.qh + 2 * p, 2);  // bit j: index bit 8 of 4-element group j
    const __m512i lo = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * p)));
    const __m512i idx = _mm512_mask_or_epi32(lo, static_cast<__mmask16>(qh), lo, _mm512_set1_epi32(256));
    o.mag = gather16(kIq3sGrid, idx);
    o.neg = load_u64(b.signs + 8 * p);
    o.sc = scales2(2 * (b.scales[p] & 0xf) + 1, 2 * (b.scales[p] >> 4) + 1);
  }
};

struct DecIQ1_S {
  using Block = BlockIQ1_S;
  static constexpr float kFinal = 1.0f;
  static constexpr bool kDelta = true;
  static float scale(const Block& b) { return fp16(b.d); }
  static void decode(const Block& b, int p, Pair& o) {
    const uint32_t h0 = b.qh[2 * p], h1 = b.qh[2 * p + 1];
    const uint64_t hi = _pdep_u64(h0 & 0xfff, 0x07070707ull) | (_pdep_u64(h1 & 0xfff, 0x07070707ull) << 32);
    const __m512i idx = _mm512_or_si512(bytes_to_epi64(load_u64(b.qs + 8 * p)), _mm512_slli_epi64(bytes_to_epi64(hi), 8));
    const __m512i v = gather8(kIq1sGrid, idx);
    o.mag = _mm512_abs_epi8(v);
    o.neg = _mm512_movepi8_mask(v);
    o.sc = scales2(2 * ((h0 >> 12) & 7) + 1, 2 * ((h1 >> 12) & 7) + 1);
    o.dneg = (h0 & 0x8000 ? 0x00000000ffffffffull : 0) | (h1 & 0x8000 ? 0xffffffff00000000ull : 0);
  }
};

struct DecIQ1_M {
  using Block = BlockIQ1_M;
  static constexpr float kFinal = 1.0f;
  static constexpr bool kDelta = true;
  static float scale(const Block& b) {
    uint16_t sc[4];
    std::memcpy(sc, b.scales, sizeof sc);
    return fp16(static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) |
                                      (sc[3] & 0xf000)));
  }
  static void decode(const Block& b, int p, Pair& o) {
    const uint32_t qh = load_u32(b.qh + 4 * p);  // a nibble per 8 elements: 3 index bits, shift sign
    const uint64_t hi = _pdep_u64(qh & 0x77777777u, 0x0f0f0f0f0f0f0f0full);
    const __m512i idx = _mm512_or_si512(bytes_to_epi64(load_u64(b.qs + 8 * p)), _mm512_slli_epi64(bytes_to_epi64(hi), 8));
    const __m512i v = gather8(kIq1sGrid, idx);
    o.mag = _mm512_abs_epi8(v);
    o.neg = _mm512_movepi8_mask(v);
    uint16_t sc;
    std::memcpy(&sc, b.scales + 2 * p, 2);  // 3-bit scales of elements 0-15, 16-31, 32-47, 48-63
    o.sc = scales4(odd_scales4(_pdep_u64(sc & 0xfff, 0x0007000700070007ull)));
    o.dneg = _pdep_u64(_pext_u32(qh, 0x88888888u), 0x0101010101010101ull) * 0xff;
  }
};

struct DecIQ4_XS {
  using Block = BlockIQ4_XS;
  static constexpr float kFinal = 1.0f;
  static constexpr bool kDelta = false;
  static float scale(const Block& b) { return fp16(b.d); }
  static void decode(const Block& b, int p, Pair& o) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * p));
    const __m512i t = _mm512_castsi256_si512(x);
    const __m512i aabb = _mm512_shuffle_i64x2(t, t, 0x50);  // 128-bit lanes A A B B
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i nib = _mm512_mask_blend_epi64(0xcc, _mm512_and_si512(aabb, m4),
                                                _mm512_and_si512(_mm512_srli_epi16(aabb, 4), m4));
    const __m512i values = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
    const __m512i v = _mm512_shuffle_epi8(values, nib);
    o.mag = _mm512_abs_epi8(v);
    o.neg = _mm512_movepi8_mask(v);
    const int ib0 = 2 * p, ib1 = 2 * p + 1;
    const int ls0 = (b.scales_l[p] & 0xf) | (((b.scales_h >> (2 * ib0)) & 3) << 4);
    const int ls1 = (b.scales_l[p] >> 4) | (((b.scales_h >> (2 * ib1)) & 3) << 4);
    o.sc = scales2(ls0 - 32, ls1 - 32);
  }
};

template <class Dec>
struct MkIqK {
  static constexpr int kRows = 1, kCols = Dec::kDelta ? 4 : 8, kRowsDecode = 1;
  using Block = typename Dec::Block;

  template <int R, int C>
  static void tile(int64_t n, const uint8_t* const* wp, const uint8_t* const* ap, float* out) {
    static_assert(R == 1);
    const Block* w = reinterpret_cast<const Block*>(wp[0]);
    const BlockQ8_K* a[C];
    for (int c = 0; c < C; ++c) a[c] = reinterpret_cast<const BlockQ8_K*>(ap[c]);
    __m512 acc[C], accd[C];
    for (int c = 0; c < C; ++c) acc[c] = accd[c] = _mm512_setzero_ps();
    const __m512i ones = _mm512_set1_epi8(1), zero = _mm512_setzero_si512();
    const int64_t nb = n / kQK_K;
    for (int64_t b = 0; b < nb; ++b) {
      __m512i isum[C], dsum[C];
      for (int c = 0; c < C; ++c) isum[c] = dsum[c] = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int p = 0; p < 4; ++p) {
        Pair d;
        Dec::decode(w[b], p, d);
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) {
          const __m512i q8 = _mm512_loadu_si512(a[c][b].qs + 64 * p);
          const __m512i q8s = _mm512_mask_sub_epi8(q8, d.neg, zero, q8);
          isum[c] = _mm512_add_epi32(isum[c], _mm512_madd_epi16(_mm512_maddubs_epi16(d.mag, q8s), d.sc));
          if constexpr (Dec::kDelta) {
            const __m512i q8d = _mm512_mask_sub_epi8(q8, d.dneg, zero, q8);
            dsum[c] = _mm512_add_epi32(dsum[c], _mm512_madd_epi16(_mm512_maddubs_epi16(ones, q8d), d.sc));
          }
        }
      }
      const float dw = Dec::scale(w[b]);
      for (int c = 0; c < C; ++c) {
        const __m512 d = _mm512_set1_ps(dw * a[c][b].d);
        acc[c] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(isum[c]), acc[c]);
        if constexpr (Dec::kDelta) accd[c] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(dsum[c]), accd[c]);
      }
    }
    for (int c = 0; c < C; ++c) {
      if constexpr (Dec::kDelta)
        out[c] = _mm512_reduce_add_ps(acc[c]) + 0.125f * _mm512_reduce_add_ps(accd[c]);
      else
        out[c] = Dec::kFinal * _mm512_reduce_add_ps(acc[c]);
    }
  }
};

// ---------------- TQ2_0 / TQ1_0 (Q8_K): sum(q * a) - sum(a), q in {0, 1, 2 (3)} ----------------

// Activations of elements [32 l, 32 l + 32) and [128 + 32 l, ...) in one vector (TQ2_0 order).
inline __m512i tq2_act(const BlockQ8_K& a, int l) {
  return _mm512_inserti64x4(
      _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs + 32 * l))),
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs + 128 + 32 * l)), 1);
}

// TQ1_0 digits as in iq_avx2.cpp (ggml's per-byte base-3 extraction), 8 vectors of 32.
inline __m256i trit_top(__m256i x) {
  const __m256i y = _mm256_subs_epu8(x, _mm256_set1_epi8(1));
  const __m256i t = _mm256_avg_epu8(y, _mm256_avg_epu8(y, _mm256_setzero_si256()));
  return _mm256_and_si256(_mm256_srli_epi16(t, 6), _mm256_set1_epi8(3));
}
inline __m256i mul3(__m256i x) { return _mm256_add_epi8(x, _mm256_add_epi8(x, x)); }
inline __m256i mul9(__m256i x) {
  return _mm256_add_epi8(_mm256_and_si256(_mm256_slli_epi16(x, 3), _mm256_set1_epi8(-8)), x);
}
void tq1_digits(const BlockTQ1_0& b, __m256i (&q)[8]) {
  const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
  const __m256i x1 = mul3(x0), x2 = mul9(x0), x3 = mul9(x1), x4 = mul9(x2);
  q[0] = trit_top(x0);
  q[1] = trit_top(x1);
  q[2] = trit_top(x2);
  q[3] = trit_top(x3);
  q[4] = trit_top(x4);
  const __m128i y0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 32));
  const __m256i y = _mm256_setr_m128i(y0, y0);
  const __m256i y1 = mul3(y), y2 = mul9(y), y3 = mul9(y1), y4 = mul9(y2);
  __m256i h = _mm256_cvtepu8_epi16(_mm_set1_epi32(static_cast<int>(load_u32(b.qh))));
  h = _mm256_mullo_epi16(h, _mm256_setr_epi16(1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27));
  const __m128i h8 = _mm256_cvtepi16_epi8(h);  // low bytes (mod 256)
  q[5] = trit_top(_mm256_blend_epi32(y, y1, 0xf0));
  q[6] = trit_top(_mm256_blend_epi32(y2, y3, 0xf0));
  q[7] = trit_top(_mm256_setr_m128i(_mm256_castsi256_si128(y4), h8));
}

template <bool kTq1>
struct MkTq {
  static constexpr int kRows = 1, kCols = 8, kRowsDecode = 1;
  using Block = std::conditional_t<kTq1, BlockTQ1_0, BlockTQ2_0>;

  template <int R, int C>
  static void tile(int64_t n, const uint8_t* const* wp, const uint8_t* const* ap, float* out) {
    static_assert(R == 1);
    const Block* w = reinterpret_cast<const Block*>(wp[0]);
    const BlockQ8_K* a[C];
    for (int c = 0; c < C; ++c) a[c] = reinterpret_cast<const BlockQ8_K*>(ap[c]);
    __m512 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = _mm512_setzero_ps();
    const int64_t nb = n / kQK_K;
    for (int64_t b = 0; b < nb; ++b) {
      const float dw = fp16(w[b].d);
      if constexpr (kTq1) {
        __m256i q[8];
        tq1_digits(w[b], q);
        for (int c = 0; c < C; ++c) {
          __m256i s = _mm256_setzero_si256();
#pragma GCC unroll 8
          for (int k = 0; k < 8; ++k)
            s = _mm256_dpbusd_epi32(s, q[k], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[c][b].qs + 32 * k)));
          const __m512i bs = _mm512_cvtepi16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[c][b].bsums)));
          const __m512i isum = _mm512_sub_epi32(_mm512_zextsi256_si512(s), bs);
          acc[c] = _mm512_fmadd_ps(_mm512_set1_ps(a[c][b].d * dw), _mm512_cvtepi32_ps(isum), acc[c]);
        }
      } else {
        const __m512i x = _mm512_loadu_si512(w[b].qs);
        const __m512i m3 = _mm512_set1_epi8(3);
        const __m512i q[4] = {_mm512_and_si512(x, m3), _mm512_and_si512(_mm512_srli_epi16(x, 2), m3),
                              _mm512_and_si512(_mm512_srli_epi16(x, 4), m3),
                              _mm512_and_si512(_mm512_srli_epi16(x, 6), m3)};
        for (int c = 0; c < C; ++c) {
          __m512i isum = _mm512_sub_epi32(
              _mm512_setzero_si512(),
              _mm512_cvtepi16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[c][b].bsums))));
#pragma GCC unroll 4
          for (int l = 0; l < 4; ++l) isum = _mm512_dpbusd_epi32(isum, q[l], tq2_act(a[c][b], l));
          acc[c] = _mm512_fmadd_ps(_mm512_set1_ps(a[c][b].d * dw), _mm512_cvtepi32_ps(isum), acc[c]);
        }
      }
    }
    for (int c = 0; c < C; ++c) out[c] = _mm512_reduce_add_ps(acc[c]);
  }
};

// ---------------- IQ4_NL, Q1_0, Q2_0 (Q8_0 activations) ----------------

// Scales of two consecutive 32-element blocks: lanes 0-7 s0, lanes 8-15 s1.
inline __m512 two_scales(float s0, float s1) {
  return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(s0)), _mm256_set1_ps(s1), 1);
}
inline __m512i two_blocks(const BlockQ8_0& a0, const BlockQ8_0& a1) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a0.qs))),
                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a1.qs)), 1);
}

struct MkIq4Nl {
  static constexpr int kRows = 1, kCols = 8, kRowsDecode = 1;

  // Values of blocks b and b+1 (the second zero when One): magnitudes and sign mask.
  template <bool One>
  static void decode(const BlockIQ4_NL* w, __m512i& mag, __mmask64& neg) {
    const __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[0].qs));
    const __m128i x1 = One ? _mm_set1_epi8(0x08) : _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[1].qs));
    // 128-bit lanes: x0 x0 x1 x1, low nibbles in lanes 0 and 2; value index 8 is +1 (unused when One)
    const __m512i t = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_setr_m128i(x0, x0)), _mm256_setr_m128i(x1, x1), 1);
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i nib = _mm512_mask_blend_epi64(0xcc, _mm512_and_si512(t, m4), _mm512_and_si512(_mm512_srli_epi16(t, 4), m4));
    const __m512i values = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
    const __m512i v = _mm512_shuffle_epi8(values, nib);
    mag = _mm512_abs_epi8(v);
    neg = _mm512_movepi8_mask(v);
  }

  template <int R, int C>
  static void tile(int64_t n, const uint8_t* const* wp, const uint8_t* const* ap, float* out) {
    static_assert(R == 1);
    const BlockIQ4_NL* w = reinterpret_cast<const BlockIQ4_NL*>(wp[0]);
    const BlockQ8_0* a[C];
    for (int c = 0; c < C; ++c) a[c] = reinterpret_cast<const BlockQ8_0*>(ap[c]);
    constexpr int U = C == 1 ? 2 : 1;
    __m512 acc[U][C];
    for (int u = 0; u < U; ++u)
      for (int c = 0; c < C; ++c) acc[u][c] = _mm512_setzero_ps();
    const __m512i zero = _mm512_setzero_si512();
    const int64_t nb = n / kQK4_NL;
    auto step = [&](int64_t b, bool one, __m512 (&ac)[C]) {
      __m512i mag;
      __mmask64 neg;
      if (one)
        decode<true>(w + b, mag, neg);
      else
        decode<false>(w + b, mag, neg);
      const float dw0 = fp16(w[b].d), dw1 = one ? 0.0f : fp16(w[b + 1].d);
      for (int c = 0; c < C; ++c) {
        const __m512i q8 = one ? _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[c][b].qs)))
                               : two_blocks(a[c][b], a[c][b + 1]);
        const __m512i isum = _mm512_dpbusd_epi32(zero, mag, _mm512_mask_sub_epi8(q8, neg, zero, q8));
        const __m512 d = two_scales(fp16(a[c][b].d) * dw0, one ? 0.0f : fp16(a[c][b + 1].d) * dw1);
        ac[c] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(isum), ac[c]);
      }
    };
    int64_t b = 0;
    for (; b + 2 * U <= nb; b += 2 * U)
      for (int u = 0; u < U; ++u) step(b + 2 * u, false, acc[u]);
    for (; b + 2 <= nb; b += 2) step(b, false, acc[0]);
    if (b < nb) step(b, true, acc[0]);
    for (int c = 0; c < C; ++c) {
      __m512 s = acc[0][c];
      for (int u = 1; u < U; ++u) s = _mm512_add_ps(s, acc[u][c]);
      out[c] = _mm512_reduce_add_ps(s);
    }
  }
};

// Q2_0: the 2-bit codes of 16 bytes (64 elements, 4 per byte, low bits first) as bytes.
inline __m512i q2_codes(const uint8_t* p) {
  const __m512i x = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m512i rep = _mm512_shuffle_epi8(
      x, _mm512_set_epi32(0x0f0f0f0f, 0x0e0e0e0e, 0x0d0d0d0d, 0x0c0c0c0c, 0x0b0b0b0b, 0x0a0a0a0a, 0x09090909,
                          0x08080808, 0x07070707, 0x06060606, 0x05050505, 0x04040404, 0x03030303, 0x02020202,
                          0x01010101, 0x00000000));
  const __m512i b0 = _mm512_and_si512(rep, _mm512_set1_epi32(0x00000003));
  const __m512i b1 = _mm512_and_si512(_mm512_srli_epi32(rep, 2), _mm512_set1_epi32(0x00000300));
  const __m512i b2 = _mm512_and_si512(_mm512_srli_epi32(rep, 4), _mm512_set1_epi32(0x00030000));
  const __m512i b3 = _mm512_and_si512(_mm512_srli_epi32(rep, 6), _mm512_set1_epi32(0x03000000));
  return _mm512_or_si512(_mm512_or_si512(b0, b1), _mm512_or_si512(b2, b3));
}

template <bool kQ1>
struct MkQ1Q2 {
  static constexpr int kRows = 1, kCols = 8, kRowsDecode = 1;
  using Block = std::conditional_t<kQ1, BlockQ1_0, BlockQ2_0>;
  static constexpr int kSub = kQ1 ? 4 : 2;  // Q8_0 blocks per weight block

  template <int R, int C>
  static void tile(int64_t n, const uint8_t* const* wp, const uint8_t* const* ap, float* out) {
    static_assert(R == 1);
    const Block* w = reinterpret_cast<const Block*>(wp[0]);
    const BlockQ8_0* a[C];
    for (int c = 0; c < C; ++c) a[c] = reinterpret_cast<const BlockQ8_0*>(ap[c]);
    __m512 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = _mm512_setzero_ps();
    const __m512i ones = _mm512_set1_epi8(1), zero = _mm512_setzero_si512();
    const int64_t nb = n / (32 * kSub);
    for (int64_t b = 0; b < nb; ++b) {
      const __m512 dw = _mm512_set1_ps(fp16(w[b].d));
      if constexpr (kQ1) {
        const __mmask64 neg0 = ~load_u64(w[b].qs), neg1 = ~load_u64(w[b].qs + 8);  // clear bit: -d
        for (int c = 0; c < C; ++c) {
          const BlockQ8_0* ab = a[c] + 4 * b;
          const __m512i q0 = two_blocks(ab[0], ab[1]), q1 = two_blocks(ab[2], ab[3]);
          const __m512i s0 = _mm512_dpbusd_epi32(zero, ones, _mm512_mask_sub_epi8(q0, neg0, zero, q0));
          const __m512i s1 = _mm512_dpbusd_epi32(zero, ones, _mm512_mask_sub_epi8(q1, neg1, zero, q1));
          __m512 blk = _mm512_mul_ps(two_scales(fp16(ab[0].d), fp16(ab[1].d)), _mm512_cvtepi32_ps(s0));
          blk = _mm512_fmadd_ps(two_scales(fp16(ab[2].d), fp16(ab[3].d)), _mm512_cvtepi32_ps(s1), blk);
          acc[c] = _mm512_fmadd_ps(dw, blk, acc[c]);
        }
      } else {
        const __m512i q = q2_codes(w[b].qs);
        for (int c = 0; c < C; ++c) {
          const BlockQ8_0* ab = a[c] + 2 * b;
          const __m512i q8 = two_blocks(ab[0], ab[1]);
          // (q - 1) * a: sums of q * a minus sums of a, 4 elements per int32 lane
          const __m512i s = _mm512_sub_epi32(_mm512_dpbusd_epi32(zero, q, q8), _mm512_dpbusd_epi32(zero, ones, q8));
          const __m512 blk = _mm512_mul_ps(two_scales(fp16(ab[0].d), fp16(ab[1].d)), _mm512_cvtepi32_ps(s));
          acc[c] = _mm512_fmadd_ps(dw, blk, acc[c]);
        }
      }
    }
    for (int c = 0; c < C; ++c) out[c] = _mm512_reduce_add_ps(acc[c]);
  }
};

// ---------------- registry ----------------

template <class Mk>
float vec_dot_mk(int64_t n, const void* w_row, const void* act_row) {
  const uint8_t* wp = static_cast<const uint8_t*>(w_row);
  const uint8_t* ap = static_cast<const uint8_t*>(act_row);
  float out;
  Mk::template tile<1, 1>(n, &wp, &ap, &out);
  return out;
}

// Decode (one activation row) walks the weight rows directly; prefill goes through the
// tiled driver (weights decoded once per tile of activation rows).
template <class Mk>
void gemm_mk(int64_t n, const uint8_t* W, size_t w_stride, int64_t i0, int64_t i1, const uint8_t* act,
             size_t act_stride, int64_t n_act, float* Y, int64_t ldy) {
  if (n_act == 1) {
    for (int64_t i = i0; i < i1; ++i) {
      const uint8_t* w = W + static_cast<size_t>(i) * w_stride;
      Mk::template tile<1, 1>(n, &w, &act, Y + i);
    }
    return;
  }
  tiled::gemm<Mk>(n, W, w_stride, i0, i1, act, act_stride, n_act, Y, ldy);
}

void quantize_act_q8_k(const float* x, void* out, int64_t n) {
  quant::FormatQ8_K::quantize_act(x, static_cast<BlockQ8_K*>(out), n / kQK_K);
}
void quantize_act_q8_0(const float* x, void* out, int64_t n) {
  kKernelsAvx512.quantize_act(GgmlType::Q8_0, x, out, n);
}

template <class Mk, bool kQ8K>
constexpr FormatKernels make() {
  return {kQ8K ? &quantize_act_q8_k : &quantize_act_q8_0, &vec_dot_mk<Mk>, &gemm_mk<Mk>};
}

constexpr FormatKernels kIq2xxs = make<MkIqK<DecIQ2_XXS>, true>();
constexpr FormatKernels kIq2xs = make<MkIqK<DecIQ2_XS>, true>();
constexpr FormatKernels kIq2s = make<MkIqK<DecIQ2_S>, true>();
constexpr FormatKernels kIq3xxs = make<MkIqK<DecIQ3_XXS>, true>();
constexpr FormatKernels kIq3s = make<MkIqK<DecIQ3_S>, true>();
constexpr FormatKernels kIq1s = make<MkIqK<DecIQ1_S>, true>();
constexpr FormatKernels kIq1m = make<MkIqK<DecIQ1_M>, true>();
constexpr FormatKernels kIq4xs = make<MkIqK<DecIQ4_XS>, true>();
constexpr FormatKernels kIq4nl = make<MkIq4Nl, false>();
constexpr FormatKernels kTq1 = make<MkTq<true>, true>();
constexpr FormatKernels kTq2 = make<MkTq<false>, true>();
constexpr FormatKernels kQ1 = make<MkQ1Q2<true>, false>();
constexpr FormatKernels kQ2 = make<MkQ1Q2<false>, false>();

}  // namespace

const FormatKernels* lowbit_kernels_avx512(GgmlType w) {
  switch (w) {
    case GgmlType::IQ2_XXS: return &kIq2xxs;
    case GgmlType::IQ2_XS: return &kIq2xs;
    case GgmlType::IQ2_S: return &kIq2s;
    case GgmlType::IQ3_XXS: return &kIq3xxs;
    case GgmlType::IQ3_S: return &kIq3s;
    case GgmlType::IQ1_S: return &kIq1s;
    case GgmlType::IQ1_M: return &kIq1m;
    case GgmlType::IQ4_XS: return &kIq4xs;
    case GgmlType::IQ4_NL: return &kIq4nl;
    case GgmlType::TQ1_0: return &kTq1;
    case GgmlType::TQ2_0: return &kTq2;
    case GgmlType::Q1_0: return &kQ1;
    case GgmlType::Q2_0: return &kQ2;
    default: return nullptr;
  }
}

}  // namespace df::cpu
