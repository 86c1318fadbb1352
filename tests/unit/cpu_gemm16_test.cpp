// Tests of the CPU GEMM with 16-bit operands (f16, bf16; src/backends/cpu/kernels/gemm.h):
// every kernel family this CPU runs (the others skip and say why), against a double-precision
// reference computed from the same 16-bit inputs, with a tolerance from the output rounding
// (half an ulp of C's type) plus the f32 accumulation error; fresh random inputs (the seed is
// in the trace), sentinels around every row of C, packed and unpacked B. On a CPU with
// AVX-512 BF16, bf16 x bf16 products run both on the vdpbf16ps kernels and on the widening
// ones (the avx512_bf16 and avx512 instances); on a CPU with AMX-BF16, the amx_bf16 instance
// runs bf16 x bf16 products on the tiles (a packed B then takes their pair layout).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <ostream>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "backends/cpu/kernels/gemm.h"
#include "rlx/dtype.h"

namespace rlx::cpu {
namespace {

uint32_t fresh_seed() {
  static const uint32_t base = std::random_device{}();
  static std::atomic<uint32_t> n{0};
  return base + 104729u * n.fetch_add(1);
}

const char* isa_name(GemmIsa isa) {
  switch (isa) {
    case GemmIsa::portable: return "portable";
    case GemmIsa::avx2: return "avx2";
    case GemmIsa::avx512: return "avx512";
  }
  return "?";
}

// A matrix stored in one GemmType, with its values widened to double for the reference.
struct Mat {
  GemmType type;
  std::vector<float> f;     // f32 storage
  std::vector<uint16_t> h;  // 16-bit storage
  Mat(GemmType t, size_t n) : type(t) {
    if (t == GemmType::f32) f.resize(n); else h.resize(n);
  }
  size_t size() const { return type == GemmType::f32 ? f.size() : h.size(); }
  void* data() { return type == GemmType::f32 ? static_cast<void*>(f.data()) : static_cast<void*>(h.data()); }
  // Stores v rounded to the type (the project's converters).
  void set(size_t i, float v) {
    if (type == GemmType::f32) f[i] = v;
    else h[i] = type == GemmType::f16 ? f32_to_f16(v) : f32_to_bf16(v);
  }
  double get(size_t i) const {
    if (type == GemmType::f32) return f[i];
    return type == GemmType::f16 ? f16_to_f32(h[i]) : bf16_to_f32(h[i]);
  }
  // Raw bits, for sentinels.
  uint32_t bits(size_t i) const {
    if (type != GemmType::f32) return h[i];
    uint32_t u;
    std::memcpy(&u, &f[i], 4);
    return u;
  }
  void set_bits(size_t i, uint32_t u) {
    if (type != GemmType::f32) h[i] = static_cast<uint16_t>(u);
    else std::memcpy(&f[i], &u, 4);
  }
};

uint32_t sentinel_bits(GemmType t) { return t == GemmType::f32 ? 0xC6DEADBEu : 0xBEEFu; }
uint32_t nan_bits(GemmType t) { return t == GemmType::f32 ? 0x7FC00000u : (t == GemmType::f16 ? 0x7E00u : 0x7FC0u); }

// Half an ulp of C's type at magnitude x (subnormals included).
double half_ulp(double x, GemmType t) {
  const int mant = t == GemmType::f32 ? 23 : (t == GemmType::f16 ? 10 : 7);
  const int emin = t == GemmType::f32 ? -126 : (t == GemmType::f16 ? -14 : -126);
  int e = 0;
  std::frexp(std::max(x, 1e-300), &e);  // x in [2^(e-1), 2^e)
  return std::ldexp(0.5, std::max(e - 1, emin) - mant);
}

struct Types {
  GemmType a, b, c;
  std::string str() const {
    return std::string("a=") + gemm_type_name(a) + " b=" + gemm_type_name(b) + " c=" + gemm_type_name(c);
  }
};

struct Case {
  int64_t m = 1, n = 1, k = 1;
  bool trans_a = false, trans_b = false;
  int64_t ldc_pad = 0;
  int64_t batch = 1;
  bool broadcast_a = false;
  float alpha = 1.f, beta = 0.f;
  bool bias = false;
  bool epilogue = false;
  bool packed = false;
  float scale_a = 1.f, scale_b = 1.f;  // inputs uniform in (-scale, scale)
  std::string str() const {
    return "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) + " ta=" +
           std::to_string(trans_a) + " tb=" + std::to_string(trans_b) + " batch=" + std::to_string(batch) +
           " alpha=" + std::to_string(alpha) + " beta=" + std::to_string(beta) + " bias=" + std::to_string(bias) +
           " epilogue=" + std::to_string(epilogue) + " packed=" + std::to_string(packed) +
           (scale_a != 1.f || scale_b != 1.f ? " scale_a=" + std::to_string(std::log2(scale_a)) + "(log2) scale_b=" +
                                                   std::to_string(std::log2(scale_b)) + "(log2)"
                                             : std::string());
  }
};

// The epilogue under test: counts calls per element and flips the sign bit of each value
// (exact in every type), so the check also proves it ran once, after the value was stored.
struct SignFlip {
  char* base;
  int64_t esize, stride_c, m, n;
  std::vector<std::atomic<int>> counts;
  std::atomic<bool> bad{false};
  SignFlip(void* b, int64_t es, int64_t sc, int64_t m_, int64_t n_, int64_t batch)
      : base(static_cast<char*>(b)), esize(es), stride_c(sc), m(m_), n(n_), counts(static_cast<size_t>(batch * m_ * n_)) {}
  static void fn(void* ctx, void* c, int64_t ldc, int64_t m0, int64_t n0, int64_t mlen, int64_t nlen) {
    auto* s = static_cast<SignFlip*>(ctx);
    const int64_t off = (static_cast<char*>(c) - s->base) / s->esize - (m0 * ldc + n0);
    const int64_t item = s->stride_c ? off / s->stride_c : 0;
    if (off != item * s->stride_c || m0 < 0 || n0 < 0 || m0 + mlen > s->m || n0 + nlen > s->n) {
      s->bad = true;
      return;
    }
    for (int64_t i = 0; i < mlen; ++i)
      for (int64_t j = 0; j < nlen; ++j) {
        s->counts[static_cast<size_t>((item * s->m + m0 + i) * s->n + n0 + j)].fetch_add(1);
        char* e = static_cast<char*>(c) + (i * ldc + j) * s->esize;
        if (s->esize == 4) {
          float v;
          std::memcpy(&v, e, 4);
          v = -v;
          std::memcpy(e, &v, 4);
        } else {
          uint16_t v;
          std::memcpy(&v, e, 2);
          v ^= 0x8000u;
          std::memcpy(e, &v, 2);
        }
      }
  }
};

// Set while the amx_bf16 path is selected: bf16 x bf16 products then run on the AMX tiles,
// with B pre-packed in their pair layout (pack_b_for) or packed by the call.
bool g_amx_path = false;

void run_case(const Types& ty, const Case& cs, uint32_t seed) {
  SCOPED_TRACE("seed=" + std::to_string(seed) + " " + ty.str() + " " + cs.str() + " kernel=" +
               gemm_kernel_name(ty.a, ty.b, ty.c));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  const int64_t m = cs.m, n = cs.n, k = cs.k;
  const int64_t a_rows = cs.trans_a ? k : m, a_cols = cs.trans_a ? m : k;
  const int64_t b_rows = cs.trans_b ? n : k, b_cols = cs.trans_b ? k : n;
  const int64_t lda = std::max<int64_t>(1, a_cols + 1), ldb = std::max<int64_t>(1, b_cols + 3);
  const int64_t ldc = std::max<int64_t>(1, n + cs.ldc_pad);
  const int64_t sa = cs.broadcast_a ? 0 : a_rows * lda + 5;
  const int64_t sb = cs.packed ? 0 : b_rows * ldb + 3;
  const int64_t sc = m * ldc + 7;
  const int64_t pre = 19;

  Mat a(ty.a, static_cast<size_t>(std::max<int64_t>(1, (cs.batch - 1) * sa + a_rows * lda)));
  Mat b(ty.b, static_cast<size_t>(std::max<int64_t>(1, (cs.batch - 1) * sb + b_rows * ldb)));
  for (size_t i = 0; i < a.size(); ++i) a.set(i, cs.scale_a * dist(rng));
  for (size_t i = 0; i < b.size(); ++i) b.set(i, cs.scale_b * dist(rng));
  std::vector<float> bias(static_cast<size_t>(std::max<int64_t>(1, n)));
  for (float& x : bias) x = dist(rng);
  Mat c(ty.c, static_cast<size_t>(pre + cs.batch * sc + 23));
  for (size_t i = 0; i < c.size(); ++i) c.set_bits(i, sentinel_bits(ty.c));
  for (int64_t it = 0; it < cs.batch; ++it)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const size_t x = static_cast<size_t>(pre + it * sc + i * ldc + j);
        if (cs.beta == 0.f) c.set_bits(x, nan_bits(ty.c));  // beta == 0 must not read C
        else c.set(x, dist(rng));
      }
  const Mat c_in = c;

  GemmArgs g;
  g.a_type = ty.a;
  g.b_type = ty.b;
  g.c_type = ty.c;
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
  void* c0 = static_cast<char*>(c.data()) + pre * static_cast<int64_t>(gemm_type_size(ty.c));
  g.c = c0;
  g.ldc = ldc;
  g.batch_stride_c = sc;
  g.batch = cs.batch;
  g.alpha = cs.alpha;
  g.beta = cs.beta;
  g.bias = cs.bias ? bias.data() : nullptr;
  SignFlip flip(c0, static_cast<int64_t>(gemm_type_size(ty.c)), sc, m, n, cs.batch);
  if (cs.epilogue) g.epilogue = {&SignFlip::fn, &flip};
  if (cs.packed) {
    PackedB pb = pack_b_for(ty.a, b.data(), ty.b, ldb, cs.trans_b, k, n);
    ASSERT_TRUE(pb.valid());
    ASSERT_EQ(pb.type(), ty.b);
    // (a packed B fills a quarter of a tile's 32 k-values from k = 8 on)
    ASSERT_EQ(pb.amx_pairs(), g_amx_path && ty.a == ty.b && ty.a != GemmType::f32 && k >= 8 && n > 0)
        << "the AMX path is selected exactly for bf16 x bf16 and f16 x f16 filling a quarter of a tile";
    g.b = nullptr;  // must be ignored
    const Status s = sgemm_packed(g, pb);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
  } else {
    const Status s = sgemm(g);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
  }

  const double eps32 = std::ldexp(1.0, -24);
  // The vdpbf16ps kernels: a product of two bf16 values (8-bit significands) is exact in f32,
  // and the instruction adds the two products of a pair into the f32 lane one after the
  // other, each addition rounded to nearest even: as many roundings as the FMA chain of the
  // widening kernels, so the same f32 accumulation bound holds. What differs is that it treats
  // denormal inputs as zero (a product with a factor below 2^-126 is lost entirely: `flushed`)
  // and flushes a denormal sum to zero (less than 2^-126 lost per addition, k additions).
  const std::string kernel = gemm_kernel_name(ty.a, ty.b, ty.c);
  const bool dot = kernel.find("vdpbf16ps") != std::string::npos || kernel.find("amx-bf16") != std::string::npos;
  const double tiny = std::ldexp(1.0, -126);
  int64_t failures = 0;
  for (int64_t it = 0; it < cs.batch; ++it)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0, mag = 0, flushed = 0;
        for (int64_t p = 0; p < k; ++p) {
          const double av = a.get(static_cast<size_t>(it * sa + (cs.trans_a ? p * lda + i : i * lda + p)));
          const double bv = b.get(static_cast<size_t>(it * sb + (cs.trans_b ? j * ldb + p : p * ldb + j)));
          acc += av * bv;
          mag += std::fabs(av * bv);
          if (std::fabs(av) < tiny || std::fabs(bv) < tiny) flushed += std::fabs(av * bv);
        }
        const size_t x = static_cast<size_t>(pre + it * sc + i * ldc + j);
        double want = cs.alpha * acc;
        mag *= std::fabs(cs.alpha);
        if (cs.beta != 0.f) {
          want += cs.beta * c_in.get(x);
          mag += std::fabs(cs.beta * c_in.get(x));
        }
        if (cs.bias) {
          want += bias[static_cast<size_t>(j)];
          mag += std::fabs(bias[static_cast<size_t>(j)]);
        }
        // f32 accumulation (k products and a few adds, each at most one f32 rounding of a
        // partial sum bounded by mag), then one rounding to C's type
        const double acc_err =
            (k + 4) * eps32 * mag + (dot ? std::fabs(cs.alpha) * (flushed + k * tiny) : 0.0);
        const double tol = half_ulp(std::fabs(want) + acc_err, ty.c) + acc_err;
        if (cs.epilogue) want = -want;
        const double got = c.get(x);
        if (!(std::fabs(got - want) <= tol) && ++failures <= 5)
          ADD_FAILURE() << "C[" << it << "][" << i << "][" << j << "] = " << got << ", want " << want << " (tol " << tol
                        << ")";
      }
  EXPECT_EQ(failures, 0);

  int64_t clobbered = 0;
  for (size_t x = 0; x < c.size(); ++x) {
    const int64_t rel = static_cast<int64_t>(x) - pre;
    bool inside = false;
    if (rel >= 0 && rel < cs.batch * sc) {
      const int64_t r = rel % sc;
      inside = r < m * ldc && r % ldc < n;
    }
    if (!inside && c.bits(x) != sentinel_bits(ty.c) && ++clobbered <= 5)
      ADD_FAILURE() << "sentinel overwritten at offset " << rel;
  }
  EXPECT_EQ(clobbered, 0);
  if (cs.epilogue) {
    EXPECT_FALSE(flip.bad) << "epilogue got a block outside C";
    int64_t wrong = 0;
    for (size_t x = 0; x < flip.counts.size(); ++x)
      if (flip.counts[x].load() != 1 && ++wrong <= 5)
        ADD_FAILURE() << "epilogue ran " << flip.counts[x].load() << " times on element " << x;
    EXPECT_EQ(wrong, 0);
  }
}

// The type mixes under test: all f16, all bf16, and mixes that exercise each operand's
// conversion alone.
const Types kTypes[] = {{GemmType::f16, GemmType::f16, GemmType::f16},
                        {GemmType::bf16, GemmType::bf16, GemmType::bf16},
                        {GemmType::f32, GemmType::bf16, GemmType::f32},
                        {GemmType::f16, GemmType::f32, GemmType::bf16},
                        {GemmType::bf16, GemmType::f16, GemmType::f32}};

// The kernel paths under test: each family, and on avx512 the bf16-pair kernels on
// (avx512_bf16: bf16 x bf16 runs on vdpbf16ps) and off (avx512: B widened on load).
enum class Path { amx_bf16, avx512_bf16, avx512, avx2, portable };

GemmIsa path_isa(Path p) {
  switch (p) {
    case Path::amx_bf16:
    case Path::avx512_bf16:
    case Path::avx512: return GemmIsa::avx512;
    case Path::avx2: return GemmIsa::avx2;
    case Path::portable: return GemmIsa::portable;
  }
  return GemmIsa::portable;
}

const char* path_name(Path p) {
  return p == Path::amx_bf16 ? "amx_bf16" : p == Path::avx512_bf16 ? "avx512_bf16" : isa_name(path_isa(p));
}
void PrintTo(Path p, std::ostream* os) { *os << path_name(p); }

// Selects a path for one test and restores the defaults after it; skips, saying why, where
// this CPU cannot run it.
class PathGuard {
 public:
  // Empty if the path was selected, else why not.
  std::string select(Path p) {
    const GemmIsa isa = path_isa(p);
    if (!set_gemm_isa(isa))
      return std::string("this CPU cannot run the ") + isa_name(isa) + " GEMM kernels (best here: " + gemm_kernel_name() + ")";
    if (p == Path::amx_bf16) {
      if (!set_gemm_bf16_dot(true) || !set_gemm_amx(true))
        return "this CPU lacks AMX-BF16 (cpuid amx-tile and amx-bf16, with AVX-512 BF16), or Linux did not grant "
               "the process the tile state (arch_prctl ARCH_REQ_XCOMP_PERM), so the AMX kernels cannot run";
      g_amx_path = true;
      return "";
    }
    set_gemm_amx(false);
    if (p != Path::avx512_bf16) {
      set_gemm_bf16_dot(false);
      return "";
    }
    if (!set_gemm_bf16_dot(true))
      return "this CPU lacks AVX-512 BF16 (cpuid avx512_bf16), so the vdpbf16ps kernels cannot run; bf16 x bf16 "
             "products here run on '" + gemm_kernel_name(GemmType::bf16, GemmType::bf16, GemmType::bf16) + "'";
    return "";
  }
  ~PathGuard() {
    set_gemm_isa(saved_);
    set_gemm_bf16_dot(true);  // the defaults; refused (and moot) where the CPU lacks them
    set_gemm_amx(true);
    g_amx_path = false;
  }

 private:
  GemmIsa saved_ = gemm_isa();
};

class Gemm16 : public ::testing::TestWithParam<Path> {
 protected:
  void SetUp() override {
    guard_ = std::make_unique<PathGuard>();
    const std::string why = guard_->select(GetParam());
    if (!why.empty()) GTEST_SKIP() << why;
  }
  void TearDown() override { guard_.reset(); }
  std::unique_ptr<PathGuard> guard_;
};

// Odd sizes in every dimension (micro-kernel row and column edges), each transpose, alpha,
// beta, bias, packed and unpacked B.
TEST_P(Gemm16, OddSizes) {
  const int64_t sizes[] = {1, 7, 33, 100, 257};
  std::mt19937 pick(fresh_seed());
  for (const Types& ty : kTypes)
    for (int64_t m : sizes)
      for (int64_t n : sizes) {
        Case cs;
        cs.m = m;
        cs.n = n;
        cs.k = sizes[pick() % 5];
        cs.trans_a = pick() & 1;
        cs.trans_b = pick() & 1;
        cs.packed = pick() & 1;
        cs.bias = pick() & 1;
        cs.beta = (pick() & 1) ? 0.f : 0.5f;
        cs.alpha = (pick() & 1) ? 1.f : -1.5f;
        cs.ldc_pad = pick() % 3;
        run_case(ty, cs, fresh_seed());
        if (HasFailure()) return;
      }
}

// Shapes that cross the cache blocks (several K blocks accumulated in the f32 scratch of a
// 16-bit C, row chunks of that scratch, column tiles, in-place and packed B), with the
// epilogue.
TEST_P(Gemm16, BlockedShapesWithEpilogue) {
  struct S {
    int64_t m, n, k;
  };
  const S shapes[] = {{1, 1100, 900}, {129, 385, 391}, {300, 70, 1000}, {200, 300, 40}, {3, 4096, 64}};
  int variant = 0;
  for (const Types& ty : kTypes)
    for (const S& s : shapes) {
      Case cs;
      cs.m = s.m;
      cs.n = s.n;
      cs.k = s.k;
      cs.trans_a = variant & 1;
      cs.trans_b = variant & 2;
      cs.packed = variant % 3 == 0;
      cs.beta = variant % 4 == 1 ? -0.75f : 0.f;
      cs.bias = variant % 2 == 0;
      cs.epilogue = true;
      ++variant;
      run_case(ty, cs, fresh_seed());
      if (HasFailure()) return;
    }
}

TEST_P(Gemm16, BatchedAndBroadcast) {
  for (const Types& ty : kTypes)
    for (int variant = 0; variant < 4; ++variant) {
      Case cs;
      cs.m = 17;
      cs.n = 40;
      cs.k = 23;
      cs.batch = 3 + variant;
      cs.broadcast_a = variant == 1;
      cs.packed = variant >= 2;  // a packed B is shared by every item
      cs.trans_a = variant == 3;
      cs.trans_b = variant == 2;
      cs.bias = variant % 2 == 1;
      cs.beta = variant == 0 ? 1.f : 0.f;
      cs.epilogue = variant == 3;
      run_case(ty, cs, fresh_seed());
      if (HasFailure()) return;
    }
}

// k == 0 and alpha == 0: C = beta*C + bias, rounded to C's type.
TEST_P(Gemm16, EmptyInnerDimensionAndZeroAlpha) {
  for (const Types& ty : kTypes)
    for (float beta : {0.f, 2.f}) {
      Case cs;
      cs.m = 5;
      cs.n = 9;
      cs.k = 0;
      cs.beta = beta;
      cs.bias = true;
      cs.epilogue = true;
      run_case(ty, cs, fresh_seed());
      cs.k = 11;
      cs.alpha = 0.f;
      run_case(ty, cs, fresh_seed());
    }
}

INSTANTIATE_TEST_SUITE_P(Isa, Gemm16,
                         ::testing::Values(Path::amx_bf16, Path::avx512_bf16, Path::avx512, Path::avx2, Path::portable),
                         [](const auto& info) { return std::string(path_name(info.param)); });

// The rounding of a 16-bit C is exactly the scalar converters' (dtype.h) on every path:
// C = 1 x B with k = 1 stores each f32 of B rounded. B holds ties to even and odd, values
// just off a tie, denormals, the largest finite values (which round to infinity), infinities,
// quiet NaNs with payloads and random bits; the row length leaves a masked tail.
TEST_P(Gemm16, RoundingOfCIsTheScalarConverters) {
  std::vector<uint32_t> bits = {0x3F808000u, 0x3F818000u, 0x3F808001u, 0x3F807FFFu, 0x00000001u, 0x00008000u,
                                0x007FFFFFu, 0x80018000u, 0x7F7FFFFFu, 0xFF7FFFFFu, 0x7F7F8000u, 0x7F800000u,
                                0xFF800000u, 0x7FC00001u, 0xFFC12345u, 0x477FF000u, 0x477FE000u, 0x38800000u,
                                0x33800000u, 0x387FC000u};
  std::mt19937 rng(fresh_seed());
  while (bits.size() < 203) {
    uint32_t u = rng();
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu) && !(u & 0x00400000u)) u |= 0x00400000u;  // no sNaN
    if (u == 0x80000000u) u = 0;  // 1 x -0 + 0 is +0
    bits.push_back(u);
  }
  const int64_t n = static_cast<int64_t>(bits.size());
  std::vector<float> b(bits.size());
  std::memcpy(b.data(), bits.data(), bits.size() * 4);
  for (GemmType t : {GemmType::f16, GemmType::bf16}) {
    const float one = 1.f;
    std::vector<uint16_t> c(static_cast<size_t>(n));
    GemmArgs g;
    g.a_type = g.b_type = GemmType::f32;
    g.c_type = t;
    g.m = 1;
    g.n = n;
    g.k = 1;
    g.a = &one;
    g.lda = 1;
    g.b = b.data();
    g.ldb = n;
    g.c = c.data();
    g.ldc = n;
    ASSERT_TRUE(sgemm(g).is_ok()) << gemm_type_name(t);
    for (int64_t j = 0; j < n; ++j) {
      const uint16_t want = t == GemmType::f16 ? f32_to_f16(b[j]) : f32_to_bf16(b[j]);
      const uint16_t got = c[static_cast<size_t>(j)];
      // any NaN is a NaN: f16's hardware conversion keeps another payload than the scalar one
      const bool both_nan = std::isnan(b[j]) && (t == GemmType::f16 ? std::isnan(f16_to_f32(got)) : std::isnan(bf16_to_f32(got)));
      EXPECT_TRUE(got == want || both_nan) << gemm_type_name(t) << " of 0x" << std::hex << bits[j] << ": 0x" << got
                                           << ", want 0x" << want;
    }
  }
}

// The vdpbf16ps kernels (A and B both bf16, k-values in pairs) on the shapes that stress
// them: M = 1 and 2 (wide kernels), M, N, K off every tile size, K = 1, 2 and odd K (a zero
// pad in the last pair), K blocks of odd length (k = 777: three blocks of 259), masked
// 128-column kernels, in-place and packed B, with bias, beta and the epilogue, for each C type.
class Gemm16Bf16Dot : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = guard_.select(Path::avx512_bf16);
    if (!why.empty()) GTEST_SKIP() << why;
  }
  PathGuard guard_;
};

// m x n x k of a product.
struct Shape {
  int64_t m, n, k;
};

// Runs every shape with A and B of each type in `ab` and C of each 16-bit and f32 type, in
// variants that cycle through transposes, packed B, beta (0, 1 and 0.5), alpha, bias, the
// epilogue, C's row padding and batches of 3 sharing B. `kernel`, if not empty, is a string the
// kernel name must contain.
void run_awkward_shapes(std::span<const Shape> shapes, std::span<const GemmType> ab, const char* kernel) {
  const GemmType cts[] = {GemmType::bf16, GemmType::f32, GemmType::f16};
  int variant = 0;
  for (const Shape& s : shapes)
    for (GemmType ct : cts)
      for (GemmType t : ab) {
        const Types ty{t, t, ct};
        if (*kernel)
          ASSERT_NE(gemm_kernel_name(ty.a, ty.b, ty.c).find(kernel), std::string::npos)
              << gemm_kernel_name(ty.a, ty.b, ty.c);
        Case cs;
        cs.m = s.m;
        cs.n = s.n;
        cs.k = s.k;
        cs.trans_a = variant & 1;
        cs.trans_b = (variant / 2) & 1;
        cs.packed = (variant / 4) % 2 == 1 || variant % 3 == 0;
        cs.beta = variant % 4 == 1 ? 1.f : variant % 4 == 3 ? 0.5f : 0.f;
        cs.alpha = variant % 5 == 2 ? -1.5f : 1.f;
        cs.bias = variant % 2 == 0;
        cs.epilogue = variant % 3 != 2;
        cs.ldc_pad = variant % 3;
        cs.batch = variant % 7 == 3 ? 3 : 1;
        ++variant;
        run_case(ty, cs, fresh_seed());
        if (::testing::Test::HasFailure()) return;
      }
}

TEST_F(Gemm16Bf16Dot, AwkwardShapesWithEpilogues) {
  const Shape shapes[] = {{1, 1, 1},    {1, 129, 2},  {1, 300, 777}, {2, 161, 33},  {3, 97, 5},   {4, 31, 3},
                          {13, 17, 99}, {14, 32, 64}, {15, 33, 65},  {29, 200, 385}, {57, 45, 777}, {200, 130, 127}};
  const GemmType ab[] = {GemmType::bf16};
  run_awkward_shapes(shapes, ab, "vdpbf16ps");
}

// Products with few outputs from long rows, A row-major and B transposed (a convolution's
// weight gradient per image), run on the row dots: bf16 pairs on vdpbf16ps, f16 and mixed
// operands as f32 rows; against the reference with beta, alpha, bias, the epilogue, C's types
// and padding, and batches (A shared by the items, or not).
// Products with few outputs from long k-contiguous rows, a B per item, take the row dots on
// every path that has them, the AMX tiles' included (those shapes would leave a tile mostly
// empty); bf16 pairs on vdpbf16ps, other types widened row by row.
void run_row_dot_shapes() {
  const Shape shapes[] = {{1, 1, 64}, {8, 9, 676}, {2, 16, 300}, {6, 20, 500}, {4, 6, 64}, {3, 7, 65}, {2, 1, 20}, {5, 13, 300}};
  const Types types[] = {{GemmType::bf16, GemmType::bf16, GemmType::f32}, {GemmType::bf16, GemmType::bf16, GemmType::bf16},
                         {GemmType::f16, GemmType::f16, GemmType::f32}, {GemmType::f32, GemmType::bf16, GemmType::f16}};
  int variant = 0;
  for (const Shape& s : shapes)
    for (const Types& ty : types) {
      Case cs;
      cs.m = s.m;
      cs.n = s.n;
      cs.k = s.k;
      cs.trans_b = true;
      cs.beta = variant % 4 == 1 ? 1.f : variant % 4 == 3 ? 0.5f : 0.f;
      cs.alpha = variant % 5 == 2 ? -1.5f : 1.f;
      cs.bias = variant % 2 == 0;
      cs.epilogue = variant % 3 != 2;
      cs.ldc_pad = variant % 3;
      cs.batch = variant % 3 == 1 ? 4 : 2;  // (a single product's B could be packed: blocked)
      cs.broadcast_a = variant % 6 == 1;
      ++variant;
      GemmArgs g;
      g.m = cs.m;
      g.n = cs.n;
      g.k = cs.k;
      g.trans_b = true;
      g.a_type = ty.a;
      g.b_type = ty.b;
      g.c_type = ty.c;
      g.batch = cs.batch;
      g.batch_stride_b = 1;
      const std::string how = describe_sgemm(g, false);
      EXPECT_NE(how.find("row dots"), std::string::npos) << cs.str() << ": " << how;
      run_case(ty, cs, fresh_seed());
      if (::testing::Test::HasFailure()) return;
    }
}

TEST_F(Gemm16Bf16Dot, RowDotsForFewOutputsOfLongRows) { run_row_dot_shapes(); }

// The AMX kernels (B packed in pairs, before or by the call; bf16, and f16 as two bf16 parts)
// on the shapes that stress them: rows off and on the
// 16-row slices and 32-row blocks (whole blocks load and store C in the tiles, edge blocks go
// through scratch), columns off the 16-column slices, K off the 32-value steps and in several
// K blocks (accumulated in the tiles from C), beta 1 (C loaded into the tiles), alpha and beta
// that force the scratch path, for each C type, and batches sharing the packed B.
class Gemm16Amx : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = guard_.select(Path::amx_bf16);
    if (!why.empty()) GTEST_SKIP() << why;
  }
  PathGuard guard_;
};

TEST_F(Gemm16Amx, AwkwardShapesWithEpilogues) {
  const Shape shapes[] = {{1, 1, 1},     {1, 129, 2},    {16, 16, 32},   {32, 32, 32},  {17, 48, 31},
                          {31, 33, 65},  {64, 64, 384},  {96, 100, 777}, {45, 17, 1000}, {160, 96, 64},
                          {200, 130, 127}, {33, 300, 385}};
  const GemmType ab[] = {GemmType::bf16, GemmType::f16};  // f16: hi and lo bf16 parts
  run_awkward_shapes(shapes, ab, "amx-bf16");
}

// A B packed in AMX pairs is refused, with the reason, once the product cannot run on the
// tiles (AMX switched off, or an A that is not bf16); packed again, it runs.
TEST_F(Gemm16Amx, RowDotsForFewOutputsOfLongRows) { run_row_dot_shapes(); }

// The tiles take a product only when it fills at least a quarter of their 16 rows x 32
// k-values (fewer rows or a shorter k ran faster on vdpbf16ps); both sides give results within
// the bound of run_case.
TEST_F(Gemm16Amx, TilesOnlyForProductsFillingAQuarterOfATile) {
  struct Want {
    int64_t m, n, k;
    bool tiles;
  };
  const Want wants[] = {{8, 676, 9, false}, {8, 676, 12, false}, {8, 100, 24, true}, {1, 300, 384, false},
                        {3, 200, 100, false}, {4, 200, 64, true}, {72, 121, 8, false}, {72, 121, 16, true}};
  const Types ty{GemmType::bf16, GemmType::bf16, GemmType::f32};
  for (const Want& w : wants) {
    GemmArgs g;
    g.a_type = g.b_type = GemmType::bf16;
    g.m = w.m;
    g.n = w.n;
    g.k = w.k;
    const std::string how = describe_sgemm(g, false);
    EXPECT_EQ(how.find("tile blocks") != std::string::npos, w.tiles) << w.m << " x " << w.n << " x " << w.k << ": " << how;
    Case cs;
    cs.m = w.m;
    cs.n = w.n;
    cs.k = w.k;
    cs.bias = true;
    run_case(ty, cs, fresh_seed());
  }
}

TEST_F(Gemm16Amx, PairsAreRefusedWhereTheTilesCannotRun) {
  const int64_t k = 40, n = 20, m = 3;
  std::vector<uint16_t> a(static_cast<size_t>(m * k), 0x3F80u), b(static_cast<size_t>(k * n), 0x3F80u);
  std::vector<float> c(static_cast<size_t>(m * n));
  PackedB pb = pack_b_for(GemmType::bf16, b.data(), GemmType::bf16, n, false, k, n);
  ASSERT_TRUE(pb.amx_pairs());
  GemmArgs g;
  g.a_type = g.b_type = GemmType::bf16;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = a.data();
  g.lda = k;
  g.c = c.data();
  g.ldc = n;
  ASSERT_TRUE(sgemm_packed(g, pb).is_ok());
  EXPECT_EQ(c[7], 40.f);
  EXPECT_NE(describe_sgemm(g, true).find("AMX"), std::string::npos) << describe_sgemm(g, true);
  ASSERT_TRUE(set_gemm_amx(false));
  EXPECT_FALSE(gemm_amx());
  const Status s = sgemm_packed(g, pb);
  EXPECT_EQ(s.code(), ErrorCode::invalid_argument);
  EXPECT_NE(s.message().find("AMX"), std::string::npos) << s.to_string();
  PackedB again = pack_b_for(GemmType::bf16, b.data(), GemmType::bf16, n, false, k, n);
  EXPECT_FALSE(again.amx_pairs());
  c.assign(c.size(), 0.f);
  ASSERT_TRUE(sgemm_packed(g, again).is_ok());
  EXPECT_EQ(c[7], 40.f);
  ASSERT_TRUE(set_gemm_amx(true));
  std::vector<float> a32(static_cast<size_t>(m * k), 1.f);
  g.a_type = GemmType::f32;
  g.a = a32.data();
  EXPECT_EQ(sgemm_packed(g, pb).code(), ErrorCode::invalid_argument);
}

// Tiny values: products in f32's denormal range (their sums are flushed to zero), and
// denormal bf16 inputs (treated as zero); the results stay within the bound that says so.
TEST_F(Gemm16Bf16Dot, DenormalProductsAndInputs) {
  const Types ty{GemmType::bf16, GemmType::bf16, GemmType::f32};
  for (const float sa : {std::ldexp(1.f, -63), std::ldexp(1.f, -130)}) {
    Case cs;
    cs.m = 5;
    cs.n = 40;
    cs.k = 37;
    cs.scale_a = sa;
    cs.scale_b = std::ldexp(1.f, -63);
    cs.bias = sa < std::ldexp(1.f, -100);  // a bias lifts C out of the denormal range
    run_case(ty, cs, fresh_seed());
  }
}

// The report names the vdpbf16ps kernels only for A and B both bf16, and only while they are
// on; switching them off gives the widening kernels back.
TEST_F(Gemm16Bf16Dot, ReportAndSwitch) {
  EXPECT_TRUE(gemm_bf16_dot());
  EXPECT_EQ(gemm_kernel_name(GemmType::bf16, GemmType::bf16, GemmType::bf16), "avx512 14x32 vdpbf16ps bf16");
  EXPECT_EQ(gemm_kernel_name(GemmType::bf16, GemmType::bf16, GemmType::f32),
            "avx512 14x32 vdpbf16ps a=bf16 b=bf16 c=f32");
  EXPECT_EQ(gemm_kernel_name(GemmType::f32, GemmType::bf16, GemmType::bf16), "avx512 14x32 a=f32 b=bf16 c=bf16");
  EXPECT_EQ(gemm_kernel_name(GemmType::f32, GemmType::f32, GemmType::f32), "avx512 14x32");
  ASSERT_TRUE(set_gemm_bf16_dot(false));
  EXPECT_FALSE(gemm_bf16_dot());
  EXPECT_EQ(gemm_kernel_name(GemmType::bf16, GemmType::bf16, GemmType::bf16), "avx512 14x32 bf16");
  ASSERT_TRUE(set_gemm_bf16_dot(true));
  ASSERT_TRUE(set_gemm_isa(GemmIsa::avx2));  // other families have no bf16-pair kernels
  EXPECT_FALSE(gemm_bf16_dot());
  EXPECT_EQ(gemm_kernel_name(GemmType::bf16, GemmType::bf16, GemmType::bf16).find("vdpbf16ps"), std::string::npos);
}

// A NaN in A reaches every element of its row of C, in both 16-bit types (the rounding
// keeps NaN a NaN, never an infinity or a number).
TEST(Gemm16Special, NanPropagatesThroughRounding) {
  for (GemmType t : {GemmType::f16, GemmType::bf16}) {
    const int64_t m = 3, n = 37, k = 20;
    std::vector<uint16_t> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n)), c(static_cast<size_t>(m * n));
    std::mt19937 rng(fresh_seed());
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    auto round = [t](float v) { return t == GemmType::f16 ? f32_to_f16(v) : f32_to_bf16(v); };
    for (auto& x : a) x = round(dist(rng));
    for (auto& x : b) x = round(dist(rng));
    a[1 * k + 4] = static_cast<uint16_t>(nan_bits(t));
    GemmArgs g;
    g.a_type = g.b_type = g.c_type = t;
    g.m = m;
    g.n = n;
    g.k = k;
    g.a = a.data();
    g.lda = k;
    g.b = b.data();
    g.ldb = n;
    g.c = c.data();
    g.ldc = n;
    ASSERT_TRUE(sgemm(g).is_ok());
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const float v = t == GemmType::f16 ? f16_to_f32(c[static_cast<size_t>(i * n + j)]) : bf16_to_f32(c[static_cast<size_t>(i * n + j)]);
        EXPECT_EQ(std::isnan(v), i == 1) << gemm_type_name(t) << " C[" << i << "][" << j << "] = " << v;
      }
  }
}

// f32 operands read as f16 (a_as_f16 / b_as_f16: what the CPU runs for an f16 cast or round
// trip that only feeds a product) give the product of the converted matrices bit for bit: on
// the AMX tiles, which round into their pairs (rows from 32), and off them (fewer rows, or AMX
// switched off), which round the packed f32 panels, for each kernel family this CPU has. The
// values cover rounding, f16's subnormals and overflow to infinity; A and B plain and
// transposed, one or both read as f16, B packed or not (wide and narrow products).
TEST(Gemm16Special, F32OperandsReadAsF16EqualTheConvertedProduct) {
  struct Shape3 {
    int64_t m, n, k;
  };
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE(seed);
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  auto value = [&] {
    const uint32_t r = rng() % 64;
    if (r == 0) return dist(rng) * 1e5f;    // beyond f16's range: +-inf
    if (r == 1) return dist(rng) * 1e-6f;   // f16 subnormals
    return dist(rng) * 3.f;                 // rounded to 11 significant bits
  };
  const GemmIsa best = gemm_isa();
  for (GemmIsa isa : {GemmIsa::avx512, GemmIsa::avx2, GemmIsa::portable})
  for (bool amx : {true, false}) {
    if (!set_gemm_isa(isa)) continue;
    set_gemm_amx(amx);
    for (Shape3 sh : {Shape3{5, 40, 70}, Shape3{64, 48, 100}, Shape3{100, 33, 129}, Shape3{200, 300, 400}})
      for (int trans = 0; trans < 12; ++trans) {
        const bool ta = trans & 1, tb = trans & 2;
        const int which = trans / 4;  // both read as f16, only A, only B
        SCOPED_TRACE(::testing::Message() << "m " << sh.m << " n " << sh.n << " k " << sh.k << " trans_a " << ta
                                          << " trans_b " << tb << " as f16 " << (which == 0 ? "a, b" : which == 1 ? "a" : "b")
                                          << " " << gemm_kernel_name() << (amx && gemm_amx() ? "" : ", AMX off"));
        std::vector<float> a(static_cast<size_t>(sh.m * sh.k)), b(static_cast<size_t>(sh.k * sh.n));
        for (float& x : a) x = value();
        for (float& x : b) x = value();
        std::vector<uint16_t> a16(a.size()), b16(b.size());
        for (size_t i = 0; i < a.size(); ++i) a16[i] = f32_to_f16(a[i]);
        for (size_t i = 0; i < b.size(); ++i) b16[i] = f32_to_f16(b[i]);
        std::vector<float> got(static_cast<size_t>(sh.m * sh.n)), want(got.size());
        GemmArgs g;
        g.m = sh.m;
        g.n = sh.n;
        g.k = sh.k;
        g.trans_a = ta;
        g.lda = ta ? sh.m : sh.k;
        g.trans_b = tb;
        g.ldb = tb ? sh.k : sh.n;
        g.ldc = sh.n;
        // both read as f16: the f16 product (on the tiles where they run it); one: the f32
        // product of the converted matrices (no f16 x f32 product runs on the tiles)
        std::vector<float> ar(a.size()), br(b.size());
        for (size_t i = 0; i < a.size(); ++i) ar[i] = f16_to_f32(a16[i]);
        for (size_t i = 0; i < b.size(); ++i) br[i] = f16_to_f32(b16[i]);
        g.a_type = g.b_type = which == 0 ? GemmType::f16 : GemmType::f32;
        g.a = which == 0 ? static_cast<const void*>(a16.data()) : which == 1 ? ar.data() : a.data();
        g.b = which == 0 ? static_cast<const void*>(b16.data()) : which == 2 ? br.data() : b.data();
        g.c = want.data();
        ASSERT_TRUE(sgemm(g).is_ok());
        g.a_type = g.b_type = GemmType::f32;
        g.a_as_f16 = which != 2;
        g.b_as_f16 = which != 1;
        g.a = a.data();
        g.b = b.data();
        g.c = got.data();
        ASSERT_TRUE(sgemm(g).is_ok());
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
      }
  }
  set_gemm_isa(best);
  set_gemm_amx(true);
  // an operand read as f16 is stored as f32, in a single product
  std::vector<float> x(4, 1.f), c(4);
  GemmArgs g;
  g.m = g.n = g.k = 2;
  g.a = g.b = x.data();
  g.lda = g.ldb = g.ldc = 2;
  g.c = c.data();
  g.a_as_f16 = true;
  g.a_type = GemmType::f16;
  EXPECT_EQ(sgemm(g).code(), ErrorCode::invalid_argument);
  g.a_type = GemmType::f32;
  g.batch = 2;
  g.batch_stride_c = 4;
  EXPECT_EQ(sgemm(g).code(), ErrorCode::invalid_argument);
  g.batch = 1;
  ASSERT_TRUE(sgemm(g).is_ok());
  EXPECT_EQ(c[0], 2.f);
}

// 16-bit panels take half the bytes of f32 ones; a packed B of another type is refused with
// an error naming both types; the report names the 16-bit kernels.
TEST(Gemm16Special, PackedTypesAndReport) {
  const int64_t k = 70, n = 45;
  std::vector<uint16_t> b16(static_cast<size_t>(k * n), 0x3C00u);
  std::vector<float> b32(static_cast<size_t>(k * n), 1.f);
  PackedB p16 = pack_b(b16.data(), GemmType::bf16, n, false, k, n);
  PackedB p32 = pack_b(b32.data(), n, false, k, n);
  ASSERT_TRUE(p16.valid());
  ASSERT_TRUE(p32.valid());
  EXPECT_EQ(p16.type(), GemmType::bf16);
  EXPECT_LE(p16.bytes() * 2, p32.bytes() + 64);

  std::vector<uint16_t> a(static_cast<size_t>(k), 0x3F80u), c(static_cast<size_t>(n));
  GemmArgs g;
  g.a_type = g.b_type = g.c_type = GemmType::f16;
  g.m = 1;
  g.n = n;
  g.k = k;
  g.a = a.data();
  g.lda = k;
  g.c = c.data();
  g.ldc = n;
  const Status s = sgemm_packed(g, p16);
  EXPECT_EQ(s.code(), ErrorCode::invalid_argument);
  EXPECT_NE(s.message().find("bf16"), std::string::npos) << s.to_string();
  EXPECT_NE(s.message().find("f16"), std::string::npos) << s.to_string();

  GemmArgs bad = g;
  bad.b = b16.data();
  bad.ldb = n;
  bad.b_type = static_cast<GemmType>(7);
  const Status s2 = sgemm(bad);
  EXPECT_EQ(s2.code(), ErrorCode::invalid_argument);
  EXPECT_NE(s2.message().find("b_type"), std::string::npos) << s2.to_string();
  EXPECT_FALSE(pack_b(b16.data(), static_cast<GemmType>(7), n, false, k, n).valid());

  EXPECT_EQ(describe_sgemm(g, true).rfind(gemm_kernel_name(g.a_type, g.b_type, g.c_type), 0), 0u)
      << describe_sgemm(g, true);

  const std::string name = gemm_kernel_name(GemmType::bf16, GemmType::bf16, GemmType::bf16);
  EXPECT_NE(name.find(" bf16"), std::string::npos) << name;
  EXPECT_NE(gemm_kernel_name(GemmType::f32, GemmType::f16, GemmType::f32).find("b=f16"), std::string::npos);
  EXPECT_EQ(gemm_kernel_name(GemmType::f32, GemmType::f32, GemmType::f32), std::string(gemm_kernel_name()));
#if defined(__x86_64__)
  __builtin_cpu_init();
  // f16 needs F16C on the x86 families: without it the report says the portable kernels run
  const std::string f16_name = gemm_kernel_name(GemmType::f16, GemmType::f16, GemmType::f16);
  if (gemm_isa() != GemmIsa::portable)
    EXPECT_EQ(f16_name.find("(no f16c)") != std::string::npos, !__builtin_cpu_supports("f16c")) << f16_name;
  if (gemm_isa() == GemmIsa::avx2 && __builtin_cpu_supports("f16c")) {
    EXPECT_EQ(gemm_kernel_name(GemmType::f16, GemmType::f16, GemmType::f16), "avx2 6x16 f16");
    EXPECT_EQ(name, "avx2 6x16 bf16");
  }
#endif
}

}  // namespace
}  // namespace rlx::cpu
