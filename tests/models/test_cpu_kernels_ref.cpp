// Activation quantisers and dot products against llama.cpp's CPU backend itself: the
// libggml-cpu-*.so variant ggml would load on this machine, through
// ggml_get_type_traits_cpu(type)->from_float / vec_dot.
#include <gtest/gtest.h>

#include "reference_required.h"

#include <bit>
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

constexpr GgmlType kTypes[] = {
    GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
    GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K, GgmlType::Q3_K,
    GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::MXFP4, GgmlType::NVFP4};

// Weight rows of random bytes (every quant bit pattern); a block whose values are not all
// finite (random fp16 / E8M0 / UE4M3 scales can be inf or NaN) is replaced by a block of
// quantize_row_ref of random normals, so that scales stay finite.
std::vector<uint8_t> random_weight_bytes(GgmlType t, int64_t rows, int64_t k, std::mt19937& rng) {
  const auto& ti = df::type_info(t);
  const size_t rb = df::row_bytes(t, k);
  std::vector<uint8_t> W(rb * rows);
  for (auto& b : W) b = static_cast<uint8_t>(rng());
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> vals(ti.block_elems), normals(ti.block_elems);
  for (size_t off = 0; off < W.size(); off += ti.block_bytes) {
    df::cpu::dequantize_row(t, W.data() + off, vals.data(), ti.block_elems);
    bool finite = true;
    for (float v : vals) finite = finite && std::isfinite(v) && std::fabs(v) < 1e30f;
    if (finite) continue;
    for (auto& v : normals) v = dist(rng);
    df::cpu::quantize_row_ref(t, normals.data(), W.data() + off, ti.block_elems);
  }
  return W;
}

std::vector<Isa> isas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::SCALAR, Isa::AVX2, Isa::AVX512})
    if (static_cast<int>(isa) <= static_cast<int>(df::cpu::best_isa())) out.push_back(isa);
  return out;
}

TEST(CpuKernelsRef, QuantizeActBitExactWithGgmlCpuFromFloat) {
  static df::test::GgmlLibs libs;
  if (!libs.error().empty()) DF_REFERENCE_MISSING(libs.error());
  if (!libs.cpu_traits(GGML_TYPE_F32)) DF_REFERENCE_MISSING("no libggml-cpu variant loadable");
  RecordProperty("ggml_cpu_variant", libs.cpu_variant());
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (GgmlType t : kTypes) {
    const auto* ct = libs.cpu_traits(static_cast<ggml_type>(t));
    ASSERT_EQ(static_cast<GgmlType>(ct->vec_dot_type), df::cpu::vec_dot_type(t));
    const int64_t n = 256 * 256;
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) {
      x[i] = dist(rng);
      if ((i / 32) % 4 == 1) x[i] = std::round(x[i] * 8.0f) / 2.0f;  // ties
      if ((i / 32) % 4 == 2 && i % 32 == 0) x[i] = 127.0f;           // id = 1 exactly
      if ((i / 32) % 4 == 2 && i % 32 != 0) x[i] = std::round(x[i] * 20.0f) + 0.5f;
      if ((i / 256) % 16 == 3) x[i] = 0.0f;                           // all-zero blocks
      if ((i / 256) % 16 == 5) x[i] *= 1e-30f;                        // tiny scales
    }
    const size_t bytes = df::cpu::act_row_bytes(t, n);
    // zero filled: ggml leaves the bsums of an all-zero Q8_K block unwritten (ours are 0)
    std::vector<uint8_t> want(bytes, 0);
    // the activation quantiser is the from_float of the vec_dot type, not of t
    libs.cpu_traits(ct->vec_dot_type)->from_float(x.data(), want.data(), n);
    if (ct->vec_dot_type == GGML_TYPE_Q8_0 || ct->vec_dot_type == GGML_TYPE_Q8_1) {
      // the data has ties: ggml's reference quantiser (used for model files) must differ
      const auto* rt = libs.traits(ct->vec_dot_type);
      std::vector<uint8_t> ref(bytes);
      rt->from_float_ref(x.data(), ref.data(), n);
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

// Types whose kernels (every ISA, scalar included) follow the f32 accumulation order of
// ggml's x86 vec_dot (src/quant/ggml_lanes.h): results must be the same bits.
bool bit_exact_type(GgmlType t) {
  return t != GgmlType::F32 && t != GgmlType::F16 && t != GgmlType::BF16 && t != GgmlType::Q8_0;
}

// Same prepared operands. Bit-exact types must give llama.cpp's bits; the others differ
// only in the order of f32 additions: normalised error of a few 1e-14 expected, budget 1e-10
// as in the unit tests. Weight rows from the reference quantiser and of random bytes; several
// activation rows (the gemm / prefill path) against vec_dot per row and column.
TEST(CpuKernelsRef, VecDotMatchesGgmlCpuVecDot) {
  static df::test::GgmlLibs libs;
  if (!libs.error().empty()) DF_REFERENCE_MISSING(libs.error());
  if (!libs.cpu_traits(GGML_TYPE_F32)) DF_REFERENCE_MISSING("no libggml-cpu variant loadable");
  std::mt19937 rng(12);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (GgmlType t : kTypes) {
    const auto* ct = libs.cpu_traits(static_cast<ggml_type>(t));
    const auto* act_traits = libs.cpu_traits(ct->vec_dot_type);
    for (int64_t k : {256, 288, 512, 768, 1024, 4096}) {
      if (k % df::type_info(t).block_elems) continue;
      for (bool random_bytes : {false, true}) {
        const int rows = 32, n_act = 3;
        std::vector<float> wf(rows * k), af(n_act * k);
        for (auto& v : wf) v = dist(rng);
        for (auto& v : af) v = dist(rng);
        const size_t wb = df::row_bytes(t, k), ab = df::cpu::act_row_bytes(t, k);
        std::vector<uint8_t> W(wb * rows), A(ab * n_act);
        if (random_bytes)
          W = random_weight_bytes(t, rows, k, rng);
        else
          for (int i = 0; i < rows; ++i) df::cpu::quantize_row_ref(t, wf.data() + i * k, W.data() + i * wb, k);
        for (int r = 0; r < n_act; ++r) act_traits->from_float(af.data() + r * k, A.data() + r * ab, k);
        std::vector<float> want(rows * n_act);
        for (int r = 0; r < n_act; ++r)
          for (int i = 0; i < rows; ++i)
            ct->vec_dot(static_cast<int>(k), &want[r * rows + i], 0, W.data() + i * wb, 0, A.data() + r * ab, 0, 1);
        const std::string what = std::string(df::type_name(t)) + " k=" + std::to_string(k) +
                                 (random_bytes ? " random bytes" : "") + " (ggml " + libs.cpu_variant() + ")";
        for (Isa isa : isas()) {
          const auto& kr = df::cpu::kernels(isa);
          for (int n : {1, n_act}) {
            std::vector<float> got(rows * n);
            kr.gemm(t, k, W.data(), wb, 0, rows, A.data(), ab, n, got.data(), rows);
            double num = 0, den = 0;
            int differ = 0;
            for (int j = 0; j < rows * n; ++j) {
              num += (double(want[j]) - got[j]) * (double(want[j]) - got[j]);
              den += double(want[j]) * want[j];
              differ += std::bit_cast<uint32_t>(want[j]) != std::bit_cast<uint32_t>(got[j]);
            }
            EXPECT_LE(num / den, 1e-10) << what << " " << df::cpu::isa_name(isa) << " n_act=" << n;
            if (bit_exact_type(t)) {
              EXPECT_EQ(differ, 0) << what << " " << df::cpu::isa_name(isa) << " n_act=" << n
                                   << ": results not bit-identical to ggml's vec_dot";
            }
          }
          const float one = kr.vec_dot(t, k, W.data() + 5 * wb, A.data() + ab);
          if (bit_exact_type(t)) {
            EXPECT_EQ(std::bit_cast<uint32_t>(one), std::bit_cast<uint32_t>(want[rows + 5])) << what;
          }
        }
      }
    }
  }
}

}  // namespace
