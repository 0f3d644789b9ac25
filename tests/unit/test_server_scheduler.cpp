// The server's scheduler on the default model: greedy answers of jobs decoded together
// (with more jobs than slots, and sampled jobs beside them) equal Session::generate's alone;
// a returning prompt reuses its slot's cache; cancelled and expired jobs end.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "diskformer/engine.h"
#include "server/scheduler.h"

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

}  // namespace
}  // namespace df::server
