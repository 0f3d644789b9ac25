#include "backend/cpu/ssm_vec.h"

#include <cmath>

namespace df::cpu {
namespace {

float delta_rule_row(float* s, const float* s_in, const float* k, const float* q, float decay, float v, float beta,
                     int64_t d) {
  float sk = 0.0f;
  for (int64_t i = 0; i < d; ++i) {
    s[i] = s_in[i] * decay;
    sk += s[i] * k[i];
  }
  const float delta = (v - sk) * beta;
  float sq = 0.0f;
  for (int64_t i = 0; i < d; ++i) {
    s[i] += delta * k[i];
    sq += s[i] * q[i];
  }
  return sq;
}

void fma_row(float* y, const float* x, const float* w, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::fma(x[i], w[i], y[i]);
}

}  // namespace

const SsmVec& ssm_vec_scalar() {
  static const SsmVec v{delta_rule_row, fma_row};
  return v;
}

const SsmVec& ssm_vec(Isa isa) {
  switch (isa) {
    case Isa::SCALAR: return ssm_vec_scalar();
    case Isa::AVX2: return ssm_vec_avx2();
    case Isa::AVX512: return ssm_vec_avx512();
  }
  return ssm_vec_scalar();
}

}  // namespace df::cpu
