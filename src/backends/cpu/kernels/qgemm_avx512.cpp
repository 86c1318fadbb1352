// AVX-512 quantized kernels: 16 values per zmm register. Nibbles become floats through one
// vpermps table lookup (which also applies iq4_nl's non-linear levels), the 5th bits of
// q5 formats through masked adds. Compiled with target attributes, run only when the
// dispatcher saw avx512f/bw/vl/dq (+fma, f16c) at run time.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
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

QKernelFamily make_avx512() {
  QKernelFamily f = make_family("avx512", GemmIsa::avx512);
  if (__builtin_cpu_supports("avx512vnni")) {
    fill_q8_family(f);
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
