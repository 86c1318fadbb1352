// Tests of the CPU f32 GEMM (src/backends/cpu/kernels/gemm.h) against a double-precision
// reference loop, with fresh random inputs (the seed is printed on failure), sentinels around
// every row of C, and every kernel family this CPU can run.
#include "backends/cpu/kernels/gemm.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "rlx/thread_pool.h"

namespace rlx::cpu {
namespace {

constexpr float kSentinel = -12345.5f;

uint32_t fresh_seed() {
  static const uint32_t base = std::random_device{}();
  static std::atomic<uint32_t> n{0};
  return base + 7919u * n.fetch_add(1);
}

std::vector<GemmIsa> available_isas() {
  std::vector<GemmIsa> out;
  const GemmIsa best = gemm_isa();
  for (GemmIsa isa : {GemmIsa::portable, GemmIsa::avx2, GemmIsa::avx512})
    if (set_gemm_isa(isa)) out.push_back(isa);
  EXPECT_TRUE(set_gemm_isa(best));
  return out;
}

const char* isa_name(GemmIsa isa) {
  switch (isa) {
    case GemmIsa::portable: return "portable";
    case GemmIsa::avx2: return "avx2";
    case GemmIsa::avx512: return "avx512";
  }
  return "?";
}

// Restores the best kernel family when a test leaves.
struct IsaGuard {
  GemmIsa saved = gemm_isa();
  ~IsaGuard() { set_gemm_isa(saved); }
};

struct Case {
  int64_t m = 1, n = 1, k = 1;
  bool trans_a = false, trans_b = false;
  int64_t lda_pad = 0, ldb_pad = 0, ldc_pad = 0;
  int64_t batch = 1;
  bool broadcast_a = false, broadcast_b = false;
  float alpha = 1.f, beta = 0.f;
  bool bias = false;
  bool epilogue = false;
  bool packed = false;

  std::string str() const {
    return "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
           " trans_a=" + std::to_string(trans_a) + " trans_b=" + std::to_string(trans_b) +
           " pads=" + std::to_string(lda_pad) + "," + std::to_string(ldb_pad) + "," + std::to_string(ldc_pad) +
           " batch=" + std::to_string(batch) + " bcast=" + std::to_string(broadcast_a) + std::to_string(broadcast_b) +
           " alpha=" + std::to_string(alpha) + " beta=" + std::to_string(beta) + " bias=" + std::to_string(bias) +
           " epilogue=" + std::to_string(epilogue) + " packed=" + std::to_string(packed) + " kernel=" +
           gemm_kernel_name();
  }
};

// The epilogue under test: counts calls per element and maps c -> 2c + 1, so the check also
// proves it ran after everything else was added.
struct EpilogueCounter {
  float* c_base;
  int64_t stride_c, m, n;
  std::vector<std::atomic<int>> counts;
  std::atomic<bool> bad_block{false};
  EpilogueCounter(float* base, int64_t sc, int64_t m_, int64_t n_, int64_t batch)
      : c_base(base), stride_c(sc), m(m_), n(n_), counts(static_cast<size_t>(batch * m_ * n_)) {}

  static void fn(void* ctx, void* cv, int64_t ldc, int64_t m0, int64_t n0, int64_t mlen, int64_t nlen) {
    auto* self = static_cast<EpilogueCounter*>(ctx);
    float* c = static_cast<float*>(cv);
    const int64_t off = c - self->c_base - (m0 * ldc + n0);
    const int64_t item = self->stride_c ? off / self->stride_c : 0;
    if (off != item * self->stride_c || m0 < 0 || n0 < 0 || mlen < 1 || nlen < 1 || m0 + mlen > self->m ||
        n0 + nlen > self->n) {
      self->bad_block = true;
      return;
    }
    for (int64_t i = 0; i < mlen; ++i)
      for (int64_t j = 0; j < nlen; ++j) {
        self->counts[(item * self->m + m0 + i) * self->n + n0 + j].fetch_add(1);
        c[i * ldc + j] = 2.f * c[i * ldc + j] + 1.f;
      }
  }
};

// Runs one case through sgemm (or pack_b + sgemm_packed) and checks it element by element.
void run_case(const Case& cs, uint32_t seed) {
  SCOPED_TRACE("seed=" + std::to_string(seed) + " " + cs.str());
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  const int64_t m = cs.m, n = cs.n, k = cs.k;
  const int64_t a_rows = cs.trans_a ? k : m, a_cols = cs.trans_a ? m : k;
  const int64_t b_rows = cs.trans_b ? n : k, b_cols = cs.trans_b ? k : n;
  const int64_t lda = std::max<int64_t>(1, a_cols + cs.lda_pad);
  const int64_t ldb = std::max<int64_t>(1, b_cols + cs.ldb_pad);
  const int64_t ldc = std::max<int64_t>(1, n + cs.ldc_pad);
  const bool bcast_b = cs.broadcast_b || cs.packed;
  const int64_t sa = cs.broadcast_a ? 0 : a_rows * lda + 3;
  const int64_t sb = bcast_b ? 0 : b_rows * ldb + 5;
  const int64_t sc = m * ldc + 7;  // gaps between items hold sentinels too
  const int64_t pre = 37;          // sentinels before C

  std::vector<float> a(std::max<int64_t>(1, (cs.batch - 1) * sa + a_rows * lda));
  std::vector<float> b(std::max<int64_t>(1, (cs.batch - 1) * sb + b_rows * ldb));
  for (auto& x : a) x = dist(rng);
  for (auto& x : b) x = dist(rng);
  std::vector<float> bias(std::max<int64_t>(1, n));
  for (auto& x : bias) x = dist(rng);
  std::vector<float> c(pre + cs.batch * sc + 41, kSentinel);
  std::vector<float> c_in(c.size(), kSentinel);
  float* c0 = c.data() + pre;
  for (int64_t it = 0; it < cs.batch; ++it)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        // beta == 0 must not read C: fill it with NaN.
        const float v = cs.beta == 0.f ? std::numeric_limits<float>::quiet_NaN() : dist(rng);
        c[pre + it * sc + i * ldc + j] = v;
        c_in[pre + it * sc + i * ldc + j] = v;
      }

  GemmArgs g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = a.data();
  g.lda = lda;
  g.trans_a = cs.trans_a;
  g.batch_stride_a = sa;
  g.b = b.data();
  g.ldb = ldb;
  g.trans_b = cs.trans_b;
  g.batch_stride_b = sb;
  g.c = c0;
  g.ldc = ldc;
  g.batch_stride_c = sc;
  g.batch = cs.batch;
  g.alpha = cs.alpha;
  g.beta = cs.beta;
  g.bias = cs.bias ? bias.data() : nullptr;
  EpilogueCounter counter(c0, sc, m, n, cs.batch);
  if (cs.epilogue) g.epilogue = {&EpilogueCounter::fn, &counter};

  if (cs.packed) {
    PackedB pb = pack_b(b.data(), ldb, cs.trans_b, k, n);
    ASSERT_TRUE(pb.valid());
    ASSERT_EQ(pb.k(), k);
    ASSERT_EQ(pb.n(), n);
    g.b = nullptr;  // must be ignored
    ASSERT_TRUE(sgemm_packed(g, pb).is_ok());
  } else {
    ASSERT_TRUE(sgemm(g).is_ok());
  }

  // Reference in double.
  double max_a = 0, max_b = 0;
  for (float x : a) max_a = std::max(max_a, (double)std::fabs(x));
  for (float x : b) max_b = std::max(max_b, (double)std::fabs(x));
  int64_t failures = 0;
  for (int64_t it = 0; it < cs.batch; ++it) {
    const float* ai = a.data() + it * sa;
    const float* bi = b.data() + it * sb;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          const double av = cs.trans_a ? ai[p * lda + i] : ai[i * lda + p];
          const double bv = cs.trans_b ? bi[j * ldb + p] : bi[p * ldb + j];
          acc += av * bv;
        }
        const int64_t ci = pre + it * sc + i * ldc + j;
        double want = cs.alpha * acc;
        if (cs.beta != 0.f) want += cs.beta * (double)c_in[ci];
        if (cs.bias) want += bias[j];
        double tol = 1e-5 * k * max_a * max_b * std::fabs(cs.alpha) + 1e-6 + 1e-6 * std::fabs(want);
        if (cs.epilogue) {
          want = 2 * want + 1;
          tol *= 2;
        }
        const double got = c[ci];
        if (!(std::fabs(got - want) <= tol)) {
          if (++failures <= 5)
            ADD_FAILURE() << "C[" << it << "][" << i << "][" << j << "] = " << got << ", want " << want;
        }
      }
  }
  EXPECT_EQ(failures, 0);

  // Nothing outside the m x n block of every item was written.
  int64_t clobbered = 0;
  for (size_t x = 0; x < c.size(); ++x) {
    const int64_t rel = static_cast<int64_t>(x) - pre;
    bool inside = false;
    if (rel >= 0 && rel < cs.batch * sc) {
      const int64_t r = rel % sc;
      inside = r < m * ldc && r % ldc < n;
    }
    if (!inside && c[x] != kSentinel && ++clobbered <= 5) ADD_FAILURE() << "sentinel overwritten at offset " << rel;
  }
  EXPECT_EQ(clobbered, 0);

  if (cs.epilogue) {
    EXPECT_FALSE(counter.bad_block) << "epilogue got a block outside C";
    int64_t wrong = 0;
    for (size_t x = 0; x < counter.counts.size(); ++x)
      if (counter.counts[x].load() != 1 && ++wrong <= 5)
        ADD_FAILURE() << "epilogue ran " << counter.counts[x].load() << " times on element " << x;
    EXPECT_EQ(wrong, 0);
  }
}

TEST(CpuGemm, KernelNameAndDispatch) {
  const std::string name = gemm_kernel_name();
  EXPECT_FALSE(name.empty());
  IsaGuard guard;
  const auto isas = available_isas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), GemmIsa::portable);
  for (GemmIsa isa : isas) {
    ASSERT_TRUE(set_gemm_isa(isa));
    EXPECT_EQ(gemm_isa(), isa);
    EXPECT_NE(std::string(gemm_kernel_name()).find(isa_name(isa)), std::string::npos) << gemm_kernel_name();
  }
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma")) {
    EXPECT_EQ(std::string(name).rfind("avx512", 0), 0u) << "an AVX-512 CPU should get the AVX-512 kernels";
  }
#endif
}

// Every small shape, each transpose, for every kernel family: covers all row and column
// edges of the micro-kernels (1..16 rows, masked columns, 64-column variants).
TEST(CpuGemm, EdgeSizesAllTransposesAllKernels) {
  IsaGuard guard;
  for (GemmIsa isa : available_isas()) {
    ASSERT_TRUE(set_gemm_isa(isa));
    const int64_t sizes[] = {0, 1, 2, 3, 5, 7, 13, 14, 15, 16, 17, 29, 33, 47, 65};
    std::mt19937 pick(fresh_seed());
    for (int64_t m : sizes)
      for (int64_t n : sizes) {
        Case cs;
        cs.m = m;
        cs.n = n;
        cs.k = sizes[pick() % std::size(sizes)];
        cs.trans_a = pick() & 1;
        cs.trans_b = pick() & 2;
        cs.beta = (pick() & 4) ? 0.f : 0.5f;
        run_case(cs, fresh_seed());
        if (HasFatalFailure() || HasFailure()) return;
      }
  }
}

// Shapes that cross the cache blocks: several K blocks, several column tiles, packed and
// in-place B, tails in every dimension, padded leading dimensions.
TEST(CpuGemm, BlockedShapes) {
  IsaGuard guard;
  struct S {
    int64_t m, n, k;
  };
  const S shapes[] = {{1, 1100, 900}, {8, 1536, 384}, {9, 700, 1408}, {40, 100, 800}, {129, 385, 391},
                      {300, 70, 1000}, {257, 1030, 20}, {1, 3, 2000}};
  for (GemmIsa isa : available_isas()) {
    ASSERT_TRUE(set_gemm_isa(isa));
    int variant = 0;
    for (const S& s : shapes) {
      Case cs;
      cs.m = s.m;
      cs.n = s.n;
      cs.k = s.k;
      cs.trans_a = variant & 1;
      cs.trans_b = variant & 2;
      cs.lda_pad = variant % 3;
      cs.ldb_pad = (variant * 5) % 7;
      cs.ldc_pad = variant % 4 == 1 ? 19 : 0;
      cs.beta = variant % 3 == 0 ? 0.f : -0.75f;
      cs.alpha = variant % 2 ? 1.f : 0.5f;
      ++variant;
      run_case(cs, fresh_seed());
      if (HasFailure()) return;
    }
  }
}

TEST(CpuGemm, AlphaBetaBias) {
  for (float alpha : {1.f, -2.f, 0.f})
    for (float beta : {0.f, 1.f, 0.3f})
      for (bool bias : {false, true}) {
        Case cs;
        cs.m = 37;
        cs.n = 45;
        cs.k = 29;
        cs.alpha = alpha;
        cs.beta = beta;
        cs.bias = bias;
        run_case(cs, fresh_seed());
      }
}

// k == 0 and alpha == 0: C = beta*C + bias, A and B are not read.
TEST(CpuGemm, EmptyInnerDimension) {
  for (float beta : {0.f, 2.f}) {
    Case cs;
    cs.m = 5;
    cs.n = 9;
    cs.k = 0;
    cs.beta = beta;
    cs.bias = true;
    cs.epilogue = true;
    run_case(cs, fresh_seed());
  }
  // alpha == 0 with null A and B.
  std::vector<float> c(6, 1.f);
  GemmArgs g;
  g.m = 2;
  g.n = 3;
  g.k = 4;
  g.lda = 4;
  g.ldb = 3;
  g.c = c.data();
  g.ldc = 3;
  g.alpha = 0.f;
  g.beta = 3.f;
  ASSERT_TRUE(sgemm(g).is_ok());
  for (float x : c) EXPECT_EQ(x, 3.f);
}

TEST(CpuGemm, EpilogueRunsOncePerElement) {
  IsaGuard guard;
  const Case base{};
  struct S {
    int64_t m, n, k;
  };
  for (GemmIsa isa : available_isas()) {
    ASSERT_TRUE(set_gemm_isa(isa));
    for (const S& s : {S{1, 1, 1}, S{3, 100, 7}, S{64, 64, 900}, S{200, 321, 50}, S{1000, 40, 64}}) {
      for (bool packed : {false, true}) {
        Case cs = base;
        cs.m = s.m;
        cs.n = s.n;
        cs.k = s.k;
        cs.epilogue = true;
        cs.bias = true;
        cs.beta = 0.5f;
        cs.packed = packed;
        cs.ldc_pad = 3;
        run_case(cs, fresh_seed());
      }
    }
  }
}

TEST(CpuGemm, BatchedAndBroadcast) {
  struct S {
    int64_t batch, m, n, k;
  };
  int variant = 0;
  for (const S& s : {S{2, 1, 1, 1}, S{3, 17, 33, 9}, S{5, 128, 64, 128}, S{7, 33, 100, 65}, S{2, 300, 200, 400}, S{3, 120, 400, 400},
                     S{40, 16, 16, 16}}) {
    for (int bc = 0; bc < 3; ++bc) {
      Case cs;
      cs.batch = s.batch;
      cs.m = s.m;
      cs.n = s.n;
      cs.k = s.k;
      cs.broadcast_a = bc == 1;
      cs.broadcast_b = bc == 2;
      cs.trans_a = variant & 1;
      cs.trans_b = variant & 2;
      cs.beta = variant % 3 == 2 ? 1.f : 0.f;
      cs.epilogue = variant % 2 == 0;
      cs.bias = variant % 4 == 1;
      ++variant;
      run_case(cs, fresh_seed());
    }
  }
  // Pre-packed B shared by every item.
  Case cs;
  cs.batch = 6;
  cs.m = 50;
  cs.n = 70;
  cs.k = 90;
  cs.packed = true;
  cs.epilogue = true;
  run_case(cs, fresh_seed());
}

// Few outputs from long rows (A row-major, B transposed: a convolution's weight gradient per
// image) run on the row dots where the family has them (AVX-512), each output a dot of two
// rows; the blocked kernels elsewhere, or when B is not transposed, could be packed once (a
// single product's, or shared by the items) or the row dots would do more than the tiles' work.
TEST(CpuGemm, RowDotsForFewOutputsOfLongRows) {
  IsaGuard guard;
  struct S {
    int64_t batch, m, n, k;
  };
  int variant = 0;
  for (GemmIsa isa : available_isas()) {
    ASSERT_TRUE(set_gemm_isa(isa));
    for (const S& s : {S{2, 1, 1, 64}, S{4, 8, 9, 676}, S{3, 2, 16, 300}, S{2, 6, 20, 500}, S{2, 4, 6, 64}, S{2, 3, 7, 65},
                       S{3, 1, 1, 12}, S{2, 5, 13, 120}}) {
      Case cs;
      cs.batch = s.batch;
      cs.m = s.m;
      cs.n = s.n;
      cs.k = s.k;
      cs.trans_b = true;
      cs.broadcast_a = variant % 4 == 1;
      cs.lda_pad = variant % 3;
      cs.ldb_pad = (variant + 1) % 3;
      cs.ldc_pad = variant % 2;
      cs.alpha = variant % 5 == 2 ? -1.5f : 1.f;
      cs.beta = variant % 3 == 2 ? 1.f : 0.f;
      cs.epilogue = variant % 2 == 0;
      cs.bias = variant % 4 != 1;
      ++variant;
      GemmArgs g;
      g.m = cs.m;
      g.n = cs.n;
      g.k = cs.k;
      g.trans_b = true;
      g.batch = cs.batch;
      g.batch_stride_b = 1;
      const std::string how = describe_sgemm(g, false);
      EXPECT_EQ(how.find("row dots") != std::string::npos, isa == GemmIsa::avx512) << isa_name(isa) << ": " << how;
      run_case(cs, fresh_seed());
    }
  }
  // not for many outputs, B not transposed, a single product or a B shared by the items
  // (either could be packed beforehand, which must not change the bits)
  struct N {
    int64_t batch, stride_b, m, n, k;
    bool trans_b;
  };
  for (const N& s : {N{4, 1, 16, 72, 121, true}, N{4, 1, 64, 64, 121, true}, N{4, 1, 8, 9, 676, false}, N{1, 1, 8, 9, 676, true}, N{4, 0, 8, 9, 676, true}}) {
    GemmArgs g;
    g.batch = s.batch;
    g.batch_stride_b = s.stride_b;
    g.m = s.m;
    g.n = s.n;
    g.k = s.k;
    g.trans_b = s.trans_b;
    EXPECT_EQ(describe_sgemm(g, false).find("row dots"), std::string::npos) << describe_sgemm(g, false);
  }
}

// Each way of reading B and of splitting the work, checked against the reference. Which
// ways a shape takes depends on the pool size, so the test runs a set of shapes that covers
// them all on one or more threads and checks that each was seen.
TEST(CpuGemm, EveryStrategy) {
  struct S {
    int64_t batch, m, n, k;
    bool trans_b, broadcast_b, packed;
  };
  const S shapes[] = {
      {1, 8, 1536, 384, false, false, false},    // few rows: B in place
      {1, 128, 1536, 512, false, false, false},  // B too big for L2: packed
      {1, 128, 700, 300, true, false, false},    // transposed B: packed
      {1, 600, 700, 800, false, false, false},   // large M: tiles share a packed B
      {4, 40, 64, 64, true, true, false},        // small items in parallel sharing one packed B
      {4, 40, 64, 64, true, false, false},       // small items in parallel, each packing its B
      {4, 40, 600, 600, false, true, false},     // (depends on the thread count)
      {0, 100, 600, 600, false, false, false},   // items one after the other (batch: threads + 1)
      {1, 300, 200, 500, true, false, true},     // pre-packed B
      {1, 1030, 130, 300, false, false, false},  // B fits L2 but many rows use it: packed
  };
  std::set<std::string> seen;
  for (const S& sh : shapes) {
    Case cs;
    cs.batch = sh.batch ? sh.batch : ThreadPool::global().size() + 1;
    cs.m = sh.m;
    cs.n = sh.n;
    cs.k = sh.k;
    cs.trans_b = sh.trans_b;
    cs.broadcast_b = sh.broadcast_b;
    cs.packed = sh.packed;
    cs.bias = true;
    cs.epilogue = true;
    GemmArgs g;
    g.m = cs.m;
    g.n = cs.n;
    g.k = cs.k;
    g.trans_b = cs.trans_b;
    g.batch = cs.batch;
    g.batch_stride_b = cs.broadcast_b ? 0 : 1;
    const std::string how = describe_sgemm(g, cs.packed);
    SCOPED_TRACE(how);
    if (sh.m == 1030 && ThreadPool::global().size() < 8)
      EXPECT_EQ(how.find("B read in place"), std::string::npos) << "a small B used by many rows should be packed";
    for (const char* mode : {"B read in place", "B packed per block", "B packed once", "B pre-packed", "items spread",
                             "one after the other"})
      if (how.find(mode) != std::string::npos) seen.insert(mode);
    run_case(cs, fresh_seed());
  }
  std::vector<std::string> want = {"B read in place", "B packed per block", "B pre-packed", "one after the other"};
  if (ThreadPool::global().size() > 1) {
    want.push_back("B packed once");
    want.push_back("items spread");
  }
  for (const std::string& w : want) EXPECT_TRUE(seen.count(w)) << "no shape took the path '" << w << "'";
}

// The attention shapes of the benchmark, batched over heads.
TEST(CpuGemm, AttentionShapes) {
  for (bool trans_b : {false, true}) {
    Case cs;
    cs.batch = 12;
    cs.m = 128;
    cs.k = 64;
    cs.n = 128;
    cs.trans_b = trans_b;
    run_case(cs, fresh_seed());
  }
  Case cs;
  cs.batch = 12;
  cs.m = 128;
  cs.k = 128;
  cs.n = 64;
  run_case(cs, fresh_seed());
}

// sgemm_packed gives the same bits as sgemm: packing only moves data, and both paths use
// the same K blocks and the same order of multiply-adds.
TEST(CpuGemm, PackedEqualsUnpacked) {
  IsaGuard guard;
  struct S {
    int64_t m, n, k;
    bool trans_b;
  };
  for (GemmIsa isa : available_isas()) {
    ASSERT_TRUE(set_gemm_isa(isa));
    for (const S& s : {S{1, 384, 384, false}, S{8, 1536, 384, true}, S{100, 77, 1000, false}, S{300, 129, 50, true},
                       S{5, 2, 3, false}}) {
      const uint32_t seed = fresh_seed();
      SCOPED_TRACE("seed=" + std::to_string(seed) + " m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) +
                   " k=" + std::to_string(s.k) + " kernel=" + gemm_kernel_name());
      std::mt19937 rng(seed);
      std::uniform_real_distribution<float> dist(-1.f, 1.f);
      std::vector<float> a(s.m * s.k), b(s.k * s.n), c1(s.m * s.n), c2(s.m * s.n);
      for (auto& x : a) x = dist(rng);
      for (auto& x : b) x = dist(rng);
      GemmArgs g;
      g.m = s.m;
      g.n = s.n;
      g.k = s.k;
      g.a = a.data();
      g.lda = s.k;
      g.b = b.data();
      g.ldb = s.trans_b ? s.k : s.n;
      g.trans_b = s.trans_b;
      g.c = c1.data();
      g.ldc = s.n;
      ASSERT_TRUE(sgemm(g).is_ok());
      PackedB pb = pack_b(b.data(), g.ldb, s.trans_b, s.k, s.n);
      ASSERT_TRUE(pb.valid());
      g.c = c2.data();
      ASSERT_TRUE(sgemm_packed(g, pb).is_ok());
      // Same K blocks, same products in the same order: bit for bit the same.
      for (size_t i = 0; i < c1.size(); ++i) ASSERT_EQ(c1[i], c2[i]) << "element " << i;
    }
  }
}

TEST(CpuGemm, PackedBOwnershipAndErrors) {
  std::vector<float> b(12, 1.f);
  PackedB pb = pack_b(b.data(), 4, false, 3, 4);
  ASSERT_TRUE(pb.valid());
  EXPECT_EQ(pb.k(), 3);
  EXPECT_EQ(pb.n(), 4);
  EXPECT_GE(pb.bytes(), 3 * 32 * sizeof(float));
  PackedB moved = std::move(pb);
  EXPECT_TRUE(moved.valid());
  EXPECT_FALSE(pb.valid());  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  EXPECT_FALSE(pack_b(b.data(), 3, false, 3, 4).valid()) << "ldb < n";
  EXPECT_FALSE(pack_b(nullptr, 4, false, 3, 4).valid());
  EXPECT_FALSE(pack_b(b.data(), 4, false, -1, 4).valid());
  EXPECT_TRUE(pack_b(nullptr, 1, false, 0, 4).valid()) << "k = 0 packs nothing";

  std::vector<float> a(6, 1.f), c(8, 0.f);
  GemmArgs g;
  g.m = 2;
  g.n = 4;
  g.k = 3;
  g.a = a.data();
  g.lda = 3;
  g.c = c.data();
  g.ldc = 4;
  ASSERT_TRUE(sgemm_packed(g, moved).is_ok());
  for (float x : c) EXPECT_EQ(x, 3.f);
  g.k = 2;
  EXPECT_EQ(sgemm_packed(g, moved).code(), ErrorCode::invalid_argument);
  EXPECT_EQ(sgemm_packed(g, PackedB()).code(), ErrorCode::invalid_argument);
}

TEST(CpuGemm, InvalidArgumentsAreRejected) {
  std::vector<float> a(16, 1.f), b(16, 1.f), c(16, kSentinel);
  GemmArgs ok;
  ok.m = 2;
  ok.n = 2;
  ok.k = 2;
  ok.a = a.data();
  ok.lda = 2;
  ok.b = b.data();
  ok.ldb = 2;
  ok.c = c.data();
  ok.ldc = 2;
  EXPECT_TRUE(check_gemm_args(ok).is_ok());
  auto expect_bad = [&](GemmArgs g, const char* what) {
    Status s = sgemm(g);
    EXPECT_EQ(s.code(), ErrorCode::invalid_argument) << what << ": " << s.to_string();
  };
  GemmArgs g = ok;
  g.m = -1;
  expect_bad(g, "negative m");
  g = ok;
  g.ldc = 1;
  expect_bad(g, "ldc < n");
  g = ok;
  g.lda = 1;
  expect_bad(g, "lda < k");
  g = ok;
  g.trans_b = true;
  g.ldb = 1;
  expect_bad(g, "ldb < k with trans_b");
  g = ok;
  g.a = nullptr;
  expect_bad(g, "null a");
  g = ok;
  g.b = nullptr;
  expect_bad(g, "null b");
  g = ok;
  g.c = nullptr;
  expect_bad(g, "null c");
  g = ok;
  g.batch = 2;
  g.batch_stride_c = 0;
  expect_bad(g, "C items overlap");
  g = ok;
  g.batch_stride_a = -4;
  expect_bad(g, "negative stride");
  g = ok;
  g.ldc = std::numeric_limits<int64_t>::max() / 2;
  g.m = 5;
  expect_bad(g, "overflowing extent");
  for (float x : c) EXPECT_EQ(x, kSentinel) << "a rejected call wrote C";
}

// Called from inside a pool task, sgemm runs serially on that thread and is still right.
TEST(CpuGemm, NestedInsidePoolTask) {
  std::vector<uint32_t> seeds(4);
  for (auto& s : seeds) s = fresh_seed();
  std::atomic<int> failures{0};
  ThreadPool::global().run(4, [&](int64_t t, int) {
    const int64_t m = 50 + t, n = 70, k = 90;
    std::mt19937 rng(seeds[t]);
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    std::vector<float> a(m * k), b(k * n), c(m * n);
    for (auto& x : a) x = dist(rng);
    for (auto& x : b) x = dist(rng);
    GemmArgs g;
    g.m = m;
    g.n = n;
    g.k = k;
    g.a = a.data();
    g.lda = k;
    g.b = b.data();
    g.ldb = n;
    g.c = c.data();
    g.ldc = n;
    if (!sgemm(g).is_ok()) ++failures;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) acc += (double)a[i * k + p] * b[p * n + j];
        if (std::fabs(acc - c[i * n + j]) > 1e-5 * k + 1e-6) ++failures;
      }
  });
  EXPECT_EQ(failures.load(), 0) << "seeds " << seeds[0] << ".." << seeds[3];
}

// Several application threads calling sgemm at once (each with its own scratch buffers; the
// pool runs their jobs one at a time).
TEST(CpuGemm, ConcurrentCallers) {
  std::vector<uint32_t> seeds(3);
  for (auto& s : seeds) s = fresh_seed();
  std::atomic<int> failures{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 3; ++t) {
    callers.emplace_back([&, t] {
      const int64_t m = 90 + 13 * t, n = 150 + 40 * t, k = 700;  // k > kc: several K blocks
      std::mt19937 rng(seeds[t]);
      std::uniform_real_distribution<float> dist(-1.f, 1.f);
      std::vector<float> a(m * k), b(n * k), c(m * n);
      for (auto& x : a) x = dist(rng);
      for (auto& x : b) x = dist(rng);
      GemmArgs g;
      g.m = m;
      g.n = n;
      g.k = k;
      g.a = a.data();
      g.lda = k;
      g.b = b.data();
      g.ldb = k;
      g.trans_b = true;
      g.c = c.data();
      g.ldc = n;
      for (int rep = 0; rep < 5; ++rep) {
        if (!sgemm(g).is_ok()) ++failures;
        for (int64_t i = 0; i < m; i += 7)
          for (int64_t j = 0; j < n; ++j) {
            double acc = 0;
            for (int64_t p = 0; p < k; ++p) acc += (double)a[i * k + p] * b[j * k + p];
            if (std::fabs(acc - c[i * n + j]) > 1e-5 * k + 1e-6) ++failures;
          }
      }
    });
  }
  for (auto& th : callers) th.join();
  EXPECT_EQ(failures.load(), 0) << "seeds " << seeds[0] << ", " << seeds[1] << ", " << seeds[2];
}

// Random shapes, flags and strides.
TEST(CpuGemm, RandomizedProducts) {
  std::mt19937 pick(fresh_seed());
  auto dim = [&](int64_t hi) { return static_cast<int64_t>(pick() % (hi + 1)); };
  for (int iter = 0; iter < 60; ++iter) {
    Case cs;
    cs.m = pick() % 4 == 0 ? dim(4) : dim(150);
    cs.n = dim(200);
    cs.k = pick() % 5 == 0 ? dim(900) : dim(120);
    cs.trans_a = pick() & 1;
    cs.trans_b = pick() & 1;
    cs.lda_pad = dim(3);
    cs.ldb_pad = dim(3);
    cs.ldc_pad = dim(3);
    cs.batch = pick() % 4 == 0 ? 1 + dim(4) : 1;
    cs.broadcast_a = cs.batch > 1 && pick() % 3 == 0;
    cs.broadcast_b = cs.batch > 1 && pick() % 3 == 0;
    cs.alpha = pick() % 3 == 0 ? 1.5f : 1.f;
    cs.beta = pick() % 3 == 0 ? 0.25f : 0.f;
    cs.bias = pick() % 3 == 0;
    cs.epilogue = pick() % 3 == 0;
    cs.packed = pick() % 4 == 0;
    run_case(cs, fresh_seed());
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace rlx::cpu
