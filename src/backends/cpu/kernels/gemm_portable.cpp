// Portable C++ micro-kernels for the f32 GEMM (4 rows x 16 columns), for CPUs without AVX2.
// Written so that the compiler can vectorize the inner loop with whatever the baseline ISA
// offers (SSE2 on x86-64, NEON on AArch64).
#include <cstdint>
#include <cstring>

#include "backends/cpu/kernels/gemm.h"

namespace rlx::cpu::gemm_detail {
namespace {

constexpr int kWidth = 16;

template <int MR, bool kMask, bool kARow>
void kernel(const MicroArgs& m) {
  float acc[MR][kWidth] = {};
  const int64_t nr = kMask ? m.nr : kWidth;
  const float* a = m.a;
  const float* b = m.b;
  for (int64_t p = 0; p < m.k; ++p) {
    float bv[kWidth];
    // A 16-column kernel never crosses a 32-column panel: the driver starts it at a panel
    // offset of 0 or 16.
    for (int j = 0; j < kWidth; ++j) bv[j] = j < nr ? b[j] : 0.f;
    for (int i = 0; i < MR; ++i) {
      const float ai = kARow ? a[i * m.a_rs] : a[i];
      for (int j = 0; j < kWidth; ++j) acc[i][j] += ai * bv[j];
    }
    b += m.ldb;
    a += kARow ? 1 : m.a_cs;
  }
  for (int i = 0; i < MR; ++i) {
    float* c = m.c + i * m.ldc;
    for (int64_t j = 0; j < nr; ++j) {
      float r = acc[i][j] * m.alpha;
      if (m.beta != 0.f) r += m.beta * c[j];
      if (m.bias) r += m.bias[j];
      c[j] = r;
    }
  }
}

template <int MR>
constexpr void fill(MicroKernel (&t)[2][kMaxMr + 1][2]) {
  if constexpr (MR >= 1) {
    t[0][MR][0] = &kernel<MR, false, false>;
    t[0][MR][1] = &kernel<MR, true, false>;
    t[1][MR][0] = &kernel<MR, false, true>;
    t[1][MR][1] = &kernel<MR, true, true>;
    fill<MR - 1>(t);
  }
}

KernelFamily make_family() {
  KernelFamily f{};
  f.name = "portable 4x16";
  f.isa = GemmIsa::portable;
  f.mr_max = 4;
  f.width = kWidth;
  f.wide_width = 0;
  f.wide_max_mr = 0;
  fill<4>(f.kernel);
  f.pack_a = &pack_a_generic;
  f.pack_b_trans = &pack_b_trans_generic;
  f.pack_b_rows = &pack_b_rows_generic;
  return f;
}

}  // namespace

void pack_a_generic(const float* a, int64_t lda, bool trans, int64_t mr, int64_t kc, float* dst) {
  if (trans) {
    for (int64_t p = 0; p < kc; ++p)
      for (int64_t i = 0; i < mr; ++i) dst[p * mr + i] = a[p * lda + i];
    return;
  }
  // Blocks of 8 k-values: each row's reads stay sequential, writes stay within a few lines.
  for (int64_t p0 = 0; p0 < kc; p0 += 8) {
    const int64_t pl = kc - p0 < 8 ? kc - p0 : 8;
    for (int64_t i = 0; i < mr; ++i)
      for (int64_t p = 0; p < pl; ++p) dst[(p0 + p) * mr + i] = a[i * lda + p0 + p];
  }
}

void pack_b_trans_generic(const float* b, int64_t ldb, int64_t w, int64_t kc, float* out) {
  for (int64_t p0 = 0; p0 < kc; p0 += 8) {
    const int64_t pl = kc - p0 < 8 ? kc - p0 : 8;
    for (int64_t j = 0; j < w; ++j)
      for (int64_t p = 0; p < pl; ++p) out[(p0 + p) * kPanel + j] = b[j * ldb + p0 + p];
    for (int64_t p = 0; p < pl; ++p)
      for (int64_t j = w; j < kPanel; ++j) out[(p0 + p) * kPanel + j] = 0.f;
  }
}

void pack_b_rows_generic(const float* b, int64_t ldb, int64_t w, int64_t kc, float* out) {
  for (int64_t p = 0; p < kc; ++p) {
    const float* src = b + p * ldb;
    float* dst = out + p * kPanel;
    if (w == kPanel) {
      std::memcpy(dst, src, kPanel * sizeof(float));
    } else {
      std::memcpy(dst, src, w * sizeof(float));
      std::memset(dst + w, 0, (kPanel - w) * sizeof(float));
    }
  }
}

const KernelFamily* portable_family() {
  static const KernelFamily family = make_family();
  return &family;
}

}  // namespace rlx::cpu::gemm_detail
