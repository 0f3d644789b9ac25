// Short-row matvecs with pipelined loads (CudaOptions::moe_pipe, mv_short_pipe; matvec/launch.cuh
// short_depth): the routed experts' one-row launches and the other one-row int8-x matvecs whose
// rows have at most 64 parts, run by mv_kernel with its loads 2 or 4 steps ahead, give the bits of
// the formats' own configurations (which lane takes which parts, in which order, is unchanged),
// for every format of the int8-x (dp4a) family, and a row's bits do not depend on how many rows
// the call has (1..8: decode and a speculative verify). Streamed experts
// (CudaOptions::moe_streamed_fused: the fused block and the pipelined, PDL routed launches over
// the expert cache) give the resident experts' bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>

#include "../unit/op_test_util.h"
#include "backend/cuda/expert_cache.h"
#include "backend/cuda/matvec/matvec.cuh"
#include "cuda_test_util.h"
#include "matvec_testing.h"

namespace df::cudatest {
namespace {

using optest::randn;

// The int8-x (dp4a) formats of matvec/ (family_dp4a.cu Dp4aFormats over the planar layout, then
// family_i8_*.cu's over raw blocks); CudaOps.PipeTestsCoverTheInt8XFamily keeps this list equal to
// int8_x_supported.
constexpr GgmlType kInt8X[] = {GgmlType::Q8_0,   GgmlType::Q4_0,   GgmlType::Q5_0,    GgmlType::Q5_1,  GgmlType::Q4_K,
                               GgmlType::Q5_K,   GgmlType::Q6_K,   GgmlType::IQ4_XS,  GgmlType::Q2_K,  GgmlType::Q3_K,
                               GgmlType::IQ4_NL, GgmlType::MXFP4,  GgmlType::NVFP4,   GgmlType::Q1_0,  GgmlType::Q2_0,
                               GgmlType::TQ2_0,  GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ2_S, GgmlType::IQ3_XXS,
                               GgmlType::IQ3_S,  GgmlType::IQ1_S,  GgmlType::IQ1_M,  GgmlType::TQ1_0};

// Elements of one part (a lane's unit; kPartElems of dev_fast.cuh and dev_i8_*.cuh).
int64_t part_elems(GgmlType t) {
  return t == GgmlType::Q8_0 || t == GgmlType::NVFP4 ? 16 : t == GgmlType::Q6_K ? 64 : 32;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return !a.empty() && a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}
// Rows [r, r + n) of a [rows, cols] vector.
std::vector<float> rows_of(const std::vector<float>& v, int64_t cols, int64_t r, int64_t n) {
  return std::vector<float>(v.begin() + r * cols, v.begin() + (r + n) * cols);
}

// rows x cols weights of type t: the reference quantiser's blocks of N(0, 0.1) values, or (the IQ
// formats, which have none) random blocks with finite scales (every quant pattern).
std::vector<uint8_t> weights(GgmlType t, int64_t rows, int64_t cols, uint32_t seed) {
  bool quantizable = false;
  quant::visit_format(quant::WeightFormats{}, t, [&]<class F>(F) { quantizable = quant::QuantizableFormat<F>; });
  if (!quantizable) return cudamv::testing::random_blocks(t, cols, rows, seed);
  const size_t rb = row_bytes(t, cols);
  std::vector<uint8_t> q(rb * static_cast<size_t>(rows));
  const auto f = randn(static_cast<size_t>(rows * cols), seed, 0.1f);
  for (int64_t r = 0; r < rows; ++r) cpu::quantize_row_ref(t, f.data() + r * cols, q.data() + rb * r, cols);
  return q;
}

TEST(CudaOps, PipeTestsCoverTheInt8XFamily) {
  for (GgmlType t : cudamv::testing::all_weight_types()) {
    const bool listed = std::find(std::begin(kInt8X), std::end(kInt8X), t) != std::end(kInt8X);
    EXPECT_EQ(cudamv::int8_x_supported(t, 2048), listed) << type_name(t);
  }
}

// A MoE block's expert part (moe_experts_residual: router top-k + shared expert, gate/up with
// the norm and SwiGLU, down, combine + residual add) over rows [r0, r0 + n) of 8 rows of inputs,
// `steps` steps on new logits and x; eager, or (graph) step 0 eager, step 1 recorded, the rest
// replayed. Returns x after each step.
struct MoeCase {
  GgmlType t;
  int64_t E, k, dim, m;
};
struct MoeRig {
  MoeCase s;
  int steps;
  std::vector<uint8_t> gq, uq, dq, sgq, suq, sdq;
  std::vector<std::vector<float>> logits, xs;  // per step: [8, E], [8, dim]
  std::vector<float> gv, nv;                   // [8] shared-expert gates, [dim] norm

  MoeRig(const MoeCase& c, int n_steps) : s(c), steps(n_steps) {
    const uint32_t sd = static_cast<uint32_t>(s.t) * 100 + static_cast<uint32_t>(s.dim) + static_cast<uint32_t>(s.E);
    gq = weights(s.t, s.E * s.m, s.dim, sd + 1), uq = weights(s.t, s.E * s.m, s.dim, sd + 2);
    dq = weights(s.t, s.E * s.dim, s.m, sd + 3);
    sgq = weights(s.t, s.m, s.dim, sd + 4), suq = weights(s.t, s.m, s.dim, sd + 5), sdq = weights(s.t, s.dim, s.m, sd + 6);
    for (int t = 0; t < steps; ++t) {
      logits.push_back(randn(static_cast<size_t>(8 * s.E), sd + 50 + 10 * t, 2.0f));
      xs.push_back(randn(static_cast<size_t>(8 * s.dim), sd + 60 + 10 * t));
    }
    gv = randn(8, sd + 30);
    for (float& v : gv) v = 1.0f / (1.0f + std::exp(-v));
    nv = randn(static_cast<size_t>(s.dim), sd + 40, 0.2f);
    for (float& v : nv) v += 1.0f;
  }
  struct Weights {
    Tensor G, U, D, SG, SU, SD;
  };
  Weights upload(Backend& b) const {
    return {b.weight_stack(s.t, s.dim, s.m, s.E, gq.data()), b.weight_stack(s.t, s.dim, s.m, s.E, uq.data()),
            b.weight_stack(s.t, s.m, s.dim, s.E, dq.data()),  b.weight(s.t, s.dim, s.m, sgq.data()),
            b.weight(s.t, s.dim, s.m, suq.data()),            b.weight(s.t, s.m, s.dim, sdq.data())};
  }
  std::vector<float> run(cuda::CudaBackend& b, const Weights& w, int64_t r0, int64_t n, bool graph) const {
    const int64_t E = s.E, k = s.k, dim = s.dim, m = s.m;
    std::vector<Held> held;
    auto f32 = [&](const std::vector<float>& v, int64_t c) {
      held.push_back(put_f32(b, v, c));
      return held.back().t;
    };
    auto zeros = [&](int64_t r, int64_t c) { return f32(std::vector<float>(static_cast<size_t>(r * c), NAN), c); };
    MoeExperts a;
    a.gate_exps = w.G, a.up_exps = w.U, a.down_exps = w.D;
    a.n_expert = E;
    a.shexp_gate = w.SG, a.shexp_up = w.SU, a.shexp_down = w.SD;
    a.logits = zeros(n, E);
    a.sh_g = f32(rows_of(gv, 1, r0, n), 1);
    held.push_back(put(b, GgmlType::I32, k, n, nullptr));
    a.ids = held.back().t;
    a.weights = zeros(n, k), a.gate = zeros(n * k, m), a.up = zeros(n * k, m), a.down = zeros(n * k, dim);
    a.sh_gate = zeros(n, m), a.sh_up = zeros(n, m), a.sh_out = zeros(n, dim), a.out = zeros(n, dim);
    const Tensor x = zeros(n, dim), norm = f32(nv, dim), xn = zeros(n, dim);
    auto step = [&] { b.moe_experts_residual(a, x, norm, 1e-6f, xn); };
    std::unique_ptr<OpGraph> exec;
    std::vector<float> all;
    for (int t = 0; t < steps; ++t) {
      const auto lv = rows_of(logits[static_cast<size_t>(t)], E, r0, n);
      const auto xv = rows_of(xs[static_cast<size_t>(t)], dim, r0, n);
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
  }
  // The unfused routed products of rows [r0, r0 + n): matmul_id_swiglu then matmul_id over the
  // router's ids of step 0's logits; returns gate [n k, m] then down [n k, dim].
  std::vector<float> unfused(cuda::CudaBackend& b, const Weights& w, int64_t r0, int64_t n) const {
    const int64_t E = s.E, k = s.k, dim = s.dim, m = s.m;
    auto l = put_f32(b, rows_of(logits[0], E, r0, n), E);
    auto ids = put(b, GgmlType::I32, k, n, nullptr);
    auto wt = put_f32(b, std::vector<float>(static_cast<size_t>(n * k)), k);
    b.moe_route(l.t, true, 0.0f, ids.t, wt.t);
    auto x = put_f32(b, rows_of(xs[0], dim, r0, n), dim);
    auto gate = put_f32(b, std::vector<float>(static_cast<size_t>(n * k * m), NAN), m);
    auto up = put_f32(b, std::vector<float>(static_cast<size_t>(n * k * m), NAN), m);
    auto y = put_f32(b, std::vector<float>(static_cast<size_t>(n * k * dim), NAN), dim);
    b.matmul_id_swiglu(w.G, w.U, E, x.t, ids.t, gate.t, up.t);
    b.matmul_id(w.D, E, gate.t, ids.t, y.t);
    auto out = get_f32(b, gate.t);
    const auto yv = get_f32(b, y.t);
    out.insert(out.end(), yv.begin(), yv.end());
    return out;
  }
};

// The runs of one backend: the fused block at n = 1 for each of the 8 rows and at n = 2, 3, 5, 8
// (eager), at n = 1 and 3 replayed from a graph, and the unfused products at n = 1 (row 0), 3, 8.
struct MoeRuns {
  std::vector<float> one[8], many[4], graph1, graph3, un1, un3, un8;
};
constexpr int64_t kManyN[4] = {2, 3, 5, 8};
MoeRuns moe_runs(const MoeRig& rig, cuda::CudaBackend& b) {
  const MoeRig::Weights w = rig.upload(b);
  MoeRuns r;
  for (int64_t i = 0; i < 8; ++i) r.one[i] = rig.run(b, w, i, 1, false);
  for (int i = 0; i < 4; ++i) r.many[i] = rig.run(b, w, 0, kManyN[i], false);
  r.graph1 = rig.run(b, w, 0, 1, true);
  r.graph3 = rig.run(b, w, 0, 3, true);
  r.un1 = rig.unfused(b, w, 0, 1), r.un3 = rig.unfused(b, w, 0, 3), r.un8 = rig.unfused(b, w, 0, 8);
  return r;
}
// got's runs equal ref's bit for bit, and each row of a many-row run is that row's one-row run.
void expect_same_runs(const MoeRig& rig, const MoeRuns& ref, const MoeRuns& got, const std::string& what) {
  const int64_t dim = rig.s.dim, k = rig.s.k, m = rig.s.m;
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(same_bits(ref.one[i], got.one[i])) << what << " eager, n=1, row " << i;
  for (int i = 0; i < 4; ++i) {
    const int64_t n = kManyN[i];
    EXPECT_TRUE(same_bits(ref.many[i], got.many[i])) << what << " eager, n=" << n;
    for (int t = 0; t < rig.steps; ++t)
      for (int64_t j = 0; j < n; ++j)
        EXPECT_TRUE(same_bits(rows_of(got.one[j], dim, t, 1), rows_of(got.many[i], dim, t * n + j, 1)))
            << what << " step " << t << ": row " << j << " of n=" << n << " vs its one-row call";
  }
  EXPECT_TRUE(same_bits(ref.graph1, got.graph1)) << what << " graph, n=1";
  EXPECT_TRUE(same_bits(ref.graph3, got.graph3)) << what << " graph, n=3";
  EXPECT_TRUE(same_bits(got.one[0], got.graph1)) << what << " graph vs eager, n=1";
  EXPECT_TRUE(same_bits(got.many[1], got.graph3)) << what << " graph vs eager, n=3";
  EXPECT_TRUE(same_bits(ref.un1, got.un1)) << what << " matmul_id, n=1";
  EXPECT_TRUE(same_bits(ref.un3, got.un3)) << what << " matmul_id, n=3";
  EXPECT_TRUE(same_bits(ref.un8, got.un8)) << what << " matmul_id, n=8";
  // Row 0's slots of the 8-row products are the one-row call's (gate [k, m], then down [k, dim]).
  if (got.un1.size() == static_cast<size_t>(k * (m + dim)) && got.un8.size() == static_cast<size_t>(8 * k * (m + dim))) {
    const std::vector<float> g8(got.un8.begin(), got.un8.begin() + k * m);
    const std::vector<float> d8(got.un8.begin() + 8 * k * m, got.un8.begin() + 8 * k * m + k * dim);
    EXPECT_TRUE(same_bits(std::vector<float>(got.un1.begin(), got.un1.begin() + k * m), g8)) << what << " matmul_id row 0 of 8";
    EXPECT_TRUE(same_bits(std::vector<float>(got.un1.begin() + k * m, got.un1.end()), d8)) << what << " matmul_id row 0 of 8";
  }
}

// Formats: every int8-x format at E 16, k 4, rows of 1024 (gate/up) and 256 (down: 8..16 parts;
// Q6_K 4), and Q4_K at the 35B-A3B's widths (rows of 2048 and, for down, of 512 = 16 parts) and
// with 8-part rows. Depths 2 and 4 (Q6_K: 2, three words a part), with and without moe_pdl.
TEST(CudaOps, MoePipeIsThePlainBits) {
  DF_REQUIRE_GPU();
  std::vector<MoeCase> cases = {{GgmlType::Q4_K, 32, 8, 2048, 512}, {GgmlType::Q4_K, 64, 8, 1024, 256}};
  for (GgmlType t : kInt8X)
    if (t != GgmlType::Q4_K) cases.push_back({t, 16, 4, 1024, 256});
  cuda::CudaOptions qo;
  qo.moe_warp_route = true;
  cuda::CudaBackend plain(qo);
  for (const MoeCase& s : cases) {
    const MoeRig rig(s, 5);
    const std::string tn = std::string(type_name(s.t)) + " " + std::to_string(s.dim) + "/" + std::to_string(s.m);
    const MoeRuns ref = moe_runs(rig, plain);
    for (int depth : {2, 4}) {
      for (bool pdl : {false, true}) {
        cuda::CudaOptions o = qo;
        o.moe_pipe = depth;
        o.moe_pdl = pdl;
        cuda::CudaBackend b(o);
        expect_same_runs(rig, ref, moe_runs(rig, b), tn + " depth " + std::to_string(depth) + " pdl " + std::to_string(pdl));
      }
    }
  }
}

// CudaOptions::moe_streamed_fused: streamed experts (a device cache of 20 of each stack's 64 or
// 32 experts, the misses read in place from host memory, the placement moving between steps) in
// the fused block at one row and with the pipelined / PDL routed launches give the resident
// plain launches' bits: 12 steps (placement rounds every 4 maintain() calls), eager and graph.
TEST(CudaOps, StreamedFusedIsTheResidentBits) {
  DF_REQUIRE_GPU();
  const MoeCase cases[] = {{GgmlType::Q4_K, 64, 8, 1024, 256}, {GgmlType::Q6_K, 32, 4, 1024, 256},
                           {GgmlType::Q8_0, 32, 4, 1024, 256}};
  cuda::CudaOptions qo;
  qo.moe_warp_route = true;
  cuda::CudaBackend plain(qo);
  struct Cfg {
    int pipe;
    bool pdl, fused;
  };
  const Cfg cfgs[] = {{0, false, true}, {2, true, true}, {4, true, true}, {2, true, false}};
  for (const MoeCase& s : cases) {
    const MoeRig rig(s, 12);
    const std::string tn = std::string(type_name(s.t)) + " " + std::to_string(s.dim) + "/" + std::to_string(s.m);
    const MoeRig::Weights wr = rig.upload(plain);
    const size_t eb = (row_bytes(s.t, s.dim) * static_cast<size_t>(s.m) + 256);
    for (const Cfg& c : cfgs) {
      cuda::CudaOptions o = qo;
      o.moe_pipe = c.pipe, o.moe_pdl = c.pdl, o.moe_streamed_fused = c.fused;
      o.expert_cache_bytes = 3 * 20 * eb;
      cuda::CudaBackend b(o);
      const MoeRig::Weights w = rig.upload(b);
      const std::string what = tn + " pipe " + std::to_string(c.pipe) + " pdl " + std::to_string(c.pdl) + " fused " +
                               std::to_string(c.fused);
      for (int64_t n : {1, 3, 8}) {
        const auto ref = rig.run(plain, wr, 0, n, false);
        EXPECT_TRUE(same_bits(ref, rig.run(b, w, 0, n, false))) << what << " eager, n=" << n;
        EXPECT_TRUE(same_bits(ref, rig.run(b, w, 0, n, true))) << what << " graph, n=" << n;
      }
      EXPECT_TRUE(same_bits(rig.unfused(plain, wr, 0, 3), rig.unfused(b, w, 0, 3))) << what << " matmul_id, n=3";
      const cuda::ExpertCacheStats st = b.expert_cache_stats();
      EXPECT_GT(st.misses, 0u) << what;
      EXPECT_GT(st.hits, 0u) << what;
    }
  }
}

// CudaOptions::mv_short_pipe: one-row matvecs of rows with at most 64 parts, for every int8-x
// format at 16 and 64 parts a row (Q4_K also at 2048 x 8192 rows), with their loads pipelined,
// give the bits of the formats' configurations: a plain matmul, matmul_add (the accumulate
// epilogue), norm_matmuls over three matrices with a sigmoid epilogue, and the SwiGLU pair of
// norm_swiglu; matrices of 80 parts a row are unchanged by it; each row of 2..8-row calls (which
// the short pipe leaves to the formats' loops) is the bits of its one-row call.
TEST(CudaOps, ShortPipeIsThePlainBits) {
  DF_REQUIRE_GPU();
  struct Shape {
    GgmlType t;
    int64_t cols, rows;
  };
  std::vector<Shape> shapes = {{GgmlType::Q4_K, 2048, 8192}};
  for (GgmlType t : kInt8X) {
    const int64_t p = part_elems(t);
    shapes.push_back({t, 16 * p, 600});
    shapes.push_back({t, 64 * p, 1000});
    shapes.push_back({t, 80 * p, 300});
  }
  cuda::CudaBackend plain(cuda::CudaOptions{});
  constexpr int64_t kNs[] = {2, 3, 4, 8};
  for (const Shape& s : shapes) {
    const uint32_t sd = static_cast<uint32_t>(s.t) * 1000 + static_cast<uint32_t>(s.cols);
    const auto wq = weights(s.t, s.rows, s.cols, sd + 1), w2 = weights(s.t, 64, s.cols, sd + 2);
    const auto w3 = weights(s.t, 33, s.cols, sd + 3);
    auto nv = randn(static_cast<size_t>(s.cols), sd + 4, 0.2f);
    for (float& v : nv) v += 1.0f;
    const auto x8 = randn(static_cast<size_t>(8 * s.cols), sd + 5), acc8 = randn(static_cast<size_t>(8 * s.rows), sd + 6);
    // Per output (y, acc, yn, y2, y3, g): [n, its rows].
    const int64_t out_rows[6] = {s.rows, s.rows, s.rows, 64, 33, 64};
    auto runs = [&](Backend& b) {
      const Tensor W = b.weight(s.t, s.cols, s.rows, wq.data());
      const Tensor W2 = b.weight(s.t, s.cols, 64, w2.data());
      const Tensor W3 = b.weight(s.t, s.cols, 33, w3.data());
      auto run = [&](int64_t r0, int64_t n) {
        auto x = put_f32(b, rows_of(x8, s.cols, r0, n), s.cols);
        auto norm = put_f32(b, nv, s.cols);
        auto xn = put_f32(b, std::vector<float>(static_cast<size_t>(n * s.cols)), s.cols);
        auto y = put_f32(b, std::vector<float>(static_cast<size_t>(n * s.rows), NAN), s.rows);
        auto acc = put_f32(b, rows_of(acc8, s.rows, r0, n), s.rows);
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
        std::vector<std::vector<float>> out;
        for (const Tensor* t : {&y.t, &acc.t, &yn.t, &y2.t, &y3.t, &g.t}) out.push_back(get_f32(b, *t));
        return out;
      };
      std::vector<std::vector<std::vector<float>>> r;  // one-row calls of rows 0..7, then kNs at row 0
      for (int64_t i = 0; i < 8; ++i) r.push_back(run(i, 1));
      for (int64_t n : kNs) r.push_back(run(0, n));
      return r;
    };
    const auto ref = runs(plain);
    const std::string sh = std::string(type_name(s.t)) + " " + std::to_string(s.cols) + "x" + std::to_string(s.rows);
    for (int depth : {2, 4}) {
      cuda::CudaOptions o;
      o.mv_short_pipe = depth;
      cuda::CudaBackend b(o);
      const auto got = runs(b);
      for (size_t c = 0; c < got.size(); ++c)
        for (size_t o6 = 0; o6 < 6; ++o6) {
          const int64_t n = c < 8 ? 1 : kNs[c - 8];
          EXPECT_TRUE(same_bits(ref[c][o6], got[c][o6])) << sh << " depth " << depth << " output " << o6 << " n=" << n
                                                         << (c < 8 ? " row " + std::to_string(c) : std::string());
          for (int64_t j = 0; c >= 8 && j < n; ++j)
            EXPECT_TRUE(same_bits(got[static_cast<size_t>(j)][o6], rows_of(got[c][o6], out_rows[o6], j, 1)))
                << sh << " depth " << depth << " output " << o6 << ": row " << j << " of n=" << n << " vs its one-row call";
        }
    }
  }
}

}  // namespace
}  // namespace df::cudatest
