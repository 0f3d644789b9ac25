// A fixed pool of worker threads for the CPU backend. parallel_for hands out task indices;
// workers spin briefly between jobs (decode issues hundreds of small jobs per token, and a
// condition-variable wake-up per job would cost more than the job), then sleep.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace df::cpu {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // Runs fn(task, thread) for every task in [0, n_tasks); the calling thread takes part as
  // thread 0. Returns when all tasks are done.
  void parallel_for(int64_t n_tasks, const std::function<void(int64_t, int)>& fn);

 private:
  void worker(int index);
  void run_tasks(int thread);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int64_t> next_task_{0};
  std::atomic<int> busy_{0};
  std::atomic<bool> stop_{false};
  int64_t n_tasks_ = 0;
  const std::function<void(int64_t, int)>* fn_ = nullptr;
};

}  // namespace df::cpu
