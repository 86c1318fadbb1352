// The communicator (include/rlx/comm.h): single-process semantics in this process, and the MPI
// communicator through mpirun and tests/dist_worker/comm_worker.cpp in scenarios: every
// collective and dtype on 2 and 4 ranks (shared memory/TCP, and UCX), a rank killed in the
// middle of a sequence, a stalled rank, ranks that disagree, and NCCL's unavailability here.
// Every mpirun runs under `timeout`, and CTest gives each test its own limit too.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <string>

#include "rlx/comm.h"

namespace rlx::dist {
namespace {

namespace fs = std::filesystem;

// ---- one process ----

TEST(SingleProcess, CollectivesCopy) {
  auto c = single_process_communicator();
  EXPECT_EQ(c->rank(), 0);
  EXPECT_EQ(c->size(), 1);
  EXPECT_EQ(c->backend(), "single");
  std::mt19937 g(5);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(1000), orig;
  for (float& v : x) v = u(g);
  orig = x;
  ASSERT_TRUE(c->all_reduce(x.data(), x.size(), DType::f32, ReduceOp::sum).is_ok());
  EXPECT_EQ(x, orig);
  std::vector<float> y(1000, 0.0f);
  ASSERT_TRUE(c->all_gather(x.data(), y.data(), x.size(), DType::f32).is_ok());
  EXPECT_EQ(y, orig);
  std::fill(y.begin(), y.end(), 0.0f);
  ASSERT_TRUE(c->reduce_scatter(x.data(), y.data(), x.size(), DType::f32, ReduceOp::max).is_ok());
  EXPECT_EQ(y, orig);
  ASSERT_TRUE(c->broadcast(x.data(), x.size(), DType::f32, 0).is_ok());
  EXPECT_EQ(x, orig);
  ASSERT_TRUE(c->barrier().is_ok());
  // packed: bytes, even counts
  std::vector<uint8_t> p(8, 0x5a), q(8, 0);
  ASSERT_TRUE(c->all_gather(p.data(), q.data(), 16, DType::i4).is_ok());
  EXPECT_EQ(p, q);
}

TEST(SingleProcess, Errors) {
  auto c = single_process_communicator();
  std::vector<float> x(4, 1.0f);
  Status s = c->send(x.data(), 4, DType::f32, 0, 0);
  EXPECT_EQ(s.code(), ErrorCode::invalid_argument) << s.to_string();
  EXPECT_NE(s.message().find("no peer"), std::string::npos) << s.message();
  EXPECT_EQ(c->recv(x.data(), 4, DType::f32, 0, 0).code(), ErrorCode::invalid_argument);
  EXPECT_EQ(c->send(x.data(), 4, DType::f32, 1, 0).code(), ErrorCode::out_of_range);
  EXPECT_EQ(c->broadcast(x.data(), 4, DType::f32, 1).code(), ErrorCode::out_of_range);
  EXPECT_EQ(c->all_reduce(x.data(), -2, DType::f32, ReduceOp::sum).code(), ErrorCode::invalid_argument);
  EXPECT_EQ(c->all_reduce(nullptr, 4, DType::f32, ReduceOp::sum).code(), ErrorCode::invalid_argument);
  EXPECT_EQ(c->all_gather(x.data(), x.data(), 3, DType::u4).code(), ErrorCode::invalid_argument);
  Status b = c->all_reduce(x.data(), 4, DType::boolean, ReduceOp::sum);
  EXPECT_EQ(b.code(), ErrorCode::unsupported);
  EXPECT_NE(b.message().find("bool"), std::string::npos) << b.message();
  EXPECT_EQ(c->all_reduce(x.data(), 2, DType::c64, ReduceOp::max).code(), ErrorCode::unsupported);
  EXPECT_EQ(c->all_reduce(x.data(), 8, DType::i4, ReduceOp::sum).code(), ErrorCode::unsupported);
  EXPECT_TRUE(c->all_reduce(x.data(), 4, DType::boolean, ReduceOp::max).is_ok());
  EXPECT_TRUE(c->all_reduce(x.data(), 2, DType::c64, ReduceOp::prod).is_ok());
}

TEST(SingleProcess, Split) {
  auto c = single_process_communicator();
  c->set_deadline(std::chrono::milliseconds(1234));
  auto s = c->split(3, 0);
  ASSERT_TRUE(s.has_value()) << s.status().to_string();
  ASSERT_TRUE(*s);
  EXPECT_EQ((*s)->size(), 1);
  EXPECT_EQ((*s)->deadline().count(), 1234);
  auto none = c->split(-1, 0);
  ASSERT_TRUE(none.has_value());
  EXPECT_FALSE(*none);
}

TEST(ReduceOpNames, RoundTrip) {
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min, ReduceOp::prod}) {
    ReduceOp back = ReduceOp::sum;
    ASSERT_TRUE(parse_reduce_op(reduce_op_name(op), &back));
    EXPECT_EQ(back, op);
  }
  EXPECT_EQ(reduce_op_name(ReduceOp::prod), "prod");
  ReduceOp out = ReduceOp::max;
  EXPECT_FALSE(parse_reduce_op("mean", &out));
  EXPECT_EQ(out, ReduceOp::max);
}

TEST(Deadline, DefaultAndEnvironment) {
  const char* old = std::getenv("RLX_COMM_TIMEOUT_MS");
  const std::string saved = old ? old : "";
  unsetenv("RLX_COMM_TIMEOUT_MS");
  EXPECT_EQ(Communicator::default_deadline().count(), 60000);
  setenv("RLX_COMM_TIMEOUT_MS", "2500", 1);
  EXPECT_EQ(Communicator::default_deadline().count(), 2500);
  EXPECT_EQ(single_process_communicator()->deadline().count(), 2500);
  for (const char* bad : {"0", "-5", "12x", ""}) {
    setenv("RLX_COMM_TIMEOUT_MS", bad, 1);
    EXPECT_EQ(Communicator::default_deadline().count(), 60000) << bad;
  }
  if (old) setenv("RLX_COMM_TIMEOUT_MS", saved.c_str(), 1);
  else unsetenv("RLX_COMM_TIMEOUT_MS");
}

TEST(World, SingleProcessWithoutLauncher) {
  if (launched_by_mpi()) GTEST_SKIP() << "this test program itself runs under an MPI launcher";
  auto w = world_communicator();
  ASSERT_TRUE(w.has_value()) << w.status().to_string();
  EXPECT_EQ((*w)->size(), 1);
  EXPECT_EQ((*w)->backend(), "single");
}

TEST(Nccl, UnavailableWithoutGpu) {
  auto c = single_process_communicator();
  auto n = nccl_communicator(*c);
  if (n.has_value()) GTEST_SKIP() << "NCCL works here (" << (*n)->backend() << "): a GPU machine";
  EXPECT_EQ(n.status().code(), ErrorCode::unavailable) << n.status().to_string();
  EXPECT_NE(n.status().message().find("nccl"), std::string::npos) << n.status().message();
}

// ---- several processes under mpirun ----

struct RankReport {
  std::map<std::string, std::string> kv;
  const std::string& operator[](const std::string& k) const {
    static const std::string none;
    auto it = kv.find(k);
    return it == kv.end() ? none : it->second;
  }
};

struct MpiRun {
  int exit_code = -1;
  std::string output;
  double seconds = 0;
  std::map<int, RankReport> ranks;
};

std::string find_mpirun() {
  for (const char* dir : {"/usr/bin", "/usr/local/bin"}) {
    const std::string p = std::string(dir) + "/mpirun";
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

// Skips (with the reason) where the scenario cannot run.
#define RLX_NEED_MPI()                                                                            \
  do {                                                                                            \
    if (!RLX_TEST_HAVE_MPI) GTEST_SKIP() << "rlx was built without MPI (libopenmpi-dev not found)"; \
    if (find_mpirun().empty()) GTEST_SKIP() << "mpirun not found (install openmpi-bin)";          \
  } while (0)

// Runs `np` ranks of the worker under `timeout`, returning each rank's report.
MpiRun mpi_run(int np, const std::string& scenario, int deadline_ms, int limit_s, const std::string& mca = "",
               const std::string& env = "") {
  static int serial = 0;
  const fs::path dir = fs::temp_directory_path() /
                       ("rlx-dist-" + std::to_string(getpid()) + "-" + scenario + "-" + std::to_string(++serial));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string cmd =
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS=detect_leaks=0 " + env +
      " timeout -k 5 " + std::to_string(limit_s) + " " + find_mpirun() +
      " --oversubscribe --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo " + mca + " -np " +
      std::to_string(np) + " " + RLX_COMM_WORKER + " " + scenario + " " + dir.string() + " " +
      std::to_string(deadline_ms) + " 2>&1";
  MpiRun r;
  const auto t0 = std::chrono::steady_clock::now();
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    r.output = "popen failed";
    return r;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  const int st = pclose(p);
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int rank = 0; rank < np; ++rank) {
    std::ifstream f(dir / ("rank" + std::to_string(rank) + ".txt"));
    std::string line;
    while (f && std::getline(f, line)) {
      const size_t eq = line.find('=');
      if (eq != std::string::npos) r.ranks[rank].kv[line.substr(0, eq)] = line.substr(eq + 1);
    }
  }
  fs::remove_all(dir);
  return r;
}

std::string context(const MpiRun& r) {
  std::string s = "mpirun exit " + std::to_string(r.exit_code) + " after " + std::to_string(r.seconds) + " s\n";
  for (auto& [rank, rep] : r.ranks) {
    s += "rank " + std::to_string(rank) + ":";
    for (auto& [k, v] : rep.kv) s += " " + k + "=" + v + ";";
    s += "\n";
  }
  return s + "output:\n" + r.output.substr(0, 6000);
}

void expect_collectives(int np, const std::string& mca, const std::string& want_backend) {
  MpiRun r = mpi_run(np, "collectives", 20000, 90, mca);
  ASSERT_EQ(r.exit_code, 0) << context(r);
  ASSERT_EQ(r.ranks.size(), static_cast<size_t>(np)) << context(r);
  for (auto& [rank, rep] : r.ranks) {
    EXPECT_EQ(rep["status"], "ok") << "rank " << rank << "\n" << context(r);
    EXPECT_EQ(rep["size"], std::to_string(np));
    EXPECT_NE(rep["backend"].find(want_backend), std::string::npos) << rep["backend"];
  }
}

TEST(Mpi, Collectives2Ranks) {
  RLX_NEED_MPI();
  expect_collectives(2, "", "mpi");
}

// an odd count of ranks: uneven ring chunks, no send/recv pairs, a split group of one
TEST(Mpi, Collectives3Ranks) {
  RLX_NEED_MPI();
  expect_collectives(3, "", "mpi");
}

TEST(Mpi, Collectives4Ranks) {
  RLX_NEED_MPI();
  expect_collectives(4, "", "mpi");
}

// The same over UCX (Debian turns it off by default: selected explicitly).
TEST(Mpi, CollectivesUcx) {
  RLX_NEED_MPI();
  if (access("/usr/bin/ucx_info", X_OK) != 0 && !fs::exists("/usr/lib/x86_64-linux-gnu/libucp.so.0"))
    GTEST_SKIP() << "UCX is not installed (libucx0)";
  expect_collectives(2, "--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any", "pml ucx");
}

// The lost rank must be named by every survivor, within the deadline (here 10 s; a dead
// process on this host is seen within milliseconds). `scenario`: kill (rank 2 exits between
// two 16 KiB all_reduces) or kill_transfer (while 16 MiB ones move data).
void expect_survivors_name_rank2(const std::string& scenario, const std::string& size) {
  const int deadline_ms = 10000;
  MpiRun r = mpi_run(4, scenario, deadline_ms, 60, "--enable-recovery");
  // (with --enable-recovery mpirun itself may exit 0: each survivor's report is what counts)
  EXPECT_LT(r.seconds, 50) << context(r);
  const std::regex names_rank2(R"(rank\(s\) (\d+, )*2\b[^;]*process gone)");
  for (int rank : {0, 1, 3}) {
    ASSERT_TRUE(r.ranks.count(rank)) << "survivor rank " << rank << " wrote no report\n" << context(r);
    const RankReport& rep = r.ranks.at(rank);
    EXPECT_EQ(rep["status"], "error") << context(r);
    EXPECT_TRUE(std::regex_search(rep["message"], names_rank2)) << "rank " << rank << ": " << rep["message"];
    EXPECT_NE(rep["message"].find("all_reduce #"), std::string::npos) << rep["message"];
    EXPECT_NE(rep["message"].find(size), std::string::npos) << rep["message"];
    EXPECT_EQ(rep["message"].rfind("rank " + std::to_string(rank) + ":", 0), 0u) << rep["message"];
    EXPECT_LT(std::atoi(rep["elapsed_ms"].c_str()), deadline_ms) << rep["message"];
  }
  EXPECT_FALSE(r.ranks.count(2)) << "rank 2 exited before writing a report";
}

TEST(Mpi, KilledRankIsNamedBySurvivors) {
  RLX_NEED_MPI();
  expect_survivors_name_rank2("kill", "4096 f32, 16 KiB");
}

// The same through a compiled graph whose all_reduce the CPU executable runs asynchronously
// (overlapped with a matmul chain, waited for before the add that reads it): the survivors'
// runs end with the communicator's error naming rank 2, within the deadline, and the runs
// before the loss give exactly the all-reduced values.
TEST(Mpi, KilledRankIsNamedBySurvivorsOfAnOverlappedCollective) {
  RLX_NEED_MPI();
  const int deadline_ms = 10000;
  MpiRun r = mpi_run(4, "kill_graph", deadline_ms, 60, "--enable-recovery");
  EXPECT_LT(r.seconds, 50) << context(r);
  const std::regex names_rank2(R"(rank\(s\) (\d+, )*2\b[^;]*process gone)");
  for (int rank : {0, 1, 3}) {
    ASSERT_TRUE(r.ranks.count(rank)) << "survivor rank " << rank << " wrote no report\n" << context(r);
    const RankReport& rep = r.ranks.at(rank);
    EXPECT_EQ(rep["status"], "error") << rep["message"] << "\n" << context(r);
    EXPECT_EQ(rep["iteration"], "10") << rep["message"];
    EXPECT_TRUE(std::regex_search(rep["message"], names_rank2)) << "rank " << rank << ": " << rep["message"];
    EXPECT_NE(rep["message"].find("all_reduce #"), std::string::npos) << rep["message"];
    EXPECT_NE(rep["message"].find("16384 f32, 64 KiB"), std::string::npos) << rep["message"];
    EXPECT_LT(std::atoi(rep["elapsed_ms"].c_str()), deadline_ms) << rep["message"];
  }
  EXPECT_FALSE(r.ranks.count(2)) << "rank 2 exited before writing a report";
}

TEST(Mpi, RankKilledDuringTransferIsNamedBySurvivors) {
  RLX_NEED_MPI();
  expect_survivors_name_rank2("kill_transfer", "4194304 f32, 16 MiB");
}

// As across machines: TCP only and no same-host liveness check (RLX_COMM_PEER_CHECK=0), so
// only the deadline and MPI's errors can tell. Rank 2 exits between two small all_reduces:
// every survivor times out naming it as missing.
TEST(Mpi, KilledRankOverTcpWithoutPidCheckTimesOut) {
  RLX_NEED_MPI();
  const int deadline_ms = 2000;
  MpiRun r = mpi_run(4, "kill", deadline_ms, 60, "--enable-recovery --mca btl tcp,self", "RLX_COMM_PEER_CHECK=0");
  for (int rank : {0, 1, 3}) {
    ASSERT_TRUE(r.ranks.count(rank)) << "survivor rank " << rank << " wrote no report\n" << context(r);
    const std::string& m = r.ranks.at(rank)["message"];
    EXPECT_NE(m.find("did not complete within 2000 ms; rank(s) 2 did not arrive"), std::string::npos) << m;
  }
}

// The same while 16 MiB all_reduces move data over TCP: Open MPI 4.1's TCP transport can
// deadlock inside MPI when a peer dies mid-transfer; such a rank must still end (the monitor
// thread), saying which call was stuck, and every other survivor reports an error.
TEST(Mpi, RankKilledDuringTcpTransferNeverHangs) {
  RLX_NEED_MPI();
  const int deadline_ms = 2000;
  MpiRun r = mpi_run(4, "kill_transfer", deadline_ms, 60, "--enable-recovery --mca btl tcp,self",
                     "RLX_COMM_PEER_CHECK=0");
  EXPECT_NE(r.exit_code, 124) << "mpirun hit its time limit\n" << context(r);
  EXPECT_LT(r.seconds, 30) << context(r);
  for (int rank : {0, 1, 3}) {
    // (which all_reduce depends on when the dying thread gets the core)
    const std::regex stuck("rlx: rank " + std::to_string(rank) +
                           R"(: all_reduce #\d+ \(sum of 4194304 f32, 16 MiB\) did not complete within its deadline and )"
                           "the MPI library has not returned");
    if (std::regex_search(r.output, stuck)) continue;
    ASSERT_TRUE(r.ranks.count(rank)) << "survivor rank " << rank << " neither reported nor said it was stuck\n"
                                     << context(r);
    EXPECT_EQ(r.ranks.at(rank)["status"], "error") << context(r);
    EXPECT_NE(r.ranks.at(rank)["message"].find("(sum of 4194304 f32, 16 MiB)"), std::string::npos) << context(r);
  }
}

// abort() ends the whole job at once (the others were waiting in an all_reduce with a 20 s
// deadline), with the code passed through by mpirun. The same-host dead-peer check is off:
// with it, a survivor can see rank 1 gone within ~5 ms and report an error before mpirun
// kills it, and this test is about the kill.
TEST(Mpi, AbortEndsTheJobAtOnce) {
  RLX_NEED_MPI();
  MpiRun r = mpi_run(3, "abort", 20000, 60, "", "RLX_COMM_PEER_CHECK=0");
  EXPECT_EQ(r.exit_code, 7) << context(r);
  EXPECT_LT(r.seconds, 10) << context(r);
  EXPECT_NE(r.output.find("rlx: rank 1: abort(7)"), std::string::npos) << context(r);
  EXPECT_TRUE(r.ranks.empty()) << "ranks outlived the abort\n" << context(r);
}

// A rank still working after the last collective (longer than the deadline) is waited for at
// exit: every rank finalizes MPI and the job succeeds.
TEST(Mpi, SlowRankAtExitIsWaitedFor) {
  RLX_NEED_MPI();
  MpiRun r = mpi_run(3, "slow_exit", 1000, 60);
  EXPECT_EQ(r.exit_code, 0) << context(r);
  ASSERT_EQ(r.ranks.size(), 3u) << context(r);
  for (auto& [rank, rep] : r.ranks) EXPECT_EQ(rep["status"], "ok") << context(r);
  EXPECT_EQ(r.output.find("not finalizing"), std::string::npos) << context(r);
}

// A rank that sleeps past the deadline: the others time out naming it.
TEST(Mpi, StalledRankTimesOut) {
  RLX_NEED_MPI();
  const int deadline_ms = 1500;
  MpiRun r = mpi_run(3, "stall", deadline_ms, 60, "--enable-recovery");
  for (int rank : {0, 2}) {
    ASSERT_TRUE(r.ranks.count(rank)) << context(r);
    const RankReport& rep = r.ranks.at(rank);
    EXPECT_EQ(rep["status"], "error") << context(r);
    const std::string& m = rep["message"];
    EXPECT_NE(m.find("all_reduce #3 (sum of 4096 f32, 16 KiB) did not complete within 1500 ms"), std::string::npos)
        << m;
    EXPECT_NE(m.find("rank(s) 1 did not arrive (rank 1: still running"), std::string::npos) << m;
    const int ms = std::atoi(rep["elapsed_ms"].c_str());
    EXPECT_GE(ms, deadline_ms - 5) << m;
    EXPECT_LT(ms, deadline_ms + 2000) << m;
  }
}

TEST(Mpi, MismatchedCallsGiveClearErrorsOnEveryRank) {
  RLX_NEED_MPI();
  MpiRun r = mpi_run(2, "mismatch", 10000, 60);
  ASSERT_EQ(r.ranks.size(), 2u) << context(r);
  for (auto& [rank, rep] : r.ranks) {
    SCOPED_TRACE("rank " + std::to_string(rank) + "\n" + context(r));
    EXPECT_EQ(rep["status"], "done");
    const std::string other = std::to_string(1 - rank);
    // count: rank 0 asked for 4096 elements, rank 1 for 1024
    EXPECT_NE(rep["case.count"].find("shape error: rank " + std::to_string(rank) + ": all_reduce #"), std::string::npos)
        << rep["case.count"];
    EXPECT_NE(rep["case.count"].find("rank " + other + " called all_reduce #1 (sum of " +
                                     (rank == 0 ? "1024 f32, 4 KiB)" : "4096 f32, 16 KiB)")),
              std::string::npos)
        << rep["case.count"];
    EXPECT_NE(rep["case.after"].find("broken by an earlier error"), std::string::npos) << rep["case.after"];
    EXPECT_LT(std::atoi(rep["after_ms"].c_str()), 100);
    EXPECT_NE(rep["case.kind"].find(rank == 0 ? "rank 1 called all_gather #1 (1024 f32, 4 KiB)"
                                              : "rank 0 called all_reduce #1 (sum of 1024 f32, 4 KiB)"),
              std::string::npos)
        << rep["case.kind"];
    EXPECT_NE(rep["case.dtype"].find(rank == 0 ? "1024 i32" : "1024 f32"), std::string::npos) << rep["case.dtype"];
    EXPECT_NE(rep["case.root"].find(rank == 0 ? "root 1" : "root 0"), std::string::npos) << rep["case.root"];
    EXPECT_EQ(rep["case.world"], "ok");
  }
  // p2p: the receiver expected 200 floats, the sender sent 100; the receiver says so (the
  // small send itself completes)
  EXPECT_NE(r.ranks[1]["case.p2p"].find("recv #1 from rank 0 (tag 5, 200 f32, 800 B): rank 0 sent 100 f32, 400 B"),
            std::string::npos)
      << r.ranks[1]["case.p2p"];
}

TEST(Mpi, NcclUnavailableWithoutGpuOnEveryRank) {
  RLX_NEED_MPI();
  MpiRun r = mpi_run(2, "nccl", 10000, 60);
  ASSERT_EQ(r.exit_code, 0) << context(r);
  ASSERT_EQ(r.ranks.size(), 2u) << context(r);
  for (auto& [rank, rep] : r.ranks) {
    EXPECT_EQ(rep["world"], "ok") << context(r);
    if (rep["nccl"] == "ok") continue;  // a GPU machine
    EXPECT_EQ(rep["nccl_code"], "unavailable") << rep["nccl"];
  }
}

}  // namespace
}  // namespace rlx::dist
