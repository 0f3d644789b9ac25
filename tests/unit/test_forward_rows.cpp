// The forward interface on random qwen3 / qwen35 models and the default model, no llama.cpp:
//   - row-count independence: a row's logits are the same bits decoded alone or inside a
//     forward of up to 8 rows (decode and verify sizes), and inside a batch of two sequences;
//   - rollback without replay: append k+1 rows with snapshots, rewind to j of them, continue
//     == plain decode of the first j rows, then continuing (bit-exact);
//   - rewind through checkpoints (replay) and truncation on pure-attention models.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "common/error.h"
#include "diskformer/engine.h"
#include "model_fixture.h"

namespace df {
namespace {

std::unique_ptr<Engine> load(const std::string& path, int64_t snapshots = 8) {
  EngineOptions eo;
  eo.model_path = path;
  eo.device = "cpu";
  eo.cpu.threads = 2;
  eo.n_ctx = 256;
  eo.prefill_chunk = 16;
  eo.max_snapshots = snapshots;
  return Engine::load(eo);
}

std::vector<Token> ids(int64_t n, int64_t seed, int64_t vocab) {  // deterministic ordinary tokens
  std::vector<Token> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<Token>((seed * 131 + i * 37) % (vocab - 2) + 1);
  return v;
}

// Host copy of every output row's logits.
std::vector<std::vector<float>> all_logits(Session& s, const ForwardOutputs& o) {
  std::vector<std::vector<float>> out;
  for (int64_t i = 0; i < o.n_out(); ++i) out.push_back(s.download_logits(o, i));
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// One row at a time vs m rows in one forward, m = 2..8, after the same prompt.
void row_count_case(const std::string& path) {
  auto e = load(path);
  const int64_t V = std::min<int64_t>(e->info().n_vocab, e->tokenizer().n_vocab());
  const auto prompt = ids(21, 3, V), rows = ids(8, 5, V);
  std::vector<std::vector<float>> alone;
  {
    Session s(*e);
    s.prefill(prompt);
    for (Token t : rows) alone.push_back(s.decode(t));
  }
  for (size_t m = 2; m <= rows.size(); ++m) {
    Session s(*e);
    s.prefill(prompt);
    AppendOptions ao;
    ao.all_outputs = true;
    const auto got = all_logits(s, s.append(std::vector<Token>(rows.begin(), rows.begin() + static_cast<long>(m)), ao));
    ASSERT_EQ(got.size(), m);
    for (size_t r = 0; r < m; ++r) EXPECT_TRUE(same_bits(alone[r], got[r])) << path << ": row " << r << " of " << m;
  }
}

TEST(ForwardRows, RowCountIndependenceQwen3) { row_count_case(modeltest::make_model("rows_qwen3", modeltest::kQwen3Args)); }
TEST(ForwardRows, RowCountIndependenceQwen35) { row_count_case(modeltest::make_model("rows_qwen35", modeltest::kQwen35Args)); }
TEST(ForwardRows, RowCountIndependenceDefaultModel) { row_count_case(modeltest::default_model()); }

// Two sequences in one forward (the server's batching) give each sequence's rows the bits
// they get alone.
void two_sequence_case(const std::string& path) {
  auto e = load(path);
  Model& model = e->model();
  const int64_t V = std::min<int64_t>(e->info().n_vocab, e->tokenizer().n_vocab());
  const auto pa = ids(13, 1, V), pb = ids(9, 2, V), ra = ids(3, 4, V), rb = ids(2, 6, V);
  StateOptions so;
  so.n_ctx = 128;
  so.max_chunk = 16;
  Backend& b = e->backend();
  auto logits_of = [&](const ForwardOutputs& o, int64_t i) {
    std::vector<float> v(static_cast<size_t>(o.logits.cols));
    b.download(o.logits.slice_rows(i, 1), v.data(), v.size() * sizeof(float));
    return v;
  };
  auto prefill = [&](ModelState& st, const std::vector<Token>& p) {
    model.forward(st, Batch::sequence(p.data(), static_cast<int64_t>(p.size()), 0, false, false));
  };
  std::vector<std::vector<float>> want;
  for (int which = 0; which < 2; ++which) {
    auto st = model.new_state(so);
    const auto& p = which == 0 ? pa : pb;
    const auto& r = which == 0 ? ra : rb;
    prefill(*st, p);
    const ForwardOutputs o = model.forward(*st, Batch::sequence(r.data(), static_cast<int64_t>(r.size()),
                                                                static_cast<int64_t>(p.size()), true));
    for (int64_t i = 0; i < o.n_out(); ++i) want.push_back(logits_of(o, i));
  }
  auto sa = model.new_state(so), sb = model.new_state(so);
  prefill(*sa, pa);
  prefill(*sb, pb);
  Batch batch;
  for (size_t i = 0; i < ra.size(); ++i) batch.add(ra[i], static_cast<int32_t>(pa.size() + i), 0, true);
  for (size_t i = 0; i < rb.size(); ++i) batch.add(rb[i], static_cast<int32_t>(pb.size() + i), 1, true);
  ModelState* states[2] = {sa.get(), sb.get()};
  const ForwardOutputs o = model.forward(std::span<ModelState* const>(states, 2), batch);
  ASSERT_EQ(o.n_out(), static_cast<int64_t>(want.size()));
  for (int64_t i = 0; i < o.n_out(); ++i) EXPECT_TRUE(same_bits(want[static_cast<size_t>(i)], logits_of(o, i))) << path << " row " << i;
}

TEST(ForwardRows, TwoSequencesInOneBatchQwen3) { two_sequence_case(modeltest::make_model("rows_qwen3", modeltest::kQwen3Args)); }
TEST(ForwardRows, TwoSequencesInOneBatchQwen35) { two_sequence_case(modeltest::make_model("rows_qwen35", modeltest::kQwen35Args)); }

// Verify k+1 rows with snapshots, accept j of them (rewind), continue; against decoding the
// first j rows one by one and continuing.
void rollback_case(const std::string& path) {
  auto e = load(path);
  const int64_t V = std::min<int64_t>(e->info().n_vocab, e->tokenizer().n_vocab());
  const auto prompt = ids(19, 7, V), draft = ids(5, 8, V), more = ids(3, 9, V);
  for (size_t j = 1; j <= draft.size(); ++j) {
    Session plain(*e);
    plain.prefill(prompt);
    std::vector<std::vector<float>> want;
    for (size_t i = 0; i < j; ++i) want.push_back(plain.decode(draft[i]));
    for (Token t : more) want.push_back(plain.decode(t));

    Session spec(*e);
    spec.prefill(prompt);
    AppendOptions ao;
    ao.all_outputs = true;
    ao.snapshots = true;
    const auto verified = all_logits(spec, spec.append(draft, ao));
    const auto before = spec.checkpoint_positions();
    spec.rewind(static_cast<int64_t>(prompt.size() + j));
    EXPECT_EQ(spec.position(), static_cast<int64_t>(prompt.size() + j));
    EXPECT_EQ(spec.checkpoint_positions(), before);  // no checkpoint used
    std::vector<std::vector<float>> got(verified.begin(), verified.begin() + static_cast<long>(j));
    for (Token t : more) got.push_back(spec.decode(t));
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(same_bits(want[i], got[i])) << path << ": j " << j << " row " << i;
  }
}

TEST(ForwardRows, RollbackWithoutReplayQwen35) { rollback_case(modeltest::make_model("rows_qwen35", modeltest::kQwen35Args)); }
TEST(ForwardRows, RollbackWithoutReplayDefaultModel) { rollback_case(modeltest::default_model()); }
TEST(ForwardRows, RollbackQwen3Truncates) { rollback_case(modeltest::make_model("rows_qwen3", modeltest::kQwen3Args)); }

// A rewind past the last append's rows on a hybrid model goes through a checkpoint (or
// position 0) and recomputes the tokens after it.
TEST(ForwardRows, RewindThroughCheckpointReplays) {
  auto e = load(modeltest::make_model("rows_qwen35", modeltest::kQwen35Args));
  const int64_t V = std::min<int64_t>(e->info().n_vocab, e->tokenizer().n_vocab());
  const auto prompt = ids(30, 11, V), more = ids(6, 12, V);
  Session s(*e);
  s.prefill(prompt);
  for (Token t : more) s.decode(t);
  s.rewind(25);  // before the prompt's end checkpoint: replays from 0
  EXPECT_EQ(s.position(), 25);
  const std::vector<float> got = s.decode(prompt[25]);
  Session fresh(*e);  // the same chunks: 25 prompt tokens, then one
  fresh.prefill(std::vector<Token>(prompt.begin(), prompt.begin() + 25));
  const std::vector<float> want = fresh.decode(prompt[25]);
  EXPECT_TRUE(same_bits(want, got));
  EXPECT_THROW(s.rewind(40), Error);
}

}  // namespace
}  // namespace df
