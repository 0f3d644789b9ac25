// A row's result must not depend on how many rows the call has (issue 15, item 4):
// speculative verify and batched server rows multiply several activation rows at once and
// promise the bits of plain decoding. For every weight format and ISA: each output of a
// gemm over 8 activation rows (and over odd counts and weight-row offsets, which change the
// tiles) equals, bit for bit, the same row multiplied alone (the decode path, n_act = 1)
// and vec_dot.
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
  df::quant::visit_all(df::quant::WeightFormats{}, [&]<class F>(F) { out.push_back(F::type); });
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
      const int64_t rows = 13, n_act = 8;
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

// The Q8_0 kernels of every SIMD ISA (the AVX2 microkernel, the AVX-512 VNNI GEMM over
// packed tiles) sum in the same f32 order: the same bits for one row and for many.
TEST(KernelsBatch, Q8_0SameBitsOnEverySimdIsa) {
  const auto isas = df::test::simd_isas();
  if (isas.size() < 2) GTEST_SKIP() << "needs AVX2 and AVX-512";
  for (int64_t k : {32, 96, 1024, 1056}) {  // odd block counts pair the last block with zeros
    const int64_t rows = 9, n_act = 11;
    const auto W = weight_rows(GgmlType::Q8_0, rows, k, static_cast<uint32_t>(k));
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
    EXPECT_EQ(diff, 0) << "k=" << k;
  }
}
