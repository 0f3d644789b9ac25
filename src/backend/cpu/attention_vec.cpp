#include "backend/cpu/attention_vec.h"

#include "quant/types.h"

namespace df::cpu {
namespace {

float dot_f16(const float* q, const uint16_t* k, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += q[i] * fp16_to_fp32(k[i]);
  return s;
}
float dot_f32(const float* q, const float* k, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += q[i] * k[i];
  return s;
}
void scale_axpy_f16(float* y, float s, const uint16_t* v, float a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] * s + a * fp16_to_fp32(v[i]);
}
void scale_axpy_f32(float* y, float s, const float* v, float a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] * s + a * v[i];
}

}  // namespace

const AttnVec& attn_vec_scalar() {
  static const AttnVec v{dot_f16, dot_f32, scale_axpy_f16, scale_axpy_f32};
  return v;
}

const AttnVec& attn_vec(Isa isa) {
  return isa == Isa::SCALAR ? attn_vec_scalar() : attn_vec_avx2();
}

}  // namespace df::cpu
