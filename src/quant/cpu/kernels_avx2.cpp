// AVX2 + FMA + F16C kernels (Haswell and later, Zen). Called only after best_isa() has
// checked the CPU and OS (kernels.cpp).
//
// Numerics per weight type (reference: formats_*.h):
//   F32 / F16 / BF16 : both sides widened to f32 (exact), f32 FMA in 8 lanes.
//   Q8_0             : as ggml's AVX2 ggml_vec_dot_q8_0_q8_0: |w| (unsigned) times a with w's
//                      sign (vpsignb), vpmaddubsw + vpmaddwd into exact int32 lane sums,
//                      converted and FMA'd with fp16(dw)*fp16(da) into f32 lanes. vpmaddubsw
//                      cannot saturate here: |w| <= 128, |a| <= 127 (quantize_act never
//                      produces -128), so a pair sum is at most 2*128*127 = 32512.
#include <immintrin.h>

#include <cstring>

#include "quant/cpu/registry.h"
#include "quant/cpu/simd_avx2.h"

namespace df::cpu {
namespace {

using quant::FormatBF16;
using quant::FormatF16;
using quant::FormatF32;
using quant::FormatQ8_0;
using simd::hsum;

// ---------------- F32 / F16 / BF16 ----------------

// Elem policies: load 8 elements from p as f32; load_tail: m < 8 elements, zero filled.
struct ElemF32 {
  using Block = float;
  static __m256 load(const Block* p) { return _mm256_loadu_ps(p); }
};
struct ElemF16 {
  using Block = uint16_t;
  static __m256 load(const Block* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
};
struct ElemBF16 {
  using Block = uint16_t;
  static __m256 load(const Block* p) {
    const __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
  }
};

template <class E>
__m256 load_tail(const typename E::Block* p, int64_t m) {
  typename E::Block buf[8] = {};
  std::memcpy(buf, p, static_cast<size_t>(m) * sizeof(buf[0]));
  return E::load(buf);
}

// Independent accumulator sets for a tile of R x C outputs, so that small tiles (decode
// uses 1 x 1) still have ~4 FMA chains in flight.
template <int R, int C>
constexpr int kUnroll = R * C >= 4 ? 1 : 4 / (R * C);

template <class E, int Rows, int Cols, int RowsDecode>
struct MkFloat {
  static constexpr int kRows = Rows, kCols = Cols, kRowsDecode = RowsDecode;

  // acc[r][c] += w[r][k..k+8) . a[c][k..k+8)  (m < 8 valid elements when Tail)
  template <int R, int C, bool Tail>
  static void step(const typename E::Block* const* w, const typename E::Block* const* a,
                   int64_t k, int64_t m, __m256 (&acc)[R][C]) {
    __m256 wv[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) wv[r] = Tail ? load_tail<E>(w[r] + k, m) : E::load(w[r] + k);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const __m256 av = Tail ? load_tail<E>(a[c] + k, m) : E::load(a[c] + k);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r][c] = _mm256_fmadd_ps(wv[r], av, acc[r][c]);
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
    __m256 acc[U][R][C];
#pragma GCC unroll 8
    for (int u = 0; u < U; ++u)
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) acc[u][r][c] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + U * 8 <= n; k += U * 8)
#pragma GCC unroll 4
      for (int u = 0; u < U; ++u) step<R, C, false>(w, a, k + u * 8, 0, acc[u]);
    for (; k + 8 <= n; k += 8) step<R, C, false>(w, a, k, 0, acc[0]);
    if (k < n) step<R, C, true>(w, a, k, n - k, acc[0]);
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) {
        __m256 s = acc[0][r][c];
        for (int u = 1; u < U; ++u) s = _mm256_add_ps(s, acc[u][r][c]);
        out[r * C + c] = hsum(s);
      }
  }
};

// ---------------- Q8_0 ----------------

template <int RowsDecode>
struct MkQ8_0 {
  static constexpr int kRows = 4, kCols = 2, kRowsDecode = RowsDecode;
  using Block = BlockQ8_0;

  static __m256i quants(const Block& b) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
  }
  static __m256 scale(const Block& b) { return _mm256_set1_ps(_cvtsh_ss(b.d)); }

  // acc[r][c] += fp16(dw) * fp16(da) * (lane sums of w[r][b] . a[c][b])
  template <int R, int C>
  static void step(const Block* const* w, const Block* const* a, int64_t b, __m256 (&acc)[R][C]) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i wq[R], wabs[R];
    __m256 wd[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      wq[r] = quants(w[r][b]);
      wabs[r] = _mm256_sign_epi8(wq[r], wq[r]);
      wd[r] = scale(w[r][b]);
    }
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const __m256i aq = quants(a[c][b]);
      const __m256 ad = scale(a[c][b]);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m256i p16 = _mm256_maddubs_epi16(wabs[r], _mm256_sign_epi8(aq, wq[r]));
        const __m256i p32 = _mm256_madd_epi16(p16, ones);
        acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p32), _mm256_mul_ps(wd[r], ad), acc[r][c]);
      }
    }
  }

  static constexpr int kUnrollOne = 2;  // the 1 x 1 tile's chains (below)
  template <int R, int C>
  static void tile(int64_t n, const uint8_t* const* wp, const uint8_t* const* ap, float* out) {
    tile_u<R, C, (kUnroll<R, C> > 2 ? 2 : kUnroll<R, C>)>(n, wp, ap, out);
  }

  // tile<R, C> with U accumulator chains per output (RowExact, gemm_tiled.h)
  template <int R, int C, int U>
  static void tile_u(int64_t n, const uint8_t* const* wp, const uint8_t* const* ap, float* out) {
    const Block* w[R];
    const Block* a[C];
    for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const Block*>(wp[r]);
    for (int c = 0; c < C; ++c) a[c] = reinterpret_cast<const Block*>(ap[c]);
    __m256 acc[U][R][C];
#pragma GCC unroll 8
    for (int u = 0; u < U; ++u)
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) acc[u][r][c] = _mm256_setzero_ps();
    const int64_t nb = n / kQK8_0;
    int64_t b = 0;
    for (; b + U <= nb; b += U)
#pragma GCC unroll 2
      for (int u = 0; u < U; ++u) step<R, C>(w, a, b + u, acc[u]);
    for (; b < nb; ++b) step<R, C>(w, a, b, acc[0]);
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) {
        __m256 s = acc[0][r][c];
        for (int u = 1; u < U; ++u) s = _mm256_add_ps(s, acc[u][r][c]);
        out[r * C + c] = hsum(s);
      }
  }
};

// ---------------- activation quantisers (bit exact with the formats' quantize_act) ----------------

void quantize_act_f16(const float* x, void* out, int64_t n) {
  uint16_t* y = static_cast<uint16_t*>(out);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) y[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}

// ggml_compute_fp32_to_bf16 on 8 lanes: NaN -> (u >> 16) | 64, else round to nearest even.
// Result in the low 16 bits of each 32-bit lane.
__m256i bf16_round(__m256i u) {
  const __m256i abs = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
  // signed compare is fine: abs and 0x7f800000 are both non-negative
  const __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
  const __m256i hi = _mm256_srli_epi32(u, 16);
  const __m256i bias =
      _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(hi, _mm256_set1_epi32(1)));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, bias), 16);
  return _mm256_blendv_epi8(rounded, _mm256_or_si256(hi, _mm256_set1_epi32(64)), nan);
}

void quantize_act_bf16(const float* x, void* out, int64_t n) {
  uint16_t* y = static_cast<uint16_t*>(out);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i lo = bf16_round(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)));
    const __m256i hi = bf16_round(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i + 8)));
    // packus works per 128-bit lane: [lo0 hi0 lo1 hi1] -> fix the order
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), packed);
  }
  if (i < n) {
    float xb[16] = {};
    uint16_t yb[16];
    std::memcpy(xb, x + i, static_cast<size_t>(n - i) * sizeof(float));
    quantize_act_bf16(xb, yb, 16);
    std::memcpy(y + i, yb, static_cast<size_t>(n - i) * sizeof(uint16_t));
  }
}

// ggml-cpu quantize_row_q8_0 (x86): d = amax/127, id = 127/amax, nearest-even rounding.
void quantize_act_q8_0(const float* x, BlockQ8_0* y, int64_t nb) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < nb; ++b, x += kQK8_0) {
    __m256 v[4];
    for (int j = 0; j < 4; ++j) v[j] = _mm256_loadu_ps(x + 8 * j);
    __m256 m = _mm256_andnot_ps(sign, v[0]);
    for (int j = 1; j < 4; ++j) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[j]));
    __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    y[b].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
    const __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];
    for (int j = 0; j < 4; ++j) q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], vid));
    // int32 -> int16 -> int8 with saturation; the packs interleave 128-bit lanes
    const __m256i q16a = _mm256_packs_epi32(q[0], q[1]);
    const __m256i q16b = _mm256_packs_epi32(q[2], q[3]);
    const __m256i q8 = _mm256_packs_epi16(q16a, q16b);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].qs), _mm256_permutevar8x32_epi32(q8, order));
  }
}

// ---------------- this file's part of the AVX2 registry (registry.h) ----------------

// Tiles: 4 weight rows x 2 activation rows for prefill (16 ymm registers); decode walks one
// weight row at a time (see kernels_avx512.cpp).
// The float formats are their own activation formats: microkernel over elements E,
// activation quantiser Q.
// Row-exact tiles (Kernels::gemm_exact): one weight row x 3 activation rows with the decode
// kernel's 4 chains each (12 accumulators); Q8_0: x 4 rows with 2 chains.
template <class E, void (*Q)(const float*, void*, int64_t)>
struct FloatSimd {
  using Mk = MkFloat<E, 4, 2, 1>;
  using MkExact = tiled::RowExact<Mk, 1, 3>;
  static void quantize(const float* x, void* y, int64_t n) { Q(x, y, n); }
};
void copy_f32(const float* x, void* y, int64_t n) { std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float)); }

template <class F>
struct Simd {};
template <> struct Simd<FormatF32> : FloatSimd<ElemF32, &copy_f32> {};
template <> struct Simd<FormatF16> : FloatSimd<ElemF16, &quantize_act_f16> {};
template <> struct Simd<FormatBF16> : FloatSimd<ElemBF16, &quantize_act_bf16> {};
template <>
struct Simd<FormatQ8_0> {
  using Mk = MkQ8_0<1>;
  using MkExact = tiled::RowExact<Mk, 1, 4>;
  static void quantize(const float* x, void* y, int64_t n) {
    quantize_act_q8_0(x, static_cast<BlockQ8_0*>(y), n / kQK8_0);
  }
};

}  // namespace

constinit const Registry kFloatQ8Avx2Part = make_registry<Simd>();

}  // namespace df::cpu
