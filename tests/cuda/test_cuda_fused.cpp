// The CUDA backend's fused ops (cuda_fused.cu): against the same backend with fusions off
// (CudaOptions::fuse = false: Backend's unfused defaults over the CUDA kernels), and row
// exactness: row r of an n-row call (n <= 8) has the bits of the same row computed alone,
// for every fused op and the formats of the decode paths (speculative verify depends on it).
// The shared op harness (tests/unit/test_backend_ops.cpp) checks them against the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "../unit/op_test_util.h"
#include "cuda_test_util.h"
#include "quant/cpu/kernels.h"

namespace df::cudatest {
namespace {

using optest::nerr;
using optest::randn;

cuda::CudaBackend& unfused() {
  static cuda::CudaBackend b([] {
    cuda::CudaOptions o;
    o.fuse = false;
    return o;
  }());
  return b;
}

struct Weight {
  std::vector<uint8_t> host;
  int64_t cols, rows;
  GgmlType t;
};
Weight make_weight(GgmlType t, int64_t cols, int64_t rows, uint64_t seed) {
  Weight w{std::vector<uint8_t>(row_bytes(t, cols) * static_cast<size_t>(rows)), cols, rows, t};
  const auto f = randn(static_cast<size_t>(cols * rows), seed, 0.1f);
  for (int64_t r = 0; r < rows; ++r)
    cpu::quantize_row_ref(t, f.data() + r * cols, w.host.data() + row_bytes(t, cols) * static_cast<size_t>(r), cols);
  return w;
}

// One fused decode layer's ops over rows x [n, k]: returns every output.
using Outputs = std::vector<std::vector<float>>;
Outputs run_fused(Backend& b, GgmlType t, const std::vector<float>& xv, int64_t n, int64_t k, int32_t pos0 = 7) {
  static std::vector<Weight> ws;
  if (ws.empty() || ws[0].t != t || ws[0].cols != k) {
    ws.clear();
    ws.push_back(make_weight(t, k, 96, 101));   // q
    ws.push_back(make_weight(t, k, 32, 102));   // k (also beta, with a sigmoid)
    ws.push_back(make_weight(t, k, 32, 103));   // v (also alpha, softplus * scale)
    ws.push_back(make_weight(t, k, 256, 104));  // gate (256: the K-quants' block)
    ws.push_back(make_weight(t, k, 256, 105));  // up
    ws.push_back(make_weight(t, 256, k, 106));  // down
  }
  std::vector<Tensor> W;
  for (const Weight& w : ws) W.push_back(b.weight(w.t, w.cols, w.rows, w.host.data()));
  auto x = put_f32(b, xv, k);
  auto nw = put_f32(b, randn(k, 107), k);
  auto xn = put_f32(b, std::vector<float>(n * k), k);
  auto q = put_f32(b, std::vector<float>(n * 96, NAN), 96);
  auto kk = put_f32(b, std::vector<float>(n * 32, NAN), 32);
  auto v = put_f32(b, std::vector<float>(n * 32, NAN), 32);
  auto bias = put_f32(b, randn(32, 108), 32), scale = put_f32(b, randn(32, 109), 32);
  Projection p[3] = {{W[0], q.t}, {W[1], kk.t, Epilogue::SIGMOID}, {W[2], v.t, Epilogue::SOFTPLUS_SCALE, bias.t, scale.t}};
  b.norm_matmuls(x.t, nw.t, 1e-6f, xn.t, p);
  auto gate = put_f32(b, std::vector<float>(n * 256, NAN), 256);
  auto up = put_f32(b, std::vector<float>(n * 256), 256);
  b.norm_swiglu(x.t, nw.t, 1e-6f, xn.t, W[3], W[4], gate.t, up.t);
  auto tmp = put_f32(b, std::vector<float>(n * k), k);
  b.matmul_add(W[5], gate.t, tmp.t, x.t);  // x += down . gate
  // q/k norm + RoPE + store: q as 3 heads of 32, k as 1 head of 32
  auto qn = put_f32(b, randn(32, 110), 32), kn = put_f32(b, randn(32, 111), 32);
  RopeParams rq;
  rq.n_head = 3, rq.head_dim = 32, rq.n_rot = 32, rq.freq_base = 1e4f;
  RopeParams rk = rq;
  rk.n_head = 1;
  std::vector<int32_t> pv(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) pv[static_cast<size_t>(i)] = static_cast<int32_t>(pos0 + 3 * i);
  auto pos = put_i32(b, pv);
  KvCache c = b.alloc_kv_cache(64, 32, GgmlType::F16);
  b.qk_norm_rope(q.t, kk.t, v.t, qn.t, kn.t, 1e-6f, pos.t, rq, rk, &c);
  return {get_f32(b, q.t), get_f32(b, kk.t), get_f32(b, v.t), get_f32(b, gate.t), get_f32(b, x.t)};
}

const GgmlType kTypes[] = {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q5_K,
                           GgmlType::Q5_0, GgmlType::F16, GgmlType::BF16};

TEST(CudaFused, MatchesUnfused) {
  DF_REQUIRE_GPU();
  for (GgmlType t : kTypes)
    for (int64_t n : {1, 2, 3, 8}) {
      const int64_t k = 256;
      const auto xv = randn(static_cast<size_t>(n * k), 120 + n, 2.0f);
      const Outputs a = run_fused(*gpu(), t, xv, n, k), b = run_fused(unfused(), t, xv, n, k);
      for (size_t i = 0; i < a.size(); ++i) {
        for (float v : a[i]) ASSERT_TRUE(std::isfinite(v)) << type_name(t) << " n=" << n << " output " << i;
        EXPECT_LE(nerr(b[i], a[i]), 1e-10) << type_name(t) << " n=" << n << " output " << i;
      }
    }
}

// Against the CPU backend (SCALAR kernels: the fused ops' unfused defaults): issue 9's budget
// for quantized weights (1e-3; one product alone is held to 5e-4 in test_backend_ops.cpp). The CPU rounds
// activations to the weight's dot format; q, k, v are one product from x (measured <= 1e-4),
// gate and the updated x chain two (measured 1.0e-4 .. 1.75e-4 for Q8_0 / Q4_0 at n = 3, 8 on
// the H200: the CPU rounds the SwiGLU output again before the down projection; 5.7e-4 .. 5.9e-4
// for Q4_K / Q5_K / Q6_K at n = 3, whose activations the CPU rounds to Q8_K).
TEST(CudaFused, MatchesCpu) {
  DF_REQUIRE_GPU();
  for (GgmlType t : kTypes)
    for (int64_t n : {1, 3, 8}) {
      const int64_t k = 256;
      const auto xv = randn(static_cast<size_t>(n * k), 140 + n, 2.0f);
      const Outputs want = run_fused(cpu_ref(), t, xv, n, k), got = run_fused(*gpu(), t, xv, n, k);
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_LE(nerr(want[i], got[i]), 1e-3) << type_name(t) << " n=" << n << " output " << i;
    }
}

// norm_matmuls over float weights (F32 as the qwen35moe router: 256 rows of width 2048, with
// the shared expert's 1-row gate and its sigmoid) with the norm in the matvec's prologue
// (CudaOptions::float_norm_prologue): the bits of the norm kernel then the matvec (the
// default), for n = 1 .. 8.
TEST(CudaFused, FloatNormMatmulsIsTheNormThenMatvecBits) {
  DF_REQUIRE_GPU();
  static cuda::CudaBackend prologue([] {
    cuda::CudaOptions o;
    o.float_norm_prologue = true;
    return o;
  }());
  const int64_t k = 2048, E = 256;
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
    const Weight wr = make_weight(t, k, E, 150), wg = make_weight(t, k, 1, 151);
    const auto nwv = randn(static_cast<size_t>(k), 153);
    for (int64_t n = 1; n <= 8; ++n) {
      const auto xv = randn(static_cast<size_t>(n * k), 152 + n, 2.0f);
      auto run = [&](Backend& be) -> Outputs {
        const Tensor R = be.weight(t, k, E, wr.host.data()), G = be.weight(t, k, 1, wg.host.data());
        auto x = put_f32(be, xv, k);
        auto nw = put_f32(be, nwv, k);
        auto xn = put_f32(be, std::vector<float>(static_cast<size_t>(n * k)), k);
        auto l = put_f32(be, std::vector<float>(static_cast<size_t>(n * E), NAN), E);
        auto g = put_f32(be, std::vector<float>(static_cast<size_t>(n), NAN), 1);
        const Projection p[2] = {{R, l.t}, {G, g.t, Epilogue::SIGMOID}};
        be.norm_matmuls(x.t, nw.t, 1e-6f, xn.t, p);
        return {get_f32(be, l.t), get_f32(be, g.t)};
      };
      const Outputs lean = run(prologue), old = run(*gpu());
      ASSERT_EQ(lean.size(), old.size());
      for (size_t i = 0; i < lean.size(); ++i) {
        for (float v : lean[i]) ASSERT_TRUE(std::isfinite(v)) << type_name(t) << " n=" << n << " output " << i;
        EXPECT_EQ(std::memcmp(lean[i].data(), old[i].data(), lean[i].size() * sizeof(float)), 0)
            << type_name(t) << " n=" << n << " output " << i << ": bits";
      }
    }
  }
}

// Row r of n rows: the bits of row r alone (n = 1), for n = 2 .. 8.
TEST(CudaFused, RowExactForEveryRowCount) {
  DF_REQUIRE_GPU();
  for (GgmlType t : kTypes) {
    const int64_t k = 256;
    const auto all = randn(static_cast<size_t>(8 * k), 130, 2.0f);
    std::vector<Outputs> alone;
    for (int64_t r = 0; r < 8; ++r) {
      const std::vector<float> row(all.begin() + r * k, all.begin() + (r + 1) * k);
      alone.push_back(run_fused(*gpu(), t, row, 1, k, static_cast<int32_t>(7 + 3 * r)));  // row r's position
    }
    for (int64_t n : {2, 3, 4, 5, 6, 7, 8}) {
      const std::vector<float> rows(all.begin(), all.begin() + n * k);
      const Outputs got = run_fused(*gpu(), t, rows, n, k);
      for (size_t i = 0; i < got.size(); ++i) {
        const size_t w = got[i].size() / static_cast<size_t>(n);
        for (int64_t r = 0; r < n; ++r) {
          EXPECT_TRUE(std::equal(got[i].begin() + r * w, got[i].begin() + (r + 1) * w, alone[r][i].begin()))
              << type_name(t) << " n=" << n << " row " << r << " output " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace df::cudatest
