// AVX-512 kernels (F, BW, VL, DQ, VNNI + BMI2) for the low-bit formats with Q8_0
// activations: IQ4_NL, Q1_0, Q2_0. Called only after best_isa() has checked the CPU.
//
// Numerics: the same exact int32 sums per 32-element activation block as the scalar
// reference and ggml's vec_dot, two blocks per 512-bit vector (vpdpbusd of unsigned
// magnitudes with the activation bytes negated under a 64-bit sign mask), scaled per block
// in f32 lanes 0-7 / 8-15. Only the order of f32 additions differs from the reference.
//
// The grid IQ formats, IQ4_XS and TQ1_0 / TQ2_0 run the AVX2 kernels (lowbit_avx2.cpp) on
// AVX-512 machines too: 512-bit versions of them (64 elements per step, grid rows by
// vpgather or inserts, sign codes expanded to a negate mask with pdep and a parity fold;
// git history, commit "AVX-512 kernels for the IQ/TQ/Q1_0/Q2_0 formats") measured 10-40%
// slower on Zen 4, where 512-bit operations are split in two and the grid lookups, not the
// arithmetic, bound the speed. Q1_0 / Q2_0 / IQ4_NL are at least as fast in 512 bits.
#include <immintrin.h>

#include <cmath>
#include <cstring>

// GCC 12's AVX-512 intrinsics trip -Wuninitialized through _mm512_undefined_* (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)  // clang has no -Wmaybe-uninitialized
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "quant/cpu/registry.h"
#include "quant/cpu/simd_avx2.h"
#include "quant/iq_tables.h"

namespace df::cpu {
namespace {

using quant::kIq4nlValues;

using simd::fp16;
using simd::load_u32;
using simd::load_u64;

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
  static constexpr bool kShapeFree = true;  // one f32 order per output in every tile

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

  // ggml's order: lanes 0-7 hold the even blocks (ggml's accum1), lanes 8-15 the odd ones
  // (accum2); the 16-lane sum equals hsum_float_8(accum1 + accum2); an odd last block is
  // added as a scalar fma.
  template <int R, int C>
  static void tile(int64_t n, const uint8_t* const* wp, const uint8_t* const* ap, float* out) {
    static_assert(R == 1);
    const BlockIQ4_NL* w = reinterpret_cast<const BlockIQ4_NL*>(wp[0]);
    const BlockQ8_0* a[C];
    for (int c = 0; c < C; ++c) a[c] = reinterpret_cast<const BlockQ8_0*>(ap[c]);
    __m512 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = _mm512_setzero_ps();
    const __m512i zero = _mm512_setzero_si512();
    const int64_t nb = n / kQK4_NL;
    int64_t b = 0;
    for (; b + 1 < nb; b += 2) {
      __m512i mag;
      __mmask64 neg;
      decode<false>(w + b, mag, neg);
      const float dw0 = fp16(w[b].d), dw1 = fp16(w[b + 1].d);
      for (int c = 0; c < C; ++c) {
        const __m512i q8 = two_blocks(a[c][b], a[c][b + 1]);
        const __m512i isum = _mm512_dpbusd_epi32(zero, mag, _mm512_mask_sub_epi8(q8, neg, zero, q8));
        const __m512 d = two_scales(fp16(a[c][b].d) * dw0, fp16(a[c][b + 1].d) * dw1);
        acc[c] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(isum), acc[c]);
      }
    }
    for (int c = 0; c < C; ++c) out[c] = _mm512_reduce_add_ps(acc[c]);
    if (b < nb) {
      __m512i mag;
      __mmask64 neg;
      decode<true>(w + b, mag, neg);
      const float dw = fp16(w[b].d);
      for (int c = 0; c < C; ++c) {
        const __m512i q8 = _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[c][b].qs)));
        const __m512i isum = _mm512_dpbusd_epi32(zero, mag, _mm512_mask_sub_epi8(q8, neg, zero, q8));
        out[c] = std::fma(fp16(a[c][b].d) * dw, static_cast<float>(_mm512_reduce_add_epi32(isum)), out[c]);
      }
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

// Q1_0 in ggml's AVX2 order, in 256-bit lanes: the activation bytes negated under the
// weight's sign mask (bit clear: -d), vpdpbusd with ones for the 8 lane sums; per weight
// block d(a_0) * isum_0, fma(d(a_k), isum_k) for k = 1..3, then acc = fma(dw, block, acc).
// Q2_0 in ggml's generic (scalar) order: integer sums of its two Q8_0 blocks by vpdpbusd,
// then block = fma(d(a_k), isum_k, block), sum = fma(dw, block, sum) in scalar f32.
template <bool kQ1>
struct MkQ1Q2 {
  static constexpr int kRows = 1, kCols = 8, kRowsDecode = 1;
  static constexpr bool kShapeFree = true;  // one f32 order per output in every tile
  using Block = std::conditional_t<kQ1, BlockQ1_0, BlockQ2_0>;
  static constexpr int kSub = kQ1 ? 4 : 2;  // Q8_0 blocks per weight block

  template <int R, int C>
  static void tile(int64_t n, const uint8_t* const* wp, const uint8_t* const* ap, float* out) {
    static_assert(R == 1);
    const Block* w = reinterpret_cast<const Block*>(wp[0]);
    const BlockQ8_0* a[C];
    for (int c = 0; c < C; ++c) a[c] = reinterpret_cast<const BlockQ8_0*>(ap[c]);
    __m256 acc[C];
    float sum[C];
    for (int c = 0; c < C; ++c) {
      acc[c] = _mm256_setzero_ps();
      sum[c] = 0.0f;
    }
    const __m512i ones = _mm512_set1_epi8(1), zero = _mm512_setzero_si512();
    const __m256i ones32 = _mm256_set1_epi8(1), zero32 = _mm256_setzero_si256();
    const int64_t nb = n / (32 * kSub);
    for (int64_t b = 0; b < nb; ++b) {
      const float dw = fp16(w[b].d);
      if constexpr (kQ1) {
        __mmask32 neg[4];
        for (int k = 0; k < 4; ++k) neg[k] = ~load_u32(w[b].qs + 4 * k);  // clear bit: -d
        for (int c = 0; c < C; ++c) {
          __m256 blk = _mm256_setzero_ps();
#pragma GCC unroll 4
          for (int k = 0; k < 4; ++k) {
            const BlockQ8_0& ab = a[c][4 * b + k];
            const __m256i q8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs));
            const __m256i s = _mm256_dpbusd_epi32(zero32, ones32, _mm256_mask_sub_epi8(q8, neg[k], zero32, q8));
            const __m256 da = _mm256_set1_ps(fp16(ab.d));
            blk = k == 0 ? _mm256_mul_ps(da, _mm256_cvtepi32_ps(s)) : _mm256_fmadd_ps(da, _mm256_cvtepi32_ps(s), blk);
          }
          acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dw), blk, acc[c]);
        }
      } else {
        const __m512i q = q2_codes(w[b].qs);
        for (int c = 0; c < C; ++c) {
          const BlockQ8_0* ab = a[c] + 2 * b;
          const __m512i q8 = two_blocks(ab[0], ab[1]);
          // (q - 1) * a: sums of q * a minus sums of a, 4 elements per int32 lane
          const __m512i s = _mm512_sub_epi32(_mm512_dpbusd_epi32(zero, q, q8), _mm512_dpbusd_epi32(zero, ones, q8));
          const int32_t s0 = _mm512_mask_reduce_add_epi32(0x00ff, s), s1 = _mm512_mask_reduce_add_epi32(0xff00, s);
          float blk = std::fma(fp16(ab[0].d), static_cast<float>(s0), 0.0f);
          blk = std::fma(fp16(ab[1].d), static_cast<float>(s1), blk);
          sum[c] = std::fma(dw, blk, sum[c]);
        }
      }
    }
    for (int c = 0; c < C; ++c) {
      if constexpr (kQ1) {
        __m128 s4 = _mm_add_ps(_mm256_extractf128_ps(acc[c], 1), _mm256_castps256_ps128(acc[c]));
        s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
        s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
        out[c] = _mm_cvtss_f32(s4);  // ggml's hsum_float_8
      } else {
        out[c] = sum[c];
      }
    }
  }
};

// ---------------- this file's part of the AVX-512 registry (registry.h) ----------------
// The other low-bit formats run the AVX2 kernels (see the top of this file); activations
// use the registry's quantisers.

template <class F>
struct Simd {};
template <> struct Simd<quant::FormatIQ4_NL> { using Mk = MkIq4Nl; };
template <> struct Simd<quant::FormatQ1_0> { using Mk = MkQ1Q2<true>; };
template <> struct Simd<quant::FormatQ2_0> { using Mk = MkQ1Q2<false>; };

}  // namespace

constinit const Registry kLowbitAvx512Part = make_registry<Simd>();

}  // namespace df::cpu
