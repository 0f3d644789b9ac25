// AVX2/FMA version of the gated delta rule row update.
#include <immintrin.h>

#include "backend/cpu/ssm_vec.h"

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

float delta_rule_row(float* s, const float* k, const float* q, float decay, float v, float beta, int64_t d) {
  const __m256 vdecay = _mm256_set1_ps(decay);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= d; i += 16) {
    const __m256 s0 = _mm256_mul_ps(_mm256_loadu_ps(s + i), vdecay);
    const __m256 s1 = _mm256_mul_ps(_mm256_loadu_ps(s + i + 8), vdecay);
    _mm256_storeu_ps(s + i, s0);
    _mm256_storeu_ps(s + i + 8, s1);
    acc0 = _mm256_fmadd_ps(s0, _mm256_loadu_ps(k + i), acc0);
    acc1 = _mm256_fmadd_ps(s1, _mm256_loadu_ps(k + i + 8), acc1);
  }
  float sk = hsum(_mm256_add_ps(acc0, acc1));
  for (; i < d; ++i) {
    s[i] *= decay;
    sk += s[i] * k[i];
  }
  const float delta = (v - sk) * beta;
  const __m256 vdelta = _mm256_set1_ps(delta);
  acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  i = 0;
  for (; i + 16 <= d; i += 16) {
    const __m256 s0 = _mm256_fmadd_ps(vdelta, _mm256_loadu_ps(k + i), _mm256_loadu_ps(s + i));
    const __m256 s1 = _mm256_fmadd_ps(vdelta, _mm256_loadu_ps(k + i + 8), _mm256_loadu_ps(s + i + 8));
    _mm256_storeu_ps(s + i, s0);
    _mm256_storeu_ps(s + i + 8, s1);
    acc0 = _mm256_fmadd_ps(s0, _mm256_loadu_ps(q + i), acc0);
    acc1 = _mm256_fmadd_ps(s1, _mm256_loadu_ps(q + i + 8), acc1);
  }
  float sq = hsum(_mm256_add_ps(acc0, acc1));
  for (; i < d; ++i) {
    s[i] += delta * k[i];
    sq += s[i] * q[i];
  }
  return sq;
}

}  // namespace

const SsmVec& ssm_vec_avx2() {
  static const SsmVec v{delta_rule_row};
  return v;
}

}  // namespace df::cpu
