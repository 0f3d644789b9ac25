// AVX-512 (VNNI) kernels of Q4_0 Q4_1 Q5_0 Q5_1 MXFP4 NVFP4 Q8_0: block32_mk.h with vpdpbusd
// for the lane sums, and packed GEMMs for several activation rows: block32_vnni512.h for Q4_0
// and Q5_0 (one scale per group), q8_lanes_vnni512.h for Q8_0, the 512-bit pair kernel below
// for NVFP4.
// Bit-identical to the scalar reference and to ggml's vec_dot.
#include <immintrin.h>

#include <array>
#include <utility>
#include <vector>

// GCC 12's AVX-512 intrinsics trip -Wuninitialized through _mm512_undefined_* (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)  // clang has no -Wmaybe-uninitialized
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "quant/cpu/block32_mk.h"
#include "quant/cpu/block32_vnni512.h"
#include "quant/cpu/kernels.h"
#include "quant/cpu/q8_lanes_vnni512.h"
#include "quant/cpu/registry.h"
#include "quant/cpu/simd_avx2.h"

namespace df::cpu {
namespace {

struct Ops {
  static __m256i dot4(__m256i u, __m256i s) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s); }
};


// ---------------- VNNI GEMM over packed tiles (NVFP4: two scales per group) ----------------

// Several activation rows: the formats with one accumulator per output (no mins, no MXFP4
// accumulator pairs) put two activation rows side by side in a 512-bit vector, lanes 0-7
// for row c and 8-15 for row c + 1, against the same weight group in both halves. Each
// half follows block32::Mk's order exactly (per 32-element group: the exact int32 lane
// sums, acc = fma(scale_w * scale_a, float(isum), acc); then hsum_float_8), so a row gets
// the bits of the one-row kernel (tests/unit/test_kernels_batch.cpp). Weight groups are
// unpacked once per tile of 4 rows (unsigned quants and their f32 scale vector, the latter
// P::scale with an activation scale of 1: exact), activation rows once per call, in pairs,
// with -offset * (lane sums) as the accumulator's start.
namespace vnni {

constexpr int kRows = 4, kColPairs = 4;  // tile: 4 weight rows x 8 activation rows

struct APair {   // one pair of activation rows, one group
  __m512i q;     // quants of row c | row c + 1
  __m512i ncorr; // -offset * lane sums
  __m512 d;      // scales
};
struct WGroup {  // one weight row's group, in both halves
  __m512i u;     // unsigned quants
  __m512 d;      // scale vector (P::scale at activation scale 1)
};

template <class P>
void pack_act(const BlockQ8_0* a0, const BlockQ8_0* a1, int64_t ng, APair* out) {
  const __m512i off = _mm512_set1_epi8(static_cast<char>(P::kOffset));
  for (int64_t g = 0; g < ng; ++g) {
    const __m256i q0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a0[g].qs));
    const __m256i q1 = a1 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a1[g].qs)) : _mm256_setzero_si256();
    out[g].q = _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
    out[g].ncorr = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), off, out[g].q));
    const __m256 d1 = a1 ? simd::fp16x8(a1[g].d) : _mm256_setzero_ps();
    out[g].d = _mm512_insertf32x8(_mm512_castps256_ps512(simd::fp16x8(a0[g].d)), d1, 1);
  }
}

template <class P>
void pack_weights(const typename P::Block* w, int64_t ng, WGroup* out) {
  for (int64_t g = 0; g < ng; ++g) {
    const __m256i u = P::quants(w, g);
    out[g].u = _mm512_inserti64x4(_mm512_castsi256_si512(u), u, 1);
    const __m256 d = P::scale(w, g, _mm256_set1_ps(1.0f));
    out[g].d = _mm512_insertf32x8(_mm512_castps256_ps512(d), d, 1);
  }
}

template <int R, int CP>
void tile(int64_t ng, const WGroup* const* w, const APair* const* a, float* out /*[R][2 CP]*/) {
  __m512 acc[R][CP];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < CP; ++c) acc[r][c] = _mm512_setzero_ps();
  for (int64_t g = 0; g < ng; ++g) {
    __m512i u[R];
    __m512 wd[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      u[r] = w[r][g].u;
      wd[r] = w[r][g].d;
    }
#pragma GCC unroll 4
    for (int c = 0; c < CP; ++c) {
      const APair& ap = a[c][g];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m512i isum = _mm512_dpbusd_epi32(ap.ncorr, u[r], ap.q);
        acc[r][c] = _mm512_fmadd_ps(_mm512_mul_ps(wd[r], ap.d), _mm512_cvtepi32_ps(isum), acc[r][c]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < CP; ++c) {
      out[r * 2 * CP + 2 * c] = simd::hsum(_mm512_castps512_ps256(acc[r][c]));
      out[r * 2 * CP + 2 * c + 1] = simd::hsum(_mm512_extractf32x8_ps(acc[r][c], 1));
    }
}

using TileFn = void (*)(int64_t, const WGroup* const*, const APair* const*, float*);
template <int... Rs, int... Cs>
constexpr std::array<std::array<TileFn, kColPairs>, kRows> make_table(std::integer_sequence<int, Rs...>,
                                                                        std::integer_sequence<int, Cs...>) {
  std::array<std::array<TileFn, kColPairs>, kRows> t{};
  auto row = [&]<int R>(std::integral_constant<int, R>) { ((t[R][Cs] = &tile<R + 1, Cs + 1>), ...); };
  (row(std::integral_constant<int, Rs>{}), ...);
  return t;
}
constexpr auto kTiles = make_table(std::make_integer_sequence<int, kRows>{}, std::make_integer_sequence<int, kColPairs>{});

struct Scratch {  // per thread, grown, never shrunk
  std::vector<APair> act;
  std::vector<WGroup> weights;
};

template <class P>
void gemm(int64_t n, const uint8_t* W, size_t w_stride, int64_t i0, int64_t i1, const uint8_t* act,
          size_t act_stride, int64_t n_act, float* Y, int64_t ldy) {
  thread_local Scratch s;
  const int64_t ng = n / block32::kGroup, n_pairs = (n_act + 1) / 2;
  if (s.act.size() < static_cast<size_t>(n_pairs * ng)) s.act.resize(static_cast<size_t>(n_pairs * ng));
  if (s.weights.size() < static_cast<size_t>(kRows * ng)) s.weights.resize(static_cast<size_t>(kRows * ng));
  auto act_row = [&](int64_t c) { return reinterpret_cast<const BlockQ8_0*>(act + static_cast<size_t>(c) * act_stride); };
  for (int64_t p = 0; p < n_pairs; ++p)
    pack_act<P>(act_row(2 * p), 2 * p + 1 < n_act ? act_row(2 * p + 1) : nullptr, ng, s.act.data() + p * ng);
  for (int64_t i = i0; i < i1; i += kRows) {
    const int R = static_cast<int>(i1 - i < kRows ? i1 - i : kRows);
    const WGroup* w[kRows];
    for (int r = 0; r < R; ++r) {
      pack_weights<P>(reinterpret_cast<const typename P::Block*>(W + static_cast<size_t>(i + r) * w_stride), ng,
                      s.weights.data() + r * ng);
      w[r] = s.weights.data() + r * ng;
    }
    for (int64_t p0 = 0; p0 < n_pairs; p0 += kColPairs) {
      const int CP = static_cast<int>(n_pairs - p0 < kColPairs ? n_pairs - p0 : kColPairs);
      const APair* a[kColPairs];
      for (int c = 0; c < CP; ++c) a[c] = s.act.data() + (p0 + c) * ng;
      float out[kRows * 2 * kColPairs];
      kTiles[R - 1][CP - 1](ng, w, a, out);
      for (int r = 0; r < R; ++r)
        for (int c = 0; c < 2 * CP && 2 * p0 + c < n_act; ++c) Y[(2 * p0 + c) * ldy + i + r] = out[r * 2 * CP + c];
    }
  }
}

}  // namespace vnni

// ---------------- Q8_0: row-exact kernel for 1..8 activation rows ----------------

// The AVX2 decode kernel (kernels_avx2.cpp, MkQ8_0's 1 x 1 tile) sums block b into chain
// b % 2 (8 f32 lanes each; the last block of an odd count into chain 0), then adds chain 0 +
// chain 1 and takes hsum_float_8. Here one 512-bit accumulator holds chain 0 in lanes 0-7 and
// chain 1 in lanes 8-15, and a step takes blocks 2p and 2p + 1 at once with the same lane
// sums (exact int32: vpdpbusd of a + 128 with w, minus 128 * the lane sums of w), the same
// scale products fp16(dw) * fp16(da) and the same fma per lane: every output has the decode
// kernel's bits, for any number of activation rows. One weight row is unpacked once per step
// for up to 8 activation rows, which are prepared once per call; the final horizontal sums
// of 8 weight rows run side by side (reduce8: the same adds, vectorised across outputs).
namespace exact8 {

constexpr int kCols = 8;   // activation rows per pass over a weight row
constexpr int kGroup = 8;  // weight rows reduced together
constexpr int64_t kPrefetchL1 = 2048, kPrefetchL2 = 8192;  // bytes ahead of the weight stream

struct APair {  // activation blocks 2p | 2p + 1
  __m512i u;    // quants + 128 (unsigned)
  __m512 d;     // scales
};

inline __m512i join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }
inline __m512 join(__m256 lo, __m256 hi) { return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1); }
inline __m256i quants(const BlockQ8_0& b) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs)); }

void pack_act(const BlockQ8_0* a, int64_t nb, APair* out) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < nb; b += 2) {
    const bool two = b + 1 < nb;
    const __m256i q1 = two ? quants(a[b + 1]) : _mm256_setzero_si256();
    out[b / 2].u = _mm512_xor_si512(join(quants(a[b]), q1), flip);
    out[b / 2].d = join(simd::fp16x8(a[b].d), two ? simd::fp16x8(a[b + 1].d) : _mm256_setzero_ps());
  }
}

// acc_out[c * kGroup] = the two chains of dot(weight row w, activation row c) (lanes 0-7: chain
// 0, 8-15: chain 1), c < C
template <int C>
void row(int64_t nb, const BlockQ8_0* w, const APair* const* a, __m512* acc_out) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512 acc[C];
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) acc[c] = _mm512_setzero_ps();
  const int64_t np = nb / 2;
  for (int64_t p = 0; p < np; ++p) {
    // the weight stream prefetched ahead (into L1 and, further, L2), as the repacked Q4_0 and
    // the K-quant decode kernels do: a lone core keeps more lines in flight; no value changes
    const char* wp = reinterpret_cast<const char*>(w + 2 * p);
    _mm_prefetch(wp + kPrefetchL1, _MM_HINT_T0);
    _mm_prefetch(wp + kPrefetchL2, _MM_HINT_T1);
    const __m512i wq = join(quants(w[2 * p]), quants(w[2 * p + 1]));
    const __m512i ncorr = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), flip, wq));
    const __m512 wd = join(simd::fp16x8(w[2 * p].d), simd::fp16x8(w[2 * p + 1].d));
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const __m512i isum = _mm512_dpbusd_epi32(ncorr, a[c][p].u, wq);
      acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(wd, a[c][p].d), acc[c]);
    }
  }
  if (nb % 2) {  // the last block: chain 0 (lanes 0-7) only
    const __m512i wq = join(quants(w[2 * np]), _mm256_setzero_si256());
    const __m512i ncorr = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), flip, wq));
    const __m512 wd = join(simd::fp16x8(w[2 * np].d), _mm256_setzero_ps());
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const __m512i isum = _mm512_dpbusd_epi32(ncorr, a[c][np].u, wq);
      acc[c] = _mm512_mask3_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(wd, a[c][np].d), acc[c], 0x00ff);
    }
  }
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) acc_out[c * kGroup] = acc[c];
}

// out[j] = simd::hsum(chain 0 + chain 1 of acc[j]), j < 8: the one-row kernel's adds, each with
// the same operands in the same order, for 8 outputs at once (shuffles move lanes, never sum).
__m256 reduce8(const __m512* acc) {
  // t_j = lo(acc_j) + hi(acc_j); T[q] = [t_2q | t_2q+1]
  __m512 T[4];
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q)
    T[q] = _mm512_add_ps(_mm512_shuffle_f32x4(acc[2 * q], acc[2 * q + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(acc[2 * q], acc[2 * q + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  // hsum's first add, high 4 lanes + low 4 lanes: S[h] 128-bit lane j = that of t_4h+j
  __m512 S[2];
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h)
    S[h] = _mm512_add_ps(_mm512_shuffle_f32x4(T[2 * h], T[2 * h + 1], _MM_SHUFFLE(3, 1, 3, 1)),
                         _mm512_shuffle_f32x4(T[2 * h], T[2 * h + 1], _MM_SHUFFLE(2, 0, 2, 0)));
  // second add (s + movehl(s)): lane j = [s_0+s_2, s_1+s_3] of t_j, then of t_4+j
  const __m512 U = _mm512_add_ps(_mm512_shuffle_ps(S[0], S[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_ps(S[0], S[1], _MM_SHUFFLE(3, 2, 3, 2)));
  // third add (s_0 + s_1): lane j = [out j, out 4+j, ...]
  const __m512 R = _mm512_add_ps(_mm512_shuffle_ps(U, U, _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_ps(U, U, _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castps512_ps256(_mm512_permutexvar_ps(order, R));
}

using RowFn = void (*)(int64_t, const BlockQ8_0*, const APair* const*, __m512*);
constexpr RowFn kRowFns[kCols] = {&row<1>, &row<2>, &row<3>, &row<4>, &row<5>, &row<6>, &row<7>, &row<8>};

void gemm(int64_t n, const uint8_t* W, size_t w_stride, int64_t i0, int64_t i1, const uint8_t* act,
          size_t act_stride, int64_t n_act, float* Y, int64_t ldy) {
  thread_local std::vector<APair> packed;  // per thread, grown, never shrunk
  const int64_t nb = n / kQK8_0, np = (nb + 1) / 2;
  if (packed.size() < static_cast<size_t>(n_act * np)) packed.resize(static_cast<size_t>(n_act * np));
  for (int64_t c = 0; c < n_act; ++c)
    pack_act(reinterpret_cast<const BlockQ8_0*>(act + static_cast<size_t>(c) * act_stride), nb, packed.data() + c * np);
  // Weight rows in groups of kGroup: each row's accumulators are kept, then every activation
  // row's kGroup outputs are reduced together (reduce8) and stored side by side.
  for (int64_t i = i0; i < i1; i += kGroup) {
    const int G = static_cast<int>(i1 - i < kGroup ? i1 - i : kGroup);
    for (int64_t c0 = 0; c0 < n_act; c0 += kCols) {
      const int C = static_cast<int>(n_act - c0 < kCols ? n_act - c0 : kCols);
      const APair* a[kCols];
      for (int c = 0; c < C; ++c) a[c] = packed.data() + (c0 + c) * np;
      __m512 acc[kCols * kGroup];  // [c][weight row of the group]
      for (int g = 0; g < G; ++g)
        kRowFns[C - 1](nb, reinterpret_cast<const BlockQ8_0*>(W + static_cast<size_t>(i + g) * w_stride), a, acc + g);
      for (int c = 0; c < C; ++c) {
        for (int g = G; g < kGroup; ++g) acc[c * kGroup + g] = _mm512_setzero_ps();  // outputs not stored
        const __m256 r = reduce8(acc + c * kGroup);
        float* y = Y + (c0 + c) * ldy + i;
        if (G == kGroup) {
          _mm256_storeu_ps(y, r);
        } else {
          alignas(32) float out[kGroup];
          _mm256_store_ps(out, r);
          for (int g = 0; g < G; ++g) y[g] = out[g];
        }
      }
    }
  }
}

}  // namespace exact8

// Weight formats with the block32 microkernel; with the packed VNNI GEMM from 4 activation
// rows on where the format allows it (one accumulator per output).
// RowsDecode: weight rows per decode tile (independent f32 chains, same bits per output).
template <template <class> class Policy, int RowsDecode = 1>
struct Block32Simd {
  using P = Policy<Ops>;
  using Mk = block32::Mk<Ops, Policy, 4, 4, RowsDecode>;
  static constexpr bool kVnni = !P::kMins && !P::kPairs;
  static constexpr bool kScalarScale = kVnni && P::kGroupsPerBlock == 1;  // block32_vnni512.h
  static constexpr bool kShapeFree = true;  // both paths keep block32::Mk's order per output
  static void gemm(int64_t n, const uint8_t* W, size_t w_stride, int64_t i0, int64_t i1, const uint8_t* act,
                   size_t act_stride, int64_t n_act, float* Y, int64_t ldy) {
    if (kScalarScale && n_act >= 4)
      block32v::Gemm<P>::run(n, W, w_stride, i0, i1, act, act_stride, n_act, Y, ldy);
    else if (kVnni && n_act >= 4)
      vnni::gemm<P>(n, W, w_stride, i0, i1, act, act_stride, n_act, Y, ldy);
    else
      tiled::gemm<Mk>(n, W, w_stride, i0, i1, act, act_stride, n_act, Y, ldy);
  }
};

// This file's part of the registry (registry.h); activations use the registry's quantisers.
template <class F>
struct Simd {};
// Decode tiles of one weight row: 4-row tiles measured faster on L3-resident weights
// (microbench) but 2x slower in a model's decode (weights streamed from memory; rows
// are contiguous, one row after another reads one stream).
template <> struct Simd<quant::FormatQ4_0> : Block32Simd<block32::PQ4_0> {};
template <> struct Simd<quant::FormatQ4_1> : Block32Simd<block32::PQ4_1> {};
template <> struct Simd<quant::FormatQ5_0> : Block32Simd<block32::PQ5_0> {};
template <> struct Simd<quant::FormatQ5_1> : Block32Simd<block32::PQ5_1> {};
template <> struct Simd<quant::FormatMxfp4> : Block32Simd<block32::PMxfp4> {};
template <> struct Simd<quant::FormatNvfp4> : Block32Simd<block32::PNvfp4> {};
// Q8_0: the lane-transposed VNNI GEMM (q8_lanes_vnni512.h) from 4 activation rows on, in the
// order of the AVX2 kernel's multi-row tiles and of ggml (one 8-lane accumulator per output:
// fma(float(isum), scale, acc) per block, then hsum_float_8); 2-3 rows run the AVX2 tiles
// (kernels_avx2.cpp), same order. One row (decode), vec_dot (the AVX2 kernel) and gemm_exact
// have the AVX2 decode kernel's bits: exact8 above.
template <>
struct Simd<quant::FormatQ8_0> {
  static void gemm(int64_t n, const uint8_t* W, size_t w_stride, int64_t i0, int64_t i1, const uint8_t* act,
                   size_t act_stride, int64_t n_act, float* Y, int64_t ldy) {
    if (n_act >= 4)
      q8lanes::gemm(n, W, w_stride, i0, i1, act, act_stride, n_act, Y, ldy);
    else if (n_act == 1)
      exact8::gemm(n, W, w_stride, i0, i1, act, act_stride, n_act, Y, ldy);
    else
      kernels(Isa::AVX2).gemm(GgmlType::Q8_0, n, W, w_stride, i0, i1, act, act_stride, n_act, Y, ldy);
  }
  static void gemm_exact(int64_t n, const uint8_t* W, size_t w_stride, int64_t i0, int64_t i1, const uint8_t* act,
                         size_t act_stride, int64_t n_act, float* Y, int64_t ldy) {
    exact8::gemm(n, W, w_stride, i0, i1, act, act_stride, n_act, Y, ldy);
  }
};

}  // namespace

constinit const Registry kLegacyAvx512Part = make_registry<Simd>();

}  // namespace df::cpu
