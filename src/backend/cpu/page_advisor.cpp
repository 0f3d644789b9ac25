#include "backend/cpu/page_advisor.h"

namespace df::cpu {

PageAdvisor::~PageAdvisor() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PageAdvisor::advise(std::span<const PageSpan> spans) {
  if (spans.empty()) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.insert(queue_.end(), spans.begin(), spans.end());
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  cv_.notify_one();
}

void PageAdvisor::drain() {
  std::unique_lock<std::mutex> lk(mu_);
  idle_.wait(lk, [&] { return queue_.empty() && !busy_; });
}

uint64_t PageAdvisor::pages_advised() {
  std::lock_guard<std::mutex> lk(mu_);
  return pages_;
}

void PageAdvisor::run() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_, and nothing left
    const PageSpan s = queue_.front();
    queue_.pop_front();
    busy_ = true;
    lk.unlock();
    advise_willneed(s);
    lk.lock();
    busy_ = false;
    pages_ += static_cast<uint64_t>(s.pages);
    if (queue_.empty()) idle_.notify_all();
  }
}

}  // namespace df::cpu
