// Activation quantisers and dot products against llama.cpp's CPU backend itself: the
// libggml-cpu-*.so variant ggml would load on this machine, through
// ggml_get_type_traits_cpu(type)->from_float / vec_dot.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "ggml_dl.h"
#include "quant/cpu/kernels.h"
#include "quant/types.h"

namespace {

using df::GgmlType;
using df::cpu::Isa;

constexpr GgmlType kTypes[] = {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0};

std::vector<Isa> isas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::SCALAR, Isa::AVX2, Isa::AVX512})
    if (static_cast<int>(isa) <= static_cast<int>(df::cpu::best_isa())) out.push_back(isa);
  return out;
}

TEST(CpuKernelsRef, QuantizeActBitExactWithGgmlCpuFromFloat) {
  static df::test::GgmlLibs libs;
  if (!libs.error().empty()) GTEST_SKIP() << libs.error();
  if (!libs.cpu_traits(GGML_TYPE_F32)) GTEST_SKIP() << "no libggml-cpu variant loadable";
  RecordProperty("ggml_cpu_variant", libs.cpu_variant());
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (GgmlType t : kTypes) {
    const auto* ct = libs.cpu_traits(static_cast<ggml_type>(t));
    ASSERT_EQ(static_cast<GgmlType>(ct->vec_dot_type), df::cpu::vec_dot_type(t));
    const int64_t n = 32 * 2048;
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) {
      x[i] = dist(rng);
      if ((i / 32) % 4 == 1) x[i] = std::round(x[i] * 8.0f) / 2.0f;  // ties
      if ((i / 32) % 4 == 2 && i % 32 == 0) x[i] = 127.0f;           // id = 1 exactly
      if ((i / 32) % 4 == 2 && i % 32 != 0) x[i] = std::round(x[i] * 20.0f) + 0.5f;
    }
    const size_t bytes = df::cpu::act_row_bytes(t, n);
    std::vector<uint8_t> want(bytes);
    ct->from_float(x.data(), want.data(), n);
    if (t == GgmlType::Q8_0) {  // the data has ties: the reference quantiser must differ
      std::vector<uint8_t> ref(bytes);
      df::cpu::quantize_row_ref(t, x.data(), ref.data(), n);
      EXPECT_NE(ref, want) << "test data has no rounding ties";
    }
    for (Isa isa : isas()) {
      std::vector<uint8_t> got(bytes);
      df::cpu::kernels(isa).quantize_act(t, x.data(), got.data(), n);
      for (size_t i = 0; i < bytes; ++i)
        ASSERT_EQ(got[i], want[i]) << df::type_name(t) << " " << df::cpu::isa_name(isa)
                                   << " byte " << i << " (ggml " << libs.cpu_variant() << ")";
    }
  }
}

// Same prepared operands, so only the order of f32 additions may differ: normalised error
// of a few 1e-14 expected; budget 1e-10 as in the unit tests.
TEST(CpuKernelsRef, VecDotMatchesGgmlCpuVecDot) {
  static df::test::GgmlLibs libs;
  if (!libs.error().empty()) GTEST_SKIP() << libs.error();
  if (!libs.cpu_traits(GGML_TYPE_F32)) GTEST_SKIP() << "no libggml-cpu variant loadable";
  std::mt19937 rng(12);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (GgmlType t : kTypes) {
    const auto* ct = libs.cpu_traits(static_cast<ggml_type>(t));
    for (int64_t k : {64, 256, 1024, 4096}) {
      const int rows = 32;
      std::vector<float> wf(rows * k), af(k);
      for (auto& v : wf) v = dist(rng);
      for (auto& v : af) v = dist(rng);
      const size_t wb = df::row_bytes(t, k);
      std::vector<uint8_t> W(wb * rows), A(df::cpu::act_row_bytes(t, k));
      for (int i = 0; i < rows; ++i) df::cpu::quantize_row_ref(t, wf.data() + i * k, W.data() + i * wb, k);
      ct->from_float(af.data(), A.data(), k);
      std::vector<float> want(rows);
      for (int i = 0; i < rows; ++i)
        ct->vec_dot(static_cast<int>(k), &want[i], 0, W.data() + i * wb, 0, A.data(), 0, 1);
      for (Isa isa : isas()) {
        std::vector<float> got(rows);
        df::cpu::kernels(isa).gemm(t, k, W.data(), wb, 0, rows, A.data(), A.size(), 1, got.data(),
                                   rows);
        double num = 0, den = 0;
        for (int i = 0; i < rows; ++i) {
          num += (double(want[i]) - got[i]) * (double(want[i]) - got[i]);
          den += double(want[i]) * want[i];
        }
        EXPECT_LE(num / den, 1e-10) << df::type_name(t) << " " << df::cpu::isa_name(isa)
                                    << " k=" << k << " (ggml " << libs.cpu_variant() << ")";
      }
    }
  }
}

}  // namespace
