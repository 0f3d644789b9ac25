// The server's scheduler: N slots, each a Session with its own cache, a FIFO queue beyond
// them, and one decode-loop thread. Each loop iteration admits queued jobs into free slots
// (the slot whose cache holds the longest prefix of the prompt wins, so a returning
// conversation reuses its own cache), prefills them, then advances every active slot by one
// token in one step: ONE batched forward over all their states (Session::append_each), one
// device argmax for the greedy rows, a logits download only for rows that sample, penalise
// or report log-probabilities. With speculative decoding on (SchedulerOptions::spec, a model
// with an MTP head) a greedy slot that is alone in a step advances by an MTP cycle instead
// (drafts, one verify forward: 1..draft_max + 1 tokens, the same tokens as plain decoding);
// in steps of several slots each slot's head takes its row as a plain step's.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "diskformer/engine.h"
#include "server/job.h"
#include "server/stop_matcher.h"
#include "server/token_choice.h"
#include "spec/mtp_generator.h"

namespace df::server {

struct SchedulerOptions {
  int n_slots = 1;
  // Most rows in one decode forward (0: all active slots). A step with more active slots
  // runs several forwards of at most this many rows: backends compute a row with the same
  // bits whatever its neighbours only up to a bound (the CPU backend's exact_rows).
  int step_rows = 0;
  // Speculative decoding of greedy jobs (mode MTP: the model must have an MTP head); the
  // slots' sessions then keep draft_max + 1 snapshot slots. Off unless asked for.
  spec::SpecOptions spec = [] {
    spec::SpecOptions o;
    o.mode = spec::SpecMode::NONE;
    return o;
  }();
};

// Cumulative figures for /metrics.
struct SchedulerCounters {
  int64_t n_slots = 0;
  int64_t active = 0;             // jobs in slots
  int64_t queued = 0;             // jobs waiting for a slot
  int64_t started = 0;            // jobs admitted to a slot
  int64_t finished_stop = 0, finished_length = 0, cancelled = 0, failed = 0;
  int64_t prompt_tokens = 0;      // prompt tokens of admitted jobs
  int64_t cached_tokens = 0;      // of those, reused from a slot's cache
  int64_t generated_tokens = 0;
  int64_t steps = 0;              // decode steps (every active slot advances one token)
  int64_t forwards = 0;           // decode forwards (several per step past step_rows)
  int64_t step_rows = 0;          // sequences advanced, summed over the steps
  int64_t spec_cycles = 0;         // speculative steps that drafted (a lone greedy slot's MTP cycles)
  int64_t spec_drafted = 0;        // draft tokens proposed in them
  int64_t spec_accepted = 0;       // of those, accepted
  double prefill_seconds = 0.0;
  double decode_seconds = 0.0;    // time inside decode steps
  double recent_tokens_per_second = 0.0;  // generated tokens over the last 10 s
};

class Scheduler {
 public:
  Scheduler(Engine& engine, const SchedulerOptions& opt);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a job. Throws ApiError(503) once shutdown() has begun.
  void submit(std::shared_ptr<Job> job);
  // Stops taking jobs, lets queued and running ones finish until `grace` has passed, cancels
  // what is left, and joins the decode loop. Idempotent.
  void shutdown(std::chrono::milliseconds grace);
  SchedulerCounters counters() const;
  int n_slots() const { return static_cast<int>(slots_.size()); }
  const Engine& engine() const { return engine_; }

 private:
  struct Slot {
    std::unique_ptr<Session> session;
    std::shared_ptr<Job> job;                // null: free
    std::unique_ptr<TokenChooser> chooser;
    std::unique_ptr<StreamDecoder> decoder;
    std::unique_ptr<StopMatcher> stops;
    std::unique_ptr<spec::MtpGenerator> mtp;  // the slot's draft head (spec on), kept across jobs
    Token pending = -1;                      // the token the next step feeds
    int64_t generated = 0;
    uint64_t last_used = 0;                  // admission counter, for least-recently-used ties
  };

  void loop();
  // Under m_: drops cancelled or expired queued jobs, pairs queued jobs with free slots.
  std::vector<std::pair<Slot*, std::shared_ptr<Job>>> take_admissions();
  // Prefills the job's prompt in the slot and chooses its first token.
  void start(Slot& s, std::shared_ptr<Job> job);
  // One decode step: feeds each slot's pending token, then advances each by one token.
  void step(const std::vector<Slot*>& rows);
  // One forward of a step over rows (at most step_rows_ of them).
  void step_group(const std::vector<Slot*>& rows);
  // A step of one greedy slot with a draft head: an MTP cycle (MtpGenerator::step).
  void spec_step(Slot& s);
  // Chooses the slot's next token from host logits [n_vocab] and takes it.
  void advance(Slot& s, const float* logits);
  // Hands token t to the slot's job (logits: for its log-probabilities, may be null when
  // none are wanted); ends the job on a stop id, a stop string, max_tokens, the end of the
  // context or its deadline.
  void take(Slot& s, Token t, const float* logits);
  // take() without the release: the reason the job ends with t, or null (then t is the slot's
  // pending token). pos: the session position t comes at (-1: the session's own).
  const char* take_token(Slot& s, Token t, const float* logits, int64_t pos = -1);
  // Ends the slot's job with `reason`, releasing held-back text unless a stop string ended it.
  void release(Slot& s, const std::string& reason, const std::string& error = {});

  Engine& engine_;
  int step_rows_;
  std::vector<std::unique_ptr<Slot>> slots_;
  mutable std::mutex m_;
  std::condition_variable cv_;       // the loop waits for work
  std::condition_variable idle_cv_;  // shutdown waits for the queue and slots to drain
  std::deque<std::shared_ptr<Job>> queue_;
  bool accepting_ = true;
  bool cancel_all_ = false;
  bool stop_ = false;
  uint64_t admissions_ = 0;
  SchedulerCounters c_;
  std::deque<std::pair<Clock::time_point, int64_t>> recent_;  // (time, generated_tokens) per step
  std::vector<std::shared_ptr<Buffer>> buffers_;
  Tensor best_;                      // [n_slots, 1] i32: the device argmax of a step
  std::vector<Token> best_host_;
  std::vector<float> row_;           // one downloaded logits row
  std::thread thread_;
};

}  // namespace df::server
