// The CPU backend's thread pool: every task of every job runs exactly once, jobs in a row of any
// size, more threads than cores (workers the OS runs late), and the calling thread alone.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "backend/cpu/thread_pool.h"

namespace df::cpu {
namespace {

// n_jobs jobs of varying task counts in a row; counts[t] is incremented by task t of each job.
void run_jobs(ThreadPool& pool, int n_jobs) {
  for (int j = 0; j < n_jobs; ++j) {
    const int64_t n = 1 + (j * 7919) % 97;  // 1..97 tasks
    std::vector<std::atomic<int>> counts(static_cast<size_t>(n));
    std::atomic<int> bad_thread{0};
    pool.parallel_for(n, [&](int64_t t, int thread) {
      if (thread < 0 || thread >= pool.size()) bad_thread.fetch_add(1);
      counts[static_cast<size_t>(t)].fetch_add(1);
    });
    // parallel_for returned: every task ran once, and none runs later
    for (int64_t t = 0; t < n; ++t) ASSERT_EQ(counts[static_cast<size_t>(t)].load(), 1) << "job " << j << " task " << t;
    ASSERT_EQ(bad_thread.load(), 0);
  }
}

TEST(ThreadPool, EveryTaskOnceInManyJobs) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    run_jobs(pool, 3000);
  }
}

TEST(ThreadPool, MoreThreadsThanCores) {
  ThreadPool pool(8);  // on CI's 2 cores most workers are not running when a job starts
  run_jobs(pool, 2000);
}

TEST(ThreadPool, SleepingWorkersWakeForLaterJobs) {
  ThreadPool pool(2);
  run_jobs(pool, 10);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // past the spin: the worker sleeps
  std::atomic<int> by_worker{0};
  for (int j = 0; j < 200 && by_worker.load() == 0; ++j)
    pool.parallel_for(64, [&](int64_t, int thread) {
      if (thread != 0) by_worker.fetch_add(1);
      volatile double x = 0;
      for (int i = 0; i < 20000; ++i) x = x + i;  // long enough for a woken worker to join
    });
  EXPECT_GT(by_worker.load(), 0) << "the worker never took a task";
}

}  // namespace
}  // namespace df::cpu
