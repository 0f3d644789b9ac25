// One generation request on its way through the scheduler, shared by the HTTP thread that
// answers the client and the decode loop that computes it. The loop appends released text
// (and log-probabilities) and finally a finish reason; the HTTP thread drains what is new.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "server/token_choice.h"
#include "tokenizer/tokenizer.h"

namespace df::server {

using Clock = std::chrono::steady_clock;

struct GenParams {
  ChoiceOptions choice;
  int64_t max_tokens = -1;               // -1: until the end of the context
  std::vector<std::string> stop;         // stop strings (not included in the output)
  bool ignore_eos = false;
  std::vector<int64_t> checkpoint_at;    // prompt positions to keep a recurrent-state checkpoint at
  Clock::time_point deadline = Clock::time_point::max();  // generation ends ("length") past it
};

enum class JobState { QUEUED, RUNNING, DONE };

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;      // of the prompt, taken from the slot's cache
  int64_t completion_tokens = 0;
};

// What the HTTP side takes out of a job in one poll.
struct JobUpdate {
  JobState state = JobState::QUEUED;
  std::string text;                      // text released since the last poll
  std::vector<TokenLogprob> logprobs;    // tokens generated since the last poll
  std::string finish_reason;             // when DONE: stop | length | cancelled | error
  std::string error;                     // when finish_reason == error
  Usage usage;
};

class Job {
 public:
  Job(std::vector<Token> prompt, GenParams params)
      : prompt(std::move(prompt)), params(std::move(params)), queued_at(Clock::now()) {}
  const std::vector<Token> prompt;
  const GenParams params;
  const Clock::time_point queued_at;

  // ---- HTTP side ----
  // Waits until something new is available (state change, text, logprobs) or `timeout`
  // passes; moves it into `u` (u.state is always current). Returns true when u has news.
  bool poll(JobUpdate& u, std::chrono::milliseconds timeout);
  // Stops the generation at the next step (the client went away); a queued job is dropped.
  void cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

  // ---- decode loop side ----
  void start(int64_t cached_tokens);
  void emit(const std::string& text, const TokenLogprob* lp, bool counts_as_token);
  void finish(const std::string& reason, const std::string& error = {});
  Usage usage() const;
  Clock::time_point started_at() const;
  Clock::time_point first_token_at() const;

 private:
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::atomic<bool> cancelled_{false};
  JobState state_ = JobState::QUEUED;
  bool news_ = false;
  std::string text_;
  std::vector<TokenLogprob> logprobs_;
  std::string finish_reason_, error_;
  Usage usage_;
  Clock::time_point started_at_{}, first_token_at_{};
};

}  // namespace df::server
