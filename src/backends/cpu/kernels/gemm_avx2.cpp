// AVX2 + FMA micro-kernels for the GEMM: 6 rows x 16 columns of C in 12 ymm accumulators,
// plus a 32-column variant for up to 2 rows. B may be f32, f16 (widened with F16C's
// vcvtph2ps) or bf16 (widened by a 16-bit shift). Compiled with a target attribute; only run
// when the dispatcher saw avx2 and fma at run time, and the f16 entries only exist when cpuid
// also reports f16c.
#include <cstdint>
#include <cstring>

#include "backends/cpu/kernels/gemm.h"
#include "rlx/dtype.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define RLX_AVX2 __attribute__((target("avx2,fma")))
// The micro-kernel template carries f16c for every B type, but the compiler emits F16C
// instructions only for the f16 conversions written below, and the f16 entries (kernels,
// packing, rounding) are registered only if cpuid reports f16c.
#define RLX_AVX2_F16C __attribute__((target("avx2,fma,f16c")))

namespace rlx::cpu::gemm_detail {
namespace {

RLX_AVX2 inline __m256i lane_mask(int64_t valid) {
  const int v = valid >= 8 ? 8 : (valid <= 0 ? 0 : static_cast<int>(valid));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(v), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

template <GemmType T>
struct BElem {
  using type = uint16_t;
};
template <>
struct BElem<GemmType::f32> {
  using type = float;
};

// 8 elements of B at p, widened to f32.
RLX_AVX2 inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
RLX_AVX2_F16C inline __m256 load8_f16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
RLX_AVX2 inline __m256 load8_bf16(const uint16_t* p) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

template <GemmType BT>
RLX_AVX2_F16C inline __m256 load_b(const typename BElem<BT>::type* p) {
  if constexpr (BT == GemmType::f32)
    return load8(p);
  else if constexpr (BT == GemmType::f16)
    return load8_f16(p);
  else
    return load8_bf16(p);
}

// The first `valid` (0..8) elements at p, zero past them; nothing past them is read. AVX2
// has no 16-bit masked load, so a partial 16-bit vector goes through a small copy (only the
// last column block of a row uses it).
template <GemmType BT>
RLX_AVX2_F16C inline __m256 load_b_masked(const typename BElem<BT>::type* p, __m256i mk, int valid) {
  if constexpr (BT == GemmType::f32) {
    return _mm256_maskload_ps(p, mk);
  } else {
    if (valid >= 8) return load_b<BT>(p);
    alignas(16) uint16_t tmp[8] = {};
    if (valid > 0) std::memcpy(tmp, p, static_cast<size_t>(valid) * 2);
    return load_b<BT>(tmp);
  }
}

// See the AVX-512 kernel: same contract, 8 lanes per vector.
template <int MR, int NV, bool kMask, bool kARow, GemmType BT>
RLX_AVX2_F16C void kernel(const MicroArgs& m) {
  using BE = typename BElem<BT>::type;
  __m256 acc[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_setzero_ps();

  __m256i mk[NV];
  int valid[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) {
    mk[v] = lane_mask(kMask ? m.nr - 8 * v : 8);
    const int64_t left = kMask ? m.nr - 8 * v : 8;
    valid[v] = left >= 8 ? 8 : (left <= 0 ? 0 : static_cast<int>(left));
  }

  // Vector v covers columns 8v..8v+7, inside panel (8v)/32 at offset (8v)%32.
  int64_t boff[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) boff[v] = (8 * v / 32) * m.b_panel + (8 * v) % 32;

  const float* a = m.a;
  const BE* b = static_cast<const BE*>(m.b);
  const int64_t ldb = m.ldb, a_rs = m.a_rs, a_cs = m.a_cs;
  for (int64_t p = 0; p < m.k; ++p) {
    __m256 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      bv[v] = kMask ? load_b_masked<BT>(b + boff[v], mk[v], valid[v]) : load_b<BT>(b + boff[v]);
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

template <GemmType BT, int NV, int MR>
constexpr void fill(MicroKernel (&t)[kTypes][2][kMaxMr + 1][2]) {
  if constexpr (MR >= 1) {
    auto& u = t[static_cast<int>(BT)];
    u[0][MR][0] = &kernel<MR, NV, false, false, BT>;
    u[0][MR][1] = &kernel<MR, NV, true, false, BT>;
    u[1][MR][0] = &kernel<MR, NV, false, true, BT>;
    u[1][MR][1] = &kernel<MR, NV, true, true, BT>;
    fill<BT, NV, MR - 1>(t);
  }
}

// An f16 A micro-panel widened to f32 with F16C, 8 k-values of a row at a time.
RLX_AVX2_F16C void pack_a_f16(const void* av, int64_t lda, bool trans, int64_t mr, int64_t kc, float* dst) {
  const uint16_t* a = static_cast<const uint16_t*>(av);
  alignas(32) float t[8];
  if (trans) {
    // k-major already: row p holds the mr (<= 16) values of one k.
    for (int64_t p = 0; p < kc; ++p)
      for (int64_t i0 = 0; i0 < mr; i0 += 8) {
        const int64_t il = mr - i0 < 8 ? mr - i0 : 8;
        _mm256_store_ps(t, load_b_masked<GemmType::f16>(a + p * lda + i0, _mm256_setzero_si256(), static_cast<int>(il)));
        for (int64_t i = 0; i < il; ++i) dst[p * mr + i0 + i] = t[i];
      }
    return;
  }
  for (int64_t i = 0; i < mr; ++i) {
    const uint16_t* row = a + i * lda;
    int64_t p = 0;
    for (; p + 8 <= kc; p += 8) {
      _mm256_store_ps(t, load8_f16(row + p));
#pragma GCC unroll 8
      for (int q = 0; q < 8; ++q) dst[(p + q) * mr + i] = t[q];
    }
    for (; p < kc; ++p) dst[p * mr + i] = f16_to_f32(row[p]);
  }
}

// f32 -> f16 with vcvtps2ph (round to nearest even, NaN stays NaN), the tail with the
// project's scalar converter (same rounding).
RLX_AVX2_F16C void round_row_f16(const void* src, void* dst, int64_t n) {
  const float* s = static_cast<const float*>(src);
  uint16_t* d = static_cast<uint16_t*>(dst);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + j),
                     _mm256_cvtps_ph(_mm256_loadu_ps(s + j), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; j < n; ++j) d[j] = f32_to_f16(s[j]);
}

RLX_AVX2_F16C void widen_row_f16(const void* src, void* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  float* d = static_cast<float*>(dst);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(d + j, load8_f16(s + j));
  for (; j < n; ++j) d[j] = f16_to_f32(s[j]);
}

KernelFamily make_family() {
  KernelFamily f{};
  f.name = "avx2 6x16";
  f.isa = GemmIsa::avx2;
  f.mr_max = 6;
  f.width = 16;
  f.wide_width = 32;
  f.wide_max_mr = 2;
  set_generic_packing(f);
  fill<GemmType::f32, 2, 6>(f.kernel);
  fill<GemmType::f32, 4, 2>(f.wide);
  fill<GemmType::bf16, 2, 6>(f.kernel);
  fill<GemmType::bf16, 4, 2>(f.wide);
  // F16C is a separate cpuid bit: without it the f16 entries stay null and the driver runs
  // f16 products on the portable kernels.
  __builtin_cpu_init();
  if (__builtin_cpu_supports("f16c")) {
    fill<GemmType::f16, 2, 6>(f.kernel);
    fill<GemmType::f16, 4, 2>(f.wide);
    f.pack_a[static_cast<int>(GemmType::f16)] = &pack_a_f16;
    f.round_row[static_cast<int>(GemmType::f16)] = &round_row_f16;
    f.widen_row[static_cast<int>(GemmType::f16)] = &widen_row_f16;
  }
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
