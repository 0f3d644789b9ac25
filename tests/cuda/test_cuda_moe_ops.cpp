// The MoE ops of the CUDA backend (moe_route, matmul_id / matmul_id_swiglu over resident and
// streamed expert stacks, the fused expert block, moe_combine(_add), routed launches with PDL)
// against the CPU backend and against the backend's own other paths, bit for bit where the
// paths promise the same bits. Split from test_cuda_ops.cpp (the other ops).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "../unit/op_test_util.h"
#include "backend/cuda/expert_cache.h"
#include "cuda_test_util.h"

namespace df::cudatest {
namespace {

using optest::nerr;
using optest::randn;
using Outputs = std::vector<std::vector<float>>;

// MoE ops at the 35B-A3B decode shape (256 experts, 8 routed, rows of 2048): the router's
// choice the same as the CPU's, the grouped expert products within the matmul budgets for
// decode (one matvec per slot), verify (<= 8 rows per expert) and prefill (more; grouped on the
// device, chunks of 8 rows per expert: no download of the ids), each row of a 3-, 40- or
// 300-row call the bits of the one-row call, moe_combine_add the bits of moe_combine and add,
// and with the experts streamed through a small device cache the bits of the resident stack.
TEST(CudaOps, MoeDecodeShape) {
  DF_REQUIRE_GPU();
  const int64_t E = 256, k = 8, cols = 2048, m = 64;
  std::vector<uint8_t> wq(row_bytes(GgmlType::Q4_K, cols) * static_cast<size_t>(E * m));
  const auto wf = randn(static_cast<size_t>(E * m * cols), 91, 0.1f);
  for (int64_t r = 0; r < E * m; ++r)
    cpu::quantize_row_ref(GgmlType::Q4_K, wf.data() + r * cols, wq.data() + row_bytes(GgmlType::Q4_K, cols) * r, cols);
  cuda::CudaOptions o;
  o.expert_cache_bytes = 12 * (row_bytes(GgmlType::Q4_K, cols) * m + 256);  // 12 of the 256 experts
  cuda::CudaBackend small(o);
  for (int64_t n : {1, 3, 40, 300}) {
    const auto logits = randn(static_cast<size_t>(n * E), 92 + n, 2.0f);
    const auto xs = randn(static_cast<size_t>(n * cols), 95 + n);
    auto run = [&](Backend& b) -> Outputs {
      const Tensor W = b.weight_stack(GgmlType::Q4_K, cols, m, E, wq.data());
      auto l = put_f32(b, logits, E);
      auto ids = put(b, GgmlType::I32, k, n, nullptr);
      auto w = put_f32(b, std::vector<float>(static_cast<size_t>(n * k)), k);
      b.moe_route(l.t, true, 0.0f, ids.t, w.t);
      auto x = put_f32(b, xs, cols);
      auto y = put_f32(b, std::vector<float>(static_cast<size_t>(n * k * m), NAN), m);
      b.matmul_id(W, E, x.t, ids.t, y.t);
      auto out = put_f32(b, std::vector<float>(static_cast<size_t>(n * m)), m);
      b.moe_combine(y.t, w.t, Tensor{}, Tensor{}, out.t);
      // the fused combine and residual add: the bits of moe_combine then add
      const auto res = randn(static_cast<size_t>(n * m), 97 + n);
      auto x1 = put_f32(b, res, m), x2 = put_f32(b, res, m);
      auto tmp = put_f32(b, std::vector<float>(static_cast<size_t>(n * m)), m);
      b.moe_combine_add(y.t, w.t, Tensor{}, Tensor{}, tmp.t, x1.t);
      b.add(x2.t, out.t);
      EXPECT_EQ(get_f32(b, x1.t), get_f32(b, x2.t)) << "moe_combine_add, n=" << n;
      std::vector<int32_t> id(static_cast<size_t>(n * k));
      b.download(ids.t, id.data(), id.size() * sizeof(int32_t));
      return {std::vector<float>(id.begin(), id.end()), get_f32(b, w.t), get_f32(b, y.t), get_f32(b, out.t)};
    };
    const uint64_t d0 = gpu()->routed_id_downloads();
    const Outputs ref = run(cpu_ref()), got = run(*gpu()), streamed = run(small);
    EXPECT_EQ(gpu()->routed_id_downloads(), d0) << "grouped on the device, n=" << n;
    EXPECT_EQ(ref[0], got[0]) << "routed experts, n=" << n;
    EXPECT_LE(nerr(ref[1], got[1]), 1e-10) << "routing weights, n=" << n;
    EXPECT_LE(nerr(ref[2], got[2]), 1e-4) << "expert products, n=" << n;
    EXPECT_LE(nerr(ref[3], got[3]), 1e-4) << "combine, n=" << n;
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], streamed[i]) << "streamed output " << i << ", n=" << n;
    if (n > 1) {  // each row of a many-row call: the bits of one row alone
      for (int64_t r = 0; r < n; r += n > 40 ? 7 : 1) {
        const Tensor W = gpu()->weight_stack(GgmlType::Q4_K, cols, m, E, wq.data());
        auto ids = put_i32(*gpu(), std::vector<int32_t>(got[0].begin() + r * k, got[0].begin() + (r + 1) * k));
        auto x = put_f32(*gpu(), std::vector<float>(xs.begin() + r * cols, xs.begin() + (r + 1) * cols), cols);
        auto y = put_f32(*gpu(), std::vector<float>(static_cast<size_t>(k * m)), m);
        gpu()->matmul_id(W, E, x.t, ids.t.reshape(k), y.t);
        const auto y1 = get_f32(*gpu(), y.t);
        EXPECT_TRUE(std::equal(y1.begin(), y1.end(), got[2].begin() + r * k * m)) << "matmul_id row " << r;
      }
    }
  }
  const cuda::ExpertCacheStats st = small.expert_cache_stats();
  EXPECT_EQ(st.slots, 12);
  EXPECT_GT(st.misses, 0u);
  EXPECT_EQ(st.bytes_in_place, st.misses * (row_bytes(GgmlType::Q4_K, cols) * m));  // misses read in place
}

// The fused gate/up product of the routed experts (one launch over the slots, SwiGLU in its
// epilogue) gives the bits of matmul_id twice and swiglu, resident and streamed; decode-sized
// calls read the routed ids on the device (no download).
TEST(CudaOps, MoeSwigluFusedIsTheUnfusedBits) {
  DF_REQUIRE_GPU();
  const int64_t E = 64, k = 8, cols = 1024, m = 128;
  const size_t rb = row_bytes(GgmlType::Q4_K, cols);
  std::vector<uint8_t> gq(rb * static_cast<size_t>(E * m)), uq(gq.size());
  const auto gf = randn(static_cast<size_t>(E * m * cols), 191, 0.1f), uf = randn(gf.size(), 192, 0.1f);
  for (int64_t r = 0; r < E * m; ++r) {
    cpu::quantize_row_ref(GgmlType::Q4_K, gf.data() + r * cols, gq.data() + rb * r, cols);
    cpu::quantize_row_ref(GgmlType::Q4_K, uf.data() + r * cols, uq.data() + rb * r, cols);
  }
  cuda::CudaOptions o;
  o.expert_cache_bytes = 40 * (rb * m + 256);  // 40 of the 128 experts
  cuda::CudaBackend small(o);
  for (int64_t n : {1, 3}) {
    const auto logits = randn(static_cast<size_t>(n * E), 193 + n, 2.0f);
    const auto xs = randn(static_cast<size_t>(n * cols), 196 + n);
    auto run = [&](Backend& b, bool fused) -> std::vector<float> {
      const Tensor G = b.weight_stack(GgmlType::Q4_K, cols, m, E, gq.data());
      const Tensor U = b.weight_stack(GgmlType::Q4_K, cols, m, E, uq.data());
      auto l = put_f32(b, logits, E);
      auto ids = put(b, GgmlType::I32, k, n, nullptr);
      auto w = put_f32(b, std::vector<float>(static_cast<size_t>(n * k)), k);
      b.moe_route(l.t, true, 0.0f, ids.t, w.t);
      auto x = put_f32(b, xs, cols);
      auto gate = put_f32(b, std::vector<float>(static_cast<size_t>(n * k * m), NAN), m);
      auto up = put_f32(b, std::vector<float>(static_cast<size_t>(n * k * m), NAN), m);
      if (fused) {
        b.matmul_id_swiglu(G, U, E, x.t, ids.t, gate.t, up.t);
      } else {
        b.matmul_id(U, E, x.t, ids.t, up.t);
        b.matmul_id(G, E, x.t, ids.t, gate.t);
        b.swiglu(gate.t, up.t, gate.t);
      }
      return get_f32(b, gate.t);
    };
    const uint64_t d0 = gpu()->routed_id_downloads();
    const auto unfused = run(*gpu(), false), fused = run(*gpu(), true);
    EXPECT_EQ(gpu()->routed_id_downloads(), d0) << "n=" << n;
    EXPECT_EQ(unfused, fused) << "resident, n=" << n;
    EXPECT_EQ(fused, run(small, true)) << "streamed, n=" << n;
    // two chained quantized products (gate and up through SwiGLU): the fused-op tests' budget
    EXPECT_LE(nerr(run(cpu_ref(), false), fused), 5e-4) << "vs the CPU, n=" << n;
  }
}

// The expert part of a MoE block (moe_experts_residual) with a shared expert of the routed
// experts' shape: the fused decode path (router top-k + shared slot, gate/up with the norm
// prologue, down, combine + residual: 4 launches) gives x the bits of the unfused sequence that
// streamed experts take, each row of an 8-row call the bits of that row alone, and the CPU's
// result within the chained quantized products' budget; --moe-legacy within that budget too.
TEST(CudaOps, MoeExpertsFusedIsTheStreamedBits) {
  DF_REQUIRE_GPU();
  const int64_t E = 64, k = 8, dim = 1024, m = 256;
  const size_t rd = row_bytes(GgmlType::Q4_K, dim);
  auto quant = [](int64_t rows, int64_t cols, uint32_t seed) {
    const size_t rb = row_bytes(GgmlType::Q4_K, cols);
    std::vector<uint8_t> q(rb * static_cast<size_t>(rows));
    const auto f = randn(static_cast<size_t>(rows * cols), seed, 0.1f);
    for (int64_t r = 0; r < rows; ++r) cpu::quantize_row_ref(GgmlType::Q4_K, f.data() + r * cols, q.data() + rb * r, cols);
    return q;
  };
  const auto gq = quant(E * m, dim, 301), uq = quant(E * m, dim, 302), dq = quant(E * dim, m, 303);
  const auto sgq = quant(m, dim, 304), suq = quant(m, dim, 305), sdq = quant(dim, m, 306);
  cuda::CudaOptions so;
  so.expert_cache_bytes = 3 * 20 * (rd * m + 256);  // 20 of the 64 experts of each stack
  cuda::CudaBackend streamed(so);
  cuda::CudaOptions lo;
  lo.moe_legacy = true;
  cuda::CudaBackend legacy(lo);
  auto run = [&](Backend& b, int64_t n, int64_t row0, int64_t seed_n) {
    const auto logits = randn(static_cast<size_t>(seed_n * E), 310 + seed_n, 2.0f);
    const auto xs = randn(static_cast<size_t>(seed_n * dim), 320 + seed_n);
    auto gv = randn(static_cast<size_t>(seed_n), 330 + seed_n);
    for (float& v : gv) v = 1.0f / (1.0f + std::exp(-v));
    auto nv = randn(static_cast<size_t>(dim), 340, 0.2f);
    for (float& v : nv) v += 1.0f;
    auto rows = [&](const std::vector<float>& v, int64_t c) {
      return std::vector<float>(v.begin() + row0 * c, v.begin() + (row0 + n) * c);
    };
    MoeExperts a;
    a.gate_exps = b.weight_stack(GgmlType::Q4_K, dim, m, E, gq.data());
    a.up_exps = b.weight_stack(GgmlType::Q4_K, dim, m, E, uq.data());
    a.down_exps = b.weight_stack(GgmlType::Q4_K, m, dim, E, dq.data());
    a.n_expert = E;
    a.shexp_gate = b.weight(GgmlType::Q4_K, dim, m, sgq.data());
    a.shexp_up = b.weight(GgmlType::Q4_K, dim, m, suq.data());
    a.shexp_down = b.weight(GgmlType::Q4_K, m, dim, sdq.data());
    std::vector<Held> held;
    auto f32 = [&](const std::vector<float>& v, int64_t c) {
      held.push_back(put_f32(b, v, c));
      return held.back().t;
    };
    auto zeros = [&](int64_t r, int64_t c) { return f32(std::vector<float>(static_cast<size_t>(r * c), NAN), c); };
    a.logits = f32(rows(logits, E), E);
    a.sh_g = f32(rows(gv, 1), 1);
    held.push_back(put(b, GgmlType::I32, k, n, nullptr));
    a.ids = held.back().t;
    a.weights = zeros(n, k), a.gate = zeros(n * k, m), a.up = zeros(n * k, m), a.down = zeros(n * k, dim);
    a.sh_gate = zeros(n, m), a.sh_up = zeros(n, m), a.sh_out = zeros(n, dim), a.out = zeros(n, dim);
    const Tensor x = f32(rows(xs, dim), dim), norm = f32(nv, dim), xn = zeros(n, dim);
    b.moe_experts_residual(a, x, norm, 1e-6f, xn);
    std::vector<float> d = get_f32(b, x);
    const auto x0 = rows(xs, dim);
    for (size_t i = 0; i < d.size(); ++i) d[i] -= x0[i];  // the MoE output (x's rounding aside)
    return std::make_pair(get_f32(b, x), d);
  };
  for (int64_t n : {1, 3, 8}) {
    const auto got = run(*gpu(), n, 0, n);
    EXPECT_EQ(got.first, run(streamed, n, 0, n).first) << "streamed, n=" << n;
    EXPECT_LE(nerr(run(cpu_ref(), n, 0, n).second, got.second), 5e-4) << "vs the CPU, n=" << n;
    EXPECT_LE(nerr(run(legacy, n, 0, n).second, got.second), 5e-4) << "vs --moe-legacy, n=" << n;
    if (n == 8)
      for (int64_t r = 0; r < n; ++r) {
        const auto one = run(*gpu(), 1, r, n).first;
        EXPECT_TRUE(std::equal(one.begin(), one.end(), got.first.begin() + r * dim)) << "row " << r << " of 8";
      }
  }
  const cuda::ExpertCacheStats st = streamed.expert_cache_stats();
  EXPECT_GT(st.misses, 0u);
}

// CudaOptions::moe_pdl (routed matvec launches and the combine with programmatic dependent
// launch; each waits for the previous kernel before it reads the routed ids) gives the plain
// launches' bits: the fused expert part of a MoE block (1, 3 and 8 rows), eager and replayed
// from a recorded graph step after step, the unfused gate/up and down products of a verify
// batch (matmul_id_swiglu, matmul_id over 3 rows) and a grouped prefill call (300 rows).
TEST(CudaOps, MoePdlIsThePlainBits) {
  DF_REQUIRE_GPU();
  const int64_t E = 64, k = 8, dim = 1024, m = 256;
  auto quant = [](int64_t rows, int64_t cols, uint32_t seed) {
    const size_t rb = row_bytes(GgmlType::Q4_K, cols);
    std::vector<uint8_t> q(rb * static_cast<size_t>(rows));
    const auto f = randn(static_cast<size_t>(rows * cols), seed, 0.1f);
    for (int64_t r = 0; r < rows; ++r) cpu::quantize_row_ref(GgmlType::Q4_K, f.data() + r * cols, q.data() + rb * r, cols);
    return q;
  };
  const auto gq = quant(E * m, dim, 501), uq = quant(E * m, dim, 502), dq = quant(E * dim, m, 503);
  const auto sgq = quant(m, dim, 504), suq = quant(m, dim, 505), sdq = quant(dim, m, 506);
  cuda::CudaOptions po;
  po.moe_pdl = true;
  po.moe_warp_route = true;  // the router launched with PDL before the routed launches
  cuda::CudaBackend pdl(po);
  cuda::CudaOptions qo;
  qo.moe_warp_route = true;
  cuda::CudaBackend plain(qo);
  auto same_bits = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  };
  // Five steps of the expert part on new x: eager on both; on `pdl` also step 0 eager, step 1
  // recorded, steps 2-4 replayed.
  auto steps = [&](cuda::CudaBackend& b, int64_t n, bool graph) {
    std::vector<Held> held;
    auto f32 = [&](const std::vector<float>& v, int64_t c) {
      held.push_back(put_f32(b, v, c));
      return held.back().t;
    };
    auto zeros = [&](int64_t r, int64_t c) { return f32(std::vector<float>(static_cast<size_t>(r * c), NAN), c); };
    MoeExperts a;
    a.gate_exps = b.weight_stack(GgmlType::Q4_K, dim, m, E, gq.data());
    a.up_exps = b.weight_stack(GgmlType::Q4_K, dim, m, E, uq.data());
    a.down_exps = b.weight_stack(GgmlType::Q4_K, m, dim, E, dq.data());
    a.n_expert = E;
    a.shexp_gate = b.weight(GgmlType::Q4_K, dim, m, sgq.data());
    a.shexp_up = b.weight(GgmlType::Q4_K, dim, m, suq.data());
    a.shexp_down = b.weight(GgmlType::Q4_K, m, dim, sdq.data());
    auto gv = randn(static_cast<size_t>(n), 530 + n);
    for (float& v : gv) v = 1.0f / (1.0f + std::exp(-v));
    auto nv = randn(static_cast<size_t>(dim), 540, 0.2f);
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
      const auto lv = randn(static_cast<size_t>(n * E), 550 + 10 * t + static_cast<uint32_t>(n), 2.0f);
      const auto xv = randn(static_cast<size_t>(n * dim), 600 + 10 * t + static_cast<uint32_t>(n));
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
  for (int64_t n : {1, 3, 8}) {
    const auto ref = steps(plain, n, false);
    EXPECT_TRUE(same_bits(ref, steps(pdl, n, false))) << "eager, n=" << n;
    EXPECT_TRUE(same_bits(ref, steps(pdl, n, true))) << "graph replay, n=" << n;
  }
  // The unfused routed products: a 3-row verify batch (one launch over its slots) and a
  // 300-row prefill call (grouped on the device, chunks of 8 rows per expert).
  for (int64_t n : {3, 300}) {
    auto run = [&](cuda::CudaBackend& b) {
      const Tensor G = b.weight_stack(GgmlType::Q4_K, dim, m, E, gq.data());
      const Tensor U = b.weight_stack(GgmlType::Q4_K, dim, m, E, uq.data());
      const Tensor D = b.weight_stack(GgmlType::Q4_K, m, dim, E, dq.data());
      auto l = put_f32(b, randn(static_cast<size_t>(n * E), 700 + static_cast<uint32_t>(n), 2.0f), E);
      auto ids = put(b, GgmlType::I32, k, n, nullptr);
      auto w = put_f32(b, std::vector<float>(static_cast<size_t>(n * k)), k);
      b.moe_route(l.t, true, 0.0f, ids.t, w.t);
      auto x = put_f32(b, randn(static_cast<size_t>(n * dim), 710 + static_cast<uint32_t>(n)), dim);
      auto gate = put_f32(b, std::vector<float>(static_cast<size_t>(n * k * m), NAN), m);
      auto up = put_f32(b, std::vector<float>(static_cast<size_t>(n * k * m), NAN), m);
      auto y = put_f32(b, std::vector<float>(static_cast<size_t>(n * k * dim), NAN), dim);
      b.matmul_id_swiglu(G, U, E, x.t, ids.t, gate.t, up.t);
      b.matmul_id(D, E, gate.t, ids.t, y.t);
      return get_f32(b, y.t);
    };
    EXPECT_TRUE(same_bits(run(plain), run(pdl))) << "matmul_id, n=" << n;
  }
}

}  // namespace
}  // namespace df::cudatest
