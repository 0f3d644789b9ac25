#include "server/job.h"

namespace df::server {

bool Job::poll(JobUpdate& u, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(m_);
  cv_.wait_for(lock, timeout, [&] { return news_; });
  const bool had = news_;
  news_ = false;
  u.state = state_;
  u.text += text_;
  text_.clear();
  for (auto& lp : logprobs_) u.logprobs.push_back(std::move(lp));
  logprobs_.clear();
  u.finish_reason = finish_reason_;
  u.error = error_;
  u.usage = usage_;
  return had;
}

void Job::start(int64_t cached_tokens) {
  std::lock_guard<std::mutex> lock(m_);
  state_ = JobState::RUNNING;
  usage_.prompt_tokens = static_cast<int64_t>(prompt.size());
  usage_.cached_tokens = cached_tokens;
  started_at_ = Clock::now();
  news_ = true;
  cv_.notify_all();
}

void Job::emit(const std::string& text, const TokenLogprob* lp, bool counts_as_token) {
  std::lock_guard<std::mutex> lock(m_);
  if (counts_as_token) {
    if (usage_.completion_tokens == 0) first_token_at_ = Clock::now();
    ++usage_.completion_tokens;
  }
  text_ += text;
  if (lp) logprobs_.push_back(*lp);
  if (!text.empty() || lp) {
    news_ = true;
    cv_.notify_all();
  }
}

void Job::finish(const std::string& reason, const std::string& error) {
  std::lock_guard<std::mutex> lock(m_);
  if (state_ == JobState::DONE) return;
  if (state_ == JobState::QUEUED) started_at_ = Clock::now();
  state_ = JobState::DONE;
  finish_reason_ = reason;
  error_ = error;
  news_ = true;
  cv_.notify_all();
}

Usage Job::usage() const {
  std::lock_guard<std::mutex> lock(m_);
  return usage_;
}

Clock::time_point Job::started_at() const {
  std::lock_guard<std::mutex> lock(m_);
  return started_at_;
}

Clock::time_point Job::first_token_at() const {
  std::lock_guard<std::mutex> lock(m_);
  return first_token_at_;
}

}  // namespace df::server
