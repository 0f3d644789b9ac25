// AVX-512 VNNI kernel over the Q4_K x16 layout (repack.h): 16 weight rows (one int32 / f32
// lane each) x up to 4 tokens.
//
// Per super-block, sub-block pair p (sub-blocks 2p, 2p+1) and 4-byte step j, one 64-byte
// vector holds bytes 32p + 4j .. +3 of the 16 rows: the low nibbles are sub-block 2p's
// elements 4j .. 4j+3, the high ones sub-block 2p+1's. vpdpbusd against the token's quants
// (4 bytes broadcast) sums each sub-block exactly (int32, per row), vpmulld scales it by the
// row's 6-bit scale, and the mins term is vpdpwssd of the row's mins (int16 pairs) with the
// token's per-sub-block quant sums (from Q8_K's bsums). Then per output and super-block, in
// block order (one f32 chain each for the scales and the mins, as llama.cpp's repacked
// Q4_K GEMM):
//   acc  = fma(fp16(d_w)    * d_a, float(sum_v sc_v * isum_v), acc)
//   accm = fma(fp16(dmin_w) * d_a, float(sum_v m_v * bsum_v), accm)
// and the output is acc - accm. Every row gets the same bits whatever the tile, the number
// of tokens or the row range (the decode GEMV is the same code with one token).
#include <immintrin.h>

#include <algorithm>
#include <vector>

#if defined(__GNUC__) && !defined(__clang__)  // GCC bug 105593, as legacy_avx512.cpp
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "quant/blocks.h"
#include "quant/cpu/repack.h"
#include "quant/cpu/repack_drive.h"
#include "quant/cpu/simd_avx2.h"

namespace df::cpu {
namespace {

constexpr int kCols = 4;  // tokens per tile
// Decode prefetch (bytes ahead of the stream), as the Q4_0 kernel's.
constexpr int64_t kPrefetchL1 = 3072, kPrefetchL2 = 12288;

struct Q8s {     // a token's super-block: quant sums of its 8 sub-blocks (int16)
  int16_t v[8];
  float d;       // its scale
};

// Activation rows (Q8_K blocks) -> Q8s [token][block] (the bsum pairs, as Mk::step's hadd).
void pack_act(const uint8_t* act, size_t act_stride, int64_t n_act, int64_t nb, Q8s* q8s) {
  for (int64_t c = 0; c < n_act; ++c) {
    const auto* a = reinterpret_cast<const BlockQ8_K*>(act + static_cast<size_t>(c) * act_stride);
    for (int64_t b = 0; b < nb; ++b) {
      const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].bsums));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q8s[c * nb + b].v),
                       _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1)));
      q8s[c * nb + b].d = a[b].d;
    }
  }
}

inline __m512i bcast4(const void* p) { return _mm512_set1_epi32(static_cast<int>(simd::load_u32(p))); }

// Y rows [row0, row0 + 16) masked by `rows`, tokens c < C: y[c * ldy + r] = dot(row r, token c).
template <int C>
void tile(int64_t nb, const uint8_t* grp, const BlockQ8_K* const* a, const Q8s* q8s, float* y, int64_t ldy,
          __mmask16 rows) {
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  __m512 acc[C], accm[C];
#pragma GCC unroll 4
  for (int c = 0; c < C; ++c) acc[c] = accm[c] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockOffsets o = block_offsets(b, nb, kQ4_Kx16Q, kQ4_Kx16Meta);
    const uint8_t* qs = grp + o.q;
    const uint8_t* meta = grp + o.m;  // sc [8][16], m pairs [4][16][2], d [16], dmin [16]
    __m512i isum[C], msum[C];
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) isum[c] = msum[c] = _mm512_setzero_si512();
#pragma GCC unroll 1
    for (int p = 0; p < 4; ++p) {
      if constexpr (C == 1)
        for (int l = 0; l < 8; ++l) {
          _mm_prefetch(reinterpret_cast<const char*>(qs + 512 * p + kPrefetchL1 + 64 * l), _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(qs + 512 * p + kPrefetchL2 + 64 * l), _MM_HINT_T1);
        }
      __m512i pe[C], po[C];
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) pe[c] = po[c] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        const __m512i v = _mm512_loadu_si512(qs + (p * 8 + j) * 64);
        const __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
#pragma GCC unroll 4
        for (int c = 0; c < C; ++c) {
          const int8_t* q = a[c][b].qs + 64 * p;
          pe[c] = _mm512_dpbusd_epi32(pe[c], lo, bcast4(q + 4 * j));
          po[c] = _mm512_dpbusd_epi32(po[c], hi, bcast4(q + 32 + 4 * j));
        }
      }
      const __m512i se = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(meta + 32 * p)));
      const __m512i so = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(meta + 32 * p + 16)));
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c)
        isum[c] = _mm512_add_epi32(isum[c], _mm512_add_epi32(_mm512_mullo_epi32(pe[c], se), _mm512_mullo_epi32(po[c], so)));
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m512i mp = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(meta + 128 + 32 * j)));
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) msum[c] = _mm512_dpwssd_epi32(msum[c], mp, bcast4(q8s[c * nb + b].v + 2 * j));
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(meta + 256)));
    const __m512 dmw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(meta + 288)));
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      const __m512 da = _mm512_set1_ps(q8s[c * nb + b].d);
      acc[c] = _mm512_fmadd_ps(_mm512_mul_ps(dw, da), _mm512_cvtepi32_ps(isum[c]), acc[c]);
      accm[c] = _mm512_fmadd_ps(_mm512_mul_ps(dmw, da), _mm512_cvtepi32_ps(msum[c]), accm[c]);
    }
  }
#pragma GCC unroll 4
  for (int c = 0; c < C; ++c) _mm512_mask_storeu_ps(y + c * ldy, rows, _mm512_sub_ps(acc[c], accm[c]));
}

using TileFn = void (*)(int64_t, const uint8_t*, const BlockQ8_K* const*, const Q8s*, float*, int64_t, __mmask16);
constexpr TileFn kTiles[kCols] = {&tile<1>, &tile<2>, &tile<3>, &tile<4>};

}  // namespace

void gemm_q4_Kx16_avx512(int64_t n, const uint8_t* Wr, int64_t i0, int64_t i1, const uint8_t* act, size_t act_stride,
                         int64_t n_act, float* Y, int64_t ldy) {
  thread_local std::vector<Q8s> q8s;  // per thread, grown, never shrunk
  const int64_t nb = n / kQK_K;
  if (q8s.size() < static_cast<size_t>(n_act * nb)) q8s.resize(static_cast<size_t>(n_act * nb));
  pack_act(act, act_stride, n_act, nb, q8s.data());
  repack::drive_x16<BlockQ8_K, kCols>(
      Wr, q4_Kx16_group_bytes(nb), i0, i1, act, act_stride, n_act,
      [&](int C, const uint8_t* w, const BlockQ8_K* const* a, int64_t c0, int64_t row0, __mmask16 rows) {
        kTiles[C - 1](nb, w, a, q8s.data() + c0 * nb, Y + c0 * ldy + row0, ldy, rows);
      });
}

// ---------------- Q6_K x16 ----------------
//
// Per super-block: ql vectors [c 0..1][h 0..1][s 0..7] (lane r: ql bytes 64c + 32h + 4s .. +3
// of row r; low nibbles: group 4c + h, high: group 4c + h + 2, elements 4s .. 4s+3) and qh
// vectors [c][s] (lane r: qh bytes 32c + 4s .. +3; bit pair j: group 4c + j). Each 6-bit
// quant q = nibble | (2 bits << 4) is unsigned (the value is q - 32). Per output:
//   isum = sum_sub sc_sub * (sub-block's sum of q * a) - 32 * sum_sub sc_sub * bsum_sub
//   acc  = fma(fp16(d_w) * d_a, float(isum), acc)      (one chain; the output is acc)
namespace {

constexpr int kCols6 = 4;

// Y rows [row0, row0 + 16) masked by `rows`, tokens c < C.
template <int C>
void tile6(int64_t nb, const uint8_t* grp, const BlockQ8_K* const* a, float* y, int64_t ldy, __mmask16 rows) {
  const __m512i m4 = _mm512_set1_epi8(0x0f), m2 = _mm512_set1_epi8(0x03);
  __m512 acc[C];
#pragma GCC unroll 4
  for (int c = 0; c < C; ++c) acc[c] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockOffsets o = block_offsets(b, nb, kQ6_Kx16Q, kQ6_Kx16Meta);
    const uint8_t* ql = grp + o.q;             // [c][h][s][row][4]
    const uint8_t* qh = grp + o.q + 2048;      // [c][s][row][4]
    const uint8_t* meta = grp + o.m;           // sc [sub 0..15][row] (int8), d [row] (fp16)
    __m512i isum[C];
    // -32 * sum_sub sc_sub * bsum_sub: sc pairs (2k, 2k+1) of each row against the bsum pairs
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) isum[c] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(meta + 32 * k));
      const __m128i od = _mm_loadu_si128(reinterpret_cast<const __m128i*>(meta + 32 * k + 16));
      const __m512i pair = _mm512_cvtepi8_epi16(_mm256_inserti128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi8(e, od)),
                                                                          _mm_unpackhi_epi8(e, od), 1));
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) isum[c] = _mm512_dpwssd_epi32(isum[c], pair, bcast4(a[c][b].bsums + 2 * k));
    }
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) isum[c] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(isum[c], 5));
#pragma GCC unroll 1
    for (int cc = 0; cc < 2; ++cc)
#pragma GCC unroll 1
      for (int half = 0; half < 2; ++half) {  // elements 16 half .. +15 of each group: sub-block 2v + half
        if constexpr (C == 1)
          for (int l = 0; l < 12; ++l) {
            _mm_prefetch(reinterpret_cast<const char*>(ql + (cc * 2 + half) * 768 + kPrefetchL1 + 64 * l), _MM_HINT_T0);
            _mm_prefetch(reinterpret_cast<const char*>(ql + (cc * 2 + half) * 768 + kPrefetchL2 + 64 * l), _MM_HINT_T1);
          }
        __m512i p[4][C];
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j)
#pragma GCC unroll 4
          for (int c = 0; c < C; ++c) p[j][c] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int s4 = 0; s4 < 4; ++s4) {
          const int s = 4 * half + s4;
          const __m512i h = _mm512_loadu_si512(qh + (cc * 8 + s) * 64);
          const __m512i l0 = _mm512_loadu_si512(ql + ((cc * 2 + 0) * 8 + s) * 64);
          const __m512i l1 = _mm512_loadu_si512(ql + ((cc * 2 + 1) * 8 + s) * 64);
          __m512i q[4];  // groups 4cc + j, elements 4s .. 4s+3
          q[0] = _mm512_or_si512(_mm512_and_si512(l0, m4), _mm512_slli_epi16(_mm512_and_si512(h, m2), 4));
          q[1] = _mm512_or_si512(_mm512_and_si512(l1, m4), _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, 2), m2), 4));
          q[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l0, 4), m4), _mm512_and_si512(h, _mm512_set1_epi8(0x30)));
          q[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l1, 4), m4),
                                 _mm512_and_si512(_mm512_srli_epi16(h, 2), _mm512_set1_epi8(0x30)));
#pragma GCC unroll 4
          for (int c = 0; c < C; ++c) {
            const int8_t* qa = a[c][b].qs + 128 * cc + 4 * s;
#pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) p[j][c] = _mm512_dpbusd_epi32(p[j][c], q[j], bcast4(qa + 32 * j));
          }
        }
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          const int sub = 2 * (4 * cc + j) + half;
          const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(meta + 16 * sub)));
#pragma GCC unroll 4
          for (int c = 0; c < C; ++c) isum[c] = _mm512_add_epi32(isum[c], _mm512_mullo_epi32(p[j][c], sc));
        }
      }
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(meta + 256)));
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c)
      acc[c] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(a[c][b].d)), _mm512_cvtepi32_ps(isum[c]), acc[c]);
  }
#pragma GCC unroll 4
  for (int c = 0; c < C; ++c) _mm512_mask_storeu_ps(y + c * ldy, rows, acc[c]);
}

using Tile6Fn = void (*)(int64_t, const uint8_t*, const BlockQ8_K* const*, float*, int64_t, __mmask16);
constexpr Tile6Fn kTiles6[kCols6] = {&tile6<1>, &tile6<2>, &tile6<3>, &tile6<4>};

}  // namespace

void gemm_q6_Kx16_avx512(int64_t n, const uint8_t* Wr, int64_t i0, int64_t i1, const uint8_t* act, size_t act_stride,
                         int64_t n_act, float* Y, int64_t ldy) {
  const int64_t nb = n / kQK_K;
  repack::drive_x16<BlockQ8_K, kCols6>(
      Wr, q6_Kx16_group_bytes(nb), i0, i1, act, act_stride, n_act,
      [&](int C, const uint8_t* w, const BlockQ8_K* const* a, int64_t c0, int64_t row0, __mmask16 rows) {
        kTiles6[C - 1](nb, w, a, Y + c0 * ldy + row0, ldy, rows);
      });
}

}  // namespace df::cpu
