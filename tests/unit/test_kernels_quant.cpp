// Row conversions: quantize_row_ref / dequantize_row (ggml's reference semantics) and the
// activation quantisers quantize_act of every ISA (bit exact with the scalar reference).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/error.h"
#include "kernel_test_util.h"
#include "quant/blocks.h"
#include "quant/types.h"

namespace {

using df::GgmlType;
using df::cpu::Isa;

std::vector<uint8_t> quantize_ref(GgmlType t, const std::vector<float>& x) {
  std::vector<uint8_t> out(df::row_bytes(t, static_cast<int64_t>(x.size())));
  df::cpu::quantize_row_ref(t, x.data(), out.data(), static_cast<int64_t>(x.size()));
  return out;
}

TEST(KernelsQuant, VecDotTypesAndRowBytes) {
  for (GgmlType t : df::test::kKernelTypes) EXPECT_EQ(df::cpu::vec_dot_type(t), t);
  EXPECT_EQ(df::cpu::act_row_bytes(GgmlType::Q8_0, 4096), 128u * 34u);
  EXPECT_EQ(df::cpu::act_row_bytes(GgmlType::BF16, 7), 14u);
  EXPECT_THROW(df::cpu::act_row_bytes(GgmlType::Q8_0, 48), df::Error);
  EXPECT_THROW(df::cpu::vec_dot_type(GgmlType::I32), df::Error);  // not a weight format
  float x[32] = {};
  uint8_t y[64];
  EXPECT_THROW(df::cpu::quantize_row_ref(GgmlType::Q8_0, x, y, 31), df::Error);
}

TEST(KernelsQuant, Q8_0RefAndActRoundDifferently) {
  // amax = 127 -> d = 1: ref rounds ties away from zero, the x86 activation path to even.
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  x[1] = 2.5f;
  x[2] = -2.5f;
  x[3] = 0.5f;
  x[4] = 3.5f;
  x[5] = -126.5f;
  const auto ref = quantize_ref(GgmlType::Q8_0, x);
  df::BlockQ8_0 b;
  std::memcpy(&b, ref.data(), sizeof b);
  EXPECT_EQ(b.d, 0x3c00);
  const int8_t want_ref[6] = {127, 3, -3, 1, 4, -127};
  for (int j = 0; j < 6; ++j) EXPECT_EQ(b.qs[j], want_ref[j]) << j;

  const int8_t want_act[6] = {127, 2, -2, 0, 4, -126};
  for (Isa isa : {Isa::SCALAR, Isa::AVX2, Isa::AVX512}) {
    if (static_cast<int>(isa) > static_cast<int>(df::cpu::best_isa())) continue;
    df::BlockQ8_0 a;
    df::cpu::kernels(isa).quantize_act(GgmlType::Q8_0, x.data(), &a, 32);
    EXPECT_EQ(a.d, 0x3c00);
    for (int j = 0; j < 6; ++j) EXPECT_EQ(a.qs[j], want_act[j]) << df::cpu::isa_name(isa) << j;
  }
}

TEST(KernelsQuant, Q8_0ZeroBlock) {
  std::vector<float> x(64, 0.0f);
  x[40] = -3.0f;
  const auto ref = quantize_ref(GgmlType::Q8_0, x);
  df::BlockQ8_0 b[2];
  std::memcpy(b, ref.data(), sizeof b);
  EXPECT_EQ(b[0].d, 0);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(b[0].qs[j], 0);
  EXPECT_EQ(b[1].qs[8], -127);
  EXPECT_EQ(b[1].d, df::fp32_to_fp16(3.0f / 127.0f));
}

TEST(KernelsQuant, DequantizeQ8_0KnownValues) {
  df::BlockQ8_0 b;
  b.d = 0x3800;  // 0.5
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(j * 8 - 128);
  float y[32];
  df::cpu::dequantize_row(GgmlType::Q8_0, &b, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], (j * 8 - 128) * 0.5f);
}

// quantize_row_ref then dequantize_row stays within the format's rounding error, and
// dequantize_row of F16 / BF16 is exact on their own values.
TEST(KernelsQuant, RoundTripWithinRoundingError) {
  std::mt19937 rng(1);
  const int64_t n = 4096;
  const auto x = df::test::gaussian(rng, n, 3.0f);
  for (GgmlType t : df::test::kKernelTypes) {
    const auto q = quantize_ref(t, x);
    std::vector<float> y(n);
    df::cpu::dequantize_row(t, q.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      double tol = 0;
      switch (t) {
        case GgmlType::F32: tol = 0; break;
        case GgmlType::F16: tol = std::fabs(x[i]) * 0x1p-11 + 0x1p-25; break;
        case GgmlType::BF16: tol = std::fabs(x[i]) * 0x1p-8; break;
        default: {  // Q8_0: half a step of the block's scale (scale itself rounded to fp16)
          float amax = 0;
          for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[i / 32 * 32 + j]));
          tol = amax / 127.0 * (0.5 + 127 * 0x1p-11) + 1e-7;
        }
      }
      ASSERT_LE(std::fabs(double(y[i]) - x[i]), tol) << df::type_name(t) << " " << i;
    }
  }
}

// Activation quantisers: every ISA bit-identical to the scalar reference, including row
// tails, values that round to ties, zeros, huge and subnormal magnitudes.
TEST(KernelsQuant, ActivationQuantisersBitExactAcrossIsas) {
  std::mt19937 rng(2);
  const auto& ref = df::cpu::kernels(Isa::SCALAR);
  std::vector<GgmlType> types(std::begin(df::test::kKernelTypes), std::end(df::test::kKernelTypes));
  types.push_back(GgmlType::Q4_K);  // Q8_K activations
  for (GgmlType t : types) {
    const int64_t be = df::type_info(t).block_elems;
    for (int64_t n : {1, 3, 8, 15, 16, 17, 31, 32, 33, 64, 96, 100, 256, 1024, 4096 + 32, 4096}) {
      if (n % be) continue;
      // variant 5 (Q8_K rows): NaNs are skipped by the max, the first of equal |max| wins
      const bool q8k = df::cpu::vec_dot_type(t) == GgmlType::Q8_K;
      for (int variant = 0; variant < (q8k ? 6 : 5); ++variant) {
        std::vector<float> x = df::test::gaussian(rng, n);
        for (int64_t i = 0; i < n; ++i) {
          if (variant == 1) x[i] = std::round(x[i] * 8.0f) / 2.0f;  // many ties
          if (variant == 2 && i % 32 < 16) x[i] = 0.0f;            // zero half blocks
          if (variant == 3) x[i] *= 1e30f;
          if (variant == 4) x[i] *= 1e-39f;  // subnormal f32
          if (variant == 5 && i % 97 == 3) x[i] = std::nanf("");
          if (variant == 5 && i % 256 == 40) x[i] = 9.0f;
          if (variant == 5 && i % 256 == 20) x[i] = -9.0f;
        }
        const size_t bytes = df::cpu::act_row_bytes(t, n);
        std::vector<uint8_t> want(bytes + 8, 0xcd);
        ref.quantize_act(t, x.data(), want.data(), n);
        for (Isa isa : df::test::simd_isas()) {
          std::vector<uint8_t> got(bytes + 8, 0xcd);
          df::cpu::kernels(isa).quantize_act(t, x.data(), got.data(), n);
          ASSERT_EQ(got, want) << df::type_name(t) << " n=" << n << " variant " << variant << " "
                               << df::cpu::isa_name(isa);
        }
      }
    }
  }
}

// The activation quantisers agree with the reference quantisers where ggml's do:
// F32/F16/BF16 always; Q8_0 only up to the rounding differences (|dq| <= 1).
TEST(KernelsQuant, ActivationQuantiserVsReference) {
  std::mt19937 rng(3);
  const int64_t n = 2048;
  const auto x = df::test::gaussian(rng, n);
  for (GgmlType t : df::test::kKernelTypes) {
    const auto want = quantize_ref(t, x);
    std::vector<uint8_t> got(want.size());
    df::cpu::kernels(Isa::SCALAR).quantize_act(t, x.data(), got.data(), n);
    if (t != GgmlType::Q8_0) {
      EXPECT_EQ(got, want) << df::type_name(t);
      continue;
    }
    int differ = 0;
    for (int64_t b = 0; b < n / 32; ++b) {
      df::BlockQ8_0 r, a;
      std::memcpy(&r, want.data() + b * 34, 34);
      std::memcpy(&a, got.data() + b * 34, 34);
      EXPECT_EQ(r.d, a.d);
      for (int j = 0; j < 32; ++j) {
        EXPECT_LE(std::abs(r.qs[j] - a.qs[j]), 1);
        differ += r.qs[j] != a.qs[j];
      }
    }
    EXPECT_LT(differ, n / 100);  // only ties and last-bit multiplier differences
  }
}

}  // namespace
