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

// Guided jobs alternate with plain ones, so a worker waking late meets a job of the other
// kind. Every item is covered exactly once, the ranges shrink toward the end (the first claim
// takes about n / (2 * threads) items, the last ones a single item) and a nested guided call
// runs as one range on the calling thread.
TEST(ThreadPool, GuidedRangesCoverEveryItemOnceAndShrink) {
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    for (int job = 0; job < 2000; ++job) {
      const int64_t n = 1 + (job * 37) % 200;
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int64_t> largest{0}, last_size{0}, last_begin{-1};
      auto body = [&](int64_t b, int64_t e, int thread) {
        ASSERT_LE(0, b);
        ASSERT_LT(b, e);
        ASSERT_LE(e, n);
        EXPECT_LT(thread, threads);
        int64_t l = largest.load();
        while (e - b > l && !largest.compare_exchange_weak(l, e - b)) {
        }
        if (e == n) {
          last_size = e - b;
          last_begin = b;
        }
        if (job % 89 == 0 && b == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
      };
      if (job % 2) {
        pool.run_guided(n, body);
      } else {
        pool.run(n, [&](int64_t t, int thread) { body(t, t + 1, thread); });
      }
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "job " << job << " item " << i;
      // each thread's block is [n t / T, n (t + 1) / T); a claim takes half of what is left of
      // a block (at least one item), so the largest is half of the largest block
      const int64_t largest_block = (n + threads - 1) / threads;
      if (n > 1) {
        EXPECT_EQ(last_size.load(), 1) << "job " << job << ": the last claim should be one item";
        EXPECT_LE(largest.load(), std::max<int64_t>(1, largest_block / 2)) << "job " << job;
      }
      if (job % 2 && n >= 8 * threads)
        EXPECT_EQ(largest.load(), largest_block / 2) << "job " << job << ": the first claim should be the largest";
    }
  }
  ThreadPool pool(2);
  std::atomic<int> calls{0};
  pool.run(2, [&](int64_t, int) {
    pool.run_guided(50, [&](int64_t b, int64_t e, int) {
      EXPECT_EQ(b, 0);
      EXPECT_EQ(e, 50);
      calls.fetch_add(1);
    });
  });
  EXPECT_EQ(calls.load(), 2);
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
