// AMX-BF16 pieces of the GEMM (see gemm.h, "AMX"): the run-time checks (shared with the int8
// layer's AMX-INT8 kernel, qgemm_amx.cpp), the tile configuration, the packing of A rows and B
// pairs into the layouts the tile loads read, and the 32 x 32 block kernel.
//
// The tiles (palette 1) are all configured alike: 16 rows of 64 bytes. tmm0..3 hold a 2 x 2 grid of
// 16 x 16 f32 blocks of C, tmm4/5 two 16-row slices of A (16 rows x 32 bf16 k-values) and tmm6/7
// two 16-column slices of B (16 k-pairs x 16 columns x 2 bf16). One step of k = 32 is then 2 A
// loads, 2 B loads and 4 tdpbf16ps, each of which adds 16 x 16 x 32 products: the 2 x 2 grid is the
// largest that leaves room for both operands in the 8 tile registers.
//
// tdpbf16ps multiplies bf16 pairs exactly and adds them into the f32 lanes with round to nearest
// even, treating denormal inputs and results as zero: the numerics of vdpbf16ps.
//
// f16 operands run on the same tiles as the sum of two bf16 parts each (hi: the value truncated to
// bf16; lo: the rest, exact), packed side by side; the block kernel multiplies every part of A with
// every part of B, so each f16 product is the exact sum of four exact bf16 products.
//
// Linux hands out the 8 KiB of tile state only to a process that asks for it
// (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)); a kernel that refuses (too old, or a
// signal stack too small for the larger frame) leaves the feature off, and the AVX-512 kernels run
// instead. Each thread loads the tile configuration once, before its first block.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backends/cpu/kernels/avx512_transpose.h"
#include "backends/cpu/kernels/gemm.h"

#if defined(__x86_64__) && defined(__linux__)
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#define RLX_AMX __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl")))

namespace rlx::cpu::gemm_detail {
namespace {

constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

// cpuid leaf 7, sub-leaf 0, edx: bit 22 amx-bf16, bit 24 amx-tile, bit 25 amx-int8.
unsigned cpuid7_edx() {
  unsigned eax = 7, ebx = 0, ecx = 0, edx = 0;
  __asm__ volatile("cpuid" : "+a"(eax), "=b"(ebx), "+c"(ecx), "=d"(edx));
  return edx;
}

// AMX tiles with AVX-512 (which every kernel here uses around them), and the tile state granted
// (asked once per process).
bool tiles_usable() {
  static const bool ok = [] {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512vl") || !__builtin_cpu_supports("avx512dq") || !((cpuid7_edx() >> 24) & 1))
      return false;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return ok;
}

struct TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

thread_local int t_layout = -1;  // the tile layout loaded on this thread

}  // namespace

RLX_AMX void amx_configure_tiles(AmxTiles layout) {
  if (t_layout == static_cast<int>(layout)) return;
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  if (layout == AmxTiles::int8_blocks32) {
    cfg.colsb[4] = cfg.colsb[5] = 32;  // A: 16 rows of one block of 32 k-values
    cfg.rows[6] = cfg.rows[7] = 8;     // B: the block's 8 quads of 16 columns
  }
  // not _tile_loadconfig: GCC 12's asm for it names only the first 8 bytes of the
  // configuration as read, and the stores of the rest were removed as dead
  __asm__ volatile("ldtilecfg %0" ::"m"(cfg));
  t_layout = static_cast<int>(layout);
}

namespace {

// The block for `R` 16-row slices of A and `C` 16-column slices of B; see amx_bf16_block.
template <int R, int C>
RLX_AMX void block(const uint16_t* a0, int64_t kp, const uint16_t* b0, int parts, float* c, int64_t ldc, bool load_c) {
  const int64_t c_stride = ldc * 4, a_stride = kp * 2;
  // The tile intrinsics are asm statements without a memory clobber: these barriers keep the
  // compiler from moving the packing stores or C's reads across them.
  __asm__ volatile("" ::: "memory");
  if (load_c) {
    _tile_loadd(0, c, c_stride);
    if (C > 1) _tile_loadd(1, c + 16, c_stride);
    if (R > 1) _tile_loadd(2, c + 16 * ldc, c_stride);
    if (R > 1 && C > 1) _tile_loadd(3, c + 16 * ldc + 16, c_stride);
  } else {
    _tile_zero(0);
    if (C > 1) _tile_zero(1);
    if (R > 1) _tile_zero(2);
    if (R > 1 && C > 1) _tile_zero(3);
  }
  // every part of A against every part of B (one part each for bf16; hi and lo for f16)
  for (int pa = 0; pa < parts; ++pa)
    for (int pb = 0; pb < parts; ++pb) {
      const uint16_t* a = a0 + pa * 32 * kp;
      const uint16_t* b = b0 + pb * 32 * kp;
      for (int64_t p = 0; p < kp; p += 32, b += 16 * 64) {
        _tile_loadd(4, a + p, a_stride);
        _tile_loadd(6, b, 128);
        if (C > 1) _tile_loadd(7, b + 32, 128);
        _tile_dpbf16ps(0, 4, 6);
        if (C > 1) _tile_dpbf16ps(1, 4, 7);
        if (R > 1) {
          _tile_loadd(5, a + 16 * kp + p, a_stride);
          _tile_dpbf16ps(2, 5, 6);
          if (C > 1) _tile_dpbf16ps(3, 5, 7);
        }
      }
    }
  _tile_stored(0, c, c_stride);
  if (C > 1) _tile_stored(1, c + 16, c_stride);
  if (R > 1) _tile_stored(2, c + 16 * ldc, c_stride);
  if (R > 1 && C > 1) _tile_stored(3, c + 16 * ldc + 16, c_stride);
  __asm__ volatile("" ::: "memory");
}

}  // namespace

// (cached: cpuid is slow, and under a hypervisor it traps to it)
bool amx_bf16_supported() {
  static const bool ok = tiles_usable() && ((cpuid7_edx() >> 22) & 1);
  return ok;
}
bool amx_int8_supported() {
  static const bool ok = tiles_usable() && ((cpuid7_edx() >> 25) & 1);
  return ok;
}

void amx_bf16_block(const uint16_t* a, int64_t kp, const uint16_t* b, int parts, float* c, int64_t ldc, int rows16,
                    int cols16, bool load_c) {
  amx_configure_tiles();
  if (rows16 > 1)
    cols16 > 1 ? block<2, 2>(a, kp, b, parts, c, ldc, load_c) : block<2, 1>(a, kp, b, parts, c, ldc, load_c);
  else
    cols16 > 1 ? block<1, 2>(a, kp, b, parts, c, ldc, load_c) : block<1, 1>(a, kp, b, parts, c, ldc, load_c);
}

// f16 as hi + lo bf16 (see amx_pack_a_f16 in gemm.h), on 16 values widened with vcvtph2ps: hi is the
// top 16 bits of each f32 and lo the rest, x - hi (exact), zero for infinities and NaN (which go
// whole into hi: inf - inf would make lo a NaN). Both are returned as f32 bits whose top halves are
// the bf16 parts.
struct SplitF16 {
  __m512i hi, lo;
};
RLX_AMX __attribute__((target("f16c"), always_inline)) inline SplitF16 split16(__m256i h16) {
  const __m512 x = _mm512_cvtph_ps(h16);
  const __m512i xb = _mm512_castps_si512(x);
  const __m512 h = _mm512_castsi512_ps(_mm512_and_si512(xb, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
  const __mmask16 finite = _mm512_cmp_ps_mask(_mm512_abs_ps(x), _mm512_set1_ps(__builtin_inff()), _CMP_LT_OQ);
  return {xb, _mm512_castps_si512(_mm512_maskz_sub_ps(finite, x, h))};
}

// 32-bit words bf16(even) | bf16(odd) << 16 from the f32 bits of two parts.
RLX_AMX __attribute__((always_inline)) inline __m512i pair_words(__m512i even, __m512i odd) {
  return _mm512_or_si512(_mm512_srli_epi32(even, 16),
                         _mm512_and_si512(odd, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
}

// The top halves of 32 f32 (two vectors, in order) as 32 bf16.
RLX_AMX __attribute__((always_inline)) inline __m512i top_halves(__m512i a, __m512i b) {
  alignas(64) static const uint16_t odd[32] = {1,  3,  5,  7,  9,  11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31,
                                               33, 35, 37, 39, 41, 43, 45, 47, 49, 51, 53, 55, 57, 59, 61, 63};
  return _mm512_permutex2var_epi16(a, _mm512_load_si512(odd), b);
}

// Where the f16 packers read their values: f16 bits as they are, or f32 values rounded to f16
// (vcvtps2ph, to nearest even; split16 widens them back exactly). load16 / load32 give the f16
// bits of 16 / 32 consecutive elements, zero where the mask is clear.
struct FromF16 {
  using T = uint16_t;
  RLX_AMX __attribute__((always_inline)) static __m256i load16(__mmask16 m, const uint16_t* p) {
    return _mm256_maskz_loadu_epi16(m, p);
  }
  RLX_AMX __attribute__((always_inline)) static __m512i load32(__mmask32 m, const uint16_t* p) {
    return _mm512_maskz_loadu_epi16(m, p);
  }
};
struct FromF32 {
  using T = float;
  RLX_AMX __attribute__((target("f16c"), always_inline)) static __m256i load16(__mmask16 m, const float* p) {
    return _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, p), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  RLX_AMX __attribute__((target("f16c"), always_inline)) static __m512i load32(__mmask32 m, const float* p) {
    const __m256i lo = load16(static_cast<__mmask16>(m), p), hi = load16(static_cast<__mmask16>(m >> 16), p + 16);
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
  }
};

namespace {

// Row-major B: pair row q interleaves rows 2q and 2q + 1 (vpermt2w on the two 32-column rows).
RLX_AMX void pack_pairs_rows(const uint16_t* b, int64_t ldb, int64_t kc, int64_t w, uint16_t* out) {
  alignas(64) uint16_t lo[32], hi[32];
  for (int j = 0; j < 16; ++j) {
    lo[2 * j] = static_cast<uint16_t>(j);
    lo[2 * j + 1] = static_cast<uint16_t>(32 + j);
    hi[2 * j] = static_cast<uint16_t>(16 + j);
    hi[2 * j + 1] = static_cast<uint16_t>(48 + j);
  }
  const __m512i idx_lo = _mm512_load_si512(lo), idx_hi = _mm512_load_si512(hi);
  const __mmask32 m = w >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((1u << w) - 1);
  const int64_t kp = (kc + 31) / 32 * 32;
  int64_t p = 0;
  for (; p < kc; p += 2, out += 64) {
    const __m512i r0 = _mm512_maskz_loadu_epi16(m, b + p * ldb);
    const __m512i r1 = p + 1 < kc ? _mm512_maskz_loadu_epi16(m, b + (p + 1) * ldb) : _mm512_setzero_si512();
    _mm512_storeu_si512(out, _mm512_permutex2var_epi16(r0, idx_lo, r1));
    _mm512_storeu_si512(out + 32, _mm512_permutex2var_epi16(r0, idx_hi, r1));
  }
  for (; p < kp; p += 2, out += 64) {
    _mm512_storeu_si512(out, _mm512_setzero_si512());
    _mm512_storeu_si512(out + 32, _mm512_setzero_si512());
  }
}

// Transposed B (column j of op(B) is row j of b, k contiguous): pair q of column j is the 32-bit
// word at b + j * ldb + 2q, so 16 columns x 16 pairs are one 16 x 16 32-bit transpose.
RLX_AMX void pack_pairs_trans(const uint16_t* b, int64_t ldb, int64_t kc, int64_t w, uint16_t* out) {
  const int64_t kp = (kc + 31) / 32 * 32;
  for (int64_t c0 = 0; c0 < 32; c0 += 16)
    for (int64_t q0 = 0; q0 < kp / 2; q0 += 16) {
      const int64_t valid = std::min<int64_t>(32, std::max<int64_t>(0, kc - 2 * q0));
      const __mmask32 mk = valid >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((1u << valid) - 1);
      __m512 r[16];
      for (int j = 0; j < 16; ++j)
        r[j] = c0 + j < w ? _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(mk, b + (c0 + j) * ldb + 2 * q0))
                          : _mm512_setzero_ps();
      transpose16x16(r);
      for (int t = 0; t < 16; ++t) _mm512_storeu_ps(out + (q0 + t) * 64 + c0 * 2, r[t]);
    }
}

}  // namespace

void amx_pack_b_pairs_bf16(const uint16_t* b, int64_t ldb, bool trans_b, int64_t kc, int64_t w, uint16_t* out) {
  trans_b ? pack_pairs_trans(b, ldb, kc, w, out) : pack_pairs_rows(b, ldb, kc, w, out);
}

namespace {

// The f16 versions: part 0 (hi) at out, part 1 (lo) at out + kp * 32. Row-major B: the pair words
// of 16 columns come from rows 2q and 2q + 1 split in registers.
template <class Src>
RLX_AMX __attribute__((target("f16c"))) void pack_pairs_rows_f16(const typename Src::T* b, int64_t ldb, int64_t kc, int64_t w,
                                                                 uint16_t* out) {
  const int64_t kp = (kc + 31) / 32 * 32;
  uint16_t* out_lo = out + kp * 32;
  for (int64_t c0 = 0; c0 < 32; c0 += 16) {
    const int64_t valid = std::min<int64_t>(16, std::max<int64_t>(0, w - c0));
    const __mmask16 m = static_cast<__mmask16>((1u << valid) - 1);
    for (int64_t p = 0; p < kp; p += 2) {
      const __m256i zero = _mm256_setzero_si256();
      const SplitF16 e = split16(p < kc ? Src::load16(m, b + p * ldb + c0) : zero);
      const SplitF16 o = split16(p + 1 < kc ? Src::load16(m, b + (p + 1) * ldb + c0) : zero);
      _mm512_storeu_si512(out + (p / 2) * 64 + c0 * 2, pair_words(e.hi, o.hi));
      _mm512_storeu_si512(out_lo + (p / 2) * 64 + c0 * 2, pair_words(e.lo, o.lo));
    }
  }
}

// Transposed B: 32 k-values of column j (one row of b) split are the pair words of 16 pairs; then
// the 32-bit 16 x 16 transpose, once per part.
template <class Src>
RLX_AMX __attribute__((target("f16c"))) void pack_pairs_trans_f16(const typename Src::T* b, int64_t ldb, int64_t kc, int64_t w,
                                                                  uint16_t* out) {
  const int64_t kp = (kc + 31) / 32 * 32;
  uint16_t* out_lo = out + kp * 32;
  for (int64_t c0 = 0; c0 < 32; c0 += 16)
    for (int64_t q0 = 0; q0 < kp / 2; q0 += 16) {
      const int64_t valid = std::min<int64_t>(32, std::max<int64_t>(0, kc - 2 * q0));
      const __mmask32 mk = valid >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((1u << valid) - 1);
      __m512 rh[16], rl[16];
      for (int j = 0; j < 16; ++j) {
        const __m512i v = c0 + j < w ? Src::load32(mk, b + (c0 + j) * ldb + 2 * q0) : _mm512_setzero_si512();
        const SplitF16 s0 = split16(_mm512_castsi512_si256(v)), s1 = split16(_mm512_extracti64x4_epi64(v, 1));
        rh[j] = _mm512_castsi512_ps(top_halves(s0.hi, s1.hi));
        rl[j] = _mm512_castsi512_ps(top_halves(s0.lo, s1.lo));
      }
      transpose16x16(rh);
      transpose16x16(rl);
      for (int t = 0; t < 16; ++t) {
        _mm512_storeu_ps(out + (q0 + t) * 64 + c0 * 2, rh[t]);
        _mm512_storeu_ps(out_lo + (q0 + t) * 64 + c0 * 2, rl[t]);
      }
    }
}

// The f16 A: part 0 (hi) at dst, part 1 (lo) at dst + 32 * kp. Row-major: 32 k-values of a row a
// step, their parts gathered with vpermt2w; transposed: pair words from two rows of a, then the 16
// x 16 transpose, as for bf16.
template <class Src>
RLX_AMX __attribute__((target("f16c"))) void pack_a_f16(const typename Src::T* a, int64_t lda, bool trans, int64_t mr,
                                                       int64_t kc, int64_t kp, int64_t rows, uint16_t* dst) {
  uint16_t* dst_lo = dst + 32 * kp;
  if (!trans) {
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t p = 0; p < kp; p += 32) {
        const int64_t valid = i < mr ? std::min<int64_t>(32, std::max<int64_t>(0, kc - p)) : 0;
        const __mmask32 mk = valid >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((1u << valid) - 1);
        const __m512i v = Src::load32(mk, a + i * lda + p);
        const SplitF16 s0 = split16(_mm512_castsi512_si256(v)), s1 = split16(_mm512_extracti64x4_epi64(v, 1));
        _mm512_storeu_si512(dst + i * kp + p, top_halves(s0.hi, s1.hi));
        _mm512_storeu_si512(dst_lo + i * kp + p, top_halves(s0.lo, s1.lo));
      }
    return;
  }
  for (int64_t i0 = 0; i0 < rows; i0 += 16) {
    const int64_t valid = std::min<int64_t>(16, std::max<int64_t>(0, mr - i0));
    const __mmask16 mi = static_cast<__mmask16>((1u << valid) - 1);
    for (int64_t q0 = 0; q0 < kp / 2; q0 += 16) {
      __m512 rh[16], rl[16];
      for (int t = 0; t < 16; ++t) {
        const int64_t p = 2 * (q0 + t);
        const __m256i zero = _mm256_setzero_si256();
        const SplitF16 e = split16(p < kc ? Src::load16(mi, a + p * lda + i0) : zero);
        const SplitF16 o = split16(p + 1 < kc ? Src::load16(mi, a + (p + 1) * lda + i0) : zero);
        rh[t] = _mm512_castsi512_ps(pair_words(e.hi, o.hi));
        rl[t] = _mm512_castsi512_ps(pair_words(e.lo, o.lo));
      }
      transpose16x16(rh);
      transpose16x16(rl);
      for (int i = 0; i < 16; ++i) {
        _mm512_storeu_ps(dst + (i0 + i) * kp + 2 * q0, rh[i]);
        _mm512_storeu_ps(dst_lo + (i0 + i) * kp + 2 * q0, rl[i]);
      }
    }
  }
}

}  // namespace

void amx_pack_b_pairs_f16(const uint16_t* b, int64_t ldb, bool trans_b, int64_t kc, int64_t w, uint16_t* out) {
  trans_b ? pack_pairs_trans_f16<FromF16>(b, ldb, kc, w, out) : pack_pairs_rows_f16<FromF16>(b, ldb, kc, w, out);
}
void amx_pack_b_pairs_f16_from_f32(const float* b, int64_t ldb, bool trans_b, int64_t kc, int64_t w, uint16_t* out) {
  trans_b ? pack_pairs_trans_f16<FromF32>(b, ldb, kc, w, out) : pack_pairs_rows_f16<FromF32>(b, ldb, kc, w, out);
}
void amx_pack_a_f16(const uint16_t* a, int64_t lda, bool trans, int64_t mr, int64_t kc, int64_t kp, int64_t rows,
                    uint16_t* dst) {
  pack_a_f16<FromF16>(a, lda, trans, mr, kc, kp, rows, dst);
}
void amx_pack_a_f16_from_f32(const float* a, int64_t lda, bool trans, int64_t mr, int64_t kc, int64_t kp, int64_t rows,
                             uint16_t* dst) {
  pack_a_f16<FromF32>(a, lda, trans, mr, kc, kp, rows, dst);
}

// A transposed (A(i, p) = a[p * lda + i]): the words A(i, 2q) | A(i, 2q + 1) << 16 of 16 rows i and
// 16 pairs q are built from two rows of a, then one 32-bit 16 x 16 transpose puts each row's pairs
// in order. Row-major A is copied row by row.
RLX_AMX void amx_pack_a_bf16(const uint16_t* a, int64_t lda, bool trans, int64_t mr, int64_t kc, int64_t kp,
                             int64_t rows, uint16_t* dst) {
  if (!trans) {
    for (int64_t i = 0; i < rows; ++i) {
      uint16_t* d = dst + i * kp;
      const int64_t copied = i < mr ? kc : 0;
      if (copied) std::memcpy(d, a + i * lda, static_cast<size_t>(kc) * 2);
      std::memset(d + copied, 0, static_cast<size_t>(kp - copied) * 2);
    }
    return;
  }
  for (int64_t i0 = 0; i0 < rows; i0 += 16) {
    const int64_t valid = std::min<int64_t>(16, std::max<int64_t>(0, mr - i0));
    const __mmask16 mi = static_cast<__mmask16>((1u << valid) - 1);
    for (int64_t q0 = 0; q0 < kp / 2; q0 += 16) {
      __m512 r[16];
      for (int t = 0; t < 16; ++t) {
        const int64_t p = 2 * (q0 + t);
        const __m512i even =
            p < kc ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mi, a + p * lda + i0)) : _mm512_setzero_si512();
        const __m512i odd = p + 1 < kc ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mi, a + (p + 1) * lda + i0))
                                       : _mm512_setzero_si512();
        r[t] = _mm512_castsi512_ps(_mm512_or_si512(even, _mm512_slli_epi32(odd, 16)));
      }
      transpose16x16(r);
      for (int i = 0; i < 16; ++i) _mm512_storeu_ps(dst + (i0 + i) * kp + 2 * q0, r[i]);
    }
  }
}

}  // namespace rlx::cpu::gemm_detail

#else

namespace rlx::cpu::gemm_detail {
bool amx_bf16_supported() { return false; }
bool amx_int8_supported() { return false; }
void amx_configure_tiles(AmxTiles) {}
void amx_pack_b_pairs_bf16(const uint16_t*, int64_t, bool, int64_t, int64_t, uint16_t*) {}
void amx_pack_a_bf16(const uint16_t*, int64_t, bool, int64_t, int64_t, int64_t, int64_t, uint16_t*) {}
void amx_bf16_block(const uint16_t*, int64_t, const uint16_t*, int, float*, int64_t, int, int, bool) {}
void amx_pack_b_pairs_f16(const uint16_t*, int64_t, bool, int64_t, int64_t, uint16_t*) {}
void amx_pack_a_f16(const uint16_t*, int64_t, bool, int64_t, int64_t, int64_t, int64_t, uint16_t*) {}
void amx_pack_b_pairs_f16_from_f32(const float*, int64_t, bool, int64_t, int64_t, uint16_t*) {}
void amx_pack_a_f16_from_f32(const float*, int64_t, bool, int64_t, int64_t, int64_t, int64_t, uint16_t*) {}
}  // namespace rlx::cpu::gemm_detail

#endif
