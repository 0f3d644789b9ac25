#include "backend/cpu/thread_pool.h"

#include <chrono>
#include <stdexcept>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace df::cpu {

namespace {
// One poll of a spin-wait: a pause instruction (no system call; sched_yield on every poll cost
// ~20 % of a decode's samples on a virtual machine), and every 1024th poll a yield, so that an
// oversubscribed pool still lets the thread it waits for run.
void spin_pause(uint32_t& polls) {
  if ((++polls & 1023u) == 0) {
    std::this_thread::yield();
    return;
  }
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
    word_.store(((word_.load() >> kTaskBits) + 1) << kTaskBits);  // a new open job number: wakes the workers
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_tasks(uint64_t job, int thread) {
  uint64_t w = word_.load(std::memory_order_acquire);
  for (;;) {
    if ((w >> kTaskBits) != job) return;  // a later job: this one is finished
    const auto t = static_cast<int64_t>(w & kClosed);
    // All handed out (or closed). Acquire: a count of a later job comes with its closed word,
    // which then fails the compare-and-swap below.
    if (t >= n_tasks_.load(std::memory_order_acquire)) return;
    if (!word_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    (*fn_.load(std::memory_order_relaxed))(t, thread);  // the job cannot end before this task is done
    done_.fetch_add(1, std::memory_order_acq_rel);
    w = word_.load(std::memory_order_acquire);
  }
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;  // the last job this worker took part in
  // The current job's number once it is open (its tasks handed out), else `seen`.
  auto open_job = [&] {
    const uint64_t w = word_.load(std::memory_order_acquire);
    return (w & kClosed) == kClosed ? seen : w >> kTaskBits;
  };
  for (;;) {
    // Spin for a short while, then sleep until the next job.
    const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
    uint64_t j = open_job();
    uint32_t polls = 0;
    while (j == seen && ((polls & 63u) != 0 || std::chrono::steady_clock::now() < spin_until)) {
      spin_pause(polls);
      j = open_job();
    }
    if (j == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return open_job() != seen; });
      j = open_job();
    }
    seen = j;
    if (stop_.load()) return;
    run_tasks(j, index);
  }
}

void ThreadPool::parallel_for(int64_t n_tasks, const std::function<void(int64_t, int)>& fn) {
  if (n_tasks <= 0) return;
  if (n_threads_ == 1 || n_tasks == 1) {
    for (int64_t t = 0; t < n_tasks; ++t) fn(t, 0);
    return;
  }
  if (n_tasks >= static_cast<int64_t>(kClosed)) throw std::length_error("thread pool: too many tasks in one job");
  // The previous job's tasks are all done. Close: a thread still holding its word fails its
  // compare-and-swap from now on; then the new fn and count; then open.
  const uint64_t job = (word_.load(std::memory_order_relaxed) >> kTaskBits) + 1;
  word_.store(job << kTaskBits | kClosed, std::memory_order_seq_cst);
  fn_.store(&fn, std::memory_order_relaxed);
  n_tasks_.store(n_tasks, std::memory_order_release);
  done_.store(0, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mu_);
    word_.store(job << kTaskBits, std::memory_order_release);
  }
  cv_.notify_all();
  run_tasks(job, 0);
  uint32_t polls = 0;
  while (done_.load(std::memory_order_acquire) != n_tasks) spin_pause(polls);
}

}  // namespace df::cpu
