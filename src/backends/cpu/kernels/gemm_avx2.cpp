// AVX2 + FMA micro-kernels for the f32 GEMM: 6 rows x 16 columns of C in 12 ymm
// accumulators, plus a 32-column variant for up to 2 rows. Compiled with a target attribute;
// only run when the dispatcher saw avx2 and fma at run time.
#include <cstdint>

#include "backends/cpu/kernels/gemm.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define RLX_AVX2 __attribute__((target("avx2,fma")))

namespace rlx::cpu::gemm_detail {
namespace {

RLX_AVX2 inline __m256i lane_mask(int64_t valid) {
  const int v = valid >= 8 ? 8 : (valid <= 0 ? 0 : static_cast<int>(valid));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(v), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// See the AVX-512 kernel: same contract, 8 lanes per vector.
template <int MR, int NV, bool kMask, bool kARow>
RLX_AVX2 void kernel(const MicroArgs& m) {
  __m256 acc[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_setzero_ps();

  __m256i mk[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) mk[v] = lane_mask(kMask ? m.nr - 8 * v : 8);

  // Vector v covers columns 8v..8v+7, inside panel (8v)/32 at offset (8v)%32.
  int64_t boff[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) boff[v] = (8 * v / 32) * m.b_panel + (8 * v) % 32;

  const float* a = m.a;
  const float* b = m.b;
  const int64_t ldb = m.ldb, a_rs = m.a_rs, a_cs = m.a_cs;
  for (int64_t p = 0; p < m.k; ++p) {
    __m256 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      bv[v] = kMask ? _mm256_maskload_ps(b + boff[v], mk[v]) : _mm256_loadu_ps(b + boff[v]);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m256 ai = _mm256_broadcast_ss(kARow ? a + i * a_rs : a + i);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_fmadd_ps(ai, bv[v], acc[i][v]);
    }
    b += ldb;
    a += kARow ? 1 : a_cs;
  }

  const __m256 alpha = _mm256_set1_ps(m.alpha);
  const __m256 beta = _mm256_set1_ps(m.beta);
  const bool scale = m.alpha != 1.f, read_c = m.beta != 0.f;
  __m256 bias[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) bias[v] = _mm256_setzero_ps();
  if (m.bias) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bias[v] = _mm256_maskload_ps(m.bias + 8 * v, mk[v]);
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    float* c = m.c + i * m.ldc;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      __m256 r = acc[i][v];
      if (scale) r = _mm256_mul_ps(r, alpha);
      if (read_c) {
        const __m256 old = kMask ? _mm256_maskload_ps(c + 8 * v, mk[v]) : _mm256_loadu_ps(c + 8 * v);
        r = _mm256_fmadd_ps(beta, old, r);
      }
      if (m.bias) r = _mm256_add_ps(r, bias[v]);
      if (kMask)
        _mm256_maskstore_ps(c + 8 * v, mk[v], r);
      else
        _mm256_storeu_ps(c + 8 * v, r);
    }
  }
}

template <int NV, int MR>
constexpr void fill(MicroKernel (&t)[2][kMaxMr + 1][2]) {
  if constexpr (MR >= 1) {
    t[0][MR][0] = &kernel<MR, NV, false, false>;
    t[0][MR][1] = &kernel<MR, NV, true, false>;
    t[1][MR][0] = &kernel<MR, NV, false, true>;
    t[1][MR][1] = &kernel<MR, NV, true, true>;
    fill<NV, MR - 1>(t);
  }
}

KernelFamily make_family() {
  KernelFamily f{};
  f.name = "avx2 6x16";
  f.isa = GemmIsa::avx2;
  f.mr_max = 6;
  f.width = 16;
  f.wide_width = 32;
  f.wide_max_mr = 2;
  fill<2, 6>(f.kernel);
  fill<4, 2>(f.wide);
  f.pack_a = &pack_a_generic;
  f.pack_b_trans = &pack_b_trans_generic;
  f.pack_b_rows = &pack_b_rows_generic;
  return f;
}

}  // namespace

const KernelFamily* avx2_family() {
  static const KernelFamily family = make_family();
  return &family;
}

}  // namespace rlx::cpu::gemm_detail

#else  // not x86: no kernels of this family

namespace rlx::cpu::gemm_detail {
const KernelFamily* avx2_family() { return nullptr; }
}  // namespace rlx::cpu::gemm_detail

#endif
