// rlx_comm_bench: rlx's all_reduce (rlx::dist, include/rlx/comm.h) next to MPI_Allreduce called
// directly, in the same run, on the same buffers. Run under mpirun (bench/comm_bench.sh).
//
// For f32 sums of 4 KiB to 64 MiB (x4 steps) it times, in every round, a batch of rlx
// all_reduces and a batch of MPI_Allreduce(MPI_IN_PLACE) calls back to back, so both see the
// same machine noise. A batch's time is the slowest rank's (MPI_MAX over ranks). It prints the
// median over rounds of the time per call and of the bus bandwidth, 2 (n-1)/n * bytes / time
// (the traffic of a ring all-reduce per rank, as nccl-tests reports it), and the median of the
// per-round ratio rlx / MPI of the bus bandwidths (1.0: no overhead).
//
// rlx's extra work per call: a 32-byte header exchanged with every peer (the check that all
// ranks called the same collective), and polling MPI_Test instead of blocking in MPI.
//
// A third column times MPI_Iallreduce + MPI_Wait, the nonblocking collective rlx's all_reduce
// is built on, which shows how much of a gap is MPI's nonblocking algorithms and how much rlx.
//
// Usage: mpirun -np N rlx_comm_bench [--rounds R] [--max-mib M] [--min-kib K]
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "rlx/comm.h"

using namespace rlx;
using namespace rlx::dist;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Seconds per call of `iters` calls of `fn`, the slowest rank's.
template <class F>
double time_batch(int iters, F&& fn) {
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) fn();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
  MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 5;
  int64_t max_bytes = 64ll << 20, min_bytes = 4 << 10;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--rounds" && i + 1 < argc) rounds = std::atoi(argv[++i]);
    else if (a == "--max-mib" && i + 1 < argc) max_bytes = std::atoll(argv[++i]) << 20;
    else if (a == "--min-kib" && i + 1 < argc) min_bytes = std::atoll(argv[++i]) << 10;
    else {
      std::fprintf(stderr, "usage: rlx_comm_bench [--rounds R] [--max-mib M] [--min-kib K]\n");
      return 2;
    }
  }
  auto world = world_communicator();
  if (!world.has_value()) {
    std::fprintf(stderr, "rlx_comm_bench: %s\n", world.status().to_string().c_str());
    return 1;
  }
  Communicator& c = **world;
  const int n = c.size(), me = c.rank();
  if (me == 0) {
    std::printf("all_reduce (f32 sum), %d ranks, %s; median of %d rounds; time is the slowest rank's\n", n,
                c.backend().c_str(), rounds);
    std::printf("%10s %12s %12s %14s %14s %8s %16s\n", "size", "rlx us/call", "MPI us/call", "rlx busbw GB/s",
                "MPI busbw GB/s", "rlx/MPI", "MPI_Iallreduce us");
  }
  const double factor = n > 1 ? 2.0 * (n - 1) / n : 1.0;
  for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    const int64_t count = bytes / 4;
    std::vector<float> buf(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) buf[i] = static_cast<float>((i * 7 + me) % 13) * 1e-3f;
    // about 256 MiB of payload per batch, between 3 and 2000 calls (the same on every rank)
    const int iters = static_cast<int>(std::clamp<int64_t>((256ll << 20) / bytes, 3, 2000));
    auto ours = [&] {
      Status s = c.all_reduce(buf.data(), count, DType::f32, ReduceOp::sum);
      if (!s.is_ok()) {
        std::fprintf(stderr, "%s\n", s.to_string().c_str());
        std::exit(1);
      }
    };
    auto theirs = [&] { MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); };
    // MPI's nonblocking all-reduce, which rlx's is built on, waited for in MPI_Wait
    auto nonblocking = [&] {
      MPI_Request req;
      MPI_Iallreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
      MPI_Wait(&req, MPI_STATUS_IGNORE);
    };
    time_batch(std::max(1, iters / 4), ours);  // warm-up (connections, buffers)
    time_batch(std::max(1, iters / 4), theirs);
    std::vector<double> t_rlx, t_mpi, t_nb, ratio;
    for (int r = 0; r < rounds; ++r) {
      const double a = time_batch(iters, ours);
      const double b = time_batch(iters, theirs);
      t_nb.push_back(time_batch(iters, nonblocking));
      t_rlx.push_back(a);
      t_mpi.push_back(b);
      ratio.push_back(b / a);  // bandwidth ratio rlx / MPI
    }
    if (me == 0) {
      const double tr = median(t_rlx), tm = median(t_mpi);
      char size[32];
      if (bytes >= (1 << 20)) std::snprintf(size, sizeof(size), "%lld MiB", static_cast<long long>(bytes >> 20));
      else std::snprintf(size, sizeof(size), "%lld KiB", static_cast<long long>(bytes >> 10));
      std::printf("%10s %12.1f %12.1f %14.2f %14.2f %8.2f %16.1f\n", size, tr * 1e6, tm * 1e6,
                  factor * bytes / tr / 1e9, factor * bytes / tm / 1e9, median(ratio), median(t_nb) * 1e6);
      std::fflush(stdout);
    }
  }
  return 0;
}
