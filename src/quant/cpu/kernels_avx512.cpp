// AVX-512 kernels (F, BW, VL, DQ, VNNI, BF16; e.g. Zen 4, Sapphire Rapids). Called only
// after best_isa() has checked the CPU and OS (kernels.cpp).
//
// Numerics per weight type (see formats_*.h for the reference they are tested against):
//   F32  : f32 FMA, 16 lanes per accumulator.
//   F16  : both sides widened with vcvtph2ps (exact), f32 FMA.
//   BF16 : vdpbf16ps, as ggml-cpu's AVX512_BF16 build: bf16 products are exact in f32, the
//          adds round to nearest even with denormals treated as zero (the instruction's DAZ).
//   Q8_0 : the AVX2 kernel (see below).
#include <immintrin.h>

#include <cstring>

// GCC 12's AVX-512 intrinsics (_mm512_cvtph_ps, _mm512_reduce_add_ps, ...) pass
// _mm512_undefined_ps(), which is self-initialised and trips -Wuninitialized when inlined
// (GCC bug 105593). No variable of ours is affected.
#if defined(__GNUC__) && !defined(__clang__)  // clang has no -Wmaybe-uninitialized
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "quant/cpu/registry.h"

namespace df::cpu {
namespace {

using quant::FormatBF16;
using quant::FormatF16;
using quant::FormatF32;
using quant::FormatQ8_0;

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

// Independent accumulator sets for a tile of R x C outputs, so that small tiles (decode
// uses 1 x 1) still have ~4 FMA chains in flight.
template <int R, int C>
constexpr int kUnroll = R * C >= 4 ? 1 : 4 / (R * C);

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

  static constexpr int kUnrollOne = kUnroll<1, 1>;
  template <int R, int C>
  static void tile(int64_t n, const uint8_t* const* wp, const uint8_t* const* ap, float* out) {
    tile_u<R, C, kUnroll<R, C>>(n, wp, ap, out);
  }

  // tile<R, C> with U accumulator chains per output (RowExact, gemm_tiled.h)
  template <int R, int C, int U>
  static void tile_u(int64_t n, const uint8_t* const* wp, const uint8_t* const* ap, float* out) {
    using B = typename E::Block;
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
    int64_t k = 0;
    for (; k + U * E::kStep <= n; k += U * E::kStep)
#pragma GCC unroll 4
      for (int u = 0; u < U; ++u) step<R, C, false>(w, a, k + u * E::kStep, 0, acc[u]);
    for (; k + E::kStep <= n; k += E::kStep) step<R, C, false>(w, a, k, 0, acc[0]);
    if (k < n) step<R, C, true>(w, a, k, n - k, acc[0]);
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) {
        __m512 s = acc[0][r][c];
        for (int u = 1; u < U; ++u) s = _mm512_add_ps(s, acc[u][r][c]);
        out[r * C + c] = _mm512_reduce_add_ps(s);
      }
  }
};

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
// Row-exact tiles (Kernels::gemm_exact): one weight row x 4 activation rows with the decode
// kernel's 4 chains each (16 accumulators).
template <class E, void (*Q)(const float*, void*, int64_t)>
struct FloatSimd {
  using Mk = MkFloat<E, 4, 4, 1>;
  using MkExact = tiled::RowExact<Mk, 1, 4>;
  static void quantize(const float* x, void* y, int64_t n) { Q(x, y, n); }
};
void copy_f32(const float* x, void* y, int64_t n) { std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float)); }

template <class F>
struct Simd {};
template <> struct Simd<FormatF32> : FloatSimd<ElemF32, &copy_f32> {};
template <> struct Simd<FormatF16> : FloatSimd<ElemF16, &quantize_act_f16> {};
template <> struct Simd<FormatBF16> : FloatSimd<ElemBF16, &quantize_act_bf16> {};
// Q8_0 has no AVX-512 kernel on purpose: llama.cpp's AVX-512 (zen4) build runs the AVX2
// Q8_0 dot product, and using our AVX2 kernel keeps the f32 accumulation order, and so the
// results, identical to it (measured: logits bit-equal on Q8_0 models, while the VNNI
// kernel differed in the last bits and flipped later roundings).

}  // namespace

constinit const Registry kFloatAvx512Part = make_registry<Simd>();

}  // namespace df::cpu
