// The tensor-core chunked gated delta rule (ops/delta_rule_chunked_tc.cuh; the DeltaNet prefill
// with CudaOptions::gdn_prefill 2 / 3) against the CPU reference (SCALAR kernels), nerr =
// mse / mean square of the reference, for the outputs of every row and the state left:
// lengths 1, 63, 64, 65, 200, 512 (one chunk, a chunk and a row, several, ending mid-chunk),
// head sizes 32, 64, 128 and the 35B-A3B's 16 / 32 heads of 128, every state slice of the
// sequential kernel, a sequence carried over several calls, and delta_net_core over three
// sequences in one call (the model's path, through the backend's dispatch); and the conv's
// tiled prefill kernel against its token loop (the same bits).
// Budgets: tf32 operands (relative 2^-11 each) 1e-6, the tensor-core GEMM's budget for f16
// operands (an emulation of this decomposition with tf32 rounding gave 1.5e-7 .. 1.9e-7 at
// d 128, 63..512 rows); 3xTF32 (hi + lo pairs, near-f32 products) 1e-9, the token kernel's
// budget in test_cuda_ops.cpp (the emulation with f32 products: < 1e-12).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "../unit/op_test_util.h"
#include "backend/cuda/ops/delta_rule_chunked_tc.cuh"
#include "cuda_test_util.h"

namespace df::cudatest {
namespace {

using optest::nerr;
using optest::randn;
using Outputs = std::vector<std::vector<float>>;

double budget(bool split) { return split ? 1e-9 : 1e-6; }

struct Rule {
  int64_t d, Hk, Hv, n;
  std::string name() const {
    std::string s = "d";
    s += std::to_string(d) + " Hk" + std::to_string(Hk) + " Hv" + std::to_string(Hv) + " n" + std::to_string(n);
    return s;
  }
};

// Inputs as the model feeds them: q, k l2-normalised per head, g a log decay, beta in (0, 1).
struct RuleInputs {
  std::vector<float> qkv, g, beta, state;
};
RuleInputs make_inputs(const Rule& r, uint32_t seed) {
  const int64_t kd = r.Hk * r.d, C = 2 * kd + r.Hv * r.d;
  RuleInputs in;
  in.qkv = randn(static_cast<size_t>(r.n * C), seed);
  for (int64_t t = 0; t < r.n; ++t)
    for (int64_t h = 0; h < 2 * r.Hk; ++h) {  // the q heads, then the k heads
      float* x = in.qkv.data() + t * C + h * r.d;
      double s = 0;
      for (int64_t i = 0; i < r.d; ++i) s += static_cast<double>(x[i]) * x[i];
      for (int64_t i = 0; i < r.d; ++i) x[i] = static_cast<float>(x[i] / std::sqrt(s + 1e-12));
    }
  in.g = randn(static_cast<size_t>(r.n * r.Hv), seed + 1);
  for (float& e : in.g) e = -0.5f * std::log1p(std::exp(e - 0.5f));  // -softplus / 2
  in.beta = randn(static_cast<size_t>(r.n * r.Hv), seed + 2);
  for (float& e : in.beta) e = 1.0f / (1.0f + std::exp(-e));
  in.state = randn(static_cast<size_t>(r.Hv * r.d * r.d), seed + 3, 0.1f);
  return in;
}

// The CPU reference: out [n, Hv d] and the state after the n rows, from rows [r0, r0 + n) of
// the inputs (the state given, or in.state).
Outputs cpu_rule(const Rule& r, const RuleInputs& in) {
  Backend& b = cpu_ref();
  const int64_t kd = r.Hk * r.d, vd = r.Hv * r.d, C = 2 * kd + vd;
  auto qkv = put_f32(b, in.qkv, C);
  auto g = put_f32(b, in.g, r.Hv), beta = put_f32(b, in.beta, r.Hv), st = put_f32(b, in.state, r.d);
  auto out = put_f32(b, std::vector<float>(static_cast<size_t>(r.n * vd)), vd);
  b.gated_delta_rule(qkv.t.slice_cols(0, kd), qkv.t.slice_cols(kd, kd), qkv.t.slice_cols(2 * kd, vd), g.t, beta.t,
                     st.t, 1.0f / std::sqrt(static_cast<float>(r.d)), out.t, Tensor{});
  return {get_f32(b, out.t), get_f32(b, st.t)};
}

struct DevScratch {
  void* p = nullptr;
  explicit DevScratch(size_t bytes) { EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess); }
  ~DevScratch() { cudaFree(p); }
};

// The launcher on the GPU over the rows split into calls of `parts` rows (the state carried).
Outputs gpu_rule(const Rule& r, const RuleInputs& in, bool split, int bv, const std::vector<int64_t>& parts) {
  cuda::CudaBackend& b = *gpu();
  const int64_t kd = r.Hk * r.d, vd = r.Hv * r.d, C = 2 * kd + vd;
  auto qkv = put_f32(b, in.qkv, C);
  auto g = put_f32(b, in.g, r.Hv), beta = put_f32(b, in.beta, r.Hv), st = put_f32(b, in.state, r.d);
  auto out = put_f32(b, std::vector<float>(static_cast<size_t>(r.n * vd), NAN), vd);
  b.synchronize();
  int64_t r0 = 0;
  for (int64_t rows : parts) {
    DevScratch scratch(cuda::delta_rule_chunked_tc_scratch_bytes(rows, static_cast<int32_t>(r.Hv),
                                                                 static_cast<int32_t>(r.d)));
    auto* base = static_cast<float*>(qkv.t.data) + r0 * C;
    cuda::DeltaRuleArgs a;
    a.q = base, a.q_stride = C, a.k = base + kd, a.k_stride = C, a.v = base + 2 * kd, a.v_stride = C;
    a.g = static_cast<float*>(g.t.data) + r0 * r.Hv, a.g_stride = r.Hv;
    a.beta = static_cast<float*>(beta.t.data) + r0 * r.Hv, a.beta_stride = r.Hv;
    a.state = static_cast<float*>(st.t.data);
    a.out = static_cast<float*>(out.t.data) + r0 * vd, a.out_stride = vd;
    a.n = rows, a.d = static_cast<int32_t>(r.d);
    a.n_k_heads = static_cast<int32_t>(r.Hk), a.n_v_heads = static_cast<int32_t>(r.Hv);
    a.scale = 1.0f / std::sqrt(static_cast<float>(r.d));
    EXPECT_TRUE(cuda::delta_rule_chunked_tc_supported(a)) << r.name();
    cuda::launch_gated_delta_rule_chunked_tc(a, scratch.p, split, bv, nullptr);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << r.name();
    r0 += rows;
  }
  return {get_f32(b, out.t), get_f32(b, st.t)};
}

void expect_close(const Outputs& ref, const Outputs& got, double bud, const std::string& what) {
  ASSERT_EQ(ref.size(), got.size());
  const char* names[] = {"outputs", "state"};
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_EQ(ref[i].size(), got[i].size()) << what;
    for (float v : got[i]) ASSERT_TRUE(std::isfinite(v)) << what << ": " << names[i] << " not finite";
    const double e = nerr(ref[i], got[i]);
    EXPECT_LE(e, bud) << what << ": " << names[i];
    std::printf("  %-44s %-7s nerr %.3g\n", what.c_str(), names[i], e);
  }
}

TEST(CudaGdnChunked, KernelMatchesCpuAtEveryLength) {
  DF_REQUIRE_GPU();
  for (const Rule& shape : {Rule{128, 2, 4, 0}, Rule{64, 2, 4, 0}, Rule{32, 1, 2, 0}}) {
    for (int64_t n : {1, 63, 64, 65, 200, 512}) {
      Rule r = shape;
      r.n = n;
      const RuleInputs in = make_inputs(r, 900 + static_cast<uint32_t>(n));
      const Outputs ref = cpu_rule(r, in);
      for (bool split : {false, true})
        expect_close(ref, gpu_rule(r, in, split, 0, {n}), budget(split),
                     r.name() + (split ? " 3xtf32" : " tf32"));
    }
  }
}

// The 35B-A3B's heads (16 key / 32 value heads of 128) at 512 rows, and every state slice.
TEST(CudaGdnChunked, RealHeadsAndEverySlice) {
  DF_REQUIRE_GPU();
  const Rule r{128, 16, 32, 512};
  const RuleInputs in = make_inputs(r, 950);
  const Outputs ref = cpu_rule(r, in);
  for (bool split : {false, true})
    for (int bv : {16, 32, 64})
      expect_close(ref, gpu_rule(r, in, split, bv, {r.n}), budget(split),
                   r.name() + " slice " + std::to_string(bv) + (split ? " 3xtf32" : " tf32"));
  const Rule r64{64, 2, 4, 200};
  const RuleInputs in64 = make_inputs(r64, 951);
  const Outputs ref64 = cpu_rule(r64, in64);
  for (int bv : {16, 32, 64})
    expect_close(ref64, gpu_rule(r64, in64, false, bv, {r64.n}), budget(false),
                 r64.name() + " slice " + std::to_string(bv) + " tf32");
}

// One sequence over several calls: the state each call leaves is the next one's.
TEST(CudaGdnChunked, StateCarriesOverCalls) {
  DF_REQUIRE_GPU();
  const Rule r{128, 2, 4, 300};
  const RuleInputs in = make_inputs(r, 960);
  const Outputs ref = cpu_rule(r, in);
  for (bool split : {false, true})
    expect_close(ref, gpu_rule(r, in, split, 0, {130, 64, 1, 105}), budget(split),
                 r.name() + " in calls of 130, 64, 1, 105" + (split ? " 3xtf32" : " tf32"));
}

// delta_net_core over three sequences in one call (65, 200 and 17 rows, each its own state)
// on a backend with CudaOptions::gdn_prefill 2 and 3: the dispatch takes the chunked kernel
// for each sequence (more than 16 rows), the other ops are the default's.
Outputs run_core(Backend& b, int64_t d, int64_t Hk, int64_t Hv, const std::vector<int64_t>& lens) {
  int64_t n = 0;
  for (int64_t l : lens) n += l;
  const int64_t C = 2 * Hk * d + Hv * d, vd = Hv * d, K = 4;
  auto qkv = put_f32(b, randn(static_cast<size_t>(n * C), 970, 1.5f), C);
  auto w = put_f32(b, randn(static_cast<size_t>(C * K), 971, 0.5f), K);
  auto conv = put_f32(b, std::vector<float>(static_cast<size_t>(n * C)), C);
  auto z = put_f32(b, randn(static_cast<size_t>(n * vd), 972, 2.0f), vd);
  auto bv = randn(static_cast<size_t>(n * Hv), 973), gv = randn(static_cast<size_t>(n * Hv), 974, 0.3f);
  for (float& e : bv) e = 1.0f / (1.0f + std::exp(-e));
  for (float& e : gv) e = -std::fabs(e);
  auto beta = put_f32(b, bv, Hv), g = put_f32(b, gv, Hv);
  auto norm = put_f32(b, randn(static_cast<size_t>(d), 975), d);
  auto o = put_f32(b, std::vector<float>(static_cast<size_t>(n * vd)), vd);
  std::vector<Held> cs, ss;
  DeltaNetCore a;
  a.qkv = qkv.t, a.conv_w = w.t, a.conv = conv.t, a.z = z.t, a.beta = beta.t, a.g = g.t, a.norm = norm.t, a.o = o.t;
  a.head_dim = d, a.n_k_heads = Hk, a.eps = 1e-6f;
  std::vector<DeltaNetSeq> seqs;
  int64_t r0 = 0;
  for (size_t i = 0; i < lens.size(); ++i) {
    cs.push_back(put_f32(b, randn(static_cast<size_t>((K - 1) * C), 980 + static_cast<uint32_t>(i)), C));
    ss.push_back(put_f32(b, randn(static_cast<size_t>(vd * d), 990 + static_cast<uint32_t>(i), 0.1f), d));
    DeltaNetSeq q;
    q.row0 = r0, q.n = lens[i], q.conv_state = cs.back().t, q.ssm_state = ss.back().t;
    seqs.push_back(q);
    r0 += lens[i];
  }
  b.delta_net_core(a, seqs);
  Outputs out = {get_f32(b, o.t)};
  for (const Held& s : ss) out.push_back(get_f32(b, s.t));
  return out;
}

TEST(CudaGdnChunked, DeltaNetCoreThreeSequences) {
  DF_REQUIRE_GPU();
  const std::vector<int64_t> lens = {65, 200, 17};
  const Outputs ref = run_core(cpu_ref(), 128, 2, 4, lens);
  for (int mode : {2, 3}) {
    cuda::CudaOptions o;
    o.gdn_prefill = mode;
    cuda::CudaBackend b(o);
    const Outputs got = run_core(b, 128, 2, 4, lens);
    ASSERT_EQ(ref.size(), got.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      const double e = nerr(ref[i], got[i]);
      const std::string what = std::string(mode == 3 ? "3xtf32" : "tf32") + (i == 0 ? " o" : " state of sequence ") +
                               (i == 0 ? "" : std::to_string(i - 1));
      EXPECT_LE(e, budget(mode == 3)) << what;
      std::printf("  delta_net_core 65+200+17 rows %-24s nerr %.3g\n", what.c_str(), e);
    }
  }
}

// The DeltaNet conv of more than 16 rows (ops/ssm_conv.cuh: tiles of 16 rows in parallel): the
// bits of the same rows in calls of at most 16 (the token loop, the state carried), output and
// state left, and within the f32 budget (1e-10) of the CPU.
TEST(CudaGdnChunked, ConvTilesAreTheTokenLoopBits) {
  DF_REQUIRE_GPU();
  cuda::CudaOptions o;
  o.gdn_prefill = 3;  // the tiles with gdn_prefill 1..3
  cuda::CudaBackend b(o);
  const int64_t C = 200;
  for (int64_t K : {4, 3, 2}) {
    for (int64_t n : {17, 200, 513}) {
      const auto xv = randn(static_cast<size_t>(n * (C + 8)), 60), sv = randn(static_cast<size_t>((K - 1) * C), 61),
                 wv = randn(static_cast<size_t>(C * K), 62);
      auto run = [&](Backend& be, int64_t step) {
        auto x = put_f32(be, xv, C + 8);  // a strided view: C of C + 8 columns
        auto st = put_f32(be, sv, C);
        auto w = put_f32(be, wv, K);
        auto y = put_f32(be, std::vector<float>(static_cast<size_t>(n * C), NAN), C);
        for (int64_t r = 0; r < n; r += step) {
          const int64_t m = std::min(step, n - r);
          be.ssm_conv(x.t.slice_cols(8, C).slice_rows(r, m), st.t, w.t, y.t.slice_rows(r, m), Tensor{});
        }
        return Outputs{get_f32(be, y.t), get_f32(be, st.t)};
      };
      const std::string what = "ssm_conv K=" + std::to_string(K) + " n=" + std::to_string(n);
      const Outputs tiles = run(b, n), loop = run(b, 16), ref = run(cpu_ref(), n), old = run(*gpu(), n);
      EXPECT_EQ(old[0], loop[0]) << what << ": gdn_prefill 0 (the token loop at any n)";
      for (size_t i = 0; i < 2; ++i) {
        EXPECT_EQ(tiles[i], loop[i]) << what << (i ? ": state" : ": output");
        EXPECT_LE(nerr(ref[i], tiles[i]), 1e-10) << what << (i ? ": state vs cpu" : ": output vs cpu");
      }
    }
  }
}

}  // namespace
}  // namespace df::cudatest
