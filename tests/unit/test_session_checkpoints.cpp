// Session checkpoints on a small random qwen35 model (and the same API on qwen3), no llama.cpp
// (a unit test, run under the sanitizers too): capture /
// restore round trips, and prefix reuse that restarts from the nearest checkpoint, counted
// through Stats::prefilled_tokens and checked against a fresh session's logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "common/error.h"
#include "diskformer/engine.h"
#include "model_fixture.h"
#include "op_test_util.h"

namespace df {
namespace {

// mse(ref, got) / mse(ref, 0) over n floats
double normalised_error(const float* ref, const float* got, size_t n) {
  return optest::nerr(std::vector<float>(ref, ref + n), std::vector<float>(got, got + n));
}


std::unique_ptr<Engine> load(const std::string& path, int64_t every = 0, int max_kept = 4, int64_t chunk = 16) {
  EngineOptions eo;
  eo.model_path = path;
  eo.cpu.threads = 2;
  eo.n_ctx = 512;
  eo.prefill_chunk = chunk;
  eo.checkpoint_every = every;
  eo.max_checkpoints = max_kept;
  return Engine::load(eo);
}

std::unique_ptr<Engine> load_q35(int64_t every = 0, int max_kept = 4, int64_t chunk = 16) {
  return load(modeltest::make_model("ckpt_qwen35", modeltest::kQwen35Args), every, max_kept, chunk);
}

std::vector<Token> ids(int64_t n, int64_t seed) {  // deterministic ordinary tokens
  std::vector<Token> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<Token>((seed * 131 + i * 37) % 250 + 1);
  return v;
}

Token argmax(const std::vector<float>& l) {
  return static_cast<Token>(std::max_element(l.begin(), l.end()) - l.begin());
}

// Greedy decode of n tokens; returns the tokens and the logits after each.
std::pair<std::vector<Token>, std::vector<std::vector<float>>> greedy(Session& s, int n) {
  std::vector<Token> toks;
  std::vector<std::vector<float>> logits;
  std::vector<float> cur = s.prefill(s.tokens());  // the logits after the current last token
  for (int i = 0; i < n; ++i) {
    toks.push_back(argmax(cur));
    cur = s.decode(toks.back());
    logits.push_back(cur);
  }
  return {toks, logits};
}

// The last-position logits of a fresh session over `prompt`.
std::vector<float> fresh_logits(Engine& e, const std::vector<Token>& prompt) {
  Session s(e);
  return s.prefill(prompt);
}

TEST(Qwen35Checkpoints, CaptureRestoreGivesIdenticalTokensAndLogits) {
  auto engine = load_q35();
  Session s(*engine);
  s.prefill(ids(37, 1));
  greedy(s, 9);                          // generate
  const SessionCheckpoint c = s.capture();
  ASSERT_EQ(c.tokens.size(), 37u + 9u);
  const auto first = greedy(s, 12);      // generate more
  s.restore(c);                          // back
  EXPECT_EQ(s.tokens(), c.tokens);
  const auto again = greedy(s, 12);      // and again
  EXPECT_EQ(first.first, again.first);
  ASSERT_EQ(first.second.size(), again.second.size());
  for (size_t i = 0; i < first.second.size(); ++i) EXPECT_EQ(first.second[i], again.second[i]) << "step " << i;
  // The continuation equals a fresh run over the same tokens (the state really was rewound;
  // a state that was not would be off by O(1)). Decode runs one-row products and the fresh
  // prefill batched ones, which sum in different orders: hence 1e-6, not bit equality.
  std::vector<Token> all = c.tokens;
  all.insert(all.end(), again.first.begin(), again.first.end() - 1);
  const auto ref = fresh_logits(*engine, all);
  EXPECT_LT(normalised_error(ref.data(), again.second[again.second.size() - 2].data(), ref.size()), 1e-6);
  // Restoring twice works, and after a restore the logits are those at the checkpoint.
  s.restore(c);
  const auto after = s.prefill(c.tokens);  // a re-prefill of the same tokens reuses the state
  EXPECT_LT(normalised_error(c.logits.data(), after.data(), after.size()), 1e-10);
}

TEST(Qwen35Checkpoints, RestoreRefusesWhenTheCacheWasOverwritten) {
  auto engine = load_q35();
  Session s(*engine);
  s.prefill(ids(40, 2));
  const SessionCheckpoint c = s.capture();
  auto other = ids(40, 2);
  other[10] = other[10] % 200 + 3;  // diverges before the checkpoint's end
  s.prefill(other);
  EXPECT_THROW(s.restore(c), Error);
}

TEST(Qwen35Checkpoints, ThreeTurnChatPrefillsOnlyTheNewTurn) {
  auto engine = load_q35();
  Session s(*engine);
  GenerateOptions go;
  go.max_new_tokens = 8;
  go.stop_at_eog = false;
  std::vector<Token> prompt = ids(30, 3);
  int64_t new_tokens = 30;  // tokens of this turn the model has not seen
  for (int turn = 0; turn < 3; ++turn) {
    const auto cached = static_cast<int64_t>(s.tokens().size());  // what the state holds
    const auto out = s.generate(prompt, go, nullptr);
    ASSERT_EQ(out.size(), 8u);
    EXPECT_EQ(s.stats().prefilled_tokens, static_cast<int64_t>(prompt.size()) - cached) << "turn " << turn;
    EXPECT_EQ(s.stats().reused_tokens, cached) << "turn " << turn;
    EXPECT_EQ(s.stats().prefilled_tokens, new_tokens) << "turn " << turn;
    // The next turn: this prompt, the answer, a new user message.
    prompt.insert(prompt.end(), out.begin(), out.end());
    const auto user = ids(11 + turn, 10 + turn);
    prompt.insert(prompt.end(), user.begin(), user.end());
    // New: the user message, and the answer's last token (sampled, never run through).
    new_tokens = static_cast<int64_t>(user.size()) + 1;
  }
  // The state after three turns equals a fresh computation.
  const auto got = s.prefill(prompt);  // a fourth turn without generation
  EXPECT_LT(normalised_error(fresh_logits(*engine, prompt).data(), got.data(), got.size()), 1e-10);
}

TEST(Qwen35Checkpoints, ChatHistoryMarkSurvivesAReRenderedAnswer) {
  // A chat template renders a past answer differently from the tokens generated (e.g. without
  // its think block): the next prompt diverges right after the history. A checkpoint marked
  // at the history's end is where the next turn restarts.
  auto engine = load_q35();
  Session s(*engine);
  const auto history = ids(25, 20);
  const auto header = ids(4, 21);  // "<|im_start|>assistant\n<think>\n" of the generation prompt
  std::vector<Token> prompt = history;
  prompt.insert(prompt.end(), header.begin(), header.end());
  GenerateOptions go;
  go.max_new_tokens = 6;
  go.stop_at_eog = false;
  go.checkpoint_at = {static_cast<int64_t>(history.size())};
  EXPECT_EQ(s.generate(prompt, go, nullptr).size(), 6u);
  std::vector<Token> next = history;
  const auto rendered = ids(9, 22);  // the answer as the template renders it, then a new turn
  next.insert(next.end(), rendered.begin(), rendered.end());
  next.insert(next.end(), header.begin(), header.end());
  const auto got = s.prefill(next);
  EXPECT_EQ(s.stats().reused_tokens, 25);
  EXPECT_EQ(s.stats().prefilled_tokens, static_cast<int64_t>(next.size()) - 25);
  EXPECT_LT(normalised_error(fresh_logits(*engine, next).data(), got.data(), got.size()), 1e-10);
}

TEST(Qwen35Checkpoints, EditedPromptRestartsFromTheNearestCheckpoint) {
  auto engine = load_q35(/*every=*/16, /*max_kept=*/8, /*chunk=*/7);
  Session s(*engine);
  const auto base = ids(60, 4);
  s.prefill(base);
  EXPECT_EQ(s.checkpoint_positions(), (std::vector<int64_t>{16, 32, 48, 60}));
  // Diverge at position 40: the nearest checkpoint at or before it is 32.
  auto edited = base;
  edited[40] = edited[40] % 200 + 5;
  edited.resize(55);
  const auto got = s.prefill(edited);
  EXPECT_EQ(s.stats().reused_tokens, 32);
  EXPECT_EQ(s.stats().prefilled_tokens, 55 - 32);
  EXPECT_EQ(s.checkpoint_positions(), (std::vector<int64_t>{16, 32, 48, 55}));  // 48 recomputed, 60 gone
  EXPECT_LT(normalised_error(fresh_logits(*engine, edited).data(), got.data(), got.size()), 1e-10);
  // Back to a prefix of the original prompt: the tokens up to 40 are still cached.
  std::vector<Token> prefix(base.begin(), base.begin() + 45);
  const auto got2 = s.prefill(prefix);
  EXPECT_EQ(s.stats().reused_tokens, 32);
  EXPECT_LT(normalised_error(fresh_logits(*engine, prefix).data(), got2.data(), got2.size()), 1e-10);
}

TEST(Qwen35Checkpoints, WithoutACheckpointItRestartsFromZero) {
  auto engine = load_q35(/*every=*/0, /*max_kept=*/0);
  Session s(*engine);
  s.prefill(ids(50, 5));
  EXPECT_TRUE(s.checkpoint_positions().empty());
  auto edited = ids(50, 5);
  edited[30] = edited[30] % 200 + 7;
  const auto got = s.prefill(edited);
  EXPECT_EQ(s.stats().reused_tokens, 0);
  EXPECT_EQ(s.stats().prefilled_tokens, 50);
  EXPECT_LT(normalised_error(fresh_logits(*engine, edited).data(), got.data(), got.size()), 1e-10);
  // Appending to the current state needs no checkpoint.
  auto longer = edited;
  longer.push_back(9);
  s.prefill(longer);
  EXPECT_EQ(s.stats().prefilled_tokens, 1);
}

TEST(Qwen35Checkpoints, KeepsAtMostMaxCheckpointsDroppingPeriodicFirst) {
  auto engine = load_q35(/*every=*/8, /*max_kept=*/3, /*chunk=*/64);
  Session s(*engine);
  s.prefill(ids(20, 6));  // periodic 8, 16; prompt 20
  EXPECT_EQ(s.checkpoint_positions(), (std::vector<int64_t>{8, 16, 20}));
  auto longer = ids(20, 6);
  const auto more = ids(15, 7);
  longer.insert(longer.end(), more.begin(), more.end());
  s.prefill(longer);  // periodic 24, 32; prompt 35: the oldest periodic ones go
  EXPECT_EQ(s.checkpoint_positions(), (std::vector<int64_t>{20, 32, 35}));
}

TEST(Qwen3Checkpoints, PureAttentionRewindsWithoutCheckpoints) {
  const std::string m = modeltest::make_model(
      "ckpt_qwen3", "--layers 2 --dim 128 --ff 256 --heads 2 --kv-heads 1 --head-dim 64 --untied --type f32 --seed 32");
  auto engine = load(m, /*every=*/16);
  Session s(*engine);
  s.prefill(ids(50, 8));
  EXPECT_TRUE(s.checkpoint_positions().empty());
  auto edited = ids(50, 8);
  edited[37] = edited[37] % 200 + 9;
  const auto got = s.prefill(edited);
  EXPECT_EQ(s.stats().reused_tokens, 37);  // the exact shared prefix
  EXPECT_LT(normalised_error(fresh_logits(*engine, edited).data(), got.data(), got.size()), 1e-10);
  // capture / restore work the same way
  const SessionCheckpoint c = s.capture();
  const auto a = greedy(s, 5);
  s.restore(c);
  const auto b = greedy(s, 5);
  EXPECT_EQ(a.first, b.first);
  EXPECT_EQ(a.second, b.second);
}

}  // namespace
}  // namespace df
