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

// Formats with the packed GEMM (kquant_vnni512.h) from 4 activation rows on; fewer rows
// (decode, verify) run the microkernel. Both keep Mk's order per output (row exact).
// RowsDecode: weight rows per decode tile (independent f32 chains, same bits per output).
template <template <class> class Policy, int RowsDecode = 1>
struct KSimd {
  using Mk = kquant::Mk<Ops, Policy, 2, 4, RowsDecode>;
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
template <> struct Simd<quant::FormatQ4_K> : KSimd<kquant::PQ4_K> {};  // decode: 1-row tiles (legacy_avx512.cpp)
template <> struct Simd<quant::FormatQ5_K> : KSimd<kquant::PQ5_K> {};
template <> struct Simd<quant::FormatQ6_K> { using Mk = kquant::Mk<Ops, kquant::PQ6_K, 2, 4, 1>; };
template <> struct Simd<quant::FormatQ8_K> {
  static void quantize(const float* x, void* out, int64_t n) { quantize_q8_k(x, out, n); }
};

}  // namespace

constinit const Registry kKquantAvx512Part = make_registry<Simd>();

}  // namespace df::cpu
