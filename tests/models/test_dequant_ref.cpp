// dequantize_row and quantize_row_ref against llama.cpp's reference conversions
// (ggml_get_type_traits(type)->to_float / from_float_ref in libggml-base.so), bit for bit.
#include <gtest/gtest.h>

#include "reference_required.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ggml_dl.h"
#include "quant/cpu/kernels.h"
#include "quant/types.h"

namespace {

using df::GgmlType;

constexpr GgmlType kTypes[] = {
    GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
    GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K, GgmlType::Q3_K,
    GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::MXFP4, GgmlType::NVFP4};

std::vector<uint32_t> float_bits(const std::vector<float>& v) {
  std::vector<uint32_t> out(v.size());
  std::memcpy(out.data(), v.data(), v.size() * 4);
  return out;
}

TEST(DequantRef, DequantizeRowBitExactWithGgmlToFloat) {
  static df::test::GgmlLibs libs;
  if (!libs.error().empty()) DF_REFERENCE_MISSING(libs.error());
  std::mt19937_64 rng(42);
  for (GgmlType t : kTypes) {
    const auto& ti = df::type_info(t);
    const auto* tr = libs.traits(static_cast<ggml_type>(t));
    ASSERT_EQ(tr->blck_size, ti.block_elems);
    ASSERT_EQ(tr->type_size, ti.block_bytes);
    if (!tr->to_float) {  // ggml has none for F32 (a plain copy); ours must be a copy too
      ASSERT_EQ(t, GgmlType::F32);
      continue;
    }
    const int64_t n_blocks = 4096;
    const int64_t n = n_blocks * ti.block_elems;
    // random bytes: every bit pattern, NaNs, infinities and subnormals included
    std::vector<uint8_t> src(n_blocks * ti.block_bytes);
    for (auto& b : src) b = static_cast<uint8_t>(rng());
    std::vector<float> want(n), got(n);
    tr->to_float(src.data(), want.data(), n);
    df::cpu::dequantize_row(t, src.data(), got.data(), n);
    const auto wb = float_bits(want), gb = float_bits(got);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(gb[i], wb[i]) << df::type_name(t) << " element " << i;
  }
}

// Inputs for the quantisers: normal data, ties after scaling, zero blocks, huge and tiny
// (subnormal) magnitudes.
std::vector<float> quantiser_inputs(std::mt19937& rng, int64_t n) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t block = i / 32;
    float v = dist(rng);
    switch (block % 6) {
      case 1: v = std::round(v * 16.0f) / 4.0f; break;
      case 2: v = (i % 32 == 5) ? 127.0f : std::round(v * 8.0f) / 2.0f; break;  // id = 1: .5 ties
      case 3: v = 0.0f; break;
      case 4: v *= 1e-39f; break;
      case 5: v *= 3e4f; break;
      default: break;
    }
    x[i] = v;
  }
  return x;
}

TEST(DequantRef, QuantizeRowRefBitExactWithGgmlFromFloatRef) {
  static df::test::GgmlLibs libs;
  if (!libs.error().empty()) DF_REFERENCE_MISSING(libs.error());
  std::mt19937 rng(7);
  for (GgmlType t : kTypes) {
    const int64_t n = 32 * 3000;
    const auto x = quantiser_inputs(rng, n);
    const size_t bytes = df::row_bytes(t, n);
    std::vector<uint8_t> want(bytes), got(bytes);
    const auto* tr = libs.traits(static_cast<ggml_type>(t));
    if (!tr->from_float_ref) {  // ggml has none for F32
      ASSERT_EQ(t, GgmlType::F32);
      continue;
    }
    tr->from_float_ref(x.data(), want.data(), n);
    df::cpu::quantize_row_ref(t, x.data(), got.data(), n);
    for (size_t i = 0; i < bytes; ++i)
      ASSERT_EQ(got[i], want[i]) << df::type_name(t) << " byte " << i;
  }
}

}  // namespace
