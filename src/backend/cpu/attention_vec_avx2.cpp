// AVX2 + F16C versions of the attention vector helpers.
#include <immintrin.h>

#include "backend/cpu/attention_vec.h"
#include "quant/types.h"

namespace df::cpu {
namespace {

inline float hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v);
  __m128 hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

float dot_f16(const float* q, const uint16_t* k, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 k0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k + i)));
    __m256 k1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k + i + 8)));
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), k0, acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), k1, acc1);
  }
  float s = hsum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) s += q[i] * fp16_to_fp32(k[i]);
  return s;
}

float dot_f32(const float* q, const float* k, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(k + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), _mm256_loadu_ps(k + i + 8), acc1);
  }
  float s = hsum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) s += q[i] * k[i];
  return s;
}

void scale_axpy_f16(float* y, float s, const uint16_t* v, float a, int64_t n) {
  const __m256 vs = _mm256_set1_ps(s), va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v + i)));
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, x, _mm256_mul_ps(_mm256_loadu_ps(y + i), vs)));
  }
  for (; i < n; ++i) y[i] = y[i] * s + a * fp16_to_fp32(v[i]);
}

void scale_axpy_f32(float* y, float s, const float* v, float a, int64_t n) {
  const __m256 vs = _mm256_set1_ps(s), va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(v + i),
                                            _mm256_mul_ps(_mm256_loadu_ps(y + i), vs)));
  }
  for (; i < n; ++i) y[i] = y[i] * s + a * v[i];
}

}  // namespace

const AttnVec& attn_vec_avx2() {
  static const AttnVec v{dot_f16, dot_f32, scale_axpy_f16, scale_axpy_f32};
  return v;
}

}  // namespace df::cpu
