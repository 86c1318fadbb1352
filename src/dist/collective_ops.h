// Running the collective graph ops (all_reduce, all_gather, reduce_scatter, broadcast) over a
// communicator, on dense host buffers. Shared by the reference interpreter and the CPU device
// so that both give exactly the same result (the reductions are the communicator's).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string_view>
#include <thread>

#include "rlx/comm.h"
#include "rlx/graph.h"

namespace rlx::dist {

// Runs collective `op` with attributes `attrs` on `in` (dtype, static sizes `in_sizes`) into
// `out` (sizes `out_sizes`, distinct from `in`). Checks that the graph's `ranks` attribute
// matches the communicator; errors are prefixed with `label` (the node).
Status run_collective(Communicator& comm, Op op, const Attrs& attrs, DType dtype, const Sizes& in_sizes,
                      const void* in, const Sizes& out_sizes, void* out, std::string_view label);

// The communicator a compiled graph without one runs its collectives on: a single process.
Communicator& default_communicator();

// Whether executables run collectives asynchronously, overlapped with the kernels that follow
// them (default yes; RLX_COMM_OVERLAP=0 runs each where the schedule reaches it, as a
// baseline for measurements).
bool overlap_collectives();

// A communication thread that runs collectives in the order they were submitted, so that an
// executable can start one and go on computing until something reads its result. Every
// collective of the owner's communicator goes through the queue while any is in flight
// (the communicator is used by one thread at a time, and every rank must issue the same
// collectives in the same order). A collective ends within the communicator's deadline, so a
// wait does too. Not thread-safe beyond one submitting thread.
class CollectiveQueue {
 public:
  CollectiveQueue();
  ~CollectiveQueue();  // waits for what is in flight, then ends the thread
  CollectiveQueue(const CollectiveQueue&) = delete;
  CollectiveQueue& operator=(const CollectiveQueue&) = delete;

  // Queues `*fn` to run on the communication thread; returns its ticket. `*fn` must live
  // until the ticket has been waited for (a function made once and reused, rather than one
  // allocated per call).
  int64_t submit(const std::function<Status()>* fn);
  // Blocks until ticket `t` has run; returns its status (once per ticket).
  Status wait(int64_t t);
  // Blocks until everything submitted has run; the first error among the unwaited tickets.
  Status wait_all();
  // Nothing submitted is still queued or running.
  bool idle();

  // Time the thread spent inside collectives, and time callers spent blocked in wait/wait_all.
  double busy_ms() const { return busy_ms_; }
  double waited_ms() const { return waited_ms_; }

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;       // work submitted, or stopping
  std::condition_variable done_cv_;  // a ticket completed
  std::deque<std::pair<int64_t, const std::function<Status()>*>> queue_;
  std::map<int64_t, Status> results_;  // completed, not yet waited for
  int64_t next_ = 0, completed_ = 0;
  bool stop_ = false;
  double busy_ms_ = 0, waited_ms_ = 0;
  std::thread thread_;
};

}  // namespace rlx::dist
