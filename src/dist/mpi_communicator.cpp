// The MPI communicator: Open MPI (or any MPI 3 library) for host memory.
//
// Nothing here blocks without a bound. Every operation is nonblocking MPI polled with MPI_Test
// until the communicator's deadline; while polling, peers on this host are checked for being
// alive (their pids were exchanged at creation), so a rank that died is named within
// milliseconds instead of at the deadline. Before each collective the ranks exchange a 32-byte
// header (kind, sequence number, dtype, count, root, op) and compare it, so ranks that disagree
// get an error saying what each called instead of MPI_ERR_TRUNCATE, wrong data or a hang. The
// few MPI calls that have no nonblocking form (MPI_Comm_split, MPI_Comm_dup, MPI_Finalize) run
// under a watchdog thread that ends the process with a message if they do not return.
//
// After any error the communicator is broken (later calls fail at once) and the process will
// not call MPI_Finalize, which would wait for the peers forever.
// the C API only: mpi.h otherwise drags in the deprecated C++ bindings (libmpi_cxx)
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "dist/dist_internal.h"

namespace rlx::dist::detail {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// MPI is initialized with MPI_THREAD_SERIALIZED: every MPI call in this file holds this mutex
// (one call at a time, not a whole poll loop, so two threads may wait on two communicators).
std::mutex& mpi_mutex() {
  static std::mutex m;
  return m;
}
#define RLX_MPI(call)                                     \
  [&] {                                                   \
    std::lock_guard<std::mutex> rlx_mpi_lock_(mpi_mutex()); \
    return (call);                                        \
  }()

std::string mpi_error_string(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return cat("MPI error ", code);
  return cat(std::string(buf, static_cast<size_t>(len)), " (MPI error ", code, ")");
}

// Ends the process with a message if it is still armed after `timeout`: the bound on the few
// blocking MPI calls.
class Watchdog {
 public:
  Watchdog(std::string message, milliseconds timeout) : message_(std::move(message)) {
    thread_ = std::thread([this, timeout] {
      std::unique_lock<std::mutex> lock(mu_);
      if (!cv_.wait_for(lock, timeout, [this] { return disarmed_; })) {
        std::fprintf(stderr, "rlx: %s; ending the process\n", message_.c_str());
        std::fflush(nullptr);
        _exit(1);
      }
    });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      disarmed_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::string message_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool disarmed_ = false;
  std::thread thread_;
};

// Who a rank is, exchanged at creation so that a dead peer on this host can be recognized.
struct PeerInfo {
  int64_t pid = 0;
  int64_t start_time = 0;  // /proc/<pid>/stat field 22, telling a reused pid apart; 0 unknown
  char host[64] = {};      // hostname plus the pid namespace: pids compare only when equal
};
static_assert(sizeof(PeerInfo) == 80);

// (state, start time) of a process from /proc; state 0 when there is no such process.
std::pair<char, int64_t> proc_state(int64_t pid) {
  std::ifstream f(cat("/proc/", pid, "/stat"));
  std::string s;
  if (!f || !std::getline(f, s)) return {0, 0};
  const size_t close = s.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos) return {'?', 0};
  std::istringstream rest(s.substr(close + 1));
  std::string field;
  char state = '?';
  int64_t start = 0;
  for (int i = 3; rest >> field; ++i) {
    if (i == 3) state = field.empty() ? '?' : field[0];
    if (i == 22) {
      start = std::strtoll(field.c_str(), nullptr, 10);
      break;
    }
  }
  return {state, start};
}

PeerInfo self_info() {
  PeerInfo p;
  p.pid = getpid();
  p.start_time = proc_state(p.pid).second;
  char host[48] = {};
  gethostname(host, sizeof(host) - 1);
  char ns[64] = {};
  const ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1);
  std::snprintf(p.host, sizeof(p.host), "%s|%s", host, n > 0 ? ns : "");
  return p;
}

std::string host_name(const PeerInfo& p) {
  const char* bar = std::strchr(p.host, '|');
  return bar ? std::string(p.host, bar) : std::string(p.host);
}

enum class Kind : int32_t { all_reduce = 1, all_gather, reduce_scatter, broadcast, barrier, split, send, recv, exit_barrier };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::all_reduce: return "all_reduce";
    case Kind::all_gather: return "all_gather";
    case Kind::reduce_scatter: return "reduce_scatter";
    case Kind::broadcast: return "broadcast";
    case Kind::barrier: return "barrier";
    case Kind::split: return "split";
    case Kind::send: return "send";
    case Kind::recv: return "recv";
    case Kind::exit_barrier: return "exit barrier";
  }
  return "unknown collective";
}

// What one rank asked for; exchanged and compared before every collective.
struct Header {
  int32_t kind = 0;
  int32_t dtype = 0;
  int64_t seq = 0;
  int64_t count = 0;
  int32_t root = 0;  // broadcast's root; send/recv: the tag
  int32_t op = 0;
};
static_assert(sizeof(Header) == 32);

bool has_op(Kind k) { return k == Kind::all_reduce || k == Kind::reduce_scatter; }
bool has_data(Kind k) { return k != Kind::barrier && k != Kind::split && k != Kind::exit_barrier; }

std::string describe(const Header& h) {
  const Kind k = static_cast<Kind>(h.kind);
  std::string s = cat(kind_name(k), " #", h.seq);
  if (!has_data(k)) return s;
  const DType dt = static_cast<DType>(h.dtype);
  const bool valid_dtype = h.dtype >= 0 && h.dtype < kNumDTypes;
  s += " (";
  if (has_op(k)) s += cat(reduce_op_name(static_cast<ReduceOp>(h.op)), " of ");
  s += valid_dtype ? describe_size(h.count, dt) : cat(h.count, " elements of dtype #", h.dtype);
  if (k == Kind::broadcast) s += cat(", root ", h.root);
  return s + ")";
}

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::c64: return MPI_C_FLOAT_COMPLEX;
    case DType::i8: return MPI_INT8_T;
    case DType::u8: case DType::boolean: return MPI_UINT8_T;
    case DType::i16: return MPI_INT16_T;
    case DType::u16: case DType::f16: case DType::bf16: return MPI_UINT16_T;  // f16/bf16 ops: below
    case DType::i32: return MPI_INT32_T;
    case DType::u32: return MPI_UINT32_T;
    case DType::i64: return MPI_INT64_T;
    case DType::u64: return MPI_UINT64_T;
    case DType::i4: case DType::u4: return MPI_BYTE;  // two per byte: count / 2 bytes
  }
  return MPI_BYTE;
}

// Reductions on f16 and bf16 as user-defined MPI ops: convert to f32, reduce, round back.
template <ReduceOp Op, bool BF16>
void half_reduce(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = BF16 ? bf16_to_f32(a[i]) : f16_to_f32(a[i]);
    const float y = BF16 ? bf16_to_f32(b[i]) : f16_to_f32(b[i]);
    float r = 0;
    if constexpr (Op == ReduceOp::sum) r = x + y;
    if constexpr (Op == ReduceOp::prod) r = x * y;
    if constexpr (Op == ReduceOp::max) r = x > y ? x : y;
    if constexpr (Op == ReduceOp::min) r = x < y ? x : y;
    b[i] = BF16 ? f32_to_bf16(r) : f32_to_f16(r);
  }
}

struct Runtime {
  std::mutex mu;
  // The calls polling MPI now, by thread: what they are and when their deadline passes. Open
  // MPI 4.1 can end the process from inside MPI, and then the exit handler must neither touch
  // MPI nor take mpi_mutex, which that thread holds; and its TCP transport can deadlock inside
  // MPI when a peer dies mid-transfer (seen in mca_btl_tcp_endpoint_close), which only a
  // thread outside MPI can notice: the monitor (start_monitor) ends such a process.
  std::mutex calls_mu;
  struct Call {
    std::string what;
    Clock::time_point end;
  };
  std::map<std::thread::id, Call> calls;
  bool monitor_started = false;
  bool initialized_here = false;
  bool finalized = false;
  std::atomic<bool> any_broken{false};
  std::shared_ptr<Communicator> world;
  Status init_error;
  MPI_Op half_ops[2][4] = {};  // [bf16][op]
};
Runtime& runtime() {
  static Runtime* rt = new Runtime();  // never destroyed: the atexit finalizer uses it
  return *rt;
}

MPI_Op mpi_op(ReduceOp op, DType t) {
  if (t == DType::f16 || t == DType::bf16) return runtime().half_ops[t == DType::bf16][static_cast<int>(op)];
  switch (op) {
    case ReduceOp::sum: return MPI_SUM;
    case ReduceOp::max: return MPI_MAX;
    case ReduceOp::min: return MPI_MIN;
    case ReduceOp::prod: return MPI_PROD;
  }
  return MPI_SUM;
}

// Measured on 2 cores over shared memory (docs/benchmarks.md): on 2 ranks the ring beats
// MPI_Iallreduce from about 16 KiB; with more ranks each of its 2 (n - 1) steps costs a
// round of scheduling, so it pays off later.
int64_t ring_threshold(int size) {
  if (const char* v = std::getenv("RLX_COMM_RING_BYTES")) {
    char* end = nullptr;
    const long long b = std::strtoll(v, &end, 10);
    if (end != v && *end == '\0' && b >= 0) return b;
  }
  return size <= 2 ? 32 << 10 : 512 << 10;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += cat(i ? ", " : "", ranks[i]);
  return s;
}

class MpiCommunicator final : public Communicator {
 public:
  // Takes `comm` (freed with the communicator unless it is MPI_COMM_WORLD).
  static Expected<std::shared_ptr<MpiCommunicator>> create(MPI_Comm comm, milliseconds deadline) {
    std::shared_ptr<MpiCommunicator> c(new MpiCommunicator());
    c->comm_ = comm;
    c->set_deadline(deadline);
    int rc = RLX_MPI(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    if (rc == MPI_SUCCESS) rc = RLX_MPI(MPI_Comm_rank(comm, &c->rank_));
    if (rc == MPI_SUCCESS) rc = RLX_MPI(MPI_Comm_size(comm, &c->size_));
    if (rc != MPI_SUCCESS) return error(ErrorCode::runtime_error, "mpi: cannot set up a communicator: ", mpi_error_string(rc));
    c->ring_bytes_ = ring_threshold(c->size_);
    {
      // control traffic (headers) on communicators of its own, apart from the data and the
      // caller's tags; MPI_Comm_dup blocks, hence the watchdog
      Watchdog wd(cat("rank ", c->rank_, ": MPI_Comm_dup did not return within ", deadline.count(), " ms"),
                  deadline);
      rc = RLX_MPI(MPI_Comm_dup(comm, &c->coll_ctl_));
      if (rc == MPI_SUCCESS) rc = RLX_MPI(MPI_Comm_dup(comm, &c->p2p_ctl_));
      if (rc == MPI_SUCCESS) rc = RLX_MPI(MPI_Comm_dup(comm, &c->ring_));
    }
    if (rc != MPI_SUCCESS) return error(ErrorCode::runtime_error, "mpi: MPI_Comm_dup: ", mpi_error_string(rc));
    void* ub = nullptr;
    int flag = 0;
    if (RLX_MPI(MPI_Comm_get_attr(comm, MPI_TAG_UB, &ub, &flag)) == MPI_SUCCESS && flag && ub)
      c->tag_ub_ = *static_cast<int*>(ub);
    // who is where, so that a dead peer on this host can be named
    c->peers_.resize(static_cast<size_t>(c->size_));
    PeerInfo& me = c->scratch_->me;
    me = self_info();
    std::vector<PeerInfo>& gathered = c->scratch_->peers_in;
    gathered.resize(static_cast<size_t>(c->size_));
    Header h;
    h.kind = static_cast<int32_t>(Kind::barrier);
    MPI_Request req = MPI_REQUEST_NULL;
    rc = RLX_MPI(MPI_Iallgather(&me, sizeof(PeerInfo), MPI_BYTE, gathered.data(), sizeof(PeerInfo), MPI_BYTE,
                                c->coll_ctl_, &req));
    if (rc != MPI_SUCCESS) return error(ErrorCode::runtime_error, "mpi: MPI_Iallgather: ", mpi_error_string(rc));
    // nobody is known yet: poll() checks no pids until peers_ is filled in
    c->peers_known_ = false;
    std::vector<MPI_Request> reqs{req};
    RLX_TRY(c->poll(h, reqs, nullptr, Clock::now()).with_context("mpi: creating a communicator"));
    c->peers_ = gathered;
    c->peers_known_ = true;
    // RLX_COMM_PEER_CHECK=0 treats every peer as remote (only the deadline and MPI's own
    // errors then detect a lost peer, as across machines; the tests use it for that)
    const char* check = std::getenv("RLX_COMM_PEER_CHECK");
    const bool local_checks = !(check && std::string(check) == "0");
    const std::string my_host = me.host;
    for (const PeerInfo& p : c->peers_) c->same_host_.push_back(local_checks && my_host == p.host);
    return c;
  }

  ~MpiCommunicator() override {
    // freeing is local in Open MPI, but never after MPI_Finalize or on a broken communicator,
    // whose pending requests may still point into scratch_ (deliberately leaked then)
    if (!broken_.empty()) return;
    delete scratch_;
    std::lock_guard<std::mutex> lock(mpi_mutex());
    int fin = 0;
    MPI_Finalized(&fin);
    if (fin) return;
    if (coll_ctl_ != MPI_COMM_NULL) MPI_Comm_free(&coll_ctl_);
    if (p2p_ctl_ != MPI_COMM_NULL) MPI_Comm_free(&p2p_ctl_);
    if (ring_ != MPI_COMM_NULL) MPI_Comm_free(&ring_);
    if (comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override {
    // mpirun passes --mca settings to its processes as OMPI_MCA_* variables
    const char* pml = std::getenv("OMPI_MCA_pml");
    char ver[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int len = 0;
    MPI_Get_library_version(ver, &len);
    std::string v(ver, static_cast<size_t>(len));
    v = v.substr(0, v.find_first_of(",\n"));
    return cat("mpi (", v, pml ? cat(", pml ", pml) : std::string(), ")");
  }

  Status all_reduce(void* data, int64_t count, DType dtype, ReduceOp op) override {
    Header h = header(Kind::all_reduce, count, dtype, 0, op);
    RLX_TRY(usable(h));
    RLX_TRY(check_buffer("all_reduce", data, count, dtype));
    RLX_TRY(check_reduce("all_reduce", dtype, op));
    int n = 0;
    RLX_TRY(mpi_count(h, count, dtype, &n));
    const int64_t bytes = static_cast<int64_t>(dtype_bytes(dtype, count));
    if (size_ > 1 && size_ <= kDirectMaxRanks && count > 0 && bytes < ring_bytes_ && bytes <= kDirectMaxBytes)
      return direct_all_reduce(h, data, count, dtype, op);
    if (size_ > 1 && count >= size_ && bytes >= ring_bytes_) {
      const Clock::time_point start = Clock::now();
      RLX_TRY(agree(h, start));
      return ring_all_reduce(h, data, count, dtype, op, start);
    }
    return collective(h, [&](MPI_Request* r) {
      return MPI_Iallreduce(MPI_IN_PLACE, data, n, mpi_type(dtype), mpi_op(op, dtype), comm_, r);
    });
  }

  Status all_gather(const void* send, void* recv, int64_t count, DType dtype) override {
    Header h = header(Kind::all_gather, count, dtype, 0, ReduceOp::sum);
    RLX_TRY(usable(h));
    RLX_TRY(check_buffer("all_gather send", send, count, dtype));
    RLX_TRY(check_buffer("all_gather recv", recv, count, dtype));
    int n = 0;
    RLX_TRY(mpi_count(h, count * size_, dtype, &n));
    RLX_TRY(mpi_count(h, count, dtype, &n));
    // MPI forbids overlapping buffers except in place: send already at this rank's block
    const bool in_place =
        send == static_cast<const char*>(recv) + dtype_bytes(dtype, static_cast<size_t>(count)) * rank_;
    return collective(h, [&](MPI_Request* r) {
      return MPI_Iallgather(in_place ? MPI_IN_PLACE : send, n, mpi_type(dtype), recv, n, mpi_type(dtype), comm_, r);
    });
  }

  Status reduce_scatter(const void* send, void* recv, int64_t count, DType dtype, ReduceOp op) override {
    Header h = header(Kind::reduce_scatter, count, dtype, 0, op);
    RLX_TRY(usable(h));
    RLX_TRY(check_buffer("reduce_scatter send", send, count, dtype));
    RLX_TRY(check_buffer("reduce_scatter recv", recv, count, dtype));
    RLX_TRY(check_reduce("reduce_scatter", dtype, op));
    int n = 0;
    RLX_TRY(mpi_count(h, count * size_, dtype, &n));
    RLX_TRY(mpi_count(h, count, dtype, &n));
    return collective(h, [&](MPI_Request* r) {
      return MPI_Ireduce_scatter_block(send == recv ? MPI_IN_PLACE : send, recv, n, mpi_type(dtype),
                                       mpi_op(op, dtype), comm_, r);
    });
  }

  Status broadcast(void* data, int64_t count, DType dtype, int root) override {
    Header h = header(Kind::broadcast, count, dtype, root, ReduceOp::sum);
    RLX_TRY(usable(h));
    RLX_TRY(check_buffer("broadcast", data, count, dtype));
    if (root < 0 || root >= size_)
      return error(ErrorCode::out_of_range, who(), describe(h), ": root ", root, " is not a rank of this ", size_,
                   "-rank communicator");
    int n = 0;
    RLX_TRY(mpi_count(h, count, dtype, &n));
    return collective(h, [&](MPI_Request* r) { return MPI_Ibcast(data, n, mpi_type(dtype), root, comm_, r); });
  }

  // Every rank arriving at the header exchange is the barrier.
  Status barrier() override {
    Header h = header(Kind::barrier, 0, DType::u8, 0, ReduceOp::sum);
    RLX_TRY(usable(h));
    return collective(h, nullptr);
  }

  Status send(const void* data, int64_t count, DType dtype, int peer, int tag) override {
    Header h;
    std::vector<MPI_Request> reqs;
    const Clock::time_point start = Clock::now();
    RLX_TRY(post_send(data, count, dtype, peer, tag, &h, &reqs));
    return poll(h, reqs, nullptr, start, peer);
  }

  // Starts a send (its header on the control communicator, then the data): the part of send()
  // before the wait, which send_recv() also needs.
  Status post_send(const void* data, int64_t count, DType dtype, int peer, int tag, Header* h,
                   std::vector<MPI_Request>* reqs) {
    *h = header_p2p(Kind::send, ++send_seq_, count, dtype, tag);
    RLX_TRY(usable(*h));
    RLX_TRY(check_p2p(*h, data, count, dtype, peer, tag));
    int n = 0;
    RLX_TRY(mpi_count(*h, count, dtype, &n));
    reqs->assign(2, MPI_REQUEST_NULL);
    scratch_->send_header = *h;
    int rc = RLX_MPI(MPI_Isend(&scratch_->send_header, sizeof(Header), MPI_BYTE, peer, tag, p2p_ctl_, &(*reqs)[0]));
    if (rc == MPI_SUCCESS) rc = RLX_MPI(MPI_Isend(data, n, mpi_type(dtype), peer, tag, comm_, &(*reqs)[1]));
    if (rc != MPI_SUCCESS) return fail(*h, cat(": ", mpi_error_string(rc)), peer);
    return Status::ok();
  }

  Status recv(void* data, int64_t count, DType dtype, int peer, int tag) override {
    Header h = header_p2p(Kind::recv, ++recv_seq_, count, dtype, tag);
    RLX_TRY(usable(h));
    RLX_TRY(check_p2p(h, data, count, dtype, peer, tag));
    int n = 0;
    RLX_TRY(mpi_count(h, count, dtype, &n));
    const Clock::time_point start = Clock::now();
    Header& theirs = scratch_->recv_header;
    theirs = Header();
    std::vector<MPI_Request> hreq(1, MPI_REQUEST_NULL);
    std::vector<MPI_Request> dreq(1, MPI_REQUEST_NULL);
    int rc = RLX_MPI(MPI_Irecv(&theirs, sizeof(Header), MPI_BYTE, peer, tag, p2p_ctl_, &hreq[0]));
    if (rc != MPI_SUCCESS) return fail(h, cat(": ", mpi_error_string(rc)), peer);
    RLX_TRY(poll(h, hreq, nullptr, start, peer));
    // the data is received only once its header matches: a mismatched message is never
    // written into the caller's buffer
    if (theirs.count != h.count || theirs.dtype != h.dtype) {
      const DType td = static_cast<DType>(theirs.dtype);
      return fail(h, cat(": rank ", peer, " sent ", theirs.dtype >= 0 && theirs.dtype < kNumDTypes
                                                         ? describe_size(theirs.count, td)
                                                         : cat(theirs.count, " elements of dtype #", theirs.dtype),
                         " (its send #", theirs.seq, " with tag ", tag, ")"),
                  peer, ErrorCode::shape_error);
    }
    rc = RLX_MPI(MPI_Irecv(data, n, mpi_type(dtype), peer, tag, comm_, &dreq[0]));
    if (rc != MPI_SUCCESS) return fail(h, cat(": ", mpi_error_string(rc)), peer);
    return poll(h, dreq, nullptr, start, peer);
  }

  // The send is posted first (header and data, as send() does), then the receive runs as
  // recv() does; MPI progresses the pending send while the receive is polled, and the send is
  // completed last. So two ranks that send to each other at the same time do not deadlock.
  Status send_recv(const void* send_data, int64_t send_count, int dest, int send_tag, void* recv_data,
                   int64_t recv_count, int source, int recv_tag, DType dtype) override {
    Header h;
    std::vector<MPI_Request> reqs;
    const Clock::time_point start = Clock::now();
    RLX_TRY(post_send(send_data, send_count, dtype, dest, send_tag, &h, &reqs));
    RLX_TRY(recv(recv_data, recv_count, dtype, source, recv_tag));
    return poll(h, reqs, nullptr, start, dest);
  }

  Expected<std::shared_ptr<Communicator>> split(int color, int key) override {
    Header h = header(Kind::split, 0, DType::u8, 0, ReduceOp::sum);
    RLX_TRY(usable(h));
    // everybody has arrived after the header exchange, so MPI_Comm_split's own blocking
    // exchange completes at once unless a rank dies in between; the watchdog bounds that
    RLX_TRY(collective(h, nullptr));
    MPI_Comm out = MPI_COMM_NULL;
    int rc;
    {
      Watchdog wd(cat("rank ", rank_, ": ", describe(h), ": MPI_Comm_split did not return within ", deadline().count(),
                      " ms"),
                  deadline());
      rc = RLX_MPI(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &out));
    }
    if (rc != MPI_SUCCESS) return fail(h, cat(": MPI_Comm_split: ", mpi_error_string(rc)));
    if (out == MPI_COMM_NULL) return std::shared_ptr<Communicator>();
    RLX_ASSIGN_OR_RETURN(auto c, create(out, deadline()));
    return std::shared_ptr<Communicator>(std::move(c));
  }

  void abort(int code) noexcept override {
    std::fprintf(stderr, "rlx: rank %d: abort(%d): ending the job\n", rank_, code);
    std::fflush(nullptr);
    // MPI_Abort asks the launcher to end every rank and normally ends this process too; it can
    // block when the runtime is gone, so it runs on a thread of its own and we exit regardless
    const MPI_Comm comm = comm_;
    try {
      std::thread([comm, code] { MPI_Abort(comm, code); }).detach();
    } catch (...) {
    }
    std::this_thread::sleep_for(milliseconds(1500));
    _exit(code);
  }

  // At exit, before MPI_Finalize (which waits for every rank without a bound). Its own,
  // longer bound: a rank that finishes early legitimately waits here for slower ones (which
  // may still be writing results), and a dead peer on this host is still seen at once.
  // RLX_COMM_EXIT_TIMEOUT_MS, default 10 minutes or the deadline if longer.
  Status exit_barrier() {
    Header h = header(Kind::exit_barrier, 0, DType::u8, 0, ReduceOp::sum);
    RLX_TRY(usable(h));
    milliseconds bound = std::max(deadline(), milliseconds(600000));
    if (const char* v = std::getenv("RLX_COMM_EXIT_TIMEOUT_MS")) {
      char* end = nullptr;
      const long long ms = std::strtoll(v, &end, 10);
      if (end != v && *end == '\0' && ms > 0) bound = milliseconds(ms);
    }
    set_deadline(bound);
    return collective(h, nullptr);
  }
  bool broken() const { return !broken_.empty(); }

 private:
  MpiCommunicator() = default;

  std::string who() const { return cat("rank ", rank_, ": "); }

  Header header(Kind k, int64_t count, DType dtype, int root, ReduceOp op) {
    Header h;
    h.kind = static_cast<int32_t>(k);
    h.dtype = static_cast<int32_t>(dtype);
    h.seq = ++seq_;
    h.count = count;
    h.root = root;
    h.op = static_cast<int32_t>(op);
    return h;
  }
  static Header header_p2p(Kind k, int64_t seq, int64_t count, DType dtype, int tag) {
    Header h;
    h.kind = static_cast<int32_t>(k);
    h.dtype = static_cast<int32_t>(dtype);
    h.seq = seq;
    h.count = count;
    h.root = tag;
    return h;
  }
  std::string describe_p2p(const Header& h, int peer) const {
    const Kind k = static_cast<Kind>(h.kind);
    return cat(kind_name(k), " #", h.seq, k == Kind::send ? " to rank " : " from rank ", peer, " (tag ", h.root, ", ",
               describe_size(h.count, static_cast<DType>(h.dtype)), ")");
  }
  std::string describe_any(const Header& h, int peer) const {
    const Kind k = static_cast<Kind>(h.kind);
    return (k == Kind::send || k == Kind::recv) ? describe_p2p(h, peer) : describe(h);
  }

  Status usable(const Header& h) const {
    if (broken_.empty()) return Status::ok();
    return error(ErrorCode::runtime_error, who(), kind_name(static_cast<Kind>(h.kind)),
                 ": the communicator is broken by an earlier error (", broken_, ")");
  }

  Status mpi_count(const Header& h, int64_t count, DType dtype, int* out) const {
    const int64_t n = is_packed(dtype) ? count / 2 : count;
    if (n > INT_MAX)
      return error(ErrorCode::unsupported, who(), describe(h), ": more than ", INT_MAX,
                   " elements in one MPI call; split the buffer");
    *out = static_cast<int>(n);
    return Status::ok();
  }

  Status check_p2p(const Header& h, const void* data, int64_t count, DType dtype, int peer, int tag) const {
    const Kind k = static_cast<Kind>(h.kind);
    RLX_TRY(check_buffer(kind_name(k), data, count, dtype));
    if (peer < 0 || peer >= size_)
      return error(ErrorCode::out_of_range, who(), kind_name(k), ": peer ", peer, " is not a rank of this ", size_,
                   "-rank communicator");
    if (peer == rank_)
      return error(ErrorCode::invalid_argument, who(), kind_name(k),
                   ": peer is this rank itself (a send to self cannot complete before its recv)");
    if (tag < 0 || tag > tag_ub_)
      return error(ErrorCode::out_of_range, who(), kind_name(k), ": tag ", tag, " is outside [0, ", tag_ub_, "]");
    return Status::ok();
  }

  // Records the first error: the communicator is broken from now on.
  Status fail(const Header& h, const std::string& what, int peer = -1, ErrorCode code = ErrorCode::runtime_error) {
    Status s = error(code, who(), peer >= 0 ? describe_p2p(h, peer) : describe_any(h, peer), what);
    if (broken_.empty()) broken_ = s.message();
    runtime().any_broken = true;
    return s;
  }

  // The header exchange, then `start_data` (nullptr: none), both within the deadline.
  template <class StartData>
  Status collective(const Header& h, StartData&& start_data) {
    const Clock::time_point start = Clock::now();
    RLX_TRY(agree(h, start));
    if constexpr (!std::is_same_v<std::decay_t<StartData>, std::nullptr_t>) {
      if (h.count == 0) return Status::ok();
      std::vector<MPI_Request> data(1, MPI_REQUEST_NULL);
      const int rc = RLX_MPI(start_data(&data[0]));
      if (rc != MPI_SUCCESS) return fail(h, cat(": ", mpi_error_string(rc)));
      return poll(h, data, nullptr, start);
    }
    return Status::ok();
  }

  // All-reduce of large buffers as a ring (reduce-scatter, then all-gather) of nonblocking
  // point-to-point messages with MPI_Reduce_local in between: MPI's nonblocking
  // MPI_Iallreduce (libnbc in Open MPI) moves large buffers at about half the speed of its
  // blocking MPI_Allreduce, which rlx cannot use (it cannot be bounded by a deadline). Every
  // chunk is reduced once, by one rank, then copied: all ranks get identical bits.
  Status ring_all_reduce(const Header& h, void* data, int64_t count, DType dtype, ReduceOp op,
                         Clock::time_point start) {
    const int n = size_, right = (rank_ + 1) % n, left = (rank_ + n - 1) % n;
    const size_t esize = dtype_bytes(dtype, 1);
    auto lo = [&](int i) { return count * i / n; };
    auto len = [&](int i) { return static_cast<int>(lo(i + 1) - lo(i)); };
    char* base = static_cast<char*>(data);
    std::vector<uint8_t>& tmp = scratch_->ring;
    tmp.resize(esize * static_cast<size_t>(count / n + 1));
    const MPI_Datatype t = mpi_type(dtype);
    const MPI_Op o = mpi_op(op, dtype);
    for (int phase = 0; phase < 2; ++phase) {
      for (int s = 0; s < n - 1; ++s) {
        // reduce-scatter: pass chunk rank-s on, reduce chunk rank-s-1 into ours; afterwards
        // this rank holds chunk rank+1 complete. all-gather: pass the complete chunks around.
        const int send_c = phase == 0 ? (rank_ - s + n) % n : (rank_ + 1 - s + n) % n;
        const int recv_c = phase == 0 ? (rank_ - s - 1 + 2 * n) % n : (rank_ - s + n) % n;
        void* into = phase == 0 ? static_cast<void*>(tmp.data()) : base + lo(recv_c) * esize;
        std::vector<MPI_Request> reqs(2, MPI_REQUEST_NULL);
        int rc = RLX_MPI(MPI_Irecv(into, len(recv_c), t, left, phase * n + s, ring_, &reqs[0]));
        if (rc == MPI_SUCCESS)
          rc = RLX_MPI(MPI_Isend(base + lo(send_c) * esize, len(send_c), t, right, phase * n + s, ring_, &reqs[1]));
        if (rc != MPI_SUCCESS) return fail(h, cat(": ", mpi_error_string(rc)));
        RLX_TRY(poll(h, reqs, nullptr, start));
        if (phase == 0) {
          rc = RLX_MPI(MPI_Reduce_local(tmp.data(), base + lo(recv_c) * esize, len(recv_c), t, o));
          if (rc != MPI_SUCCESS) return fail(h, cat(": MPI_Reduce_local: ", mpi_error_string(rc)));
        }
      }
    }
    return Status::ok();
  }

  // All-reduce of small buffers: every rank sends its buffer to every other one while the
  // headers are exchanged (one round trip instead of the header's plus MPI_Iallreduce's), then
  // reduces all of them in rank order, so every rank computes the same bits.
  Status direct_all_reduce(const Header& h, void* data, int64_t count, DType dtype, ReduceOp op) {
    const Clock::time_point start = Clock::now();
    const size_t bytes = dtype_bytes(dtype, static_cast<size_t>(count));
    const int n = static_cast<int>(count);
    const MPI_Datatype t = mpi_type(dtype);
    // The data is posted before the headers are compared, so a peer may be sending something
    // else: every slot takes the largest message this path ever sends (as bytes), so a
    // mismatched one can never be truncated (a truncated receive left pending crashed Open
    // MPI 4.1's matching later); on a mismatch the requests stay pending into scratch_, which
    // a broken communicator never frees.
    const size_t slot = kDirectMaxBytes;
    std::vector<uint8_t>& all = scratch_->direct;
    all.resize(slot * size_);
    std::memcpy(all.data() + slot * rank_, data, bytes);
    const int tag = 2 * size_;  // apart from the ring's tags on the same communicator
    std::vector<MPI_Request> reqs;
    int rc = MPI_SUCCESS;
    for (int j = 0; j < size_ && rc == MPI_SUCCESS; ++j) {
      if (j == rank_) continue;
      reqs.push_back(MPI_REQUEST_NULL);
      rc = RLX_MPI(MPI_Irecv(all.data() + slot * j, static_cast<int>(slot), MPI_BYTE, j, tag, ring_, &reqs.back()));
    }
    for (int j = 0; j < size_ && rc == MPI_SUCCESS; ++j) {
      if (j == rank_) continue;
      reqs.push_back(MPI_REQUEST_NULL);
      rc = RLX_MPI(
          MPI_Isend(all.data() + slot * rank_, static_cast<int>(bytes), MPI_BYTE, j, tag, ring_, &reqs.back()));
    }
    if (rc != MPI_SUCCESS) return fail(h, cat(": ", mpi_error_string(rc)));
    RLX_TRY(agree(h, start));
    RLX_TRY(poll(h, reqs, nullptr, start));
    // acc = x[0], then acc = x[j] op acc for j = 1.. in rank order
    uint8_t* acc = all.data();
    const MPI_Op o = mpi_op(op, dtype);
    for (int j = 1; j < size_; ++j) {
      rc = RLX_MPI(MPI_Reduce_local(all.data() + slot * j, acc, n, t, o));
      if (rc != MPI_SUCCESS) return fail(h, cat(": MPI_Reduce_local: ", mpi_error_string(rc)));
    }
    std::memcpy(data, acc, bytes);
    return Status::ok();
  }

  // The header exchange: every rank called the same collective, or an error naming who
  // called what.
  Status agree(const Header& h, Clock::time_point start) {
    // in scratch_, which outlives requests left pending by a failure
    std::vector<Header>& all = scratch_->all;
    all.assign(static_cast<size_t>(size_), Header());
    all[rank_] = h;
    scratch_->coll_header = h;
    std::vector<MPI_Request> reqs;
    std::vector<int> from;  // the rank each receive request listens to
    int rc = MPI_SUCCESS;
    if (size_ <= kPointToPointHeaders) {
      // point to point, so that a missing rank can be named
      for (int j = 0; j < size_ && rc == MPI_SUCCESS; ++j) {
        if (j == rank_) continue;
        reqs.push_back(MPI_REQUEST_NULL);
        from.push_back(j);
        rc = RLX_MPI(MPI_Irecv(&all[j], sizeof(Header), MPI_BYTE, j, 0, coll_ctl_, &reqs.back()));
      }
      for (int j = 0; j < size_ && rc == MPI_SUCCESS; ++j) {
        if (j == rank_) continue;
        reqs.push_back(MPI_REQUEST_NULL);
        from.push_back(-1);
        rc = RLX_MPI(MPI_Isend(&scratch_->coll_header, sizeof(Header), MPI_BYTE, j, 0, coll_ctl_, &reqs.back()));
      }
    } else {
      reqs.push_back(MPI_REQUEST_NULL);
      from.push_back(-1);
      rc = RLX_MPI(MPI_Iallgather(&scratch_->coll_header, sizeof(Header), MPI_BYTE, all.data(), sizeof(Header), MPI_BYTE, coll_ctl_,
                                  &reqs.back()));
    }
    if (rc != MPI_SUCCESS) return fail(h, cat(": ", mpi_error_string(rc)));
    RLX_TRY(poll(h, reqs, &from, start));
    // the same call everywhere?
    std::string diff;
    int mismatches = 0;
    for (int j = 0; j < size_; ++j) {
      const Header& o = all[j];
      const bool same = o.kind == h.kind && o.seq == h.seq &&
                        (!has_data(static_cast<Kind>(h.kind)) ||
                         (o.dtype == h.dtype && o.count == h.count && o.root == h.root &&
                          (!has_op(static_cast<Kind>(h.kind)) || o.op == h.op)));
      if (same) continue;
      if (++mismatches <= 4) diff += cat(mismatches > 1 ? "; " : ": ", "rank ", j, " called ", describe(o));
    }
    if (mismatches > 4) diff += cat("; and ", mismatches - 4, " more rank(s)");
    if (mismatches) return fail(h, diff, -1, ErrorCode::shape_error);
    return Status::ok();
  }

  // Polls `reqs` until all complete, an MPI error, a dead peer on this host, or the deadline
  // (counted from `start`). `from[i]` >= 0: request i is the header of that rank, so a rank
  // whose request is pending "did not arrive"; `peer` >= 0: a point-to-point partner.
  Status poll(const Header& h, std::vector<MPI_Request>& reqs, const std::vector<int>* from, Clock::time_point start,
              int peer = -1) {
    struct InCall {
      InCall(std::string what, Clock::time_point end) {
        Runtime& rt = runtime();
        std::lock_guard<std::mutex> lock(rt.calls_mu);
        rt.calls[std::this_thread::get_id()] = {std::move(what), end};
      }
      ~InCall() {
        Runtime& rt = runtime();
        std::lock_guard<std::mutex> lock(rt.calls_mu);
        rt.calls.erase(std::this_thread::get_id());
      }
    } in_call(who() + describe_any(h, peer), start + deadline());
    std::vector<char> done(reqs.size(), 0);
    for (size_t i = 0; i < reqs.size(); ++i) done[i] = reqs[i] == MPI_REQUEST_NULL;
    size_t left = std::count(done.begin(), done.end(), 0);
    std::vector<int> index(reqs.size());
    std::vector<MPI_Status> status(reqs.size());
    Clock::time_point next_check = Clock::now() + milliseconds(5);
    const Clock::time_point end = start + deadline();
    while (left > 0) {
      // one call tests them all (each MPI test call also drives MPI's progress engine)
      int completed = 0;
      const int rc = RLX_MPI(
          MPI_Testsome(static_cast<int>(reqs.size()), reqs.data(), &completed, index.data(), status.data()));
      if (rc != MPI_SUCCESS) {
        int err = rc;
        if (rc == MPI_ERR_IN_STATUS) {
          for (int k = 0; k < completed; ++k)
            if (status[k].MPI_ERROR != MPI_SUCCESS) err = status[k].MPI_ERROR;
        }
        // a transport error is most often a peer that died: say so when it did
        return fail(h, cat(": ", mpi_error_string(err), gone_peers(peer)), peer);
      }
      if (completed == MPI_UNDEFINED) break;  // every request is done
      for (int k = 0; k < completed; ++k) {
        if (!done[index[k]]) --left;
        done[index[k]] = 1;
      }
      if (left == 0) break;
      const Clock::time_point now = Clock::now();
      // whom we wait for: the ranks whose headers are missing, else every peer
      std::vector<int> waiting;
      if (from) {
        for (size_t i = 0; i < reqs.size(); ++i)
          if (!done[i] && (*from)[i] >= 0) waiting.push_back((*from)[i]);
      }
      const bool arrived = from && waiting.empty();
      if (waiting.empty()) {
        if (peer >= 0) {
          waiting.push_back(peer);
        } else {
          for (int j = 0; j < size_; ++j)
            if (j != rank_) waiting.push_back(j);
        }
      }
      if (now >= next_check || now >= end) {
        next_check = now + milliseconds(10);
        std::vector<int> gone;
        std::string where;
        for (int j : waiting) {
          if (!peer_gone(j)) continue;
          gone.push_back(j);
          if (gone.size() <= 4)
            where += cat(gone.size() > 1 ? "; " : "", "pid ", peers_[j].pid, " on ", host_name(peers_[j]));
        }
        // a peer that finished its part of the call may exit before this rank has taken what
        // it sent (a collective's ranks finish at different times, and a slow rank, e.g. under
        // the sanitizers, sees the exit first): the call fails only if its requests still do
        // not complete in a few more polls
        if (!gone.empty() && finish_after_peer_exit(reqs, done, left, index, status)) break;
        if (!gone.empty()) {
          const int64_t ms = std::chrono::duration_cast<milliseconds>(now - start).count();
          return fail(h, cat(" failed after ", ms, " ms: rank(s) ", rank_list(gone),
                             from && !arrived ? " did not arrive" : " left during the transfer",
                             " (process gone: ", where, ")"),
                      peer);
        }
      }
      if (now >= end) {
        std::string who_missing;
        if (from && !arrived) {
          who_missing = cat("; rank(s) ", rank_list(waiting), " did not arrive (", liveness(waiting), ")");
        } else if (from || peer < 0) {
          who_missing = cat("; every rank arrived but the transfer did not finish (", liveness(waiting), ")");
        } else {
          who_missing = cat("; rank ", peer, " did not ", h.kind == static_cast<int32_t>(Kind::send) ? "receive" : "send",
                            " it (", liveness(waiting), ")");
        }
        return fail(h, cat(" did not complete within ", deadline().count(), " ms", who_missing), peer);
      }
      // yield while a call may still be in its normal course (MPI's own blocking calls spin
      // like this, and a large transfer over shared memory advances only in these polls);
      // sleep only once the wait is long, i.e. a peer is late
      const auto waited = now - start;
      if (waited < milliseconds(1000)) {
        sched_yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(waited < milliseconds(5000) ? 100 : 1000));
      }
    }
    return Status::ok();
  }

  // Polls `reqs` for up to 50 ms more (what a peer sent before it exited is still delivered);
  // true when every one completed. An MPI error ends the polls (false: the caller reports the
  // lost peer).
  static bool finish_after_peer_exit(std::vector<MPI_Request>& reqs, std::vector<char>& done, size_t& left,
                                     std::vector<int>& index, std::vector<MPI_Status>& status) {
    const Clock::time_point until = Clock::now() + milliseconds(50);
    while (left > 0 && Clock::now() < until) {
      int completed = 0;
      if (RLX_MPI(MPI_Testsome(static_cast<int>(reqs.size()), reqs.data(), &completed, index.data(),
                               status.data())) != MPI_SUCCESS)
        return false;
      if (completed == MPI_UNDEFINED) return true;
      for (int k = 0; k < completed; ++k) {
        if (!done[index[k]]) --left;
        done[index[k]] = 1;
      }
      sched_yield();
    }
    return left == 0;
  }

  // "; rank(s) 2 gone (process gone: pid ...)" for the peers on this host that died, or "".
  std::string gone_peers(int peer) const {
    std::vector<int> gone;
    std::string where;
    for (int j = 0; j < size_; ++j) {
      if ((peer >= 0 && j != peer) || !peer_gone(j)) continue;
      gone.push_back(j);
      if (gone.size() <= 4) where += cat(gone.size() > 1 ? "; " : "", "pid ", peers_[j].pid, " on ", host_name(peers_[j]));
    }
    if (gone.empty()) return "";
    return cat("; rank(s) ", rank_list(gone), " left during the transfer (process gone: ", where, ")");
  }

  // A peer on this host whose process ended (or is a zombie, or whose pid was reused).
  bool peer_gone(int j) const {
    if (!peers_known_ || j == rank_ || !same_host_[j] || peers_[j].pid <= 0) return false;
    if (kill(static_cast<pid_t>(peers_[j].pid), 0) != 0) return errno == ESRCH;
    const auto [state, start_time] = proc_state(peers_[j].pid);
    if (state == 0 || state == 'Z' || state == 'X') return true;
    return peers_[j].start_time != 0 && start_time != 0 && start_time != peers_[j].start_time;
  }

  std::string liveness(const std::vector<int>& ranks) const {
    if (!peers_known_) return "peers unknown";
    std::string s;
    for (size_t i = 0; i < ranks.size() && i < 4; ++i) {
      const int j = ranks[i];
      s += cat(i ? "; " : "", "rank ", j, ": ",
               same_host_[j] ? cat("still running, pid ", peers_[j].pid, " on ", host_name(peers_[j]))
                             : cat("on host ", host_name(peers_[j])));
    }
    return s;
  }

  static constexpr int kPointToPointHeaders = 64;
  // all_reduce by direct exchange (direct_all_reduce) up to this size and rank count
  static constexpr int kDirectMaxRanks = 8;
  static constexpr int64_t kDirectMaxBytes = 64 << 10;

  // Buffers that pending MPI requests point into.
  struct Scratch {
    std::vector<Header> all;
    Header coll_header, send_header, recv_header;
    std::vector<PeerInfo> peers_in;
    std::vector<uint8_t> ring, direct;
    PeerInfo me;
  };
  Scratch* scratch_ = new Scratch();

  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm coll_ctl_ = MPI_COMM_NULL;
  MPI_Comm p2p_ctl_ = MPI_COMM_NULL;
  MPI_Comm ring_ = MPI_COMM_NULL;  // the ring all-reduce's messages
  // all_reduce of at least this many bytes runs as a ring (RLX_COMM_RING_BYTES; 0: always);
  // set in create(), from the size
  int64_t ring_bytes_ = 0;
  int rank_ = 0;
  int size_ = 1;
  int tag_ub_ = 32767;
  int64_t seq_ = 0;
  int64_t send_seq_ = 0;
  int64_t recv_seq_ = 0;
  std::vector<PeerInfo> peers_;
  std::vector<bool> same_host_;
  bool peers_known_ = false;
  std::string broken_;
};

void finalize_at_exit() {
  Runtime& rt = runtime();
  std::shared_ptr<Communicator> world;
  {
    std::lock_guard<std::mutex> lock(rt.mu);
    if (rt.finalized) return;
    world = rt.world;
  }
  auto* w = static_cast<MpiCommunicator*>(world.get());
  const int rank = w ? w->rank() : -1;
  {
    std::lock_guard<std::mutex> lock(rt.calls_mu);
    auto it = rt.calls.find(std::this_thread::get_id());
    if (it != rt.calls.end()) {
      std::fprintf(stderr,
                   "rlx: %s: the process is ending inside this call (the MPI library ended it: a peer is "
                   "probably gone); not finalizing MPI\n",
                   it->second.what.c_str());
      std::fflush(nullptr);
      return;
    }
  }
  if (rt.any_broken) {
    // MPI_Finalize would wait for peers that may be gone
    std::fprintf(stderr, "rlx: rank %d: not finalizing MPI after a communication error\n", rank);
    std::fflush(nullptr);
    return;
  }
  if (w) {
    Status s = w->exit_barrier();
    if (!s.is_ok()) {
      std::fprintf(stderr, "rlx: %s; not finalizing MPI\n", s.message().c_str());
      std::fflush(nullptr);
      return;
    }
  }
  Watchdog wd(cat("rank ", rank, ": MPI_Finalize did not return within 30 s"), milliseconds(30000));
  std::lock_guard<std::mutex> lock(rt.mu);
  rt.finalized = true;
  std::lock_guard<std::mutex> l2(mpi_mutex());
  MPI_Finalize();
}

// A thread that ends the process when a call is still inside MPI 2 s after its deadline (its
// own polling would have returned at the deadline: MPI itself does not return).
void start_monitor(Runtime& rt) {
  if (rt.monitor_started) return;
  rt.monitor_started = true;
  std::thread([&rt] {
    while (true) {
      std::this_thread::sleep_for(milliseconds(100));
      std::lock_guard<std::mutex> lock(rt.calls_mu);
      const Clock::time_point now = Clock::now();
      for (const auto& [id, call] : rt.calls) {
        if (now < call.end + milliseconds(2000)) continue;
        std::fprintf(stderr,
                     "rlx: %s did not complete within its deadline and the MPI library has not returned for "
                     "2 s more (stuck inside MPI: a peer is probably gone); ending the process\n",
                     call.what.c_str());
        std::fflush(nullptr);
        _exit(1);
      }
    }
  }).detach();
}

template <ReduceOp Op>
Status create_half_ops(Runtime& rt) {
  int rc = MPI_Op_create(&half_reduce<Op, false>, 1, &rt.half_ops[0][static_cast<int>(Op)]);
  if (rc == MPI_SUCCESS) rc = MPI_Op_create(&half_reduce<Op, true>, 1, &rt.half_ops[1][static_cast<int>(Op)]);
  if (rc != MPI_SUCCESS) return error(ErrorCode::runtime_error, "mpi: MPI_Op_create: ", mpi_error_string(rc));
  return Status::ok();
}

}  // namespace

Expected<std::shared_ptr<Communicator>> mpi_world_communicator() {
  Runtime& rt = runtime();
  std::unique_lock<std::mutex> lock(rt.mu);
  if (rt.world) return rt.world;
  if (!rt.init_error.is_ok()) return rt.init_error;
  if (rt.finalized) return error(ErrorCode::unavailable, "mpi: MPI was already finalized");
  // A write to a TCP peer that died raises SIGPIPE, whose default action ends the process
  // silently (Open MPI 4.1's TCP transport does not block it): ignored unless the program
  // installed a handler, so the write fails with EPIPE and the call ends with an error
  struct sigaction old {};
  if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided = 0;
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) {
      rt.init_error = error(ErrorCode::unavailable, "mpi: MPI_Init_thread failed: ", mpi_error_string(rc));
      return rt.init_error;
    }
    rt.initialized_here = true;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  Status s = create_half_ops<ReduceOp::sum>(rt);
  if (s.is_ok()) s = create_half_ops<ReduceOp::max>(rt);
  if (s.is_ok()) s = create_half_ops<ReduceOp::min>(rt);
  if (s.is_ok()) s = create_half_ops<ReduceOp::prod>(rt);
  if (!s.is_ok()) {
    rt.init_error = s;
    return s;
  }
  start_monitor(rt);
  lock.unlock();  // create() takes the mutex in poll's failure path
  auto w = MpiCommunicator::create(MPI_COMM_WORLD, Communicator::default_deadline());
  lock.lock();
  if (!w) {
    rt.init_error = w.status();
    rt.any_broken = true;
    return rt.init_error;
  }
  rt.world = std::move(*w);
  // finalize only what we initialized (an application that called MPI_Init finalizes itself)
  if (rt.initialized_here) std::atexit(finalize_at_exit);
  return rt.world;
}

}  // namespace rlx::dist::detail
