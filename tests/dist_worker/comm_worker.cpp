// rlx_comm_worker: one rank of a communicator test, started by mpirun from tests/dist.
//
//   rlx_comm_worker SCENARIO OUT_DIR [DEADLINE_MS]
//
// Each rank writes OUT_DIR/rank<R>.txt (key=value lines: status, message, elapsed_ms, ...)
// before it exits, so the test can judge every rank on its own, including ranks that end with
// an error while others are gone. Scenarios:
//   collectives  every collective and dtype against values computed here from seeded data
//   kill         rank 2 exits in the middle of a sequence of all_reduces
//   kill_transfer  rank 2 exits while 16 MiB all_reduces are moving data
//   abort        rank 1 calls abort(7) while the others wait in an all_reduce
//   slow_exit    rank 0 works on after the last collective while the others exit
//   stall        rank 1 sleeps past the deadline before one all_reduce
//   mismatch     ranks disagree on count, collective, dtype, root, and a send/recv size
//   nccl         nccl_communicator over the world (unavailable without a GPU)
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "rlx/comm.h"
#include "rlx/compile.h"
#include "rlx/ir_text.h"

using namespace rlx;
using namespace rlx::dist;
using Clock = std::chrono::steady_clock;

namespace {

std::map<std::string, std::string> g_report;
std::string g_out;
int g_rank = -1;

void write_report() {
  std::ofstream f(g_out + "/rank" + std::to_string(g_rank) + ".txt");
  for (auto& [k, v] : g_report) {
    std::string one = v;
    for (char& c : one)
      if (c == '\n') c = ' ';
    f << k << "=" << one << "\n";
  }
}

[[noreturn]] void finish(int code) {
  write_report();
  std::fflush(nullptr);
  std::exit(code);
}

int64_t ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

// ---- seeded data and the reductions computed locally ----

bool is_reducible(DType t, ReduceOp op) {
  if (is_packed(t)) return false;
  if (t == DType::boolean) return op != ReduceOp::sum;
  if (t == DType::c64) return op == ReduceOp::sum || op == ReduceOp::prod;
  return true;
}

// Element value for (rank, i): small enough that no integer sum or product of 4 ranks
// overflows, never all zero.
double value(DType t, ReduceOp op, int rank, size_t i, uint64_t seed) {
  // splitmix64 of (seed, rank, i): cheap, so every rank can regenerate every rank's data
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(rank) * 0xBF58476D1CE4E5B9ull + i * 0x94D049BB133111EBull;
  auto next = [&z] {
    z += 0x9E3779B97F4A7C15ull;
    uint64_t x = z;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  };
  const double r = static_cast<double>(next() >> 11) * 0x1.0p-53;
  if (t == DType::boolean) return r < 0.6 ? 1 : 0;
  if (is_float(t) || t == DType::c64) return op == ReduceOp::prod ? 0.5 + r : 2 * r - 1;
  const bool uns = is_unsigned_int(t);
  if (op == ReduceOp::prod) {  // 1..3 unsigned, +-1 or +-2 signed
    if (uns) return 1 + static_cast<int>(r * 2.999);
    const int v = 1 + static_cast<int>(r * 1.999);
    return (next() & 1) ? -v : v;
  }
  return uns ? std::floor(r * 60) : std::floor(r * 61) - 30;
}

void store(DType t, void* p, size_t i, double v) {
  switch (t) {
    case DType::f32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DType::f64: static_cast<double*>(p)[i] = v; break;
    case DType::f16: static_cast<uint16_t*>(p)[i] = f32_to_f16(static_cast<float>(v)); break;
    case DType::bf16: static_cast<uint16_t*>(p)[i] = f32_to_bf16(static_cast<float>(v)); break;
    case DType::i8: static_cast<int8_t*>(p)[i] = static_cast<int8_t>(v); break;
    case DType::u8: case DType::boolean: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v); break;
    case DType::i16: static_cast<int16_t*>(p)[i] = static_cast<int16_t>(v); break;
    case DType::u16: static_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(v); break;
    case DType::i32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); break;
    case DType::u32: static_cast<uint32_t*>(p)[i] = static_cast<uint32_t>(v); break;
    case DType::i64: static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v); break;
    case DType::u64: static_cast<uint64_t*>(p)[i] = static_cast<uint64_t>(v); break;
    default: break;
  }
}

double load(DType t, const void* p, size_t i) {
  switch (t) {
    case DType::f32: return static_cast<const float*>(p)[i];
    case DType::f64: return static_cast<const double*>(p)[i];
    case DType::f16: return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::bf16: return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::i8: return static_cast<const int8_t*>(p)[i];
    case DType::u8: case DType::boolean: return static_cast<const uint8_t*>(p)[i];
    case DType::i16: return static_cast<const int16_t*>(p)[i];
    case DType::u16: return static_cast<const uint16_t*>(p)[i];
    case DType::i32: return static_cast<const int32_t*>(p)[i];
    case DType::u32: return static_cast<const uint32_t*>(p)[i];
    case DType::i64: return static_cast<const int64_t*>(p)[i];
    case DType::u64: return static_cast<double>(static_cast<const uint64_t*>(p)[i]);
    default: return 0;
  }
}

// A rank's buffer of `count` elements (c64: complex pairs; packed: random bytes).
std::vector<uint8_t> make(DType t, ReduceOp op, int rank, size_t count, uint64_t seed) {
  std::vector<uint8_t> b(dtype_bytes(t, count));
  if (is_packed(t)) {
    std::mt19937 g(static_cast<uint32_t>(seed * 31 + rank));
    for (auto& x : b) x = static_cast<uint8_t>(g());
    return b;
  }
  for (size_t i = 0; i < count; ++i) {
    if (t == DType::c64) {
      auto* f = reinterpret_cast<float*>(b.data());
      f[2 * i] = static_cast<float>(value(DType::f32, op, rank, 2 * i, seed));
      f[2 * i + 1] = static_cast<float>(value(DType::f32, op, rank, 2 * i + 1, seed) * 0.5);
    } else {
      store(t, b.data(), i, value(t, op, rank, i, seed));
    }
  }
  return b;
}

double tolerance(DType t, double expect) {
  switch (t) {
    case DType::f32: return 1e-5 * std::max(1.0, std::fabs(expect));
    case DType::f64: return 1e-12 * std::max(1.0, std::fabs(expect));
    case DType::f16: return 2e-2 * std::max(1.0, std::fabs(expect));
    case DType::bf16: return 1e-1 * std::max(1.0, std::fabs(expect));
    default: return 0;
  }
}

// Checks `got` (count elements) against the reduction of every rank's data, elements
// [offset, offset + count) of each rank's buffer.
std::string check_reduced(DType t, ReduceOp op, int size, size_t total, size_t offset, size_t count,
                          const void* got, uint64_t seed) {
  std::vector<std::vector<uint8_t>> all;
  for (int r = 0; r < size; ++r) all.push_back(make(t, op, r, total, seed));
  for (size_t i = 0; i < count; ++i) {
    if (t == DType::c64) {
      std::complex<double> e;
      for (int r = 0; r < size; ++r) {
        const auto* f = reinterpret_cast<const float*>(all[r].data());
        const std::complex<double> x(f[2 * (offset + i)], f[2 * (offset + i) + 1]);
        e = r == 0 ? x : (op == ReduceOp::sum ? e + x : e * x);
      }
      const auto* g = static_cast<const float*>(got);
      const std::complex<double> gv(g[2 * i], g[2 * i + 1]);
      if (std::abs(gv - e) > 1e-5 * std::max(1.0, std::abs(e)))
        return cat("element ", i, ": got (", gv.real(), ",", gv.imag(), "), expected (", e.real(), ",", e.imag(), ")");
      continue;
    }
    double e = 0;
    for (int r = 0; r < size; ++r) {
      const double x = load(t, all[r].data(), offset + i);
      if (r == 0) e = x;
      else if (op == ReduceOp::sum) e += x;
      else if (op == ReduceOp::prod) e *= x;
      else if (op == ReduceOp::max) e = std::max(e, x);
      else e = std::min(e, x);
    }
    const double g = load(t, got, i);
    if (!(std::fabs(g - e) <= tolerance(t, e)))
      return cat("element ", i, ": got ", g, ", expected ", e);
  }
  return "";
}

const DType kAllTypes[] = {DType::f32, DType::f16, DType::bf16, DType::f64, DType::c64, DType::i8,
                           DType::u8,  DType::i16, DType::u16,  DType::i32, DType::u32, DType::i64,
                           DType::u64, DType::boolean, DType::i4, DType::u4};
const ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::max, ReduceOp::min, ReduceOp::prod};

int g_failures = 0;
void expect(bool ok, const std::string& what) {
  if (ok) return;
  if (++g_failures <= 20) {
    std::fprintf(stderr, "rank %d: FAILED: %s\n", g_rank, what.c_str());
    g_report["failure." + std::to_string(g_failures)] = what;
  }
}

void check_collectives(Communicator& c, uint64_t seed, const std::string& label) {
  const int n = c.size(), me = c.rank();
  const size_t count = 1538;  // even (packed types), not a multiple of the rank count
  for (DType t : kAllTypes) {
    const std::string tn(dtype_name(t));
    // all_reduce, every op
    for (ReduceOp op : kOps) {
      auto buf = make(t, op, me, count, seed);
      Status s = c.all_reduce(buf.data(), count, t, op);
      const std::string what = cat(label, " all_reduce ", reduce_op_name(op), " ", tn);
      if (!is_reducible(t, op)) {
        expect(!s.is_ok() && s.code() == ErrorCode::unsupported, what + ": expected unsupported, got " + s.to_string());
        continue;
      }
      expect(s.is_ok(), what + ": " + s.to_string());
      if (s.is_ok()) {
        const std::string d = check_reduced(t, op, n, count, 0, count, buf.data(), seed);
        expect(d.empty(), what + ": " + d);
      }
      ++seed;
    }
    // reduce_scatter, sum (or max for bool)
    {
      const ReduceOp op = t == DType::boolean ? ReduceOp::max : ReduceOp::sum;
      const size_t block = 514;
      auto send = make(t, op, me, block * n, seed);
      std::vector<uint8_t> recv(dtype_bytes(t, block), 0xEE);
      Status s = c.reduce_scatter(send.data(), recv.data(), block, t, op);
      const std::string what = cat(label, " reduce_scatter ", tn);
      if (!is_reducible(t, op)) {
        expect(s.code() == ErrorCode::unsupported, what + ": expected unsupported, got " + s.to_string());
      } else {
        expect(s.is_ok(), what + ": " + s.to_string());
        if (s.is_ok()) {
          const std::string d = check_reduced(t, op, n, block * n, block * me, block, recv.data(), seed);
          expect(d.empty(), what + ": " + d);
        }
      }
      ++seed;
    }
    // all_gather (a byte copy for every dtype), once out of place and once in place
    for (bool in_place : {false, true}) {
      std::vector<uint8_t> mine = make(t, ReduceOp::sum, me, count, seed);
      const size_t bytes = mine.size();
      std::vector<uint8_t> recv(bytes * n, 0xEE);
      if (in_place) std::memcpy(recv.data() + bytes * me, mine.data(), bytes);
      Status s = c.all_gather(in_place ? recv.data() + bytes * me : mine.data(), recv.data(), count, t);
      const std::string what = cat(label, " all_gather ", tn, in_place ? " in place" : "");
      expect(s.is_ok(), what + ": " + s.to_string());
      for (int r = 0; r < n && s.is_ok(); ++r) {
        auto e = make(t, ReduceOp::sum, r, count, seed);
        expect(std::memcmp(e.data(), recv.data() + bytes * r, bytes) == 0, cat(what, ": block of rank ", r, " differs"));
      }
      ++seed;
    }
    // broadcast from the last rank
    {
      const int root = n - 1;
      auto buf = make(t, ReduceOp::sum, me, count, seed);
      Status s = c.broadcast(buf.data(), count, t, root);
      expect(s.is_ok(), cat(label, " broadcast ", tn, ": ", s.to_string()));
      auto e = make(t, ReduceOp::sum, root, count, seed);
      expect(s.is_ok() && buf == e, cat(label, " broadcast ", tn, ": data differs from root's"));
      ++seed;
    }
    // send/recv between pairs (0,1), (2,3): the even rank sends first
    if (n % 2 == 0) {
      const int peer = me ^ 1;
      auto mine = make(t, ReduceOp::sum, me, count, seed);
      std::vector<uint8_t> got(mine.size(), 0xEE);
      Status s1, s2;
      if (me % 2 == 0) {
        s1 = c.send(mine.data(), count, t, peer, 7);
        s2 = c.recv(got.data(), count, t, peer, 8);
      } else {
        s1 = c.recv(got.data(), count, t, peer, 7);
        s2 = c.send(mine.data(), count, t, peer, 8);
      }
      expect(s1.is_ok() && s2.is_ok(), cat(label, " send/recv ", tn, ": ", s1.to_string(), " / ", s2.to_string()));
      expect(got == make(t, ReduceOp::sum, peer, count, seed), cat(label, " send/recv ", tn, ": data differs"));
      ++seed;
    }
  }
  Status b = c.barrier();
  expect(b.is_ok(), label + " barrier: " + b.to_string());
  // a large all_reduce (MPI's rendezvous protocol, pipelined algorithms)
  {
    const size_t big = 1 << 20;
    auto buf = make(DType::f32, ReduceOp::sum, me, big, seed);
    Status s = c.all_reduce(buf.data(), big, DType::f32, ReduceOp::sum);
    expect(s.is_ok(), label + " all_reduce 1M f32: " + s.to_string());
    if (s.is_ok()) {
      const std::string d = check_reduced(DType::f32, ReduceOp::sum, n, big, 0, big, buf.data(), seed);
      expect(d.empty(), label + " all_reduce 1M f32: " + d);
    }
  }
  // large all_reduces of several dtypes and ops with a count that does not divide evenly (the
  // ring path; RLX_COMM_RING_BYTES in the test environment moves its threshold)
  for (auto [t, op] : {std::pair{DType::f32, ReduceOp::sum}, std::pair{DType::f16, ReduceOp::sum},
                       std::pair{DType::bf16, ReduceOp::max}, std::pair{DType::i32, ReduceOp::prod},
                       std::pair{DType::boolean, ReduceOp::min}, std::pair{DType::c64, ReduceOp::sum},
                       std::pair{DType::f64, ReduceOp::min}, std::pair{DType::u8, ReduceOp::max}}) {
    const size_t big = 300001;
    auto buf = make(t, op, me, big, seed);
    Status s = c.all_reduce(buf.data(), big, t, op);
    const std::string what = cat(label, " all_reduce ", reduce_op_name(op), " of ", big, " ", dtype_name(t));
    expect(s.is_ok(), what + ": " + s.to_string());
    if (s.is_ok()) {
      const std::string d = check_reduced(t, op, n, big, 0, big, buf.data(), seed);
      expect(d.empty(), what + ": " + d);
    }
    ++seed;
  }
  // errors that are the caller's: no communication, and the communicator stays usable
  {
    std::vector<float> x(4, 1.0f);
    expect(c.broadcast(x.data(), 4, DType::f32, n).code() == ErrorCode::out_of_range, label + " broadcast bad root");
    expect(c.send(x.data(), 4, DType::f32, me, 0).code() == ErrorCode::invalid_argument, label + " send to self");
    expect(c.send(x.data(), 4, DType::f32, n + 3, 0).code() == ErrorCode::out_of_range, label + " send out of range");
    expect(c.all_reduce(x.data(), -1, DType::f32, ReduceOp::sum).code() == ErrorCode::invalid_argument,
           label + " negative count");
    expect(c.all_gather(x.data(), x.data(), 3, DType::i4).code() == ErrorCode::invalid_argument, label + " odd i4");
    Status s = c.all_reduce(x.data(), 4, DType::f32, ReduceOp::sum);
    expect(s.is_ok() && x[0] == static_cast<float>(n), label + " usable after caller errors: " + s.to_string());
  }
}

int scenario_collectives(Communicator& world) {
  check_collectives(world, 11, "world");
  // split: even and odd ranks, in reverse order of their world ranks
  const int me = world.rank(), n = world.size();
  auto sub = world.split(me % 2, -me);
  expect(sub.has_value() && *sub, "split: " + sub.status().to_string());
  if (sub.has_value() && *sub) {
    Communicator& s = **sub;
    std::vector<int> members;
    for (int r = n - 1; r >= 0; --r)
      if (r % 2 == me % 2) members.push_back(r);
    const int expect_rank = static_cast<int>(std::find(members.begin(), members.end(), me) - members.begin());
    expect(s.size() == static_cast<int>(members.size()) && s.rank() == expect_rank,
           cat("split: rank ", s.rank(), " of ", s.size(), ", expected ", expect_rank, " of ", members.size()));
    int32_t v = me + 100;
    Status st = s.all_reduce(&v, 1, DType::i32, ReduceOp::sum);
    int32_t e = 0;
    for (int r : members) e += r + 100;
    expect(st.is_ok() && v == e, cat("split all_reduce: got ", v, " expected ", e, " ", st.to_string()));
    if (s.size() > 1) check_collectives(s, 1000 + me % 2, cat("split(color ", me % 2, ")"));
  }
  auto none = world.split(me == 0 ? -1 : 1, me);
  expect(none.has_value() && (me == 0 ? !*none : (*none && (*none)->size() == n - 1)),
         "split with a negative color: " + none.status().to_string());
  g_report["failures"] = std::to_string(g_failures);
  g_report["status"] = g_failures ? "error" : "ok";
  return g_failures ? 1 : 0;
}

int scenario_kill(Communicator& world) {
  const size_t count = 4096;
  std::vector<float> buf(count);
  for (int i = 0; i < 40; ++i) {
    if (i == 10 && world.rank() == 2) {
      std::fprintf(stderr, "rank 2: exiting in the middle of the all_reduce sequence (test)\n");
      std::fflush(nullptr);
      _exit(3);
    }
    for (size_t k = 0; k < count; ++k) buf[k] = static_cast<float>(world.rank() + k % 7);
    const auto t0 = Clock::now();
    Status s = world.all_reduce(buf.data(), count, DType::f32, ReduceOp::sum);
    if (!s.is_ok()) {
      g_report["status"] = "error";
      g_report["message"] = s.message();
      g_report["elapsed_ms"] = std::to_string(ms_since(t0));
      g_report["iteration"] = std::to_string(i);
      std::fprintf(stderr, "%s\n", s.to_string().c_str());
      return 1;
    }
  }
  g_report["status"] = "ok";
  return 0;
}

// The same through a compiled graph whose all_reduce runs asynchronously on the CPU
// executable's communication thread (it is read only after an unrelated matmul chain): rank 2
// exits before the 10th run; every survivor's run must end with the communicator's error.
int scenario_kill_graph(const std::shared_ptr<Communicator>& world) {
  auto g = parse_graph(R"(
graph @overlap(%x: f32[64, 256], %w: f32[256, 256]) -> (f32[64, 256]) {
  %r = all_reduce(%x) {reduce = "sum"}
  %a = matmul(%x, %w)
  %b = tanh(%a)
  %c = matmul(%b, %w)
  %y = add(%r, %c)
  return %y
}
)");
  if (!g) {
    g_report["status"] = "graph: " + g.status().to_string();
    return 2;
  }
  auto m = Model::compile(*g, {.device = "cpu", .comm = world});
  if (!m) {
    g_report["status"] = "compile: " + m.status().to_string();
    return 2;
  }
  std::vector<Tensor> in{Tensor::zeros(DType::f32, {64, 256}), Tensor::zeros(DType::f32, {256, 256})};
  for (int64_t k = 0; k < in[0].numel(); ++k) in[0].data<float>()[k] = static_cast<float>(world->rank() + k % 5);
  // w = 0: the matmul chain is work to overlap, and y is exactly the all_reduce of x
  for (int i = 0; i < 40; ++i) {
    if (i == 10 && world->rank() == 2) {
      std::fprintf(stderr, "rank 2: exiting between runs of the graph (test)\n");
      std::fflush(nullptr);
      _exit(3);
    }
    const auto t0 = Clock::now();
    auto out = (*m)->run(in);
    if (!out) {
      g_report["status"] = "error";
      g_report["message"] = out.status().message();
      g_report["elapsed_ms"] = std::to_string(ms_since(t0));
      g_report["iteration"] = std::to_string(i);
      std::fprintf(stderr, "%s\n", out.status().to_string().c_str());
      return 1;
    }
    const int n = world->size();
    for (int64_t k = 0; k < (*out)[0].numel(); ++k) {
      const float want = static_cast<float>(n * (n - 1) / 2 + n * (k % 5));
      if ((*out)[0].data<float>()[k] != want) {
        g_report["status"] = "wrong";
        g_report["message"] = "run " + std::to_string(i) + ": y[" + std::to_string(k) + "] = " +
                              std::to_string((*out)[0].data<float>()[k]) + ", expected " + std::to_string(want);
        return 1;
      }
    }
  }
  g_report["status"] = "ok";
  return 0;
}

// Rank 2 dies while large all_reduces are moving data (a thread ends the process a few ms
// into the third one).
int scenario_kill_transfer(Communicator& world) {
  const size_t count = 4 << 20;  // 16 MiB: the ring path, some ms per call on loopback
  std::vector<float> buf(count, 1.0f);
  for (int i = 0; i < 20; ++i) {
    if (i == 3 && world.rank() == 2) {
      std::thread([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(3));
        std::fprintf(stderr, "rank 2: exiting during a large all_reduce (test)\n");
        std::fflush(nullptr);
        _exit(3);
      }).detach();
    }
    const auto t0 = Clock::now();
    Status s = world.all_reduce(buf.data(), count, DType::f32, ReduceOp::sum);
    if (!s.is_ok()) {
      g_report["status"] = "error";
      g_report["message"] = s.message();
      g_report["elapsed_ms"] = std::to_string(ms_since(t0));
      g_report["iteration"] = std::to_string(i);
      std::fprintf(stderr, "%s\n", s.to_string().c_str());
      return 1;
    }
    for (float& v : buf) v = 1.0f;
  }
  g_report["status"] = "ok";
  return 0;
}

// Rank 1 aborts the job while the others wait in an all_reduce: everybody ends at once.
int scenario_abort(Communicator& world) {
  Status b = world.barrier();
  if (!b.is_ok()) return 1;
  if (world.rank() == 1) world.abort(7);
  std::vector<float> buf(1024, 1.0f);
  Status s = world.all_reduce(buf.data(), buf.size(), DType::f32, ReduceOp::sum);
  g_report["status"] = s.is_ok() ? "ok" : "error";
  g_report["message"] = s.message();
  return 1;
}

// Rank 0 is still busy (sleeps 2.5 deadlines) after the last collective while the others
// exit: they wait for it at exit (MPI_Finalize), they do not give up at the deadline.
int scenario_slow_exit(Communicator& world) {
  Status b = world.barrier();
  if (world.rank() == 0) std::this_thread::sleep_for(world.deadline() * 5 / 2);
  g_report["status"] = b.is_ok() ? "ok" : "error";
  g_report["message"] = b.message();
  return b.is_ok() ? 0 : 1;
}

int scenario_stall(Communicator& world) {
  std::vector<float> buf(4096, 1.0f);
  for (int i = 0; i < 4; ++i) {
    if (i == 2 && world.rank() == 1) std::this_thread::sleep_for(world.deadline() * 3);
    const auto t0 = Clock::now();
    Status s = world.all_reduce(buf.data(), buf.size(), DType::f32, ReduceOp::sum);
    if (!s.is_ok()) {
      g_report["status"] = "error";
      g_report["message"] = s.message();
      g_report["elapsed_ms"] = std::to_string(ms_since(t0));
      std::fprintf(stderr, "%s\n", s.to_string().c_str());
      return 1;
    }
  }
  g_report["status"] = "ok";
  return 0;
}

// Each case on a communicator of its own (split with one color), since an error breaks it.
int scenario_mismatch(Communicator& world) {
  const int me = world.rank();
  std::vector<float> a(4096, 1.0f), b(4096 * 8, 0.0f);
  auto record = [&](const char* name, const Status& s) {
    g_report[std::string("case.") + name] = s.is_ok() ? "ok" : s.to_string();
  };
  auto fresh = [&]() -> std::shared_ptr<Communicator> {
    auto c = world.split(0, me);
    if (!c.has_value()) {
      g_report["status"] = "error";
      g_report["message"] = c.status().to_string();
      finish(1);
    }
    return *c;
  };
  {
    auto c = fresh();
    record("count", c->all_reduce(a.data(), me == 0 ? 4096 : 1024, DType::f32, ReduceOp::sum));
    // later calls fail at once
    const auto t0 = Clock::now();
    Status again = c->barrier();
    record("after", again);
    g_report["after_ms"] = std::to_string(ms_since(t0));
  }
  {
    auto c = fresh();
    record("kind", me == 1 ? c->all_gather(a.data(), b.data(), 1024, DType::f32)
                           : c->all_reduce(a.data(), 1024, DType::f32, ReduceOp::sum));
  }
  {
    auto c = fresh();
    record("dtype", c->all_reduce(a.data(), 1024, me == 0 ? DType::f32 : DType::i32, ReduceOp::sum));
  }
  {
    auto c = fresh();
    record("root", c->broadcast(a.data(), 1024, DType::f32, me == 0 ? 0 : 1));
  }
  if (world.size() >= 2) {
    auto c = fresh();
    if (me == 0) record("p2p", c->send(a.data(), 100, DType::f32, 1, 5));
    if (me == 1) record("p2p", c->recv(a.data(), 200, DType::f32, 0, 5));
  }
  // the world itself is still healthy
  Status s = world.all_reduce(a.data(), 16, DType::f32, ReduceOp::sum);
  record("world", s);
  g_report["status"] = "done";
  return 0;
}

int scenario_nccl(Communicator& world) {
  auto n = nccl_communicator(world);
  if (n.has_value()) {
    g_report["nccl"] = "ok";
    g_report["backend"] = (*n)->backend();
  } else {
    g_report["nccl"] = n.status().to_string();
    g_report["nccl_code"] = std::string(error_code_name(n.status().code()));
  }
  // the bootstrap stays usable
  float x = 1.0f;
  Status s = world.all_reduce(&x, 1, DType::f32, ReduceOp::sum);
  g_report["world"] = s.is_ok() && x == static_cast<float>(world.size()) ? "ok" : s.to_string();
  g_report["status"] = "done";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: rlx_comm_worker collectives|kill|kill_graph|kill_transfer|stall|abort|slow_exit|mismatch|nccl OUT_DIR [DEADLINE_MS]\n");
    return 2;
  }
  const std::string scenario = argv[1];
  g_out = argv[2];
  auto world = world_communicator();
  if (!world.has_value()) {
    std::fprintf(stderr, "rlx_comm_worker: %s\n", world.status().to_string().c_str());
    return 2;
  }
  Communicator& w = **world;
  g_rank = w.rank();
  g_report["rank"] = std::to_string(w.rank());
  g_report["size"] = std::to_string(w.size());
  g_report["backend"] = w.backend();
  if (argc > 3) w.set_deadline(std::chrono::milliseconds(std::atoi(argv[3])));
  g_report["deadline_ms"] = std::to_string(w.deadline().count());
  int rc = 2;
  if (scenario == "collectives") rc = scenario_collectives(w);
  else if (scenario == "kill") rc = scenario_kill(w);
  else if (scenario == "kill_graph") rc = scenario_kill_graph(*world);
  else if (scenario == "stall") rc = scenario_stall(w);
  else if (scenario == "kill_transfer") rc = scenario_kill_transfer(w);
  else if (scenario == "abort") rc = scenario_abort(w);
  else if (scenario == "slow_exit") rc = scenario_slow_exit(w);
  else if (scenario == "mismatch") rc = scenario_mismatch(w);
  else if (scenario == "nccl") rc = scenario_nccl(w);
  else g_report["status"] = "unknown scenario " + scenario;
  finish(rc);
}
