// AVX2 + FMA + F16C kernels (Haswell and later, Zen). Called only after best_isa() has
// checked the CPU and OS (kernels.cpp).
//
// Numerics per weight type (reference: formats_*.h):
//   F32 / F16 / BF16 : both sides widened to f32 (exact), f32 FMA in 8 lanes, four
//                      accumulator sets per output (see MkFloat::tile).
//   Q8_0             : q8_0_mk.h.
#include <immintrin.h>

#include <cstring>

#include "quant/cpu/q8_0_mk.h"
#include "quant/cpu/registry.h"
#include "quant/cpu/simd_avx2.h"

namespace df::cpu {
namespace {

using quant::FormatBF16;
using quant::FormatF16;
using quant::FormatF32;
using quant::FormatQ8_0;
using simd::hsum;

struct Tag {};  // internal linkage for the shared microkernels (q8_0_mk.h)

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

  // Four accumulator sets per output, whatever the tile (issue 15: a row computed in a tile
  // of several gives the bits of the row alone): set u takes the steps u, u + 4, u + 8, ...
  // of the main part, set 0 also the rest; then ((s0 + s1) + s2) + s3. Small tiles
  // (decode: 1 x 1) interleave the four chains; large ones make one pass per set over each
  // chunk of k, so that they need one accumulator per output in registers.
  template <int R, int C>
  static void tile(int64_t n, const uint8_t* const* wp, const uint8_t* const* ap, float* out) {
    using B = typename E::Block;
    constexpr int U = 4;
    constexpr int64_t S = 8;
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
    const int64_t main_end = n / (U * S) * (U * S);
    if constexpr (U * R * C <= 8) {
      for (int64_t k = 0; k < main_end; k += U * S)
#pragma GCC unroll 4
        for (int u = 0; u < U; ++u) step<R, C, false>(w, a, k + u * S, 0, acc[u]);
    } else {  // chunks of 16 steps per set, which stay in L1 / L2 over the four passes
      constexpr int64_t kChunk = 16 * U * S;
      for (int64_t k0 = 0; k0 < main_end; k0 += kChunk) {
        const int64_t k1 = k0 + kChunk < main_end ? k0 + kChunk : main_end;
#pragma GCC unroll 1
        for (int u = 0; u < U; ++u) {
          __m256 cur[R][C];
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
template <class E, void (*Q)(const float*, void*, int64_t)>
struct FloatSimd {
  using Mk = MkFloat<E, 4, 2, 1>;
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
  using Mk = q8::MkQ8_0<Tag, 4, 2>;
  static void quantize(const float* x, void* y, int64_t n) {
    quantize_act_q8_0(x, static_cast<BlockQ8_0*>(y), n / kQK8_0);
  }
};

}  // namespace

constinit const Registry kFloatQ8Avx2Part = make_registry<Simd>();

}  // namespace df::cpu
