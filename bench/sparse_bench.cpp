// SpMV and PCG on a 2D Poisson matrix: rlx (rlx/sparse.h, the thread pool's threads) against
// SciPy (Debian python3-scipy, /usr/bin/python3, single-threaded SpMV) on the same matrix in
// the same run. Prints SpMV GFLOP/s and effective bandwidth next to a measured copy bandwidth
// of this machine, and CG / Jacobi-PCG time to the same relative tolerance, with ratios.
//
//   rlx_bench_sparse [GRID=1000] [REPS=20] [spmv]   (GRID^2 unknowns; RLX_NUM_THREADS=1 for one
//                                                    thread; "spmv": skip the CG/PCG solves)
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

#include "rlx/compile.h"
#include "rlx/op_builder.h"
#include "rlx/sparse.h"
#include "rlx/thread_pool.h"
#include "sparse/sparse_kernels.h"

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

  // SpMV as the graph op spmv_csr (rlx::sparse::spmv in a graph) on the cpu device: the same
  // kernel plus what a compiled model adds per run (copying its inputs in, the index checks,
  // the output tensor). Twice: the matrix as graph inputs (its 69 MB copied in every run) and
  // as constants of the model (only x, 8 MB, copied in).
  double t_graph = 0, check_graph = 0, t_const = 0, t_kernel = 0;
  {
    // the graph op's host kernel alone (what the cpu executable runs for the node: the index
    // checks plus the API's kernel on the tensors' memory), into a reused y
    const std::vector<TensorType> it{TensorType{DType::i32, {n + 1}}, TensorType{DType::i32, {nnz}},
                                     TensorType{DType::f64, {nnz}}, TensorType{DType::f64, {n}}};
    const std::vector<TensorType> ot{TensorType{DType::f64, {n}}};
    const std::vector<const void*> in{a.row_ptr.data(), a.col_idx.data(), a.values.data(), x.data()};
    std::vector<double> yk(static_cast<size_t>(n));
    const std::vector<void*> out{yk.data()};
    std::vector<double> tk;
    for (int r = 0; r < reps + 2; ++r) {
      auto t0 = Clock::now();
      Status s = sparse::run_sparse(Op::SpmvCsr, Attrs{}, it, in, ot, out);
      if (!s.is_ok()) {
        std::printf("spmv_csr kernel: %s\n", s.to_string().c_str());
        return 1;
      }
      if (r >= 2) tk.push_back(seconds(t0));
    }
    std::sort(tk.begin(), tk.end());
    t_kernel = tk[tk.size() / 2];
  }
  for (const bool as_constants : {false, true}) {
    Graph g;
    GraphBuilder gb(g);
    OpBuilder o(gb);
    const Tensor trp = Tensor::from_vector(DType::i32, {n + 1}, a.row_ptr), tci = Tensor::from_vector(DType::i32, {nnz}, a.col_idx),
                 tva = Tensor::from_vector(DType::f64, {nnz}, a.values);
    ValueId rp = as_constants ? o.constant(trp) : g.add_input("row_ptr", TensorType{DType::i32, {n + 1}});
    ValueId ci = as_constants ? o.constant(tci) : g.add_input("col_idx", TensorType{DType::i32, {nnz}});
    ValueId va = as_constants ? o.constant(tva) : g.add_input("values", TensorType{DType::f64, {nnz}});
    ValueId xv = g.add_input("x", TensorType{DType::f64, {n}});
    g.outputs = {sparse::spmv(o, rp, ci, va, xv)};
    auto model = Model::compile(g, {.device = "cpu"});
    if (!o.ok() || !model) {
      std::printf("graph spmv_csr: %s\n", (o.ok() ? model.status() : o.status()).to_string().c_str());
      return 1;
    }
    std::vector<Tensor> in{Tensor::from_vector(DType::f64, {n}, x)};
    if (!as_constants) in.insert(in.begin(), {trp, tci, tva});
    std::vector<double> tg;
    for (int r = 0; r < reps + 2; ++r) {
      auto t0 = Clock::now();
      auto out = (*model)->run(in);
      if (!out) {
        std::printf("graph spmv_csr: %s\n", out.status().to_string().c_str());
        return 1;
      }
      if (r >= 2) tg.push_back(seconds(t0));
      if (r == 0 && !as_constants)
        for (int64_t i = 0; i < n; ++i) check_graph += (*out)[0].get_f64(i);
    }
    std::sort(tg.begin(), tg.end());
    (as_constants ? t_const : t_graph) = tg[tg.size() / 2];
  }

  // SciPy on the same arrays
  const std::string dir = (std::filesystem::temp_directory_path() / "rlx_sparse_bench").string();
  std::filesystem::create_directories(dir);
  dump(dir + "/row_ptr.i32", a.row_ptr);
  dump(dir + "/col.i32", a.col_idx);
  dump(dir + "/val.f64", a.values);
  dump(dir + "/b.f64", b);
  const std::string script = std::string(RLX_SOURCE_DIR) + "/bench/sparse_bench.py";
  const std::string cmd = "OMP_NUM_THREADS=1 /usr/bin/python3 " + script + " " + dir + " " + std::to_string(n) + " " +
                          std::to_string(nnz) + " " + std::to_string(reps) + " 1e-8" +  // rtol
                          (argc > 3 && std::string(argv[3]) == "spmv" ? " spmv" : "");
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
  std::printf("| rlx C++ API (sparse::spmv) | %.3f | %.2f | %.1f | %.0f%% |\n", t_rlx * 1e3, 2.0 * nnz / t_rlx / 1e9,
              bytes / t_rlx / 1e9, 100 * bytes / t_rlx / 1e9 / bw);
  std::printf("| rlx graph op spmv_csr, its host kernel (index checks + API kernel) | %.3f | %.2f | %.1f | %.0f%% |\n",
              t_kernel * 1e3, 2.0 * nnz / t_kernel / 1e9, bytes / t_kernel / 1e9, 100 * bytes / t_kernel / 1e9 / bw);
  std::printf("| rlx graph op spmv_csr (cpu model run) | %.3f | %.2f | %.1f | %.0f%% |\n", t_graph * 1e3,
              2.0 * nnz / t_graph / 1e9, bytes / t_graph / 1e9, 100 * bytes / t_graph / 1e9 / bw);
  std::printf("| rlx graph op spmv_csr, matrix as model constants | %.3f | %.2f | %.1f | %.0f%% |\n", t_const * 1e3,
              2.0 * nnz / t_const / 1e9, bytes / t_const / 1e9, 100 * bytes / t_const / 1e9 / bw);
  std::printf("| ratio graph op / C++ API (speed): kernel, model run (matrix as inputs, as constants) | %.2fx, %.2fx, %.2fx | | | |\n",
              t_rlx / t_kernel, t_rlx / t_graph, t_rlx / t_const);
  if (std::abs(check_graph - check) > 1e-9 * std::abs(check) + 1e-9)
    std::printf("WARNING: graph and API SpMV results differ (%.17g vs %.17g)\n", check_graph, check);
  if (have_peer) {
    const double t_sp = peer["spmv_s"].get<double>();
    std::printf("| SciPy %s (1 thread) | %.3f | %.2f | %.1f | %.0f%% |\n", peer["scipy"].get<std::string>().c_str(),
                t_sp * 1e3, 2.0 * nnz / t_sp / 1e9, bytes / t_sp / 1e9, 100 * bytes / t_sp / 1e9 / bw);
    std::printf("| ratio rlx / SciPy (speed) | %.2fx | | | |\n", t_sp / t_rlx);
    if (std::abs(peer["spmv_check"].get<double>() - check) > 1e-6 * std::abs(check) + 1e-6)
      std::printf("WARNING: SpMV results differ (rlx %.17g, SciPy %.17g)\n", check, peer["spmv_check"].get<double>());
  }

  if (argc > 3 && std::string(argv[3]) == "spmv") {  // SpMV only
    std::filesystem::remove_all(dir);
    return 0;
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
