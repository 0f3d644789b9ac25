// The quantised formats Q4_0 Q4_1 Q5_0 Q5_1 Q2_K..Q6_K MXFP4 NVFP4 without llama.cpp:
//   - every SIMD ISA bit-identical to the scalar reference (gemm over odd tiles and row
//     offsets, vec_dot), for reference-quantised weights and for weights of random bytes;
//   - the scalar reference equal to f64 math on the dequantised operands up to f32 rounding;
//   - the whole pipeline (quantize_row_ref weights, quantize_act activations, gemm) within
//     each format's quantisation error budget of exact math on the original floats;
//   - quantize_row_ref -> dequantize_row round trips within each format's step size.
// (Bit-exactness against llama.cpp itself: tests/models/test_cpu_kernels_ref.cpp.)
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "kernel_test_util.h"
#include "quant/dot_math.h"
#include "quant/formats.h"
#include "quant/types.h"

namespace {

using df::GgmlType;
using df::cpu::Isa;

constexpr GgmlType kTypes[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                               GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                               GgmlType::Q6_K, GgmlType::MXFP4, GgmlType::NVFP4};

int64_t block_elems(GgmlType t) { return df::type_info(t).block_elems; }

struct Problem {
  GgmlType type;
  int64_t k, rows, n_act;
  std::vector<float> wf, af;  // unquantised [rows][k], [n_act][k]
  std::vector<uint8_t> W, A;
  size_t w_stride, a_stride;
};

// Weights: reference-quantised normals, or random bytes where every block whose values are
// not all finite is replaced by a reference-quantised one (random scales can be inf/NaN).
Problem make_problem(GgmlType t, int64_t k, int64_t rows, int64_t n_act, uint32_t seed, bool random_bytes) {
  std::mt19937 rng(seed);
  Problem p{t, k, rows, n_act, df::test::gaussian(rng, rows * k), df::test::gaussian(rng, n_act * k),
            {}, {}, df::row_bytes(t, k), df::cpu::act_row_bytes(t, k)};
  p.W.resize(p.w_stride * rows);
  p.A.resize(p.a_stride * n_act);
  for (int64_t i = 0; i < rows; ++i)
    df::cpu::quantize_row_ref(t, p.wf.data() + i * k, p.W.data() + i * p.w_stride, k);
  if (random_bytes) {
    const auto& ti = df::type_info(t);
    std::vector<uint8_t> block(ti.block_bytes);
    std::vector<float> vals(ti.block_elems);
    for (size_t off = 0; off < p.W.size(); off += ti.block_bytes) {
      for (auto& b : block) b = static_cast<uint8_t>(rng());
      df::cpu::dequantize_row(t, block.data(), vals.data(), ti.block_elems);
      bool finite = true;
      for (float v : vals) finite = finite && std::isfinite(v) && std::fabs(v) < 1e30f;
      if (finite) std::memcpy(p.W.data() + off, block.data(), block.size());
    }
  }
  for (int64_t r = 0; r < n_act; ++r)
    df::cpu::kernels(Isa::SCALAR).quantize_act(t, p.af.data() + r * k, p.A.data() + r * p.a_stride, k);
  return p;
}

std::vector<float> run_gemm(const df::cpu::Kernels& kr, const Problem& p, int64_t i0, int64_t i1) {
  const int64_t ldy = p.rows + 3;
  const float canary = -12345.0f;
  std::vector<float> Y(ldy * p.n_act, canary);
  kr.gemm(p.type, p.k, p.W.data(), p.w_stride, i0, i1, p.A.data(), p.a_stride, p.n_act, Y.data(), ldy);
  std::vector<float> out;
  for (int64_t r = 0; r < p.n_act; ++r)
    for (int64_t i = 0; i < ldy; ++i) {
      if (i >= i0 && i < i1)
        out.push_back(Y[r * ldy + i]);
      else
        EXPECT_EQ(Y[r * ldy + i], canary) << "gemm wrote outside its rows at " << r << "," << i;
    }
  return out;
}

int count_bit_differences(const std::vector<float>& a, const std::vector<float>& b) {
  int d = 0;
  for (size_t i = 0; i < a.size(); ++i) d += std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i]);
  return d;
}

std::string label(GgmlType t, Isa isa, int64_t k, int64_t n_act, bool random_bytes) {
  return std::string(df::type_name(t)) + " " + std::string(df::cpu::isa_name(isa)) + " k=" + std::to_string(k) +
         " n_act=" + std::to_string(n_act) + (random_bytes ? " random bytes" : "");
}

TEST(KernelsFormats, SimdBitIdenticalToScalarReference) {
  const auto isas = df::test::simd_isas();
  if (isas.empty()) GTEST_SKIP() << "no SIMD ISA on this CPU";
  uint32_t seed = 100;
  for (GgmlType t : kTypes)
    for (int64_t k : {32, 64, 96, 256, 512, 768, 4096}) {
      if (k % block_elems(t)) continue;
      for (int64_t n_act : {1, 2, 3, 5, 8}) {
        if (k == 4096 && n_act > 2) continue;  // keep the suite fast
        for (bool random_bytes : {false, true}) {
          const int64_t rows = 11;
          const Problem p = make_problem(t, k, rows, n_act, seed++, random_bytes);
          const auto want = run_gemm(df::cpu::kernels(Isa::SCALAR), p, 1, rows);
          for (Isa isa : isas) {
            const auto got = run_gemm(df::cpu::kernels(isa), p, 1, rows);
            EXPECT_EQ(count_bit_differences(want, got), 0) << label(t, isa, k, n_act, random_bytes);
            const float one = df::cpu::kernels(isa).vec_dot(t, k, p.W.data() + 4 * p.w_stride, p.A.data());
            const float ref = df::cpu::kernels(Isa::SCALAR).vec_dot(t, k, p.W.data() + 4 * p.w_stride, p.A.data());
            EXPECT_EQ(std::bit_cast<uint32_t>(one), std::bit_cast<uint32_t>(ref)) << label(t, isa, k, 1, random_bytes);
          }
        }
      }
    }
}

// The activation quantisers of every ISA (Q8_0 / Q8_1 / Q8_K by weight type) give the
// scalar reference's bytes, with ties, zero blocks, huge and subnormal inputs.
TEST(KernelsFormats, ActivationQuantisersBitExactAcrossIsas) {
  std::mt19937 rng(2);
  for (GgmlType t : kTypes) {
    const int64_t n = 1024;
    for (int variant = 0; variant < 5; ++variant) {
      std::vector<float> x = df::test::gaussian(rng, n);
      for (int64_t i = 0; i < n; ++i) {
        if (variant == 1) x[i] = std::round(x[i] * 8.0f) / 2.0f;
        if (variant == 2 && i % 512 < 256) x[i] = 0.0f;
        if (variant == 3) x[i] *= 1e30f;
        if (variant == 4) x[i] *= 1e-39f;
      }
      const size_t bytes = df::cpu::act_row_bytes(t, n);
      std::vector<uint8_t> want(bytes + 8, 0xcd);
      df::cpu::kernels(Isa::SCALAR).quantize_act(t, x.data(), want.data(), n);
      for (Isa isa : df::test::simd_isas()) {
        std::vector<uint8_t> got(bytes + 8, 0xcd);
        df::cpu::kernels(isa).quantize_act(t, x.data(), got.data(), n);
        EXPECT_EQ(got, want) << df::type_name(t) << " variant " << variant << " " << df::cpu::isa_name(isa);
      }
    }
  }
}

// dot_ref against dot_math (f64 math on the dequantised weight and activation rows): only the f32
// rounding of the scales' products and of the accumulation separates them.
TEST(KernelsFormats, ScalarReferenceMatchesExactDotOfDequantisedRows) {
  for (GgmlType t : kTypes) {
    const int64_t k = 1024, rows = 5, n_act = 3;
    const Problem p = make_problem(t, k, rows, n_act, 99, false);
    const auto got = run_gemm(df::cpu::kernels(Isa::SCALAR), p, 0, rows);
    std::vector<float> want;
    const GgmlType at = df::cpu::vec_dot_type(t);
    for (int64_t r = 0; r < n_act; ++r) {
      for (int64_t i = 0; i < rows; ++i) {
        double s = df::quant::dot_math(t, p.W.data() + i * p.w_stride, p.A.data() + r * p.a_stride, k);
        if (at == GgmlType::Q8_1) {
          // Q4_1 / Q5_1: the min term uses Q8_1's s = fp16(da * sum(qa)), as ggml does,
          // instead of the exact da * sum(qa)
          const auto* wb = p.W.data() + i * p.w_stride;
          const auto* ab = reinterpret_cast<const df::BlockQ8_1*>(p.A.data() + r * p.a_stride);
          for (int64_t b = 0; b < k / 32; ++b) {
            uint16_t m_bits;  // the min follows the fp16 scale in both Q4_1 and Q5_1 blocks
            std::memcpy(&m_bits, wb + b * df::type_info(t).block_bytes + 2, 2);
            int qsum = 0;
            for (int j = 0; j < 32; ++j) qsum += ab[b].qs[j];
            const double m = df::fp16_to_fp32(m_bits), da = df::fp16_to_fp32(ab[b].d);
            s += m * (double(df::fp16_to_fp32(ab[b].s)) - da * qsum);
          }
        }
        want.push_back(static_cast<float>(s));
      }
    }
    EXPECT_LE(df::test::normalised_error(want, got), 1e-10) << df::type_name(t);
  }
}

// Pipeline error against exact math on the original N(0,1) floats: weight quantisation
// error dominates (Q8 activations add ~1e-4). Measured with these seeds (normalised mse):
// Q4_0 1.1e-2, Q4_1 6.5e-3, Q5_0 2.5e-3, Q5_1 2.1e-3, Q2_K 0.10, Q3_K 2.2e-2, Q4_K 4.6e-3,
// Q5_K 1.2e-3, Q6_K 4.1e-4, MXFP4 1.6e-2, NVFP4 1.1e-2 (a 4-bit uniform step of amax/7.5
// alone gives ~1e-2). Budgets ~2x those.
double pipeline_budget(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0: return 2e-2;
    case GgmlType::Q4_1: return 1.3e-2;
    case GgmlType::Q5_0: return 5e-3;
    case GgmlType::Q5_1: return 4e-3;
    case GgmlType::Q2_K: return 2e-1;
    case GgmlType::Q3_K: return 4.5e-2;
    case GgmlType::Q4_K: return 1e-2;
    case GgmlType::Q5_K: return 2.5e-3;
    case GgmlType::Q6_K: return 1e-3;
    case GgmlType::MXFP4: return 3.2e-2;
    case GgmlType::NVFP4: return 2.2e-2;
    default: return 0;
  }
}

TEST(KernelsFormats, PipelineWithinTypeErrorBudget) {
  for (GgmlType t : kTypes) {
    const int64_t k = 2048, rows = 16, n_act = 4;
    const Problem p = make_problem(t, k, rows, n_act, 123, false);
    std::vector<float> want;
    for (int64_t r = 0; r < n_act; ++r)
      for (int64_t i = 0; i < rows; ++i) {
        double s = 0;
        for (int64_t j = 0; j < k; ++j) s += double(p.wf[i * k + j]) * p.af[r * k + j];
        want.push_back(static_cast<float>(s));
      }
    for (Isa isa : {Isa::SCALAR, Isa::AVX2, Isa::AVX512}) {
      if (static_cast<int>(isa) > static_cast<int>(df::cpu::best_isa())) continue;
      const auto got = run_gemm(df::cpu::kernels(isa), p, 0, rows);
      const double e = df::test::normalised_error(want, got);
      EXPECT_LE(e, pipeline_budget(t)) << df::type_name(t) << " " << df::cpu::isa_name(isa);
      EXPECT_GT(e, pipeline_budget(t) / 100) << df::type_name(t) << ": suspiciously exact";
      RecordProperty(std::string(df::type_name(t)) + "_" + std::string(df::cpu::isa_name(isa)), std::to_string(e));
    }
  }
}

// quantize_row_ref -> dequantize_row: normalised error of the round trip per format (same
// expectations as above, weights only), and no element further than the format allows.
TEST(KernelsFormats, RoundTripWithinFormatError) {
  std::mt19937 rng(1);
  const int64_t n = 256 * 64;
  const auto x = df::test::gaussian(rng, n, 3.0f);
  for (GgmlType t : kTypes) {
    std::vector<uint8_t> q(df::row_bytes(t, n));
    df::cpu::quantize_row_ref(t, x.data(), q.data(), n);
    std::vector<float> y(n);
    df::cpu::dequantize_row(t, q.data(), y.data(), n);
    const double e = df::test::normalised_error(x, y);
    EXPECT_LE(e, pipeline_budget(t)) << df::type_name(t);
    EXPECT_GT(e, 0.0) << df::type_name(t);
  }
}

TEST(KernelsFormats, RowsNotAMultipleOfTheBlockAreRejected) {
  for (GgmlType t : kTypes) {
    const int64_t be = block_elems(t);
    std::vector<float> x(2 * be);
    std::vector<uint8_t> y(df::row_bytes(t, 2 * be) + 64);
    EXPECT_THROW(df::cpu::quantize_row_ref(t, x.data(), y.data(), be + 16), df::Error) << df::type_name(t);
    EXPECT_THROW(df::cpu::kernels(Isa::SCALAR).vec_dot(t, be / 2, y.data(), y.data()), df::Error);
  }
}

}  // namespace
