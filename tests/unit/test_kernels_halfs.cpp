// fp16 / bf16 conversion helpers (quant/types.h) against the F16C instructions and
// against ggml's bf16 rounding rule worked by hand.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <bit>
#include <cstdint>

#include "quant/types.h"

namespace {

__attribute__((target("f16c"))) uint16_t f16c_from_f32(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}
__attribute__((target("f16c"))) float f16c_to_f32(uint16_t h) { return _cvtsh_ss(h); }

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }
float from_bits(uint32_t u) { return std::bit_cast<float>(u); }

TEST(Halfs, Fp16ToFp32MatchesF16cForAllInputs) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "no F16C";
  for (uint32_t h = 0; h < 65536; ++h)
    ASSERT_EQ(bits(df::fp16_to_fp32(static_cast<uint16_t>(h))),
              bits(f16c_to_f32(static_cast<uint16_t>(h))))
        << std::hex << h;
}

// All 2^32 inputs were checked once by hand (tools-free: a loop like this one with step 1,
// ~10 s); the test covers a strided sample plus every input near the rounding boundaries.
TEST(Halfs, Fp32ToFp16MatchesF16c) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "no F16C";
  auto check = [](uint32_t u) {
    const float f = from_bits(u);
    ASSERT_EQ(df::fp32_to_fp16(f), f16c_from_f32(f)) << std::hex << u;
  };
  for (uint64_t u = 0; u < (1ull << 32); u += 251) check(static_cast<uint32_t>(u));
  // subnormal/zero cut, smallest normal, overflow cut, infinity and NaNs; both signs
  for (uint32_t edge : {0x33000000u, 0x38800000u, 0x477ff000u, 0x7f800000u})
    for (uint32_t sign : {0u, 0x80000000u})
      for (uint32_t d = 0; d < 1u << 16; ++d) {
        check(sign | (edge + d));
        check(sign | (edge - d));
      }
  for (uint32_t h = 0; h < 65536; ++h) {  // every half and the midpoints around it
    const uint32_t f = bits(f16c_to_f32(static_cast<uint16_t>(h)));
    for (int d = -2; d <= 2; ++d) check(f + d);
    check(f + 0x1000u);  // half way to the next half (for normals)
  }
}

TEST(Halfs, Fp16KnownValues) {
  EXPECT_EQ(df::fp32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(df::fp32_to_fp16(-2.0f), 0xc000);
  EXPECT_EQ(df::fp32_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(df::fp32_to_fp16(65520.0f), 0x7c00);          // tie rounds up to infinity
  EXPECT_EQ(df::fp32_to_fp16(from_bits(0x33000000)), 0);  // 2^-25: tie to even -> 0
  EXPECT_EQ(df::fp32_to_fp16(from_bits(0x33000001)), 1);  // just above -> smallest subnormal
  EXPECT_EQ(df::fp32_to_fp16(1.0f + 0x1p-11f), 0x3c00);   // tie, even stays
  EXPECT_EQ(df::fp32_to_fp16(1.0f + 3 * 0x1p-11f), 0x3c02);
  EXPECT_EQ(df::fp16_to_fp32(0x0001), 0x1p-24f);
  EXPECT_EQ(df::fp16_to_fp32(0x7bff), 65504.0f);
}

TEST(Halfs, Bf16RoundingAsGgml) {
  EXPECT_EQ(df::fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(df::fp32_to_bf16(from_bits(0x3f808000)), 0x3f80);  // tie, even stays
  EXPECT_EQ(df::fp32_to_bf16(from_bits(0x3f818000)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(df::fp32_to_bf16(from_bits(0x3f808001)), 0x3f81);
  EXPECT_EQ(df::fp32_to_bf16(from_bits(0x00018000)), 0x0002);  // subnormals are not flushed
  EXPECT_EQ(df::fp32_to_bf16(from_bits(0x7f7fffff)), 0x7f80);  // rounds to infinity
  EXPECT_EQ(df::fp32_to_bf16(from_bits(0x7f800001)), 0x7fc0);  // NaN made quiet
  EXPECT_EQ(df::fp32_to_bf16(from_bits(0xffc12345)), 0xffc1);
  EXPECT_EQ(bits(df::bf16_to_fp32(0x3f81)), 0x3f810000u);
}

}  // namespace
