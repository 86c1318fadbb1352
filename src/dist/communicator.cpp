// The single-process communicator, the choice of world communicator, and what every engine
// shares (reduce op names, the default deadline, argument checks).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "dist/dist_internal.h"

namespace rlx::dist {

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::max: return "max";
    case ReduceOp::min: return "min";
    case ReduceOp::prod: return "prod";
  }
  return "?";
}

bool parse_reduce_op(std::string_view name, ReduceOp* out) {
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min, ReduceOp::prod}) {
    if (reduce_op_name(op) == name) {
      if (out) *out = op;
      return true;
    }
  }
  return false;
}

Status Communicator::send_recv(const void*, int64_t send_count, int dest, int send_tag, void*, int64_t recv_count,
                               int source, int recv_tag, DType dtype) {
  return error(ErrorCode::unsupported, backend(), " rank ", rank(), ": send_recv (", send_count, " ", dtype_name(dtype),
               " to rank ", dest, " tag ", send_tag, ", ", recv_count, " from rank ", source, " tag ", recv_tag,
               ") needs concurrent point to point, which this communicator does not have");
}

std::chrono::milliseconds Communicator::default_deadline() {
  if (const char* v = std::getenv("RLX_COMM_TIMEOUT_MS")) {
    char* end = nullptr;
    const long long ms = std::strtoll(v, &end, 10);
    if (end != v && *end == '\0' && ms > 0) return std::chrono::milliseconds(ms);
  }
  return std::chrono::milliseconds(60000);
}

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(v)) return true;
  }
  return false;
}

namespace detail {

std::string describe_size(int64_t count, DType dtype) {
  const double bytes = static_cast<double>(dtype_bytes(dtype, count < 0 ? 0 : static_cast<size_t>(count)));
  std::string unit = "B";
  double v = bytes;
  for (const char* u : {"KiB", "MiB", "GiB"}) {
    if (v < 1024) break;
    v /= 1024;
    unit = u;
  }
  char num[32];
  std::snprintf(num, sizeof(num), v == static_cast<int64_t>(v) ? "%.0f" : "%.1f", v);
  return cat(count, " ", dtype_name(dtype), ", ", num, " ", unit);
}

Status check_buffer(const char* what, const void* p, int64_t count, DType dtype) {
  if (count < 0) return error(ErrorCode::invalid_argument, what, ": negative count ", count);
  if (is_packed(dtype) && count % 2 != 0)
    return error(ErrorCode::invalid_argument, what, ": ", count, " ", dtype_name(dtype),
                 " elements: packed 4-bit buffers need an even count (two per byte)");
  if (count > 0 && p == nullptr) return error(ErrorCode::invalid_argument, what, ": null buffer for ", count, " elements");
  return Status::ok();
}

Status check_reduce(const char* what, DType dtype, ReduceOp op) {
  bool ok = false;
  switch (dtype) {
    case DType::f32: case DType::f64: case DType::f16: case DType::bf16:
    case DType::i8: case DType::u8: case DType::i16: case DType::u16:
    case DType::i32: case DType::u32: case DType::i64: case DType::u64:
      ok = true;
      break;
    case DType::boolean:  // max is "or", min and prod are "and"; a sum would leave {0, 1}
      ok = op != ReduceOp::sum;
      break;
    case DType::c64:  // complex numbers have no order
      ok = op == ReduceOp::sum || op == ReduceOp::prod;
      break;
    case DType::i4: case DType::u4:
      ok = false;
      break;
  }
  if (!ok)
    return error(ErrorCode::unsupported, what, ": reduction ", reduce_op_name(op), " over ", dtype_name(dtype),
                 " is not supported", dtype == DType::boolean ? " (use max for a logical or, min for and)" : "");
  return Status::ok();
}

}  // namespace detail

namespace {

// One rank: every collective is a copy (or nothing, in place), and there is no peer to talk to.
class SingleProcessCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "single"; }

  Status all_reduce(void* data, int64_t count, DType dtype, ReduceOp op) override {
    RLX_TRY(detail::check_buffer("all_reduce", data, count, dtype));
    return detail::check_reduce("all_reduce", dtype, op);
  }
  Status all_gather(const void* send, void* recv, int64_t count, DType dtype) override {
    RLX_TRY(detail::check_buffer("all_gather send", send, count, dtype));
    RLX_TRY(detail::check_buffer("all_gather recv", recv, count, dtype));
    copy(send, recv, count, dtype);
    return Status::ok();
  }
  Status reduce_scatter(const void* send, void* recv, int64_t count, DType dtype, ReduceOp op) override {
    RLX_TRY(detail::check_buffer("reduce_scatter send", send, count, dtype));
    RLX_TRY(detail::check_buffer("reduce_scatter recv", recv, count, dtype));
    RLX_TRY(detail::check_reduce("reduce_scatter", dtype, op));
    copy(send, recv, count, dtype);
    return Status::ok();
  }
  Status broadcast(void* data, int64_t count, DType dtype, int root) override {
    RLX_TRY(detail::check_buffer("broadcast", data, count, dtype));
    if (root != 0)
      return error(ErrorCode::out_of_range, "broadcast: root ", root, " is not a rank of a single-process communicator");
    return Status::ok();
  }
  Status send(const void* data, int64_t count, DType dtype, int peer, int tag) override {
    return no_peer("send to", peer);
  }
  Status recv(void* data, int64_t count, DType dtype, int peer, int tag) override {
    return no_peer("recv from", peer);
  }
  Status barrier() override { return Status::ok(); }

  Expected<std::shared_ptr<Communicator>> split(int color, int key) override {
    // color < 0 is MPI_UNDEFINED's meaning: this rank joins no group
    if (color < 0) return std::shared_ptr<Communicator>();
    auto c = std::make_shared<SingleProcessCommunicator>();
    c->set_deadline(deadline());
    return std::shared_ptr<Communicator>(std::move(c));
  }

  void abort(int code) noexcept override {
    std::fprintf(stderr, "rlx: abort(%d) on a single-process communicator\n", code);
    std::fflush(nullptr);
    _exit(code);
  }

 private:
  static void copy(const void* send, void* recv, int64_t count, DType dtype) {
    if (send != recv && count > 0) std::memmove(recv, send, dtype_bytes(dtype, static_cast<size_t>(count)));
  }
  static Status no_peer(const char* what, int peer) {
    if (peer != 0)
      return error(ErrorCode::out_of_range, what, " rank ", peer, ": a single-process communicator has only rank 0");
    return error(ErrorCode::invalid_argument, what, " rank 0 (itself) on a single-process communicator: there is no peer");
  }
};

}  // namespace

std::shared_ptr<Communicator> single_process_communicator() { return std::make_shared<SingleProcessCommunicator>(); }

Expected<std::shared_ptr<Communicator>> world_communicator() {
  if (!launched_by_mpi()) {
    static const std::shared_ptr<Communicator> single = single_process_communicator();
    return single;
  }
#ifdef RLX_HAVE_MPI
  return detail::mpi_world_communicator();
#else
  const char* n = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (!n) n = std::getenv("PMI_SIZE");
  return error(ErrorCode::unavailable, "this process was started by an MPI launcher",
               n ? cat(" (", n, " ranks)") : std::string(),
               " but rlx was built without MPI: install libopenmpi-dev and reconfigure rlx");
#endif
}

#ifndef RLX_HAVE_CUDA
Expected<std::shared_ptr<Communicator>> nccl_communicator(Communicator& bootstrap) {
  return error(ErrorCode::unavailable, "nccl: rlx was built without the CUDA toolkit");
}
#endif

}  // namespace rlx::dist
