// AVX-512 (VNNI) kernels of the K-quants: kquant_mk.h with vpmaddubsw + vpdpwssd
// for the scaled lane sums. Bit-identical to the scalar reference and to ggml's vec_dot.
#include <immintrin.h>

#include <cstring>

// GCC 12's AVX-512 intrinsics trip -Wuninitialized through _mm512_undefined_* (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)  // clang has no -Wmaybe-uninitialized
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "quant/cpu/registry.h"
#include "quant/cpu/kquant_mk.h"
#include "quant/cpu/kquant_vnni512.h"

namespace df::cpu {
namespace {

struct Ops {
  // vpdpwssd: acc + lo16 * s + hi16 * s; pair products cannot saturate (2 * 63 * 127 < 32767)
  static __m256i acc_scaled(__m256i acc, __m256i u, __m256i a, __m256i s16) {
    return _mm256_dpwssd_epi32(acc, _mm256_maddubs_epi16(u, a), s16);
  }
};

// Q8_K activations with FormatQ8_K::quantize_ref's bits (formats_q8.h): max = the first
// element of largest |x| (NaNs skipped: vmaxps returns its second operand, the running
// maximum, for a NaN), iscale = -127 / max, q = min(127, nearest_int(iscale * x)) with
// ggml's 1.5 * 2^23 trick (the product rounded before the add: no fma), d = 1 / iscale,
// bsums from the stored int8 values.
void quantize_q8_k(const float* x, void* out, int64_t n) {
  auto* y = static_cast<BlockQ8_K*>(out);
  const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    __m512 am = _mm512_setzero_ps();
    for (int j = 0; j < kQK_K; j += 16) am = _mm512_max_ps(_mm512_and_ps(_mm512_loadu_ps(x + j), absmask), am);
    const float amax = _mm512_reduce_max_ps(am);
    if (amax == 0.0f) {
      std::memset(&y[b], 0, sizeof(y[b]));
      continue;
    }
    float max = 0.0f;
    for (int j = 0; j < kQK_K; j += 16) {
      const __mmask16 m =
          _mm512_cmp_ps_mask(_mm512_and_ps(_mm512_loadu_ps(x + j), absmask), _mm512_set1_ps(amax), _CMP_EQ_OQ);
      if (m) {
        max = x[j + __builtin_ctz(m)];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m512 vs = _mm512_set1_ps(iscale), magic = _mm512_set1_ps(12582912.0f);
    for (int g = 0; g < kQK_K / 16; ++g) {
      __m512 v = _mm512_mul_ps(vs, _mm512_loadu_ps(x + 16 * g));
      asm("" : "+v"(v));  // keeps the product rounded (no contraction into an fma)
      const __m512i bits = _mm512_castps_si512(_mm512_add_ps(v, magic));
      __m512i q = _mm512_sub_epi32(_mm512_and_si512(bits, _mm512_set1_epi32(0x007fffff)), _mm512_set1_epi32(0x00400000));
      q = _mm512_min_epi32(q, _mm512_set1_epi32(127));
      const __m128i q8 = _mm512_cvtepi32_epi8(q);  // low byte, as static_cast<int8_t>
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y[b].qs + 16 * g), q8);
      y[b].bsums[g] = static_cast<int16_t>(_mm512_reduce_add_epi32(_mm512_cvtepi8_epi32(q8)));
    }
    y[b].d = 1.0f / iscale;
  }
}

// Decode GEMV (one weight row, one token) on 512-bit vectors for Q4_K, Q5_K and Q6_K (the
// types of llama.cpp's K_M mixes): groups v = 2m and v + 1 in the two 256-bit halves (their quant
// bytes are contiguous or the same bytes shifted apart, their activations contiguous), so a
// super-block takes 4 steps instead of 8. Per half, the int16 pair sums and the int32 lanes
// hold exactly the elements the 256-bit microkernel gives them, and the halves are added at
// the end of the super-block: the same exact int32 sums, then Mk's own f32 step (the same
// bits; every other tile shape stays Mk's). Wide<Policy>: the pair's quants and int16 scales.
template <template <class> class Policy>
struct Wide;
// 32 bytes in both 256-bit halves
inline __m512i both_halves(const uint8_t* p) {
  const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_inserti64x4(_mm512_castsi256_si512(q), q, 1);
}
template <>
struct Wide<kquant::PQ6_K> {
  // ql: 64 contiguous bytes (low nibbles for even m, high for odd); qh: the same 32 bytes,
  // shifted by 2j = 0, 2 (even m) or 4, 6 (odd m) in the two halves
  static __m512i quants(const BlockQ6_K& b, int m, __m512i sh_half) {
    const int c = m / 2;
    const __m512i l = _mm512_loadu_si512(b.ql + 64 * c);
    const __m512i lo = _mm512_and_si512(m % 2 ? _mm512_srli_epi16(l, 4) : l, _mm512_set1_epi8(0x0f));
    const __m512i h2 = both_halves(b.qh + 32 * c);
    const __m512i h = _mm512_and_si512(_mm512_srlv_epi16(m % 2 ? _mm512_srli_epi16(h2, 4) : h2, sh_half),
                                       _mm512_set1_epi8(3));
    return _mm512_or_si512(lo, _mm512_slli_epi16(h, 4));
  }
  static constexpr int16_t kShiftHigh = 2;
  // int16 lane i of step m: scale 4m + i / 8 (16 signed scales, one per 16 elements)
  static __m512i scales16(const BlockQ6_K& b, const kquant::PQ6_K<Ops>::Scales&) {
    return _mm512_castsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales))));
  }
  static constexpr int kLanesPerScale = 8, kScalesPerStep = 4;
};
// Q4_K and Q5_K (the same 12-byte scale packing): the same 32 bytes in both halves, low
// nibbles (v = 2m), high nibbles (v + 1); Q5_K or's in the qh bit of group v (qh's 32 bytes
// shifted by 2m, 2m + 1 in the two halves).
template <bool kQh>
struct WideK45 {
  static __m512i nibbles(const uint8_t* qs, int m, __m512i sh4) {
    return _mm512_and_si512(_mm512_srlv_epi16(both_halves(qs + 32 * m), sh4), _mm512_set1_epi8(0x0f));
  }
  static constexpr int16_t kShiftHigh = kQh ? 1 : 4;
  // int16 lane i of step m: scale 2m + i / 16 (8 unsigned 6-bit scales, one per 32 elements)
  static __m512i scales16(const auto&, const kquant::PQ4_K<Ops>::Scales& sc) {
    return _mm512_castsi256_si512(_mm256_cvtepu8_epi16(sc.sm));
  }
  static constexpr int kLanesPerScale = 16, kScalesPerStep = 2;
};
template <>
struct Wide<kquant::PQ4_K> : WideK45<false> {
  static __m512i quants(const BlockQ4_K& b, int m, __m512i sh_half) { return nibbles(b.qs, m, sh_half); }
};
template <>
struct Wide<kquant::PQ5_K> : WideK45<true> {
  static __m512i quants(const BlockQ5_K& b, int m, __m512i sh_half) {
    const __m512i lo = nibbles(b.qs, m, _mm512_slli_epi16(sh_half, 2));
    const __m512i hi = _mm512_and_si512(_mm512_srlv_epi16(_mm512_srli_epi16(both_halves(b.qh), 2 * m), sh_half),
                                        _mm512_set1_epi8(1));
    return _mm512_or_si512(lo, _mm512_slli_epi16(hi, 4));
  }
};

template <template <class> class Policy>
struct MkWide : kquant::Mk<Ops, Policy, 2, 4, 1> {
  using Base = kquant::Mk<Ops, Policy, 2, 4, 1>;
  using WB = typename Base::WB;
  using W = Wide<Policy>;
  // kScaleIdx.v[m][i]: the scale index of int16 lane i at step m
  struct ScaleIdx {
    alignas(64) int16_t v[4][32];
  };
  static constexpr ScaleIdx kScaleIdx = [] {
    ScaleIdx t{};
    for (int m = 0; m < 4; ++m)
      for (int i = 0; i < 32; ++i) t.v[m][i] = static_cast<int16_t>(W::kScalesPerStep * m + i / W::kLanesPerScale);
    return t;
  }();
  template <int R, int C>
  static void tile(int64_t n, const uint8_t* const* wp, const uint8_t* const* ap, float* out) {
    if constexpr (R == 1 && C == 1)
      gemv(n, reinterpret_cast<const WB*>(wp[0]), reinterpret_cast<const BlockQ8_K*>(ap[0]), out);
    else
      Base::template tile<R, C>(n, wp, ap, out);
  }
  static void gemv(int64_t n, const WB* w, const BlockQ8_K* a, float* out) {
    __m256 acc = _mm256_setzero_ps();
    __m128 acc_m = _mm_setzero_ps();
    float summs = 0.0f;
    const __m512i sh_half = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(W::kShiftHigh), 1);
    __m512i sidx[4];  // the scale of each int16 lane at step m (a constant table: no per-row setup)
    for (int m = 0; m < 4; ++m) sidx[m] = _mm512_load_si512(kScaleIdx.v[m]);
    const int64_t nb = n / kQK_K;
    for (int64_t b = 0; b < nb; ++b) {
      const WB& wb = w[b];
      const BlockQ8_K& ab = a[b];
      const char* p = reinterpret_cast<const char*>(&wb);
      for (int l = 0; l < static_cast<int>(sizeof(WB)); l += 64) {
        _mm_prefetch(p + Base::kPrefetchL1 + l, _MM_HINT_T0);
        _mm_prefetch(p + Base::kPrefetchL2 + l, _MM_HINT_T1);
      }
      const typename Base::P::Scales sc(wb);
      const __m512i s16 = W::scales16(wb, sc);
      __m512i sumi = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int m = 0; m < 4; ++m) {
        const __m512i u = W::quants(wb, m, sh_half);
        const __m512i av = _mm512_loadu_si512(ab.qs + 64 * m);
        sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(u, av), _mm512_permutexvar_epi16(sidx[m], s16));
      }
      const __m256i si = _mm256_add_epi32(_mm512_castsi512_si256(sumi), _mm512_extracti64x4_epi64(sumi, 1));
      Base::step(wb, ab, sc, si, acc, acc_m, summs);
    }
    *out = Base::finish(acc, acc_m, summs);
  }
};

// Formats with the packed GEMM (kquant_vnni512.h) from 4 activation rows on; fewer rows
// (decode, verify) run the microkernel MkT. Both keep Mk's order per output (row exact).
template <template <class> class Policy, class MkT = kquant::Mk<Ops, Policy, 2, 4, 1>>
struct KSimd {
  using Mk = MkT;
  static constexpr bool kShapeFree = true;
  static void gemm(int64_t n, const uint8_t* W, size_t w_stride, int64_t i0, int64_t i1, const uint8_t* act,
                   size_t act_stride, int64_t n_act, float* Y, int64_t ldy) {
    if (n_act >= 4)
      kquantv::Gemm<Ops, Policy>::run(n, W, w_stride, i0, i1, act, act_stride, n_act, Y, ldy);
    else
      tiled::gemm<Mk>(n, W, w_stride, i0, i1, act, act_stride, n_act, Y, ldy);
  }
};

// This file's part of the registry (registry.h); activations use the registry's quantisers.
template <class F>
struct Simd {};
// Q2_K, Q3_K and Q6_K keep the microkernel for every row count: the packed GEMM measured no
// faster for Q6_K (microbench, 256 rows x 64 tokens: 237-242 vs 237 us at k = 1024); Q2_K was
// not measured.
template <> struct Simd<quant::FormatQ2_K> { using Mk = kquant::Mk<Ops, kquant::PQ2_K, 2, 4, 1>; };
template <> struct Simd<quant::FormatQ3_K> { using Mk = kquant::Mk<Ops, kquant::PQ3_K, 2, 4, 1>; };
template <> struct Simd<quant::FormatQ4_K> : KSimd<kquant::PQ4_K, MkWide<kquant::PQ4_K>> {};  // decode: MkWide
template <> struct Simd<quant::FormatQ5_K> : KSimd<kquant::PQ5_K, MkWide<kquant::PQ5_K>> {};
template <> struct Simd<quant::FormatQ6_K> { using Mk = MkWide<kquant::PQ6_K>; };  // decode: MkWide
template <> struct Simd<quant::FormatQ8_K> {
  static void quantize(const float* x, void* out, int64_t n) { quantize_q8_k(x, out, n); }
};

}  // namespace

constinit const Registry kKquantAvx512Part = make_registry<Simd>();

}  // namespace df::cpu
