// The decode / verify attention kernels (issue 9; ops/attention_gqa.cuh): the GQA kernel (the
// default) and the v1 slice kernel (CudaOptions::attn_v1) against the CPU backend at the real
// head shapes; the fused qk_norm_rope_attention (one launch) against the two ops it replaces
// (the same bits, outputs and cache) and against the CPU; and rows decoded one at a time give
// the bits of the same rows verified in one call (issue 11).
#include <gtest/gtest.h>

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

cuda::CudaBackend& backend_with(bool v1, bool fuse_qk, bool lean, bool wide = false, bool gate = true) {
  static std::unique_ptr<cuda::CudaBackend> b[32];
  const int i = (v1 ? 1 : 0) | (fuse_qk ? 2 : 0) | (lean ? 4 : 0) | (wide ? 8 : 0) | (gate ? 16 : 0);
  if (!b[i]) {
    cuda::CudaOptions o;
    o.attn_v1 = v1;
    o.attn_wide = wide;
    o.fuse_qk_attention = fuse_qk;
    o.fuse_attn_gate = gate;
    o.lean_kernels = lean;
    o.pdl = lean;
    b[i] = std::make_unique<cuda::CudaBackend>(o);
  }
  return *b[i];
}

struct Heads {
  int32_t n_head, n_kv, hd;
};

// n rows at positions filled - n .. filled - 1 over a cache of `filled` random positions.
std::vector<float> attend(Backend& b, const Heads& h, int64_t n_ctx, int64_t filled, int64_t n) {
  const int64_t kv = static_cast<int64_t>(h.n_kv) * h.hd, qd = static_cast<int64_t>(h.n_head) * h.hd;
  KvCache c = b.alloc_kv_cache(n_ctx, kv, GgmlType::F16);
  auto k = put_f32(b, randn(static_cast<size_t>(filled * kv), 41), kv);
  auto v = put_f32(b, randn(static_cast<size_t>(filled * kv), 42), kv);
  b.kv_store(c, k.t, v.t, positions(b, 0, filled).t);
  auto q = put_f32(b, randn(static_cast<size_t>(n * qd), 43, 2.0f), qd);
  auto out = put_f32(b, std::vector<float>(static_cast<size_t>(n * qd), NAN), qd);
  AttentionParams p{h.n_head, h.n_kv, h.hd, 1.0f / std::sqrt(static_cast<float>(h.hd))};
  b.attention(q.t, c, positions(b, filled - n, n).t, p, out.t);
  return get_f32(b, out.t);
}

// Both decode kernels against the CPU at the 4B (32/8, 128), 27B (24/4, 256), a group of 8 and
// of 1, 1..8 rows, one slice and many, a slice boundary inside the rows.
TEST(CudaAttn, KernelsMatchCpu) {
  DF_REQUIRE_GPU();
  struct Case {
    Heads h;
    int64_t n_ctx, filled, n;
  };
  for (const Case& c : {Case{{32, 8, 128}, 4096, 601, 1}, Case{{32, 8, 128}, 4096, 605, 8},
                        Case{{24, 4, 256}, 4096, 2049, 1}, Case{{24, 4, 256}, 8400, 8200, 8},
                        Case{{16, 2, 64}, 1024, 70, 8}, Case{{4, 4, 32}, 64, 64, 3}, Case{{32, 8, 128}, 48, 5, 2},
                        Case{{24, 4, 256}, 4096, 1, 1}}) {
    const auto ref = attend(cpu_ref(), c.h, c.n_ctx, c.filled, c.n);
    for (bool v1 : {false, true}) {
      const auto got = attend(backend_with(v1, true, true), c.h, c.n_ctx, c.filled, c.n);
      for (float x : got) ASSERT_TRUE(std::isfinite(x));
      EXPECT_LE(nerr(ref, got), 1e-5) << (v1 ? "v1" : "gqa") << " heads " << c.h.n_head << "/" << c.h.n_kv << " hd "
                                      << c.h.hd << " filled " << c.filled << " rows " << c.n;
    }
    // The 256-thread GQA kernel (CudaOptions::attn_wide) gives the 128-thread kernel's bits.
    const auto gqa = attend(backend_with(false, true, true), c.h, c.n_ctx, c.filled, c.n);
    const auto wide = attend(backend_with(false, true, true, true), c.h, c.n_ctx, c.filled, c.n);
    EXPECT_EQ(0, std::memcmp(gqa.data(), wide.data(), gqa.size() * 4))
        << "wide heads " << c.h.n_head << "/" << c.h.n_kv << " hd " << c.h.hd << " filled " << c.filled;
  }
}

struct QkCase {
  Heads h;
  int32_t n_rot;
  int32_t sections[4];
  int64_t n_ctx, pos0, n;
};

struct QkOut {
  std::vector<float> out;
  std::vector<uint16_t> K, V;  // the cache's rows 0 .. pos0 + n - 1
};

// The cache holds pos0 random positions; then n rows of raw q, k, v at pos0 .. pos0 + n - 1
// through qk_norm_rope_attention, all at once (step = n) or in calls of `step` rows. gated:
// through gated_qk_norm_rope_attention, q given as qwen35's [query | gate] heads with random gates.
QkOut qk_attend(Backend& b, const QkCase& c, int64_t step, bool want_cache = true, bool gated = false) {
  const int64_t hd = c.h.hd, kv = static_cast<int64_t>(c.h.n_kv) * hd, qd = static_cast<int64_t>(c.h.n_head) * hd;
  KvCache cache = b.alloc_kv_cache(c.n_ctx, kv, GgmlType::F16);
  if (c.pos0 > 0) {
    auto k0 = put_f32(b, randn(static_cast<size_t>(c.pos0 * kv), 51), kv);
    auto v0 = put_f32(b, randn(static_cast<size_t>(c.pos0 * kv), 52), kv);
    b.kv_store(cache, k0.t, v0.t, positions(b, 0, c.pos0).t);
  }
  const auto qv = randn(static_cast<size_t>(c.n * qd), 53, 2.0f), kvv = randn(static_cast<size_t>(c.n * kv), 54, 2.0f);
  const auto vv = randn(static_cast<size_t>(c.n * kv), 55);
  const auto gv = randn(static_cast<size_t>(c.n * qd), 58, 2.0f);
  auto qn = put_f32(b, randn(static_cast<size_t>(hd), 56), hd), kn = put_f32(b, randn(static_cast<size_t>(hd), 57), hd);
  RopeParams rq;
  rq.n_head = c.h.n_head, rq.head_dim = hd, rq.n_rot = c.n_rot, rq.freq_base = 1e6f;
  for (int i = 0; i < 4; ++i) rq.sections[i] = c.sections[i];
  RopeParams rk = rq;
  rk.n_head = c.h.n_kv;
  AttentionParams p{c.h.n_head, c.h.n_kv, c.h.hd, 1.0f / std::sqrt(static_cast<float>(hd))};
  QkOut o;
  for (int64_t r0 = 0; r0 < c.n; r0 += step) {
    const int64_t m = std::min(step, c.n - r0);
    auto q = put_f32(b, std::vector<float>(qv.begin() + r0 * qd, qv.begin() + (r0 + m) * qd), qd);
    auto k = put_f32(b, std::vector<float>(kvv.begin() + r0 * kv, kvv.begin() + (r0 + m) * kv), kv);
    auto v = put_f32(b, std::vector<float>(vv.begin() + r0 * kv, vv.begin() + (r0 + m) * kv), kv);
    auto out = put_f32(b, std::vector<float>(static_cast<size_t>(m * qd), NAN), qd);
    if (gated) {
      std::vector<float> qg(static_cast<size_t>(2 * m * qd));  // per row and head: [query | gate]
      for (int64_t r = 0; r < m; ++r)
        for (int64_t h = 0; h < c.h.n_head; ++h)
          for (int64_t e = 0; e < hd; ++e) {
            const size_t src = static_cast<size_t>((r0 + r) * qd + h * hd + e);
            qg[static_cast<size_t>(r * 2 * qd + h * 2 * hd + e)] = qv[src];
            qg[static_cast<size_t>(r * 2 * qd + h * 2 * hd + hd + e)] = gv[src];
          }
      auto qgt = put_f32(b, qg, 2 * qd);
      auto gate = put_f32(b, std::vector<float>(static_cast<size_t>(m * qd), NAN), qd);
      b.gated_qk_norm_rope_attention(qgt.t, q.t, gate.t, k.t, v.t, qn.t, kn.t, 1e-6f, positions(b, c.pos0 + r0, m).t,
                                     rq, rk, cache, p, out.t);
    } else {
      b.qk_norm_rope_attention(q.t, k.t, v.t, qn.t, kn.t, 1e-6f, positions(b, c.pos0 + r0, m).t, rq, rk, cache, p,
                               out.t);
    }
    const auto got = get_f32(b, out.t);
    o.out.insert(o.out.end(), got.begin(), got.end());
  }
  if (!want_cache) return o;
  const size_t cells = static_cast<size_t>((c.pos0 + c.n) * kv);
  std::vector<uint16_t> K(static_cast<size_t>(c.n_ctx * kv)), V(K.size());
  b.download(cache.k, K.data(), K.size() * 2);
  b.download(cache.v, V.data(), V.size() * 2);
  o.K.assign(K.begin(), K.begin() + static_cast<std::ptrdiff_t>(cells));
  o.V.assign(V.begin(), V.begin() + static_cast<std::ptrdiff_t>(cells));
  return o;
}

const QkCase kQkCases[] = {
    {{32, 8, 128}, 128, {0, 0, 0, 0}, 4096, 600, 1},   // qwen3 4B decode
    {{32, 8, 128}, 128, {0, 0, 0, 0}, 4096, 60, 8},    // a verify of 8 across a slice boundary (64)
    {{24, 4, 256}, 64, {11, 11, 10, 0}, 4096, 2047, 4},  // qwen35 27B: partial IMROPE, hd 256
    {{24, 4, 256}, 64, {11, 11, 10, 0}, 8400, 8190, 8},
    {{16, 2, 64}, 32, {0, 0, 0, 0}, 128, 0, 5},        // from position 0, one slice
    {{4, 1, 32}, 32, {0, 0, 0, 0}, 2000, 31, 7},       // head size 32
};

std::string name(const QkCase& c) {
  return "heads " + std::to_string(c.h.n_head) + "/" + std::to_string(c.h.n_kv) + " hd " + std::to_string(c.h.hd) +
         " pos0 " + std::to_string(c.pos0) + " rows " + std::to_string(c.n);
}

// One launch gives the bits of qk_norm_rope then attention (outputs and cache), with the
// fused merge, with the merge kernel and in the 256-thread kernel; the lean launches (a row with
// one used slice written by its block, the others merged by their last slice) give the merge
// kernel's bits; and the CPU's results within the attention budget.
TEST(CudaAttn, FusedQkNormRopeIsTheTwoOpsBits) {
  DF_REQUIRE_GPU();
  for (const QkCase& c : kQkCases) {
    std::vector<float> by_cfg[3];
    for (int cfg = 0; cfg < 3; ++cfg) {  // lean; plain (the merge kernel); lean, wide
      const bool lean = cfg != 1, wide = cfg == 2;
      const QkOut fused = qk_attend(backend_with(false, true, lean, wide), c, c.n);
      const QkOut two = qk_attend(backend_with(false, false, lean), c, c.n);
      ASSERT_EQ(fused.out.size(), two.out.size());
      EXPECT_EQ(0, std::memcmp(fused.out.data(), two.out.data(), fused.out.size() * 4)) << name(c) << " cfg " << cfg;
      EXPECT_EQ(fused.K, two.K) << name(c) << " cfg " << cfg;
      EXPECT_EQ(fused.V, two.V) << name(c) << " cfg " << cfg;
      by_cfg[cfg] = fused.out;
    }
    for (int cfg : {0, 2})
      EXPECT_EQ(0, std::memcmp(by_cfg[cfg].data(), by_cfg[1].data(), by_cfg[1].size() * 4)) << name(c) << " cfg " << cfg;
    const QkOut fused = qk_attend(backend_with(false, true, true), c, c.n);
    const QkOut ref = qk_attend(cpu_ref(), c, c.n, false);
    for (float x : fused.out) ASSERT_TRUE(std::isfinite(x)) << name(c);
    EXPECT_LE(nerr(ref.out, fused.out), 1e-5) << name(c);
  }
}

// Rows decoded one call each give the bits of the same rows in one call of n (a verify), with
// the fused op and with the two ops; the v1 kernel too (issue 11's promise).
TEST(CudaAttn, RowsAloneAreTheVerifyBits) {
  DF_REQUIRE_GPU();
  for (const QkCase& c : kQkCases) {
    for (int cfg = 0; cfg < 3; ++cfg) {
      Backend& b = backend_with(cfg == 2, cfg == 0, true);
      const QkOut all = qk_attend(b, c, c.n), alone = qk_attend(b, c, 1);
      ASSERT_EQ(all.out.size(), alone.out.size());
      EXPECT_EQ(0, std::memcmp(all.out.data(), alone.out.data(), all.out.size() * 4)) << name(c) << " cfg " << cfg;
      EXPECT_EQ(all.K, alone.K) << name(c) << " cfg " << cfg;
      EXPECT_EQ(all.V, alone.V) << name(c) << " cfg " << cfg;
    }
  }
}

// qwen35's gated attention in one launch (CudaOptions::fuse_attn_gate: the query heads read from
// the [query | gate] projection, sigmoid(gate) applied by the attention kernel) gives the bits of
// the split copy, the fused attention and sigmoid_mul (outputs and cache), with the lean
// launches (direct writes and last-slice merges) and the merge kernel; rows alone give the bits
// of the same rows in one call; and the CPU's results within the attention budget.
TEST(CudaAttn, GatedIsTheSplitAndGateBits) {
  DF_REQUIRE_GPU();
  for (const QkCase& c : kQkCases) {
    for (bool lean : {true, false}) {
      Backend& one = backend_with(false, true, lean, false, true);
      const QkOut fused = qk_attend(one, c, c.n, true, true);
      const QkOut split = qk_attend(backend_with(false, true, lean, false, false), c, c.n, true, true);
      ASSERT_EQ(fused.out.size(), split.out.size());
      EXPECT_EQ(0, std::memcmp(fused.out.data(), split.out.data(), fused.out.size() * 4)) << name(c) << " lean " << lean;
      EXPECT_EQ(fused.K, split.K) << name(c) << " lean " << lean;
      EXPECT_EQ(fused.V, split.V) << name(c) << " lean " << lean;
      const QkOut alone = qk_attend(one, c, 1, false, true);
      EXPECT_EQ(0, std::memcmp(fused.out.data(), alone.out.data(), fused.out.size() * 4)) << name(c) << " lean " << lean;
    }
    const QkOut fused = qk_attend(backend_with(false, true, true), c, c.n, false, true);
    const QkOut ref = qk_attend(cpu_ref(), c, c.n, false, true);
    for (float x : fused.out) ASSERT_TRUE(std::isfinite(x)) << name(c);
    EXPECT_LE(nerr(ref.out, fused.out), 1e-5) << name(c);
  }
}

}  // namespace
}  // namespace df::cudatest
