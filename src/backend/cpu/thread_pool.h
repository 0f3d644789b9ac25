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
  // thread 0. Returns when all tasks are done: it waits for the tasks other threads took, never
  // for a worker that took none (a worker the OS has not run yet, on a loaded machine, does not
  // hold up the job; it finds the job finished when it runs).
  void parallel_for(int64_t n_tasks, const std::function<void(int64_t, int)>& fn);

 private:
  // The job word: the job's number in the high 64 - kTaskBits bits, the next task to hand out in
  // the low kTaskBits. A task is taken by a compare-and-swap of the whole word, so a thread that
  // read an earlier job's word cannot take a task of a later one. A job is published in two
  // steps: its number with the task field kClosed (no thread takes a task, and no stale thread
  // can take one of the previous job any more), then its fn and count, then the task field 0.
  static constexpr int kTaskBits = 24;
  static constexpr uint64_t kClosed = (uint64_t{1} << kTaskBits) - 1;

  void worker(int index);
  // Takes and runs tasks of job `job` until none is left (or a later job has started).
  void run_tasks(uint64_t job, int thread);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<uint64_t> word_{kClosed};  // job << kTaskBits | next task (job 0: none yet)
  std::atomic<int64_t> done_{0};         // tasks of the current job finished
  std::atomic<bool> stop_{false};
  // Of the current job, written while its word is closed (read only under an open word).
  std::atomic<int64_t> n_tasks_{0};
  std::atomic<const std::function<void(int64_t, int)>*> fn_{nullptr};
};

}  // namespace df::cpu
