#include "backend/cpu/ssm_vec.h"

namespace df::cpu {
namespace {

float delta_rule_row(float* s, const float* k, const float* q, float decay, float v, float beta, int64_t d) {
  float sk = 0.0f;
  for (int64_t i = 0; i < d; ++i) {
    s[i] *= decay;
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

}  // namespace

const SsmVec& ssm_vec_scalar() {
  static const SsmVec v{delta_rule_row};
  return v;
}

const SsmVec& ssm_vec(Isa isa) { return isa == Isa::SCALAR ? ssm_vec_scalar() : ssm_vec_avx2(); }

}  // namespace df::cpu
