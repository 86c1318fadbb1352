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
// --narrow runs the 16-bit table instead: rlx's GEMM with A, B and C all f32, all f16 and all
// bf16 (B packed once, as for weights), at M = 1 (decode: bound by reading B, which 16-bit
// panels halve) and M = 128, 512 with N = K = 1024..4096, against PyTorch's torch.matmul in
// f32, bf16 and f16 on the CPU with the same number of threads (a python3 child process
// asked for each timing in turn, alternating with rlx in every round; --no-torch skips it).
// With --cpu-time (and RLX_NUM_THREADS=1) both sides are timed by their thread's CPU clock.
// Where bf16 x bf16 runs on the AVX-512 BF16 kernels (vdpbf16ps), the table adds rlx bf16 with
// them switched off (B widened on load, as for the other types: set_gemm_bf16_dot(false)).
//
// --layer times a compiled graph layer, y = relu(x @ W + r) with W a weight, in f32, f16 and
// bf16 three ways: the native GEMM with add + relu fused as its epilogue (the default), the
// native GEMM unfused (the product is also an output, so the epilogue runs as its own kernel),
// and the generated C loop (matmul and dot force-common: what 16-bit products ran as before
// the 16-bit GEMM).
//
// Usage: rlx_bench_gemm [--quick] [--rounds N] [--filter SUBSTRING] [--best] [--isa avx512|avx2|portable]
//                       [--narrow [--no-torch]] [--layer]
// --best reports the fastest round instead of the median (for tuning on a loaded machine).
// --cpu-time times by the calling thread's CPU clock instead of the wall clock, so that time
// the process spends descheduled on a shared machine does not count (only with
// RLX_NUM_THREADS=1; OpenBLAS then also runs on the calling thread).
// Threads: RLX_NUM_THREADS (default: all cores); OpenBLAS gets the same number.
#include <cblas.h>
#include <sys/wait.h>
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
#include "rlx/compile.h"
#include "rlx/dtype.h"
#include "rlx/op_builder.h"
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
  // The MNIST MLP's first layer at batch 1024 (x W1, half its training step), then other
  // products whose B fits in L2 but is used by many rows (where packing B pays) or few.
  s.push_back({"train", 1, 1024, 784, 128, false});
  s.push_back({"train", 1, 4096, 128, 128, false});
  s.push_back({"train", 1, 1024, 256, 256, false});
  s.push_back({"train", 1, 256, 784, 128, false});
  s.push_back({"train", 1, 128, 784, 128, false});
  s.push_back({"train", 1, 512, 384, 256, false});
  // tinyconv's weight gradients per image (128 images): the output gradient's rows dotted
  // with the im2col rows, both stored [rows, positions] (trans_b): conv1, 8 x 9 outputs from
  // rows of 676 (rlx's row dots), and conv2, 16 x 72 from rows of 121 (the blocked kernels).
  s.push_back({"conv-dw", 128, 8, 676, 9, true});
  s.push_back({"conv-dw", 128, 16, 121, 72, true});
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

// PyTorch as the peer of the 16-bit GEMMs: a python3 child that times torch.matmul when asked
// ("m k n dtype iters" on its stdin, seconds per call or "err ..." on its stdout).
constexpr const char* kTorchScript = R"PY(
import sys, time
try:
    import torch
except Exception as e:
    print("err import torch failed: %s" % e, flush=True)
    sys.exit(0)
torch.set_num_threads(int(sys.argv[1]))
# --cpu-time: timed by the CPU clock of the whole process (all of its threads: MKL may start
# its own even with one torch thread)
clock = time.process_time if sys.argv[2] == "cpu" else time.perf_counter
print("ok torch %s, %d threads" % (torch.__version__, torch.get_num_threads()), flush=True)
held = {}
for line in sys.stdin:
    m, k, n, dt, iters = line.split()
    key = (int(m), int(k), int(n), dt)
    try:
        if key not in held:
            held.clear()
            g = torch.Generator().manual_seed(1)
            t = getattr(torch, dt)
            held[key] = (torch.rand(key[0], key[1], generator=g).sub(0.5).to(t),
                         torch.rand(key[1], key[2], generator=g).sub(0.5).to(t))
        a, b = held[key]
        torch.matmul(a, b)
        t0 = clock()
        for _ in range(int(iters)):
            torch.matmul(a, b)
        print((clock() - t0) / int(iters), flush=True)
    except Exception as e:
        print("err %s" % str(e).splitlines()[0], flush=True)
)PY";

class TorchPeer {
 public:
  ~TorchPeer() {
    if (to_) std::fclose(to_);
    if (from_) std::fclose(from_);
    if (pid_ > 0) waitpid(pid_, nullptr, 0);
  }
  // Starts the child; false (with the reason in `what`) if python3 or torch is missing.
  bool start(int threads, std::string* what) {
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) return *what = "pipe failed", false;
    pid_ = fork();
    if (pid_ < 0) return *what = "fork failed", false;
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      close(in[1]);
      close(out[0]);
      const std::string t = std::to_string(threads);
      execl("/usr/bin/python3", "python3", "-c", kTorchScript, t.c_str(), g_cpu_time ? "cpu" : "wall",
            static_cast<char*>(nullptr));
      std::printf("err cannot run /usr/bin/python3\n");
      std::fflush(stdout);
      _exit(0);
    }
    close(in[0]);
    close(out[1]);
    to_ = fdopen(in[1], "w");
    from_ = fdopen(out[0], "r");
    *what = line();
    if (what->rfind("ok ", 0) != 0) return false;
    *what = what->substr(3);
    return true;
  }
  // Seconds per torch.matmul of [m, k] x [k, n] in dtype ("float32", "bfloat16", "float16"),
  // or -1 with torch's refusal in `why`.
  double time(int64_t m, int64_t k, int64_t n, const char* dtype, int iters, std::string* why) {
    std::fprintf(to_, "%lld %lld %lld %s %d\n", (long long)m, (long long)k, (long long)n, dtype, iters);
    std::fflush(to_);
    const std::string r = line();
    if (r.rfind("err", 0) == 0 || r.empty()) {
      *why = r.empty() ? "the python3 child exited" : r.substr(4);
      return -1;
    }
    return std::atof(r.c_str());
  }

 private:
  std::string line() {
    char buf[512];
    if (!from_ || !std::fgets(buf, sizeof buf, from_)) return "";
    std::string s(buf);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
  }
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
};

// The 16-bit table (--narrow): rlx f32 / f16 / bf16 with packed B, and PyTorch in the same
// types, per shape; ratios per round as in the OpenBLAS table.
int run_narrow(bool quick, int rounds, bool use_min, bool torch, const std::string& filter) {
  using rlx::cpu::GemmType;
  const int threads = rlx::ThreadPool::global().size();
  TorchPeer peer;
  std::string peer_what = "not asked (--no-torch)";
  if (torch && !peer.start(threads, &peer_what)) {
    std::printf("PyTorch peer unavailable: %s\n", peer_what.c_str());
    torch = false;
  }
  // variant 3, the next best bf16 path: where the AMX tiles run bf16 (the default), the
  // vdpbf16ps kernels on a B packed in panels; else, where those are the default, the widening
  // kernels
  const bool amx = rlx::cpu::gemm_amx();
  const bool dot = rlx::cpu::gemm_bf16_dot();
  const int nv = amx || dot ? 4 : 3;
  std::string widen_name = "-";
  if (amx) {
    widen_name = rlx::cpu::gemm_kernel_name(GemmType::bf16, GemmType::bf16, GemmType::bf16);
  } else if (dot) {
    rlx::cpu::set_gemm_bf16_dot(false);
    widen_name = rlx::cpu::gemm_kernel_name(GemmType::bf16, GemmType::bf16, GemmType::bf16);
    rlx::cpu::set_gemm_bf16_dot(true);
  }
  std::printf("rlx 16-bit GEMM benchmark: kernels '%s' / '%s' / '%s%s' / next best bf16 '%s', %d thread(s); peer "
              "PyTorch: %s\n",
              rlx::cpu::gemm_kernel_name(), rlx::cpu::gemm_kernel_name(GemmType::f16, GemmType::f16, GemmType::f16).c_str(),
              rlx::cpu::gemm_kernel_name(GemmType::bf16, GemmType::bf16, GemmType::bf16).c_str(),
              amx ? ", amx-bf16 tiles" : "", widen_name.c_str(),
              threads, peer_what.c_str());
  std::printf("A, B, C all of one type, B packed once (weights), f32 accumulation; %s of %d rounds, rlx and PyTorch "
              "alternating in each round;\nGFLOP/s = 2*m*k*n / %s; x/y = median over rounds of (y time / x time)\n\n",
              use_min ? "best" : "median", rounds, g_cpu_time ? "thread CPU time" : "wall time");
  std::printf("| m x k x n | rlx f32 | rlx f16 | rlx bf16 | rlx bf16 next | f16/f32 | bf16/f32 | bf16/bf16 next | "
              "torch f32 | torch f16 | torch bf16 | rlx bf16 / torch bf16 | rlx f16 / torch f16 | rlx f32 / torch f32 |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::fflush(stdout);
  const GemmType types[3] = {GemmType::f32, GemmType::f16, GemmType::bf16};
  const char* torch_names[3] = {"float32", "float16", "bfloat16"};
  std::string torch_refused[3];
  std::mt19937 rng(12345);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (int64_t m : {1, 128, 512})
    for (int64_t nk : {1024, 2048, 4096}) {
      if (quick && nk == 4096 && m > 1) continue;
      const int64_t k = nk, n = nk;
      char name[64];
      std::snprintf(name, sizeof name, "%lldx%lldx%lld", (long long)m, (long long)k, (long long)n);
      if (!filter.empty() && std::string(name).find(filter) == std::string::npos) continue;
      std::vector<float> a32(m * k), b32(k * n), c32(m * n);
      for (auto& x : a32) x = dist(rng);
      for (auto& x : b32) x = dist(rng);
      std::vector<uint16_t> a16[3], b16[3], c16[4];
      rlx::cpu::PackedB packed[3];
      rlx::cpu::GemmArgs g[4];
      for (int t = 0; t < 3; ++t) {
        g[t].m = m;
        g[t].n = n;
        g[t].k = k;
        g[t].lda = k;
        g[t].ldc = n;
        g[t].a_type = g[t].b_type = g[t].c_type = types[t];
        if (t == 0) {
          g[t].a = a32.data();
          g[t].c = c32.data();
          packed[t] = rlx::cpu::pack_b(b32.data(), n, false, k, n);
          continue;
        }
        auto round = [&](float v) { return t == 1 ? rlx::f32_to_f16(v) : rlx::f32_to_bf16(v); };
        a16[t].resize(a32.size());
        b16[t].resize(b32.size());
        c16[t].resize(c32.size());
        for (size_t i = 0; i < a32.size(); ++i) a16[t][i] = round(a32[i]);
        for (size_t i = 0; i < b32.size(); ++i) b16[t][i] = round(b32[i]);
        g[t].a = a16[t].data();
        g[t].c = c16[t].data();
        packed[t] = rlx::cpu::pack_b_for(types[t], b16[t].data(), types[t], n, false, k, n, m);
      }
      // the next best path's own B: packed in panels
      rlx::cpu::PackedB packed_next = rlx::cpu::pack_b(b16[2].data(), GemmType::bf16, n, false, k, n);
      g[3] = g[2];  // the same bf16 operands, its own C
      c16[3].resize(c32.size());
      g[3].c = c16[3].data();
      auto run = [&](int t) {
        if (t == 3 && !amx) rlx::cpu::set_gemm_bf16_dot(false);
        const bool ok = rlx::cpu::sgemm_packed(g[t], t == 3 ? packed_next : packed[t]).is_ok();
        if (t == 3 && !amx) rlx::cpu::set_gemm_bf16_dot(true);
        if (!ok) std::abort();
      };
      // Check once that the 16-bit products agree with f32 within their input and output roundings.
      for (int t = 0; t < nv; ++t) run(t);
      for (int t = 1; t < nv; ++t) {
        double max_err = 0, max_ref = 0;
        for (size_t i = 0; i < c32.size(); ++i) {
          const double v = t == 1 ? rlx::f16_to_f32(c16[t][i]) : rlx::bf16_to_f32(c16[t][i]);
          max_err = std::max(max_err, std::fabs(v - c32[i]));
          max_ref = std::max(max_ref, (double)std::fabs(c32[i]));
        }
        if (!(max_err <= 0.05 * std::max(1.0, max_ref))) {
          std::printf("MISMATCH on %s %s%s: max |16-bit - f32| = %g (max |f32| %g)\n", name,
                      rlx::cpu::gemm_type_name(types[t == 3 ? 2 : t]), t == 3 ? " next" : "", max_err, max_ref);
          return 1;
        }
      }
      const double flops = 2.0 * m * k * n;
      int iters[4], titers[3];
      for (int t = 0; t < nv; ++t) {
        const double t1 = time_calls([&] { run(t); }, 2);
        iters[t] = std::max(1, std::min(100000, (int)(0.02 / std::max(t1, 1e-7))));
      }
      bool have_torch[3] = {false, false, false};
      for (int t = 0; t < 3 && torch; ++t) {
        std::string why;
        const double t1 = peer.time(m, k, n, torch_names[t], 1, &why);
        have_torch[t] = t1 > 0;
        if (!have_torch[t]) torch_refused[t] = why;
        titers[t] = std::max(1, std::min(100000, (int)(0.02 / std::max(t1, 1e-7))));
      }
      std::vector<double> tr[4], tt[3];
      for (int r = 0; r < rounds; ++r)
        for (int t = 0; t < nv; ++t) {
          tr[t].push_back(time_calls([&] { run(t); }, iters[t]));
          if (t < 3 && have_torch[t]) {
            std::string why;
            tt[t].push_back(peer.time(m, k, n, torch_names[t], titers[t], &why));
            // PyTorch's OpenMP workers spin for a while after a call; let them sleep first.
            std::this_thread::sleep_for(std::chrono::milliseconds(150));
          }
        }
      auto stat = [&](const std::vector<double>& v) { return use_min ? *std::min_element(v.begin(), v.end()) : median(v); };
      // speed of x over y: per round, y's time / x's time (both timed in that round)
      auto ratio = [&](const std::vector<double>& x, const std::vector<double>& y) {
        std::vector<double> q;
        for (size_t r = 0; r < x.size() && r < y.size(); ++r) q.push_back(y[r] / x[r]);
        return use_min ? stat(y) / stat(x) : median(q);
      };
      auto cell = [](double v, const char* fmt) {
        char b[32];
        if (v <= 0) return std::string("-");
        std::snprintf(b, sizeof b, fmt, v);
        return std::string(b);
      };
      double gr[4] = {0, 0, 0, 0}, gt[3];
      for (int t = 0; t < nv; ++t) gr[t] = flops / stat(tr[t]) * 1e-9;
      for (int t = 0; t < 3; ++t) gt[t] = tt[t].empty() ? 0 : flops / stat(tt[t]) * 1e-9;
      std::printf("| %s | %.1f | %.1f | %.1f | %s | %.2f | %.2f | %s | %s | %s | %s | %s | %s | %s |\n", name, gr[0], gr[1],
                  gr[2], cell(gr[3], "%.1f").c_str(), ratio(tr[1], tr[0]), ratio(tr[2], tr[0]),
                  dot ? cell(ratio(tr[2], tr[3]), "%.2f").c_str() : "-", cell(gt[0], "%.1f").c_str(), cell(gt[1], "%.1f").c_str(),
                  cell(gt[2], "%.1f").c_str(), tt[2].empty() ? "-" : cell(ratio(tr[2], tt[2]), "%.2f").c_str(),
                  tt[1].empty() ? "-" : cell(ratio(tr[1], tt[1]), "%.2f").c_str(),
                  tt[0].empty() ? "-" : cell(ratio(tr[0], tt[0]), "%.2f").c_str());
      std::fflush(stdout);
    }
  for (int t = 0; t < 3; ++t)
    if (!torch_refused[t].empty()) std::printf("\nPyTorch %s: %s\n", torch_names[t], torch_refused[t].c_str());
  return 0;
}

// --layer: y = relu(x @ W + r) compiled three ways, per dtype and shape.
int run_layer(int rounds, bool use_min, const std::string& filter) {
  using namespace rlx;
  std::printf("rlx layer benchmark: y = relu(x[m,k] @ W[k,n] + r[m,n]), W a weight, %d thread(s); %s of %d rounds;\n"
              "ms per Model::run; ratios are per round, then the median\n\n",
              ThreadPool::global().size(), use_min ? "best" : "median", rounds);
  std::printf("| dtype | m x k x n | fused ms | unfused ms | generated ms | unfused / fused | generated / fused | how |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---|\n");
  std::fflush(stdout);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  auto random = [&](DType t, Sizes s) {
    Tensor x = Tensor::zeros(t, s);
    for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, u(rng));
    return x;
  };
  struct L {
    int64_t m, k, n;
  };
  for (DType t : {DType::f32, DType::f16, DType::bf16})
    for (L l : {L{1, 1024, 1024}, L{128, 1024, 1024}}) {
      char name[64];
      std::snprintf(name, sizeof name, "%lldx%lldx%lld", (long long)l.m, (long long)l.k, (long long)l.n);
      if (!filter.empty() && std::string(name).find(filter) == std::string::npos) continue;
      const Tensor w = random(t, {l.k, l.n});
      std::unique_ptr<Model> models[3];
      std::string how;
      for (int v = 0; v < 3; ++v) {
        Graph g;
        ValueId x = g.add_input("x", TensorType{t, to_shape({l.m, l.k})});
        ValueId r = g.add_input("r", TensorType{t, to_shape({l.m, l.n})});
        GraphBuilder gb(g);
        OpBuilder o(gb);
        ValueId wv = o.param("w", TensorType{t, to_shape({l.k, l.n})});
        ValueId mm = o.matmul(x, wv);
        g.outputs = {o.relu(o.add(mm, r))};
        if (v == 1) g.outputs.push_back(mm);  // a second reader: no fusion
        g.weights["w"] = w;
        if (!o.ok()) return std::printf("graph: %s\n", o.status().to_string().c_str()), 1;
        CompileOptions opt;
        if (v == 2)  // matmul legalizes to dot: neither may take the native GEMM
          for (Op op : {Op::MatMul, Op::Dot}) opt.policy.per_op[op] = PathPolicy::force_common;
        if (v == 0) {
          auto rep = explain(g, "cpu", opt.policy);
          if (rep)
            for (const NodeDecision& d : rep->nodes)
              if (d.op == Op::MatMul) how = d.how;
        }
        auto m = Model::compile(g, opt);
        if (!m) return std::printf("compile: %s\n", m.status().to_string().c_str()), 1;
        models[v] = std::move(*m);
      }
      const std::vector<Tensor> in{random(t, {l.m, l.k}), random(t, {l.m, l.n})};
      auto call = [&](int v) {
        auto out = models[v]->run(in);
        if (!out) std::abort();
      };
      int iters[3];
      for (int v = 0; v < 3; ++v) {
        call(v);
        const double t1 = time_calls([&] { call(v); }, 2);
        iters[v] = std::max(1, std::min(10000, (int)(0.02 / std::max(t1, 1e-7))));
      }
      std::vector<double> tm[3];
      for (int r = 0; r < rounds; ++r)
        for (int v = 0; v < 3; ++v) tm[v].push_back(time_calls([&] { call(v); }, iters[v]));
      auto stat = [&](const std::vector<double>& v) { return use_min ? *std::min_element(v.begin(), v.end()) : median(v); };
      auto ratio = [&](int a, int b) {
        std::vector<double> q;
        for (int r = 0; r < rounds; ++r) q.push_back(tm[a][r] / tm[b][r]);
        return use_min ? stat(tm[a]) / stat(tm[b]) : median(q);
      };
      std::printf("| %s | %s | %.3f | %.3f | %.3f | %.2f | %.2f | %s |\n", std::string(dtype_name(t)).c_str(), name, stat(tm[0]) * 1e3,
                  stat(tm[1]) * 1e3, stat(tm[2]) * 1e3, ratio(1, 0), ratio(2, 0), how.c_str());
      std::fflush(stdout);
    }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  maybe_reexec_with_avx512_openblas(argv);
  bool quick = false;
  int rounds = 15;
  std::string filter;
  bool use_min = false;
  bool narrow = false, torch = true, layer = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) {
      quick = true;
      rounds = 7;
    } else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--cpu-time")) {
      g_cpu_time = true;
    } else if (!std::strcmp(argv[i], "--narrow")) {
      narrow = true;
    } else if (!std::strcmp(argv[i], "--layer")) {
      layer = true;
    } else if (!std::strcmp(argv[i], "--no-torch")) {
      torch = false;
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
                   "          [--isa avx512|avx2|portable] [--narrow [--no-torch]] [--layer]\n",
                   argv[0]);
      return 2;
    }
  }

  const int threads = rlx::ThreadPool::global().size();
  if (g_cpu_time && threads != 1) {
    std::fprintf(stderr, "--cpu-time needs RLX_NUM_THREADS=1 (a thread's CPU clock misses other threads' work)\n");
    return 2;
  }
  if (narrow) return run_narrow(quick, rounds, use_min, torch, filter);
  if (layer) return run_layer(rounds, use_min, filter);
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
