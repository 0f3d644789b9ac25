// MTP speculative decoding on the GPU (issue 11), and what its greedy identity rests on:
//   1. every op that a decode step and a verify use gives row r the same bits whether the
//      call has 1 row or n = 2..8 rows (the recurrent ops: the n-row call against n one-row
//      calls carrying the state; snapshot slot t against the state after row t);
//   2. a whole trunk forward of n = 2..8 rows (snapshots, all outputs, as a verify runs it)
//      gives each row the logits and hidden state of token-by-token decode, bit for bit, with
//      graphs (the recorded decode steps) on;
//   3. speculative output == plain output token for token at depths 1..7, for the default
//      model (a trained head) and a random qwen35 model with an MTP layer (its drafts mostly
//      fail; the oracle of --draft-accept makes it accept long prefixes too).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>

#include "../unit/op_test_util.h"
#include "cuda_model_files.h"
#include "cuda_test_util.h"
#include "diskformer/engine.h"
#include "diskformer/generator.h"
#include "quant/cpu/kernels.h"
#include "spec/mtp_generator.h"

namespace df::cudatest {
namespace {

using optest::randn;

constexpr int64_t kMaxRows = 8;  // the deepest draft (7) + 1

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

// A row-wise op: f(b, row0, n, out) runs the op over input rows [row0, row0 + n) into out
// (a tensor of n rows) and returns out's values. Row r of every n-row call must equal the
// one-row call on row r.
void expect_rows_independent(const std::string& what,
                             const std::function<std::vector<float>(Backend&, int64_t row0, int64_t n)>& f) {
  Backend& g = *gpu();
  std::vector<std::vector<float>> one(kMaxRows);
  for (int64_t r = 0; r < kMaxRows; ++r) one[static_cast<size_t>(r)] = f(g, r, 1);
  for (int64_t n = 2; n <= kMaxRows; ++n) {
    const std::vector<float> all = f(g, 0, n);
    const size_t cols = one[0].size();
    ASSERT_EQ(all.size(), cols * static_cast<size_t>(n)) << what;
    for (int64_t r = 0; r < n; ++r)
      EXPECT_TRUE(same_bits(all.data() + static_cast<size_t>(r) * cols, one[static_cast<size_t>(r)].data(), cols))
          << what << ": row " << r << " of " << n << " differs from the one-row call";
  }
}

Tensor quantized_weight(Backend& g, GgmlType t, int64_t k, int64_t m, uint32_t seed) {
  const auto wf = randn(static_cast<size_t>(k * m), seed);
  std::vector<uint8_t> wq(row_bytes(t, k) * static_cast<size_t>(m));
  for (int64_t r = 0; r < m; ++r) {
    if (t == GgmlType::F32) {
      std::memcpy(wq.data() + row_bytes(t, k) * static_cast<size_t>(r), wf.data() + r * k, static_cast<size_t>(k) * 4);
    } else {
      cpu::quantize_row_ref(t, wf.data() + r * k, wq.data() + row_bytes(t, k) * static_cast<size_t>(r), k);
    }
  }
  return g.weight(t, k, m, wq.data());
}

// ---- 1. ops ----

// The matrix product for the weight types of the default model (Q8_0), the 27B bench
// (Q4_0), the random test models (F32) and the common k-quants: the matvec path of n <= 8.
TEST(CudaSpecRows, Matmul) {
  DF_REQUIRE_GPU();
  Backend& g = *gpu();
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K,
                     GgmlType::Q6_K}) {
    for (int64_t k : {256, 5120}) {
      const int64_t m = 384;
      const Tensor W = quantized_weight(g, t, k, m, 101);
      auto x = put_f32(g, randn(static_cast<size_t>(kMaxRows * k), 102), k);
      auto y = put_f32(g, std::vector<float>(static_cast<size_t>(kMaxRows * m)), m);
      g.set_row_exact(true);
      expect_rows_independent("matmul " + std::string(type_name(t)) + " k=" + std::to_string(k),
                              [&](Backend& b, int64_t r0, int64_t n) {
                                const Tensor out = y.t.slice_rows(0, n);
                                b.matmul(W, x.t.slice_rows(r0, n), out);
                                return get_f32(b, out);
                              });
    }
  }
}

TEST(CudaSpecRows, RowwiseOps) {
  DF_REQUIRE_GPU();
  Backend& g = *gpu();
  const int64_t C = 640, V = 248320;
  auto x = put_f32(g, randn(static_cast<size_t>(kMaxRows * C), 201, 2.0f), C);
  auto x2 = put_f32(g, randn(static_cast<size_t>(kMaxRows * C), 202), C);
  auto w = put_f32(g, randn(static_cast<size_t>(C), 203), C);
  auto y = put_f32(g, std::vector<float>(static_cast<size_t>(kMaxRows * C)), C);
  const int64_t H = 32;
  auto bias = put_f32(g, randn(H, 204), H), scale = put_f32(g, randn(H, 205), H);
  // op(b, r0, n, out): the op over input rows [r0, r0 + n) into out [n rows].
  using Op = std::function<void(Backend&, int64_t, int64_t, const Tensor&)>;
  auto run = [&](const std::string& name, const Op& op) {
    expect_rows_independent(name, [&](Backend& b, int64_t r0, int64_t n) {
      const Tensor out = y.t.slice_rows(0, n);
      op(b, r0, n, out);
      return get_f32(b, out);
    });
  };
  auto X = [&](int64_t r0, int64_t n) { return x.t.slice_rows(r0, n); };
  auto X2 = [&](int64_t r0, int64_t n) { return x2.t.slice_rows(r0, n); };
  run("rms_norm", [&](Backend& b, int64_t r0, int64_t n, const Tensor& out) { b.rms_norm(X(r0, n), w.t, 1e-6f, out); });
  run("rms_norm per head", [&](Backend& b, int64_t r0, int64_t n, const Tensor& out) {
    b.rms_norm(X(r0, n).reshape(64), w.t.slice_cols(0, 64), 1e-6f, out.reshape(64));
  });
  run("l2_norm", [&](Backend& b, int64_t r0, int64_t n, const Tensor& out) { b.l2_norm(X(r0, n), 128, 1e-6f, out); });
  run("silu", [&](Backend& b, int64_t r0, int64_t n, const Tensor& out) { b.unary(UnaryOp::SILU, X(r0, n), out); });
  run("sigmoid", [&](Backend& b, int64_t r0, int64_t n, const Tensor& out) { b.unary(UnaryOp::SIGMOID, X(r0, n), out); });
  run("softplus", [&](Backend& b, int64_t r0, int64_t n, const Tensor& out) { b.unary(UnaryOp::SOFTPLUS, X(r0, n), out); });
  run("softplus_scale", [&](Backend& b, int64_t r0, int64_t n, const Tensor& out) {
    b.copy(X(r0, n), out);  // the columns past H: the same in every call
    b.softplus_scale(X(r0, n).slice_cols(0, H), bias.t, scale.t, out.slice_cols(0, H));
  });
  run("swiglu", [&](Backend& b, int64_t r0, int64_t n, const Tensor& out) { b.swiglu(X(r0, n), X2(r0, n), out); });
  run("sigmoid_mul", [&](Backend& b, int64_t r0, int64_t n, const Tensor& out) { b.sigmoid_mul(X(r0, n), X2(r0, n), out); });
  run("add", [&](Backend& b, int64_t r0, int64_t n, const Tensor& out) {
    b.copy(X(r0, n), out);
    b.add(out, X2(r0, n));
  });
  // get_rows of the embedding table (Q8_0, as the default model's) and of f32 activations
  // (the output head's gather of the output rows).
  const Tensor table = quantized_weight(g, GgmlType::Q8_0, C, 1000, 206);
  auto ids = put_i32(g, {7, 999, 0, 512, 7, 33, 640, 100});
  auto rev = put_i32(g, {7, 6, 5, 4, 3, 2, 1, 0});
  run("get_rows q8_0", [&](Backend& b, int64_t r0, int64_t n, const Tensor& out) {
    b.get_rows(table, ids.t.slice_rows(r0, n), out);
  });
  run("get_rows f32", [&](Backend& b, int64_t r0, int64_t n, const Tensor& out) {
    b.get_rows(x2.t, rev.t.slice_rows(r0, n), out);
  });
  // argmax over a real vocabulary, as the verify runs it.
  auto logits = put_f32(g, randn(static_cast<size_t>(kMaxRows * V), 207), V);
  auto best = put(g, GgmlType::I32, 1, kMaxRows, nullptr);
  expect_rows_independent("argmax", [&](Backend& b, int64_t r0, int64_t n) {
    b.argmax(logits.t.slice_rows(r0, n), best.t.slice_rows(0, n));
    std::vector<int32_t> got(static_cast<size_t>(n));
    b.download(best.t.slice_rows(0, n), got.data(), got.size() * sizeof(int32_t));
    return std::vector<float>(got.begin(), got.end());
  });
}

// rope, kv_store and attention of rows at consecutive positions (row r at p0 + r, the cache
// filled below p0 first), at a short and a long context, plain and IMROPE sections.
TEST(CudaSpecRows, RopeKvAttention) {
  DF_REQUIRE_GPU();
  Backend& g = *gpu();
  const int32_t nh = 8, nkv = 2, hd = 128;
  const int64_t qd = nh * hd, kvd = nkv * hd, n_ctx = 8192;
  AttentionParams ap{nh, nkv, hd, 0.088f};
  for (int64_t p0 : {3, 5000}) {
    for (bool sections : {false, true}) {
      RopeParams rq;
      rq.n_head = nh, rq.head_dim = hd, rq.n_rot = sections ? 64 : hd, rq.freq_base = 1e7f;
      if (sections) rq.sections[0] = 11, rq.sections[1] = 11, rq.sections[2] = 10, rq.sections[3] = 0;
      RopeParams rk = rq;
      rk.n_head = nkv;
      KvCache c = g.alloc_kv_cache(n_ctx, kvd, GgmlType::F16);
      auto kp = put_f32(g, randn(static_cast<size_t>(p0 * kvd), 301), kvd);
      auto vp = put_f32(g, randn(static_cast<size_t>(p0 * kvd), 302), kvd);
      const Held prompt_pos = positions(g, 0, p0);
      g.kv_store(c, kp.t, vp.t, prompt_pos.t);
      auto q = put_f32(g, randn(static_cast<size_t>(kMaxRows * qd), 303), qd);
      auto k = put_f32(g, randn(static_cast<size_t>(kMaxRows * kvd), 304), kvd);
      auto v = put_f32(g, randn(static_cast<size_t>(kMaxRows * kvd), 305), kvd);
      auto qs = put_f32(g, std::vector<float>(static_cast<size_t>(kMaxRows * qd)), qd);
      auto ks = put_f32(g, std::vector<float>(static_cast<size_t>(kMaxRows * kvd)), kvd);
      auto out = put_f32(g, std::vector<float>(static_cast<size_t>(kMaxRows * qd)), qd);
      const std::string tag = " p0=" + std::to_string(p0) + (sections ? " imrope" : "");
      expect_rows_independent("rope" + tag, [&](Backend& b, int64_t r0, int64_t n) {
        const Tensor t = qs.t.slice_rows(0, n);
        b.copy(q.t.slice_rows(r0, n), t);
        const Held pos = positions(b, p0 + r0, n);
        b.rope(t, pos.t, rq);
        return get_f32(b, t);
      });
      // The n-row call stores rows p0.. and attends; the one-row call for row r stores rows up
      // to r one at a time first (as decode does), so row r sees the same cache rows.
      expect_rows_independent("kv_store + attention" + tag, [&](Backend& b, int64_t r0, int64_t n) {
        for (int64_t i = 0; i < n; ++i) {  // rows r0..r0+n-1 of q/k/v, rotated
          b.copy(q.t.slice_rows(r0 + i, 1), qs.t.slice_rows(i, 1));
          b.copy(k.t.slice_rows(r0 + i, 1), ks.t.slice_rows(i, 1));
        }
        const Held held_pos = positions(b, p0 + r0, n);
        const Tensor pos = held_pos.t;
        b.rope(qs.t.slice_rows(0, n), pos, rq);
        b.rope(ks.t.slice_rows(0, n), pos, rk);
        if (n == 1) {  // decode: rows before r0 were stored by earlier steps
          for (int64_t i = 0; i < r0; ++i) {
            auto ki = put_f32(b, std::vector<float>(static_cast<size_t>(kvd)), kvd);
            b.copy(k.t.slice_rows(i, 1), ki.t);
            const Held pi = positions(b, p0 + i, 1);
            b.rope(ki.t, pi.t, rk);
            b.kv_store(c, ki.t, v.t.slice_rows(i, 1), pi.t);
          }
        }
        b.kv_store(c, ks.t.slice_rows(0, n), v.t.slice_rows(r0, n), pos);
        const Tensor o = out.t.slice_rows(0, n);
        b.attention(qs.t.slice_rows(0, n), c, pos, ap, o);
        return get_f32(b, o);
      });
    }
  }
}

// Recurrent ops: an n-row call (with snapshot slots) against n one-row calls carrying the
// state: outputs, each slot == the state after that row, the final state.
TEST(CudaSpecRows, RecurrentOpsAndSnapshots) {
  DF_REQUIRE_GPU();
  Backend& g = *gpu();
  // ssm_conv: the default model's and the 27B's conv widths.
  for (int64_t C : {384, 10240}) {
    const int64_t K = 4, S = (K - 1) * C;
    auto x = put_f32(g, randn(static_cast<size_t>(kMaxRows * C), 401), C);
    auto w = put_f32(g, randn(static_cast<size_t>(C * K), 402), K);
    const auto s0 = randn(static_cast<size_t>(S), 403);
    auto st = put_f32(g, s0, C);
    auto y = put_f32(g, std::vector<float>(static_cast<size_t>(kMaxRows * C)), C);
    auto snap = put_f32(g, std::vector<float>(static_cast<size_t>(kMaxRows * S), NAN), C);
    std::vector<std::vector<float>> y1, st1;  // one row at a time
    g.upload(st.t, s0.data(), st.t.nbytes());
    for (int64_t r = 0; r < kMaxRows; ++r) {
      g.ssm_conv(x.t.slice_rows(r, 1), st.t, w.t, y.t.slice_rows(0, 1), Tensor{});
      y1.push_back(get_f32(g, y.t.slice_rows(0, 1)));
      st1.push_back(get_f32(g, st.t));
    }
    for (int64_t n = 2; n <= kMaxRows; ++n) {
      g.upload(st.t, s0.data(), st.t.nbytes());
      g.ssm_conv(x.t.slice_rows(0, n), st.t, w.t, y.t.slice_rows(0, n), snap.t);
      const auto Y = get_f32(g, y.t.slice_rows(0, n)), SN = get_f32(g, snap.t), ST = get_f32(g, st.t);
      for (int64_t r = 0; r < n; ++r) {
        const auto ru = static_cast<size_t>(r);
        EXPECT_TRUE(same_bits(Y.data() + ru * static_cast<size_t>(C), y1[ru].data(), static_cast<size_t>(C)))
            << "ssm_conv C=" << C << " row " << r << " of " << n;
        EXPECT_TRUE(same_bits(SN.data() + ru * static_cast<size_t>(S), st1[ru].data(), static_cast<size_t>(S)))
            << "ssm_conv C=" << C << " snapshot " << r << " of " << n;
      }
      EXPECT_TRUE(same_bits(ST.data(), st1[static_cast<size_t>(n - 1)].data(), static_cast<size_t>(S)))
          << "ssm_conv C=" << C << " final state, " << n << " rows";
    }
  }
  // gated delta rule: the default model's heads (d 64) and the 27B's (d 128, 16 k / 48 v heads).
  struct Case { int64_t d, Hk, Hv; };
  for (const Case& c : {Case{64, 2, 4}, Case{128, 16, 48}}) {
    const int64_t kd = c.Hk * c.d, vd = c.Hv * c.d, S = c.Hv * c.d * c.d;
    auto qkv = put_f32(g, randn(static_cast<size_t>(kMaxRows * (2 * kd + vd)), 501), 2 * kd + vd);
    const Tensor q = qkv.t.slice_cols(0, kd), k = qkv.t.slice_cols(kd, kd), v = qkv.t.slice_cols(2 * kd, vd);
    g.l2_norm(q, c.d, 1e-6f, q);
    g.l2_norm(k, c.d, 1e-6f, k);
    auto gate = put_f32(g, randn(static_cast<size_t>(kMaxRows * c.Hv), 502), c.Hv);
    g.softplus_scale(gate.t, put_f32(g, randn(c.Hv, 503), c.Hv).t, put_f32(g, std::vector<float>(c.Hv, -0.5f), c.Hv).t,
                     gate.t);
    auto beta = put_f32(g, randn(static_cast<size_t>(kMaxRows * c.Hv), 504), c.Hv);
    g.unary(UnaryOp::SIGMOID, beta.t, beta.t);
    const auto s0 = randn(static_cast<size_t>(S), 505, 0.1f);
    auto st = put_f32(g, s0, c.d);
    auto out = put_f32(g, std::vector<float>(static_cast<size_t>(kMaxRows * vd)), vd);
    auto snap = put_f32(g, std::vector<float>(static_cast<size_t>(kMaxRows * S), NAN), c.d);
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
    std::vector<std::vector<float>> o1, st1;
    g.upload(st.t, s0.data(), st.t.nbytes());
    for (int64_t r = 0; r < kMaxRows; ++r) {
      g.gated_delta_rule(q.slice_rows(r, 1), k.slice_rows(r, 1), v.slice_rows(r, 1), gate.t.slice_rows(r, 1),
                         beta.t.slice_rows(r, 1), st.t, scale, out.t.slice_rows(0, 1), Tensor{});
      o1.push_back(get_f32(g, out.t.slice_rows(0, 1)));
      st1.push_back(get_f32(g, st.t));
    }
    for (int64_t n = 2; n <= kMaxRows; ++n) {
      g.upload(st.t, s0.data(), st.t.nbytes());
      g.gated_delta_rule(q.slice_rows(0, n), k.slice_rows(0, n), v.slice_rows(0, n), gate.t.slice_rows(0, n),
                         beta.t.slice_rows(0, n), st.t, scale, out.t.slice_rows(0, n), snap.t);
      const auto O = get_f32(g, out.t.slice_rows(0, n)), SN = get_f32(g, snap.t), ST = get_f32(g, st.t);
      for (int64_t r = 0; r < n; ++r) {
        const auto ru = static_cast<size_t>(r);
        EXPECT_TRUE(same_bits(O.data() + ru * static_cast<size_t>(vd), o1[ru].data(), static_cast<size_t>(vd)))
            << "gated_delta_rule d=" << c.d << " row " << r << " of " << n;
        EXPECT_TRUE(same_bits(SN.data() + ru * static_cast<size_t>(S), st1[ru].data(), static_cast<size_t>(S)))
            << "gated_delta_rule d=" << c.d << " snapshot " << r << " of " << n;
      }
      EXPECT_TRUE(same_bits(ST.data(), st1[static_cast<size_t>(n - 1)].data(), static_cast<size_t>(S)))
          << "gated_delta_rule d=" << c.d << " final state, " << n << " rows";
    }
  }
}

// ---- 2 and 3: whole models ----

std::unique_ptr<Engine> load_cuda(const std::string& path, int64_t n_ctx = 512,
                                  const std::function<void(EngineOptions&)>& tweak = {}) {
  EngineOptions eo;
  eo.model_path = path;
  eo.device = "cuda";
  eo.n_ctx = n_ctx;
  eo.prefill_chunk = 64;
  if (tweak) tweak(eo);
  return Engine::load(eo);
}

std::string random_mtp_model() {
  static const std::string path = make_model(
      "spec_qwen35_mtp", "--arch qwen35 --layers 4 --dim 128 --ff 256 --heads 2 --kv-heads 1 --head-dim 64 "
                         "--ssm-state 32 --ssm-k-heads 1 --ssm-v-heads 2 --untied --type q8_0 --seed 31 --mtp-layers 1");
  return path;
}

std::vector<Token> test_prompt(int64_t V, int p) {
  std::vector<Token> prompt;
  for (int i = 0; i < 5 + 3 * p; ++i) prompt.push_back(static_cast<Token>((i * 37 + p * 101 + 11) % V));
  return prompt;
}

// A verify-shaped forward of n rows (snapshots, every row's outputs) after a prompt gives
// each row the bits of token-by-token decode (graphs on in both), then accept() of j rows
// leaves the state that decode of j rows leaves (the next step's logits agree).
void expect_verify_equals_decode(const std::string& path, const std::function<void(EngineOptions&)>& tweak = {}) {
  auto e = load_cuda(path, 512, tweak);
  const int64_t V = e->info().n_vocab;
  const std::vector<Token> prompt = test_prompt(V, 1);
  std::vector<Token> tail;
  for (int i = 0; i < kMaxRows + 1; ++i) tail.push_back(static_cast<Token>((i * 613 + 5) % V));
  Session dec(*e);
  dec.prefill(prompt);
  std::vector<std::vector<float>> ref;  // decode logits of tail[0..8]
  for (int i = 0; i <= kMaxRows; ++i) {
    const ForwardOutputs o = dec.append({tail[static_cast<size_t>(i)]});
    ref.push_back(dec.download_logits(o, 0));
  }
  for (int64_t n = 2; n <= kMaxRows; ++n) {
    for (int rep = 0; rep < 3; ++rep) {  // eager, recorded, replayed
      Session s(*e, kMaxRows);
      s.prefill(prompt);
      AppendOptions ao;
      ao.all_outputs = true;
      ao.snapshots = true;
      const ForwardOutputs o = s.append(std::vector<Token>(tail.begin(), tail.begin() + n), ao);
      for (int64_t r = 0; r < n; ++r) {
        const std::vector<float> got = s.download_logits(o, r);
        EXPECT_TRUE(same_bits(got.data(), ref[static_cast<size_t>(r)].data(), got.size()))
            << path << ": verify of " << n << " rows, row " << r << " (pass " << rep << ")";
      }
      const int64_t j = 1 + (n + rep) % n;  // accept j rows, then decode the token after them
      s.rewind(static_cast<int64_t>(prompt.size()) + j);
      const ForwardOutputs o2 = s.append({tail[static_cast<size_t>(j)]});
      const std::vector<float> got = s.download_logits(o2, 0);
      EXPECT_TRUE(same_bits(got.data(), ref[static_cast<size_t>(j)].data(), got.size()))
          << path << ": decode after accepting " << j << " of " << n << " rows";
    }
  }
}

TEST(CudaSpecModels, VerifyRowsEqualDecodeRandomQwen35) {
  DF_REQUIRE_GPU();
  expect_verify_equals_decode(random_mtp_model());
}

TEST(CudaSpecModels, VerifyRowsEqualDecodeDefaultModel) {
  DF_REQUIRE_GPU();
  expect_verify_equals_decode(source_file("models/default.gguf"));
}

GenerateOptions greedy(int64_t n) {
  GenerateOptions g;
  g.sampling.temperature = 0.0f;
  g.max_new_tokens = n;
  g.stop_at_eog = true;
  return g;
}

std::vector<Token> plain(Engine& e, const std::vector<Token>& prompt, const GenerateOptions& g) {
  Session s(e);
  PlainGenerator pg(s, g);
  return pg.run(prompt, {});
}

spec::SpecOptions fixed_depth(int depth) {
  spec::SpecOptions so;
  so.mode = spec::SpecMode::MTP;
  so.draft_max = depth;
  so.draft_fixed = true;
  return so;
}

std::vector<Token> speculative(Engine& e, const std::vector<Token>& prompt, const GenerateOptions& g,
                               const spec::SpecOptions& so, spec::SpecStats* st = nullptr) {
  Session s(e, so.draft_max + 1);
  spec::MtpGenerator gen(s, g, so);
  std::vector<Token> out = gen.run(prompt, {});
  if (st) *st = gen.stats();
  return out;
}

std::string heldout_slice(size_t at_frac_num, size_t chars) {
  std::ifstream f(source_file("models/heldout.txt"));
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  return text.substr(text.size() / 4 * at_frac_num, chars);
}

TEST(CudaSpecGenerate, DefaultModelGreedyIdenticalAtEveryDepth) {
  DF_REQUIRE_GPU();
  auto e = load_cuda(source_file("models/default.gguf"));
  ASSERT_NE(e->model().mtp(), nullptr);
  int64_t drafted = 0, accepted = 0;
  for (size_t i = 1; i <= 2; ++i) {
    const std::vector<Token> prompt = e->tokenizer().encode(heldout_slice(i, 240), false);
    const int64_t n = 61 + 7 * static_cast<int64_t>(i);  // lengths that end inside drafts
    const auto ref = plain(*e, prompt, greedy(n));
    for (int depth = 1; depth <= 7; ++depth) {
      spec::SpecStats st;
      EXPECT_EQ(speculative(*e, prompt, greedy(n), fixed_depth(depth), &st), ref)
          << "prompt " << i << " depth " << depth;
      drafted += st.drafted;
      accepted += st.accepted;
    }
    spec::SpecOptions adaptive = fixed_depth(3);
    adaptive.draft_fixed = false;
    EXPECT_EQ(speculative(*e, prompt, greedy(n), adaptive), ref) << "prompt " << i << " adaptive";
  }
  ASSERT_GT(drafted, 0);
  std::printf("default model on CUDA: %lld of %lld drafts accepted (depths 1..7)\n", static_cast<long long>(accepted),
              static_cast<long long>(drafted));
  EXPECT_GT(static_cast<double>(accepted) / static_cast<double>(drafted), 0.25);
}

TEST(CudaSpecGenerate, RandomHeadGreedyIdenticalAtEveryDepthWithOracle) {
  DF_REQUIRE_GPU();
  auto e = load_cuda(random_mtp_model());
  ASSERT_NE(e->model().mtp(), nullptr);
  const int64_t V = e->tokenizer().n_vocab();
  for (int p = 0; p < 3; ++p) {
    const std::vector<Token> prompt = test_prompt(V, p);
    for (int64_t n : {1, 5, 29}) {
      const auto ref = plain(*e, prompt, greedy(n));
      for (int depth = 1; depth <= 7; ++depth) {
        EXPECT_EQ(speculative(*e, prompt, greedy(n), fixed_depth(depth)), ref)
            << "prompt " << p << " n " << n << " depth " << depth;
        // The oracle accepts long prefixes (every accept length 0..depth occurs).
        spec::SpecOptions so = fixed_depth(depth);
        so.draft_accept = 0.7;
        so.oracle = ref;
        spec::SpecStats st;
        EXPECT_EQ(speculative(*e, prompt, greedy(n), so, &st), ref)
            << "prompt " << p << " n " << n << " depth " << depth << " oracle 0.7";
        if (n == 29) {
          EXPECT_GT(st.accepted, 0) << "the oracle's drafts must be accepted";
        }
      }
    }
  }
}

// One head row (token `tok` at position 0 after the hidden state cos(freq * i)) on the whole head
// of `full` and the drafting head of `trimmed`: their logits (n_vocab, and the drafting columns).
std::pair<std::vector<float>, std::vector<float>> head_row_logits(Engine& full, Engine& trimmed, Token tok, float freq) {
  StateOptions so;
  so.n_ctx = 8;
  so.max_chunk = 1;
  std::vector<std::shared_ptr<Buffer>> bufs;
  const int64_t dim = full.info().n_embd;
  std::vector<float> h(static_cast<size_t>(dim));
  for (size_t i = 0; i < h.size(); ++i) h[i] = std::cos(freq * static_cast<float>(i));
  std::vector<float> out[2];
  Engine* es[2] = {&full, &trimmed};
  for (int k = 0; k < 2; ++k) {
    Backend& b = es[k]->backend();
    const Tensor hp = alloc_tensor(b, GgmlType::F32, dim, 1, bufs);
    b.upload(hp, h.data(), h.size() * sizeof(float));
    auto st = es[k]->model().mtp()->new_state(so);
    const ForwardOutputs o = es[k]->model().mtp()->forward(*st, Batch::sequence(&tok, 1, 0, false), hp);
    out[k].resize(static_cast<size_t>(o.logits.cols));
    b.download(o.logits, out[k].data(), out[k].size() * sizeof(float));
  }
  return {std::move(out[0]), std::move(out[1])};
}

// A trimmed drafting vocabulary (EngineOptions::draft_vocab: the head's output projection's first
// rows packed as a weight of their own): the output stays plain decoding's at every depth, the
// drafts (ids below the trim) are still accepted, and the head's logits are close to the whole
// head's first columns (another matrix, so another split of its rows over warps: not the bits).
TEST(CudaSpecGenerate, DraftVocabularyKeepsTheOutput) {
  DF_REQUIRE_GPU();
  auto e = load_cuda(source_file("models/default.gguf"));
  const int64_t V = e->info().n_vocab, n_trim = V / 2;
  auto t = load_cuda(source_file("models/default.gguf"), 512, [&](EngineOptions& eo) { eo.draft_vocab = n_trim; });
  ASSERT_EQ(t->model().mtp()->draft_vocab(), n_trim);
  const std::vector<Token> prompt = e->tokenizer().encode(heldout_slice(1, 240), false);
  const auto ref = plain(*e, prompt, greedy(67));
  int64_t drafted = 0, accepted = 0;
  for (int depth : {1, 3, 7}) {
    spec::SpecStats st;
    EXPECT_EQ(speculative(*t, prompt, greedy(67), fixed_depth(depth), &st), ref) << "depth " << depth;
    drafted += st.drafted;
    accepted += st.accepted;
  }
  EXPECT_GT(accepted, 0) << "of " << drafted << " drafts";
  // the head's logits of one row: trimmed vs the first n_trim of the whole head's
  const auto [lf, lt] = head_row_logits(*e, *t, prompt[3], 0.11f);
  ASSERT_EQ(static_cast<int64_t>(lt.size()), n_trim);
  double err = 0, ref2 = 0;
  for (int64_t i = 0; i < n_trim; ++i) {
    err += (lt[static_cast<size_t>(i)] - lf[static_cast<size_t>(i)]) * (lt[static_cast<size_t>(i)] - lf[static_cast<size_t>(i)]);
    ref2 += lf[static_cast<size_t>(i)] * lf[static_cast<size_t>(i)];
  }
  EXPECT_LT(err / ref2, 1e-10) << "trimmed head logits vs the whole head's first columns (nmse)";
}

// The drafting vocabulary's prefix and context slots (EngineOptions::draft_context; a few slots,
// replaced as the text moves on: Backend::weight_set_row packs rows into the slots' weight, the
// drafts' argmax maps columns to ids on the device): the output stays plain decoding's, drafts
// are accepted, and each slot column is the whole head's logit of its token (another matrix:
// close, not the bits).
TEST(CudaSpecGenerate, DraftContextSlotsKeepTheOutput) {
  DF_REQUIRE_GPU();
  auto e = load_cuda(source_file("models/default.gguf"));
  const int64_t N = 256, S = 24;
  auto t = load_cuda(source_file("models/default.gguf"), 512, [&](EngineOptions& eo) {
    eo.draft_vocab = N;
    eo.draft_context = S;
  });
  MtpHead* th = t->model().mtp();
  ASSERT_EQ(th->draft_slots(), S);
  const std::vector<Token> prompt = e->tokenizer().encode(heldout_slice(2, 240), false);
  const auto ref = plain(*e, prompt, greedy(67));
  int64_t drafted = 0, accepted = 0;
  for (int depth : {1, 3, 7}) {
    spec::SpecStats st;
    EXPECT_EQ(speculative(*t, prompt, greedy(67), fixed_depth(depth), &st), ref) << "depth " << depth;
    drafted += st.drafted;
    accepted += st.accepted;
  }
  EXPECT_GT(accepted, drafted / 4) << "of " << drafted << " drafts";
  ASSERT_EQ(th->draft_columns_used(), N + S);
  // one head row (a token below N: the slots stay as they are): every column vs the whole head's
  // logit of its token
  const auto [lf, lt] = head_row_logits(*e, *t, 5, 0.13f);
  ASSERT_EQ(static_cast<int64_t>(lt.size()), N + S);
  double err = 0, ref2 = 0;
  for (int64_t c = 0; c < N + S; ++c) {
    const float want = lf[static_cast<size_t>(th->draft_id(c))], got = lt[static_cast<size_t>(c)];
    err += (got - want) * (got - want);
    ref2 += want * want;
  }
  EXPECT_LT(err / ref2, 1e-10) << "the drafting columns vs the whole head's logits of their tokens (nmse)";
  // the device argmax over the columns is the token with the best of those logits
  Backend& b = t->backend();
  std::vector<std::shared_ptr<Buffer>> ib;
  const Tensor lg = alloc_tensor(b, GgmlType::F32, N + S, 1, ib);
  b.upload(lg, lt.data(), lt.size() * sizeof(float));
  const Tensor best = alloc_tensor(b, GgmlType::I32, 1, 1, ib);
  b.argmax_ids(lg, th->draft_ids(), best);
  int32_t got_id = -1;
  b.download(best, &got_id, sizeof(got_id));
  int64_t bc = 0;
  for (int64_t c = 1; c < N + S; ++c)
    if (lt[static_cast<size_t>(c)] > lt[static_cast<size_t>(bc)]) bc = c;
  EXPECT_EQ(got_id, th->draft_id(bc));
}

// ---- CudaOptions::copy_batch (off by default until it has run here) ----

void copy_batch_on(EngineOptions& eo) { eo.cuda_copy_batch = true; }

TEST(CudaSpecModels, CopyBatchVerifyRowsEqualDecode) {
  DF_REQUIRE_GPU();
  expect_verify_equals_decode(random_mtp_model(), copy_batch_on);
  expect_verify_equals_decode(source_file("models/default.gguf"), copy_batch_on);
}

// The state copies and the q / gate split in one launch: the tokens of the per-copy engine,
// plain and speculative (the oracle makes every accept length occur, so accept() copies slots).
TEST(CudaSpecGenerate, CopyBatchGivesTheSameTokens) {
  DF_REQUIRE_GPU();
  for (const std::string& path : {random_mtp_model(), source_file("models/default.gguf")}) {
    auto off = load_cuda(path);
    auto on = load_cuda(path, 512, copy_batch_on);
    const int64_t V = on->tokenizer().n_vocab();
    for (int p = 0; p < 2; ++p) {
      const std::vector<Token> prompt = test_prompt(V, p);
      const auto ref = plain(*off, prompt, greedy(29));
      EXPECT_EQ(plain(*on, prompt, greedy(29)), ref) << path << " prompt " << p;
      for (int depth : {1, 3, 7}) {
        spec::SpecOptions so = fixed_depth(depth);
        so.draft_accept = 0.7;
        so.oracle = ref;
        EXPECT_EQ(speculative(*on, prompt, greedy(29), so), ref) << path << " prompt " << p << " depth " << depth;
      }
    }
  }
}

// ---- CudaOptions::mv_preround (x rounded once per matvec launch) ----

// Every int8-x matvec launch with x rounded by the pre-round kernel (threshold 1) gives a verify's
// rows the bits of decode, and the same logits as every block rounding x itself (threshold 0).
TEST(CudaSpecModels, PreroundVerifyRowsEqualDecodeAndTheBlocksBits) {
  DF_REQUIRE_GPU();
  for (const std::string& path : {random_mtp_model(), source_file("models/default.gguf")}) {
    expect_verify_equals_decode(path, [](EngineOptions& eo) { eo.cuda_mv_preround = 1; });
    auto off = load_cuda(path, 512, [](EngineOptions& eo) { eo.cuda_mv_preround = 0; });
    auto on = load_cuda(path, 512, [](EngineOptions& eo) { eo.cuda_mv_preround = 1; });
    const std::vector<Token> prompt = test_prompt(on->info().n_vocab, 2);
    Session a(*off, kMaxRows), b(*on, kMaxRows);
    a.prefill(prompt);
    b.prefill(prompt);
    AppendOptions ao;
    ao.all_outputs = true;
    const std::vector<Token> rows = {3, 1, 4, 1, 5, 9, 2};
    const ForwardOutputs oa = a.append(rows, ao), ob = b.append(rows, ao);
    for (int64_t r = 0; r < static_cast<int64_t>(rows.size()); ++r) {
      const std::vector<float> la = a.download_logits(oa, r), lb = b.download_logits(ob, r);
      EXPECT_TRUE(same_bits(la.data(), lb.data(), la.size())) << path << ": row " << r << " of 7, pre-round on vs off";
    }
  }
}

// ---- greedy decode with lookahead (EngineOptions::decode_lookahead) ----

// Queued steps (their ids read on the device, the id read back through pinned memory and an
// event) give the tokens of plain steps, for budgets that end the generation and callback
// stops that leave a step queued; a session continued afterwards gives the plain session's
// greedy tokens.
TEST(CudaGreedySteps, LookaheadGivesPlainTokens) {
  DF_REQUIRE_GPU();
  const std::string qwen3 = make_model(
      "lookahead_qwen3", "--layers 2 --dim 128 --ff 256 --heads 4 --kv-heads 2 --type q8_0 --seed 7");
  for (const std::string& path : {qwen3, random_mtp_model(), source_file("models/default.gguf")}) {
    auto off = load_cuda(path);
    auto on = load_cuda(path, 512, [](EngineOptions& eo) { eo.decode_lookahead = 1; });
    {
      Session s(*on);
      EXPECT_TRUE(GreedySteps(s).lookahead()) << "auto: on for the CUDA backend";
    }
    const int64_t V = on->tokenizer().n_vocab();
    for (int p = 0; p < 2; ++p) {
      const std::vector<Token> prompt = test_prompt(V, p);
      for (int64_t n : {1, 2, 40}) {
        for (int64_t stop_after : {int64_t{0}, int64_t{2}, int64_t{7}}) {
          std::vector<Token> got[2];
          std::vector<Token> next_tokens[2];
          for (int la = 0; la < 2; ++la) {
            Engine& e = la ? *on : *off;
            Session s(e);
            GenerateOptions g = greedy(n);
            PlainGenerator pg(s, g);
            int64_t seen = 0;
            got[la] = pg.run(prompt, [&](Token) { return stop_after == 0 || ++seen < stop_after; });
            std::vector<Token> cont = prompt;
            cont.insert(cont.end(), got[la].begin(), got[la].end());
            cont.push_back(static_cast<Token>((p * 97 + 13) % V));
            PlainGenerator pg2(s, greedy(6));
            next_tokens[la] = pg2.run(cont, {});
          }
          EXPECT_EQ(got[1], got[0]) << path << " prompt " << p << " n " << n << " stop after " << stop_after;
          EXPECT_EQ(next_tokens[1], next_tokens[0]) << path << " prompt " << p << " n " << n << " stop after " << stop_after
                                                    << ": the continued session";
        }
      }
    }
  }
}

}  // namespace
}  // namespace df::cudatest
