// The IQ, ternary and 1-2 bit formats: SIMD gemm / vec_dot of every ISA bit exact with the
// scalar reference over odd shapes, and the reference dot itself against f64 math on the
// dequantised operands (which are bit exact with llama.cpp, tests/models).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "common/error.h"
#include "quant/dot_math.h"
#include "quant/types.h"
#include "random_blocks.h"

namespace {

using df::GgmlType;
using df::cpu::Isa;
using df::test::kLowBitTypes;

// The scalar reference sums in ggml's f32 order (ggml_lanes.h) and every SIMD kernel
// follows the same order: results must be identical, bit for bit.
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<uint8_t> activations(GgmlType w, int64_t n_act, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  const auto x = df::test::gaussian(rng, n_act * k);
  const size_t ab = df::cpu::act_row_bytes(w, k);
  std::vector<uint8_t> A(ab * n_act);
  for (int64_t r = 0; r < n_act; ++r)
    df::cpu::kernels(Isa::SCALAR).quantize_act(w, x.data() + r * k, A.data() + r * ab, k);
  return A;
}

TEST(KernelsLowBit, SimdGemmAndVecDotBitExactWithScalar) {
  const auto& ref = df::cpu::kernels(Isa::SCALAR);
  uint32_t seed = 1;
  for (GgmlType t : kLowBitTypes) {
    for (Isa isa : df::test::simd_isas()) {
      const int64_t be = df::type_info(t).block_elems;
      for (int64_t k : {256, 320, 352, 512, 1280}) {
        if (k % be) continue;
        for (auto [rows, n_act] : {std::pair<int64_t, int64_t>{1, 1}, {7, 1}, {5, 3}, {9, 4}, {3, 11}, {2, 17}}) {
          const size_t wb = df::row_bytes(t, k), ab = df::cpu::act_row_bytes(t, k);
          const auto W = df::test::random_rows(t, rows, k, ++seed);
          const auto A = activations(t, n_act, k, ++seed);
          std::vector<float> want(rows * n_act);
          ref.gemm(t, k, W.data(), wb, 0, rows, A.data(), ab, n_act, want.data(), rows);
          const auto& kr = df::cpu::kernels(isa);
          std::vector<float> got(rows * n_act, -1.0f), dots(rows * n_act);
          kr.gemm(t, k, W.data(), wb, 0, rows, A.data(), ab, n_act, got.data(), rows);
          for (int64_t r = 0; r < n_act; ++r)
            for (int64_t i = 0; i < rows; ++i)
              dots[r * rows + i] = kr.vec_dot(t, k, W.data() + i * wb, A.data() + r * ab);
          EXPECT_TRUE(same_bits(want, got)) << df::type_name(t) << " gemm " << df::cpu::isa_name(isa) << " k=" << k
                                            << " " << rows << "x" << n_act << ", normalised error "
                                            << df::test::normalised_error(want, got);
          EXPECT_TRUE(same_bits(want, dots)) << df::type_name(t) << " vec_dot " << df::cpu::isa_name(isa) << " k=" << k
                                             << ", normalised error " << df::test::normalised_error(want, dots);
        }
      }
    }
  }
}

// gemm over a row range writes exactly rows [i0, i1).
TEST(KernelsLowBit, GemmRowRange) {
  for (GgmlType t : kLowBitTypes) {
    const int64_t k = 512, rows = 10, n_act = 6;
    const size_t wb = df::row_bytes(t, k), ab = df::cpu::act_row_bytes(t, k);
    const auto W = df::test::random_rows(t, rows, k, 77);
    const auto A = activations(t, n_act, k, 78);
    for (Isa isa : {Isa::SCALAR, Isa::AVX2, Isa::AVX512}) {
      if (static_cast<int>(isa) > static_cast<int>(df::cpu::best_isa())) continue;
      std::vector<float> Y(n_act * (rows + 2), 7.0f);
      df::cpu::kernels(isa).gemm(t, k, W.data(), wb, 3, 8, A.data(), ab, n_act, Y.data(), rows + 2);
      for (int64_t r = 0; r < n_act; ++r) {
        for (int64_t i = 0; i < rows + 2; ++i) {
          if (i < 3 || i >= 8) {
            EXPECT_EQ(Y[r * (rows + 2) + i], 7.0f) << df::type_name(t) << " " << i;
          }
        }
      }
    }
  }
}

// dot_ref = dot_math (dequantised operands, f64) up to f32 rounding: checks the integer
// decoding, sub-block scales and fixed factors of the reference dot against the dequantiser.
TEST(KernelsLowBit, ReferenceDotMatchesDequantisedOperands) {
  uint32_t seed = 500;
  for (GgmlType t : kLowBitTypes) {
    const int64_t k = 1024, rows = 16;
    const size_t wb = df::row_bytes(t, k);
    const auto W = df::test::random_rows(t, rows, k, ++seed);
    const auto A = activations(t, 1, k, ++seed);
    std::vector<float> want(rows), got(rows);
    for (int64_t i = 0; i < rows; ++i) {
      want[i] = static_cast<float>(df::quant::dot_math(t, W.data() + i * wb, A.data(), k));
      got[i] = df::cpu::kernels(Isa::SCALAR).vec_dot(t, k, W.data() + i * wb, A.data());
    }
    EXPECT_LE(df::test::normalised_error(want, got), 1e-10) << df::type_name(t);
  }
}

// The weight quantisers we have (TQ1_0, TQ2_0, Q1_0, Q2_0) round-trip to their grids.
TEST(KernelsLowBit, QuantizeRefRoundTrip) {
  std::mt19937 rng(3);
  const int64_t n = 1024;
  const auto x = df::test::gaussian(rng, n);
  for (GgmlType t : {GgmlType::TQ1_0, GgmlType::TQ2_0, GgmlType::Q2_0}) {
    std::vector<uint8_t> q(df::row_bytes(t, n));
    df::cpu::quantize_row_ref(t, x.data(), q.data(), n);
    std::vector<float> y(n);
    df::cpu::dequantize_row(t, q.data(), y.data(), n);
    const int64_t be = t == GgmlType::Q2_0 ? 64 : 256;
    for (int64_t b = 0; b < n / be; ++b) {
      float amax = 0;
      for (int64_t j = 0; j < be; ++j) amax = std::fmax(amax, std::fabs(x[b * be + j]));
      for (int64_t j = 0; j < be; ++j) {  // nearest of {-1, 0, 1} (x2 for Q2_0) times fp16(amax)
        const float v = y[b * be + j], xv = x[b * be + j];
        ASSERT_LE(std::fabs(v - xv), amax * (0.5f + 1e-3f)) << df::type_name(t) << " " << b * be + j;
      }
    }
  }
  // Q1_0: signs and the mean magnitude
  std::vector<uint8_t> q(df::row_bytes(GgmlType::Q1_0, n));
  df::cpu::quantize_row_ref(GgmlType::Q1_0, x.data(), q.data(), n);
  std::vector<float> y(n);
  df::cpu::dequantize_row(GgmlType::Q1_0, q.data(), y.data(), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i] >= 0, x[i] >= 0) << i;
  EXPECT_THROW(df::cpu::quantize_row_ref(GgmlType::IQ2_XXS, x.data(), q.data(), 256), df::Error);
}

}  // namespace
