// exp and SiLU computed the way llama.cpp's CPU backend computes them for each instruction
// set, lane by lane, so that activations agree bit for bit and later roundings (F16/BF16
// activations, Q8 blocks) come out the same.
//
// ggml's vector exp (ggml-cpu vec.h, ggml_v_expf) is the classic range reduction
// x = n ln2 + b, |b| <= ln2/2, with a degree-5 polynomial for e^b and a scale by 2^n. The
// AVX-512 and AVX2 builds differ in the last step (scalef of 1 + p(b), versus
// fma(k, p'(b), k) with k = 2^n), so each is emulated here with std::fma; the polynomial
// coefficients below are numeric facts of that algorithm. The scalar build uses expf.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>

#include "quant/cpu/kernels.h"

namespace df::cpu {
// Internal linkage: these helpers are compiled with different instruction sets in different
// translation units, and must never be merged across them by the linker.
namespace {

struct ExpReduction {
  float n;  // nearest integer to x / ln2
  float b;  // x - n ln2, in two steps
  float z;  // x / ln2 + 1.5 * 2^23 (its low bits hold n)
};

inline ExpReduction exp_reduce(float x) {
  const float r = 0x1.8p23f;
  const float z = std::fma(x, 0x1.715476p+0f, r);
  const float n = z - r;
  const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
  return {n, b, z};
}

// 2^e as a float, for e in [-126, 127].
inline float pow2i(int e) { return std::bit_cast<float>(static_cast<uint32_t>(e + 127) << 23); }

// ggml_v_expf, AVX-512 build.
inline float exp_ggml_avx512(float x) {
  const ExpReduction e = exp_reduce(x);
  if (std::isnan(e.n)) return e.n;  // scalef propagates NaN (and NaN -> int below is undefined)
  if (std::fabs(e.n) > 192.0f) return e.n <= 0.0f ? 0.0f : INFINITY;
  const float b = e.b, u = b * b;
  const float j = std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                                    std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                           u, std::fma(0x1.ffffecp-1f, b, 1.0f));
  // _mm512_scalef_ps(j, n) = j * 2^n rounded once: j * 2^n1 is exact (normal), the second
  // factor rounds (n = n1 + n2, |n1|, |n2| <= 96).
  const int ni = static_cast<int>(e.n);
  const int n1 = ni / 2, n2 = ni - n1;
  return j * pow2i(n1) * pow2i(n2);
}

// ggml_v_expf, AVX2 build.
inline float exp_ggml_avx2(float x) {
  const ExpReduction e = exp_reduce(x);
  const uint32_t ebits = std::bit_cast<uint32_t>(e.z) << 23;
  const float k = std::bit_cast<float>(ebits + std::bit_cast<uint32_t>(1.0f));
  const float b = e.b, u = b * b;
  const float j = std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                                    std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                           u, 0x1.ffffecp-1f * b);
  if (!(std::fabs(e.n) > 126.0f)) return std::fma(j, k, k);
  const uint32_t g = e.n <= 0.0f ? 0x82000000u : 0u;
  const float s1 = std::bit_cast<float>(g + 0x7f000000u);
  const float s2 = std::bit_cast<float>(ebits - g);
  if (std::fabs(e.n) > 192.0f) return s1 * s1;
  return std::fma(s2, j, s2) * s1;
}

// The exp llama.cpp's CPU build for `isa` uses in vector loops.
inline float exp_ggml(Isa isa, float x) {
  switch (isa) {
    case Isa::AVX512: return exp_ggml_avx512(x);
    case Isa::AVX2: return exp_ggml_avx2(x);
    default: return std::exp(x);
  }
}

}  // namespace

// Elementwise loops over rows, per ISA: the scalar build calls std::fma as a library
// function, the AVX2 / AVX-512 translation units (exp_kernels_*.cpp) compile the same
// expressions to FMA instructions, vectorised.
struct ExpKernels {
  // o[i] = silu(g[i]) * u[i]   (ggml_vec_swiglu_f32)
  void (*swiglu)(const float* g, const float* u, float* o, int64_t n);
  // y[i] = silu(x[i])           (ggml_vec_silu_f32)
  void (*silu)(const float* x, float* y, int64_t n);
  // x[i] = exp(x[i] - mx) for i < n, with the vector exp for every element (softmax rows,
  // whose padded length is a whole number of vectors)
  void (*exp_shift)(float* x, float mx, int64_t n);
};
const ExpKernels& exp_kernels(Isa isa);
const ExpKernels& exp_kernels_avx2();
const ExpKernels& exp_kernels_avx512();

namespace {

// Vector width of llama.cpp's elementwise loops for `isa` (the remainder runs scalar expf).
inline int64_t ggml_lanes(Isa isa) { return isa == Isa::AVX512 ? 16 : isa == Isa::AVX2 ? 8 : 1; }


}  // namespace
}  // namespace df::cpu
