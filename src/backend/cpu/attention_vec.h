// Vector helpers for attention over the KV cache, per ISA: dot products of a query with
// cache rows and accumulation of weighted value rows. Cache rows are F16 or F32.
#pragma once
#include <cstdint>

#include "quant/cpu/kernels.h"

namespace df::cpu {

struct AttnVec {
  // sum_i q[i] * k[i]  (q already rounded to the cache precision, held as f32)
  float (*dot_f16)(const float* q, const uint16_t* k, int64_t n);
  float (*dot_f32)(const float* q, const float* k, int64_t n);
  // y[i] = y[i] * s + a * v[i]
  void (*scale_axpy_f16)(float* y, float s, const uint16_t* v, float a, int64_t n);
  void (*scale_axpy_f32)(float* y, float s, const float* v, float a, int64_t n);
};

const AttnVec& attn_vec(Isa isa);
const AttnVec& attn_vec_scalar();
const AttnVec& attn_vec_avx2();

}  // namespace df::cpu
