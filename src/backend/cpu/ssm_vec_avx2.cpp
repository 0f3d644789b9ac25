// AVX2/FMA version of the gated delta rule row update. Its dot products add in the order of
// ggml's AVX2 ggml_vec_dot_f32 (4 accumulators of 8 lanes over steps of 32, pairwise
// reduction, horizontal adds, then multiply-adds over the tail), so that states agree
// with llama.cpp's CPU backend to the last bit where the inputs do.
#include <immintrin.h>

#include <cmath>

#include "backend/cpu/ssm_vec.h"

namespace df::cpu {
namespace {

float dot(const float* x, const float* y, int64_t n) {
  const int64_t np = n & ~int64_t{31};
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
  for (int64_t i = 0; i < np; i += 32) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), s1);
    s2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16), s2);
    s3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24), s3);
  }
  s0 = _mm256_add_ps(s0, s2);
  s1 = _mm256_add_ps(s1, s3);
  s0 = _mm256_add_ps(s0, s1);
  const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(s0), _mm256_extractf128_ps(s0, 1));
  const __m128 t1 = _mm_hadd_ps(t0, t0);
  float sum = _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
  for (int64_t i = np; i < n; ++i) sum += x[i] * y[i];  // not fused (as measured against ggml)
  return sum;
}

float delta_rule_row(float* s, const float* s_in, const float* k, const float* q, float decay, float v, float beta,
                     int64_t d) {
  int64_t i = 0;
  const __m256 vdecay = _mm256_set1_ps(decay);
  for (; i + 8 <= d; i += 8) _mm256_storeu_ps(s + i, _mm256_mul_ps(_mm256_loadu_ps(s_in + i), vdecay));
  for (; i < d; ++i) s[i] = s_in[i] * decay;
  const float delta = (v - dot(s, k, d)) * beta;
  const __m256 vdelta = _mm256_set1_ps(delta);
  for (i = 0; i + 8 <= d; i += 8)
    _mm256_storeu_ps(s + i, _mm256_fmadd_ps(_mm256_loadu_ps(k + i), vdelta, _mm256_loadu_ps(s + i)));
  for (; i < d; ++i) s[i] = std::fma(k[i], delta, s[i]);
  return dot(s, q, d);
}

void fma_row(float* y, const float* x, const float* w, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(w + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] = std::fma(x[i], w[i], y[i]);
}

}  // namespace

const SsmVec& ssm_vec_avx2() {
  static const SsmVec v{delta_rule_row, fma_row};
  return v;
}

}  // namespace df::cpu
