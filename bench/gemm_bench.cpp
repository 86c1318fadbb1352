// rlx_bench_gemm: rlx's CPU f32 GEMM side by side with OpenBLAS cblas_sgemm, in one run.
//
// For each shape it times rlx::cpu::sgemm, rlx::cpu::sgemm_packed (B packed once, as for
// weights) and cblas_sgemm with the same number of threads, alternating rlx and OpenBLAS in
// every round so that both see the same machine noise. It reports the median GFLOP/s of the
// rounds, and as ratio the median over rounds of the per-round ratio.
// Each timing is about 10 ms of back-to-back calls on the same operands (warm caches, as for
// weights in inference). After each OpenBLAS timing the program sleeps 150 ms so that
// OpenBLAS's spinning idle threads do not steal cores from rlx's timing that follows.
//
// OpenBLAS 0.3.21 does not recognise every recent CPU: on an unknown model with AVX-512 it
// falls back to its SSE3 "Prescott" kernels, which would make a weak peer. Unless
// OPENBLAS_CORETYPE is set, the program then re-runs itself with OPENBLAS_CORETYPE=SkylakeX
// (OpenBLAS's AVX-512 sgemm kernels). The core OpenBLAS uses is printed.
//
// Usage: rlx_bench_gemm [--quick] [--rounds N] [--filter SUBSTRING] [--best] [--isa avx512|avx2|portable]
// --best reports the fastest round instead of the median (for tuning on a loaded machine).
// --cpu-time times by the calling thread's CPU clock instead of the wall clock, so that time
// the process spends descheduled on a shared machine does not count (only with
// RLX_NUM_THREADS=1; OpenBLAS then also runs on the calling thread).
// Threads: RLX_NUM_THREADS (default: all cores); OpenBLAS gets the same number.
#include <cblas.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backends/cpu/kernels/gemm.h"
#include "rlx/thread_pool.h"

extern "C" {
void openblas_set_num_threads(int);
char* openblas_get_corename(void);
}

namespace {

using Clock = std::chrono::steady_clock;

struct Shape {
  std::string group;
  int64_t batch, m, k, n;
  bool trans_b;
};

std::vector<Shape> shapes(bool quick) {
  std::vector<Shape> s;
  for (int64_t n : {256, 512, 1024, 2048}) {
    if (quick && n == 2048) continue;
    s.push_back({"square", 1, n, n, n, false});
  }
  const int64_t kn[][2] = {{384, 384}, {384, 1536}, {1536, 384}, {512, 1536}, {1408, 512}};
  for (int64_t m : {1, 8, 128, 1024, 4096}) {
    if (quick && m == 4096) continue;
    for (auto& p : kn) s.push_back({"skinny", 1, m, p[0], p[1], false});
  }
  // Weights stored [n, k] (PyTorch Linear layout), single-token and small-batch decode.
  for (int64_t m : {1, 8, 128}) s.push_back({"linear-nt", 1, m, 384, 1536, true});
  // Attention per head: scores = Q K^T (K stored [seq, d]: trans_b) and context = P V.
  s.push_back({"attention", 96, 128, 64, 128, false});
  s.push_back({"attention", 96, 128, 64, 128, true});
  s.push_back({"attention", 96, 128, 128, 64, false});
  return s;
}

std::string shape_name(const Shape& s) {
  char buf[128];
  if (s.batch > 1)
    std::snprintf(buf, sizeof buf, "%lldx [%lldx%lld]x[%lldx%lld]%s", (long long)s.batch, (long long)s.m,
                  (long long)s.k, (long long)s.k, (long long)s.n, s.trans_b ? "^T" : "");
  else
    std::snprintf(buf, sizeof buf, "%lldx%lldx%lld%s", (long long)s.m, (long long)s.k, (long long)s.n,
                  s.trans_b ? " (B^T)" : "");
  return buf;
}

struct Buffers {
  std::vector<float> a, b, c_ours, c_ref;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

bool g_cpu_time = false;  // --cpu-time: time by this thread's CPU clock (1 thread only)

double now_seconds() {
  if (g_cpu_time) {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
  }
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

// Seconds per call of fn, timed over `iters` back-to-back calls.
template <class F>
double time_calls(F&& fn, int iters) {
  const double t0 = now_seconds();
  for (int i = 0; i < iters; ++i) fn();
  return (now_seconds() - t0) / iters;
}

void maybe_reexec_with_avx512_openblas(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE")) return;
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f")) return;
  const std::string core = openblas_get_corename();
  if (core == "SkylakeX" || core == "Cooperlake" || core == "SapphireRapids") return;
  std::fprintf(stderr, "OpenBLAS picked '%s' on an AVX-512 CPU; re-running with OPENBLAS_CORETYPE=SkylakeX\n",
               core.c_str());
  setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
  execv("/proc/self/exe", argv);
  std::perror("execv");  // fall through: keep going with the weak peer, it is printed below
}

}  // namespace

int main(int argc, char** argv) {
  maybe_reexec_with_avx512_openblas(argv);
  bool quick = false;
  int rounds = 15;
  std::string filter;
  bool use_min = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) {
      quick = true;
      rounds = 7;
    } else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--cpu-time")) {
      g_cpu_time = true;
    } else if (!std::strcmp(argv[i], "--best")) {
      use_min = true;
    } else if (!std::strcmp(argv[i], "--filter") && i + 1 < argc) {
      filter = argv[++i];
    } else if (!std::strcmp(argv[i], "--isa") && i + 1 < argc) {
      const std::string isa = argv[++i];
      const auto want = isa == "avx512" ? rlx::cpu::GemmIsa::avx512
                        : isa == "avx2" ? rlx::cpu::GemmIsa::avx2
                                        : rlx::cpu::GemmIsa::portable;
      if (!rlx::cpu::set_gemm_isa(want)) {
        std::fprintf(stderr, "this CPU cannot run the %s kernels\n", isa.c_str());
        return 2;
      }
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--rounds N] [--filter SUBSTRING] [--best] [--cpu-time]\n"
                   "          [--isa avx512|avx2|portable]\n",
                   argv[0]);
      return 2;
    }
  }

  const int threads = rlx::ThreadPool::global().size();
  if (g_cpu_time && threads != 1) {
    std::fprintf(stderr, "--cpu-time needs RLX_NUM_THREADS=1 (a thread's CPU clock misses other threads' work)\n");
    return 2;
  }
  openblas_set_num_threads(threads);
  std::printf("rlx GEMM benchmark: kernel '%s', %d thread(s); peer OpenBLAS core '%s' with %d thread(s)\n",
              rlx::cpu::gemm_kernel_name(), threads, openblas_get_corename(), threads);
  std::printf("%s of %d rounds, rlx and OpenBLAS alternating in each round; GFLOP/s = 2*batch*m*k*n / %s;\n"
              "ratio = %s\n\n",
              use_min ? "best" : "median", rounds, g_cpu_time ? "thread CPU time" : "wall time",
              use_min ? "best rlx / best OpenBLAS" : "median over rounds of (OpenBLAS time / rlx time) in that round");
  std::printf("| group | shape (batch x m x k x n) | OpenBLAS GFLOP/s | rlx GFLOP/s | rlx packed-B GFLOP/s | rlx / OpenBLAS | packed / OpenBLAS |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|\n");
  std::fflush(stdout);

  std::mt19937 rng(12345);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<double> ratios, ratios_packed;
  for (const Shape& s : shapes(quick)) {
    const std::string name = shape_name(s);
    if (!filter.empty() && name.find(filter) == std::string::npos && s.group.find(filter) == std::string::npos)
      continue;
    Buffers buf;
    const int64_t sa = s.m * s.k, sb = s.k * s.n, sc = s.m * s.n;
    buf.a.resize(s.batch * sa);
    buf.b.resize(s.batch * sb);
    buf.c_ours.assign(s.batch * sc, 0.f);
    buf.c_ref.assign(s.batch * sc, 0.f);
    for (auto& x : buf.a) x = dist(rng);
    for (auto& x : buf.b) x = dist(rng);
    const int64_t ldb = s.trans_b ? s.k : s.n;

    rlx::cpu::GemmArgs g;
    g.m = s.m;
    g.n = s.n;
    g.k = s.k;
    g.a = buf.a.data();
    g.lda = s.k;
    g.batch_stride_a = sa;
    g.b = buf.b.data();
    g.ldb = ldb;
    g.trans_b = s.trans_b;
    g.batch_stride_b = sb;
    g.c = buf.c_ours.data();
    g.ldc = s.n;
    g.batch_stride_c = sc;
    g.batch = s.batch;

    // Packed B only applies where B is one constant matrix.
    rlx::cpu::PackedB packed;
    if (s.batch == 1) packed = rlx::cpu::pack_b(buf.b.data(), ldb, s.trans_b, s.k, s.n);

    auto ours = [&] {
      if (!rlx::cpu::sgemm(g).is_ok()) std::abort();
    };
    auto ours_packed = [&] {
      if (!rlx::cpu::sgemm_packed(g, packed).is_ok()) std::abort();
    };
    auto theirs = [&] {
      for (int64_t i = 0; i < s.batch; ++i)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, s.trans_b ? CblasTrans : CblasNoTrans, (int)s.m, (int)s.n, (int)s.k,
                    1.f, buf.a.data() + i * sa, (int)s.k, buf.b.data() + i * sb, (int)ldb, 0.f,
                    buf.c_ref.data() + i * sc, (int)s.n);
    };

    // Check once that both compute the same thing.
    ours();
    theirs();
    double max_err = 0, max_ref = 0;
    for (size_t i = 0; i < buf.c_ref.size(); ++i) {
      max_err = std::max(max_err, (double)std::fabs(buf.c_ours[i] - buf.c_ref[i]));
      max_ref = std::max(max_ref, (double)std::fabs(buf.c_ref[i]));
    }
    if (max_err > 1e-4 * std::max(1.0, max_ref) * std::sqrt((double)s.k)) {
      std::printf("MISMATCH on %s: max |ours - OpenBLAS| = %g\n", name.c_str(), max_err);
      return 1;
    }

    // Calls per timing so that one timing takes about 10 ms.
    const double flops = 2.0 * s.batch * s.m * s.k * s.n;
    const double t1 = time_calls(theirs, 3);
    const int iters = std::max(1, std::min(100000, (int)(0.01 / std::max(t1, 1e-7))));
    std::vector<double> to, tp, tt;
    for (int r = 0; r < rounds; ++r) {
      to.push_back(time_calls(ours, iters));
      if (packed.valid()) tp.push_back(time_calls(ours_packed, iters));
      tt.push_back(time_calls(theirs, iters));
      // OpenBLAS's idle workers keep polling for work for about 2^28 cycles after a
      // call; let them go to sleep so that they do not take cores away from rlx's threads.
      std::this_thread::sleep_for(std::chrono::milliseconds(150));
    }
    auto stat = [&](const std::vector<double>& v) { return use_min ? *std::min_element(v.begin(), v.end()) : median(v); };
    const double gt = flops / stat(tt) * 1e-9, go = flops / stat(to) * 1e-9;
    const double gp = tp.empty() ? 0 : flops / stat(tp) * 1e-9;
    // The ratio is taken per round (rlx and OpenBLAS timed back to back) and then the median
    // of the rounds, which cancels slow changes in the machine's load.
    std::vector<double> ro, rp;
    for (size_t r = 0; r < tt.size(); ++r) {
      ro.push_back(tt[r] / to[r]);
      if (!tp.empty()) rp.push_back(tt[r] / tp[r]);
    }
    const double ratio = use_min ? go / gt : median(ro);
    const double ratio_p = tp.empty() ? 0 : (use_min ? gp / gt : median(rp));
    ratios.push_back(ratio);
    if (gp > 0) ratios_packed.push_back(ratio_p);
    char gps[32] = "-", rps[32] = "-";
    if (gp > 0) {
      std::snprintf(gps, sizeof gps, "%.1f", gp);
      std::snprintf(rps, sizeof rps, "%.2f", ratio_p);
    }
    std::printf("| %s | %s | %.1f | %.1f | %s | %.2f | %s |\n", s.group.c_str(), name.c_str(), gt, go, gps, ratio, rps);
    std::fflush(stdout);
  }
  if (!ratios.empty()) {
    std::printf("\nrlx / OpenBLAS: min %.2f, median %.2f", *std::min_element(ratios.begin(), ratios.end()),
                median(ratios));
    if (!ratios_packed.empty())
      std::printf("; packed-B / OpenBLAS: min %.2f, median %.2f",
                  *std::min_element(ratios_packed.begin(), ratios_packed.end()), median(ratios_packed));
    std::printf("\n");
  }
  return 0;
}
