// The machine's read bandwidth, the yardstick of decode speed (docs/benchmarks.md, "Decoder
// families"): each of T threads sums its share of a buffer (1 GiB, or --mib N: a model's weight
// bytes, read from the cache level its decode reads them from) with 256-bit loads where the
// CPU has AVX2 (the width the decode kernels read with; four independent sums, so the loop is
// bound by memory), else eight 64-bit sums; best of 5 runs per thread count.
//
//   build/bin/rlx_bench_read_bandwidth [--mib N] [THREADS...]     (default: 1 GiB, threads 1 2)
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

#if defined(__x86_64__)
__attribute__((target("avx2"))) uint64_t sum_words_avx2(const uint64_t* p, size_t n) {
  __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_add_epi64(s0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
    s1 = _mm256_add_epi64(s1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 4)));
    s2 = _mm256_add_epi64(s2, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 8)));
    s3 = _mm256_add_epi64(s3, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 12)));
  }
  alignas(32) uint64_t v[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(v), _mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3)));
  uint64_t t = v[0] + v[1] + v[2] + v[3];
  for (; i < n; ++i) t += p[i];
  return t;
}
#endif

uint64_t sum_words(const uint64_t* p, size_t n) {
  uint64_t s[8] = {};
  for (size_t i = 0; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) s[k] += p[i + k];
  uint64_t t = 0;
  for (uint64_t v : s) t += v;
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> counts;
  size_t mib = 1024;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--mib" && i + 1 < argc) {
      // the buffer's size: a model's weight bytes, to read from the cache level its decode reads from
      const long m = std::atol(argv[++i]);
      if (m < 1 || m > (1 << 20)) {
        std::fprintf(stderr, "read_bandwidth: --mib '%s' is not 1..1048576\n", argv[i]);
        return 2;
      }
      mib = static_cast<size_t>(m);
      continue;
    }
    const int t = std::atoi(argv[i]);
    if (t < 1 || t > 256) {
      std::fprintf(stderr, "read_bandwidth: thread count '%s' is not 1..256\n", argv[i]);
      return 2;
    }
    counts.push_back(t);
  }
  if (counts.empty()) counts = {1, 2};
  const size_t words = (mib << 20) / sizeof(uint64_t);
  std::vector<uint64_t> buf(words, 1);  // written once, so every page is mapped before timing
  for (int threads : counts) {
    double best = 0;
    uint64_t check = 0;
    for (int rep = 0; rep < 5; ++rep) {
      std::vector<uint64_t> sums(static_cast<size_t>(threads));
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
          const size_t b = words / threads * t, e = t + 1 == threads ? words : words / threads * (t + 1);
#if defined(__x86_64__)
          if (__builtin_cpu_supports("avx2")) {
            sums[static_cast<size_t>(t)] = sum_words_avx2(buf.data() + b, e - b);
            return;
          }
#endif
          sums[static_cast<size_t>(t)] = sum_words(buf.data() + b, e - b);
        });
      for (std::thread& th : pool) th.join();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::max(best, static_cast<double>(words * sizeof(uint64_t)) / s / 1e9);
      for (uint64_t v : sums) check += v;
    }
    std::printf("%d thread(s): %.1f GB/s read over %zu MiB (best of 5; checksum %llu)\n", threads, best, mib,
                static_cast<unsigned long long>(check));
  }
  return 0;
}
