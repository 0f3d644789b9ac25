// A row's result must not depend on how many rows the call has (issue 15, item 4):
// speculative verify and batched server rows multiply several activation rows at once and
// promise the bits of plain decoding. For every weight format and ISA whose kernels keep one
// f32 order per output whatever the tile: each output of a gemm over 8 activation rows (and
// over odd counts and weight-row offsets, which change the tiles, and the AVX-512 packed VNNI
// GEMMs from 4 rows on) equals, bit for bit, the same row multiplied alone (the decode path,
// n_act = 1) and vec_dot.
// F32, F16, BF16 and Q8_0 are the exception: their multi-row tiles sum in llama.cpp's batched
// order (the prompt path, which the exactness tests against llama.cpp compare), their one-row
// kernels in another; the CPU backend's row-exact mode gives decode and verify rows
// Kernels::gemm_exact, whose multi-row tiles keep the one-row order for every format
// (GemmExactRowsEqualRowAlone below; tests/unit/test_forward_rows.cpp end to end).
#include <gtest/gtest.h>

#include <bit>
#include <random>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "quant/formats.h"
#include "random_blocks.h"

namespace {

using df::GgmlType;
using df::cpu::Isa;

std::vector<GgmlType> weight_types() {
  std::vector<GgmlType> out;
  df::quant::visit_all(df::quant::WeightFormats{}, [&]<class F>(F) {
    if (F::type != GgmlType::F32 && F::type != GgmlType::F16 && F::type != GgmlType::BF16 && F::type != GgmlType::Q8_0)
      out.push_back(F::type);
  });
  return out;
}

std::vector<uint8_t> weight_rows(GgmlType t, int64_t rows, int64_t k, uint32_t seed) {
  bool quantizable = false;
  df::quant::visit_format(df::quant::WeightFormats{}, t,
                          [&]<class F>(F) { quantizable = df::quant::QuantizableFormat<F>; });
  if (!quantizable) return df::test::random_rows(t, rows, k, seed);
  std::mt19937 rng(seed);
  const auto wf = df::test::gaussian(rng, static_cast<size_t>(rows * k));
  const size_t stride = df::row_bytes(t, k);
  std::vector<uint8_t> W(stride * rows);
  for (int64_t i = 0; i < rows; ++i) df::cpu::quantize_row_ref(t, wf.data() + i * k, W.data() + i * stride, k);
  return W;
}

std::vector<Isa> all_isas() {
  std::vector<Isa> out = {Isa::SCALAR};
  for (Isa isa : df::test::simd_isas()) out.push_back(isa);
  return out;
}

TEST(KernelsBatch, RowInATileEqualsRowAlone) {
  uint32_t seed = 7;
  for (GgmlType t : weight_types())
    for (int64_t k : {512, 544, 768}) {
      if (k % df::type_info(t).block_elems) continue;
      const int64_t rows = 13, n_act = 19;  // several column tiles of the packed GEMMs, a partial one
      const auto W = weight_rows(t, rows, k, ++seed);
      const size_t w_stride = df::row_bytes(t, k), a_stride = df::cpu::act_row_bytes(t, k);
      std::mt19937 rng(++seed);
      const auto x = df::test::gaussian(rng, static_cast<size_t>(n_act * k));
      for (Isa isa : all_isas()) {
        const auto& kr = df::cpu::kernels(isa);
        std::vector<uint8_t> A(a_stride * n_act);
        for (int64_t r = 0; r < n_act; ++r) kr.quantize_act(t, x.data() + r * k, A.data() + r * a_stride, k);
        const std::string at = std::string(df::type_name(t)) + " " + std::string(df::cpu::isa_name(isa)) +
                               " k=" + std::to_string(k);
        // alone: each activation row, each weight row
        std::vector<float> alone(static_cast<size_t>(rows * n_act));
        for (int64_t r = 0; r < n_act; ++r) {
          kr.gemm(t, k, W.data(), w_stride, 0, rows, A.data() + r * a_stride, a_stride, 1,
                  alone.data() + r * rows, rows);
          for (int64_t i = 0; i < rows; ++i) {
            const float one = kr.vec_dot(t, k, W.data() + i * w_stride, A.data() + r * a_stride);
            EXPECT_EQ(std::bit_cast<uint32_t>(one), std::bit_cast<uint32_t>(alone[r * rows + i]))
                << at << " vec_dot vs decode gemm, row " << i;
          }
        }
        // in tiles: all 8 rows, odd counts starting at odd rows, odd weight-row ranges
        for (int64_t r0 : {0, 1, 3})
          for (int64_t nr : {n_act - r0, int64_t{3}, int64_t{5}}) {
            if (r0 + nr > n_act) continue;
            for (int64_t i0 : {0, 1}) {
              std::vector<float> Y(static_cast<size_t>(rows * nr), -1.0f);
              kr.gemm(t, k, W.data(), w_stride, i0, rows, A.data() + r0 * a_stride, a_stride, nr, Y.data(), rows);
              int diff = 0;
              for (int64_t r = 0; r < nr; ++r)
                for (int64_t i = i0; i < rows; ++i)
                  diff += std::bit_cast<uint32_t>(Y[r * rows + i]) !=
                          std::bit_cast<uint32_t>(alone[(r0 + r) * rows + i]);
              EXPECT_EQ(diff, 0) << at << " rows " << r0 << "+" << nr << " from weight row " << i0;
            }
          }
      }
    }
}

}  // namespace

// Q8_0: the AVX-512 packed VNNI GEMM (4+ activation rows) gives the bits of the AVX2
// multi-row tiles (ggml's one-accumulator order) for weight-row counts that fill the AVX2
// tiles' 4 rows (its edge tiles of fewer than 3 outputs use two accumulators).
TEST(KernelsBatch, Q8_0VnniGemmEqualsAvx2Tiles) {
  const auto isas = df::test::simd_isas();
  if (isas.size() < 2) GTEST_SKIP() << "needs AVX2 and AVX-512";
  for (int64_t k : {32, 96, 1024, 1056}) {
    const int64_t rows = 12;
    for (int64_t n_act : {4, 5, 11, 64}) {
      const auto W = weight_rows(GgmlType::Q8_0, rows, k, static_cast<uint32_t>(k + n_act));
      const size_t w_stride = df::row_bytes(GgmlType::Q8_0, k), a_stride = df::cpu::act_row_bytes(GgmlType::Q8_0, k);
      std::mt19937 rng(static_cast<uint32_t>(k) + 1);
      const auto x = df::test::gaussian(rng, static_cast<size_t>(n_act * k));
      std::vector<uint8_t> A(a_stride * n_act);
      for (int64_t r = 0; r < n_act; ++r)
        df::cpu::kernels(Isa::AVX2).quantize_act(GgmlType::Q8_0, x.data() + r * k, A.data() + r * a_stride, k);
      std::vector<std::vector<float>> Y;
      for (Isa isa : isas) {
        Y.emplace_back(static_cast<size_t>(rows * n_act));
        df::cpu::kernels(isa).gemm(GgmlType::Q8_0, k, W.data(), w_stride, 0, rows, A.data(), a_stride, n_act,
                                   Y.back().data(), rows);
      }
      int diff = 0;
      for (size_t j = 0; j < Y[0].size(); ++j) diff += std::bit_cast<uint32_t>(Y[0][j]) != std::bit_cast<uint32_t>(Y[1][j]);
      EXPECT_EQ(diff, 0) << "k=" << k << " n_act=" << n_act;
    }
  }
}

// Q8_0's AVX-512 GEMM works on groups of 16 weight rows x tiles of 3 tokens
// (q8_lanes_vnni512.h): every row range (groups cut at both ends, fewer than 16 rows) and
// token count (tiles of 1, 2 and 3) gives the AVX2 tiles' bits, on row ranges of whole
// 4-row AVX2 tiles.
TEST(KernelsBatch, Q8_0VnniGemmRowRangesEqualAvx2Tiles) {
  const auto isas = df::test::simd_isas();
  if (isas.size() < 2) GTEST_SKIP() << "needs AVX2 and AVX-512";
  const int64_t rows = 52;
  for (int64_t k : {64, 96, 1056}) {
    const auto W = weight_rows(GgmlType::Q8_0, rows, k, static_cast<uint32_t>(k + 7));
    const size_t w_stride = df::row_bytes(GgmlType::Q8_0, k), a_stride = df::cpu::act_row_bytes(GgmlType::Q8_0, k);
    for (int64_t n_act : {4, 6, 7, 35}) {
      std::mt19937 rng(static_cast<uint32_t>(k * 3 + n_act));
      const auto x = df::test::gaussian(rng, static_cast<size_t>(n_act * k));
      std::vector<uint8_t> A(a_stride * n_act);
      for (int64_t r = 0; r < n_act; ++r)
        df::cpu::kernels(Isa::AVX2).quantize_act(GgmlType::Q8_0, x.data() + r * k, A.data() + r * a_stride, k);
      for (auto [i0, i1] : {std::pair<int64_t, int64_t>{0, 52}, {4, 36}, {20, 48}, {8, 16}, {0, 16}, {16, 48}}) {
        std::vector<std::vector<float>> Y;
        for (Isa isa : {Isa::AVX2, Isa::AVX512}) {
          Y.emplace_back(static_cast<size_t>(rows * n_act), -1.0f);
          df::cpu::kernels(isa).gemm(GgmlType::Q8_0, k, W.data(), w_stride, i0, i1, A.data(), a_stride, n_act,
                                     Y.back().data(), rows);
        }
        int diff = 0;
        for (size_t j = 0; j < Y[0].size(); ++j)
          diff += std::bit_cast<uint32_t>(Y[0][j]) != std::bit_cast<uint32_t>(Y[1][j]);
        EXPECT_EQ(diff, 0) << "k=" << k << " n_act=" << n_act << " rows [" << i0 << ", " << i1 << ")";
      }
    }
  }
}

// Kernels::gemm_exact, the row-exact kernels of decode, verify and batched server rows (issue
// 11 item 3, issue 15 item 4): for EVERY weight format and ISA, each output of a call over n
// = 1..8 activation rows (from several first rows and weight-row offsets) equals, bit for
// bit, the row multiplied alone by gemm with n_act = 1 (the decode kernel) and vec_dot. Row
// sizes include odd block counts and float tails.
TEST(KernelsBatch, GemmExactRowsEqualRowAlone) {
  uint32_t seed = 101;
  std::vector<GgmlType> types;
  df::quant::visit_all(df::quant::WeightFormats{}, [&]<class F>(F) { types.push_back(F::type); });
  for (GgmlType t : types)
    for (int64_t k : {32, 100, 544, 768}) {
      if (k % df::type_info(t).block_elems) continue;
      const int64_t rows = 11, n_max = 8, extra = 2;  // activation rows n_max + extra
      const auto W = weight_rows(t, rows, k, ++seed);
      const size_t w_stride = df::row_bytes(t, k), a_stride = df::cpu::act_row_bytes(t, k);
      std::mt19937 rng(++seed);
      const int64_t n_rows = n_max + extra;
      const auto x = df::test::gaussian(rng, static_cast<size_t>(n_rows * k));
      for (Isa isa : all_isas()) {
        const auto& kr = df::cpu::kernels(isa);
        std::vector<uint8_t> A(a_stride * n_rows);
        for (int64_t r = 0; r < n_rows; ++r) kr.quantize_act(t, x.data() + r * k, A.data() + r * a_stride, k);
        const std::string at = std::string(df::type_name(t)) + " " + std::string(df::cpu::isa_name(isa)) +
                               " k=" + std::to_string(k);
        std::vector<float> alone(static_cast<size_t>(rows * n_rows));
        for (int64_t r = 0; r < n_rows; ++r) {
          kr.gemm(t, k, W.data(), w_stride, 0, rows, A.data() + r * a_stride, a_stride, 1, alone.data() + r * rows, rows);
          for (int64_t i = 0; i < rows; ++i) {
            const float one = kr.vec_dot(t, k, W.data() + i * w_stride, A.data() + r * a_stride);
            ASSERT_EQ(std::bit_cast<uint32_t>(one), std::bit_cast<uint32_t>(alone[r * rows + i]))
                << at << " vec_dot vs decode gemm, act row " << r << ", weight row " << i;
          }
        }
        for (int64_t n = 1; n <= n_max; ++n)
          for (int64_t r0 : {int64_t{0}, extra})
            for (int64_t i0 : {0, 3}) {
              std::vector<float> Y(static_cast<size_t>(rows * n), -1.0f);
              kr.gemm_exact(t, k, W.data(), w_stride, i0, rows, A.data() + r0 * a_stride, a_stride, n, Y.data(), rows);
              int diff = 0;
              for (int64_t r = 0; r < n; ++r)
                for (int64_t i = i0; i < rows; ++i)
                  diff += std::bit_cast<uint32_t>(Y[r * rows + i]) != std::bit_cast<uint32_t>(alone[(r0 + r) * rows + i]);
              for (int64_t r = 0; r < n; ++r)
                for (int64_t i = 0; i < i0; ++i) diff += Y[r * rows + i] != -1.0f;  // outside [i0, rows): untouched
              EXPECT_EQ(diff, 0) << at << " gemm_exact of " << n << " rows from act row " << r0 << ", weight row " << i0;
            }
      }
    }
}

// Q8_0's row-exact kernel on every ISA at the shapes of the default model (384 and 1152
// columns) and odd block counts (1, 3, 33): gemm_exact over 1..8 activation rows, over weight-row
// ranges that cover several groups of 8 rows and partial ones, gives each output the bits of
// vec_dot (the decode kernel's order).
TEST(KernelsBatch, Q8_0GemmExactModelShapes) {
  const GgmlType t = GgmlType::Q8_0;
  for (int64_t k : {32, 96, 384, 1056, 1152}) {
    const int64_t rows = 21, n_max = 8;
    const auto W = weight_rows(t, rows, k, static_cast<uint32_t>(k));
    const size_t w_stride = df::row_bytes(t, k), a_stride = df::cpu::act_row_bytes(t, k);
    std::mt19937 rng(static_cast<uint32_t>(k) + 7);
    const auto x = df::test::gaussian(rng, static_cast<size_t>(n_max * k));
    for (Isa isa : all_isas()) {
      const auto& kr = df::cpu::kernels(isa);
      std::vector<uint8_t> A(a_stride * n_max);
      for (int64_t r = 0; r < n_max; ++r) kr.quantize_act(t, x.data() + r * k, A.data() + r * a_stride, k);
      for (int64_t n = 1; n <= n_max; ++n)
        for (auto [i0, i1] : {std::pair<int64_t, int64_t>{0, rows}, {5, 18}, {16, 21}}) {
          std::vector<float> Y(static_cast<size_t>(rows * n), -1.0f);
          kr.gemm_exact(t, k, W.data(), w_stride, i0, i1, A.data(), a_stride, n, Y.data(), rows);
          int diff = 0;
          for (int64_t r = 0; r < n; ++r)
            for (int64_t i = 0; i < rows; ++i) {
              const float want = i >= i0 && i < i1 ? kr.vec_dot(t, k, W.data() + i * w_stride, A.data() + r * a_stride) : -1.0f;
              diff += std::bit_cast<uint32_t>(Y[r * rows + i]) != std::bit_cast<uint32_t>(want);
            }
          EXPECT_EQ(diff, 0) << df::cpu::isa_name(isa) << " k=" << k << " n=" << n << " rows " << i0 << ".." << i1;
        }
    }
  }
}
