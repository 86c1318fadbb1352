// A 16 x 16 float transpose in AVX-512 registers, shared by the GEMM's packing routines and
// the attention kernel's K^T gather. Only include it from files that call it from functions
// compiled for AVX-512 (a target attribute with at least avx512f).
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

namespace rlx::cpu {

// Transposes 16 rows of 16 floats in registers: on return r[c] holds column c. Three rounds of
// in-lane unpacks and 128-bit lane shuffles, 64 shuffle instructions in all.
__attribute__((target("avx512f"), always_inline)) inline void transpose16x16(__m512 r[16]) {
  __m512 t[16], u[16];
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    t[2 * j] = _mm512_unpacklo_ps(r[2 * j], r[2 * j + 1]);
    t[2 * j + 1] = _mm512_unpackhi_ps(r[2 * j], r[2 * j + 1]);
  }
  // u[4j + q], 128-bit lane L: rows 4j..4j+3 of column 4L + q.
#pragma GCC unroll 8
  for (int j = 0; j < 4; ++j) {
    const __m512d t0 = _mm512_castps_pd(t[4 * j]), t1 = _mm512_castps_pd(t[4 * j + 1]);
    const __m512d t2 = _mm512_castps_pd(t[4 * j + 2]), t3 = _mm512_castps_pd(t[4 * j + 3]);
    u[4 * j + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
    u[4 * j + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    u[4 * j + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
    u[4 * j + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
  }
#pragma GCC unroll 8
  for (int q = 0; q < 4; ++q) {
    const __m512 v0 = _mm512_shuffle_f32x4(u[q], u[4 + q], 0x44);
    const __m512 v1 = _mm512_shuffle_f32x4(u[q], u[4 + q], 0xEE);
    const __m512 w0 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0x44);
    const __m512 w1 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0xEE);
    r[0 + q] = _mm512_shuffle_f32x4(v0, w0, 0x88);
    r[4 + q] = _mm512_shuffle_f32x4(v0, w0, 0xDD);
    r[8 + q] = _mm512_shuffle_f32x4(v1, w1, 0x88);
    r[12 + q] = _mm512_shuffle_f32x4(v1, w1, 0xDD);
  }
}

}  // namespace rlx::cpu
#endif
