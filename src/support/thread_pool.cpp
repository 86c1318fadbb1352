#include "rlx/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

namespace rlx {
namespace {
thread_local bool t_in_pool_task = false;

int default_threads() {
  if (const char* e = std::getenv("RLX_NUM_THREADS")) {
    int n = std::atoi(e);
    if (n > 0) return n;
  }
  unsigned hc = std::thread::hardware_concurrency();
  return hc == 0 ? 1 : static_cast<int>(hc);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}
}  // namespace

ThreadPool::ThreadPool(int threads) : blocks_(static_cast<size_t>(threads > 0 ? threads : default_threads())) {
  const int n = static_cast<int>(blocks_.size());
  for (int i = 1; i < n; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    generation_.fetch_add(1);
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

ThreadPool& ThreadPool::global() {
  static ThreadPool pool;
  return pool;
}

void ThreadPool::work(int thread) {
  t_in_pool_task = true;
  const int nblocks = static_cast<int>(blocks_.size());
  const uint64_t job = blocks_[static_cast<size_t>(thread)].next.load(std::memory_order_acquire) >> 32;
  const bool guided = guided_.load(std::memory_order_acquire);
  // its own block first, then the others' in turn
  for (int i = 0; i < nblocks; ++i) {
    Block& b = blocks_[static_cast<size_t>((thread + i) % nblocks)];
    for (;;) {
      uint64_t v = b.next.load(std::memory_order_acquire);
      if ((v >> 32) != job) {
        t_in_pool_task = false;
        return;  // a later job: this one is over
      }
      const int64_t t = static_cast<int64_t>(v & 0xFFFFFFFFu);
      const int64_t end = b.end.load(std::memory_order_relaxed);
      if (t >= end) break;
      const int64_t take = guided ? std::max<int64_t>(1, (end - t) / 2) : 1;
      if (!b.next.compare_exchange_weak(v, v + static_cast<uint64_t>(take), std::memory_order_acq_rel,
                                        std::memory_order_relaxed))
        continue;
      // the job cannot change while one of its tasks is claimed and not done
      (*job_.load(std::memory_order_acquire))(t, t + take, thread);
      done_.fetch_add(take, std::memory_order_acq_rel);
    }
  }
  t_in_pool_task = false;
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    // Spin for a short while: kernels of one run arrive microseconds apart.
    auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
    uint64_t g = generation_.load(std::memory_order_acquire);
    // Yield now and then: on a loaded machine the caller may share this core, and a spin
    // that never yields would make it wait out the whole spin.
    for (int round = 0; g == seen && std::chrono::steady_clock::now() < spin_until; ++round) {
      for (int k = 0; k < 16; ++k) cpu_relax();
      if (round % 4 == 3) std::this_thread::yield();
      g = generation_.load(std::memory_order_acquire);
    }
    if (g == seen) {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return generation_.load() != seen || stop_; });
      g = generation_.load();
    }
    if (stop_) return;
    seen = g;
    work(index);
  }
}

void ThreadPool::run(int64_t num_tasks, FunctionRef<void(int64_t, int)> fn) {
  auto each = [&](int64_t b, int64_t e, int thread) {
    for (int64_t t = b; t < e; ++t) fn(t, thread);
  };
  run_ranges(num_tasks, false, each);
}

void ThreadPool::run_guided(int64_t n, FunctionRef<void(int64_t, int64_t, int)> fn) { run_ranges(n, true, fn); }

void ThreadPool::run_ranges(int64_t num_tasks, bool guided, RangeFn fn) {
  if (num_tasks <= 0) return;
  if (workers_.empty() || num_tasks == 1 || t_in_pool_task) {
    if (guided) {
      fn(0, num_tasks, 0);
    } else {
      for (int64_t t = 0; t < num_tasks; ++t) fn(t, t + 1, 0);
    }
    return;
  }
  std::lock_guard<std::mutex> run_lock(run_mu_);
  // task indices live in 32 bits of a block's claim: very large jobs run in slices
  constexpr int64_t kSlice = int64_t{1} << 30;
  for (int64_t base = 0; base < num_tasks; base += kSlice) {
    const int64_t n = std::min(kSlice, num_tasks - base);
    if (base == 0) {
      run_job(n, guided, fn);
    } else {
      auto shifted = [&](int64_t b, int64_t e, int thread) { fn(base + b, base + e, thread); };
      RangeFn f(shifted);
      run_job(n, guided, f);
    }
  }
}

void ThreadPool::run_job(int64_t num_tasks, bool guided, RangeFn& fn) {
  const uint64_t next = static_cast<uint64_t>(job_id_ + 1) << 32;
  // Close the previous job first. A worker late in work() may hold a stale claim value of the
  // previous job (all its tasks taken) and read a new block end: without these stores its
  // compare-exchange would still succeed, run a task of the new job a second time and count
  // it twice in done_, and the wait below would never end. With them, once a worker can see
  // the new ends (released below) its stale compare-exchange fails.
  for (Block& b : blocks_) b.next.store(next | 0xFFFFFFFFu, std::memory_order_relaxed);
  job_.store(&fn, std::memory_order_relaxed);
  guided_.store(guided, std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  num_tasks_.store(num_tasks, std::memory_order_release);
  ++job_id_;
  const int64_t nblocks = static_cast<int64_t>(blocks_.size());
  for (int64_t i = 0; i < nblocks; ++i) {
    Block& b = blocks_[static_cast<size_t>(i)];
    b.end.store(num_tasks * (i + 1) / nblocks, std::memory_order_relaxed);
    b.next.store(next | static_cast<uint64_t>(num_tasks * i / nblocks), std::memory_order_release);
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  cv_.notify_all();
  work(0);
  // only claimed tasks are waited for: a worker that has not woken yet finds nothing left
  for (int round = 0; done_.load(std::memory_order_acquire) != num_tasks; ++round) {
    cpu_relax();
    if (round % 16 == 15) std::this_thread::yield();
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, FunctionRef<void(int64_t, int64_t)> fn) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int64_t chunks = std::min<int64_t>(size(), (n + grain - 1) / grain);
  if (chunks <= 1) {
    fn(0, n);
    return;
  }
  run(chunks, [&](int64_t c, int) {
    int64_t b = n * c / chunks, e = n * (c + 1) / chunks;
    if (b < e) fn(b, e);
  });
}

}  // namespace rlx
