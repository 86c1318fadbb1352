// rlx/comm.h: the communicator a distributed rlx program talks through.
//
// One interface, three engines: a single process (size 1, every collective is a copy), Open MPI
// for host memory (TCP, shared memory or UCX, whatever mpirun selects) and NCCL for CUDA
// device memory. rlx does not implement a transport of its own.
//
//   auto world = rlx::dist::world_communicator();   // MPI's world under mpirun, else size 1
//   RLX_TRY((*world)->all_reduce(buf.data(), n, DType::f32, ReduceOp::sum));
//
// Every call has a deadline (set_deadline, default 60 s, or RLX_COMM_TIMEOUT_MS): a peer that
// died or never arrives ends the call with ErrorCode::runtime_error naming this rank, the
// collective, its sequence number and its size, never with a hang. Ranks that disagree about a
// collective (its kind, dtype, count or root) get an error saying what each side asked for.
// After an error the communicator is broken: later calls fail at once, and abort() never blocks.
// After a timeout the buffers of the failed call may still be written by the transport: end the
// process (return the error up to main) rather than reuse them. A communicator is used by one
// thread at a time; different communicators may be used by different threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "rlx/dtype.h"
#include "rlx/status.h"

namespace rlx::dist {

enum class ReduceOp : uint8_t { sum, max, min, prod };
// "sum", "max", "min", "prod"; parse_reduce_op is its inverse (nullopt-like: false when unknown).
std::string_view reduce_op_name(ReduceOp op);
bool parse_reduce_op(std::string_view name, ReduceOp* out);

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "single", "mpi" or "nccl", with the transport where it is known (e.g. "mpi (ob1/tcp)").
  virtual std::string backend() const = 0;

  // In place: every rank's `count` elements at `data` become the elementwise reduction over ranks.
  virtual Status all_reduce(void* data, int64_t count, DType dtype, ReduceOp op) = 0;
  // `recv` (size() * count elements) receives every rank's `count` elements, in rank order.
  virtual Status all_gather(const void* send, void* recv, int64_t count, DType dtype) = 0;
  // `send` holds size() * count elements; `recv` gets this rank's block of their reduction.
  virtual Status reduce_scatter(const void* send, void* recv, int64_t count, DType dtype, ReduceOp op) = 0;
  // Root's `count` elements at `data` are copied to every rank's `data`.
  virtual Status broadcast(void* data, int64_t count, DType dtype, int root) = 0;
  // Point to point; a send and its recv must agree on count, dtype and tag.
  virtual Status send(const void* data, int64_t count, DType dtype, int peer, int tag) = 0;
  virtual Status recv(void* data, int64_t count, DType dtype, int peer, int tag) = 0;
  // A send to `dest` and a receive from `source` in flight together (one may wait for the
  // other without a deadlock: the exchange of a pipeline's steady state). Each is matched by
  // a send or recv (or a send_recv) of the peer with the same count, dtype and tag. The
  // default says the backend has no concurrent point to point.
  virtual Status send_recv(const void* send_data, int64_t send_count, int dest, int send_tag, void* recv_data,
                           int64_t recv_count, int source, int recv_tag, DType dtype);
  virtual Status barrier() = 0;

  // Groups: ranks with the same `color` form a new communicator, ordered by `key` (then by
  // rank). Collective over this communicator. A negative color joins no group: nullptr.
  virtual Expected<std::shared_ptr<Communicator>> split(int color, int key) = 0;

  // Ends the whole job (every rank) with `code`: asks the launcher to stop every rank, then
  // ends this process within about 1.5 s whatever the launcher does. Does not return and
  // never waits for peers.
  virtual void abort(int code) noexcept = 0;

  // The bound on every later call of this communicator (each call on its own).
  void set_deadline(std::chrono::milliseconds d) { deadline_ = d; }
  std::chrono::milliseconds deadline() const { return deadline_; }

  // 60 s, or RLX_COMM_TIMEOUT_MS when set to a positive integer.
  static std::chrono::milliseconds default_deadline();

 protected:
  std::chrono::milliseconds deadline_ = default_deadline();
};

// A communicator of one rank: collectives copy, send/recv to self are errors.
std::shared_ptr<Communicator> single_process_communicator();

// Whether this process was started by an MPI launcher (mpirun sets OMPI_COMM_WORLD_SIZE,
// PMI_SIZE or PMIX_RANK); true does not mean rlx was built with MPI.
bool launched_by_mpi();

// The communicator of every process of the job: MPI's world when the process was started by
// mpirun (MPI is initialized on first call and finalized at exit), a single process otherwise.
// Error when started by mpirun but rlx was built without MPI, saying so.
Expected<std::shared_ptr<Communicator>> world_communicator();

// NCCL over `comm` (which exchanges the NCCL unique id): collectives on CUDA device pointers,
// on the current CUDA device. Error when rlx was built without CUDA or libnccl cannot be loaded.
Expected<std::shared_ptr<Communicator>> nccl_communicator(Communicator& bootstrap);

}  // namespace rlx::dist
