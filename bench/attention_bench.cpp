// The CPU's fused attention kernel on its two paths, in the same run: the direct AVX-512
// kernel (rows in groups of 8, K transposed per task) against the GEMM path (the two products
// of each (batch, head) through the GEMM driver), on MiniLM's shapes (12 heads of 32, 128
// positions, padding mask, batches 1, 8, 32) and a Qwen3-style causal prefill (16 query heads
// over 8 key/value heads of 128, 256 positions: past the direct kernel's head-dimension limit,
// so both columns run the GEMM path and their ratio shows the run's noise). Peers are compared end to end by
// bench/minilm.py; this isolates the kernel. Prints min and median wall ms over interleaved
// runs (min is the figure least disturbed by a shared machine) and the ratio of the mins.
// Usage: rlx_bench_attention [--runs N]      (threads: RLX_NUM_THREADS, default all cores)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/kernels/attention.h"
#include "rlx/thread_pool.h"

namespace {

struct Shape {
  const char* name;
  int64_t b, hq, hkv, s, d;
  bool mask, causal;
};

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 60;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--runs") && i + 1 < argc) {
      runs = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--runs N]\n", argv[0]);
      return 2;
    }
  }
  if (runs < 1) runs = 1;
  const Shape shapes[] = {
      {"minilm b=1", 1, 12, 12, 128, 32, true, false},
      {"minilm b=8", 8, 12, 12, 128, 32, true, false},
      {"minilm b=32", 32, 12, 12, 128, 32, true, false},
      {"qwen3 prefill", 1, 16, 8, 256, 128, false, true},
  };
  std::printf("threads: %d\n\n", rlx::ThreadPool::global().size());
  std::printf("| shape | GFLOP | GEMM path min / p50 ms | direct min / p50 ms | GEMM path / direct (min) |\n");
  std::printf("|---|---:|---:|---:|---:|\n");
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (const Shape& sh : shapes) {
    // bshd layout, as the BERT and Qwen3 builders produce it
    std::vector<float> q(static_cast<size_t>(sh.b * sh.s * sh.hq * sh.d)), k(static_cast<size_t>(sh.b * sh.s * sh.hkv * sh.d));
    std::vector<float> v(k.size()), o(q.size());
    for (auto* x : {&q, &k, &v})
      for (float& f : *x) f = u(rng);
    std::vector<uint8_t> mask(static_cast<size_t>(sh.b * sh.s), 1);
    for (int64_t b = 0; b < sh.b; ++b)  // padding: the last b % 16 positions of item b
      for (int64_t j = sh.s - b % 16; j < sh.s; ++j) mask[static_cast<size_t>(b * sh.s + j)] = 0;
    rlx::cpu::AttentionArgs a;
    a.q = q.data(), a.k = k.data(), a.v = v.data(), a.out = o.data();
    a.batch = sh.b, a.heads_q = sh.hq, a.heads_kv = sh.hkv, a.seq_q = sh.s, a.seq_k = sh.s;
    a.head_dim = sh.d, a.head_dim_v = sh.d;
    const int64_t qs[3] = {sh.s * sh.hq * sh.d, sh.d, sh.hq * sh.d}, ks[3] = {sh.s * sh.hkv * sh.d, sh.d, sh.hkv * sh.d};
    for (int i = 0; i < 3; ++i) a.q_strides[i] = a.out_strides[i] = qs[i], a.k_strides[i] = a.v_strides[i] = ks[i];
    if (sh.mask) {
      a.mask = mask.data();
      a.mask_dtype = rlx::DType::boolean;
      a.mask_strides[0] = sh.s, a.mask_strides[3] = 1;
    }
    a.causal = sh.causal;
    a.scale = 1.f / std::sqrt(static_cast<float>(sh.d));
    std::vector<double> t[2];
    for (int r = 0; r < runs + 3; ++r)
      for (int path = 0; path < 2; ++path) {
        a.direct_kernel = path == 1;
        auto t0 = std::chrono::steady_clock::now();
        rlx::Status st = rlx::cpu::attention_f32(a);
        const double ms = ms_since(t0);
        if (!st.is_ok()) {
          std::fprintf(stderr, "%s: %s\n", sh.name, st.to_string().c_str());
          return 1;
        }
        if (r >= 3) t[path].push_back(ms);  // three warm-up runs
      }
    for (auto& x : t) std::sort(x.begin(), x.end());
    const double gflop = 4.0 * sh.b * sh.hq * sh.s * sh.s * sh.d / 1e9;
    std::printf("| %s | %.3f | %.3f / %.3f | %.3f / %.3f | %.2f |\n", sh.name, gflop, t[0][0], t[0][t[0].size() / 2],
                t[1][0], t[1][t[1].size() / 2], t[0][0] / t[1][0]);
  }
  return 0;
}
