// The server's scheduler on the default model: greedy answers of jobs decoded together
// (with more jobs than slots, and sampled jobs beside them) equal Session::generate's alone;
// a returning prompt reuses its slot's cache; cancelled and expired jobs end.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "diskformer/engine.h"
#include "server/scheduler.h"
#include "test_util.h"

namespace df::server {
namespace {

Engine& engine() {
  static std::unique_ptr<Engine> e = [] {
    EngineOptions o;
    o.model_path = std::string(DF_SOURCE_DIR) + "/models/default.gguf";
    o.device = "cpu";
    o.cpu.threads = 1;
    o.n_ctx = 256;
    return Engine::load(o);
  }();
  return *e;
}

GenParams greedy(int64_t n) {
  GenParams p;
  p.choice.sampling.temperature = 0.0f;
  p.max_tokens = n;
  return p;
}

// Drains a job to its end; returns its text.
std::string wait_text(Job& job, JobUpdate* last = nullptr) {
  JobUpdate u;
  std::string text;
  do {
    job.poll(u, std::chrono::milliseconds(100));
    text += u.text;
    u.text.clear();
  } while (u.state != JobState::DONE);
  if (last) *last = u;
  return text;
}

const char* kPrompts[] = {"def fibonacci(n):\n", "import os\n", "class Stack:\n    def __init__(self):\n",
                          "for i in range(10):\n", "def is_prime(n):\n", "# Sort a list\n"};

TEST(ServerScheduler, ConcurrentGreedyEqualsAlone) {
  const int64_t n = 12;
  std::vector<std::string> alone;
  for (const char* p : kPrompts) {
    Session s(engine());
    GenerateOptions g;
    g.max_new_tokens = n;
    std::string text;
    StreamDecoder d(engine().tokenizer());
    s.generate(engine().tokenizer().encode(p, true), g, [&](Token t) {
      text += d.push(t);
      return true;
    });
    alone.push_back(text + d.flush());
  }
  Scheduler sched(engine(), {.n_slots = 4});
  std::vector<std::shared_ptr<Job>> jobs;
  for (int rep = 0; rep < 2; ++rep)
    for (const char* p : kPrompts) {
      jobs.push_back(std::make_shared<Job>(engine().tokenizer().encode(p, true), greedy(n)));
      // A sampled job beside every greedy one.
      GenParams hot = greedy(n);
      hot.choice.sampling.temperature = 1.0f;
      hot.choice.sampling.seed = 7;
      hot.choice.frequency_penalty = 0.5f;
      jobs.push_back(std::make_shared<Job>(engine().tokenizer().encode(p, true), hot));
    }
  for (auto& j : jobs) sched.submit(j);
  for (size_t i = 0; i < jobs.size(); ++i) {
    JobUpdate u;
    const std::string text = wait_text(*jobs[i], &u);
    if (i % 2 == 0) {
      EXPECT_EQ(text, alone[(i / 2) % std::size(kPrompts)]) << "job " << i;
    }
    EXPECT_TRUE(u.finish_reason == "length" || u.finish_reason == "stop") << u.finish_reason;
  }
  const SchedulerCounters c = sched.counters();
  EXPECT_EQ(c.started, static_cast<int64_t>(jobs.size()));
  EXPECT_GT(static_cast<double>(c.step_rows) / static_cast<double>(c.steps), 1.5);  // slots advanced together
  EXPECT_EQ(c.active, 0);
}

TEST(ServerScheduler, ReturningPromptReusesItsSlot) {
  Scheduler sched(engine(), {.n_slots = 3});
  const std::vector<Token> a = engine().tokenizer().encode("def alpha(x):\n    return x + 1\n\n\n", true);
  const std::vector<Token> b = engine().tokenizer().encode("import sys\nimport os\n", true);
  for (const auto* p : {&a, &b}) {
    auto j = std::make_shared<Job>(*p, greedy(4));
    sched.submit(j);
    wait_text(*j);
  }
  // The same prompt again, extended: it goes to the slot that holds it.
  GenParams g = greedy(4);
  std::vector<Token> a2 = a;
  for (Token t : engine().tokenizer().encode("def beta(y):\n", true)) a2.push_back(t);
  auto j = std::make_shared<Job>(a2, g);
  sched.submit(j);
  wait_text(*j);
  EXPECT_GE(j->usage().cached_tokens, static_cast<int64_t>(a.size()) - 1) << "prefix not reused";
}

TEST(ServerScheduler, CancelAndDeadline) {
  Scheduler sched(engine(), {.n_slots = 1});
  GenParams forever = greedy(-1);
  forever.ignore_eos = true;
  auto running = std::make_shared<Job>(engine().tokenizer().encode("x = 1\n", true), forever);
  auto queued = std::make_shared<Job>(engine().tokenizer().encode("y = 2\n", true), forever);
  sched.submit(running);
  sched.submit(queued);
  JobUpdate u;
  while (running->poll(u, std::chrono::milliseconds(100)), u.usage.completion_tokens < 3) {
  }
  queued->cancel();
  running->cancel();
  wait_text(*running, &u);
  EXPECT_EQ(u.finish_reason, "cancelled");
  wait_text(*queued, &u);
  EXPECT_EQ(u.finish_reason, "cancelled");
  GenParams limited = forever;
  limited.deadline = Clock::now() + std::chrono::milliseconds(200);
  auto timed = std::make_shared<Job>(engine().tokenizer().encode("z = 3\n", true), limited);
  sched.submit(timed);
  wait_text(*timed, &u);
  EXPECT_EQ(u.finish_reason, "length");
  EXPECT_GT(u.usage.completion_tokens, 0);
  EXPECT_EQ(sched.counters().active, 0);
}

// One job's outcome: its text, finish reason and completion tokens.
struct Outcome {
  std::string text, reason;
  int64_t tokens = 0;
  bool operator==(const Outcome&) const = default;
};

Outcome finish(Job& j) {
  JobUpdate u;
  Outcome o;
  o.text = wait_text(j, &u);
  o.reason = u.finish_reason;
  o.tokens = u.usage.completion_tokens;
  return o;
}

// A fixed set of jobs through a scheduler: one at a time (lengths that end inside drafts, a
// stop string, a job that fills the context, a continuation that reuses a slot's cache), then
// three greedy jobs and a sampled one at once (batched plain steps; the last greedy job goes on
// alone). Returns every job's outcome in order.
std::vector<Outcome> run_job_set(const SchedulerOptions& so, SchedulerCounters* counters = nullptr) {
  Scheduler sched(engine(), so);
  const Tokenizer& tok = engine().tokenizer();
  std::vector<Outcome> out;
  auto one = [&](const std::vector<Token>& prompt, const GenParams& g) {
    auto j = std::make_shared<Job>(prompt, g);
    sched.submit(j);
    out.push_back(finish(*j));
  };
  for (const char* p : kPrompts)
    for (int64_t n : {1, 5, 13, 40}) one(tok.encode(p, true), greedy(n));
  GenParams stop = greedy(60);
  stop.stop = {"\n\n", "return"};
  for (const char* p : kPrompts) one(tok.encode(p, true), stop);
  GenParams fill = greedy(-1);
  fill.ignore_eos = true;
  one(tok.encode("def parse(line):\n", true), fill);  // until the context (256) ends
  const std::vector<Token> a = tok.encode("def alpha(x):\n    return x + 1\n\n\n", true);
  one(a, greedy(20));
  std::vector<Token> a2 = a;
  for (Token t : tok.encode("def beta(y):\n", true)) a2.push_back(t);
  one(a2, greedy(20));
  std::vector<std::shared_ptr<Job>> together;
  for (int i = 0; i < 3; ++i) together.push_back(std::make_shared<Job>(tok.encode(kPrompts[i], true), greedy(30 + 15 * i)));
  GenParams hot = greedy(40);
  hot.choice.sampling.temperature = 1.0f;
  hot.choice.sampling.seed = 11;
  together.push_back(std::make_shared<Job>(tok.encode(kPrompts[3], true), hot));
  for (auto& j : together) sched.submit(j);
  for (auto& j : together) out.push_back(finish(*j));
  if (counters) *counters = sched.counters();
  return out;
}

// Speculative decoding in the server: every job's text, finish reason and token count equal
// plain decoding's, adaptive and at fixed depths (1, 3, 7); at a fixed depth a lone greedy slot
// advances several tokens a forward.
TEST(ServerScheduler, SpeculativeEqualsPlain) {
  SchedulerCounters pc;
  const std::vector<Outcome> plain = run_job_set({.n_slots = 4}, &pc);
  EXPECT_EQ(pc.spec_cycles, 0);
  // Under the sanitizers (~10x slower, looking for memory errors) the adaptive depth and the
  // deepest fixed one only.
  std::vector<std::pair<int, bool>> runs{{3, false}, {1, true}, {3, true}, {7, true}};
  if (testutil::kUnderSanitizer) runs = {{3, false}, {7, true}};
  for (const auto& [depth, fixed] : runs) {
    SchedulerOptions so{.n_slots = 4};
    so.spec.mode = spec::SpecMode::MTP;
    so.spec.draft_max = depth;
    so.spec.draft_fixed = fixed;
    SchedulerCounters c;
    const std::vector<Outcome> got = run_job_set(so, &c);
    ASSERT_EQ(got.size(), plain.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].text, plain[i].text) << "job " << i << " depth " << depth << (fixed ? " fixed" : "");
      EXPECT_EQ(got[i].reason, plain[i].reason) << "job " << i;
      EXPECT_EQ(got[i].tokens, plain[i].tokens) << "job " << i;
    }
    // Plain decoding: one token a slot a forward; at a fixed depth the lone jobs' cycles give
    // more (the adaptive depth's choice depends on the machine's timings: not checked).
    EXPECT_GT(c.spec_cycles, 0);
    EXPECT_GE(c.spec_drafted, c.spec_cycles);
    EXPECT_GT(c.spec_accepted, 0);
    EXPECT_LE(c.spec_accepted, c.spec_drafted);
    if (fixed) {
      EXPECT_GT(static_cast<double>(c.generated_tokens) / static_cast<double>(c.step_rows), 1.3)
          << "depth " << depth << ": " << c.generated_tokens << " tokens in " << c.step_rows << " slot-forwards";
    }
    EXPECT_EQ(c.active, 0);
  }
}

TEST(ServerScheduler, SpeculationNeedsAHead) {
  // The default model has an MTP head; a head-less model is refused with a named error.
  const std::string path = testutil::make_model_in(testutil::test_dir(DF_UNIT_WORK_DIR), "sched_no_head",
                                                    "--layers 1 --dim 64 --ff 128 --heads 2 --kv-heads 1 --head-dim 32");
  EngineOptions o;
  o.model_path = path;
  o.device = "cpu";
  o.cpu.threads = 1;
  o.n_ctx = 64;
  auto e = Engine::load(o);
  SchedulerOptions so{.n_slots = 1};
  so.spec.mode = spec::SpecMode::MTP;
  try {
    Scheduler sched(*e, so);
    FAIL() << "no error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("MTP"), std::string::npos) << err.what();
  }
}

}  // namespace
}  // namespace df::server
