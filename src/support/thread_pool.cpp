#include "rlx/thread_pool.h"

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

ThreadPool::ThreadPool(int threads) {
  int n = threads > 0 ? threads : default_threads();
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
  for (;;) {
    int64_t t = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (t >= num_tasks_) break;
    (*job_)(t, thread);
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
    active_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run(int64_t num_tasks, FunctionRef<void(int64_t, int)> fn) {
  if (num_tasks <= 0) return;
  if (workers_.empty() || num_tasks == 1 || t_in_pool_task) {
    for (int64_t t = 0; t < num_tasks; ++t) fn(t, 0);
    return;
  }
  std::lock_guard<std::mutex> run_lock(run_mu_);
  job_ = &fn;
  num_tasks_ = num_tasks;
  next_task_.store(0, std::memory_order_relaxed);
  active_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lk(mu_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  cv_.notify_all();
  work(0);
  for (int round = 0; active_.load(std::memory_order_acquire) != 0; ++round) {
    cpu_relax();
    if (round % 16 == 15) std::this_thread::yield();
  }
  job_ = nullptr;
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
