// A background thread that advises page ranges MADV_WILLNEED (advise_willneed) in the order
// they were queued, so that the thread that queues them does not wait for the call: under
// memory pressure (a cgroup at its limit) the kernel allocates the readahead pages, reclaiming
// others, inside madvise, which then takes milliseconds. Used by the CPU backend's expert
// forecast (CpuOptions::expert_forecast), whose reads should overlap the layer's mixer.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <span>
#include <thread>

#include "backend/cpu/mapped_pages.h"

namespace df::cpu {

class PageAdvisor {
 public:
  PageAdvisor() = default;
  ~PageAdvisor();  // advises what is queued, then joins the thread
  PageAdvisor(const PageAdvisor&) = delete;
  PageAdvisor& operator=(const PageAdvisor&) = delete;
  // Queues the spans and returns (the thread starts on the first call).
  void advise(std::span<const PageSpan> spans);
  // Waits until every span queued so far has been advised.
  void drain();
  // Pages advised so far (counted when advised).
  uint64_t pages_advised();

 private:
  void run();
  std::mutex mu_;
  std::condition_variable cv_, idle_;
  std::deque<PageSpan> queue_;
  bool busy_ = false, stop_ = false;
  uint64_t pages_ = 0;
  std::thread thread_;
};

}  // namespace df::cpu
