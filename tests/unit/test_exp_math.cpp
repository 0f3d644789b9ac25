// The emulated ggml vector exp stays within 3 ulp of exp (the algorithm is documented as 1.45 ulp plus rounding) over the softmax/SiLU range, and
// handles the masked (-inf) and overflowing ends as ggml does.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

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
}

TEST(ExpMath, SiluMatchesDefinition) {
  for (float x : {-8.0f, -1.5f, -0.1f, 0.0f, 0.3f, 2.0f, 9.0f}) {
    const double ref = x / (1.0 + std::exp(-static_cast<double>(x)));
    EXPECT_NEAR(silu_ggml(Isa::AVX512, x, true), ref, 1e-6 * (1 + std::fabs(ref)));
    EXPECT_NEAR(silu_ggml(Isa::AVX2, x, true), ref, 1e-6 * (1 + std::fabs(ref)));
    EXPECT_NEAR(silu_ggml(Isa::SCALAR, x, false), ref, 1e-6 * (1 + std::fabs(ref)));
  }
}

}  // namespace
}  // namespace df::cpu
