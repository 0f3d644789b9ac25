// AVX-512 kernels (F, BW, VL, DQ, VNNI, BF16; e.g. Zen 4, Sapphire Rapids). Called only
// after best_isa() has checked the CPU and OS (kernels.cpp).
//
// Numerics per weight type (see formats_*.h for the reference they are tested against):
//   F32  : f32 FMA, 16 lanes per accumulator.
//   F16  : both sides widened with vcvtph2ps (exact), f32 FMA.
//   BF16 : vdpbf16ps, as ggml-cpu's AVX512_BF16 build: bf16 products are exact in f32, the
//          adds round to nearest even with denormals treated as zero (the instruction's DAZ).
//   Q8_0 : the AVX2 kernel (q8_0_mk.h) for one activation row, a VNNI GEMM over packed
//          tiles for several, in the same f32 order (see q8vnni below).
#include <immintrin.h>

#include <cstring>

// GCC 12's AVX-512 intrinsics (_mm512_cvtph_ps, _mm512_reduce_add_ps, ...) pass
// _mm512_undefined_ps(), which is self-initialised and trips -Wuninitialized when inlined
// (GCC bug 105593). No variable of ours is affected.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <array>
#include <utility>
#include <vector>

#include "quant/cpu/q8_0_mk.h"
#include "quant/cpu/registry.h"
#include "quant/cpu/simd_avx2.h"

namespace df::cpu {
namespace {

using quant::FormatBF16;
using quant::FormatF16;
using quant::FormatF32;
using quant::FormatQ8_0;

struct Tag {};  // internal linkage for the shared microkernels (q8_0_mk.h)

// Lanes [0, m) set, m <= 16 / 32.
inline __mmask16 mask16(int64_t m) { return static_cast<__mmask16>((1u << m) - 1u); }
inline __mmask32 mask32(int64_t m) {
  return static_cast<__mmask32>(m >= 32 ? 0xffffffffu : (1u << m) - 1u);
}

// ---------------- F32 / F16 / BF16: elementwise loaders + one tiled microkernel ----------------

// Elem policies: kStep elements per vector V; load / load_tail (zero filled) from element k;
// madd(acc, w, a) accumulates w*a into 16 f32 lanes.
struct ElemF32 {
  using Block = float;
  using V = __m512;
  static constexpr int kStep = 16;
  static V load(const Block* p) { return _mm512_loadu_ps(p); }
  static V load_tail(const Block* p, int64_t m) { return _mm512_maskz_loadu_ps(mask16(m), p); }
  static __m512 madd(__m512 acc, V w, V a) { return _mm512_fmadd_ps(w, a, acc); }
};

struct ElemF16 {
  using Block = uint16_t;
  using V = __m512;
  static constexpr int kStep = 16;
  static V load(const Block* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static V load_tail(const Block* p, int64_t m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask16(m), p));
  }
  static __m512 madd(__m512 acc, V w, V a) { return _mm512_fmadd_ps(w, a, acc); }
};

struct ElemBF16 {
  using Block = uint16_t;
  using V = __m512i;  // 32 raw bf16
  static constexpr int kStep = 32;
  static V load(const Block* p) { return _mm512_loadu_si512(p); }
  static V load_tail(const Block* p, int64_t m) { return _mm512_maskz_loadu_epi16(mask32(m), p); }
  static __m512 madd(__m512 acc, V w, V a) {
    return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(w), reinterpret_cast<__m512bh>(a));
  }
};

template <class E, int Rows, int Cols, int RowsDecode>
struct MkFloat {
  static constexpr int kRows = Rows, kCols = Cols, kRowsDecode = RowsDecode;

  // acc[r][c] += w[r][k..k+step) . a[c][k..k+step)
  template <int R, int C, bool Tail>
  static void step(const typename E::Block* const* w, const typename E::Block* const* a,
                   int64_t k, int64_t m, __m512 (&acc)[R][C]) {
    typename E::V wv[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) wv[r] = Tail ? E::load_tail(w[r] + k, m) : E::load(w[r] + k);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const typename E::V av = Tail ? E::load_tail(a[c] + k, m) : E::load(a[c] + k);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r][c] = E::madd(acc[r][c], wv[r], av);
    }
  }

  // Four accumulator sets per output, whatever the tile (issue 15: a row computed in a tile
  // of several gives the bits of the row alone): set u takes the steps u, u + 4, u + 8, ...
  // of the main part, set 0 also the rest; then ((s0 + s1) + s2) + s3. Small tiles
  // (decode: 1 x 1) interleave the four chains; large ones make one pass per set over each
  // chunk of k, so that they need one accumulator per output in registers.
  template <int R, int C>
  static void tile(int64_t n, const uint8_t* const* wp, const uint8_t* const* ap, float* out) {
    using B = typename E::Block;
    constexpr int U = 4;
    constexpr int64_t S = E::kStep;
    const B* w[R];
    const B* a[C];
    for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const B*>(wp[r]);
    for (int c = 0; c < C; ++c) a[c] = reinterpret_cast<const B*>(ap[c]);
    __m512 acc[U][R][C];
#pragma GCC unroll 8
    for (int u = 0; u < U; ++u)
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) acc[u][r][c] = _mm512_setzero_ps();
    const int64_t main_end = n / (U * S) * (U * S);
    if constexpr (U * R * C <= 16) {
      for (int64_t k = 0; k < main_end; k += U * S)
#pragma GCC unroll 4
        for (int u = 0; u < U; ++u) step<R, C, false>(w, a, k + u * S, 0, acc[u]);
    } else {  // chunks of 16 steps per set, which stay in L1 / L2 over the four passes
      constexpr int64_t kChunk = 16 * U * S;
      for (int64_t k0 = 0; k0 < main_end; k0 += kChunk) {
        const int64_t k1 = k0 + kChunk < main_end ? k0 + kChunk : main_end;
#pragma GCC unroll 1
        for (int u = 0; u < U; ++u) {
          __m512 cur[R][C];
          for (int r = 0; r < R; ++r)
            for (int c = 0; c < C; ++c) cur[r][c] = acc[u][r][c];
          for (int64_t k = k0 + u * S; k < k1; k += U * S) step<R, C, false>(w, a, k, 0, cur);
          for (int r = 0; r < R; ++r)
            for (int c = 0; c < C; ++c) acc[u][r][c] = cur[r][c];
        }
      }
    }
    int64_t k = main_end;
    for (; k + S <= n; k += S) step<R, C, false>(w, a, k, 0, acc[0]);
    if (k < n) step<R, C, true>(w, a, k, n - k, acc[0]);
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) {
        __m512 s = acc[0][r][c];
        for (int u = 1; u < U; ++u) s = _mm512_add_ps(s, acc[u][r][c]);
        out[r * C + c] = _mm512_reduce_add_ps(s);
      }
  }
};

// ---------------- Q8_0: VNNI GEMM over packed tiles ----------------

// Several activation rows (prefill, speculative verify, batched rows): the weight rows of a
// tile and the activation rows of the call are first packed into 64-byte block pairs, then
// multiplied with vpdpbusd, 2 blocks x 8 lanes per 512-bit vector. The f32 order is the
// decode kernel's (q8_0_mk.h): the lanes 0-7 of a pair are the even block's 8 lane sums,
// lanes 8-15 the odd block's, so one 512-bit accumulator per output holds both of its
// accumulators; the result is hsum_float_8(lanes 0-7 + lanes 8-15). Bit-identical to the
// AVX2 kernel and to the decode path (tests/unit/test_kernels_batch.cpp).
//   int: vpdpbusd takes unsigned x signed bytes, so the weights are packed as w + 128 (xor
//        0x80) and each activation pair carries -128 * (its lane sums), the accumulator's
//        start: exact for every int8 input.
//   f32: acc = fma(float(isum), fp16(dw) * fp16(da), acc) per lane, the scales packed as
//        [dw_b x 8 | dw_b+1 x 8] and [da_b x 8 | da_b+1 x 8].
// An odd last block is paired with zeros (zero quants, zero scales): fma(0, 0, acc) = acc,
// as an accumulator is never -0.
namespace q8vnni {

constexpr int kRows = 4, kCols = 4;  // tile: 16 accumulators

struct APair {  // one activation row's block pair
  __m512i q;     // quants
  __m512i ncorr; // -128 * lane sums
  __m512 d;      // scales
};
struct WPair {  // one weight row's block pair
  __m512i u;  // quants + 128
  __m512 d;   // scales
};

// Blocks b and b + 1 of a row (b + 1 < nb, else zeros) as 64 bytes and their scales.
inline __m512i pair_quants(const BlockQ8_0* x, int64_t b, int64_t nb) {
  const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs));
  const __m256i hi = b + 1 < nb ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b + 1].qs))
                                : _mm256_setzero_si256();
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}
inline __m512 pair_scales(const BlockQ8_0* x, int64_t b, int64_t nb) {
  const __m256 lo = _mm256_set1_ps(_cvtsh_ss(x[b].d));
  const __m256 hi = b + 1 < nb ? _mm256_set1_ps(_cvtsh_ss(x[b + 1].d)) : _mm256_setzero_ps();
  return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
}

void pack_act(const BlockQ8_0* x, int64_t nb, APair* out) {
  const __m512i k128 = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0, p = 0; b < nb; b += 2, ++p) {
    out[p].q = pair_quants(x, b, nb);
    out[p].ncorr = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), k128, out[p].q));
    out[p].d = pair_scales(x, b, nb);
  }
}

// A missing odd block packs as u = 0 (not 0x80): with zero activation quants and a zero
// correction its lane sums are 0 either way.
void pack_weights(const BlockQ8_0* x, int64_t nb, WPair* out) {
  const __m512i k128 = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0, p = 0; b < nb; b += 2, ++p) {
    out[p].u = _mm512_xor_si512(pair_quants(x, b, nb), k128);
    out[p].d = pair_scales(x, b, nb);
  }
}

template <int R, int C>
void tile(int64_t np, const WPair* const* w, const APair* const* a, float* out) {
  __m512 acc[R][C];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  for (int64_t p = 0; p < np; ++p) {
    __m512i u[R];
    __m512 wd[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      u[r] = w[r][p].u;
      wd[r] = w[r][p].d;
    }
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      const APair& ap = a[c][p];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m512i isum = _mm512_dpbusd_epi32(ap.ncorr, u[r], ap.q);
        acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(wd[r], ap.d), acc[r][c]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c)
      out[r * C + c] = simd::hsum(_mm256_add_ps(_mm512_castps512_ps256(acc[r][c]), _mm512_extractf32x8_ps(acc[r][c], 1)));
}

using TileFn = void (*)(int64_t, const WPair* const*, const APair* const*, float*);
template <int... Rs, int... Cs>
constexpr std::array<std::array<TileFn, kCols>, kRows> make_table(std::integer_sequence<int, Rs...>,
                                                                    std::integer_sequence<int, Cs...> cs) {
  std::array<std::array<TileFn, kCols>, kRows> t{};
  auto row = [&]<int R>(std::integral_constant<int, R>) { ((t[R][Cs] = &tile<R + 1, Cs + 1>), ...); };
  (row(std::integral_constant<int, Rs>{}), ...);
  (void)cs;
  return t;
}
constexpr auto kTiles = make_table(std::make_integer_sequence<int, kRows>{}, std::make_integer_sequence<int, kCols>{});

// Per-thread packing buffers (grown, never shrunk).
struct Scratch {
  std::vector<APair> act;
  std::vector<WPair> weights;
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

void gemm(int64_t n, const uint8_t* W, size_t w_stride, int64_t i0, int64_t i1, const uint8_t* act,
          size_t act_stride, int64_t n_act, float* Y, int64_t ldy) {
  const int64_t nb = n / kQK8_0, np = (nb + 1) / 2;
  Scratch& s = scratch();
  if (s.act.size() < static_cast<size_t>(n_act * np)) s.act.resize(static_cast<size_t>(n_act * np));
  if (s.weights.size() < static_cast<size_t>(kRows * np)) s.weights.resize(static_cast<size_t>(kRows * np));
  for (int64_t c = 0; c < n_act; ++c)
    pack_act(reinterpret_cast<const BlockQ8_0*>(act + static_cast<size_t>(c) * act_stride), nb, s.act.data() + c * np);
  for (int64_t i = i0; i < i1; i += kRows) {
    const int R = static_cast<int>(i1 - i < kRows ? i1 - i : kRows);
    const WPair* w[kRows];
    for (int r = 0; r < R; ++r) {
      pack_weights(reinterpret_cast<const BlockQ8_0*>(W + static_cast<size_t>(i + r) * w_stride), nb,
                   s.weights.data() + r * np);
      w[r] = s.weights.data() + r * np;
    }
    for (int64_t c0 = 0; c0 < n_act; c0 += kCols) {
      const int C = static_cast<int>(n_act - c0 < kCols ? n_act - c0 : kCols);
      const APair* a[kCols];
      for (int c = 0; c < C; ++c) a[c] = s.act.data() + (c0 + c) * np;
      float out[kRows * kCols];
      kTiles[R - 1][C - 1](np, w, a, out);
      for (int c = 0; c < C; ++c)
        for (int r = 0; r < R; ++r) Y[(c0 + c) * ldy + i + r] = out[r * C + c];
    }
  }
}

}  // namespace q8vnni

// ---------------- activation quantisers (bit exact with the formats' quantize_act) ----------------

void quantize_act_f16(const float* x, void* out, int64_t n) {
  uint16_t* y = static_cast<uint16_t*>(out);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  if (i < n) {
    const __mmask16 m = mask16(n - i);
    _mm256_mask_storeu_epi16(y + i, m,
                             _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i),
                                             _MM_FROUND_TO_NEAREST_INT));
  }
}

// ggml_compute_fp32_to_bf16 on 16 lanes: NaN -> (u >> 16) | 64, else round to nearest even.
__m256i bf16_round(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i abs = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(abs, _mm512_set1_epi32(0x7f800000));
  const __m512i hi = _mm512_srli_epi32(u, 16);
  const __m512i bias =
      _mm512_add_epi32(_mm512_set1_epi32(0x7fff), _mm512_and_si512(hi, _mm512_set1_epi32(1)));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
  const __m512i res =
      _mm512_mask_mov_epi32(rounded, nan, _mm512_or_si512(hi, _mm512_set1_epi32(64)));
  return _mm512_cvtepi32_epi16(res);
}

void quantize_act_bf16(const float* x, void* out, int64_t n) {
  uint16_t* y = static_cast<uint16_t*>(out);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), bf16_round(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = mask16(n - i);
    _mm256_mask_storeu_epi16(y + i, m, bf16_round(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

// ---------------- this file's part of the AVX-512 registry (registry.h) ----------------

// Formats without a specialisation here run the AVX2 kernels (registry.h's fallback rule).
// Tiles: 4 weight rows x 4 activation rows for prefill; decode (n_act == 1) walks one weight
// row at a time: on Zen 4 one sequential stream per row with 2-4 accumulator chains measured
// as fast as llama.cpp's own kernels (hot and cold), while 2-4 interleaved row streams were
// up to 2x slower (bench/bench_matvec.cpp).
// The float formats are their own activation formats: microkernel over elements E,
// activation quantiser Q.
template <class E, void (*Q)(const float*, void*, int64_t)>
struct FloatSimd {
  using Mk = MkFloat<E, 4, 4, 1>;
  static void quantize(const float* x, void* y, int64_t n) { Q(x, y, n); }
};
void copy_f32(const float* x, void* y, int64_t n) { std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float)); }

template <class F>
struct Simd {};
template <> struct Simd<FormatF32> : FloatSimd<ElemF32, &copy_f32> {};
template <> struct Simd<FormatF16> : FloatSimd<ElemF16, &quantize_act_f16> {};
template <> struct Simd<FormatBF16> : FloatSimd<ElemBF16, &quantize_act_bf16> {};
// Q8_0: the AVX2 microkernel for vec_dot and up to 3 activation rows; the VNNI GEMM for
// more (where packing pays). Both keep the f32 order of ggml's AVX2 kernel per block, which
// llama.cpp's AVX-512 (zen4) build also runs. Activations: the AVX2 quantiser.
template <>
struct Simd<FormatQ8_0> {
  using Mk = q8::MkQ8_0<Tag, 4, 2>;
  static void gemm(int64_t n, const uint8_t* W, size_t w_stride, int64_t i0, int64_t i1, const uint8_t* act,
                   size_t act_stride, int64_t n_act, float* Y, int64_t ldy) {
    if (n_act < 4)
      tiled::gemm<Mk>(n, W, w_stride, i0, i1, act, act_stride, n_act, Y, ldy);
    else
      q8vnni::gemm(n, W, w_stride, i0, i1, act, act_stride, n_act, Y, ldy);
  }
};

}  // namespace

constinit const Registry kFloatAvx512Part = make_registry<Simd>();

}  // namespace df::cpu
