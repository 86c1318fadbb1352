// The thread pool runs every task of every job exactly once, with jobs posted back to back
// (so that a worker waking late meets a newer job), nested calls running serially, and
// tasks of very different lengths.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "rlx/thread_pool.h"

namespace rlx {
namespace {

TEST(ThreadPool, EveryTaskOnceAcrossManyJobs) {
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    for (int job = 0; job < 3000; ++job) {
      const int64_t n = 1 + job % 7;
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.run(n, [&](int64_t t, int thread) {
        EXPECT_GE(thread, 0);
        EXPECT_LT(thread, threads);
        if (job % 97 == 0 && t == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
        hits[static_cast<size_t>(t)].fetch_add(1);
      });
      for (int64_t t = 0; t < n; ++t) ASSERT_EQ(hits[static_cast<size_t>(t)].load(), 1) << "job " << job << " task " << t;
    }
  }
}

TEST(ThreadPool, NestedRunsSeriallyAndParallelForCovers) {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  pool.run(4, [&](int64_t t, int) {
    pool.run(3, [&](int64_t u, int) { sum.fetch_add(t * 10 + u); });
  });
  EXPECT_EQ(sum.load(), (0 + 10 + 20 + 30) * 3 + 4 * (0 + 1 + 2));
  std::vector<int> seen(1000, 0);
  pool.parallel_for(1000, 7, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) ++seen[static_cast<size_t>(i)];
  });
  for (int v : seen) ASSERT_EQ(v, 1);
}

}  // namespace
}  // namespace rlx
