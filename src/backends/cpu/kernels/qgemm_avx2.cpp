// AVX2 (+FMA, F16C) quantized kernels: 16 values as two ymm registers. Table lookups use two
// 8-entry vpermps and a blend on the index's bit 3. Compiled with target attributes, run only
// when the dispatcher saw avx2, fma and f16c at run time.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "backends/cpu/kernels/qgemm.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define RLX_QK_TARGET __attribute__((target("avx2,fma,f16c")))
#define RLX_QK RLX_QK_TARGET __attribute__((always_inline)) inline
#define RLX_QK_ENTRY RLX_QK_TARGET __attribute__((noinline))

namespace rlx::cpu::qgemm_detail {
namespace {

struct Isa {
  struct V {
    __m256 lo, hi;
  };
  static RLX_QK V zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  static RLX_QK V load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
  static RLX_QK void store(float* p, V a) {
    _mm256_storeu_ps(p, a.lo);
    _mm256_storeu_ps(p + 8, a.hi);
  }
  static RLX_QK V set1(float f) { return {_mm256_set1_ps(f), _mm256_set1_ps(f)}; }
  static RLX_QK V fma(V a, V b, V c) { return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)}; }
  static RLX_QK V mul(V a, V b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
  static RLX_QK V sub(V a, V b) { return {_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)}; }
  static RLX_QK V halves(float a, float b) { return {_mm256_set1_ps(a), _mm256_set1_ps(b)}; }
  static RLX_QK void q6_unpack(const uint8_t* b, int8_t* out) {
    const __m256i low4 = _mm256_set1_epi8(0x0F), m03 = _mm256_set1_epi8(0x03), m30 = _mm256_set1_epi8(0x30);
    const __m256i k32 = _mm256_set1_epi8(32);
    for (int half = 0; half < 2; ++half) {
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * half));
      for (int part = 0; part < 2; ++part) {
        // part 0: quarters 0 (low nibbles) and 2 (high nibbles), high bits from qh;
        // part 1: quarters 1 and 3, high bits from qh >> 2
        const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 64 * half + 32 * part));
        const __m256i qh = part ? _mm256_srli_epi16(h, 2) : h;
        const __m256i qa = _mm256_or_si256(_mm256_and_si256(ql, low4), _mm256_slli_epi16(_mm256_and_si256(qh, m03), 4));
        const __m256i qb = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql, 4), low4), _mm256_and_si256(qh, m30));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 128 * half + 32 * part), _mm256_sub_epi8(qa, k32));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 128 * half + 64 + 32 * part), _mm256_sub_epi8(qb, k32));
      }
    }
  }
  static RLX_QK float hsum(V a) {
    const __m256 s = _mm256_add_ps(a.lo, a.hi);
    __m128 r = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
  }
  static RLX_QK float h2f(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
  }
  // 16 bytes as two vectors of 8 int32
  static RLX_QK void widen(__m128i b, __m256i& lo, __m256i& hi) {
    lo = _mm256_cvtepu8_epi32(b);
    hi = _mm256_cvtepu8_epi32(_mm_unpackhi_epi64(b, b));
  }
  static RLX_QK __m128i load16(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
  static RLX_QK V from_u8(__m128i b) {
    __m256i lo, hi;
    widen(b, lo, hi);
    return {_mm256_cvtepi32_ps(lo), _mm256_cvtepi32_ps(hi)};
  }
  static RLX_QK V u8(const uint8_t* p) { return from_u8(load16(p)); }
  static RLX_QK V nib_lo(const uint8_t* p) { return from_u8(_mm_and_si128(load16(p), _mm_set1_epi8(0xF))); }
  static RLX_QK V nib_hi(const uint8_t* p) {
    return from_u8(_mm_and_si128(_mm_srli_epi16(load16(p), 4), _mm_set1_epi8(0xF)));
  }
  static RLX_QK __m256 lut8(__m256i idx, __m256 t0, __m256 t1) {
    const __m256 a = _mm256_permutevar8x32_ps(t0, idx), b = _mm256_permutevar8x32_ps(t1, idx);
    return _mm256_blendv_ps(a, b, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
  }
  static RLX_QK V lut(__m128i nibbles, const float* t) {
    __m256i lo, hi;
    widen(nibbles, lo, hi);
    const __m256 t0 = _mm256_loadu_ps(t), t1 = _mm256_loadu_ps(t + 8);
    return {lut8(lo, t0, t1), lut8(hi, t0, t1)};
  }
  static RLX_QK V lut_lo(const uint8_t* p, const float* t) { return lut(_mm_and_si128(load16(p), _mm_set1_epi8(0xF)), t); }
  static RLX_QK V lut_hi(const uint8_t* p, const float* t) {
    return lut(_mm_and_si128(_mm_srli_epi16(load16(p), 4), _mm_set1_epi8(0xF)), t);
  }
  static RLX_QK V crumb(const uint8_t* p, int shift) {
    return from_u8(_mm_and_si128(_mm_srl_epi16(load16(p), _mm_cvtsi32_si128(shift)), _mm_set1_epi8(3)));
  }
  static RLX_QK V i8(const int8_t* p) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return {_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(b, b)))};
  }
  static RLX_QK V f16(const uint8_t* p) {
    return {_mm256_cvtph_ps(load16(p)), _mm256_cvtph_ps(load16(p + 16))};
  }
  static RLX_QK V bf16(const uint8_t* p) {
    const __m256i lo = _mm256_cvtepu16_epi32(load16(p)), hi = _mm256_cvtepu16_epi32(load16(p + 16));
    return {_mm256_castsi256_ps(_mm256_slli_epi32(lo, 16)), _mm256_castsi256_ps(_mm256_slli_epi32(hi, 16))};
  }
  static RLX_QK __m256 bit_select(__m256i sel, float v) {
    const __m256i on = _mm256_cmpeq_epi32(sel, _mm256_setzero_si256());
    return _mm256_andnot_ps(_mm256_castsi256_ps(on), _mm256_set1_ps(v));
  }
  static RLX_QK V add_bits(V q, uint32_t bits, float v) {
    const __m256i lanes = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256i lo = _mm256_and_si256(_mm256_set1_epi32(static_cast<int>(bits & 0xFF)), lanes);
    const __m256i hi = _mm256_and_si256(_mm256_set1_epi32(static_cast<int>((bits >> 8) & 0xFF)), lanes);
    return {_mm256_add_ps(q.lo, bit_select(lo, v)), _mm256_add_ps(q.hi, bit_select(hi, v))};
  }
  static RLX_QK V add_bytebit(V q, const uint8_t* p, uint8_t m, float v) {
    __m256i lo, hi;
    widen(_mm_and_si128(load16(p), _mm_set1_epi8(static_cast<char>(m))), lo, hi);
    return {_mm256_add_ps(q.lo, bit_select(lo, v)), _mm256_add_ps(q.hi, bit_select(hi, v))};
  }
  static RLX_QK V q6(const uint8_t* ql, bool hi, const uint8_t* qh, int shift) {
    __m128i l = load16(ql);
    if (hi) l = _mm_srli_epi16(l, 4);
    l = _mm_and_si128(l, _mm_set1_epi8(0xF));
    __m128i h = _mm_srl_epi16(load16(qh), _mm_cvtsi32_si128(shift));
    h = _mm_slli_epi16(_mm_and_si128(h, _mm_set1_epi8(3)), 4);
    return from_u8(_mm_or_si128(l, h));
  }
};

#include "backends/cpu/kernels/qgemm_impl.h"

#define RLX_Q8 RLX_QK
#define RLX_Q8_ENTRY RLX_QK_ENTRY
struct Dot8 {
  static RLX_Q8 __m256i dot(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
  }
  static RLX_Q8 __m256i dotacc(__m256i acc, __m256i u, __m256i s) { return _mm256_add_epi32(acc, dot(u, s)); }
  static constexpr bool kFullU8 = false;
  static constexpr int kNR = 2;
};
#include "backends/cpu/kernels/qgemm_q8.h"

QKernelFamily make_avx2() {
  QKernelFamily f = make_family("avx2", GemmIsa::avx2);
  fill_q8_family(f);
  return f;
}

}  // namespace

const QKernelFamily* qgemm_avx2_family() {
  static const QKernelFamily f = make_avx2();
  return &f;
}

}  // namespace rlx::cpu::qgemm_detail

#else

namespace rlx::cpu::qgemm_detail {
const QKernelFamily* qgemm_avx2_family() { return nullptr; }
}  // namespace rlx::cpu::qgemm_detail

#endif
