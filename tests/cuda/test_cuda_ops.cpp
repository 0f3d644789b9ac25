// Every op of the CUDA backend against the CPU backend (SCALAR kernels) on the same random
// inputs, with a normalised error budget per op: nerr = mse(cpu, cuda) / mse(cpu, 0).
// Budgets: plain f32 arithmetic 1e-10 (only summation order and libm differ); products with
// weights or caches the CPU rounds its activations for (F16 1e-6, BF16 and 8-bit blocks
// 1e-4, 4/5-bit blocks 1e-4; the GPU keeps f32 activations).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "../unit/op_test_util.h"
#include "backend/cuda/expert_cache.h"
#include "cuda_test_util.h"
#include "quant/cpu/kernels.h"

#include <cuda_runtime_api.h>

#include "backend/cuda/ops/delta_rule.cuh"
#include "backend/cuda/ops/delta_rule_chunked.cuh"

namespace df::cudatest {
namespace {

using optest::nerr;
using optest::randn;
using Outputs = std::vector<std::vector<float>>;

// Runs f on the CPU reference and on the GPU and checks each output's error.
void compare(const std::function<Outputs(Backend&)>& f, double budget, const std::string& what) {
  const Outputs ref = f(cpu_ref());
  const Outputs got = f(*gpu());
  ASSERT_EQ(ref.size(), got.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_EQ(ref[i].size(), got[i].size()) << what;
    for (float v : got[i]) ASSERT_TRUE(std::isfinite(v)) << what << ": output " << i << " not finite";
    const double e = nerr(ref[i], got[i]);
    EXPECT_LE(e, budget) << what << ": output " << i;
  }
}

TEST(CudaOps, RmsNormAndPerHead) {
  DF_REQUIRE_GPU();
  for (int64_t cols : {64, 384, 5120}) {
    compare([&](Backend& b) -> Outputs {
      auto x = put_f32(b, randn(7 * cols, 1, 3.0f), cols);
      auto w = put_f32(b, randn(cols, 2), cols);
      auto y = put_f32(b, std::vector<float>(7 * cols), cols);
      b.rms_norm(x.t, w.t, 1e-6f, y.t);
      b.rms_norm(x.t.reshape(32), w.t.slice_cols(0, 32), 1e-6f, x.t.reshape(32));  // in place, per head
      return {get_f32(b, y.t), get_f32(b, x.t)};
    }, 1e-10, "rms_norm " + std::to_string(cols));
  }
}

TEST(CudaOps, MatmulTypesAndRowCounts) {
  DF_REQUIRE_GPU();
  struct Case { GgmlType t; double budget; };
  // n > 16 rows go through the tensor-core GEMM (gemm/gemm.cuh): x and float weights are
  // rounded to f16 (relative 2^-11), so the float formats' budget there is 1e-6.
  const Case cases[] = {{GgmlType::F32, 1e-10}, {GgmlType::F16, 1e-6}, {GgmlType::BF16, 1e-4},
                        {GgmlType::Q8_0, 1e-4}, {GgmlType::Q4_0, 1e-4}, {GgmlType::Q4_1, 1e-4},
                        {GgmlType::Q5_0, 1e-4}, {GgmlType::Q5_1, 1e-4}, {GgmlType::Q4_K, 1e-4},
                        {GgmlType::Q6_K, 1e-4}, {GgmlType::Q2_K, 1e-3}};
  const int64_t k = 256, m = 200;
  for (const Case& c : cases) {
    std::vector<uint8_t> wq(row_bytes(c.t, k) * m);
    const auto wf = randn(static_cast<size_t>(k * m), 7);
    for (int64_t r = 0; r < m; ++r)
      cpu::quantize_row_ref(c.t, wf.data() + r * k, wq.data() + row_bytes(c.t, k) * r, k);
    for (int64_t n : {1, 2, 5, 8, 9, 16, 17, 70, 300}) {
      const double budget = n > 16 ? std::max(c.budget, 1e-6) : c.budget;
      compare([&](Backend& b) -> Outputs {
        const Tensor W = b.weight(c.t, k, m, wq.data());
        auto x = put_f32(b, randn(static_cast<size_t>(n * k), 11 + n), k);
        auto y = put_f32(b, std::vector<float>(n * m, NAN), m);
        b.matmul(W, x.t, y.t);
        return {get_f32(b, y.t)};
      }, budget, std::string(type_name(c.t)) + " n=" + std::to_string(n));
    }
  }
}

TEST(CudaOps, GetRows) {
  DF_REQUIRE_GPU();
  const int64_t cols = 256, rows = 50;
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q5_1,
                     GgmlType::Q4_K, GgmlType::Q6_K}) {
    std::vector<uint8_t> wq(row_bytes(t, cols) * rows);
    const auto wf = randn(static_cast<size_t>(cols * rows), 3);
    for (int64_t r = 0; r < rows; ++r)
      cpu::quantize_row_ref(t, wf.data() + r * cols, wq.data() + row_bytes(t, cols) * r, cols);
    const std::vector<int32_t> ids = {3, 0, 49, 3, 17};
    compare([&](Backend& b) -> Outputs {
      const Tensor table = b.weight(t, cols, rows, wq.data());
      auto out = put_f32(b, std::vector<float>(ids.size() * cols), cols);
      b.get_rows(table, put_i32(b, ids).t, out.t);
      return {get_f32(b, out.t)};
    }, 0.0, std::string("get_rows ") + std::string(type_name(t)));  // dequantization is exact
  }
}

TEST(CudaOps, RopePartialRotary) {
  DF_REQUIRE_GPU();
  for (int32_t n_rot : {64, 32}) {
    compare([&](Backend& b) -> Outputs {
      auto x = put_f32(b, randn(5 * 4 * 64, 4), 4 * 64);
      RopeParams rp;
      rp.n_head = 4, rp.head_dim = 64, rp.n_rot = n_rot, rp.freq_base = 1e6f;
      b.rope(x.t, positions(b, 1000, 5).t, rp);
      return {get_f32(b, x.t)};
    }, 1e-10, "rope n_rot=" + std::to_string(n_rot));
  }
}

TEST(CudaOps, RopeSections) {
  DF_REQUIRE_GPU();
  // IMROPE text sections: the same table on both backends (pairs of section 3 keep their
  // values), and on the GPU those pairs bit-equal to the input.
  RopeParams rp;
  rp.n_head = 2, rp.head_dim = 64, rp.n_rot = 32, rp.freq_base = 1e4f;
  rp.sections[0] = 2, rp.sections[1] = 2, rp.sections[2] = 2, rp.sections[3] = 2;
  const auto in = randn(3 * 2 * 64, 6);
  compare([&](Backend& b) -> Outputs {
    auto x = put_f32(b, in, 2 * 64);
    b.rope(x.t, positions(b, 40, 3).t, rp);
    return {get_f32(b, x.t)};
  }, 1e-10, "rope sections");
  cuda::CudaBackend& g = *gpu();
  auto x = put_f32(g, in, 2 * 64);
  g.rope(x.t, positions(g, 40, 3).t, rp);
  const auto got = get_f32(g, x.t);
  for (int r = 0; r < 3; ++r)
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < 16; ++i) {
        const int sector = i % 8;
        if (sector < 6) continue;  // sectors 6, 7: section 3 (3 * 2 = 6 <= sector)
        for (int d : {i, i + 16}) EXPECT_EQ(got[r * 128 + h * 64 + d], in[r * 128 + h * 64 + d]) << "pair " << i;
      }
}

// Fills the cache with `filled` positions, then attends n rows at positions filled - n ...
void attention_case(int32_t n_head, int32_t n_kv, int32_t hd, int64_t n_ctx, int64_t filled, int64_t n) {
  compare([&](Backend& b) -> Outputs {
    const int64_t kv = static_cast<int64_t>(n_kv) * hd, qd = static_cast<int64_t>(n_head) * hd;
    KvCache c = b.alloc_kv_cache(n_ctx, kv, GgmlType::F16);
    auto k = put_f32(b, randn(static_cast<size_t>(filled * kv), 21), kv);
    auto v = put_f32(b, randn(static_cast<size_t>(filled * kv), 22), kv);
    b.kv_store(c, k.t, v.t, positions(b, 0, filled).t);
    auto q = put_f32(b, randn(static_cast<size_t>(n * qd), 23, 2.0f), qd);
    auto out = put_f32(b, std::vector<float>(n * qd, NAN), qd);
    AttentionParams p{n_head, n_kv, hd, 1.0f / std::sqrt(static_cast<float>(hd))};
    b.attention(q.t, c, positions(b, filled - n, n).t, p, out.t);
    return {get_f32(b, out.t)};
  }, 1e-5, "attention heads " + std::to_string(n_head) + "/" + std::to_string(n_kv) + " hd " + std::to_string(hd) +
               " ctx " + std::to_string(n_ctx) + " filled " + std::to_string(filled) + " n " + std::to_string(n));
}

TEST(CudaOps, AttentionDecodeAndRows) {
  DF_REQUIRE_GPU();
  attention_case(6, 2, 64, 1024, 1, 1);       // first token
  attention_case(6, 2, 64, 1024, 700, 1);     // decode, several slices
  attention_case(8, 8, 128, 4096, 3000, 1);   // long context, many slices
  attention_case(4, 1, 256, 600, 37, 5);      // short verify batch
  attention_case(6, 2, 64, 512, 300, 70);     // prefill chunk (causal rows): flash_prefill
  attention_case(2, 2, 32, 64, 64, 64);       // full cache (head size 32: the decode kernel)
  attention_case(8, 2, 128, 1024, 200, 200);  // prefill from position 0, 4 row tiles (last partial)
  attention_case(4, 1, 256, 512, 330, 130);   // head size 256, prefill after a cached prefix
  attention_case(6, 6, 64, 256, 17, 17);      // smallest prefill batch
}

TEST(CudaOps, Elementwise) {
  DF_REQUIRE_GPU();
  const int64_t cols = 300, rows = 9;
  compare([&](Backend& b) -> Outputs {
    auto g = put_f32(b, randn(rows * cols, 31, 3.0f), cols);
    auto u = put_f32(b, randn(rows * cols, 32), cols);
    auto o = put_f32(b, std::vector<float>(rows * cols), cols);
    b.swiglu(g.t, u.t, o.t);
    auto s = put_f32(b, randn(rows * cols, 33), cols);
    b.sigmoid_mul(g.t, u.t, s.t);
    auto a = put_f32(b, randn(rows * cols, 34), cols);
    b.add(a.t, u.t);
    auto y1 = put_f32(b, std::vector<float>(rows * cols), cols);
    auto y2 = put_f32(b, std::vector<float>(rows * cols), cols);
    auto y3 = put_f32(b, std::vector<float>(rows * cols), cols);
    b.unary(UnaryOp::SILU, g.t, y1.t);
    b.unary(UnaryOp::SIGMOID, g.t, y2.t);
    auto big = put_f32(b, randn(rows * cols, 35, 15.0f), cols);  // softplus's linear branch too
    b.unary(UnaryOp::SOFTPLUS, big.t, y3.t);
    auto bias = put_f32(b, randn(cols, 36), cols), scale = put_f32(b, randn(cols, 37), cols);
    auto sp = put_f32(b, std::vector<float>(rows * cols), cols);
    b.softplus_scale(g.t, bias.t, scale.t, sp.t);
    // strided copy: the odd 50-column halves of 100-column rows
    auto src = put_f32(b, randn(rows * 100, 38), 100);
    auto dst = put_f32(b, std::vector<float>(rows * 2 * 50), 50);
    Tensor half = src.t;
    half.data = static_cast<float*>(src.t.data) + 50;
    half.cols = 50;
    b.copy(half, dst.t.slice_rows(0, rows));
    return {get_f32(b, o.t), get_f32(b, s.t), get_f32(b, a.t), get_f32(b, y1.t), get_f32(b, y2.t),
            get_f32(b, y3.t), get_f32(b, sp.t), get_f32(b, dst.t)};
  }, 1e-10, "elementwise");
}

TEST(CudaOps, L2NormStridedView) {
  DF_REQUIRE_GPU();
  compare([&](Backend& b) -> Outputs {
    auto x = put_f32(b, randn(6 * 3 * 128, 41), 3 * 128);
    const Tensor k = x.t.slice_cols(128, 256);  // columns [128, 384): two groups of 128
    b.l2_norm(k, 128, 1e-6f, k);
    return {get_f32(b, x.t)};
  }, 1e-10, "l2_norm");
}

TEST(CudaOps, SsmConvWithState) {
  DF_REQUIRE_GPU();
  for (int64_t n : {1, 6}) {
    for (int64_t K : {4, 3}) {
      const int64_t C = 200;
      compare([&](Backend& b) -> Outputs {
        auto x = put_f32(b, randn(n * (C + 8), 51), C + 8);  // strided view: C of C+8 columns
        auto st = put_f32(b, randn((K - 1) * C, 52), C);
        auto w = put_f32(b, randn(C * K, 53), K);
        auto y = put_f32(b, std::vector<float>(n * C), C);
        auto snap = put_f32(b, std::vector<float>(4 * (K - 1) * C, NAN), C);  // 4 slots
        b.ssm_conv(x.t.slice_cols(8, C), st.t, w.t, y.t, Tensor{});
        b.ssm_conv(x.t.slice_cols(8, C), st.t, w.t, y.t, snap.t);  // again: the carried state
        auto s = get_f32(b, snap.t);
        s.resize(static_cast<size_t>(std::min<int64_t>(n, 4) * (K - 1) * C));  // slots written
        return {get_f32(b, y.t), get_f32(b, st.t), s};
      }, 1e-10, "ssm_conv n=" + std::to_string(n) + " K=" + std::to_string(K));
    }
  }
}

TEST(CudaOps, GatedDeltaRule) {
  DF_REQUIRE_GPU();
  struct Case { int64_t d, Hk, Hv, n; };
  for (const Case& c : {Case{64, 2, 4, 1}, Case{64, 6, 6, 7}, Case{128, 2, 6, 3}, Case{128, 1, 2, 1}}) {
    compare([&](Backend& b) -> Outputs {
      const int64_t kd = c.Hk * c.d, vd = c.Hv * c.d;
      auto qkv = put_f32(b, randn(c.n * (2 * kd + vd), 61), 2 * kd + vd);
      const Tensor q = qkv.t.slice_cols(0, kd), k = qkv.t.slice_cols(kd, kd), v = qkv.t.slice_cols(2 * kd, vd);
      b.l2_norm(q, c.d, 1e-6f, q);
      b.l2_norm(k, c.d, 1e-6f, k);
      auto gate = put_f32(b, randn(c.n * c.Hv, 62), c.Hv);
      b.softplus_scale(gate.t, put_f32(b, randn(c.Hv, 63), c.Hv).t, put_f32(b, std::vector<float>(c.Hv, -0.5f), c.Hv).t,
                       gate.t);
      auto beta = put_f32(b, randn(c.n * c.Hv, 64), c.Hv);
      b.unary(UnaryOp::SIGMOID, beta.t, beta.t);
      auto st = put_f32(b, randn(c.Hv * c.d * c.d, 65, 0.1f), c.d);
      auto out = put_f32(b, std::vector<float>(c.n * vd), vd);
      const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
      auto snap = put_f32(b, std::vector<float>(3 * vd * c.d, NAN), c.d);  // 3 slots
      b.gated_delta_rule(q, k, v, gate.t, beta.t, st.t, scale, out.t, Tensor{});
      b.gated_delta_rule(q, k, v, gate.t, beta.t, st.t, scale, out.t, snap.t);
      auto s = get_f32(b, snap.t);
      s.resize(static_cast<size_t>(std::min<int64_t>(c.n, 3) * vd * c.d));
      return {get_f32(b, out.t), get_f32(b, st.t), s};
    }, 1e-9, "gated_delta_rule d=" + std::to_string(c.d) + " n=" + std::to_string(c.n));
  }
}

// Prefill lengths through the backend (one chunk of 64, several, ending mid-chunk; with
// snapshots), the output of every row and the state left.
TEST(CudaOps, GatedDeltaRuleLong) {
  DF_REQUIRE_GPU();
  struct Case { int64_t d, Hk, Hv, n; bool snap; };
  for (const Case& c : {Case{128, 2, 6, 150, false}, Case{64, 3, 6, 64, false}, Case{32, 1, 2, 17, false},
                        Case{128, 1, 2, 200, false}, Case{64, 2, 4, 40, true}}) {
    compare([&](Backend& b) -> Outputs {
      const int64_t kd = c.Hk * c.d, vd = c.Hv * c.d;
      auto qkv = put_f32(b, randn(c.n * (2 * kd + vd), 71), 2 * kd + vd);
      const Tensor q = qkv.t.slice_cols(0, kd), k = qkv.t.slice_cols(kd, kd), v = qkv.t.slice_cols(2 * kd, vd);
      b.l2_norm(q, c.d, 1e-6f, q);
      b.l2_norm(k, c.d, 1e-6f, k);
      auto gate = put_f32(b, randn(c.n * c.Hv, 72), c.Hv);
      b.softplus_scale(gate.t, put_f32(b, randn(c.Hv, 73), c.Hv).t, put_f32(b, std::vector<float>(c.Hv, -0.5f), c.Hv).t,
                       gate.t);
      auto beta = put_f32(b, randn(c.n * c.Hv, 74), c.Hv);
      b.unary(UnaryOp::SIGMOID, beta.t, beta.t);
      auto st = put_f32(b, randn(c.Hv * c.d * c.d, 75, 0.1f), c.d);
      auto out = put_f32(b, std::vector<float>(c.n * vd, NAN), vd);
      const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
      auto snap = put_f32(b, std::vector<float>(3 * vd * c.d, NAN), c.d);  // 3 slots
      b.gated_delta_rule(q, k, v, gate.t, beta.t, st.t, scale, out.t, c.snap ? snap.t : Tensor{});
      Outputs o = {get_f32(b, out.t), get_f32(b, st.t)};
      if (c.snap) o.push_back(get_f32(b, snap.t));
      return o;
    }, 1e-9, "gated_delta_rule d=" + std::to_string(c.d) + " n=" + std::to_string(c.n) + (c.snap ? " snapshots" : ""));
  }
}

// The chunk-parallel kernel (not dispatched: slower than the token kernel on the H200, see
// cuda_backend.cu) against the token kernel on the same inputs: one chunk, several, ending
// mid-chunk, head sizes 32..128; then every lanes-per-row variant of the token kernel against
// the chunked one. Budget 1e-8: the same f32 terms summed in another order.
TEST(CudaOps, GatedDeltaRuleChunkedKernel) {
  DF_REQUIRE_GPU();
  struct Case { int64_t d, Hk, Hv, n; };
  for (const Case& c : {Case{128, 2, 6, 150}, Case{64, 3, 6, 64}, Case{32, 1, 2, 17}, Case{128, 1, 2, 200}}) {
    Backend& b = *gpu();
    const int64_t kd = c.Hk * c.d, vd = c.Hv * c.d;
    auto qkv = put_f32(b, randn(c.n * (2 * kd + vd), 81), 2 * kd + vd);
    const Tensor q = qkv.t.slice_cols(0, kd), k = qkv.t.slice_cols(kd, kd), v = qkv.t.slice_cols(2 * kd, vd);
    b.l2_norm(q, c.d, 1e-6f, q);
    b.l2_norm(k, c.d, 1e-6f, k);
    auto gate = put_f32(b, randn(c.n * c.Hv, 82), c.Hv);
    b.softplus_scale(gate.t, put_f32(b, randn(c.Hv, 83), c.Hv).t, put_f32(b, std::vector<float>(c.Hv, -0.5f), c.Hv).t,
                     gate.t);
    auto beta = put_f32(b, randn(c.n * c.Hv, 84), c.Hv);
    b.unary(UnaryOp::SIGMOID, beta.t, beta.t);
    const auto st0 = randn(c.Hv * c.d * c.d, 85, 0.1f);
    auto st1 = put_f32(b, st0, c.d), st2 = put_f32(b, st0, c.d);
    auto out1 = put_f32(b, std::vector<float>(c.n * vd, NAN), vd), out2 = put_f32(b, std::vector<float>(c.n * vd, NAN), vd);
    b.synchronize();
    cuda::DeltaRuleArgs a;
    a.q = static_cast<float*>(q.data), a.q_stride = 2 * kd + vd;
    a.k = static_cast<float*>(k.data), a.k_stride = 2 * kd + vd;
    a.v = static_cast<float*>(v.data), a.v_stride = 2 * kd + vd;
    a.g = static_cast<float*>(gate.t.data), a.g_stride = c.Hv;
    a.beta = static_cast<float*>(beta.t.data), a.beta_stride = c.Hv;
    a.out_stride = vd, a.n = c.n, a.d = static_cast<int32_t>(c.d);
    a.n_k_heads = static_cast<int32_t>(c.Hk), a.n_v_heads = static_cast<int32_t>(c.Hv);
    a.scale = 1.0f / std::sqrt(static_cast<float>(c.d));
    cuda::DeltaRuleArgs a1 = a, a2 = a;
    a1.state = static_cast<float*>(st1.t.data), a1.out = static_cast<float*>(out1.t.data);
    a2.state = static_cast<float*>(st2.t.data), a2.out = static_cast<float*>(out2.t.data);
    cuda::launch_gated_delta_rule_chunked(a1, nullptr);
    cuda::launch_gated_delta_rule(a2, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::string what = "chunked d=" + std::to_string(c.d) + " n=" + std::to_string(c.n);
    EXPECT_LE(nerr(get_f32(b, out2.t), get_f32(b, out1.t)), 1e-8) << what << ": outputs";
    EXPECT_LE(nerr(get_f32(b, st2.t), get_f32(b, st1.t)), 1e-8) << what << ": state";
    for (int lanes : {32, 16, 8, 4}) {  // every lanes-per-row variant of the token kernel
      auto st3 = put_f32(b, st0, c.d);
      auto out3 = put_f32(b, std::vector<float>(c.n * vd, NAN), vd);
      b.synchronize();
      cuda::DeltaRuleArgs a3 = a;
      a3.state = static_cast<float*>(st3.t.data), a3.out = static_cast<float*>(out3.t.data);
      if (!cuda::launch_gated_delta_rule_lanes(a3, lanes, nullptr)) continue;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::string w3 = what + " token kernel, " + std::to_string(lanes) + " lanes a row";
      EXPECT_LE(nerr(get_f32(b, out3.t), get_f32(b, out1.t)), 1e-8) << w3 << ": outputs";
      EXPECT_LE(nerr(get_f32(b, st3.t), get_f32(b, st1.t)), 1e-8) << w3 << ": state";
    }
  }
}

TEST(CudaOps, ArgmaxLowestIndexWins) {
  DF_REQUIRE_GPU();
  cuda::CudaBackend& g = *gpu();
  const int64_t V = 248320, rows = 3;
  auto x = randn(static_cast<size_t>(V * rows), 71);
  x[5000] = 100.0f, x[7000] = 100.0f;                     // row 0: a tie, 5000 wins
  x[V + V - 1] = 50.0f;                                   // row 1: the last column
  auto t = put_f32(g, x, V);
  std::vector<int32_t> init(rows, -1);
  auto out = put(g, GgmlType::I32, 1, rows, init.data());
  g.argmax(t.t, out.t);
  std::vector<int32_t> got(rows);
  g.download(out.t, got.data(), got.size() * sizeof(int32_t));
  EXPECT_EQ(got[0], 5000);
  EXPECT_EQ(got[1], V - 1);
  EXPECT_EQ(got[2], static_cast<int32_t>(std::max_element(x.begin() + 2 * V, x.end()) - (x.begin() + 2 * V)));
}

// The lean small kernels (CudaOptions::lean_kernels: PDL launches, attention's merge in the
// slices' last block, argmax over many blocks) give the bits of the plain ones (no PDL, the
// merge kernel, one argmax block), call after call (the tickets reset themselves).
TEST(CudaOps, LeanSmallKernelsAreThePlainBits) {
  DF_REQUIRE_GPU();
  cuda::CudaOptions o;
  o.lean_kernels = false;
  o.pdl = false;
  cuda::CudaBackend plain(o);
  struct Case {
    int32_t n_head, n_kv, hd;
    int64_t n_ctx, filled, n;
  };
  for (const Case& c : {Case{8, 8, 128, 4096, 3000, 1}, Case{6, 2, 64, 1024, 700, 8}, Case{4, 1, 256, 600, 37, 5},
                        Case{32, 8, 128, 4096, 257, 1}, Case{16, 4, 128, 8192, 8000, 3}}) {
    auto run = [&](Backend& b) {
      const int64_t kv = static_cast<int64_t>(c.n_kv) * c.hd, qd = static_cast<int64_t>(c.n_head) * c.hd;
      KvCache kc = b.alloc_kv_cache(c.n_ctx, kv, GgmlType::F16);
      auto k = put_f32(b, randn(static_cast<size_t>(c.filled * kv), 31), kv);
      auto v = put_f32(b, randn(static_cast<size_t>(c.filled * kv), 32), kv);
      b.kv_store(kc, k.t, v.t, positions(b, 0, c.filled).t);
      auto q = put_f32(b, randn(static_cast<size_t>(c.n * qd), 33, 2.0f), qd);
      auto out = put_f32(b, std::vector<float>(c.n * qd, NAN), qd);
      AttentionParams p{c.n_head, c.n_kv, c.hd, 1.0f / std::sqrt(static_cast<float>(c.hd))};
      std::vector<float> all;
      for (int64_t at : {c.filled - c.n, c.filled - c.n - 1, int64_t{0}}) {  // three calls, the tickets reused
        if (at < 0) continue;
        b.attention(q.t, kc, positions(b, at, c.n).t, p, out.t);
        const auto got = get_f32(b, out.t);
        all.insert(all.end(), got.begin(), got.end());
      }
      return all;
    };
    const auto lean = run(*gpu()), ref = run(plain);
    ASSERT_EQ(lean.size(), ref.size());
    EXPECT_EQ(0, std::memcmp(lean.data(), ref.data(), lean.size() * sizeof(float)))
        << "attention heads " << c.n_head << " hd " << c.hd << " ctx " << c.n_ctx << " filled " << c.filled
        << " rows " << c.n;
  }
  const int64_t V = 151936, rows = 5;
  auto x = randn(static_cast<size_t>(V * rows), 72);
  x[9000] = 80.0f, x[100000] = 80.0f;  // row 0: a tie across blocks: 9000 wins
  x[V + 150000] = 60.0f;               // row 1: in the last block
  x[2 * V] = 70.0f;                    // row 2: the first column
  for (Backend* b : {static_cast<Backend*>(gpu()), static_cast<Backend*>(&plain)}) {
    auto t = put_f32(*b, x, V);
    for (int rep = 0; rep < 2; ++rep) {
      std::vector<int32_t> init(rows, -1);
      auto out = put(*b, GgmlType::I32, 1, rows, init.data());
      b->argmax(t.t, out.t);
      std::vector<int32_t> got(rows);
      b->download(out.t, got.data(), got.size() * sizeof(int32_t));
      EXPECT_EQ(got[0], 9000);
      EXPECT_EQ(got[1], 150000);
      EXPECT_EQ(got[2], 0);
      for (int64_t r = 3; r < rows; ++r)
        EXPECT_EQ(got[r], static_cast<int32_t>(std::max_element(x.begin() + r * V, x.begin() + (r + 1) * V) -
                                               (x.begin() + r * V)));
    }
  }
}

// A decode-like sequence captured once and replayed at new positions gives what running
// the ops eagerly gives.
TEST(CudaOps, GraphReplayAtNewPositions) {
  DF_REQUIRE_GPU();
  cuda::CudaBackend& g = *gpu();
  const int32_t H = 4, Hk = 2, hd = 64;
  const int64_t kv = Hk * hd, qd = H * hd, n_ctx = 2048;
  AttentionParams p{H, Hk, hd, 0.125f};
  RopeParams rq, rk;
  rq.n_head = H, rq.head_dim = hd, rq.n_rot = hd;
  rk = rq;
  rk.n_head = Hk;
  auto run = [&](bool graph) {
    KvCache c = g.alloc_kv_cache(n_ctx, kv, GgmlType::F16);
    auto q = put_f32(g, std::vector<float>(qd), qd);
    auto k = put_f32(g, std::vector<float>(kv), kv);
    auto v = put_f32(g, std::vector<float>(kv), kv);
    auto out = put_f32(g, std::vector<float>(qd), qd);
    auto pos = positions(g, 0, 1);
    auto step = [&] {
      g.rope(q.t, pos.t, rq);
      g.rope(k.t, pos.t, rk);
      g.kv_store(c, k.t, v.t, pos.t);
      g.attention(q.t, c, pos.t, p, out.t);
    };
    std::unique_ptr<OpGraph> graph_exec;
    std::vector<float> all;
    for (int32_t t = 0; t < 600; ++t) {
      const auto qv = randn(qd, 100 + t), kvv = randn(kv, 2000 + t), vv = randn(kv, 4000 + t);
      g.upload(q.t, qv.data(), q.t.nbytes());
      g.upload(k.t, kvv.data(), k.t.nbytes());
      g.upload(v.t, vv.data(), v.t.nbytes());
      g.upload(pos.t, &t, sizeof t);
      if (!graph) {
        step();
      } else if (!graph_exec) {
        graph_exec = g.record(step);  // records and runs this step
        EXPECT_TRUE(graph_exec);
      } else {
        g.replay(*graph_exec);
      }
      if (t % 97 == 0 || t == 599) {
        const auto o = get_f32(g, out.t);
        all.insert(all.end(), o.begin(), o.end());
      }
    }
    return all;
  };
  const auto eager = run(false), replayed = run(true);
  EXPECT_EQ(eager, replayed);
}

// Decode and verify ops give row r the same bits whether the call has 1 row or up to 8.
TEST(CudaOps, RowCountIndependence) {
  DF_REQUIRE_GPU();
  cuda::CudaBackend& g = *gpu();
  const int64_t k = 512, m = 300, kvd = 2 * 128, qd = 8 * 128, n_ctx = 20000;
  std::vector<uint8_t> wq(row_bytes(GgmlType::Q4_K, k) * m);
  const auto wf = randn(static_cast<size_t>(k * m), 81);
  for (int64_t r = 0; r < m; ++r)
    cpu::quantize_row_ref(GgmlType::Q4_K, wf.data() + r * k, wq.data() + row_bytes(GgmlType::Q4_K, k) * r, k);
  const Tensor W = g.weight(GgmlType::Q4_K, k, m, wq.data());
  auto x = put_f32(g, randn(8 * k, 82), k);
  auto y8 = put_f32(g, std::vector<float>(8 * m), m), y1 = put_f32(g, std::vector<float>(m), m);
  g.matmul(W, x.t, y8.t);
  KvCache c = g.alloc_kv_cache(n_ctx, kvd, GgmlType::F16);
  auto kk = put_f32(g, randn(static_cast<size_t>(12000 * kvd), 83), kvd);
  auto vv = put_f32(g, randn(static_cast<size_t>(12000 * kvd), 84), kvd);
  g.kv_store(c, kk.t, vv.t, positions(g, 0, 12000).t);
  auto q = put_f32(g, randn(8 * qd, 85), qd);
  auto o8 = put_f32(g, std::vector<float>(8 * qd), qd), o1 = put_f32(g, std::vector<float>(qd), qd);
  AttentionParams p{8, 2, 128, 0.088f};
  g.attention(q.t, c, positions(g, 11992, 8).t, p, o8.t);
  const auto Y8 = get_f32(g, y8.t), O8 = get_f32(g, o8.t);
  for (int64_t r = 0; r < 8; ++r) {
    g.matmul(W, x.t.slice_rows(r, 1), y1.t);
    g.attention(q.t.slice_rows(r, 1), c, positions(g, 11992 + r, 1).t, p, o1.t);
    const auto Y1 = get_f32(g, y1.t), O1 = get_f32(g, o1.t);
    EXPECT_TRUE(std::equal(Y1.begin(), Y1.end(), Y8.begin() + r * m)) << "matmul row " << r;
    EXPECT_TRUE(std::equal(O1.begin(), O1.end(), O8.begin() + r * qd)) << "attention row " << r;
  }
}

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
