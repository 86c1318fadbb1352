// AVX-512 quantized kernels: 16 values per zmm register. Nibbles become floats through one
// vpermps table lookup (which also applies iq4_nl's non-linear levels), the 5th bits of
// q5 formats through masked adds. Compiled with target attributes, run only when the
// dispatcher saw avx512f/bw/vl/dq (+fma, f16c) at run time.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "backends/cpu/kernels/qgemm.h"

#if defined(__x86_64__)
#include <immintrin.h>

#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#define RLX_QK_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,avx2")))
#define RLX_QK RLX_QK_TARGET __attribute__((always_inline)) inline
#define RLX_QK_ENTRY RLX_QK_TARGET __attribute__((noinline))

namespace rlx::cpu::qgemm_detail {
namespace {

alignas(64) constexpr float kNibbleLut[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

struct Isa {
  struct V {
    __m512 v;
  };
  static RLX_QK V zero() { return {_mm512_setzero_ps()}; }
  static RLX_QK V load(const float* p) { return {_mm512_loadu_ps(p)}; }
  static RLX_QK void store(float* p, V a) { _mm512_storeu_ps(p, a.v); }
  static RLX_QK V set1(float f) { return {_mm512_set1_ps(f)}; }
  static RLX_QK V fma(V a, V b, V c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
  static RLX_QK V mul(V a, V b) { return {_mm512_mul_ps(a.v, b.v)}; }
  static RLX_QK V sub(V a, V b) { return {_mm512_sub_ps(a.v, b.v)}; }
  static RLX_QK V halves(float a, float b) {
    return {_mm512_insertf32x8(_mm512_set1_ps(a), _mm256_set1_ps(b), 1)};
  }
  static RLX_QK void q6_unpack(const uint8_t* b, int8_t* out) {
    const __m512i low4 = _mm512_set1_epi8(0x0F), m03 = _mm512_set1_epi8(0x03), m30 = _mm512_set1_epi8(0x30);
    const __m512i k32 = _mm512_set1_epi8(32);
    for (int half = 0; half < 2; ++half) {
      const __m512i ql = _mm512_loadu_si512(b + 64 * half);
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * half));
      // bytes 0-31: qh, bytes 32-63: qh >> 2 (the high bits of quarters 0|1, and >> 4 of 2|3)
      const __m512i qh = _mm512_inserti64x4(_mm512_castsi256_si512(h), _mm256_srli_epi16(h, 2), 1);
      const __m512i q01 = _mm512_or_si512(_mm512_and_si512(ql, low4), _mm512_slli_epi16(_mm512_and_si512(qh, m03), 4));
      const __m512i q23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4), _mm512_and_si512(qh, m30));
      _mm512_storeu_si512(out + 128 * half, _mm512_sub_epi8(q01, k32));
      _mm512_storeu_si512(out + 128 * half + 64, _mm512_sub_epi8(q23, k32));
    }
  }
  static RLX_QK float hsum(V a) { return _mm512_reduce_add_ps(a.v); }
  static RLX_QK float h2f(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
  }
  static RLX_QK __m512i bytes(const uint8_t* p) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static RLX_QK V u8(const uint8_t* p) { return {_mm512_cvtepi32_ps(bytes(p))}; }
  // vpermps reads only the low 4 bits of each index: the low nibble needs no mask
  static RLX_QK V lut_lo(const uint8_t* p, const float* lut) {
    return {_mm512_permutexvar_ps(bytes(p), _mm512_load_ps(lut))};
  }
  static RLX_QK V lut_hi(const uint8_t* p, const float* lut) {
    return {_mm512_permutexvar_ps(_mm512_srli_epi32(bytes(p), 4), _mm512_load_ps(lut))};
  }
  static RLX_QK V nib_lo(const uint8_t* p) { return lut_lo(p, kNibbleLut); }
  static RLX_QK V nib_hi(const uint8_t* p) { return lut_hi(p, kNibbleLut); }
  static RLX_QK V crumb(const uint8_t* p, int shift) {
    return {_mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srl_epi32(bytes(p), _mm_cvtsi32_si128(shift)), _mm512_set1_epi32(3)))};
  }
  static RLX_QK V i8(const int8_t* p) {
    return {_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))))};
  }
  static RLX_QK V f16(const uint8_t* p) { return {_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))}; }
  static RLX_QK V bf16(const uint8_t* p) {
    const __m512i u = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return {_mm512_castsi512_ps(_mm512_slli_epi32(u, 16))};
  }
  static RLX_QK V add_bits(V q, uint32_t bits, float v) {
    return {_mm512_mask_add_ps(q.v, static_cast<__mmask16>(bits), q.v, _mm512_set1_ps(v))};
  }
  static RLX_QK V add_bytebit(V q, const uint8_t* p, uint8_t m, float v) {
    const __mmask16 k = _mm_test_epi8_mask(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), _mm_set1_epi8(static_cast<char>(m)));
    return {_mm512_mask_add_ps(q.v, k, q.v, _mm512_set1_ps(v))};
  }
  static RLX_QK V q6(const uint8_t* ql, bool hi, const uint8_t* qh, int shift) {
    __m128i l = _mm_loadu_si128(reinterpret_cast<const __m128i*>(ql));
    if (hi) l = _mm_srli_epi16(l, 4);
    l = _mm_and_si128(l, _mm_set1_epi8(0xF));
    __m128i h = _mm_srl_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qh)), _mm_cvtsi32_si128(shift));
    h = _mm_slli_epi16(_mm_and_si128(h, _mm_set1_epi8(3)), 4);
    return {_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_or_si128(l, h)))};
  }
};

#include "backends/cpu/kernels/qgemm_impl.h"

// The integer kernels with AVX-512 VNNI (vpdpbusd on ymm registers); without VNNI the avx2
// family's (vpmaddubsw) are used.
#define RLX_Q8_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c,avx2")))
#define RLX_Q8 RLX_Q8_TARGET __attribute__((always_inline)) inline
#define RLX_Q8_ENTRY RLX_Q8_TARGET __attribute__((noinline))
struct Dot8 {
  static RLX_Q8 __m256i dot(__m256i u, __m256i s) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s); }
  static RLX_Q8 __m256i dotacc(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }
  static constexpr bool kFullU8 = true;
  static constexpr int kNR = 4;
};
#include "backends/cpu/kernels/qgemm_q8.h"

// q4_0 decode (one row of x) on zmm registers, two blocks per vector. The ymm kernel above
// spends four port-5 operations per block on Intel cores (the nibble halves' insert, the
// scale's insert, conversion and broadcast), which bounded it near 4 cycles per block. Here:
//  - a group of 16 blocks' f16 scales comes in with one gather, is converted and multiplied by
//    x's 16 block scales at once, and the -8 offset's correction is one fma per group;
//  - blocks b and b + 1 are broadcast into lanes [b, b, b + 1, b + 1] (loads: no shuffle
//    port), the odd lanes shifted right by 4 under a mask, so the vector holds both blocks'
//    32 nibbles in element order, against 64 contiguous bytes of x in one vpdpbusd;
//  - the pair's scales reach their halves of the vector through one vpermps of the group's.
alignas(64) constexpr int32_t kQ4PairScaleIdx[8][16] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},         {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5},         {6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7},
    {8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9},         {10, 10, 10, 10, 10, 10, 10, 10, 11, 11, 11, 11, 11, 11, 11, 11},
    {12, 12, 12, 12, 12, 12, 12, 12, 13, 13, 13, 13, 13, 13, 13, 13}, {14, 14, 14, 14, 14, 14, 14, 14, 15, 15, 15, 15, 15, 15, 15, 15}};

// Blocks b and b + 1 of a q4_0 row (hi: whether b + 1 is there) times 64 bytes of x, with
// the pair's scales taken from d by pair p of the group: acc += isum * (dw * dx).
RLX_Q8 __m512 q4_0_pair_zmm(const uint8_t* blk, const int8_t* xq, __m512 d, int p, bool hi, __m512 acc) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  __m512i t = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2)));
  __m512i x;
  if (hi) {
    t = _mm512_mask_broadcast_i32x4(t, 0xFF00, _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 20)));
    x = _mm512_loadu_si512(xq);
  } else {
    x = _mm512_maskz_loadu_epi8(0xFFFFFFFFull, xq);  // zeros against the upper copy of block b
  }
  const __m512i u = _mm512_and_si512(_mm512_mask_srli_epi16(t, 0xFF00FF00u, t, 4), m4);
  const __m512i is = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, x);
  const __m512 s = _mm512_permutexvar_ps(_mm512_load_si512(kQ4PairScaleIdx[p]), d);
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), s, acc);
}

// How far ahead the decode kernels prefetch their rows, in the blocks each loop step reads:
// rows stream from DRAM in decode, and the hardware prefetcher alone left one thread well below
// the read bandwidth. Measured on the AMX Xeon with Llama-3.2-1B-shaped models (hidden 2048,
// 16 layers, vocab 128256; 0.85-1.2 GB), one thread, tokens/s:
// - q4_0 (16 blocks of 18 bytes a step): 1 step ahead 17.8, 6 or 8 steps 19.3-19.4 (two
//   threads 33.4 -> 37.5), 11 steps 18.4, 16 steps 13.9 (too many prefetches in flight);
// - q4_k (one 144-byte block a step): 2 blocks ahead 15.3, 12 blocks 17.8 (two threads 26.5 -> 33.0);
// - q6_k (one 210-byte block a step): 2 blocks 12.3-12.7, 4 blocks 13.1, 8 blocks 11.8.
constexpr int64_t kQ4PrefetchSteps = 6, kQ4kPrefetchBlocks = 12, kQ6kPrefetchBlocks = 4;

RLX_Q8_ENTRY void q4_0_row_zmm(const Q8Args& a, int64_t j0, int64_t j1) {
  constexpr int64_t BB = 18;
  const int64_t nb = a.nb;
  const __m512i offs = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                          _mm512_set1_epi32(BB));
  for (int64_t j = j0; j < j1; ++j) {
    const uint8_t* wr = a.w + j * a.ldw;
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    __m512 corr = _mm512_setzero_ps();
    for (int64_t b0 = 0; b0 < nb; b0 += 16) {
      const int cnt = static_cast<int>(std::min<int64_t>(16, nb - b0));
      const __mmask16 mk = static_cast<__mmask16>(cnt == 16 ? 0xFFFF : (1u << cnt) - 1);
      const uint8_t* g = wr + b0 * BB;
      const uint8_t* ahead = g + kQ4PrefetchSteps * 16 * BB;
      __builtin_prefetch(ahead);
      __builtin_prefetch(ahead + 64);
      __builtin_prefetch(ahead + 128);
      __builtin_prefetch(ahead + 192);
      __builtin_prefetch(ahead + 256);
      // each lane reads its block's first 4 bytes: the f16 scale and two bytes of nibbles
      const __m512i h = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), mk, offs, g, 1);
      const __m512 dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h));
      corr = _mm512_fmadd_ps(dw, _mm512_maskz_loadu_ps(mk, a.cx + b0), corr);
      const __m512 d = _mm512_mul_ps(dw, _mm512_maskz_loadu_ps(mk, a.dx + b0));
      const int8_t* xq = a.qx + 32 * b0;
      if (cnt == 16) {
#pragma GCC unroll 8
        for (int p = 0; p < 8; ++p) acc[p & 3] = q4_0_pair_zmm(g + 2 * p * BB, xq + 64 * p, d, p, true, acc[p & 3]);
      } else {
        for (int p = 0; 2 * p < cnt; ++p)
          acc[p & 3] = q4_0_pair_zmm(g + 2 * p * BB, xq + 64 * p, d, p, 2 * p + 1 < cnt, acc[p & 3]);
      }
    }
    const __m512 s = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
    a.y[j] = _mm512_reduce_add_ps(s) - _mm512_reduce_add_ps(corr);
  }
}

// q4_k decode (one row of x) on zmm registers: each 64-value chunk of a 256-value block is one
// 32-byte load broadcast to both halves of a vector, the upper half shifted right by 4 under a
// mask, so the vector holds the chunk's 64 nibbles in element order against 64 contiguous bytes
// of x in one vpdpbusd; the two sub-blocks' scales (d * sc * dx) reach their halves through
// one vpermps. The 6-bit scales and mins are unpacked with 32-bit integer operations.
RLX_Q8_ENTRY void q4_k_row_zmm(const Q8Args& a, int64_t j0, int64_t j1) {
  constexpr int64_t BB = 144;
  const int64_t nb = a.nb / 8;  // a.nb counts blocks of 32
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  for (int64_t j = j0; j < j1; ++j) {
    const uint8_t* wr = a.w + j * a.ldw;
    __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    __m256 accm = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = wr + b * BB;
      __builtin_prefetch(blk + kQ4kPrefetchBlocks * BB);
      __builtin_prefetch(blk + kQ4kPrefetchBlocks * BB + 64);
      __builtin_prefetch(blk + kQ4kPrefetchBlocks * BB + 128);
      // scales[12]: bytes 0-3 the low 6 bits of sc[0..3] (top 2 bits: sc[4..7]'s high bits),
      // bytes 4-7 likewise for m, bytes 8-11 the low nibbles of sc[4..7] and m[4..7]
      uint32_t s[3];
      std::memcpy(s, blk + 4, 12);
      const uint32_t sc_lo = s[0] & 0x3F3F3F3Fu, m_lo = s[1] & 0x3F3F3F3Fu;
      const uint32_t sc_hi = (s[2] & 0x0F0F0F0Fu) | (((s[0] >> 6) & 0x03030303u) << 4);
      const uint32_t m_hi = ((s[2] >> 4) & 0x0F0F0F0Fu) | (((s[1] >> 6) & 0x03030303u) << 4);
      const __m128i sm = _mm_setr_epi32(static_cast<int>(sc_lo), static_cast<int>(sc_hi), static_cast<int>(m_lo),
                                        static_cast<int>(m_hi));
      const __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sm));
      const __m256 mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(sm, sm)));
      accm = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(q8_h2f(blk + 2)), mn), _mm256_loadu_ps(a.cx + 8 * b), accm);
      const __m256 s8 = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(q8_h2f(blk)), sc), _mm256_loadu_ps(a.dx + 8 * b));
      const __m512 d = _mm512_castps256_ps512(s8);  // vpermps below reads lanes 0..7 only
      const int8_t* xq = a.qx + 256 * b;
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        const __m512i t = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16 + 32 * c)));
        const __m512i u = _mm512_and_si512(_mm512_mask_srli_epi16(t, 0xFFFF0000u, t, 4), m4);
        const __m512i is = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, _mm512_loadu_si512(xq + 64 * c));
        const __m512 sv = _mm512_permutexvar_ps(_mm512_load_si512(kQ4PairScaleIdx[c]), d);
        acc[c & 1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), sv, acc[c & 1]);
      }
    }
    a.y[j] = _mm512_reduce_add_ps(_mm512_add_ps(acc[0], acc[1])) - q8_hsum(accm);
  }
}

// q6_k decode (one row of x) on zmm registers. A 128-value half of a 256-value block is two
// vectors of 64 six-bit values in element order: the low nibbles (ql, one 64-byte load) or
// high nibbles (shifted down), with the 2-bit high parts from qh (32 bytes broadcast to both
// halves) shifted into bits 4-5 by per-half counts and merged in one vpternlogd. The values
// are used unsigned (0..63) in vpdpbusd, whose accumulator input carries the -32 offset:
// -32 * (sum of each 4 quants of x), computed once per call. Each 16-value group's scale
// (d * scales[g] * dx) reaches its 128-bit lane through one vpermps.
alignas(64) constexpr int32_t kQ6GroupIdx[4][16] = {{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3},
                                                    {4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7},
                                                    {8, 8, 8, 8, 9, 9, 9, 9, 10, 10, 10, 10, 11, 11, 11, 11},
                                                    {12, 12, 12, 12, 13, 13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15}};

RLX_Q8_ENTRY void q6_k_row_zmm(const Q8Args& a, int64_t j0, int64_t j1) {
  constexpr int64_t BB = 210;
  const int64_t nb = a.nb / 8;  // a.nb counts blocks of 32
  const int64_t k = 32 * a.nb;
  static thread_local std::vector<int32_t> offset_buf;
  if (static_cast<int64_t>(offset_buf.size()) < k / 4) offset_buf.resize(static_cast<size_t>(k / 4));
  int32_t* off = offset_buf.data();
  const __m512i zero = _mm512_setzero_si512();
  for (int64_t i = 0; i < k; i += 64)
    _mm512_storeu_si512(off + i / 4, _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, _mm512_set1_epi8(32),
                                                                                _mm512_loadu_si512(a.qx + i))));
  const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
  // 16-bit shift counts by vector half: values 0..31 take qh bits 0-1 (<< 4), 32..63 bits 2-3
  // (<< 2); values 64..95 bits 4-5 (as they are), 96..127 bits 6-7 (>> 2)
  const __m512i sh_lo = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
  const __m512i sh_hi = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
  const __m512i dx_pairs = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  for (int64_t j = j0; j < j1; ++j) {
    const uint8_t* wr = a.w + j * a.ldw;
    __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = wr + b * BB;
      __builtin_prefetch(blk + kQ6kPrefetchBlocks * BB);
      __builtin_prefetch(blk + kQ6kPrefetchBlocks * BB + 64);
      __builtin_prefetch(blk + kQ6kPrefetchBlocks * BB + 128);
      __builtin_prefetch(blk + kQ6kPrefetchBlocks * BB + 192);
      const __m512 sc = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192))));
      const __m512 dx = _mm512_permutexvar_ps(dx_pairs, _mm512_castps256_ps512(_mm256_loadu_ps(a.dx + 8 * b)));
      const __m512 f = _mm512_mul_ps(_mm512_mul_ps(sc, _mm512_set1_ps(q8_h2f(blk + 208))), dx);
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const int64_t v0 = 256 * b + 128 * h;  // the half's first value
        const __m512i ql = _mm512_loadu_si512(blk + 64 * h);
        const __m512i hb = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * h)));
        // A | (B & C): the nibbles, or'ed with the high bits masked to bits 4-5
        const __m512i q0 = _mm512_ternarylogic_epi32(_mm512_and_si512(ql, m4), _mm512_sllv_epi16(hb, sh_lo), m30, 0xF8);
        const __m512i q1 = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                                     _mm512_srlv_epi16(hb, sh_hi), m30, 0xF8);
        const __m512i s0 = _mm512_dpbusd_epi32(_mm512_loadu_si512(off + v0 / 4), q0, _mm512_loadu_si512(a.qx + v0));
        const __m512i s1 = _mm512_dpbusd_epi32(_mm512_loadu_si512(off + v0 / 4 + 16), q1, _mm512_loadu_si512(a.qx + v0 + 64));
        acc[0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s0), _mm512_permutexvar_ps(_mm512_load_si512(kQ6GroupIdx[2 * h]), f), acc[0]);
        acc[1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s1), _mm512_permutexvar_ps(_mm512_load_si512(kQ6GroupIdx[2 * h + 1]), f), acc[1]);
      }
    }
    a.y[j] = _mm512_reduce_add_ps(_mm512_add_ps(acc[0], acc[1]));
  }
}

// The int8 linear layer's panel kernel (I8PanelArgs, pack_i8's layout): MR rows of x by the
// panel's 32 channels in 2 x MR zmm accumulators. Per quad of k: the panel's two 64-byte
// vectors are loaded once and each row's 4 quants (u8, q + 128) broadcast into a vpdpbusd
// against both, 16 channels x 4 products per instruction. The sums are exact in int32; the
// offset 128 * (sum of the channel's weights) comes out at the end, then y = t * sx * ws + bias
// (the operations and order of i8_rows). The per-channel vectors of that step are loaded only
// after the loop: 24 accumulators, 2 weight vectors and a broadcast fill the 32 registers.
// acc += u8 x s8 quads, in place: GCC 12 compiles the intrinsic as a copy, a vpdpbusd and a
// copy back, and with 24 accumulators live it then spills them every iteration (measured
// 1.7x slower).
RLX_Q8 void dpbusd(__m512i& acc, __m512i u, __m512i s) { asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s)); }

struct I8PanelTail {
  __mmask16 m0, m1;
};

template <int MR>
RLX_Q8 void i8_panel_tile(const I8PanelArgs& a, int64_t i, I8PanelTail t) {
  __m512i c[MR][2];
#pragma GCC unroll 12
  for (int r = 0; r < MR; ++r) c[r][0] = c[r][1] = _mm512_setzero_si512();
  const uint8_t* x = a.qx + i * a.ldq;
  const int8_t* w = a.panel;
  const int64_t ldq = a.ldq;
  for (int64_t q = 0; q < a.quads; ++q, w += 128, x += 4) {
    const __m512i w0 = _mm512_load_si512(w), w1 = _mm512_load_si512(w + 64);
#pragma GCC unroll 12
    for (int r = 0; r < MR; ++r) {
      int32_t quad;
      std::memcpy(&quad, x + r * ldq, 4);
      const __m512i xv = _mm512_set1_epi32(quad);
      dpbusd(c[r][0], xv, w0);
      dpbusd(c[r][1], xv, w1);
    }
  }
  const __m512i k128 = _mm512_set1_epi32(128);
  const __m512i off0 = _mm512_mullo_epi32(_mm512_loadu_si512(a.sums), k128);
  const __m512i off1 = _mm512_mullo_epi32(_mm512_loadu_si512(a.sums + 16), k128);
  const __m512 ws0 = a.ws_stride ? _mm512_maskz_loadu_ps(t.m0, a.ws) : _mm512_set1_ps(a.ws[0]);
  const __m512 ws1 = a.ws_stride ? _mm512_maskz_loadu_ps(t.m1, a.ws + 16) : _mm512_set1_ps(a.ws[0]);
  const __m512 b0 = a.bias ? _mm512_maskz_loadu_ps(t.m0, a.bias) : _mm512_setzero_ps();
  const __m512 b1 = a.bias ? _mm512_maskz_loadu_ps(t.m1, a.bias + 16) : _mm512_setzero_ps();
#pragma GCC unroll 12
  for (int r = 0; r < MR; ++r) {
    const __m512 s = _mm512_set1_ps(a.sx[i + r]);
    float* y = a.y + (i + r) * a.ldy;
    const __m512 y0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(c[r][0], off0)), s);
    const __m512 y1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(c[r][1], off1)), s);
    _mm512_mask_storeu_ps(y, t.m0, _mm512_fmadd_ps(y0, ws0, b0));
    _mm512_mask_storeu_ps(y + 16, t.m1, _mm512_fmadd_ps(y1, ws1, b1));
  }
}

RLX_Q8_ENTRY void i8_panel(const I8PanelArgs& a, int64_t i0, int64_t i1) {
  I8PanelTail t;
  t.m0 = static_cast<__mmask16>(a.cols >= 16 ? 0xFFFF : (1u << a.cols) - 1);
  t.m1 = static_cast<__mmask16>(a.cols >= 32 ? 0xFFFF : a.cols <= 16 ? 0 : (1u << (a.cols - 16)) - 1);
  int64_t i = i0;
  for (; i + 12 <= i1; i += 12) i8_panel_tile<12>(a, i, t);
  switch (i1 - i) {
#define RLX_I8_TAIL(R) \
  case R: i8_panel_tile<R>(a, i, t); break;
    RLX_I8_TAIL(1) RLX_I8_TAIL(2) RLX_I8_TAIL(3) RLX_I8_TAIL(4) RLX_I8_TAIL(5) RLX_I8_TAIL(6)
    RLX_I8_TAIL(7) RLX_I8_TAIL(8) RLX_I8_TAIL(9) RLX_I8_TAIL(10) RLX_I8_TAIL(11)
#undef RLX_I8_TAIL
    default: break;
  }
}

// One row of x to the panel kernel's quants (q + 128, as i8_quantize_row in qgemm_q8.h with
// kFullU8, which it replaces on this family): 16 values per step, packed to bytes with vpmovdb.
// The same results as the portable loop: amax ignores NaN (max with the running value second),
// round(x / s) to nearest even, NaN clamps to -127. x / s is x * (1 / s) except near a
// half-integer (kQuantTieBand, qgemm_q8.h): vdivps, about 10 cycles a vector here, cost MiniLM
// int8 1-3% of its time at batch 8.
RLX_Q8_ENTRY float i8_quantize_row_512(const float* x, int64_t k, float x_scale, uint8_t* q) {
  float s = x_scale;
  if (s == 0.f) {
    __m512 m = _mm512_setzero_ps();
    for (int64_t p = 0; p < k; p += 16) {
      const __mmask16 mk = static_cast<__mmask16>(k - p >= 16 ? 0xFFFF : (1u << (k - p)) - 1);
      m = _mm512_max_ps(_mm512_abs_ps(_mm512_maskz_loadu_ps(mk, x + p)), m);
    }
    s = std::max(_mm512_reduce_max_ps(m) / 127.f, 1e-30f);
  }
  const __m512 sv = _mm512_set1_ps(s), lo = _mm512_set1_ps(-127.f), hi = _mm512_set1_ps(127.f);
  const __m512i off = _mm512_set1_epi32(128);
  const float r = 1.f / s;
  const bool multiply = std::isnormal(r);
  const __m512 rv = _mm512_set1_ps(r), half = _mm512_set1_ps(0.5f), near = _mm512_set1_ps(kQuantTieBand);
  for (int64_t p = 0; p < k; p += 16) {
    const __mmask16 mk = static_cast<__mmask16>(k - p >= 16 ? 0xFFFF : (1u << (k - p)) - 1);
    const __m512 xv = _mm512_maskz_loadu_ps(mk, x + p);
    __m512 v;
    if (multiply) {
      v = _mm512_mul_ps(xv, rv);
      const __m512 frac = _mm512_sub_ps(v, _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      if (_mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(_mm512_abs_ps(frac), half)), near, _CMP_LT_OQ))
        v = _mm512_div_ps(xv, sv);
    } else {
      v = _mm512_div_ps(xv, sv);
    }
    v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
    const __m512i iv = _mm512_add_epi32(_mm512_cvt_roundps_epi32(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), off);
    _mm_mask_storeu_epi8(q + p, mk, _mm512_cvtepi32_epi8(iv));
  }
  return s;
}

// Prefill of q8_0, q4_0 and int4_g128[_asym] on zmm registers: the panel of weight rows is repacked by the 8-row
// code (qgemm_q8.h panel_repack_block8) two groups at a time, side by side, so that each 64-byte
// vector holds 4 values of 16 weight rows and each broadcast of 4 bytes of x feeds one vpdpbusd
// for 16 outputs (the ymm kernels cover 8). q8_0's signed weights: |w| times x negated where w
// is negative (AVX-512 has no vpsignb: a masked subtract from zero); q4_0's nibbles are
// unsigned and multiply x directly, the -8 (or int4_g128_asym's min) coming out through x's
// block sums.
template <QT8 T, int MR>
RLX_Q8 void panel_group16(const Q8Args& a, const uint8_t* pq, const float* pd, const float* pm, float* y, int64_t ldy,
                          int64_t cols) {
  __m512 acc[MR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) acc[r] = _mm512_setzero_ps();
  const __m512i zero = _mm512_setzero_si512();
  for (int64_t b = 0; b < a.nb; ++b) {
    __m512i s[MR];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) s[r] = zero;
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      const __m512i wv = _mm512_loadu_si512(pq + 512 * b + 64 * g);
      if constexpr (T == QT8::q8_0) {
        const __m512i u = _mm512_abs_epi8(wv);
        const __mmask64 neg = _mm512_movepi8_mask(wv);
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) {
          int32_t x4;
          __builtin_memcpy(&x4, a.qx + r * a.ldq + 32 * b + 4 * g, 4);
          const __m512i xv = _mm512_set1_epi32(x4);
          dpbusd(s[r], u, _mm512_mask_sub_epi8(xv, neg, zero, xv));
        }
      } else {
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) {
          int32_t x4;
          __builtin_memcpy(&x4, a.qx + r * a.ldq + 32 * b + 4 * g, 4);
          dpbusd(s[r], wv, _mm512_set1_epi32(x4));
        }
      }
    }
    const __m512 d16 = _mm512_loadu_ps(pd + 16 * b);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[r]), _mm512_mul_ps(d16, _mm512_set1_ps(a.dx[r * a.ldd + b])), acc[r]);
      if constexpr (T != QT8::q8_0)  // the 4-bit formats' -8 or min
        acc[r] = _mm512_fnmadd_ps(_mm512_loadu_ps(pm + 16 * b), _mm512_set1_ps(a.cx[r * a.ldd + b]), acc[r]);
    }
  }
  const __mmask16 mk = static_cast<__mmask16>(cols >= 16 ? 0xFFFF : (1u << cols) - 1);
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) _mm512_mask_storeu_ps(y + r * ldy, mk, acc[r]);
}

template <QT8 T>
struct Group16 {
  template <int MR>
  static RLX_Q8 void run(const Q8Args& a, const uint8_t* pq, const float* pd, const float* pm, float* y, int64_t ldy,
                         int64_t cols) {
    panel_group16<T, MR>(a, pq, pd, pm, y, ldy, cols);
  }
};

template <QT8 T>
RLX_Q8_ENTRY void q8_panel16(const Q8Args& a, int64_t m, int64_t j0, int64_t j1) {
  panel_driver<T, 16, Group16<T>>(a, m, j0, j1);
}

// Prefill of q8_0 and q4_0 on AMX-INT8 tiles (where the CPU has them; see set_qgemm_amx): the
// weight panel is repacked as for the zmm kernel (16-row groups: per block, 8 quads of 16 rows
// x 4 bytes, which is the tiles' B layout), and 16 rows of x by one group of 16 weight rows are
// one block of C, its 16 f32 accumulators in registers. Per block of 32 k-values a tile of x's
// quants (read in place) times a tile of weights gives 16 x 16 exact int32 sums (tdpbssd:
// signed x by q8_0's signed quants; tdpbsud: by q4_0's unsigned nibbles, the -8 coming back
// through x's sums as in the zmm kernel), which are scaled by x's and w's block scales into the
// accumulators, the zmm kernel's operations. Two blocks go at a time on two tiles, so that one
// block's product runs while the other's sums are scaled. The results equal the zmm kernel's up
// to the order of the f32 adds (each block's int32 sum is exact in both). x's quants must be
// readable for a multiple of 16 rows (quantize_x pads them).
#define RLX_AMX_Q8 \
  __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c,avx2")))

// acc[r] += the block's int32 sums of row r scaled by w's block scales d and x's dx[r * ldd]
// (for q4_0, minus w's offsets m times x's cx[r * ldd]), for the first n_rows rows.
template <QT8 T, int ROWS>
RLX_AMX_Q8 __attribute__((always_inline)) inline void q8_amx_scale(const int32_t* sums, const float* d, const float* m,
                                                                   const float* dx, const float* cx, int64_t ldd,
                                                                   int64_t n_rows, __m512 (&acc)[16]) {
  const __m512 dw = _mm512_loadu_ps(d), mw = _mm512_loadu_ps(m);
#pragma GCC unroll 16
  for (int r = 0; r < 16; ++r) {
    if (!ROWS && r >= n_rows) break;
    const __m512 s = _mm512_cvtepi32_ps(_mm512_load_si512(sums + 16 * r));
    acc[r] = _mm512_fmadd_ps(s, _mm512_mul_ps(dw, _mm512_set1_ps(dx[r * ldd])), acc[r]);
    if constexpr (T != QT8::q8_0)  // q4_0's -8
      acc[r] = _mm512_fnmadd_ps(mw, _mm512_set1_ps(cx[r * ldd]), acc[r]);
  }
}

// One 16 x 16 block: ROWS valid rows of x (16, or 0: `rows` of them), cols valid columns of y.
template <QT8 T, int ROWS>
RLX_AMX_Q8 __attribute__((noinline)) void q8_amx_block(const Q8Args& a, int64_t i, int64_t rows, const uint8_t* q,
                                                       const float* d, float* y, int64_t cols) {
  const int64_t nb = a.nb, n_rows = ROWS ? ROWS : rows;
  const int8_t* x = a.qx + i * a.ldq;
  const float* dx = a.dx + i * a.ldd;
  const float* cx = a.cx + i * a.ldd;
  const float* dm = d + nb * 16;  // the offsets' coefficients
  alignas(64) int32_t c[2][256];
  __m512 acc[16];
#pragma GCC unroll 16
  for (int r = 0; r < 16; ++r) acc[r] = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    __asm__ volatile("" ::: "memory");  // the tile intrinsics are asm without memory operands
    _tile_zero(0);
    _tile_zero(1);
    _tile_loadd(4, x + 32 * b, a.ldq);
    _tile_loadd(6, q + b * 512, 64);
    _tile_loadd(5, x + 32 * (b + 1), a.ldq);
    _tile_loadd(7, q + (b + 1) * 512, 64);
    if constexpr (T == QT8::q8_0) {
      _tile_dpbssd(0, 4, 6);
      _tile_dpbssd(1, 5, 7);
    } else {
      _tile_dpbsud(0, 4, 6);
      _tile_dpbsud(1, 5, 7);
    }
    _tile_stored(0, c[0], 64);
    _tile_stored(1, c[1], 64);
    __asm__ volatile("" ::: "memory");
    q8_amx_scale<T, ROWS>(c[0], d + b * 16, dm + b * 16, dx + b, cx + b, a.ldd, n_rows, acc);
    q8_amx_scale<T, ROWS>(c[1], d + (b + 1) * 16, dm + (b + 1) * 16, dx + b + 1, cx + b + 1, a.ldd, n_rows, acc);
  }
  if (b < nb) {
    __asm__ volatile("" ::: "memory");
    _tile_zero(0);
    _tile_loadd(4, x + 32 * b, a.ldq);
    _tile_loadd(6, q + b * 512, 64);
    if constexpr (T == QT8::q8_0)
      _tile_dpbssd(0, 4, 6);
    else
      _tile_dpbsud(0, 4, 6);
    _tile_stored(0, c[0], 64);
    __asm__ volatile("" ::: "memory");
    q8_amx_scale<T, ROWS>(c[0], d + b * 16, dm + b * 16, dx + b, cx + b, a.ldd, n_rows, acc);
  }
  const __mmask16 mk = static_cast<__mmask16>(cols >= 16 ? 0xFFFF : (1u << cols) - 1);
#pragma GCC unroll 16
  for (int r = 0; r < 16; ++r) {
    if (!ROWS && r >= n_rows) break;
    _mm512_mask_storeu_ps(y + r * a.ldy, mk, acc[r]);
  }
}

template <QT8 T>
RLX_AMX_Q8 __attribute__((noinline)) void q8_panel_amx(const Q8Args& a, int64_t m, int64_t j0, int64_t j1) {
  constexpr int G = 16;
  const auto [pq, pd] = panel_repack<T, G>(a, j0, j1);
  gemm_detail::amx_configure_tiles(gemm_detail::AmxTiles::int8_blocks32);
  const int64_t nb = a.nb, groups = (j1 - j0 + G - 1) / G;
  for (int64_t i = 0; i < m; i += 16) {
    const int64_t rows = std::min<int64_t>(16, m - i);
    for (int64_t g = 0; g < groups; ++g) {
      const uint8_t* q = pq + g * nb * 32 * G;
      const float* d = pd + g * nb * 2 * G;
      float* y = a.y + i * a.ldy + j0 + g * G;
      const int64_t cols = std::min<int64_t>(G, j1 - j0 - g * G);
      if (rows == 16)
        q8_amx_block<T, 16>(a, i, rows, q, d, y, cols);
      else
        q8_amx_block<T, 0>(a, i, rows, q, d, y, cols);
    }
  }
}

QKernelFamily make_avx512() {
  QKernelFamily f = make_family("avx512", GemmIsa::avx512);
  if (__builtin_cpu_supports("avx512vnni")) {
    fill_q8_family(f);
    f.q8rows[static_cast<int>(QT8::q4_0)][0] = q4_0_row_zmm;
    f.q8rows[static_cast<int>(QT8::q4_k)][0] = q4_k_row_zmm;
    f.q8rows[static_cast<int>(QT8::q6_k)][0] = q6_k_row_zmm;
    f.i8panel = i8_panel;
    f.i8quant = i8_quantize_row_512;
    f.q8panel[static_cast<int>(QT8::q8_0)] = q8_panel16<QT8::q8_0>;
    f.q8panel[static_cast<int>(QT8::q4_0)] = q8_panel16<QT8::q4_0>;
    f.q8panel[static_cast<int>(QT8::int4_g128)] = q8_panel16<QT8::int4_g128>;
    f.q8panel[static_cast<int>(QT8::int4_g128_asym)] = q8_panel16<QT8::int4_g128_asym>;
    if (gemm_detail::amx_int8_supported()) {
      f.q8panel_amx[static_cast<int>(QT8::q8_0)] = q8_panel_amx<QT8::q8_0>;
      f.q8panel_amx[static_cast<int>(QT8::q4_0)] = q8_panel_amx<QT8::q4_0>;
    }
  } else if (const QKernelFamily* g = qgemm_avx2_family()) {
    for (int t = 0; t < ::rlx::quant::kNumQTypes; ++t)
      for (int r = 0; r < kQGemmFusedMaxRows; ++r) f.q8rows[t][r] = g->q8rows[t][r];
    f.i8rows = g->i8rows;
    f.i8quant = g->i8quant;
    f.i8_offset_x = g->i8_offset_x;
  }
  return f;
}

}  // namespace

const QKernelFamily* qgemm_avx512_family() {
  static const QKernelFamily f = make_avx512();
  return &f;
}

}  // namespace rlx::cpu::qgemm_detail

#else

namespace rlx::cpu::qgemm_detail {
const QKernelFamily* qgemm_avx512_family() { return nullptr; }
}  // namespace rlx::cpu::qgemm_detail

#endif
