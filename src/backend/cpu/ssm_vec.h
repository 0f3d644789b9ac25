// Vector helpers for the gated delta rule, per ISA. One call updates one row of a value head's
// state (the row of value dimension j, d floats over the key dimension) for one token.
#pragma once
#include <cstdint>

#include "quant/cpu/kernels.h"

namespace df::cpu {

struct SsmVec {
  // s *= decay;  delta = (v - s . k) * beta;  s += delta * k;  returns s . q
  float (*delta_rule_row)(float* s, const float* k, const float* q, float decay, float v, float beta,
                          int64_t d);
};

const SsmVec& ssm_vec(Isa isa);
const SsmVec& ssm_vec_scalar();
const SsmVec& ssm_vec_avx2();

}  // namespace df::cpu
