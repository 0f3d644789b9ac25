// Short-row matvecs with pipelined loads (CudaOptions::moe_pipe, mv_short_pipe; matvec/launch.cuh
// short_depth): the routed experts' one-row launches and the other one-row int8-x matvecs whose
// rows have at most 64 parts, run by mv_kernel with its loads 2 or 4 steps ahead, give the bits of
// the formats' own configurations (which lane takes which parts, in which order, is unchanged).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>

#include "../unit/op_test_util.h"
#include "cuda_test_util.h"

namespace df::cudatest {
namespace {

using optest::randn;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return !a.empty() && a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<uint8_t> quant(GgmlType t, int64_t rows, int64_t cols, uint32_t seed) {
  const size_t rb = row_bytes(t, cols);
  std::vector<uint8_t> q(rb * static_cast<size_t>(rows));
  const auto f = randn(static_cast<size_t>(rows * cols), seed, 0.1f);
  for (int64_t r = 0; r < rows; ++r) cpu::quantize_row_ref(t, f.data() + r * cols, q.data() + rb * r, cols);
  return q;
}

// The fused expert part of a MoE block (router top-k + shared expert, gate/up with the norm and
// SwiGLU, down, combine + residual add) over 1 and 3 rows, five steps on new x, eager (and, on
// the backend under test, step 1 recorded and steps 2-4 replayed from the graph); then the
// unfused routed products of one row (matmul_id_swiglu, matmul_id: one launch over the slots).
// Formats: Q4_K at the 35B-A3B's widths (rows of 2048 and, for down, of 512 = 16 parts), Q4_K
// with 8-part rows, Q8_0 and Q6_K (depth 2: three words a part). IQ4_XS (also of the path) has
// no reference quantiser to make its weights.
TEST(CudaOps, MoePipeIsThePlainBits) {
  DF_REQUIRE_GPU();
  struct Shape {
    GgmlType t;
    int64_t E, k, dim, m;
  };
  const Shape shapes[] = {{GgmlType::Q4_K, 32, 8, 2048, 512},
                          {GgmlType::Q4_K, 64, 8, 1024, 256},
                          {GgmlType::Q8_0, 16, 4, 1024, 256},
                          {GgmlType::Q6_K, 16, 4, 1024, 256}};
  cuda::CudaOptions qo;
  qo.moe_warp_route = true;
  cuda::CudaBackend plain(qo);
  for (const Shape& s : shapes) {
    const int64_t E = s.E, k = s.k, dim = s.dim, m = s.m;
    const uint32_t sd = static_cast<uint32_t>(s.t) * 100 + static_cast<uint32_t>(dim);
    const auto gq = quant(s.t, E * m, dim, sd + 1), uq = quant(s.t, E * m, dim, sd + 2), dq = quant(s.t, E * dim, m, sd + 3);
    const auto sgq = quant(s.t, m, dim, sd + 4), suq = quant(s.t, m, dim, sd + 5), sdq = quant(s.t, dim, m, sd + 6);
    auto steps = [&](cuda::CudaBackend& b, int64_t n, bool graph) {
      std::vector<Held> held;
      auto f32 = [&](const std::vector<float>& v, int64_t c) {
        held.push_back(put_f32(b, v, c));
        return held.back().t;
      };
      auto zeros = [&](int64_t r, int64_t c) { return f32(std::vector<float>(static_cast<size_t>(r * c), NAN), c); };
      MoeExperts a;
      a.gate_exps = b.weight_stack(s.t, dim, m, E, gq.data());
      a.up_exps = b.weight_stack(s.t, dim, m, E, uq.data());
      a.down_exps = b.weight_stack(s.t, m, dim, E, dq.data());
      a.n_expert = E;
      a.shexp_gate = b.weight(s.t, dim, m, sgq.data());
      a.shexp_up = b.weight(s.t, dim, m, suq.data());
      a.shexp_down = b.weight(s.t, m, dim, sdq.data());
      auto gv = randn(static_cast<size_t>(n), sd + 30 + static_cast<uint32_t>(n));
      for (float& v : gv) v = 1.0f / (1.0f + std::exp(-v));
      auto nv = randn(static_cast<size_t>(dim), sd + 40, 0.2f);
      for (float& v : nv) v += 1.0f;
      a.logits = zeros(n, E);
      a.sh_g = f32(gv, 1);
      held.push_back(put(b, GgmlType::I32, k, n, nullptr));
      a.ids = held.back().t;
      a.weights = zeros(n, k), a.gate = zeros(n * k, m), a.up = zeros(n * k, m), a.down = zeros(n * k, dim);
      a.sh_gate = zeros(n, m), a.sh_up = zeros(n, m), a.sh_out = zeros(n, dim), a.out = zeros(n, dim);
      const Tensor x = zeros(n, dim), norm = f32(nv, dim), xn = zeros(n, dim);
      auto step = [&] { b.moe_experts_residual(a, x, norm, 1e-6f, xn); };
      std::unique_ptr<OpGraph> exec;
      std::vector<float> all;
      for (uint32_t t = 0; t < 5; ++t) {
        const auto lv = randn(static_cast<size_t>(n * E), sd + 50 + 10 * t + static_cast<uint32_t>(n), 2.0f);
        const auto xv = randn(static_cast<size_t>(n * dim), sd + 60 + 10 * t + static_cast<uint32_t>(n));
        b.upload(a.logits, lv.data(), a.logits.nbytes());
        b.upload(x, xv.data(), x.nbytes());
        if (!graph || t == 0) {
          step();
        } else if (!exec) {
          exec = b.record(step);  // records and runs this step
          EXPECT_TRUE(exec);
        } else {
          b.replay(*exec);
        }
        const auto v = get_f32(b, x);
        all.insert(all.end(), v.begin(), v.end());
      }
      return all;
    };
    auto unfused = [&](cuda::CudaBackend& b) {
      const Tensor G = b.weight_stack(s.t, dim, m, E, gq.data());
      const Tensor U = b.weight_stack(s.t, dim, m, E, uq.data());
      const Tensor D = b.weight_stack(s.t, m, dim, E, dq.data());
      auto l = put_f32(b, randn(static_cast<size_t>(E), sd + 70, 2.0f), E);
      auto ids = put(b, GgmlType::I32, k, 1, nullptr);
      auto w = put_f32(b, std::vector<float>(static_cast<size_t>(k)), k);
      b.moe_route(l.t, true, 0.0f, ids.t, w.t);
      auto x = put_f32(b, randn(static_cast<size_t>(dim), sd + 71), dim);
      auto gate = put_f32(b, std::vector<float>(static_cast<size_t>(k * m), NAN), m);
      auto up = put_f32(b, std::vector<float>(static_cast<size_t>(k * m), NAN), m);
      auto y = put_f32(b, std::vector<float>(static_cast<size_t>(k * dim), NAN), dim);
      b.matmul_id_swiglu(G, U, E, x.t, ids.t, gate.t, up.t);
      b.matmul_id(D, E, gate.t, ids.t, y.t);
      auto out = get_f32(b, gate.t);
      const auto yv = get_f32(b, y.t);
      out.insert(out.end(), yv.begin(), yv.end());
      return out;
    };
    const std::string tn(type_name(s.t));
    std::vector<float> ref[2] = {steps(plain, 1, false), steps(plain, 3, false)};
    const auto ref_u = unfused(plain);
    for (int depth : {2, 4}) {
      for (bool pdl : {false, true}) {
        cuda::CudaOptions o = qo;
        o.moe_pipe = depth;
        o.moe_pdl = pdl;
        cuda::CudaBackend b(o);
        for (int i = 0; i < 2; ++i) {
          const int64_t n = i == 0 ? 1 : 3;
          EXPECT_TRUE(same_bits(ref[i], steps(b, n, false))) << tn << " " << dim << " depth " << depth << " pdl " << pdl << " eager, n=" << n;
          EXPECT_TRUE(same_bits(ref[i], steps(b, n, true))) << tn << " " << dim << " depth " << depth << " pdl " << pdl << " graph, n=" << n;
        }
        EXPECT_TRUE(same_bits(ref_u, unfused(b))) << tn << " " << dim << " depth " << depth << " pdl " << pdl << " matmul_id";
      }
    }
  }
}

// CudaOptions::mv_short_pipe: one-row matvecs of rows with at most 64 parts (Q4_K at
// 2048 columns, Q8_0 at 1024, Q6_K at 4096) with their loads pipelined give the bits of the
// formats' configurations: a plain matmul, matmul_add (the accumulate epilogue), norm_matmuls
// over three matrices with a sigmoid epilogue, and the SwiGLU pair of norm_swiglu; matrices of
// more parts (Q4_K at 2560 columns) are unchanged by it; 3 rows are the short_pipe's bits too.
TEST(CudaOps, ShortPipeIsThePlainBits) {
  DF_REQUIRE_GPU();
  struct Shape {
    GgmlType t;
    int64_t cols, rows;
  };
  const Shape shapes[] = {{GgmlType::Q4_K, 2048, 1000},  {GgmlType::Q4_K, 2048, 8192}, {GgmlType::Q4_K, 2560, 700},
                          {GgmlType::Q8_0, 1024, 800},  {GgmlType::Q6_K, 4096, 600},
                          {GgmlType::Q4_0, 1024, 520}};
  cuda::CudaBackend plain(cuda::CudaOptions{});
  for (const Shape& s : shapes) {
    const uint32_t sd = static_cast<uint32_t>(s.t) * 1000 + static_cast<uint32_t>(s.cols);
    const auto wq = quant(s.t, s.rows, s.cols, sd + 1), w2 = quant(s.t, 64, s.cols, sd + 2);
    const auto w3 = quant(s.t, 33, s.cols, sd + 3);
    auto nv = randn(static_cast<size_t>(s.cols), sd + 4, 0.2f);
    for (float& v : nv) v += 1.0f;
    auto run = [&](Backend& b, int64_t n) {
      const Tensor W = b.weight(s.t, s.cols, s.rows, wq.data());
      const Tensor W2 = b.weight(s.t, s.cols, 64, w2.data());
      const Tensor W3 = b.weight(s.t, s.cols, 33, w3.data());
      auto x = put_f32(b, randn(static_cast<size_t>(n * s.cols), sd + 5 + static_cast<uint32_t>(n)), s.cols);
      auto norm = put_f32(b, nv, s.cols);
      auto xn = put_f32(b, std::vector<float>(static_cast<size_t>(n * s.cols)), s.cols);
      auto y = put_f32(b, std::vector<float>(static_cast<size_t>(n * s.rows), NAN), s.rows);
      auto acc = put_f32(b, randn(static_cast<size_t>(n * s.rows), sd + 6), s.rows);
      auto tmp = put_f32(b, std::vector<float>(static_cast<size_t>(n * s.rows)), s.rows);
      auto y2 = put_f32(b, std::vector<float>(static_cast<size_t>(n * 64), NAN), 64);
      auto y3 = put_f32(b, std::vector<float>(static_cast<size_t>(n * 33), NAN), 33);
      auto yn = put_f32(b, std::vector<float>(static_cast<size_t>(n * s.rows), NAN), s.rows);
      auto g = put_f32(b, std::vector<float>(static_cast<size_t>(n * 64), NAN), 64);
      auto u = put_f32(b, std::vector<float>(static_cast<size_t>(n * 64)), 64);
      b.matmul(W, x.t, y.t);
      b.matmul_add(W, x.t, tmp.t, acc.t);
      const Projection proj[3] = {{W, yn.t}, {W2, y2.t}, {W3, y3.t, Epilogue::SIGMOID}};
      b.norm_matmuls(x.t, norm.t, 1e-6f, xn.t, std::span<const Projection>(proj, 3));
      b.norm_swiglu(x.t, norm.t, 1e-6f, xn.t, W2, W2, g.t, u.t);
      std::vector<float> out;
      for (const Tensor* t : {&y.t, &acc.t, &yn.t, &y2.t, &y3.t, &g.t}) {
        const auto v = get_f32(b, *t);
        out.insert(out.end(), v.begin(), v.end());
      }
      return out;
    };
    const auto ref1 = run(plain, 1), ref3 = run(plain, 3);
    for (int depth : {2, 4}) {
      cuda::CudaOptions o;
      o.mv_short_pipe = depth;
      cuda::CudaBackend b(o);
      EXPECT_TRUE(same_bits(ref1, run(b, 1))) << type_name(s.t) << " " << s.cols << "x" << s.rows << " depth " << depth;
      EXPECT_TRUE(same_bits(ref3, run(b, 3))) << type_name(s.t) << " " << s.cols << "x" << s.rows << " depth " << depth << " n=3";
    }
  }
}

}  // namespace
}  // namespace df::cudatest
