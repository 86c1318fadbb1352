// AVX-512 micro-kernels for the f32 GEMM: 14 rows x 32 columns of C in 28 zmm accumulators
// (2 B loads and 14 broadcasts per 28 FMAs), plus a 64-column variant for up to 6 rows that
// keeps enough independent accumulators when M is tiny. Everything here is compiled with a
// target attribute, so the rest of the library needs no -march flag; it only runs when the
// dispatcher saw avx512f/bw/vl/dq at run time. Needs nothing beyond avx512f + fma, plus
// F16C for the f16 entries (registered only when cpuid reports it). A 16-bit B is widened on
// load: f16 with vcvtph2ps, bf16 by a 16-bit shift; partial vectors use AVX-512BW's masked
// 16-bit loads, so nothing past column nr is read.
//
// Where cpuid also reports avx512_bf16, products with A and B both bf16 get kernels of their
// own (dot_bf16, compiled with a target attribute that adds avx512bf16): vdpbf16ps multiplies
// the bf16 pairs (2q, 2q + 1) of A and B and adds both products into one f32 lane, so each
// instruction does the work of two FMAs and neither operand is widened. A is packed as pairs
// (a 32-bit broadcast per row); B keeps the panel layout every kernel reads, and the kernel
// interleaves rows 2q and 2q + 1 of a 32-column group as it loads them (two unpacks per 28
// vdpbf16ps in the 14-row kernel), which keeps a PackedB valid for every kernel and lets
// row-major B be read in place. The unpacks work within 128-bit lanes, so the accumulators
// hold columns in a fixed permuted order, put back once when C is stored. An odd k ends with
// a zero row of B and a zero high half in A's last pair.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backends/cpu/kernels/avx512_transpose.h"
#include "backends/cpu/kernels/gemm.h"
#include "rlx/dtype.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

// GCC 12 reports the _mm512_undefined_ps() operand inside its own unpack/shuffle/extract
// intrinsics as "(may be) used uninitialized"; that operand is never read.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#define RLX_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))

namespace rlx::cpu::gemm_detail {
namespace {

RLX_AVX512 inline __mmask16 lane_mask(int64_t valid) {
  if (valid >= 16) return 0xFFFF;
  if (valid <= 0) return 0;
  return static_cast<__mmask16>((1u << valid) - 1u);
}

// Rows of B ahead that the few-row kernels prefetch when they read B in place.
constexpr int64_t kPrefetchRows = 8;

template <GemmType T>
struct BElem {
  using type = uint16_t;
};
template <>
struct BElem<GemmType::f32> {
  using type = float;
};

// 16 elements of B at p (lanes outside mk are zero and not read), widened to f32.
template <GemmType BT, bool kMask>
RLX_AVX512 inline __m512 load_b(const typename BElem<BT>::type* p, __mmask16 mk) {
  if constexpr (BT == GemmType::f32) {
    return kMask ? _mm512_maskz_loadu_ps(mk, p) : _mm512_loadu_ps(p);
  } else {
    const __m256i h = kMask ? _mm256_maskz_loadu_epi16(mk, p) : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    if constexpr (BT == GemmType::f16)
      return _mm512_cvtph_ps(h);
    else
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

// acc += A * B over the k-values of one call (see kernel below).
template <int MR, int NV, bool kMask, bool kARow, bool kPrefetch, GemmType BT>
RLX_AVX512 __attribute__((always_inline)) inline void k_loop(__m512 (&acc)[MR][NV], const __mmask16 (&mk)[NV],
                                                             const int64_t (&boff)[NV], const MicroArgs& m) {
  const float* a = m.a;
  const auto* b = static_cast<const typename BElem<BT>::type*>(m.b);
  const int64_t ldb = m.ldb, a_rs = m.a_rs, a_cs = m.a_cs;
  for (int64_t p = 0; p < m.k; ++p) {
    __m512 bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v)
      bv[v] = load_b<BT, kMask>(b + boff[v], mk[v]);
    if constexpr (kPrefetch) {
      // B read in place by a few-row kernel streams faster than the hardware prefetchers
      // follow its row stride.
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v)
        _mm_prefetch(reinterpret_cast<const char*>(b + kPrefetchRows * ldb + boff[v]), _MM_HINT_T0);
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m512 ai = _mm512_set1_ps(kARow ? a[i * a_rs] : a[i]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(ai, bv[v], acc[i][v]);
    }
    b += ldb;
    a += kARow ? 1 : a_cs;
  }
}

// MR rows x NV*16 columns. kMask: nr may be below NV*16 (B and C accessed with lane masks,
// so nothing past column nr is read or written). kARow: A(i, p) = a[i * a_rs + p] (row-major
// A read in place); otherwise A(i, p) = a[p * a_cs + i] (packed or transposed A).
template <int MR, int NV, bool kMask, bool kARow, GemmType BT>
RLX_AVX512 void kernel(const MicroArgs& m) {
  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();

  __mmask16 mk[NV];
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) mk[v] = kMask ? lane_mask(m.nr - 16 * v) : static_cast<__mmask16>(0xFFFF);

  // Column offset of vector v inside B: panels of 32 columns are b_panel floats apart.
  int64_t boff[NV];
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) boff[v] = (v / 2) * m.b_panel + (v % 2) * 16;

#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(m.c + i * m.ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(m.c + i * m.ldc + NV * 16 - 1), _MM_HINT_T0);
  }

  if constexpr (MR <= 3) {
    if (m.prefetch_b) {
      k_loop<MR, NV, kMask, kARow, true, BT>(acc, mk, boff, m);
    } else {
      k_loop<MR, NV, kMask, kARow, false, BT>(acc, mk, boff, m);
    }
  } else {
    k_loop<MR, NV, kMask, kARow, false, BT>(acc, mk, boff, m);
  }

  const __m512 alpha = _mm512_set1_ps(m.alpha);
  const __m512 beta = _mm512_set1_ps(m.beta);
  const bool scale = m.alpha != 1.f, read_c = m.beta != 0.f;
  __m512 bias[NV];
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) bias[v] = _mm512_setzero_ps();
  if (m.bias) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bias[v] = _mm512_maskz_loadu_ps(mk[v], m.bias + 16 * v);
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    float* c = m.c + i * m.ldc;
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      __m512 r = acc[i][v];
      if (scale) r = _mm512_mul_ps(r, alpha);
      if (read_c) {
        const __m512 old = kMask ? _mm512_maskz_loadu_ps(mk[v], c + 16 * v) : _mm512_loadu_ps(c + 16 * v);
        r = _mm512_fmadd_ps(beta, old, r);
      }
      if (m.bias) r = _mm512_add_ps(r, bias[v]);
      if (kMask)
        _mm512_mask_storeu_ps(c + 16 * v, mk[v], r);
      else
        _mm512_storeu_ps(c + 16 * v, r);
    }
  }
}

// v itself, or (R: an f32 operand read as f16) v rounded to f16 and widened back with F16C.
template <bool R>
RLX_AVX512 inline __m512 as_f16(__m512 v) {
  if constexpr (R) return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  return v;
}
template <bool R>
inline float as_f16(float v) {
  if constexpr (R) return f16_to_f32(f32_to_f16(v));
  return v;
}

// dst[p * mr + i] = A(i, p) (rounded to f16 if R). Row-major A goes through 16 x 16 register
// transposes; a transposed A is already k-major, so each k-value is one masked copy of mr floats.
template <bool R>
RLX_AVX512 void pack_a(const void* av, int64_t lda, bool trans, int64_t mr, int64_t kc, float* dst) {
  const float* a = static_cast<const float*>(av);
  const __mmask16 mk = lane_mask(mr);
  if (trans) {
    for (int64_t p = 0; p < kc; ++p)
      _mm512_mask_storeu_ps(dst + p * mr, mk, as_f16<R>(_mm512_maskz_loadu_ps(mk, a + p * lda)));
    return;
  }
  int64_t p0 = 0;
  for (; p0 + 16 <= kc; p0 += 16) {
    __m512 r[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) r[i] = i < mr ? as_f16<R>(_mm512_loadu_ps(a + i * lda + p0)) : _mm512_setzero_ps();
    transpose16x16(r);
#pragma GCC unroll 16
    for (int p = 0; p < 16; ++p) _mm512_mask_storeu_ps(dst + (p0 + p) * mr, mk, r[p]);
  }
  for (; p0 < kc; ++p0)
    for (int64_t i = 0; i < mr; ++i) dst[p0 * mr + i] = as_f16<R>(a[i * lda + p0]);
}

// One 32-column panel of a transposed B: out[p * 32 + j] = b[j * ldb + p] (rounded if R).
template <bool R>
RLX_AVX512 void pack_b_trans(const void* bv, int64_t ldb, int64_t w, int64_t kc, void* outv) {
  const float* b = static_cast<const float*>(bv);
  float* out = static_cast<float*>(outv);
  int64_t p0 = 0;
  for (; p0 + 16 <= kc; p0 += 16) {
#pragma GCC unroll 2
    for (int half = 0; half < 2; ++half) {
      __m512 r[16];
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) {
        const int64_t col = 16 * half + j;
        r[j] = col < w ? as_f16<R>(_mm512_loadu_ps(b + col * ldb + p0)) : _mm512_setzero_ps();
      }
      transpose16x16(r);
#pragma GCC unroll 16
      for (int p = 0; p < 16; ++p) _mm512_storeu_ps(out + (p0 + p) * 32 + 16 * half, r[p]);
    }
  }
  for (; p0 < kc; ++p0)
    for (int64_t j = 0; j < 32; ++j) out[p0 * 32 + j] = j < w ? as_f16<R>(b[j * ldb + p0]) : 0.f;
}

// One 32-column panel of a row-major B: out[p * 32 + j] = b[p * ldb + j] (rounded if R), zero
// past w.
template <bool R>
RLX_AVX512 void pack_b_rows(const void* bv, int64_t ldb, int64_t w, int64_t kc, void* outv) {
  const float* b = static_cast<const float*>(bv);
  float* out = static_cast<float*>(outv);
  if (w == 32) {
    for (int64_t p = 0; p < kc; ++p) {
      const __m512 lo = _mm512_loadu_ps(b + p * ldb), hi = _mm512_loadu_ps(b + p * ldb + 16);
      _mm512_storeu_ps(out + p * 32, as_f16<R>(lo));
      _mm512_storeu_ps(out + p * 32 + 16, as_f16<R>(hi));
    }
    return;
  }
  const __mmask16 m0 = lane_mask(w), m1 = lane_mask(w - 16);
  for (int64_t p = 0; p < kc; ++p) {
    _mm512_storeu_ps(out + p * 32, as_f16<R>(_mm512_maskz_loadu_ps(m0, b + p * ldb)));
    _mm512_storeu_ps(out + p * 32 + 16, as_f16<R>(_mm512_maskz_loadu_ps(m1, b + p * ldb + 16)));
  }
}

// A 16-bit A micro-panel widened to f32: 16 k-values of a row at a time (masked at the end).
template <GemmType T>
RLX_AVX512 void pack_a_16(const void* av, int64_t lda, bool trans, int64_t mr, int64_t kc, float* dst) {
  const uint16_t* a = static_cast<const uint16_t*>(av);
  alignas(64) float t[16];
  if (trans) {
    for (int64_t p = 0; p < kc; ++p) _mm512_mask_storeu_ps(dst + p * mr, lane_mask(mr), load_b<T, true>(a + p * lda, lane_mask(mr)));
    return;
  }
  for (int64_t i = 0; i < mr; ++i) {
    const uint16_t* row = a + i * lda;
    for (int64_t p = 0; p < kc; p += 16) {
      const int64_t pl = kc - p < 16 ? kc - p : 16;
      _mm512_store_ps(t, load_b<T, true>(row + p, lane_mask(pl)));
      for (int64_t q = 0; q < pl; ++q) dst[(p + q) * mr + i] = t[q];
    }
  }
}

// f32 -> f16 with vcvtps2ph (round to nearest even, NaN stays NaN).
RLX_AVX512 void round_row_f16(const void* src, void* dst, int64_t n) {
  const float* s = static_cast<const float*>(src);
  uint16_t* d = static_cast<uint16_t*>(dst);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 mk = lane_mask(n - j);
    _mm256_mask_storeu_epi16(d + j, mk, _mm512_cvtps_ph(_mm512_maskz_loadu_ps(mk, s + j), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
}

// f32 -> bf16 in integer lanes, exactly f32_to_bf16 (dtype.h): round to nearest even by adding
// 0x7fff plus the kept low bit, NaN quieted (0x40 set in the upper half). Not vcvtneps2bf16:
// it flushes denormal inputs to zero, which f32_to_bf16 (and ref) does not.
RLX_AVX512 void round_row_bf16(const void* src, void* dst, int64_t n) {
  const float* s = static_cast<const float*>(src);
  uint16_t* d = static_cast<uint16_t*>(dst);
  const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  const __m512i quiet = _mm512_set1_epi32(0x400000);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 mk = lane_mask(n - j);
    const __m512i u = _mm512_castps_si512(_mm512_maskz_loadu_ps(mk, s + j));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs_mask), inf);
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(bias, _mm512_and_si512(_mm512_srli_epi32(u, 16), one)));
    r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(u, quiet));
    _mm256_mask_storeu_epi16(d + j, mk, _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16)));
  }
}

RLX_AVX512 void widen_row_f16(const void* src, void* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  float* d = static_cast<float*>(dst);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 mk = lane_mask(n - j);
    _mm512_mask_storeu_ps(d + j, mk, load_b<GemmType::f16, true>(s + j, mk));
  }
}

// ---------------------------------------------------------------------------------------
// AVX-512 BF16: A and B both bf16, k-values in pairs.

#define RLX_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma,f16c")))

RLX_AVX512 inline __mmask32 lane_mask32(int64_t valid) {
  if (valid >= 32) return 0xFFFFFFFFu;
  if (valid <= 0) return 0;
  return static_cast<__mmask32>((1u << valid) - 1u);
}

// 32 bf16 of B at p (lanes outside mk are zero and not read).
template <bool kMask>
RLX_AVX512_BF16 inline __m512i load_row32(const uint16_t* p, __mmask32 mk) {
  return kMask ? _mm512_maskz_loadu_epi16(mk, p) : _mm512_loadu_si512(p);
}

// acc[i][2g], acc[i][2g+1] += one k-pair: rows r0 and r1 of each 32-column group g dotted
// with the pair a[i] of each row i of A. The unpacked vectors hold columns 8L + (0..3) (even
// slot) and 8L + (4..7) (odd slot) of each 128-bit lane L.
template <int MR, int NG>
RLX_AVX512_BF16 __attribute__((always_inline)) inline void dot_step(__m512 (&acc)[MR][2 * NG], const __m512i (&r0)[NG],
                                                                    const __m512i (&r1)[NG], const int* a) {
#pragma GCC unroll 4
  for (int g = 0; g < NG; ++g) {
    const __m512bh lo = (__m512bh)_mm512_unpacklo_epi16(r0[g], r1[g]);
    const __m512bh hi = (__m512bh)_mm512_unpackhi_epi16(r0[g], r1[g]);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m512bh ai = (__m512bh)_mm512_set1_epi32(a[i]);
      acc[i][2 * g] = _mm512_dpbf16_ps(acc[i][2 * g], ai, lo);
      acc[i][2 * g + 1] = _mm512_dpbf16_ps(acc[i][2 * g + 1], ai, hi);
    }
  }
}

// The k-pairs of one call, then the last odd row of B with a zero partner (never read past
// k). Group g of B starts at b + boff[g].
template <int MR, int NG, bool kMask, bool kPrefetch>
RLX_AVX512_BF16 __attribute__((always_inline)) inline void dot_loop(__m512 (&acc)[MR][2 * NG],
                                                                    const __mmask32 (&mk)[NG],
                                                                    const int64_t (&boff)[NG], const MicroArgs& m) {
  const auto* a = reinterpret_cast<const int*>(m.a);  // uint32 pairs, read as int for set1
  const auto* b = static_cast<const uint16_t*>(m.b);
  const int64_t ldb = m.ldb, a_cs = m.a_cs;
  const int64_t pairs = m.k / 2;
  for (int64_t q = 0; q < pairs; ++q) {
    __m512i r0[NG], r1[NG];
#pragma GCC unroll 4
    for (int g = 0; g < NG; ++g) {
      r0[g] = load_row32<kMask>(b + boff[g], mk[g]);
      r1[g] = load_row32<kMask>(b + ldb + boff[g], mk[g]);
    }
    if constexpr (kPrefetch) {
#pragma GCC unroll 4
      for (int g = 0; g < NG; ++g) {
        _mm_prefetch(reinterpret_cast<const char*>(b + kPrefetchRows * ldb + boff[g]), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(b + (kPrefetchRows + 1) * ldb + boff[g]), _MM_HINT_T0);
      }
    }
    dot_step<MR, NG>(acc, r0, r1, a);
    b += 2 * ldb;
    a += a_cs;
  }
  if (m.k % 2) {
    __m512i r0[NG], r1[NG];
#pragma GCC unroll 4
    for (int g = 0; g < NG; ++g) {
      r0[g] = load_row32<kMask>(b + boff[g], mk[g]);
      r1[g] = _mm512_setzero_si512();
    }
    dot_step<MR, NG>(acc, r0, r1, a);
  }
}

// MR rows x NG*32 columns of C from bf16 pairs (see dot_loop); C, alpha, beta and bias as in
// kernel above.
template <int MR, int NG, bool kMask>
RLX_AVX512_BF16 void dot_kernel(const MicroArgs& m) {
  __m512 acc[MR][2 * NG];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < 2 * NG; ++v) acc[i][v] = _mm512_setzero_ps();
  __mmask32 mk[NG];
  int64_t boff[NG];
#pragma GCC unroll 4
  for (int g = 0; g < NG; ++g) {
    mk[g] = kMask ? lane_mask32(m.nr - 32 * g) : 0xFFFFFFFFu;
    boff[g] = g * m.b_panel;
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(m.c + i * m.ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(m.c + i * m.ldc + NG * 32 - 1), _MM_HINT_T0);
  }
  if constexpr (MR <= 3) {
    if (m.prefetch_b)
      dot_loop<MR, NG, kMask, true>(acc, mk, boff, m);
    else
      dot_loop<MR, NG, kMask, false>(acc, mk, boff, m);
  } else {
    dot_loop<MR, NG, kMask, false>(acc, mk, boff, m);
  }

  // Columns back in order: of 32 columns, the even slot holds 8L + (0..3) in lane L's four
  // floats, the odd slot 8L + (4..7).
  const __m512i idx0 = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i idx1 = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
  const __m512 alpha = _mm512_set1_ps(m.alpha);
  const __m512 beta = _mm512_set1_ps(m.beta);
  const bool scale = m.alpha != 1.f, read_c = m.beta != 0.f;
  __mmask16 cm[2 * NG];
  __m512 bias[2 * NG];
#pragma GCC unroll 8
  for (int v = 0; v < 2 * NG; ++v) {
    cm[v] = kMask ? lane_mask(m.nr - 16 * v) : static_cast<__mmask16>(0xFFFF);
    bias[v] = m.bias ? _mm512_maskz_loadu_ps(cm[v], m.bias + 16 * v) : _mm512_setzero_ps();
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    float* c = m.c + i * m.ldc;
#pragma GCC unroll 8
    for (int v = 0; v < 2 * NG; ++v) {
      const int g = v / 2;
      __m512 r = _mm512_permutex2var_ps(acc[i][2 * g], v % 2 ? idx1 : idx0, acc[i][2 * g + 1]);
      if (scale) r = _mm512_mul_ps(r, alpha);
      if (read_c) {
        const __m512 old = kMask ? _mm512_maskz_loadu_ps(cm[v], c + 16 * v) : _mm512_loadu_ps(c + 16 * v);
        r = _mm512_fmadd_ps(beta, old, r);
      }
      if (m.bias) r = _mm512_add_ps(r, bias[v]);
      if (kMask)
        _mm512_mask_storeu_ps(c + 16 * v, cm[v], r);
      else
        _mm512_storeu_ps(c + 16 * v, r);
    }
  }
}

// A bf16 micro-panel as pairs: dst[q * mr + i] = A(i, 2q) | A(i, 2q + 1) << 16. A row-major
// row is already a sequence of pairs, so 16 rows x 16 pairs go through the 32-bit register
// transpose; a transposed A interleaves rows 2q and 2q + 1. Odd kc: the last high half is 0.
RLX_AVX512 void pack_a_bf16_pairs(const void* av, int64_t lda, bool trans, int64_t mr, int64_t kc, float* dstf) {
  const uint16_t* a = static_cast<const uint16_t*>(av);
  uint32_t* dst = reinterpret_cast<uint32_t*>(dstf);
  const int64_t pairs = kc / 2;
  const __mmask16 mk = lane_mask(mr);
  if (trans) {
    for (int64_t q = 0; q < pairs; ++q) {
      const __m512i lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mk, a + 2 * q * lda));
      const __m512i hi = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mk, a + (2 * q + 1) * lda));
      _mm512_mask_storeu_epi32(dst + q * mr, mk, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
    }
    if (kc % 2)
      _mm512_mask_storeu_epi32(dst + pairs * mr, mk, _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mk, a + (kc - 1) * lda)));
    return;
  }
  int64_t q0 = 0;
  for (; q0 + 16 <= pairs; q0 += 16) {
    __m512 r[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) r[i] = i < mr ? _mm512_loadu_ps(a + i * lda + 2 * q0) : _mm512_setzero_ps();
    transpose16x16(r);
#pragma GCC unroll 16
    for (int q = 0; q < 16; ++q) _mm512_mask_storeu_ps(dstf + (q0 + q) * mr, mk, r[q]);
  }
  for (; q0 < pairs; ++q0)
    for (int64_t i = 0; i < mr; ++i) {
      const uint16_t* e = a + i * lda + 2 * q0;
      dst[q0 * mr + i] = e[0] | static_cast<uint32_t>(e[1]) << 16;
    }
  if (kc % 2)
    for (int64_t i = 0; i < mr; ++i) dst[pairs * mr + i] = a[i * lda + kc - 1];
}

// ---------------------------------------------------------------------------------------
// Row dots (RowDots in gemm.h): 4 x 4 outputs at a time, each a vector of partial sums along
// k (8 loads per 16 FMAs, or per 16 vdpbf16ps of 16 k-pairs), the tail of k through masked
// loads that read nothing past the row. The 16 vectors are summed into one by a shuffle
// tree (45 operations, against about 8 per vector summed on its own, which cost as much as
// the products themselves at k = 121). A block past the last row or column repeats that
// row or column and stores only its own outputs.

// r[4 * i + j] = the sum of v[i][j]'s 16 lanes.
RLX_AVX512 inline __m512 sum_lanes_4x4(const __m512 (&v)[4][4]) {
  __m512 s[8];  // per 128-bit lane: pair p's two vectors' partial sums, interleaved
  for (int p = 0; p < 8; ++p) {
    const __m512 a = v[p / 2][2 * (p % 2)], b = v[p / 2][2 * (p % 2) + 1];
    s[p] = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
  }
  __m512 t[4];  // per 128-bit lane: four vectors' partial sums
  for (int g = 0; g < 4; ++g) {
    const __m512d x = _mm512_castps_pd(s[2 * g]), y = _mm512_castps_pd(s[2 * g + 1]);
    t[g] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
  }
  auto fold = [](__m512 x, __m512 y) RLX_AVX512 {  // lanes (x0 + x1, x2 + x3, y0 + y1, y2 + y3)
    return _mm512_add_ps(_mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(3, 1, 3, 1)));
  };
  return fold(fold(t[0], t[1]), fold(t[2], t[3]));
}

// Stores row i's first nr outputs of a block summed by sum_lanes_4x4, for i < mr.
RLX_AVX512 inline void store_block_4x4(__m512 r, int64_t mr, int64_t nr, float* out, int64_t ldo) {
  alignas(64) float v[16];
  _mm512_store_ps(v, r);
  for (int64_t i = 0; i < mr; ++i)
    for (int64_t j = 0; j < nr; ++j) out[i * ldo + j] = v[4 * i + j];
}

// (The sums are kept in a local array, copied to `out` once: __m512 may alias the operands,
// so accumulating through a reference would store and reload them at every step.)
RLX_AVX512 void row_dots_block_f32(const float* const (&a)[4], const float* const (&b)[4], int64_t k, __m512 (&out)[4][4]) {
  __m512 acc[4][4];
  for (auto& row : acc)
    for (__m512& x : row) x = _mm512_setzero_ps();
  auto step = [&](int64_t p, __mmask16 mk, auto masked) RLX_AVX512 {
    __m512 av[4], bv[4];
    for (int i = 0; i < 4; ++i) av[i] = masked ? _mm512_maskz_loadu_ps(mk, a[i] + p) : _mm512_loadu_ps(a[i] + p);
    for (int j = 0; j < 4; ++j) bv[j] = masked ? _mm512_maskz_loadu_ps(mk, b[j] + p) : _mm512_loadu_ps(b[j] + p);
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_fmadd_ps(av[i], bv[j], acc[i][j]);
  };
  int64_t p = 0;
  for (; p + 16 <= k; p += 16) step(p, 0xFFFF, std::false_type{});
  if (p < k) step(p, lane_mask(k - p), std::true_type{});
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) out[i][j] = acc[i][j];
}

RLX_AVX512_BF16 void row_dots_block_bf16(const uint16_t* const (&a)[4], const uint16_t* const (&b)[4], int64_t k,
                                         __m512 (&out)[4][4]) {
  __m512 acc[4][4];
  for (auto& row : acc)
    for (__m512& x : row) x = _mm512_setzero_ps();
  // masked lanes are zero in both operands, so an odd k's last pair adds 0 * 0
  auto step = [&](int64_t p, __mmask32 mk, auto masked) RLX_AVX512_BF16 {
    __m512i av[4], bv[4];
    for (int i = 0; i < 4; ++i) av[i] = masked ? _mm512_maskz_loadu_epi16(mk, a[i] + p) : _mm512_loadu_si512(a[i] + p);
    for (int j = 0; j < 4; ++j) bv[j] = masked ? _mm512_maskz_loadu_epi16(mk, b[j] + p) : _mm512_loadu_si512(b[j] + p);
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], (__m512bh)av[i], (__m512bh)bv[j]);
  };
  int64_t p = 0;
  for (; p + 32 <= k; p += 32) step(p, 0xFFFFFFFFu, std::false_type{});
  if (p < k) step(p, lane_mask32(k - p), std::true_type{});
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) out[i][j] = acc[i][j];
}

template <typename T, void (*Block)(const T* const (&)[4], const T* const (&)[4], int64_t, __m512 (&)[4][4])>
RLX_AVX512 void row_dots(const void* a, int64_t lda, const void* b, int64_t ldb, int64_t m, int64_t n, int64_t k, float* out,
                         int64_t ldo) {
  const T* ap = static_cast<const T*>(a);
  const T* bp = static_cast<const T*>(b);
  for (int64_t i0 = 0; i0 < m; i0 += 4)
    for (int64_t j0 = 0; j0 < n; j0 += 4) {
      const int64_t mr = std::min<int64_t>(4, m - i0), nr = std::min<int64_t>(4, n - j0);
      const T* ar[4];
      const T* br[4];
      for (int64_t i = 0; i < 4; ++i) ar[i] = ap + (i0 + std::min(i, mr - 1)) * lda;
      for (int64_t j = 0; j < 4; ++j) br[j] = bp + (j0 + std::min(j, nr - 1)) * ldb;
      __m512 acc[4][4];
      Block(ar, br, k, acc);
      store_block_4x4(sum_lanes_4x4(acc), mr, nr, out + i0 * ldo + j0, ldo);
    }
}

template <int NG, int MR>
constexpr void fill_dot(MicroKernel (&t)[kMaxMr + 1][2]) {
  if constexpr (MR >= 1) {
    t[MR][0] = &dot_kernel<MR, NG, false>;
    t[MR][1] = &dot_kernel<MR, NG, true>;
    fill_dot<NG, MR - 1>(t);
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

KernelFamily make_family() {
  KernelFamily f{};
  f.name = "avx512 14x32";
  f.isa = GemmIsa::avx512;
  f.mr_max = 14;
  f.width = 32;
  f.wide_width = 128;
  f.wide_max_mr = 3;
  set_generic_packing(f);
  constexpr int f32 = 0, f16 = 1, bf16 = 2;
  fill<GemmType::f32, 2, 14>(f.kernel);
  fill<GemmType::f32, 8, 3>(f.wide);
  fill<GemmType::bf16, 2, 14>(f.kernel);
  fill<GemmType::bf16, 8, 3>(f.wide);
  f.pack_a[f32] = &pack_a<false>;
  f.pack_a[bf16] = &pack_a_16<GemmType::bf16>;
  f.round_row[bf16] = &round_row_bf16;
  f.pack_b_trans[f32] = &pack_b_trans<false>;
  f.pack_b_rows[f32] = &pack_b_rows<false>;
  f.row_dots[f32] = &row_dots<float, row_dots_block_f32>;
  // Every AVX-512 CPU so far has F16C, but it is its own cpuid bit: checked, not assumed.
  __builtin_cpu_init();
  if (__builtin_cpu_supports("f16c")) {
    fill<GemmType::f16, 2, 14>(f.kernel);
    fill<GemmType::f16, 8, 3>(f.wide);
    f.pack_a[f16] = &pack_a_16<GemmType::f16>;
    f.round_row[f16] = &round_row_f16;
    f.widen_row[f16] = &widen_row_f16;
    f.pack_a_as_f16 = &pack_a<true>;
    f.pack_b_trans_as_f16 = &pack_b_trans<true>;
    f.pack_b_rows_as_f16 = &pack_b_rows<true>;
  }
  // AVX-512 BF16 is its own cpuid bit (Cooper Lake, Sapphire Rapids, Zen 4 and later), which
  // libgcc reports only when the OS saves the AVX-512 state.
  if (__builtin_cpu_supports("avx512bf16")) {
    fill_dot<1, 14>(f.dot_bf16);
    fill_dot<4, 3>(f.dot_bf16_wide);
    f.pack_a_bf16_pairs = &pack_a_bf16_pairs;
    f.row_dots[bf16] = &row_dots<uint16_t, row_dots_block_bf16>;
  }
  return f;
}

}  // namespace

const KernelFamily* avx512_family() {
  static const KernelFamily family = make_family();
  return &family;
}

}  // namespace rlx::cpu::gemm_detail

#else  // not x86: no kernels of this family

namespace rlx::cpu::gemm_detail {
const KernelFamily* avx512_family() { return nullptr; }
}  // namespace rlx::cpu::gemm_detail

#endif
