// AVX-512 VNNI GEMM of Q8_0 weights with Q8_0 activations for prompt prefill (4+ activation
// rows), in ggml's vec_dot order, the order of the AVX2 multi-row tiles and of the scalar
// reference's gemm (same bits for every output: tests/unit/test_kernels_batch.cpp). Included
// only by legacy_avx512.cpp (internal linkage).
//
// Numerics: per output (weight row r, token c), over the 32-element blocks g in order:
//   isum[l] = exact int32 sum of elements 4l .. 4l+3 of block g's products, l = 0..7
//   acc[l]  = fma(float(isum[l]), S, acc[l])        S = fp16(d_w) * fp16(d_a) (exact in f32)
// then ggml's hsum_float_8 of acc: (acc0+acc4 + acc2+acc6) + (acc1+acc5 + acc3+acc7).
//
// Layout: the 8 lanes of one output are 8 independent f32 chains, so they need not share a
// vector. Here a 512-bit accumulator holds one lane l of 16 weight rows for one token:
// acc[c][l] lane r = lane l of output (row r, token c). Per block and lane one vpdpbusd of the
// 16 rows' 4-byte groups 4l .. 4l+3 (stored +128, unsigned) with the token's 4 bytes
// (broadcast, signed), started from -128 * the sum of those 4 activation bytes, gives the 16
// exact isum[l]; the scale vector S (16 rows' d_w times the token's d_a) is one multiply per
// block, shared by the 8 lanes. The final horizontal sum is 7 vector adds across the 8
// accumulators, in hsum_float_8's order, and writes 16 contiguous outputs of the token's row.
// Against 8-lane vectors per output (block32_vnni512.h, used for Q8_0 before: 4 instructions
// and ~1.7 loads per output and block, bound by the loads) this takes 5 instructions and 2.5
// loads per 2 outputs and block (2 of the 5 are the broadcast loads); measured 1.2-1.4x its
// speed (bench/cpu/results/q8_lanes_2026-12-02_cpuq8.md).
//
// Per call (per-thread scratch, grown, never shrunk):
//   activations: nc[token][g][l] (-128 * lane sums of the quants) and da[token][g] (f32 scale);
//                the quants are read from the activation rows themselves;
//   weights:     per group of 16 rows, u[g][l] (the transposed quants, +128) and wd[g] (16 f32
//                scales), made once and swept over all tokens in tiles of kCols.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <vector>

#include "quant/blocks.h"
#include "quant/cpu/simd_avx2.h"

namespace df::cpu::q8lanes {

constexpr int kRows = 16;  // weight rows per group (one 32-bit lane each)
constexpr int kCols = 3;   // tokens per tile: 3 x 8 accumulators

struct alignas(64) U16 {  // one block's 4-byte groups l of 16 rows
  __m512i v;
};
struct alignas(64) D16 {  // 16 rows' scales
  __m512 v;
};

// The 16 rows w[0..15], block g -> u[l] (lane r = bytes 4l .. 4l+3 of row r, +128), wd (lane
// r = fp16(d) of row r): an 8 x 8 transpose of 32-bit groups in each 256-bit half (rows r and
// r + 8 share a vector), then the halves' 128-bit quarters gathered by lane.
inline void pack_rows(const BlockQ8_0* const* w, int64_t g, U16* u, D16* wd) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512i v[8];
#pragma GCC unroll 8
  for (int r = 0; r < 8; ++r)
    v[r] = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r][g].qs))),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r + 8][g].qs)), 1);
  // t: 128-bit quarter q of t[2i] = rows 2i, 2i+1 interleaved, groups of that quarter's low
  // 2 lanes; s[j], s[4 + j] quarter q: lane j (q even) or 4 + j (q odd) of 4 rows
  __m512i t[8], s[8];
#pragma GCC unroll 4
  for (int r = 0; r < 8; r += 2) {
    t[r] = _mm512_unpacklo_epi32(v[r], v[r + 1]);
    t[r + 1] = _mm512_unpackhi_epi32(v[r], v[r + 1]);
  }
#pragma GCC unroll 2
  for (int r = 0; r < 8; r += 4) {
    s[r] = _mm512_unpacklo_epi64(t[r], t[r + 2]);
    s[r + 1] = _mm512_unpackhi_epi64(t[r], t[r + 2]);
    s[r + 2] = _mm512_unpacklo_epi64(t[r + 1], t[r + 3]);
    s[r + 3] = _mm512_unpackhi_epi64(t[r + 1], t[r + 3]);
  }
  // s[j] quarters: (rows 0-3, lane j), (rows 0-3, lane 4+j), (rows 8-11, lane j), (rows 8-11,
  // lane 4+j); s[4+j] the same for rows 4-7 and 12-15
  const __m512i lo_idx = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
  const __m512i hi_idx = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    u[j].v = _mm512_xor_si512(_mm512_permutex2var_epi64(s[j], lo_idx, s[4 + j]), flip);
    u[4 + j].v = _mm512_xor_si512(_mm512_permutex2var_epi64(s[j], hi_idx, s[4 + j]), flip);
  }
  alignas(32) uint16_t d[kRows];
  for (int r = 0; r < kRows; ++r) d[r] = w[r][g].d;
  wd->v = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(d)));
}

// One token's blocks -> nc[g * 8 + l] = -128 * (sum of quants 4l .. 4l+3 of block g), da[g].
inline void pack_act(const BlockQ8_0* a, int64_t ng, int32_t* nc, float* da) {
  const __m256i off = _mm256_set1_epi8(static_cast<char>(0x80));  // 128 as the unsigned operand
  for (int64_t g = 0; g < ng; ++g) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[g].qs));
    const __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), off, q);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(nc + g * 8), _mm256_sub_epi32(_mm256_setzero_si256(), sums));
    da[g] = simd::fp16(a[g].d);
  }
}

// y[c * ldy + r] = dot(row r, token c) for the lanes r in `rows`, c < C.
template <int C>
void tile(int64_t ng, const U16* u, const D16* wd, const BlockQ8_0* const* a, const int32_t* const* nc,
          const float* const* da, float* y, int64_t ldy, __mmask16 rows) {
  __m512 acc[C][8];
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c)
#pragma GCC unroll 8
    for (int l = 0; l < 8; ++l) acc[c][l] = _mm512_setzero_ps();
  for (int64_t g = 0; g < ng; ++g) {
    __m512 s[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) s[c] = _mm512_mul_ps(wd[g].v, _mm512_set1_ps(da[c][g]));
#pragma GCC unroll 8
    for (int l = 0; l < 8; ++l) {
      const __m512i w = u[g * 8 + l].v;
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        const __m512i q = _mm512_set1_epi32(static_cast<int>(simd::load_u32(a[c][g].qs + 4 * l)));
        const __m512i isum = _mm512_dpbusd_epi32(_mm512_set1_epi32(nc[c][g * 8 + l]), w, q);
        acc[c][l] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), s[c], acc[c][l]);
      }
    }
  }
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) {
    const __m512 u0 = _mm512_add_ps(_mm512_add_ps(acc[c][0], acc[c][4]), _mm512_add_ps(acc[c][2], acc[c][6]));
    const __m512 u1 = _mm512_add_ps(_mm512_add_ps(acc[c][1], acc[c][5]), _mm512_add_ps(acc[c][3], acc[c][7]));
    _mm512_mask_storeu_ps(y + c * ldy, rows, _mm512_add_ps(u0, u1));
  }
}

using TileFn = void (*)(int64_t, const U16*, const D16*, const BlockQ8_0* const*, const int32_t* const*,
                        const float* const*, float*, int64_t, __mmask16);
constexpr TileFn kTiles[kCols] = {&tile<1>, &tile<2>, &tile<3>};

struct Scratch {
  std::vector<U16> u;        // [g][l]
  std::vector<D16> wd;       // [g]
  std::vector<int32_t> nc;   // [token][g][l]
  std::vector<float> da;     // [token][g]
};

template <class T>
T* grow(std::vector<T>& v, int64_t n) {
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
  return v.data();
}

// Kernels::gemm's contract for Q8_0, n_act >= 1.
inline void gemm(int64_t n, const uint8_t* W, size_t w_stride, int64_t i0, int64_t i1, const uint8_t* act,
                 size_t act_stride, int64_t n_act, float* Y, int64_t ldy) {
  thread_local Scratch sc;
  const int64_t ng = n / kQK8_0;
  U16* u = grow(sc.u, ng * 8);
  D16* wd = grow(sc.wd, ng);
  int32_t* nc = grow(sc.nc, n_act * ng * 8);
  float* da = grow(sc.da, n_act * ng);
  auto act_row = [&](int64_t c) {
    return reinterpret_cast<const BlockQ8_0*>(act + static_cast<size_t>(c) * act_stride);
  };
  for (int64_t c = 0; c < n_act; ++c) pack_act(act_row(c), ng, nc + c * ng * 8, da + c * ng);
  for (int64_t i = i0; i < i1; i += kRows) {
    const int R = static_cast<int>(i1 - i < kRows ? i1 - i : kRows);
    const BlockQ8_0* w[kRows];  // rows past R repeat row i (computed, never stored)
    for (int r = 0; r < kRows; ++r)
      w[r] = reinterpret_cast<const BlockQ8_0*>(W + static_cast<size_t>(i + (r < R ? r : 0)) * w_stride);
    for (int64_t g = 0; g < ng; ++g) pack_rows(w, g, u + g * 8, wd + g);
    const __mmask16 rows = static_cast<__mmask16>((1u << R) - 1u);
    for (int64_t c0 = 0; c0 < n_act; c0 += kCols) {
      const int C = static_cast<int>(n_act - c0 < kCols ? n_act - c0 : kCols);
      const BlockQ8_0* a[kCols];
      const int32_t* ncs[kCols];
      const float* das[kCols];
      for (int c = 0; c < C; ++c) {
        a[c] = act_row(c0 + c);
        ncs[c] = nc + (c0 + c) * ng * 8;
        das[c] = da + (c0 + c) * ng;
      }
      kTiles[C - 1](ng, u, wd, a, ncs, das, Y + c0 * ldy + i, ldy, rows);
    }
  }
}

}  // namespace df::cpu::q8lanes
