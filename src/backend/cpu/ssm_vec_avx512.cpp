// AVX-512 version of the gated delta rule row update. Its dot products add in the order of
// ggml's AVX-512 ggml_vec_dot_f32 (4 accumulators of 16 lanes over steps of 64, pairwise
// reduction, then multiply-adds over the tail), so that states agree with llama.cpp's
// CPU backend to the last bit where the inputs do.
#include <immintrin.h>

#include <cmath>

#include "backend/cpu/ssm_vec.h"

namespace df::cpu {
namespace {

// _mm512_reduce_add_ps as GCC's header computes it: halves, then quarters, then pairs.
float reduce_add(__m512 v) {
  alignas(64) float l[16];
  _mm512_store_ps(l, v);
  float t3[8], t6[4];
  for (int i = 0; i < 8; ++i) t3[i] = l[8 + i] + l[i];
  for (int i = 0; i < 4; ++i) t6[i] = t3[4 + i] + t3[i];
  return (t6[0] + t6[2]) + (t6[1] + t6[3]);
}

float dot(const float* x, const float* y, int64_t n) {
  const int64_t np = n & ~int64_t{63};
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps(), s2 = _mm512_setzero_ps(), s3 = _mm512_setzero_ps();
  for (int64_t i = 0; i < np; i += 64) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(y + i + 16), s1);
    s2 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 32), _mm512_loadu_ps(y + i + 32), s2);
    s3 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 48), _mm512_loadu_ps(y + i + 48), s3);
  }
  s0 = _mm512_add_ps(s0, s2);
  s1 = _mm512_add_ps(s1, s3);
  s0 = _mm512_add_ps(s0, s1);
  float sum = reduce_add(s0);
  for (int64_t i = np; i < n; ++i) sum += x[i] * y[i];  // not fused (as measured against ggml)
  return sum;
}

float delta_rule_row(float* s, const float* s_in, const float* k, const float* q, float decay, float v, float beta,
                     int64_t d) {
  int64_t i = 0;
  const __m512 vdecay = _mm512_set1_ps(decay);
  for (; i + 16 <= d; i += 16) _mm512_storeu_ps(s + i, _mm512_mul_ps(_mm512_loadu_ps(s_in + i), vdecay));
  for (; i < d; ++i) s[i] = s_in[i] * decay;
  const float delta = (v - dot(s, k, d)) * beta;
  const __m512 vdelta = _mm512_set1_ps(delta);
  for (i = 0; i + 16 <= d; i += 16)
    _mm512_storeu_ps(s + i, _mm512_fmadd_ps(_mm512_loadu_ps(k + i), vdelta, _mm512_loadu_ps(s + i)));
  for (; i < d; ++i) s[i] = std::fma(k[i], delta, s[i]);
  return dot(s, q, d);
}

void fma_row(float* y, const float* x, const float* w, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(w + i), _mm512_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] = std::fma(x[i], w[i], y[i]);
}

}  // namespace

const SsmVec& ssm_vec_avx512() {
  static const SsmVec v{delta_rule_row, fma_row};
  return v;
}

}  // namespace df::cpu
