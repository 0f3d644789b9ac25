// The emulated ggml vector exp stays within 3 ulp of exp (the algorithm is documented as 1.45 ulp plus rounding) over the softmax/SiLU range, and
// handles the masked (-inf) and overflowing ends as ggml does.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/exp_math.h"

namespace df::cpu {
namespace {

TEST(ExpMath, CloseToExpf) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> d(-87.0f, 88.0f);
  for (int i = 0; i < 200000; ++i) {
    const float x = d(rng);
    const double ref = std::exp(static_cast<double>(x));
    for (float got : {exp_ggml_avx512(x), exp_ggml_avx2(x)}) {
      const double ulp = std::ldexp(1.0, std::ilogb(static_cast<float>(ref)) - 23);
      ASSERT_LE(std::fabs(got - ref), 3 * ulp) << x;
    }
  }
}

TEST(ExpMath, Ends) {
  for (float x : {-INFINITY, -200.0f, -1000.0f}) {
    EXPECT_EQ(exp_ggml_avx512(x), 0.0f);
    EXPECT_EQ(exp_ggml_avx2(x), 0.0f);
  }
  EXPECT_TRUE(std::isinf(exp_ggml_avx512(200.0f)));
  EXPECT_TRUE(std::isinf(exp_ggml_avx2(200.0f)));
  EXPECT_EQ(exp_ggml_avx512(0.0f), 1.0f);
  EXPECT_EQ(exp_ggml_avx2(0.0f), 1.0f);
  // NaN in, NaN out (a NaN weight in a model file; found by fuzz_model, where the AVX-512
  // emulation converted NaN to int, undefined behaviour that UBSan reports).
  EXPECT_TRUE(std::isnan(exp_ggml_avx512(NAN)));
  EXPECT_TRUE(std::isnan(exp_ggml_avx2(NAN)));
  for (Isa isa : {Isa::SCALAR, Isa::AVX2, Isa::AVX512}) {
    if (isa > best_isa()) continue;
    std::vector<float> x(32, NAN), y(32);
    exp_kernels(isa).silu(x.data(), y.data(), 32);
    for (float v : y) EXPECT_TRUE(std::isnan(v)) << isa_name(isa);
  }
}

// The per-ISA row kernels (compiled with FMA / vector instructions) give exactly the values
// of the scalar emulation, and SiLU / SwiGLU agree with their definition.
TEST(ExpMath, RowKernelsEqualEmulation) {
  std::mt19937 rng(9);
  std::normal_distribution<float> d(0.0f, 4.0f);
  const int64_t n = 1000;  // not a multiple of 16: exercises the expf remainder
  std::vector<float> g(n), u(n), o(n), y(n), e(n);
  for (int64_t i = 0; i < n; ++i) g[i] = d(rng), u[i] = d(rng);
  for (Isa isa : {Isa::SCALAR, Isa::AVX2, Isa::AVX512}) {
    if (isa > best_isa()) continue;
    const ExpKernels& k = exp_kernels(isa);
    k.swiglu(g.data(), u.data(), o.data(), n);
    k.silu(g.data(), y.data(), n);
    e = g;
    k.exp_shift(e.data(), 1.5f, n);
    const int64_t vec_end = n / ggml_lanes(isa) * ggml_lanes(isa);
    for (int64_t i = 0; i < n; ++i) {
      const float ex = i < vec_end ? exp_ggml(isa, 0.0f - g[i]) : std::exp(-g[i]);
      const float silu = g[i] / (1.0f + ex);
      ASSERT_EQ(y[i], silu) << isa_name(isa) << " " << i;
      ASSERT_EQ(o[i], silu * u[i]) << isa_name(isa) << " " << i;
      ASSERT_EQ(e[i], exp_ggml(isa, g[i] - 1.5f)) << isa_name(isa) << " " << i;
      const double ref = g[i] / (1.0 + std::exp(-static_cast<double>(g[i])));
      ASSERT_NEAR(silu, ref, 1e-6 * (1 + std::fabs(ref)));
    }
  }
}

}  // namespace
}  // namespace df::cpu
