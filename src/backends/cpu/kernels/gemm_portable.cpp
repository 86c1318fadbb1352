// Portable C++ micro-kernels for the GEMM (4 rows x 16 columns), for CPUs without AVX2, and
// the portable packing and conversion routines every family starts from. Written so that the
// compiler can vectorize the inner loop with whatever the baseline ISA offers (SSE2 on
// x86-64, NEON on AArch64). B may be f32, f16 or bf16; it is widened to f32 as it is loaded.
#include <cstdint>
#include <cstring>

#include "backends/cpu/kernels/gemm.h"
#include "rlx/dtype.h"

namespace rlx::cpu::gemm_detail {
namespace {

constexpr int kWidth = 16;

// Element storage and widening per GemmType (the project's converters, rlx/dtype.h).
template <GemmType T>
struct Elem {
  using type = uint16_t;
  static float widen(uint16_t v) { return T == GemmType::f16 ? f16_to_f32(v) : bf16_to_f32(v); }
  static uint16_t round(float v) { return T == GemmType::f16 ? f32_to_f16(v) : f32_to_bf16(v); }
};
template <>
struct Elem<GemmType::f32> {
  using type = float;
  static float widen(float v) { return v; }
  static float round(float v) { return v; }
};

template <int MR, bool kMask, bool kARow, GemmType BT>
void kernel(const MicroArgs& m) {
  using BE = typename Elem<BT>::type;
  float acc[MR][kWidth] = {};
  const int64_t nr = kMask ? m.nr : kWidth;
  const float* a = m.a;
  const BE* b = static_cast<const BE*>(m.b);
  for (int64_t p = 0; p < m.k; ++p) {
    float bv[kWidth];
    // A 16-column kernel never crosses a 32-column panel: the driver starts it at a panel
    // offset of 0 or 16.
    for (int j = 0; j < kWidth; ++j) bv[j] = j < nr ? Elem<BT>::widen(b[j]) : 0.f;
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

template <GemmType BT, int MR>
constexpr void fill(MicroKernel (&t)[kTypes][2][kMaxMr + 1][2]) {
  if constexpr (MR >= 1) {
    auto& u = t[static_cast<int>(BT)];
    u[0][MR][0] = &kernel<MR, false, false, BT>;
    u[0][MR][1] = &kernel<MR, true, false, BT>;
    u[1][MR][0] = &kernel<MR, false, true, BT>;
    u[1][MR][1] = &kernel<MR, true, true, BT>;
    fill<BT, MR - 1>(t);
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
  fill<GemmType::f32, 4>(f.kernel);
  fill<GemmType::f16, 4>(f.kernel);
  fill<GemmType::bf16, 4>(f.kernel);
  set_generic_packing(f);
  return f;
}

template <GemmType T>
void pack_a_generic(const void* av, int64_t lda, bool trans, int64_t mr, int64_t kc, float* dst) {
  const auto* a = static_cast<const typename Elem<T>::type*>(av);
  if (trans) {
    for (int64_t p = 0; p < kc; ++p)
      for (int64_t i = 0; i < mr; ++i) dst[p * mr + i] = Elem<T>::widen(a[p * lda + i]);
    return;
  }
  // Blocks of 8 k-values: each row's reads stay sequential, writes stay within a few lines.
  for (int64_t p0 = 0; p0 < kc; p0 += 8) {
    const int64_t pl = kc - p0 < 8 ? kc - p0 : 8;
    for (int64_t i = 0; i < mr; ++i)
      for (int64_t p = 0; p < pl; ++p) dst[(p0 + p) * mr + i] = Elem<T>::widen(a[i * lda + p0 + p]);
  }
}

template <typename E>
void pack_b_trans_generic(const void* bv, int64_t ldb, int64_t w, int64_t kc, void* outv) {
  const E* b = static_cast<const E*>(bv);
  E* out = static_cast<E*>(outv);
  for (int64_t p0 = 0; p0 < kc; p0 += 8) {
    const int64_t pl = kc - p0 < 8 ? kc - p0 : 8;
    for (int64_t j = 0; j < w; ++j)
      for (int64_t p = 0; p < pl; ++p) out[(p0 + p) * kPanel + j] = b[j * ldb + p0 + p];
    for (int64_t p = 0; p < pl; ++p)
      for (int64_t j = w; j < kPanel; ++j) out[(p0 + p) * kPanel + j] = E{};
  }
}

template <typename E>
void pack_b_rows_generic(const void* bv, int64_t ldb, int64_t w, int64_t kc, void* outv) {
  const E* b = static_cast<const E*>(bv);
  E* out = static_cast<E*>(outv);
  for (int64_t p = 0; p < kc; ++p) {
    const E* src = b + p * ldb;
    E* dst = out + p * kPanel;
    if (w == kPanel) {
      std::memcpy(dst, src, kPanel * sizeof(E));
    } else {
      std::memcpy(dst, src, w * sizeof(E));
      std::memset(dst + w, 0, (kPanel - w) * sizeof(E));
    }
  }
}

template <GemmType T>
void round_row_generic(const void* src, void* dst, int64_t n) {
  const float* s = static_cast<const float*>(src);
  auto* d = static_cast<typename Elem<T>::type*>(dst);
  for (int64_t j = 0; j < n; ++j) d[j] = Elem<T>::round(s[j]);
}

template <GemmType T>
void widen_row_generic(const void* src, void* dst, int64_t n) {
  const auto* s = static_cast<const typename Elem<T>::type*>(src);
  float* d = static_cast<float*>(dst);
  for (int64_t j = 0; j < n; ++j) d[j] = Elem<T>::widen(s[j]);
}

}  // namespace

void set_generic_packing(KernelFamily& f) {
  constexpr int f32 = 0, f16 = 1, bf16 = 2;
  f.pack_a[f32] = &pack_a_generic<GemmType::f32>;
  f.pack_a[f16] = &pack_a_generic<GemmType::f16>;
  f.pack_a[bf16] = &pack_a_generic<GemmType::bf16>;
  f.pack_b_trans[f32] = &pack_b_trans_generic<float>;
  f.pack_b_trans[f16] = f.pack_b_trans[bf16] = &pack_b_trans_generic<uint16_t>;
  f.pack_b_rows[f32] = &pack_b_rows_generic<float>;
  f.pack_b_rows[f16] = f.pack_b_rows[bf16] = &pack_b_rows_generic<uint16_t>;
  f.round_row[f32] = f.widen_row[f32] = nullptr;
  f.round_row[f16] = &round_row_generic<GemmType::f16>;
  f.round_row[bf16] = &round_row_generic<GemmType::bf16>;
  f.widen_row[f16] = &widen_row_generic<GemmType::f16>;
  f.widen_row[bf16] = &widen_row_generic<GemmType::bf16>;
}

const KernelFamily* portable_family() {
  static const KernelFamily family = make_family();
  return &family;
}

}  // namespace rlx::cpu::gemm_detail
