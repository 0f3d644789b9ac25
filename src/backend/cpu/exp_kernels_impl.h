// Row loops over the emulated ggml exp, instantiated once per ISA translation unit
// (exp_kernels.cpp, exp_kernels_avx2.cpp, exp_kernels_avx512.cpp) so that the compiler turns
// the same expressions into that ISA's instructions.
#pragma once
#include "backend/cpu/exp_math.h"

namespace df::cpu::exp_impl {
namespace {  // instantiated per ISA translation unit: keep the copies apart

template <Isa I>
void swiglu(const float* g, const float* u, float* o, int64_t n) {
  const int64_t vec_end = n / ggml_lanes(I) * ggml_lanes(I);
  for (int64_t i = 0; i < vec_end; ++i) o[i] = g[i] / (1.0f + exp_ggml(I, 0.0f - g[i])) * u[i];
  for (int64_t i = vec_end; i < n; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

template <Isa I>
void silu(const float* x, float* y, int64_t n) {
  const int64_t vec_end = n / ggml_lanes(I) * ggml_lanes(I);
  for (int64_t i = 0; i < vec_end; ++i) y[i] = x[i] / (1.0f + exp_ggml(I, 0.0f - x[i]));
  for (int64_t i = vec_end; i < n; ++i) y[i] = x[i] / (1.0f + std::exp(-x[i]));
}

template <Isa I>
void exp_shift(float* x, float mx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = exp_ggml(I, x[i] - mx);
}

template <Isa I>
constexpr ExpKernels kernels() {
  return {&swiglu<I>, &silu<I>, &exp_shift<I>};
}

}  // namespace
}  // namespace df::cpu::exp_impl
