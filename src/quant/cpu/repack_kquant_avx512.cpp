// AVX-512 VNNI kernel over the Q4_K x4 layout (repack.h): 4 weight rows (one 128-bit lane
// each) x up to 4 tokens.
//
// Per super-block and group v (elements 32v .. 32v+31), the 16 bytes of a row that hold
// the group's elements 0-15 (resp. 16-31) sit in lane k of one 64-byte vector, so
//   vpdpwssd(isum, vpmaddubsw(u, a), s16_v)
// with the token's quants of those elements broadcast to the four lanes gives per row the
// planar kernel's (kquant::Mk) exact int32 lane sums: lane l = elements with (e % 32) / 4 == l,
// each product times its sub-block scale; lanes 0-3 in `lo`, 4-7 in `hi`. Then per super-block
// and output, as Mk::step: acc = fma(d_a * d_w, float(isum), acc) on those 8 lanes and
// acc_m = fma(-d_a * dmin_w, float(mins . bsum pairs), acc_m) on 4; at the end Mk::finish:
// hsum_float_8(acc) + ((m0 + m2) + (m1 + m3)). Every output has the planar kernel's bits.
#include <immintrin.h>

#include <algorithm>
#include <vector>

#if defined(__GNUC__) && !defined(__clang__)  // GCC bug 105593, as legacy_avx512.cpp
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "quant/blocks.h"
#include "quant/cpu/repack.h"

namespace df::cpu {
namespace {

constexpr int kCols = 4;              // tokens per tile
constexpr int64_t kPrefetch = 2048;   // bytes ahead of the decode stream

struct Q8s {  // a token's block: bsum pairs of the 8 sub-blocks (int16)
  __m128i v;
};

// Activation rows (Q8_K blocks) -> the bsum pairs of each 32-element sub-block [token][block]
// (int16 x 8, as Mk::step's hadd) and the scales ad [token][block].
void pack_act(const uint8_t* act, size_t act_stride, int64_t n_act, int64_t nb, Q8s* q8s, float* ad) {
  for (int64_t c = 0; c < n_act; ++c) {
    const auto* a = reinterpret_cast<const BlockQ8_K*>(act + static_cast<size_t>(c) * act_stride);
    for (int64_t b = 0; b < nb; ++b) {
      const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].bsums));
      q8s[c * nb + b].v = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
      ad[c * nb + b] = a[b].d;
    }
  }
}

inline __m512i bcast16(const int8_t* p) { return _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

// int16 element j of each 128-bit lane, in all 8 int16 of that lane
inline __m512i lane_word(__m512i v, int j) {
  const __m512i idx = _mm512_set1_epi16(static_cast<short>((2 * j + 1) << 8 | (2 * j)));
  return _mm512_shuffle_epi8(v, idx);
}

// out[r * C + c] = dot(row r of the group, token c), r < 4, c < C; a[c]: token c's blocks.
template <int C>
void tile(int64_t nb, const uint8_t* grp, const BlockQ8_K* const* a, const Q8s* q8s, const float* ad,
          float* out) {
  constexpr int U = C == 1 ? 2 : 1;  // integer chains per output (exact: any number)
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  const __m512i idx4 = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  __m512 acc_lo[C], acc_hi[C], acc_m[C];
#pragma GCC unroll 4
  for (int c = 0; c < C; ++c) acc_lo[c] = acc_hi[c] = acc_m[c] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockOffsets o = block_offsets(b, nb, kQ4_Kx4Q, kQ4_Kx4Meta);
    const uint8_t* qs = grp + o.q;
    const uint8_t* mb = grp + o.m;
    if constexpr (C == 1)
      for (int l = 0; l < 9; ++l) _mm_prefetch(reinterpret_cast<const char*>(qs + kPrefetch + 64 * l), _MM_HINT_T0);
    const __m512i sc16 = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(mb)));
    const __m512i mn16 = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(mb + 32)));
    const __m512 dw = _mm512_permutexvar_ps(
        idx4, _mm512_castps128_ps512(_mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(mb + 64)))));
    const __m512 dmw = _mm512_permutexvar_ps(
        idx4, _mm512_castps128_ps512(_mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(mb + 72)))));
    __m512i lo[U][C], hi[U][C];
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c)
      for (int k = 0; k < U; ++k) lo[k][c] = hi[k][c] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      const __m512i A = _mm512_loadu_si512(qs + p * 128), B = _mm512_loadu_si512(qs + p * 128 + 64);
      const __m512i ule = _mm512_and_si512(A, m4), ulo = _mm512_and_si512(_mm512_srli_epi16(A, 4), m4);
      const __m512i uhe = _mm512_and_si512(B, m4), uho = _mm512_and_si512(_mm512_srli_epi16(B, 4), m4);
      const __m512i se = lane_word(sc16, 2 * p), so = lane_word(sc16, 2 * p + 1);
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) {
        const int8_t* q = a[c][b].qs + 64 * p;
        lo[0][c] = _mm512_dpwssd_epi32(lo[0][c], _mm512_maddubs_epi16(ule, bcast16(q)), se);
        hi[0][c] = _mm512_dpwssd_epi32(hi[0][c], _mm512_maddubs_epi16(uhe, bcast16(q + 16)), se);
        lo[U - 1][c] = _mm512_dpwssd_epi32(lo[U - 1][c], _mm512_maddubs_epi16(ulo, bcast16(q + 32)), so);
        hi[U - 1][c] = _mm512_dpwssd_epi32(hi[U - 1][c], _mm512_maddubs_epi16(uho, bcast16(q + 48)), so);
      }
    }
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      __m512i l = lo[0][c], h = hi[0][c];
      if constexpr (U == 2) {
        l = _mm512_add_epi32(l, lo[1][c]);
        h = _mm512_add_epi32(h, hi[1][c]);
      }
      const float da = ad[c * nb + b];
      const __m512 d = _mm512_mul_ps(_mm512_set1_ps(da), dw);
      acc_lo[c] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(l), acc_lo[c]);
      acc_hi[c] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(h), acc_hi[c]);
      const __m512i prod = _mm512_madd_epi16(mn16, _mm512_broadcast_i32x4(q8s[c * nb + b].v));
      acc_m[c] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(-da), dmw), _mm512_cvtepi32_ps(prod), acc_m[c]);
    }
  }
#pragma GCC unroll 4
  for (int c = 0; c < C; ++c) {
    alignas(64) float t[16], m[16];
    _mm512_store_ps(t, _mm512_add_ps(acc_lo[c], acc_hi[c]));  // v_i + v_{i+4}, per row
    _mm512_store_ps(m, acc_m[c]);
    for (int k = 0; k < 4; ++k) {
      const float s = (t[4 * k] + t[4 * k + 2]) + (t[4 * k + 1] + t[4 * k + 3]);
      out[k * C + c] = s + ((m[4 * k] + m[4 * k + 2]) + (m[4 * k + 1] + m[4 * k + 3]));
    }
  }
}

using TileFn = void (*)(int64_t, const uint8_t*, const BlockQ8_K* const*, const Q8s*, const float*, float*);
constexpr TileFn kTiles[kCols] = {&tile<1>, &tile<2>, &tile<3>, &tile<4>};

}  // namespace

void gemm_q4_Kx4_avx512(int64_t n, const uint8_t* Wr, int64_t i0, int64_t i1, const uint8_t* act, size_t act_stride,
                        int64_t n_act, float* Y, int64_t ldy) {
  thread_local std::vector<Q8s> q8s;  // per thread, grown, never shrunk
  thread_local std::vector<float> ad;
  const int64_t nb = n / kQK_K;
  if (q8s.size() < static_cast<size_t>(n_act * nb)) q8s.resize(static_cast<size_t>(n_act * nb));
  if (ad.size() < static_cast<size_t>(n_act * nb)) ad.resize(static_cast<size_t>(n_act * nb));
  pack_act(act, act_stride, n_act, nb, q8s.data(), ad.data());
  const size_t gb = q4_Kx4_group_bytes(nb);
  constexpr int64_t G = kQ4_Kx4Rows;
  for (int64_t grp = i0 / G; grp * G < i1; ++grp) {
    const uint8_t* w = Wr + gb * static_cast<size_t>(grp);
    const int64_t r0 = std::max(i0, grp * G), r1 = std::min(i1, grp * G + G);
    for (int64_t c0 = 0; c0 < n_act; c0 += kCols) {
      const int C = static_cast<int>(n_act - c0 < kCols ? n_act - c0 : kCols);
      const BlockQ8_K* a[kCols];
      for (int c = 0; c < C; ++c) a[c] = reinterpret_cast<const BlockQ8_K*>(act + static_cast<size_t>(c0 + c) * act_stride);
      float out[G * kCols];
      kTiles[C - 1](nb, w, a, q8s.data() + c0 * nb, ad.data() + c0 * nb, out);
      for (int c = 0; c < C; ++c)
        for (int64_t r = r0; r < r1; ++r) Y[(c0 + c) * ldy + r] = out[(r - grp * G) * C + c];
    }
  }
}

}  // namespace df::cpu
