// The fused Gated DeltaNet core (Backend::delta_net_core; cuda_delta_net.cu: conv + SILU + q/k
// l2 norms in one launch, the delta rule with the head norm and the silu(z) gate in the other):
// the bits of the six unfused CUDA launches (CudaOptions::lean_kernels = false and
// CudaOptions::fuse = false both run them), with and without snapshot slots, one or two
// sequences; row exactness (n rows in one call = n one-row calls, snapshot slot t = the state
// after row t); graph replay = eager (the per-head tickets reset themselves); against the CPU.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "../unit/op_test_util.h"
#include "cuda_test_util.h"

namespace df::cudatest {
namespace {

using optest::nerr;
using optest::randn;
using Outputs = std::vector<std::vector<float>>;

// The fused path is off by default (CudaOptions::fuse_deltanet: not yet run on a GPU): on here.
cuda::CudaBackend& fused_backend() {
  static cuda::CudaBackend b([] {
    cuda::CudaOptions o;
    o.fuse_deltanet = true;
    return o;
  }());
  return b;
}
cuda::CudaBackend& plain_small_kernels() {
  static cuda::CudaBackend b([] {
    cuda::CudaOptions o;
    o.lean_kernels = false;
    return o;
  }());
  return b;
}
cuda::CudaBackend& no_fuse() {
  static cuda::CudaBackend b([] {
    cuda::CudaOptions o;
    o.fuse = false;
    return o;
  }());
  return b;
}

struct Shape {
  int64_t d, Hk, Hv, K;
  std::string name() const {
    std::string s = "d";
    s += std::to_string(d) + " Hk" + std::to_string(Hk) + " Hv" + std::to_string(Hv) + " K" + std::to_string(K);
    return s;
  }
};
// qwen35 27B's (128, 16 key heads, 48 value heads, conv 4) and smaller ones of every head size.
const Shape kShapes[] = {{128, 16, 48, 4}, {64, 2, 4, 4}, {256, 1, 2, 3}, {32, 2, 6, 4}};
constexpr int64_t kSlots = 8;  // snapshot slots per sequence

// A call's segments: {sequence, first row, rows}, rows of one call contiguous.
using Call = std::vector<std::array<int64_t, 3>>;

// The layer's inputs on backend b (n rows, n_seq sequences with their own states, seeded),
// then delta_net_core once per call. Returns o, conv, then per sequence its conv and ssm
// states (and snapshot slots), then (after_each) sequence 0's conv and ssm states after each call.
Outputs run_core(Backend& b, const Shape& s, int64_t n, int n_seq, bool snaps, const std::vector<Call>& calls,
                 bool after_each = false) {
  const int64_t d = s.d, C = 2 * s.Hk * d + s.Hv * d, vd = s.Hv * d, K = s.K;
  auto qkv = put_f32(b, randn(static_cast<size_t>(n * C), 300, 1.5f), C);
  auto w = put_f32(b, randn(static_cast<size_t>(C * K), 301, 0.5f), K);
  auto conv = put_f32(b, std::vector<float>(static_cast<size_t>(n * C)), C);
  auto z = put_f32(b, randn(static_cast<size_t>(n * vd), 302, 2.0f), vd);
  auto bv = randn(static_cast<size_t>(n * s.Hv), 303), gv = randn(static_cast<size_t>(n * s.Hv), 304, 0.3f);
  for (float& e : bv) e = 1.0f / (1.0f + std::exp(-e));  // sigmoid
  for (float& e : gv) e = -std::fabs(e);                 // a log decay
  auto beta = put_f32(b, bv, s.Hv), g = put_f32(b, gv, s.Hv);
  auto norm = put_f32(b, randn(static_cast<size_t>(d), 305), d);
  auto o = put_f32(b, std::vector<float>(static_cast<size_t>(n * vd)), vd);
  std::vector<Held> cs, ss, csn, ssn;
  for (int i = 0; i < n_seq; ++i) {
    cs.push_back(put_f32(b, randn(static_cast<size_t>((K - 1) * C), 310 + i), C));
    ss.push_back(put_f32(b, randn(static_cast<size_t>(vd * d), 320 + i, 0.1f), d));
    if (snaps) {
      csn.push_back(put_f32(b, std::vector<float>(static_cast<size_t>(kSlots * (K - 1) * C)), C));
      ssn.push_back(put_f32(b, std::vector<float>(static_cast<size_t>(kSlots * vd * d)), d));
    }
  }
  Outputs after;
  for (const Call& call : calls) {
    const int64_t r0 = call.front()[1];
    int64_t rows = 0;
    for (const auto& seg : call) rows += seg[2];
    DeltaNetCore a;
    a.qkv = qkv.t.slice_rows(r0, rows), a.conv_w = w.t, a.conv = conv.t.slice_rows(r0, rows);
    a.z = z.t.slice_rows(r0, rows), a.beta = beta.t.slice_rows(r0, rows), a.g = g.t.slice_rows(r0, rows);
    a.norm = norm.t, a.o = o.t.slice_rows(r0, rows);
    a.head_dim = d, a.n_k_heads = s.Hk, a.eps = 1e-6f;
    std::vector<DeltaNetSeq> seqs;
    for (const auto& seg : call) {
      DeltaNetSeq q;
      q.row0 = seg[1] - r0, q.n = seg[2];
      q.conv_state = cs[static_cast<size_t>(seg[0])].t, q.ssm_state = ss[static_cast<size_t>(seg[0])].t;
      if (snaps) q.conv_snap = csn[static_cast<size_t>(seg[0])].t, q.ssm_snap = ssn[static_cast<size_t>(seg[0])].t;
      seqs.push_back(q);
    }
    b.delta_net_core(a, seqs);
    if (after_each) after.push_back(get_f32(b, cs[0].t)), after.push_back(get_f32(b, ss[0].t));
  }
  Outputs out = {get_f32(b, o.t), get_f32(b, conv.t)};
  for (int i = 0; i < n_seq; ++i) {
    out.push_back(get_f32(b, cs[static_cast<size_t>(i)].t));
    out.push_back(get_f32(b, ss[static_cast<size_t>(i)].t));
    if (snaps) {
      out.push_back(get_f32(b, csn[static_cast<size_t>(i)].t));
      out.push_back(get_f32(b, ssn[static_cast<size_t>(i)].t));
    }
  }
  out.insert(out.end(), after.begin(), after.end());
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// n rows of one sequence in one call, or of two sequences (rows [0, n0) and [n0, n)).
std::vector<Call> one_call(int64_t n, int64_t n0 = 0) {
  if (n0 == 0) return {Call{{0, 0, n}}};
  return {Call{{0, 0, n0}, {1, n0, n - n0}}};
}

TEST(CudaDeltaNet, FusedCoreIsTheUnfusedBits) {
  DF_REQUIRE_GPU();
  struct Case { int64_t n, n0; bool snaps; };
  for (const Shape& s : kShapes)
    for (const Case& c : {Case{1, 0, false}, Case{1, 0, true}, Case{3, 0, false}, Case{3, 0, true}, Case{8, 0, false},
                          Case{8, 0, true}, Case{8, 3, true}, Case{5, 1, false}}) {
      const int n_seq = c.n0 ? 2 : 1;
      const std::string what = s.name() + " n=" + std::to_string(c.n) + (c.n0 ? " two sequences" : "") +
                               (c.snaps ? " snapshots" : "");
      const Outputs fused = run_core(fused_backend(), s, c.n, n_seq, c.snaps, one_call(c.n, c.n0));
      const Outputs plain = run_core(plain_small_kernels(), s, c.n, n_seq, c.snaps, one_call(c.n, c.n0));
      const Outputs unfused = run_core(no_fuse(), s, c.n, n_seq, c.snaps, one_call(c.n, c.n0));
      ASSERT_EQ(fused.size(), plain.size());
      for (size_t i = 0; i < fused.size(); ++i) {
        for (float v : fused[i]) ASSERT_TRUE(std::isfinite(v)) << what << ": output " << i;
        EXPECT_TRUE(same_bits(fused[i], plain[i])) << what << ": output " << i << " vs --plain-small-kernels";
        EXPECT_TRUE(same_bits(fused[i], unfused[i])) << what << ": output " << i << " vs --no-fuse";
      }
    }
}

// Against the CPU backend (its six ops): f32 arithmetic in another order and libm (the budget
// of plain f32 ops in test_cuda_ops.cpp is 1e-10; this chain of six ops over 8 tokens gets 1e-9).
TEST(CudaDeltaNet, FusedCoreMatchesCpu) {
  DF_REQUIRE_GPU();
  for (const Shape& s : kShapes)
    for (int64_t n : {1, 8}) {
      const Outputs want = run_core(cpu_ref(), s, n, 2, true, one_call(n, n / 2));
      const Outputs got = run_core(fused_backend(), s, n, 2, true, one_call(n, n / 2));
      ASSERT_EQ(want.size(), got.size());
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_LE(nerr(want[i], got[i]), 1e-9) << s.name() << " n=" << n << " output " << i;
    }
}

// Speculative verify: n rows in one call give the bits of n one-row calls (decode), and
// snapshot slot t holds the state after row t.
TEST(CudaDeltaNet, FusedCoreRowExact) {
  DF_REQUIRE_GPU();
  for (const Shape& s : kShapes)
    for (int64_t n : {2, 3, 8}) {
      std::vector<Call> steps;
      for (int64_t t = 0; t < n; ++t) steps.push_back(Call{{0, t, 1}});
      const std::string what = s.name() + " n=" + std::to_string(n);
      const Outputs all = run_core(fused_backend(), s, n, 1, true, one_call(n));  // o, conv, cs, ss, csn, ssn
      const Outputs one = run_core(fused_backend(), s, n, 1, false, steps, true);  // o, conv, cs, ss, then per step cs, ss
      ASSERT_EQ(all.size(), 6u);
      ASSERT_EQ(one.size(), 4u + 2u * static_cast<size_t>(n));
      for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(same_bits(all[i], one[i])) << what << ": output " << i;
      const size_t conv_slot = one[2].size(), ssm_slot = one[3].size();
      for (int64_t t = 0; t < n; ++t) {
        const size_t ti = static_cast<size_t>(t);
        const std::vector<float> cslot(all[4].begin() + ti * conv_slot, all[4].begin() + (ti + 1) * conv_slot);
        const std::vector<float> sslot(all[5].begin() + ti * ssm_slot, all[5].begin() + (ti + 1) * ssm_slot);
        EXPECT_TRUE(same_bits(cslot, one[4 + 2 * ti])) << what << ": conv snapshot " << t;
        EXPECT_TRUE(same_bits(sslot, one[5 + 2 * ti])) << what << ": ssm snapshot " << t;
      }
    }
}

// A one-row step captured once and replayed on new inputs gives the eager bits, step after
// step (the last block of each head resets its ticket: a stale one would skip the norm).
TEST(CudaDeltaNet, GraphReplayIsEager) {
  DF_REQUIRE_GPU();
  cuda::CudaBackend& b = fused_backend();
  const Shape s = kShapes[0];
  const int64_t d = s.d, C = 2 * s.Hk * d + s.Hv * d, vd = s.Hv * d, K = s.K;
  auto run = [&](bool graph) {
    auto qkv = put_f32(b, std::vector<float>(static_cast<size_t>(C)), C);
    auto w = put_f32(b, randn(static_cast<size_t>(C * K), 401, 0.5f), K);
    auto conv = put_f32(b, std::vector<float>(static_cast<size_t>(C)), C);
    auto z = put_f32(b, randn(static_cast<size_t>(vd), 402, 2.0f), vd);
    auto beta = put_f32(b, std::vector<float>(static_cast<size_t>(s.Hv), 0.6f), s.Hv);
    auto g = put_f32(b, std::vector<float>(static_cast<size_t>(s.Hv), -0.2f), s.Hv);
    auto norm = put_f32(b, randn(static_cast<size_t>(d), 403), d);
    auto o = put_f32(b, std::vector<float>(static_cast<size_t>(vd)), vd);
    auto cs = put_f32(b, randn(static_cast<size_t>((K - 1) * C), 404), C);
    auto ss = put_f32(b, randn(static_cast<size_t>(vd * d), 405, 0.1f), d);
    auto csn = put_f32(b, std::vector<float>(static_cast<size_t>((K - 1) * C)), C);
    auto ssn = put_f32(b, std::vector<float>(static_cast<size_t>(vd * d)), d);
    DeltaNetCore a;
    a.qkv = qkv.t, a.conv_w = w.t, a.conv = conv.t, a.z = z.t, a.beta = beta.t, a.g = g.t, a.norm = norm.t, a.o = o.t;
    a.head_dim = d, a.n_k_heads = s.Hk, a.eps = 1e-6f;
    DeltaNetSeq q;
    q.n = 1, q.conv_state = cs.t, q.ssm_state = ss.t, q.conv_snap = csn.t, q.ssm_snap = ssn.t;
    auto step = [&] { b.delta_net_core(a, std::span<const DeltaNetSeq>(&q, 1)); };
    std::unique_ptr<OpGraph> exec;
    std::vector<float> all;
    for (int t = 0; t < 5; ++t) {
      const auto x = randn(static_cast<size_t>(C), 410 + static_cast<uint32_t>(t), 1.5f);
      b.upload(qkv.t, x.data(), qkv.t.nbytes());
      if (!graph) {
        step();
      } else if (!exec) {
        exec = b.record(step);  // records and runs this step
        EXPECT_TRUE(exec);
      } else {
        b.replay(*exec);
      }
      for (const Tensor* r : {&o.t, &ss.t, &ssn.t}) {
        const auto v = get_f32(b, *r);
        all.insert(all.end(), v.begin(), v.end());
      }
    }
    return all;
  };
  const auto eager = run(false), replayed = run(true);
  EXPECT_TRUE(same_bits(eager, replayed));
}

}  // namespace
}  // namespace df::cudatest
