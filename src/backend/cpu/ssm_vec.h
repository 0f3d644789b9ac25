// Vector helpers for the gated delta rule, per ISA. One call updates one row of a value head's
// state (the row of value dimension j, d floats over the key dimension) for one token.
#pragma once
#include <cstdint>

#include "quant/cpu/kernels.h"

namespace df::cpu {

struct SsmVec {
  // s = s_in * decay;  delta = (v - s . k) * beta;  s += delta * k;  returns s . q
  // (s_in == s: in place; else s_in is read once, so a snapshot slot can be the destination)
  float (*delta_rule_row)(float* s, const float* s_in, const float* k, const float* q, float decay, float v,
                          float beta, int64_t d);
  // y[c] = fma(x[c], w[c], y[c]) for c < n: one tap of the causal convolution, rounded once
  // per tap like ggml's (contracted) ssm_conv loop.
  void (*fma_row)(float* y, const float* x, const float* w, int64_t n);
};

const SsmVec& ssm_vec(Isa isa);
const SsmVec& ssm_vec_scalar();
const SsmVec& ssm_vec_avx2();
const SsmVec& ssm_vec_avx512();

}  // namespace df::cpu
