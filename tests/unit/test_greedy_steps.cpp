// Greedy decode with lookahead (GreedySteps, EngineOptions::decode_lookahead): the step that
// appends the next id is queued before the host reads that id. On the CPU backend the steps
// run as they are queued, so these tests check the bookkeeping: the same tokens as plain
// greedy decoding for every way a generation ends (token budget, callback stop, context end),
// the session's record afterwards (pure attention: rewound; hybrid: the stop id consumed),
// and that a session continued afterwards gives a fresh session's logits. Also: a forward
// whose ids come from the device forgets the cached rows after them (Session::append with
// ids_from), however its placeholders compare with them.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "common/error.h"
#include "diskformer/engine.h"
#include "diskformer/generator.h"
#include "model_fixture.h"
#include "op_test_util.h"

namespace df {
namespace {

std::unique_ptr<Engine> load(const std::string& path, int lookahead, int64_t n_ctx = 256) {
  EngineOptions eo;
  eo.model_path = path;
  eo.cpu.threads = 2;
  eo.n_ctx = n_ctx;
  eo.prefill_chunk = 16;
  eo.decode_lookahead = lookahead;
  return Engine::load(eo);
}

std::vector<Token> ids(int64_t n, int64_t seed) {  // deterministic ordinary tokens
  std::vector<Token> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<Token>((seed * 131 + i * 37) % 250 + 1);
  return v;
}

struct Run {
  std::vector<Token> out;       // generated
  std::vector<Token> session;   // Session::tokens() afterwards
  std::vector<float> continued;  // logits after prefilling session tokens + a few more
};

// A generation of at most n tokens whose callback stops it after `stop_after` tokens (0:
// never), then the session continued with `more` tokens after what it holds of the prompt
// and the generated ids.
Run generate(Engine& e, const std::vector<Token>& prompt, int64_t n, int64_t stop_after, const std::vector<Token>& more) {
  Session s(e);
  GenerateOptions g;
  g.sampling.temperature = 0.0f;
  g.max_new_tokens = n;
  g.stop_at_eog = true;
  int64_t seen = 0;
  PlainGenerator pg(s, g);
  Run r;
  r.out = pg.run(prompt, [&](Token) { return stop_after == 0 || ++seen < stop_after; });
  r.session = s.tokens();
  std::vector<Token> next = prompt;
  next.insert(next.end(), r.out.begin(), r.out.end());
  next.insert(next.end(), more.begin(), more.end());
  r.continued = s.prefill(next);
  return r;
}

std::vector<float> fresh_logits(Engine& e, const std::vector<Token>& prompt) {
  Session s(e);
  return s.prefill(prompt);
}

// plain (lookahead off) against lookahead on: tokens, the session's record, a continuation
void expect_lookahead_is_plain(const std::string& path, bool hybrid) {
  auto plain = load(path, 0);
  auto ahead = load(path, 2);
  {
    Session s(*ahead);
    GreedySteps steps(s);
    EXPECT_TRUE(steps.lookahead());
  }
  for (int p = 0; p < 3; ++p) {
    const std::vector<Token> prompt = ids(5 + 7 * p, p + 1);
    for (int64_t n : {1, 2, 3, 17}) {
      for (int64_t stop_after : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{9}}) {
        SCOPED_TRACE("prompt " + std::to_string(p) + " n " + std::to_string(n) + " stop after " +
                     std::to_string(stop_after));
        const std::vector<Token> more = ids(4, 50 + p);
        const Run a = generate(*plain, prompt, n, stop_after, more);
        const Run b = generate(*ahead, prompt, n, stop_after, more);
        EXPECT_EQ(a.out, b.out);
        // A step is left queued when the generation stops before its budget: the callback
        // after 2..n-1 ids (the queued id is the last generated one), or a stop id after
        // 1..n-2 generated ids (the queued id is that stop id). Pure attention rewinds it; a
        // hybrid session keeps it consumed.
        const auto k = static_cast<int64_t>(a.out.size());
        const bool callback = stop_after > 0 && k == stop_after && stop_after < n;
        const bool stop_id = !callback && k < n;
        const bool queued = (callback && k >= 2) || (stop_id && k >= 1 && k + 1 < n);
        if (hybrid && queued) {
          ASSERT_EQ(b.session.size(), a.session.size() + 1);
          EXPECT_TRUE(std::equal(a.session.begin(), a.session.end(), b.session.begin()));
          if (callback) EXPECT_EQ(b.session.back(), a.out.back());
          else EXPECT_TRUE(ahead->tokenizer().is_stop(b.session.back()));
        } else {
          EXPECT_EQ(b.session, a.session);
        }
        if (queued && callback) {
          // The queued step's row (the last generated id) is reused by the continuation
          // (rewound but still in the KV cache; consumed on a hybrid model): the bits of a
          // plain session that decoded that id too.
          Session s(*plain);
          s.prefill(prompt);
          for (Token t : a.out) s.decode(t);
          std::vector<Token> next = prompt;
          next.insert(next.end(), a.out.begin(), a.out.end());
          next.insert(next.end(), more.begin(), more.end());
          EXPECT_EQ(s.prefill(next), b.continued);
        } else if (queued && hybrid) {
          // the stop id consumed: continued from the prompt's checkpoint, the answer
          // recomputed by prompt kernels
          EXPECT_LT(optest::nerr(a.continued, b.continued), 1e-3);
        } else {
          EXPECT_EQ(b.continued, a.continued);  // the same rows, the same kernels: the same bits
        }
      }
    }
  }
}

TEST(GreedySteps, LookaheadGivesPlainTokensQwen3) {
  expect_lookahead_is_plain(modeltest::make_model("la_qwen3", modeltest::kQwen3Args), false);
}

TEST(GreedySteps, LookaheadGivesPlainTokensQwen35) {
  expect_lookahead_is_plain(modeltest::make_model("la_qwen35", modeltest::kQwen35Args), true);
}

TEST(GreedySteps, LookaheadGivesPlainTokensQuantizedQwen35) {
  std::string args = modeltest::kQwen35Args;
  args.replace(args.find("--type f32"), 10, "--type q8_0");
  expect_lookahead_is_plain(modeltest::make_model("la_qwen35_q8", args), true);
}

// The context ends the generation: the last step is never queued past it.
TEST(GreedySteps, LookaheadStopsAtTheEndOfTheContext) {
  const std::string path = modeltest::make_model("la_ctx", modeltest::kQwen35Args);
  const std::vector<Token> prompt = ids(30, 3);
  std::vector<Token> outs[2];
  for (int la = 0; la < 2; ++la) {
    auto e = load(path, 2 * la, 40);
    Session s(*e);
    GenerateOptions g;
    g.sampling.temperature = 0.0f;
    g.max_new_tokens = 100;
    g.stop_at_eog = false;
    PlainGenerator pg(s, g);
    outs[la] = pg.run(prompt, {});
    EXPECT_EQ(static_cast<int64_t>(outs[la].size()), 40 - 30 + 1);  // the last id is generated, not appended
    EXPECT_EQ(s.position(), 40);
  }
  EXPECT_EQ(outs[0], outs[1]);
}

// next() after a queued step must be given the id it returned.
TEST(GreedySteps, QueuedStepNeedsItsOwnId) {
  auto e = load(modeltest::make_model("la_misuse", modeltest::kQwen3Args), 2);
  Session s(*e);
  s.prefill(ids(6, 1));
  GreedySteps steps(s);
  const Token a = steps.next(ids(1, 9)[0], true);
  EXPECT_EQ(steps.position(), 7);
  EXPECT_EQ(s.position(), 8);
  EXPECT_THROW(steps.next(a + 1, true), Error);
  steps.drop_queued();
  EXPECT_EQ(s.position(), 7);
}

// Session::append with ids_from: a placeholder equal to the cached id at its row must not
// keep the cached rows after it, whose keys were computed after another id.
TEST(GreedySteps, DeviceIdsForgetTheCachedRowsAfterThem) {
  auto e = load(modeltest::make_model("la_ids", modeltest::kQwen3Args), 0);
  const std::vector<Token> p = ids(12, 4);
  Session s(*e);
  s.prefill(p);
  s.rewind(5);
  const Token x = p[5] == 7 ? 8 : 7;  // the real id at row 5, not p[5]
  std::vector<std::shared_ptr<Buffer>> owner;
  const Tensor dev = alloc_tensor(e->backend(), GgmlType::I32, 1, 1, owner);
  e->backend().upload(dev, &x, sizeof x);
  AppendOptions ao;
  ao.ids_from = dev;
  s.append({p[5]}, ao);  // the placeholder equals the cached id
  s.set_tokens(5, &x, 1);
  std::vector<Token> q(p.begin(), p.begin() + 5);
  q.push_back(x);
  q.insert(q.end(), p.begin() + 6, p.end());
  const std::vector<float> got = s.prefill(q);
  EXPECT_EQ(s.stats().reused_tokens, 6);  // rows 0..5; rows 6.. were computed after p[5]
  EXPECT_LT(optest::nerr(fresh_logits(*e, q), got), 1e-10);
}

}  // namespace
}  // namespace df
