// The IQ, ternary and 1/2-bit formats against llama.cpp's own code, loaded with dlopen:
//   - dequantize_row bit exact with libggml-base's to_float over thousands of random blocks
//     (random bytes are valid blocks: grid indices, sign codes and scales of any value),
//     fp16 scales of every bit pattern included;
//   - quantize_row_ref bit exact with from_float_ref where we have one (TQ1_0, TQ2_0,
//     Q1_0, Q2_0);
//   - the activation quantiser (Q8_K, or Q8_0) bit exact with the CPU backend's from_float;
//   - vec_dot / gemm of every ISA bit exact with the CPU backend's vec_dot on the same
//     operands (ggml's f32 accumulation order, ggml_lanes.h).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "../unit/random_blocks.h"
#include "ggml_dl.h"
#include "quant/cpu/kernels.h"
#include "quant/types.h"

namespace {

using df::GgmlType;
using df::cpu::Isa;
using df::test::kLowBitTypes;

std::vector<Isa> isas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::SCALAR, Isa::AVX2, Isa::AVX512})
    if (static_cast<int>(isa) <= static_cast<int>(df::cpu::best_isa())) out.push_back(isa);
  return out;
}

TEST(LowBitRef, GeometryAndVecDotTypesMatchGgml) {
  static df::test::GgmlLibs libs;
  if (!libs.error().empty()) GTEST_SKIP() << libs.error();
  for (GgmlType t : kLowBitTypes) {
    const auto& ti = df::type_info(t);
    const auto* tr = libs.traits(static_cast<ggml_type>(t));
    EXPECT_EQ(tr->blck_size, ti.block_elems) << ti.name;
    EXPECT_EQ(tr->type_size, ti.block_bytes) << ti.name;
    EXPECT_TRUE(ti.supported) << ti.name;
    if (const auto* ct = libs.cpu_traits(static_cast<ggml_type>(t))) {
      EXPECT_EQ(static_cast<GgmlType>(ct->vec_dot_type), df::cpu::vec_dot_type(t)) << ti.name;
    }
  }
  const auto* q8k = libs.traits(GGML_TYPE_Q8_K);
  EXPECT_EQ(q8k->type_size, df::type_info(GgmlType::Q8_K).block_bytes);
}

TEST(LowBitRef, DequantizeRowBitExactWithGgmlToFloat) {
  static df::test::GgmlLibs libs;
  if (!libs.error().empty()) GTEST_SKIP() << libs.error();
  std::mt19937_64 rng(42);
  for (GgmlType t : kLowBitTypes) {
    const auto& ti = df::type_info(t);
    const auto* tr = libs.traits(static_cast<ggml_type>(t));
    for (bool any_scale : {true, false}) {
      // any_scale: every byte random, so the fp16 scales take every bit pattern (NaN, inf,
      // subnormal); otherwise finite scales, where values must match exactly too.
      const int64_t n_blocks = 4096;
      const int64_t n = n_blocks * ti.block_elems;
      std::vector<uint8_t> src = df::test::random_rows(t, 1, n, rng());
      if (any_scale)
        for (auto& b : src) b = static_cast<uint8_t>(rng());
      std::vector<float> want(n), got(n);
      tr->to_float(src.data(), want.data(), n);
      df::cpu::dequantize_row(t, src.data(), got.data(), n);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
            << ti.name << " element " << i << " (" << got[i] << " vs " << want[i] << ")";
    }
  }
}

// Inputs for the weight quantisers: normal data, ties after scaling, zero blocks, a block
// whose amax repeats with both signs.
std::vector<float> quantiser_inputs(std::mt19937& rng, int64_t n) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) {
    float v = dist(rng);
    switch ((i / 256) % 4) {
      case 1: v = std::round(v * 4.0f) / 4.0f; break;  // many exact halves of amax
      case 2: v = (i / 64) % 2 ? 0.0f : v; break;
      case 3: v = i % 7 == 0 ? ((i / 7) % 2 ? 2.0f : -2.0f) : v * 0.5f; break;
      default: break;
    }
    x[i] = v;
  }
  return x;
}

TEST(LowBitRef, QuantizeRowRefBitExactWithGgmlFromFloatRef) {
  static df::test::GgmlLibs libs;
  if (!libs.error().empty()) GTEST_SKIP() << libs.error();
  std::mt19937 rng(7);
  for (GgmlType t : {GgmlType::TQ1_0, GgmlType::TQ2_0, GgmlType::Q1_0, GgmlType::Q2_0}) {
    const int64_t n = 256 * 400;
    const auto x = quantiser_inputs(rng, n);
    const size_t bytes = df::row_bytes(t, n);
    std::vector<uint8_t> want(bytes), got(bytes);
    libs.traits(static_cast<ggml_type>(t))->from_float_ref(x.data(), want.data(), n);
    df::cpu::quantize_row_ref(t, x.data(), got.data(), n);
    for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(got[i], want[i]) << df::type_name(t) << " byte " << i;
  }
}

// Activations with ties after scaling, zero blocks, repeated extremes of both signs.
std::vector<float> activation_inputs(std::mt19937& rng, int64_t n) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) {
    float v = dist(rng);
    switch ((i / 256) % 5) {
      case 1: v = (i % 256 == 3) ? -127.0f : std::round(v * 20.0f) + 0.5f; break;  // iscale = 1: .5 ties
      case 2: v = 0.0f; break;
      case 3: v = (i % 256 == 9 || i % 256 == 200) ? 3.0f : (i % 256 == 100 ? -3.0f : v); break;
      case 4: v *= 1e-30f; break;
      default: break;
    }
    x[i] = v;
  }
  return x;
}

TEST(LowBitRef, QuantizeActBitExactWithGgmlCpuFromFloat) {
  static df::test::GgmlLibs libs;
  if (!libs.error().empty()) GTEST_SKIP() << libs.error();
  if (!libs.cpu_traits(GGML_TYPE_F32)) GTEST_SKIP() << "no libggml-cpu variant loadable";
  std::mt19937 rng(11);
  for (GgmlType t : kLowBitTypes) {
    const auto act = df::cpu::vec_dot_type(t);
    const auto* ct = libs.cpu_traits(static_cast<ggml_type>(act));
    ASSERT_NE(ct->from_float, nullptr) << df::type_name(act);
    const int64_t n = 256 * 300;
    const auto x = activation_inputs(rng, n);
    const size_t bytes = df::cpu::act_row_bytes(t, n);
    std::vector<uint8_t> want(bytes, 0);  // ggml leaves the bsums of zero Q8_K blocks unwritten
    ct->from_float(x.data(), want.data(), n);
    for (Isa isa : isas()) {
      std::vector<uint8_t> got(bytes, 0);
      df::cpu::kernels(isa).quantize_act(t, x.data(), got.data(), n);
      for (size_t i = 0; i < bytes; ++i)
        ASSERT_EQ(got[i], want[i]) << df::type_name(t) << " " << df::cpu::isa_name(isa) << " byte " << i
                                   << " (ggml " << libs.cpu_variant() << ")";
    }
  }
}

// Same prepared operands on both sides, and the f32 accumulation in ggml's own order
// (ggml_lanes.h): every ISA's gemm and vec_dot give llama.cpp's vec_dot bit for bit.
TEST(LowBitRef, VecDotBitExactWithGgmlCpuVecDot) {
  static df::test::GgmlLibs libs;
  if (!libs.error().empty()) GTEST_SKIP() << libs.error();
  if (!libs.cpu_traits(GGML_TYPE_F32)) GTEST_SKIP() << "no libggml-cpu variant loadable";
  std::mt19937 rng(12);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  uint64_t seed = 100;
  for (GgmlType t : kLowBitTypes) {
    const auto* ct = libs.cpu_traits(static_cast<ggml_type>(t));
    const int64_t be = df::type_info(t).block_elems;
    for (int64_t k : {256, 320, 352, 384, 768, 2304, 4096}) {  // odd block counts for the small blocks
      if (k % be) continue;
      const int rows = 24, n_act = 5;
      const size_t wb = df::row_bytes(t, k), ab = df::cpu::act_row_bytes(t, k);
      const auto W = df::test::random_rows(t, rows, k, ++seed);
      std::vector<float> af(k * n_act);
      for (auto& v : af) v = dist(rng);
      std::vector<uint8_t> A(ab * n_act);
      const auto* act_traits = libs.cpu_traits(static_cast<ggml_type>(df::cpu::vec_dot_type(t)));
      for (int r = 0; r < n_act; ++r) act_traits->from_float(af.data() + r * k, A.data() + r * ab, k);
      std::vector<float> want(rows * n_act);
      for (int r = 0; r < n_act; ++r)
        for (int i = 0; i < rows; ++i)
          ct->vec_dot(static_cast<int>(k), &want[r * rows + i], 0, W.data() + i * wb, 0, A.data() + r * ab, 0, 1);
      for (Isa isa : isas()) {
        std::vector<float> got(rows * n_act);
        df::cpu::kernels(isa).gemm(t, k, W.data(), wb, 0, rows, A.data(), ab, n_act, got.data(), rows);
        int differ = 0;
        double num = 0, den = 0;
        for (int r = 0; r < n_act; ++r)
          for (int i = 0; i < rows; ++i) {
            const float g = got[r * rows + i], wv = want[r * rows + i];
            const float d = df::cpu::kernels(isa).vec_dot(t, k, W.data() + i * wb, A.data() + r * ab);
            differ += std::bit_cast<uint32_t>(g) != std::bit_cast<uint32_t>(wv);
            differ += std::bit_cast<uint32_t>(d) != std::bit_cast<uint32_t>(wv);
            num += (double(wv) - g) * (double(wv) - g);
            den += double(wv) * wv;
          }
        EXPECT_EQ(differ, 0) << df::type_name(t) << " " << df::cpu::isa_name(isa) << " k=" << k
                             << ": outputs differing from ggml's vec_dot (normalised error " << num / den << ")";
      }
    }
  }
}

}  // namespace
