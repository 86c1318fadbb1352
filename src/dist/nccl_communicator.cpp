// The NCCL communicator: collectives on CUDA device memory.
//
// libnccl.so.2 is loaded with dlopen when first used, so rlx builds and runs where NCCL or a
// GPU is missing (nccl_communicator() then returns `unavailable`, on every rank alike: the
// ranks agree over the bootstrap communicator before any NCCL call). The communicator is
// created nonblocking (ncclConfig_t::blocking = 0): every call is enqueued on a stream of our
// own, then polled with ncclCommGetAsyncError and cudaStreamQuery until the deadline, when
// ncclCommAbort ends it, so a lost peer ends in an error, never in a hang.
//
// Unlike the MPI communicator, calls are not compared across ranks before they run (that would
// cost a host round trip per call): ranks that disagree end at the deadline.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <thread>

#include "dist/dist_internal.h"
#include "support/dynamic_library.h"

#if __has_include(<nccl.h>)
#include <nccl.h>
#define RLX_NCCL_HEADER 1
#endif

namespace rlx::dist {

#ifndef RLX_NCCL_HEADER
Expected<std::shared_ptr<Communicator>> nccl_communicator(Communicator& bootstrap) {
  return error(ErrorCode::unavailable, "nccl: rlx was built without nccl.h");
}
#else

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The NCCL functions rlx calls, from libnccl.so.2.
struct NcclApi {
  ncclResult_t (*get_version)(int*);
  ncclResult_t (*get_unique_id)(ncclUniqueId*);
  ncclResult_t (*init_rank_config)(ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*);
  ncclResult_t (*get_async_error)(ncclComm_t, ncclResult_t*);
  ncclResult_t (*abort)(ncclComm_t);
  ncclResult_t (*finalize)(ncclComm_t);
  ncclResult_t (*destroy)(ncclComm_t);
  ncclResult_t (*split)(ncclComm_t, int, int, ncclComm_t*, ncclConfig_t*);
  ncclResult_t (*all_reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*all_gather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*reduce_scatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*broadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*send)(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*recv)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  const char* (*error_string)(ncclResult_t);
  ncclResult_t (*user_rank)(ncclComm_t, int*);
  ncclResult_t (*count)(ncclComm_t, int*);
  int version = 0;
};

Expected<const NcclApi*> nccl_api() {
  static const Expected<const NcclApi*> api = []() -> Expected<const NcclApi*> {
    static NcclApi a{};
    const char* so = "libnccl.so.2";
    void* h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
#ifdef RLX_CUDA_LIB_DIR
    if (!h) h = dlopen((std::string(RLX_CUDA_LIB_DIR) + "/" + so).c_str(), RTLD_NOW | RTLD_LOCAL);
#endif
    if (!h) return error(ErrorCode::unavailable, "nccl: cannot load ", so, ": ", dlerror());
    auto sym = [&](auto& fn, const char* name) {
      return load_function(h, fn, name, cat("nccl: ", so), " (NCCL older than 2.18?)");
    };
    RLX_TRY(sym(a.get_version, "ncclGetVersion"));
    RLX_TRY(sym(a.get_unique_id, "ncclGetUniqueId"));
    RLX_TRY(sym(a.init_rank_config, "ncclCommInitRankConfig"));
    RLX_TRY(sym(a.get_async_error, "ncclCommGetAsyncError"));
    RLX_TRY(sym(a.abort, "ncclCommAbort"));
    RLX_TRY(sym(a.finalize, "ncclCommFinalize"));
    RLX_TRY(sym(a.destroy, "ncclCommDestroy"));
    RLX_TRY(sym(a.split, "ncclCommSplit"));
    RLX_TRY(sym(a.all_reduce, "ncclAllReduce"));
    RLX_TRY(sym(a.all_gather, "ncclAllGather"));
    RLX_TRY(sym(a.reduce_scatter, "ncclReduceScatter"));
    RLX_TRY(sym(a.broadcast, "ncclBroadcast"));
    RLX_TRY(sym(a.send, "ncclSend"));
    RLX_TRY(sym(a.recv, "ncclRecv"));
    RLX_TRY(sym(a.error_string, "ncclGetErrorString"));
    RLX_TRY(sym(a.user_rank, "ncclCommUserRank"));
    RLX_TRY(sym(a.count, "ncclCommCount"));
    a.get_version(&a.version);
    return &a;
  }();
  return api;
}

std::string nccl_error(const NcclApi& api, ncclResult_t r) {
  return cat(api.error_string(r), " (ncclResult ", static_cast<int>(r), ")");
}

// NCCL's element type for a reduction (nullopt-like: false when NCCL has none), or for a copy,
// where every dtype travels as bytes if need be (`count` is rescaled).
bool nccl_type(DType t, bool reduce, ncclDataType_t* out, int64_t* count) {
  switch (t) {
    case DType::f32: *out = ncclFloat32; return true;
    case DType::f16: *out = ncclFloat16; return true;
    case DType::bf16: *out = ncclBfloat16; return true;
    case DType::f64: *out = ncclFloat64; return true;
    case DType::i8: *out = ncclInt8; return true;
    case DType::u8: case DType::boolean: *out = ncclUint8; return true;
    case DType::i32: *out = ncclInt32; return true;
    case DType::u32: *out = ncclUint32; return true;
    case DType::i64: *out = ncclInt64; return true;
    case DType::u64: *out = ncclUint64; return true;
    default: break;
  }
  if (reduce) return false;
  *count = static_cast<int64_t>(dtype_bytes(t, static_cast<size_t>(*count)));
  *out = ncclUint8;
  return true;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::min: return ncclMin;
    case ReduceOp::prod: return ncclProd;
  }
  return ncclSum;
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(const NcclApi& api, ncclComm_t comm, int rank, int size, int device)
      : api_(api), comm_(comm), rank_(rank), size_(size), device_(device) {}

  // `comm`'s state once out of ncclInProgress, or ncclInProgress at the deadline.
  static ncclResult_t settle(const NcclApi& api, ncclComm_t comm, milliseconds deadline) {
    const Clock::time_point end = Clock::now() + deadline;
    while (true) {
      ncclResult_t st = ncclInProgress;
      const ncclResult_t r = api.get_async_error(comm, &st);
      if (r != ncclSuccess) st = r;
      if (st != ncclInProgress || Clock::now() >= end) return st;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  // Waits for `comm` to be ready (creation, split); aborts it otherwise.
  static Status wait_ready(const NcclApi& api, ncclComm_t comm, milliseconds deadline, const std::string& what) {
    const ncclResult_t st = settle(api, comm, deadline);
    if (st == ncclSuccess) return Status::ok();
    api.abort(comm);
    if (st == ncclInProgress)
      return error(ErrorCode::runtime_error, what, ": did not complete within ", deadline.count(), " ms");
    return error(ErrorCode::runtime_error, what, ": ", nccl_error(api, st));
  }

  Status init() {
    cudaError_t e = cudaSetDevice(device_);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaMalloc(&scratch_, 16);
    if (e != cudaSuccess)
      return error(ErrorCode::runtime_error, "nccl: rank ", rank_, ": ", cudaGetErrorName(e), ": ", cudaGetErrorString(e));
    return Status::ok();
  }

  ~NcclCommunicator() override {
    if (comm_) {
      // finalize waits for the peers' pending work; a broken or stuck one is aborted instead
      bool clean = broken_.empty();
      if (clean) {
        const ncclResult_t r = api_.finalize(comm_);
        clean = (r == ncclSuccess || r == ncclInProgress) && settle(api_, comm_, deadline()) == ncclSuccess;
      }
      if (clean) api_.destroy(comm_);
      else api_.abort(comm_);
    }
    if (scratch_) cudaFree(scratch_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override {
    return cat("nccl (", api_.version / 10000, ".", api_.version / 100 % 100, ".", api_.version % 100, ", cuda device ",
               device_, ")");
  }

  Status all_reduce(void* data, int64_t count, DType dtype, ReduceOp op) override {
    RLX_TRY(detail::check_buffer("all_reduce", data, count, dtype));
    RLX_TRY(detail::check_reduce("all_reduce", dtype, op));
    ncclDataType_t t;
    int64_t n = count;
    if (dtype == DType::c64 && op == ReduceOp::sum) {
      t = ncclFloat32;  // a complex sum is the sum of its parts
      n = 2 * count;
    } else if (!nccl_type(dtype, true, &t, &n)) {
      return unsupported("all_reduce", dtype, op);
    }
    return run("all_reduce", count, dtype, [&] {
      return api_.all_reduce(data, data, static_cast<size_t>(n), t, nccl_op(op), comm_, stream_);
    });
  }
  Status all_gather(const void* send, void* recv, int64_t count, DType dtype) override {
    RLX_TRY(detail::check_buffer("all_gather send", send, count, dtype));
    RLX_TRY(detail::check_buffer("all_gather recv", recv, count, dtype));
    ncclDataType_t t;
    int64_t n = count;
    nccl_type(dtype, false, &t, &n);
    return run("all_gather", count, dtype,
               [&] { return api_.all_gather(send, recv, static_cast<size_t>(n), t, comm_, stream_); });
  }
  Status reduce_scatter(const void* send, void* recv, int64_t count, DType dtype, ReduceOp op) override {
    RLX_TRY(detail::check_buffer("reduce_scatter send", send, count, dtype));
    RLX_TRY(detail::check_buffer("reduce_scatter recv", recv, count, dtype));
    RLX_TRY(detail::check_reduce("reduce_scatter", dtype, op));
    ncclDataType_t t;
    int64_t n = count;
    if (!nccl_type(dtype, true, &t, &n)) return unsupported("reduce_scatter", dtype, op);
    return run("reduce_scatter", count, dtype, [&] {
      return api_.reduce_scatter(send, recv, static_cast<size_t>(n), t, nccl_op(op), comm_, stream_);
    });
  }
  Status broadcast(void* data, int64_t count, DType dtype, int root) override {
    RLX_TRY(detail::check_buffer("broadcast", data, count, dtype));
    if (root < 0 || root >= size_)
      return error(ErrorCode::out_of_range, "nccl: rank ", rank_, ": broadcast: root ", root, " is not a rank of this ",
                   size_, "-rank communicator");
    ncclDataType_t t;
    int64_t n = count;
    nccl_type(dtype, false, &t, &n);
    return run("broadcast", count, dtype,
               [&] { return api_.broadcast(data, data, static_cast<size_t>(n), t, root, comm_, stream_); });
  }
  Status send(const void* data, int64_t count, DType dtype, int peer, int tag) override {
    RLX_TRY(check_peer("send", data, count, dtype, peer));
    ncclDataType_t t;
    int64_t n = count;
    nccl_type(dtype, false, &t, &n);
    return run("send", count, dtype, [&] { return api_.send(data, static_cast<size_t>(n), t, peer, comm_, stream_); });
  }
  Status recv(void* data, int64_t count, DType dtype, int peer, int tag) override {
    RLX_TRY(check_peer("recv", data, count, dtype, peer));
    ncclDataType_t t;
    int64_t n = count;
    nccl_type(dtype, false, &t, &n);
    return run("recv", count, dtype, [&] { return api_.recv(data, static_cast<size_t>(n), t, peer, comm_, stream_); });
  }
  Status barrier() override {
    return run("barrier", 1, DType::i32,
               [&] { return api_.all_reduce(scratch_, scratch_, 1, ncclInt32, ncclSum, comm_, stream_); });
  }

  Expected<std::shared_ptr<Communicator>> split(int color, int key) override {
    RLX_TRY(usable("split"));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t out = nullptr;
    const ncclResult_t r = api_.split(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &out, &config);
    if (r != ncclSuccess && r != ncclInProgress) return fail("split", 0, DType::u8, nccl_error(api_, r));
    RLX_TRY(NcclCommunicator::wait_ready(api_, comm_, deadline(), cat("nccl: rank ", rank_, ": split")));
    if (!out) return std::shared_ptr<Communicator>();
    RLX_TRY(NcclCommunicator::wait_ready(api_, out, deadline(), cat("nccl: rank ", rank_, ": split")));
    int rank = 0, size = 0;
    if (api_.user_rank(out, &rank) != ncclSuccess || api_.count(out, &size) != ncclSuccess) {
      api_.abort(out);
      return error(ErrorCode::runtime_error, "nccl: rank ", rank_, ": split: cannot read the new rank and size");
    }
    auto c = std::make_shared<NcclCommunicator>(api_, out, rank, size, device_);
    RLX_TRY(c->init());
    c->set_deadline(deadline());
    return std::shared_ptr<Communicator>(std::move(c));
  }

  void abort(int code) noexcept override {
    std::fprintf(stderr, "rlx: nccl rank %d: abort(%d)\n", rank_, code);
    std::fflush(nullptr);
    // ncclCommAbort does not wait for peers; the process then ends (NCCL has no launcher to
    // end the other ranks: they see this one gone)
    std::thread([this] { api_.abort(comm_); }).detach();
    std::this_thread::sleep_for(milliseconds(500));
    _exit(code);
  }

 private:
  Status usable(const char* what) const {
    if (broken_.empty()) return Status::ok();
    return error(ErrorCode::runtime_error, "nccl: rank ", rank_, ": ", what,
                 ": the communicator is broken by an earlier error (", broken_, ")");
  }
  Status unsupported(const char* what, DType dtype, ReduceOp op) const {
    return error(ErrorCode::unsupported, "nccl: ", what, ": NCCL has no ", reduce_op_name(op), " over ",
                 dtype_name(dtype));
  }
  Status check_peer(const char* what, const void* data, int64_t count, DType dtype, int peer) const {
    RLX_TRY(detail::check_buffer(what, data, count, dtype));
    if (peer < 0 || peer >= size_ || peer == rank_)
      return error(ErrorCode::out_of_range, "nccl: rank ", rank_, ": ", what, ": peer ", peer,
                   " is not another rank of this ", size_, "-rank communicator");
    return Status::ok();
  }
  Status fail(const char* what, int64_t count, DType dtype, const std::string& why) {
    Status s = error(ErrorCode::runtime_error, "nccl: rank ", rank_, ": ", what, " #", seq_, " (",
                     detail::describe_size(count, dtype), ")", why);
    if (broken_.empty()) broken_ = s.message();
    return s;
  }

  // Enqueues, then polls NCCL's state and the stream until done, an error or the deadline.
  template <class Enqueue>
  Status run(const char* what, int64_t count, DType dtype, Enqueue&& enqueue) {
    RLX_TRY(usable(what));
    ++seq_;
    if (count == 0) return Status::ok();
    cudaSetDevice(device_);
    const Clock::time_point start = Clock::now(), end = start + deadline();
    const ncclResult_t r = enqueue();
    if (r != ncclSuccess && r != ncclInProgress) return fail(what, count, dtype, ": " + nccl_error(api_, r));
    while (true) {
      ncclResult_t st = ncclSuccess;
      const ncclResult_t g = api_.get_async_error(comm_, &st);
      if (g != ncclSuccess) st = g;
      if (st != ncclSuccess && st != ncclInProgress) {
        api_.abort(comm_);
        comm_ = nullptr;
        return fail(what, count, dtype, ": " + nccl_error(api_, st));
      }
      if (st == ncclSuccess) {
        const cudaError_t q = cudaStreamQuery(stream_);
        if (q == cudaSuccess) return Status::ok();
        if (q != cudaErrorNotReady)
          return fail(what, count, dtype, cat(": ", cudaGetErrorName(q), ": ", cudaGetErrorString(q)));
      }
      const Clock::time_point now = Clock::now();
      if (now >= end) {
        api_.abort(comm_);  // frees the stream's pending NCCL kernels
        comm_ = nullptr;
        return fail(what, count, dtype,
                    cat(" did not complete within ", deadline().count(), " ms (a peer is gone, stalled, or called another "
                                                                        "collective); the NCCL communicator was aborted"));
      }
      if (now - start < milliseconds(2)) sched_yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  const NcclApi& api_;
  ncclComm_t comm_ = nullptr;
  int rank_ = 0, size_ = 1, device_ = 0;
  cudaStream_t stream_ = nullptr;
  void* scratch_ = nullptr;
  int64_t seq_ = 0;
  std::string broken_;
};

// Why this process cannot run NCCL, or "" when it can.
std::string local_reason() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess)
    return cat("no usable NVIDIA GPU here (cudaGetDeviceCount: ", cudaGetErrorName(e), ": ", cudaGetErrorString(e), ")");
  if (count == 0) return "no NVIDIA GPU here";
  auto api = nccl_api();
  if (!api) return api.status().message();
  return "";
}

}  // namespace

Expected<std::shared_ptr<Communicator>> nccl_communicator(Communicator& bootstrap) {
  // every rank must take the same path, or the ones going on would wait for the others
  const std::string reason = local_reason();
  int32_t ok = reason.empty() ? 1 : 0;
  RLX_TRY(bootstrap.all_reduce(&ok, 1, DType::i32, ReduceOp::min).with_context("nccl: agreeing on availability"));
  if (!ok)
    return error(ErrorCode::unavailable, "nccl: ",
                 reason.empty() ? "another rank has no usable GPU or libnccl" : reason);
  const NcclApi& api = **nccl_api();
  ncclUniqueId id{};
  if (bootstrap.rank() == 0) {
    const ncclResult_t r = api.get_unique_id(&id);
    if (r != ncclSuccess) std::memset(&id, 0, sizeof(id));  // the others see the zero id, rank 0 the error
  }
  RLX_TRY(bootstrap.broadcast(&id, sizeof(id), DType::u8, 0).with_context("nccl: sending the unique id"));
  int device = 0;
  cudaGetDevice(&device);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t r = api.init_rank_config(&comm, bootstrap.size(), id, bootstrap.rank(), &config);
  if (r != ncclSuccess && r != ncclInProgress)
    return error(ErrorCode::runtime_error, "nccl: rank ", bootstrap.rank(), ": ncclCommInitRankConfig: ",
                 nccl_error(api, r));
  RLX_TRY(NcclCommunicator::wait_ready(api, comm, bootstrap.deadline(),
                                       cat("nccl: rank ", bootstrap.rank(), ": ncclCommInitRankConfig")));
  auto c = std::make_shared<NcclCommunicator>(api, comm, bootstrap.rank(), bootstrap.size(), device);
  c->set_deadline(bootstrap.deadline());
  RLX_TRY(c->init());
  return std::shared_ptr<Communicator>(std::move(c));
}

#endif  // RLX_NCCL_HEADER

}  // namespace rlx::dist
