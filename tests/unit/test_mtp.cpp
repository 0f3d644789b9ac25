// The qwen35 / qwen35moe MTP head (Model::mtp()) fed as llama.cpp's draft-mtp feeds graph_mtp: MTP row p
// carries token x_p at position p and the trunk's final hidden state h_{p-1} (zeros at p = 0),
// and predicts x_{p+1}, the token after the one the trunk predicted at p-1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "diskformer/engine.h"
#include "model_fixture.h"

namespace df {
namespace {

std::unique_ptr<Engine> load(const std::string& path) {
  EngineOptions eo;
  eo.model_path = path;
  eo.device = "cpu";
  eo.cpu.threads = 2;
  return Engine::load(eo);
}

// MTP logits [n, n_vocab] of every position of `toks`, the trunk and the head run chunk by chunk.
std::vector<float> mtp_logits(Engine& e, const std::vector<Token>& toks, int64_t chunk) {
  Model& model = e.model();
  Backend& b = e.backend();
  MtpHead* head = model.mtp();
  const int64_t n = static_cast<int64_t>(toks.size()), dim = e.info().n_embd;
  StateOptions so;
  so.n_ctx = n;
  so.max_chunk = chunk;
  auto trunk = model.new_state(so);
  auto ms = head->new_state(so);
  std::vector<std::shared_ptr<Buffer>> bufs;
  const Tensor hp = alloc_tensor(b, GgmlType::F32, dim, chunk, bufs);
  std::vector<float> prev(static_cast<size_t>(dim), 0.0f), h, out;
  for (int64_t c0 = 0; c0 < n; c0 += chunk) {
    const int64_t L = std::min(chunk, n - c0);
    const Batch batch = Batch::sequence(toks.data() + c0, L, c0, true);
    const ForwardOutputs t = model.forward(*trunk, batch, ForwardOptions{false, false});  // hidden only
    h.resize(static_cast<size_t>(L * dim));
    b.download(t.hidden, h.data(), t.hidden.nbytes());
    std::vector<float> shifted(prev);  // row i: h_{c0 + i - 1}
    shifted.insert(shifted.end(), h.begin(), h.end() - dim);
    prev.assign(h.end() - dim, h.end());
    b.upload(hp.slice_rows(0, L), shifted.data(), shifted.size() * sizeof(float));
    const ForwardOutputs m = head->forward(*ms, batch, hp.slice_rows(0, L));
    const size_t off = out.size();
    out.resize(off + static_cast<size_t>(m.logits.cols * L));
    b.download(m.logits, out.data() + off, m.logits.nbytes());
  }
  return out;
}

TEST(Mtp, RandomModelHeadRunsAndGivesFiniteLogits) {
  auto e = load(modeltest::make_model("mtp_qwen35", std::string(modeltest::kQwen35Args) + " --mtp-layers 1"));
  ASSERT_NE(e->model().mtp(), nullptr);
  std::vector<Token> toks;
  for (int i = 0; i < 20; ++i) toks.push_back(static_cast<Token>(1 + (i * 37) % 200));
  const auto a = mtp_logits(*e, toks, 8), b = mtp_logits(*e, toks, 8);
  ASSERT_EQ(a.size(), toks.size() * static_cast<size_t>(e->info().n_vocab));
  for (float v : a) ASSERT_TRUE(std::isfinite(v));
  EXPECT_EQ(a, b);  // a fresh head state gives the same bits
  // Not a constant: the logits vary with the position.
  EXPECT_NE(std::vector<float>(a.begin(), a.begin() + 10),
            std::vector<float>(a.end() - e->info().n_vocab, a.end() - e->info().n_vocab + 10));
  auto plain = load(modeltest::make_model("rows_qwen35", modeltest::kQwen35Args));
  EXPECT_EQ(plain->model().mtp(), nullptr);
}

// The qwen35moe head (a gated-attention block with the MoE FFN): the same checks. Not compared
// with llama.cpp (llama_ref has no MTP mode).
TEST(Mtp, RandomMoeModelHeadRunsAndGivesFiniteLogits) {
  auto e = load(modeltest::make_model("mtp_qwen35moe", std::string(modeltest::kQwen35MoeArgs) + " --mtp-layers 1"));
  ASSERT_NE(e->model().mtp(), nullptr);
  std::vector<Token> toks;
  for (int i = 0; i < 20; ++i) toks.push_back(static_cast<Token>(1 + (i * 37) % 200));
  const auto a = mtp_logits(*e, toks, 8), b = mtp_logits(*e, toks, 8);
  ASSERT_EQ(a.size(), toks.size() * static_cast<size_t>(e->info().n_vocab));
  for (float v : a) ASSERT_TRUE(std::isfinite(v));
  EXPECT_EQ(a, b);
  EXPECT_NE(std::vector<float>(a.begin(), a.begin() + 10),
            std::vector<float>(a.end() - e->info().n_vocab, a.end() - e->info().n_vocab + 10));
  // chunking does not change the head's result beyond rounding
  const auto c = mtp_logits(*e, toks, 3);
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (static_cast<double>(a[i]) - c[i]) * (static_cast<double>(a[i]) - c[i]);
    den += static_cast<double>(a[i]) * a[i];
  }
  EXPECT_LT(num / den, 1e-10);
}

// The shipped model's head on the held-out text: its top-1 for x_{p+1} beats chance (1/8192)
// by far (training measured 59.5 % on its held-out split; README).
TEST(Mtp, DefaultModelPredictsTheTokenAfterNext) {
  auto e = load(modeltest::default_model());
  ASSERT_NE(e->model().mtp(), nullptr);
  std::ifstream f(std::string(DF_SOURCE_DIR) + "/models/heldout.txt", std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  std::vector<Token> toks = e->tokenizer().encode(ss.str(), false);
  ASSERT_GT(toks.size(), 300u);
  toks.resize(256);
  const int64_t V = e->info().n_vocab;
  const auto lg = mtp_logits(*e, toks, 64);
  int hits = 0, total = 0;
  for (size_t p = 1; p + 1 < toks.size(); ++p) {
    const float* row = lg.data() + p * static_cast<size_t>(V);
    const auto best = static_cast<Token>(std::max_element(row, row + V) - row);
    hits += best == toks[p + 1];
    ++total;
  }
  const double acc = static_cast<double>(hits) / total;
  std::printf("default model MTP top-1 (token after next) on held-out text: %.1f %% of %d\n", 100 * acc, total);
  EXPECT_GT(acc, 0.3);
}

// A trimmed drafting vocabulary (EngineOptions::draft_vocab, MtpHead::set_draft_vocab): the
// head's logits are the whole vocabulary's first N columns, bit for bit (the same rows of the
// same weight, the same kernels on the CPU), on the held-out text's positions.
TEST(Mtp, DraftVocabularyIsThePrefixOfTheLogits) {
  auto full = load(modeltest::default_model());
  const int64_t V = full->info().n_vocab;
  std::ifstream f(std::string(DF_SOURCE_DIR) + "/models/heldout.txt", std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  std::vector<Token> toks = full->tokenizer().encode(ss.str(), false);
  toks.resize(96);
  const auto ref = mtp_logits(*full, toks, 32);
  for (const int64_t n : {V / 2, int64_t{300}}) {
    EngineOptions eo;
    eo.model_path = modeltest::default_model();
    eo.device = "cpu";
    eo.cpu.threads = 2;
    eo.draft_vocab = n;
    auto e = Engine::load(eo);
    ASSERT_EQ(e->model().mtp()->draft_vocab(), n);
    const auto lg = mtp_logits(*e, toks, 32);
    ASSERT_EQ(lg.size(), toks.size() * static_cast<size_t>(n));
    int differ = 0;
    for (size_t p = 0; p < toks.size(); ++p)
      differ += !std::equal(lg.begin() + static_cast<std::ptrdiff_t>(p * n), lg.begin() + static_cast<std::ptrdiff_t>((p + 1) * n),
                            ref.begin() + static_cast<std::ptrdiff_t>(p * V));
    EXPECT_EQ(differ, 0) << "positions whose " << n << " logits are not the full head's first " << n;
  }
  EngineOptions eo;
  eo.model_path = modeltest::default_model();
  eo.device = "cpu";
  eo.draft_vocab = V + 5;  // past the vocabulary: all of it
  EXPECT_EQ(Engine::load(eo)->model().mtp()->draft_vocab(), V);
  eo.draft_vocab = -1;
  EXPECT_THROW(Engine::load(eo), Error);
}

// Context slots of the drafting vocabulary (EngineOptions::draft_context, models/draft_vocab.h):
// columns [N, N + S) score the tokens with ids >= N met in the head's input, first met first kept,
// the oldest replaced when all S are taken; a column not yet taken scores token 0. On the CPU
// every column is the whole head's logit of its token, bit for bit (the same row bytes, the same
// planar kernels).
TEST(Mtp, DraftContextSlotsScoreTheContextsTokens) {
  auto full = load(modeltest::default_model());
  const int64_t V = full->info().n_vocab, N = 300;
  std::ifstream f(std::string(DF_SOURCE_DIR) + "/models/heldout.txt", std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  std::vector<Token> toks = full->tokenizer().encode(ss.str(), false);
  toks.resize(96);
  // One row a forward for both (a multi-row call of the whole head runs the CPU's batched kernels:
  // other bits than the slots' one-row products).
  const auto ref = mtp_logits(*full, toks, 1);
  // The policy, in the order the head meets the tokens (rows in order).
  auto expected_slots = [&](int64_t S, int64_t upto) {
    std::vector<Token> held;
    size_t oldest = 0;
    for (int64_t i = 0; i < upto; ++i) {
      const Token t = toks[static_cast<size_t>(i)];
      if (t < N || std::find(held.begin(), held.end(), t) != held.end()) continue;
      if (static_cast<int64_t>(held.size()) < S) {
        held.push_back(t);
      } else {
        held[oldest] = t;
        oldest = (oldest + 1) % static_cast<size_t>(S);
      }
    }
    return held;
  };
  for (const int64_t S : {int64_t{512}, int64_t{5}}) {
    EngineOptions eo;
    eo.model_path = modeltest::default_model();
    eo.device = "cpu";
    eo.cpu.threads = 2;
    eo.draft_vocab = N;
    eo.draft_context = S;
    auto e = Engine::load(eo);
    MtpHead* h = e->model().mtp();
    ASSERT_EQ(h->draft_vocab(), N);
    ASSERT_EQ(h->draft_slots(), S);
    const auto lg = mtp_logits(*e, toks, 1);
    const int64_t C = N + S;
    ASSERT_EQ(lg.size(), toks.size() * static_cast<size_t>(C));
    const std::vector<Token> held = expected_slots(S, static_cast<int64_t>(toks.size()));
    ASSERT_EQ(h->draft_columns_used(), N + static_cast<int64_t>(held.size()));
    for (int64_t c = 0; c < static_cast<int64_t>(held.size()); ++c) EXPECT_EQ(h->draft_id(N + c), held[static_cast<size_t>(c)]);
    EXPECT_EQ(h->draft_id(7), 7);
    // Every row: prefix columns = the whole head's first N; slot columns score the tokens the
    // slots held at that row (its own token noted first), untaken columns token 0.
    int differ = 0, slot_differ = 0;
    for (size_t p = 0; p < toks.size(); ++p) {
      const float* row = lg.data() + p * static_cast<size_t>(C);
      const float* rr = ref.data() + p * static_cast<size_t>(V);
      differ += !std::equal(row, row + N, rr);
      const std::vector<Token> at = expected_slots(S, static_cast<int64_t>(p) + 1);
      for (int64_t c = N; c < C; ++c) {
        const auto k = static_cast<size_t>(c - N);
        slot_differ += row[c] != rr[k < at.size() ? at[k] : 0];
      }
    }
    EXPECT_EQ(differ, 0) << "positions whose prefix columns are not the full head's (S " << S << ")";
    EXPECT_EQ(slot_differ, 0) << "slot columns that are not their token's logit (S " << S << ")";
  }
  EngineOptions eo;
  eo.model_path = modeltest::default_model();
  eo.device = "cpu";
  eo.draft_context = 8;  // slots without a prefix: an error
  EXPECT_THROW(Engine::load(eo), Error);
}

// A head forward's rows before its first output row only fill its KV cache (they skip the
// query, attention output, FFN and logits; Mtp::forward): the output row's logits and hidden
// state, and a later row's (which attends to the skipped rows' K and V), keep the bits of a
// forward where every row runs the whole block. Catch-up shapes (row-exact, last row output)
// and cache-only forwards (no output) of 1..8 rows, on the shipped model and a random MoE one.
void expect_cache_rows_keep_bits(Engine& e) {
  MtpHead* head = e.model().mtp();
  ASSERT_NE(head, nullptr);
  Backend& b = e.backend();
  const int64_t dim = e.info().n_embd, V = e.info().n_vocab, kMax = 8;
  StateOptions so;
  so.n_ctx = 2 * kMax + 2;
  so.max_chunk = kMax;
  std::vector<std::shared_ptr<Buffer>> bufs;
  const Tensor hp = alloc_tensor(b, GgmlType::F32, dim, kMax, bufs);
  std::vector<float> h(static_cast<size_t>(dim * kMax));
  for (size_t i = 0; i < h.size(); ++i) h[i] = std::sin(0.37f * static_cast<float>(i)) * 3.0f;
  b.upload(hp, h.data(), h.size() * sizeof(float));
  std::vector<Token> toks(kMax + 1);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<Token>((i * 977 + 13) % static_cast<size_t>(V));
  auto download = [&](const Tensor& t) {
    std::vector<float> v(static_cast<size_t>(t.rows * t.cols));
    b.download(t, v.data(), t.nbytes());
    return v;
  };
  auto last_row = [&](const Tensor& t) {
    std::vector<float> v = download(t);
    return std::vector<float>(v.end() - t.cols, v.end());
  };
  for (int64_t n = 1; n <= kMax; ++n) {
    // reference: every row outputs (every row runs the whole block)
    auto ref = head->new_state(so);
    const ForwardOutputs r = head->forward(*ref, Batch::sequence(toks.data(), n, 0, true), hp.slice_rows(0, n));
    const std::vector<float> ref_logits = last_row(r.logits), ref_hidden = last_row(r.hidden);
    const ForwardOutputs r2 = head->forward(*ref, Batch::sequence(&toks[static_cast<size_t>(n)], 1, n, false),
                                            hp.slice_rows(0, 1));
    const std::vector<float> ref_next = download(r2.logits);
    // catch-up shape: the last row outputs
    auto cu = head->new_state(so);
    const ForwardOutputs c = head->forward(*cu, Batch::sequence(toks.data(), n, 0, false), hp.slice_rows(0, n));
    EXPECT_EQ(last_row(c.logits), ref_logits) << n << " rows, last row's logits";
    EXPECT_EQ(last_row(c.hidden), ref_hidden) << n << " rows, last row's hidden state";
    const ForwardOutputs c2 = head->forward(*cu, Batch::sequence(&toks[static_cast<size_t>(n)], 1, n, false),
                                           hp.slice_rows(0, 1));
    EXPECT_EQ(download(c2.logits), ref_next) << n << " rows, the next row's logits";
    // cache-only forward (no output), then the next row
    auto co = head->new_state(so);
    head->forward(*co, Batch::sequence(toks.data(), n, 0, false, false), hp.slice_rows(0, n));
    const ForwardOutputs o2 = head->forward(*co, Batch::sequence(&toks[static_cast<size_t>(n)], 1, n, false),
                                            hp.slice_rows(0, 1));
    EXPECT_EQ(download(o2.logits), ref_next) << n << " cache-only rows, the next row's logits";
  }
}

TEST(Mtp, CacheOnlyRowsKeepTheOutputBits) {
  auto e = load(modeltest::default_model());
  expect_cache_rows_keep_bits(*e);
}

TEST(Mtp, CacheOnlyRowsKeepTheOutputBitsMoe) {
  auto e = load(modeltest::make_model("mtp_qwen35moe", std::string(modeltest::kQwen35MoeArgs) + " --mtp-layers 1"));
  expect_cache_rows_keep_bits(*e);
}

}  // namespace
}  // namespace df
