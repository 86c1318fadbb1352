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
#include <vector>

#include "rlx/comm.h"
#include "rlx/graph.h"

namespace rlx::dist {

// Runs collective `op` with attributes `attrs` on `in` (dtype, static sizes `in_sizes`) into
// `out` (sizes `out_sizes`, distinct from `in`). Checks that the graph's `ranks` attribute
// matches the communicator; errors are prefixed with `label` (the node). A `group` attribute
// i > 0 selects group i of a CommunicatorGroups (an error on any other communicator).
Status run_collective(Communicator& comm, Op op, const Attrs& attrs, DType dtype, const Sizes& in_sizes,
                      const void* in, const Sizes& out_sizes, void* out, std::string_view label);

// The communicator a compiled graph without one runs its collectives on: a single process.
Communicator& default_communicator();

// Several groups for one compiled graph: a collective node with attribute `group` = i runs over
// groups[i] (0, the default, is the first: the communicator itself). Training with tensor and
// data parallelism needs both in one step graph: the tensor-parallel all-reduces over the
// ranks that hold the shards of one replica (group 0), the gradient all-reduces over the
// replicas of one shard (group 1). As a Communicator it is groups[0] (every call forwards), so
// it goes into CompileOptions::comm as it is. The groups are used by one thread at a time,
// like any communicator (an executable's collectives run in order on its thread).
class CommunicatorGroups : public Communicator {
 public:
  explicit CommunicatorGroups(std::vector<std::shared_ptr<Communicator>> groups);
  // groups[i], or null when there is no such group
  Communicator* group(int64_t i) const;
  int num_groups() const { return static_cast<int>(groups_.size()); }

  int rank() const override { return first().rank(); }
  int size() const override { return first().size(); }
  std::string backend() const override;
  Status all_reduce(void* data, int64_t count, DType dtype, ReduceOp op) override {
    return first().all_reduce(data, count, dtype, op);
  }
  Status all_gather(const void* send, void* recv, int64_t count, DType dtype) override {
    return first().all_gather(send, recv, count, dtype);
  }
  Status reduce_scatter(const void* send, void* recv, int64_t count, DType dtype, ReduceOp op) override {
    return first().reduce_scatter(send, recv, count, dtype, op);
  }
  Status broadcast(void* data, int64_t count, DType dtype, int root) override {
    return first().broadcast(data, count, dtype, root);
  }
  Status send(const void* data, int64_t count, DType dtype, int peer, int tag) override {
    return first().send(data, count, dtype, peer, tag);
  }
  Status recv(void* data, int64_t count, DType dtype, int peer, int tag) override {
    return first().recv(data, count, dtype, peer, tag);
  }
  Status send_recv(const void* send_data, int64_t send_count, int dest, int send_tag, void* recv_data,
                   int64_t recv_count, int source, int recv_tag, DType dtype) override {
    return first().send_recv(send_data, send_count, dest, send_tag, recv_data, recv_count, source, recv_tag, dtype);
  }
  Status barrier() override { return first().barrier(); }
  Expected<std::shared_ptr<Communicator>> split(int color, int key) override { return first().split(color, key); }
  void abort(int code) noexcept override { first().abort(code); }

 private:
  Communicator& first() const { return *groups_.front(); }
  std::vector<std::shared_ptr<Communicator>> groups_;
};

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
