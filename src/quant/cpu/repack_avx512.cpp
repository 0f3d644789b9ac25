// AVX-512 VNNI kernel over the Q4_0 x16 layout (repack.h): 16 weight rows (one int32 / f32
// lane each) x up to 8 tokens.
//
// A block's quants are four 64-byte vectors j = 0..3, each holding bytes 4j .. 4j+3 of the
// 16 rows' nibbles (4 bytes a lane): the low nibbles are elements 4j .. 4j+3, the high ones
// 16 + 4j .. 16 + 4j + 3. Eight vpdpbusd against the token's 4-byte groups (broadcast),
// started from -8 * the token block's quant sum, give each lane its row's exact block sum
//   isum = sum_e (q_e - 8) * a_e,
// then per output and block, in block order (one f32 chain per output: llama.cpp's Q4_0
// repacked GEMM / GEMV order on AVX2 / AVX-512):
//   acc = fma(fp16(d_w) * fp16(d_a), float(isum), acc).
// The result is acc: no horizontal sum. Every row gets the same bits whatever the tile, the
// number of tokens or the row range (the decode GEMV is the same code with one token).
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

constexpr int kCols = 8;              // tokens per tile
// Decode prefetch, bytes ahead of the stream: into L1 and, further, into L2 (1.4-1.8x from
// DRAM vs none; 3072 / 12288 the best of the distances tried; a Q4_0 0.6B decode with L1
// prefetch only measured 4-16 % slower, alternating, although a loop over the same matrices
// alone streamed 6 % faster with it: measure in the model).
constexpr int64_t kPrefetchL1 = 3072, kPrefetchL2 = 12288;

struct AB {      // one token's block
  int32_t nc;    // -8 * sum of its quants
  float d;       // its scale
};

// Activation rows (Q8_0 blocks) -> AB [token][block].
void pack_act(const uint8_t* act, size_t act_stride, int64_t n_act, int64_t ng, AB* ab) {
  const __m256i eight = _mm256_set1_epi8(8);
  for (int64_t c = 0; c < n_act; ++c) {
    const auto* a = reinterpret_cast<const BlockQ8_0*>(act + static_cast<size_t>(c) * act_stride);
    for (int64_t g = 0; g < ng; ++g) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[g].qs));
      ab[c * ng + g] = {-simd::hsum_i32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), eight, q)), simd::fp16(a[g].d)};
    }
  }
}

inline __m512i bcast4(const int8_t* p) { return _mm512_set1_epi32(static_cast<int>(simd::load_u32(p))); }

// Y rows [row0, row0 + 16) masked by `rows`, tokens c < C: y[c * ldy + r] = dot(row r, token c).
template <int C>
void tile(int64_t ng, const uint8_t* grp, const BlockQ8_0* const* a, const AB* ab, float* y, int64_t ldy,
          __mmask16 rows) {
  constexpr bool kTwoChains = C <= 2;  // decode: two integer chains per output (exact)
  const __m512i m4 = _mm512_set1_epi8(0x0f), m4hi = _mm512_set1_epi8(static_cast<char>(0xf0));
  __m512 acc[C];
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) acc[c] = _mm512_setzero_ps();
  for (int64_t g = 0; g < ng; ++g) {
    const BlockOffsets o = block_offsets(g, ng, kQ4_0x16Q, kQ4_0x16Meta);
    const uint8_t* qs = grp + o.q;
    if constexpr (C == 1)
      for (int l = 0; l < 4; ++l) {
        _mm_prefetch(reinterpret_cast<const char*>(qs + kPrefetchL1 + 64 * l), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(qs + kPrefetchL2 + 64 * l), _MM_HINT_T1);
      }
    // hi: the high nibbles in place (16 q) for the two-chain tiles, whose chain s1 is shifted
    // back once per block (exact: s1 is 16 x the integer sum), else shifted down per vector
    __m512i lo[4], hi[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m512i v = _mm512_loadu_si512(qs + 64 * j);
      lo[j] = _mm512_and_si512(v, m4);
      hi[j] = kTwoChains ? _mm512_and_si512(v, m4hi) : _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    }
    const __m512 wd = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(grp + o.m)));
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const int8_t* q = a[c][g].qs;
      __m512i s0 = _mm512_set1_epi32(ab[c * ng + g].nc);
      __m512i s1 = kTwoChains ? _mm512_setzero_si512() : s0;
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        s0 = _mm512_dpbusd_epi32(s0, lo[j], bcast4(q + 4 * j));
        if constexpr (kTwoChains)
          s1 = _mm512_dpbusd_epi32(s1, hi[j], bcast4(q + 16 + 4 * j));
        else
          s0 = _mm512_dpbusd_epi32(s0, hi[j], bcast4(q + 16 + 4 * j));
      }
      if constexpr (kTwoChains) s0 = _mm512_add_epi32(s0, _mm512_srai_epi32(s1, 4));
      const __m512 s = _mm512_mul_ps(wd, _mm512_set1_ps(ab[c * ng + g].d));
      acc[c] = _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(s0), acc[c]);
    }
  }
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) _mm512_mask_storeu_ps(y + c * ldy, rows, acc[c]);
}

using TileFn = void (*)(int64_t, const uint8_t*, const BlockQ8_0* const*, const AB*, float*, int64_t, __mmask16);
constexpr TileFn kTiles[kCols] = {&tile<1>, &tile<2>, &tile<3>, &tile<4>, &tile<5>, &tile<6>, &tile<7>, &tile<8>};

}  // namespace

void gemm_q4_0x16_avx512(int64_t n, const uint8_t* Wr, int64_t i0, int64_t i1, const uint8_t* act, size_t act_stride,
                         int64_t n_act, float* Y, int64_t ldy) {
  thread_local std::vector<AB> ab;  // per thread, grown, never shrunk
  const int64_t ng = n / kQK4;
  if (ab.size() < static_cast<size_t>(n_act * ng)) ab.resize(static_cast<size_t>(n_act * ng));
  pack_act(act, act_stride, n_act, ng, ab.data());
  repack::drive_x16<BlockQ8_0, kCols>(
      Wr, q4_0x16_group_bytes(ng), i0, i1, act, act_stride, n_act,
      [&](int C, const uint8_t* w, const BlockQ8_0* const* a, int64_t c0, int64_t row0, __mmask16 rows) {
        kTiles[C - 1](ng, w, a, ab.data() + c0 * ng, Y + c0 * ldy + row0, ldy, rows);
      });
}

// ---------------- Q8_0 x16 ----------------
//
// A block's quants are eight 64-byte vectors j = 0..7, lane r holding bytes 4j .. 4j+3 of
// row r's quants stored +128 (unsigned, for vpdpbusd). Eight vpdpbusd against the token's
// 4-byte groups (broadcast), started from -128 * the token block's quant sum, give each lane
// its row's exact block sum isum = sum_e q_e * a_e; then per output and block, in block order,
// acc = fma(fp16(d_w) * fp16(d_a), float(isum), acc) (one f32 chain, as Q4_0 x16 above).
namespace {

struct AB8 {     // one token's block
  int32_t nc;    // -128 * sum of its quants
  float d;       // its scale
};

void pack_act8(const uint8_t* act, size_t act_stride, int64_t n_act, int64_t ng, AB8* ab) {
  const __m256i one = _mm256_set1_epi8(1);
  for (int64_t c = 0; c < n_act; ++c) {
    const auto* a = reinterpret_cast<const BlockQ8_0*>(act + static_cast<size_t>(c) * act_stride);
    for (int64_t g = 0; g < ng; ++g) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[g].qs));
      const int32_t sum = simd::hsum_i32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), one, q));
      ab[c * ng + g] = {-128 * sum, simd::fp16(a[g].d)};
    }
  }
}

template <int C>
void tile8(int64_t ng, const uint8_t* grp, const BlockQ8_0* const* a, const AB8* ab, float* y, int64_t ldy,
           __mmask16 rows) {
  constexpr bool kTwoChains = C <= 2;  // decode: two integer chains per output (exact)
  __m512 acc[C];
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) acc[c] = _mm512_setzero_ps();
  for (int64_t g = 0; g < ng; ++g) {
    const BlockOffsets o = block_offsets(g, ng, kQ8_0x16Q, kQ8_0x16Meta);
    const uint8_t* qs = grp + o.q;
    if constexpr (C == 1)
      for (int l = 0; l < 8; ++l) {
        _mm_prefetch(reinterpret_cast<const char*>(qs + 2 * kPrefetchL1 + 64 * l), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(qs + 2 * kPrefetchL2 + 64 * l), _MM_HINT_T1);
      }
    __m512i w[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) w[j] = _mm512_loadu_si512(qs + 64 * j);
    const __m512 wd = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(grp + o.m)));
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const int8_t* q = a[c][g].qs;
      __m512i s0 = _mm512_set1_epi32(ab[c * ng + g].nc);
      __m512i s1 = kTwoChains ? _mm512_setzero_si512() : s0;
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        s0 = _mm512_dpbusd_epi32(s0, w[j], bcast4(q + 4 * j));
        if constexpr (kTwoChains)
          s1 = _mm512_dpbusd_epi32(s1, w[4 + j], bcast4(q + 16 + 4 * j));
        else
          s0 = _mm512_dpbusd_epi32(s0, w[4 + j], bcast4(q + 16 + 4 * j));
      }
      if constexpr (kTwoChains) s0 = _mm512_add_epi32(s0, s1);
      const __m512 s = _mm512_mul_ps(wd, _mm512_set1_ps(ab[c * ng + g].d));
      acc[c] = _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(s0), acc[c]);
    }
  }
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) _mm512_mask_storeu_ps(y + c * ldy, rows, acc[c]);
}

using Tile8Fn = void (*)(int64_t, const uint8_t*, const BlockQ8_0* const*, const AB8*, float*, int64_t, __mmask16);
constexpr Tile8Fn kTiles8[kCols] = {&tile8<1>, &tile8<2>, &tile8<3>, &tile8<4>,
                                    &tile8<5>, &tile8<6>, &tile8<7>, &tile8<8>};

}  // namespace

void gemm_q8_0x16_avx512(int64_t n, const uint8_t* Wr, int64_t i0, int64_t i1, const uint8_t* act, size_t act_stride,
                         int64_t n_act, float* Y, int64_t ldy) {
  thread_local std::vector<AB8> ab;  // per thread, grown, never shrunk
  const int64_t ng = n / kQK8_0;
  if (ab.size() < static_cast<size_t>(n_act * ng)) ab.resize(static_cast<size_t>(n_act * ng));
  pack_act8(act, act_stride, n_act, ng, ab.data());
  repack::drive_x16<BlockQ8_0, kCols>(
      Wr, q8_0x16_group_bytes(ng), i0, i1, act, act_stride, n_act,
      [&](int C, const uint8_t* w, const BlockQ8_0* const* a, int64_t c0, int64_t row0, __mmask16 rows) {
        kTiles8[C - 1](ng, w, a, ab.data() + c0 * ng, Y + c0 * ldy + row0, ldy, rows);
      });
}

}  // namespace df::cpu
