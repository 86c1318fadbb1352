// rlx/thread_pool.h: the one thread pool every CPU kernel shares. Workers spin briefly
// between jobs (kernels arrive back to back) and then sleep; the calling thread takes part.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace rlx {

// A non-owning reference to a callable; never allocates.
template <class Sig>
class FunctionRef;
template <class R, class... Args>
class FunctionRef<R(Args...)> {
 public:
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FunctionRef>>>
  FunctionRef(F&& f)  // NOLINT
      : obj_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* o, Args... a) -> R { return (*static_cast<std::remove_reference_t<F>*>(o))(std::forward<Args>(a)...); }) {}
  R operator()(Args... a) const { return call_(obj_, std::forward<Args>(a)...); }

 private:
  void* obj_;
  R (*call_)(void*, Args...);
};

class ThreadPool {
 public:
  // `threads` counts the caller; 0 means RLX_NUM_THREADS or the hardware concurrency.
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // The process-wide pool.
  static ThreadPool& global();

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Work is split statically first: thread t (the caller is 0) starts on the t-th contiguous
  // block of the tasks, and a thread that finishes its block takes what is left of the
  // others'. So the same part of a buffer is worked on by the same core from one kernel to the
  // next, and from one run to the next (a weight updated by one thread stays in that core's
  // cache), while a slow or preempted thread's work is still taken over.

  // Runs fn(task, thread) for task in [0, num_tasks), tasks taken as above, one at a time;
  // returns when all are done. Nested calls from inside a task run serially on the calling
  // thread.
  void run(int64_t num_tasks, FunctionRef<void(int64_t, int)> fn);

  // Runs fn(begin, end, thread) over [0, n) in ranges claimed from the blocks above and
  // shrinking toward each block's end ("guided" scheduling): each claim takes half of what is
  // left of the block and at least one item, so the first claims are large (few claims, each
  // over contiguous items) and the last ones are single items, which keeps the threads from
  // waiting on one another at the end of the call. Returns when all are done; nested calls run
  // serially.
  void run_guided(int64_t n, FunctionRef<void(int64_t, int64_t, int)> fn);

  // Splits [0, n) into at most size() contiguous ranges of at least `grain` items and runs
  // fn(begin, end) on each.
  void parallel_for(int64_t n, int64_t grain, FunctionRef<void(int64_t, int64_t)> fn);

 private:
  void worker_loop(int index);
  void work(int thread);
  using RangeFn = FunctionRef<void(int64_t, int64_t, int)>;
  void run_ranges(int64_t num_tasks, bool guided, RangeFn fn);
  void run_job(int64_t num_tasks, bool guided, RangeFn& fn);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<uint64_t> generation_{0};  // bumped to wake the workers
  // Per thread, its block of the current job: the job's id (high 32 bits) and the block's next
  // unclaimed task (low 32 bits), and the block's end. Tasks are claimed by a compare-exchange
  // that also checks the job, so a worker that wakes late never takes a task of a later job by
  // mistake, and the caller waits only for tasks that were claimed, not for workers that never
  // woke up (on a loaded machine that can take a scheduler time slice): their blocks are taken
  // over by the others.
  struct alignas(64) Block {
    std::atomic<uint64_t> next{0};
    std::atomic<int64_t> end{0};
  };
  std::vector<Block> blocks_;
  std::atomic<int64_t> num_tasks_{0};
  std::atomic<int64_t> done_{0};
  std::atomic<bool> guided_{false};  // the current job's claims shrink (else one task each)
  uint32_t job_id_ = 0;
  std::atomic<RangeFn*> job_{nullptr};
  bool stop_ = false;
  std::mutex run_mu_;  // one job at a time
};

}  // namespace rlx
