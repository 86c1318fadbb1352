// SpMV and PCG on a 2D Poisson matrix: rlx (rlx/sparse.h, the thread pool's threads) against
// SciPy (Debian python3-scipy, /usr/bin/python3, single-threaded SpMV) on the same matrix in
// the same run. Prints SpMV GFLOP/s and effective bandwidth next to a measured copy bandwidth
// of this machine, and CG / Jacobi-PCG time to the same relative tolerance, with ratios.
//
//   rlx_bench_sparse [GRID=1000] [REPS=20]     (GRID^2 unknowns; RLX_NUM_THREADS=1 for one thread)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlx/sparse.h"
#include "rlx/thread_pool.h"

using namespace rlx;
using Clock = std::chrono::steady_clock;

namespace {

double seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

template <class T>
void dump(const std::string& path, const std::vector<T>& v) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
}

// Copy bandwidth (read + write counted) of a buffer far larger than the caches, on the pool.
double copy_gbs() {
  const size_t n = size_t{1} << 25;  // 256 MB per buffer
  std::vector<double> a(n, 1.0), b(n, 0.0);
  ThreadPool& pool = ThreadPool::global();
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    auto t0 = Clock::now();
    pool.parallel_for(static_cast<int64_t>(n), 1 << 16, [&](int64_t s, int64_t e) {
      std::memcpy(b.data() + s, a.data() + s, static_cast<size_t>(e - s) * sizeof(double));
    });
    best = std::min(best, seconds(t0));
  }
  return 2.0 * n * sizeof(double) / best / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t grid = argc > 1 ? std::atoll(argv[1]) : 1000;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 20;
  const double rtol = 1e-8;  // also passed to SciPy as text below
  auto a = sparse::poisson_2d<double, int32_t>(grid);
  const int64_t n = a.rows, nnz = a.nnz();
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> b(static_cast<size_t>(n)), x(static_cast<size_t>(n), 1.0), y(static_cast<size_t>(n));
  for (double& v : b) v = u(rng);

  std::printf("2D Poisson %lld x %lld grid: n = %lld, nnz = %lld, f64 values, i32 indices, rlx threads = %d\n",
              static_cast<long long>(grid), static_cast<long long>(grid), static_cast<long long>(n),
              static_cast<long long>(nnz), ThreadPool::global().size());
  const double bw = copy_gbs();
  // SpMV, rlx
  std::vector<double> times;
  for (int r = 0; r < reps + 2; ++r) {
    auto t0 = Clock::now();
    if (!sparse::spmv(a, x.data(), n, y.data(), n).is_ok()) return 1;
    if (r >= 2) times.push_back(seconds(t0));
  }
  std::sort(times.begin(), times.end());
  const double t_rlx = times[times.size() / 2];
  double check = 0;
  for (double v : y) check += v;

  // SciPy on the same arrays
  const std::string dir = (std::filesystem::temp_directory_path() / "rlx_sparse_bench").string();
  std::filesystem::create_directories(dir);
  dump(dir + "/row_ptr.i32", a.row_ptr);
  dump(dir + "/col.i32", a.col_idx);
  dump(dir + "/val.f64", a.values);
  dump(dir + "/b.f64", b);
  const std::string script = std::string(RLX_SOURCE_DIR) + "/bench/sparse_bench.py";
  const std::string cmd = "OMP_NUM_THREADS=1 /usr/bin/python3 " + script + " " + dir + " " + std::to_string(n) + " " +
                          std::to_string(nnz) + " " + std::to_string(reps) + " 1e-8";  // rtol
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    while (size_t k = std::fread(buf, 1, sizeof buf, p)) out.append(buf, k);
    if (pclose(p) != 0) out.clear();
  }
  nlohmann::json peer = nlohmann::json::parse(out, nullptr, false);
  const bool have_peer = !out.empty() && !peer.is_discarded();
  if (!have_peer) std::printf("SciPy peer did not run (%s): rlx numbers only\n", cmd.c_str());

  // bytes one SpMV moves at least: values + column indices + row pointers + x once + y once
  const double bytes = nnz * (8.0 + 4.0) + (n + 1) * 4.0 + n * 8.0 * 2;
  std::printf("\nmachine copy bandwidth (read + write, %d threads): %.1f GB/s\n\n", ThreadPool::global().size(), bw);
  std::printf("| SpMV | median ms | GFLOP/s | effective GB/s | of copy bandwidth |\n|---|---|---|---|---|\n");
  std::printf("| rlx | %.3f | %.2f | %.1f | %.0f%% |\n", t_rlx * 1e3, 2.0 * nnz / t_rlx / 1e9, bytes / t_rlx / 1e9,
              100 * bytes / t_rlx / 1e9 / bw);
  if (have_peer) {
    const double t_sp = peer["spmv_s"].get<double>();
    std::printf("| SciPy %s (1 thread) | %.3f | %.2f | %.1f | %.0f%% |\n", peer["scipy"].get<std::string>().c_str(),
                t_sp * 1e3, 2.0 * nnz / t_sp / 1e9, bytes / t_sp / 1e9, 100 * bytes / t_sp / 1e9 / bw);
    std::printf("| ratio rlx / SciPy (speed) | %.2fx | | | |\n", t_sp / t_rlx);
    if (std::abs(peer["spmv_check"].get<double>() - check) > 1e-6 * std::abs(check) + 1e-6)
      std::printf("WARNING: SpMV results differ (rlx %.17g, SciPy %.17g)\n", check, peer["spmv_check"].get<double>());
  }

  std::printf("\n| solve to rtol %.0e | rlx s | rlx iters | SciPy s | SciPy iters | ratio (speed) |\n|---|---|---|---|---|---|\n",
              rtol);
  for (auto [name, pc] : {std::pair<const char*, sparse::Preconditioner>{"cg", sparse::Preconditioner::none},
                          {"pcg_jacobi", sparse::Preconditioner::jacobi}, {"pcg_ic0", sparse::Preconditioner::ic0}}) {
    sparse::SolveOptions o;
    o.rtol = rtol;
    o.preconditioner = pc;
    std::vector<double> xs;
    auto t0 = Clock::now();
    auto rep = sparse::cg(a, b, xs, o);
    const double t = seconds(t0);
    if (!rep) {
      std::printf("%s: %s\n", name, rep.status().to_string().c_str());
      return 1;
    }
    if (have_peer && peer.contains(name)) {
      const auto& s = peer[name];
      std::printf("| %s | %.2f | %lld | %.2f | %d | %.2fx |\n", name, t, static_cast<long long>(rep->iterations),
                  s["s"].get<double>(), s["iterations"].get<int>(), s["s"].get<double>() / t);
    } else {
      std::printf("| %s | %.2f | %lld | (SciPy has no IC(0)) | | |\n", name, t, static_cast<long long>(rep->iterations));
    }
    if (!rep->converged) std::printf("  %s\n", rep->to_string().c_str());
  }
  std::filesystem::remove_all(dir);
  return 0;
}
