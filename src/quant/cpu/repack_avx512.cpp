// AVX-512 VNNI kernel over the Q4_0 x8 layout (repack.h): 8 weight rows x up to 4 tokens.
//
// One 64-byte load holds block b of 4 rows (16 nibble bytes each, one 128-bit lane a row):
//   lo = v & 15         lane k: row k's elements 0-15  (ggml's lanes 0-3 of that block)
//   hi = (v >> 4) & 15  lane k: row k's elements 16-31 (ggml's lanes 4-7)
// so vpdpbusd against the token's quants 0-15 (resp. 16-31) broadcast to the four 128-bit
// lanes, started from -8 * their lane sums, gives per row exactly the int32 lane sums of the
// planar decode kernel (block32::Mk: dot4(u, a) - dot4(8, a), lane l = elements 4l..4l+3).
// Per block and output: acc = fma(fp16(d_w) * fp16(d_a), float(isum), acc) on those 8
// lanes (held as 4 in `lo` and 4 in `hi`), then ggml's hsum_float_8:
//   (v0+v4 + v2+v6) + (v1+v5 + v3+v7)  ==  ((lo0+hi0) + (lo2+hi2)) + ((lo1+hi1) + (lo3+hi3)).
// Every output thus has the planar kernel's bits (one f32 chain per output lane, blocks in
// order), for any tile, token count and row range.
#include <immintrin.h>

#include <algorithm>
#include <vector>

#if defined(__GNUC__) && !defined(__clang__)  // GCC bug 105593, as legacy_avx512.cpp
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "quant/blocks.h"
#include "quant/cpu/repack.h"
#include "quant/cpu/simd_avx2.h"

namespace df::cpu {
namespace {

constexpr int kCols = 4;  // tokens per tile

struct alignas(64) AQ {  // one token's block, ready for the tile
  __m128i lo, hi;        // quants 0-15, 16-31
  __m128i nlo, nhi;      // -8 * lane sums of lo, hi
};

// Activation rows (Q8_0 blocks) -> AQ [token][block] and scales ad [token][block].
void pack_act(const uint8_t* act, size_t act_stride, int64_t n_act, int64_t ng, AQ* aq, float* ad) {
  const __m256i eight = _mm256_set1_epi8(8);
  for (int64_t c = 0; c < n_act; ++c) {
    const auto* a = reinterpret_cast<const BlockQ8_0*>(act + static_cast<size_t>(c) * act_stride);
    for (int64_t g = 0; g < ng; ++g) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[g].qs));
      const __m256i nc = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_dpbusd_epi32(_mm256_setzero_si256(), eight, q));
      AQ& o = aq[c * ng + g];
      o.lo = _mm256_castsi256_si128(q);
      o.hi = _mm256_extracti128_si256(q, 1);
      o.nlo = _mm256_castsi256_si128(nc);
      o.nhi = _mm256_extracti128_si256(nc, 1);
      ad[c * ng + g] = simd::fp16(a[g].d);
    }
  }
}

// out[r * C + c] = dot(row r of the group, token c), r < 8, c < C.
template <int C>
void tile(int64_t ng, const uint8_t* grp, const AQ* aq, const float* ad, float* out) {
  const uint8_t* qs = grp;
  const uint16_t* d = reinterpret_cast<const uint16_t*>(grp + ng * 128);
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  const __m512i idx0 = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  const __m512i idx1 = _mm512_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7);
  __m512 lo[2][C], hi[2][C];
#pragma GCC unroll 4
  for (int c = 0; c < C; ++c) lo[0][c] = lo[1][c] = hi[0][c] = hi[1][c] = _mm512_setzero_ps();
  for (int64_t g = 0; g < ng; ++g) {
    const __m512i v0 = _mm512_load_si512(qs + g * 128), v1 = _mm512_load_si512(qs + g * 128 + 64);
    const __m512i l0 = _mm512_and_si512(v0, m4), h0 = _mm512_and_si512(_mm512_srli_epi16(v0, 4), m4);
    const __m512i l1 = _mm512_and_si512(v1, m4), h1 = _mm512_and_si512(_mm512_srli_epi16(v1, 4), m4);
    const __m512 wd = _mm512_castps256_ps512(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(d + g * 8))));
    const __m512 w0 = _mm512_permutexvar_ps(idx0, wd), w1 = _mm512_permutexvar_ps(idx1, wd);
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      const AQ& a = aq[c * ng + g];
      const __m512i alo = _mm512_broadcast_i32x4(a.lo), ahi = _mm512_broadcast_i32x4(a.hi);
      const __m512i nlo = _mm512_broadcast_i32x4(a.nlo), nhi = _mm512_broadcast_i32x4(a.nhi);
      const __m512 da = _mm512_set1_ps(ad[c * ng + g]);
      const __m512 s0 = _mm512_mul_ps(w0, da), s1 = _mm512_mul_ps(w1, da);
      lo[0][c] = _mm512_fmadd_ps(s0, _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(nlo, l0, alo)), lo[0][c]);
      hi[0][c] = _mm512_fmadd_ps(s0, _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(nhi, h0, ahi)), hi[0][c]);
      lo[1][c] = _mm512_fmadd_ps(s1, _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(nlo, l1, alo)), lo[1][c]);
      hi[1][c] = _mm512_fmadd_ps(s1, _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(nhi, h1, ahi)), hi[1][c]);
    }
  }
#pragma GCC unroll 4
  for (int c = 0; c < C; ++c)
    for (int h = 0; h < 2; ++h) {
      alignas(64) float t[16];
      _mm512_store_ps(t, _mm512_add_ps(lo[h][c], hi[h][c]));  // v_i + v_{i+4}, per row
      for (int k = 0; k < 4; ++k)
        out[(4 * h + k) * C + c] = (t[4 * k] + t[4 * k + 2]) + (t[4 * k + 1] + t[4 * k + 3]);
    }
}

using TileFn = void (*)(int64_t, const uint8_t*, const AQ*, const float*, float*);
constexpr TileFn kTiles[kCols] = {&tile<1>, &tile<2>, &tile<3>, &tile<4>};

}  // namespace

void gemm_q4_0x8_avx512(int64_t n, const uint8_t* Wr, int64_t i0, int64_t i1, const uint8_t* act, size_t act_stride,
                        int64_t n_act, float* Y, int64_t ldy) {
  thread_local std::vector<AQ> aq;  // per thread, grown, never shrunk
  thread_local std::vector<float> ad;
  const int64_t ng = n / kQK4;
  if (aq.size() < static_cast<size_t>(n_act * ng)) aq.resize(static_cast<size_t>(n_act * ng));
  if (ad.size() < static_cast<size_t>(n_act * ng)) ad.resize(static_cast<size_t>(n_act * ng));
  pack_act(act, act_stride, n_act, ng, aq.data(), ad.data());
  const size_t gb = q4_0x8_group_bytes(ng);
  constexpr int64_t G = kQ4_0x8Rows;
  for (int64_t grp = i0 / G; grp * G < i1; ++grp) {
    const uint8_t* w = Wr + gb * static_cast<size_t>(grp);
    const int64_t r0 = std::max(i0, grp * G), r1 = std::min(i1, grp * G + G);
    for (int64_t c0 = 0; c0 < n_act; c0 += kCols) {
      const int C = static_cast<int>(n_act - c0 < kCols ? n_act - c0 : kCols);
      float out[G * kCols];
      kTiles[C - 1](ng, w, aq.data() + c0 * ng, ad.data() + c0 * ng, out);
      for (int c = 0; c < C; ++c)
        for (int64_t r = r0; r < r1; ++r) Y[(c0 + c) * ldy + r] = out[(r - grp * G) * C + c];
    }
  }
}

}  // namespace df::cpu
