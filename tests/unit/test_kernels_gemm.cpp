// gemm / vec_dot of every SIMD ISA on this CPU against the scalar reference, per weight
// type, over odd shapes; and the whole quantise-then-multiply pipeline against f64 math on
// the original floats (each type's quantisation error budget).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "quant/blocks.h"
#include "quant/types.h"

namespace {

using df::GgmlType;
using df::cpu::Isa;

// Budgets for SIMD vs scalar reference, normalised mse. Both sides compute the same
// products exactly (f32 products of halves/bf16 are exact, Q8_0 block sums are exact
// integers times the same f32 scale) and differ only in f32 summation order: relative
// error ~ 2^-24 * sqrt(k) per output for random data, i.e. ~1e-12 at k = 4096; the budget
// allows 100x that. A wrong block, scale, tail or tile index gives ~1e-3 .. 1.
constexpr double kSimdBudget = 1e-10;

// Budgets for the pipeline (quantize_row_ref weights, quantize_act activations, gemm)
// against exact math on the unquantised floats, normalised mse, for N(0,1) data. Expected
// values: F32 ~1e-13 (f32 accumulation); F16 ~2 * (2^-11)^2 / 3 ~ 1.6e-7; BF16 ~2 * (2^-8)^2 / 3 ~ 1e-5;
// Q8_0 ~2 * (amax/127)^2 / 12 / E[x^2] ~ 1.1e-4 (amax of 32 normals ~ 2.5). Budgets ~3x.
double pipeline_budget(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return 1e-10;  // sequential f32 sum in the scalar reference
    case GgmlType::F16: return 5e-7;
    case GgmlType::BF16: return 3e-5;
    default: return 4e-4;
  }
}

struct Problem {
  GgmlType type;
  int64_t k, rows, n_act;
  std::vector<float> wf, af;  // [rows][k], [n_act][k] unquantised
  std::vector<uint8_t> W, A;  // quantised rows
  size_t w_stride, a_stride;
};

Problem make_problem(GgmlType t, int64_t k, int64_t rows, int64_t n_act, uint32_t seed) {
  std::mt19937 rng(seed);
  Problem p{t, k, rows, n_act, df::test::gaussian(rng, rows * k), df::test::gaussian(rng, n_act * k),
            {}, {}, df::row_bytes(t, k), df::cpu::act_row_bytes(t, k)};
  p.W.resize(p.w_stride * rows);
  p.A.resize(p.a_stride * n_act);
  for (int64_t i = 0; i < rows; ++i)
    df::cpu::quantize_row_ref(t, p.wf.data() + i * k, p.W.data() + i * p.w_stride, k);
  for (int64_t r = 0; r < n_act; ++r)
    df::cpu::kernels(Isa::SCALAR).quantize_act(t, p.af.data() + r * k, p.A.data() + r * p.a_stride,
                                               k);
  return p;
}

// Runs gemm over rows [i0, i1) into a Y with ldy = rows + 3, checks that nothing outside
// the written entries changed, returns the written block [n_act][i1 - i0].
std::vector<float> run_gemm(const df::cpu::Kernels& kr, const Problem& p, int64_t i0, int64_t i1) {
  const int64_t ldy = p.rows + 3;
  const float canary = -12345.0f;
  std::vector<float> Y(ldy * p.n_act, canary);
  kr.gemm(p.type, p.k, p.W.data(), p.w_stride, i0, i1, p.A.data(), p.a_stride, p.n_act, Y.data(),
          ldy);
  std::vector<float> out;
  for (int64_t r = 0; r < p.n_act; ++r)
    for (int64_t i = 0; i < ldy; ++i) {
      const bool written = i >= i0 && i < i1;
      if (written)
        out.push_back(Y[r * ldy + i]);
      else
        EXPECT_EQ(Y[r * ldy + i], canary) << "gemm wrote outside its rows at " << r << "," << i;
    }
  return out;
}

std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string label(GgmlType t, Isa isa, int64_t k, int64_t rows, int64_t n_act) {
  return std::string(df::type_name(t)) + " " + std::string(df::cpu::isa_name(isa)) +
         " k=" + std::to_string(k) + " rows=" + std::to_string(rows) +
         " n_act=" + std::to_string(n_act);
}

TEST(KernelsGemm, SimdMatchesScalarReference) {
  const auto isas = df::test::simd_isas();
  if (isas.empty()) GTEST_SKIP() << "no SIMD ISA on this CPU";
  uint32_t seed = 10;
  std::map<std::string, double> worst;  // recorded as test properties (--gtest_output=json)
  for (GgmlType t : df::test::kKernelTypes) {
    const int64_t be = df::type_info(t).block_elems;
    for (int64_t k : {1, 7, 16, 33, 32, 64, 96, 160, 1000, 1024, 4096, 4095}) {
      if (k % be) continue;
      for (int64_t n_act : {1, 2, 3, 4, 5, 7, 8, 17}) {
        const int64_t rows = (k >= 4095) ? 7 : 13;
        if (k >= 4095 && n_act > 5 && n_act != 17) continue;  // keep the suite fast
        const Problem p = make_problem(t, k, rows, n_act, seed++);
        const int64_t i0 = 1, i1 = rows;  // odd offset, row count not a tile multiple
        const auto want = run_gemm(df::cpu::kernels(Isa::SCALAR), p, i0, i1);
        for (Isa isa : isas) {
          const auto got = run_gemm(df::cpu::kernels(isa), p, i0, i1);
          const double e = df::test::normalised_error(want, got);
          EXPECT_LE(e, kSimdBudget) << label(t, isa, k, rows, n_act);
          auto& w = worst[std::string(df::type_name(t)) + "_" + std::string(df::cpu::isa_name(isa))];
          w = std::max(w, e);
        }
      }
    }
  }
  for (const auto& [key, e] : worst) RecordProperty(key, sci(e));
}

TEST(KernelsGemm, VecDotMatchesGemmAndScalar) {
  std::mt19937 rng(5);
  for (GgmlType t : df::test::kKernelTypes) {
    const int64_t be = df::type_info(t).block_elems;
    for (int64_t k : {32, 64, 224, 2048, 4000}) {
      if (k % be) continue;
      const Problem p = make_problem(t, k, 3, 1, static_cast<uint32_t>(k) + 7);
      std::vector<float> want(3);
      for (int i = 0; i < 3; ++i)
        want[i] = df::cpu::kernels(Isa::SCALAR)
                      .vec_dot(t, k, p.W.data() + i * p.w_stride, p.A.data());
      for (Isa isa : df::test::simd_isas()) {
        const auto& kr = df::cpu::kernels(isa);
        std::vector<float> got(3), via_gemm(3);
        for (int i = 0; i < 3; ++i) got[i] = kr.vec_dot(t, k, p.W.data() + i * p.w_stride, p.A.data());
        kr.gemm(t, k, p.W.data(), p.w_stride, 0, 3, p.A.data(), p.a_stride, 1, via_gemm.data(), 3);
        EXPECT_LE(df::test::normalised_error(want, got), kSimdBudget) << label(t, isa, k, 3, 1);
        EXPECT_LE(df::test::normalised_error(want, via_gemm), kSimdBudget) << label(t, isa, k, 3, 1);
      }
    }
  }
}

// The scalar reference itself against f64 math on the dequantised operands: only f32
// rounding of the accumulation separates them.
TEST(KernelsGemm, ScalarReferenceMatchesExactDotOfDequantisedRows) {
  for (GgmlType t : df::test::kKernelTypes) {
    const int64_t k = 1024, rows = 5, n_act = 3;
    const Problem p = make_problem(t, k, rows, n_act, 99);
    const auto got = run_gemm(df::cpu::kernels(Isa::SCALAR), p, 0, rows);
    std::vector<float> want;
    std::vector<float> w(k), a(k);
    for (int64_t r = 0; r < n_act; ++r) {
      df::cpu::dequantize_row(t, p.A.data() + r * p.a_stride, a.data(), k);
      for (int64_t i = 0; i < rows; ++i) {
        df::cpu::dequantize_row(t, p.W.data() + i * p.w_stride, w.data(), k);
        double s = 0;
        for (int64_t j = 0; j < k; ++j) s += double(w[j]) * a[j];
        want.push_back(static_cast<float>(s));
      }
    }
    EXPECT_LE(df::test::normalised_error(want, got), kSimdBudget) << df::type_name(t);
  }
}

TEST(KernelsGemm, PipelineWithinTypeErrorBudget) {
  for (GgmlType t : df::test::kKernelTypes) {
    const int64_t k = 2048, rows = 16, n_act = 4;
    const Problem p = make_problem(t, k, rows, n_act, 123);
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
      EXPECT_LE(e, pipeline_budget(t)) << label(t, isa, k, rows, n_act);
      RecordProperty(std::string(df::type_name(t)) + "_" + std::string(df::cpu::isa_name(isa)),
                     sci(e));
    }
  }
}

// Q8_0 weights holding -128 (legal in files, never produced by ggml's quantiser) are exact.
TEST(KernelsGemm, Q8_0ExtremeQuants) {
  const int64_t k = 96;
  std::vector<df::BlockQ8_0> w(3), a(3);
  for (int b = 0; b < 3; ++b) {
    w[b].d = df::fp32_to_fp16(0.25f);
    a[b].d = df::fp32_to_fp16(0.5f);
    for (int j = 0; j < 32; ++j) {
      w[b].qs[j] = static_cast<int8_t>(j % 2 ? -128 : 127);
      a[b].qs[j] = static_cast<int8_t>(j % 3 ? -127 : 127);
    }
  }
  const float want = df::cpu::kernels(Isa::SCALAR).vec_dot(GgmlType::Q8_0, k, w.data(), a.data());
  double exact = 0;
  for (int b = 0; b < 3; ++b)
    for (int j = 0; j < 32; ++j) exact += 0.125 * w[b].qs[j] * a[b].qs[j];
  EXPECT_EQ(want, static_cast<float>(exact));
  for (Isa isa : df::test::simd_isas())
    EXPECT_EQ(df::cpu::kernels(isa).vec_dot(GgmlType::Q8_0, k, w.data(), a.data()), want)
        << df::cpu::isa_name(isa);
}

// The attention's product with V (backend/cpu/attention.cpp) stops at the positions a block
// of rows sees, rounded up to 64, instead of llama.cpp's padded 256: over F16 and F32 rows,
// for every ISA, gemm and gemm_exact over the first 64 j elements give the bits of the full
// length when the activation rows are zero past some valid length <= 64 j (finite weights
// past it: stale cache positions). Fails if a kernel's lane or chain of an element depended on
// the row length, or its tail handling differed.
TEST(KernelsGemm, ZeroTailLeavesFloatDotsUnchanged) {
  const int64_t len = 256, rows = 37;
  std::mt19937 rng(11);
  for (GgmlType t : {GgmlType::F16, GgmlType::F32}) {
    const size_t w_stride = df::row_bytes(t, len), a_stride = df::cpu::act_row_bytes(t, len);
    for (Isa isa : {Isa::SCALAR, Isa::AVX2, Isa::AVX512}) {
      if (static_cast<int>(isa) > static_cast<int>(df::cpu::best_isa())) continue;
      const auto& K = df::cpu::kernels(isa);
      const auto wf = df::test::gaussian(rng, static_cast<size_t>(rows * len));
      std::vector<uint8_t> W(w_stride * rows);
      for (int64_t i = 0; i < rows; ++i) K.quantize_act(t, wf.data() + i * len, W.data() + i * w_stride, len);
      for (int64_t n_act : {1, 3, 8, 33}) {
        for (int64_t lv : {64, 128, 192}) {
          std::vector<float> af = df::test::gaussian(rng, static_cast<size_t>(n_act * len));
          std::vector<uint8_t> A(a_stride * n_act);
          for (int64_t r = 0; r < n_act; ++r) {
            const int64_t valid = lv - 63 + (r * 17) % 64;  // 1 .. 64 below lv
            std::fill(af.begin() + r * len + valid, af.begin() + (r + 1) * len, 0.0f);
            K.quantize_act(t, af.data() + r * len, A.data() + r * a_stride, len);
          }
          for (bool exact : {false, true}) {
            const auto gemm = exact ? K.gemm_exact : K.gemm;
            std::vector<float> full(static_cast<size_t>(n_act * rows)), part(full.size(), -1.0f);
            gemm(t, len, W.data(), w_stride, 0, rows, A.data(), a_stride, n_act, full.data(), rows);
            gemm(t, lv, W.data(), w_stride, 0, rows, A.data(), a_stride, n_act, part.data(), rows);
            EXPECT_EQ(0, std::memcmp(full.data(), part.data(), full.size() * sizeof(float)))
                << df::type_name(t) << " " << df::cpu::isa_name(isa) << " n_act " << n_act << " lv " << lv
                << (exact ? " exact" : "");
          }
        }
      }
    }
  }
}

}  // namespace
