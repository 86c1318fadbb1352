// cpu/kernels/qgemm_q8.h: integer matrix-vector kernels for few rows of x (decode), as
// llama.cpp runs them: x is quantized once per call to int8 blocks of 32 (Q8_0: d = amax / 127,
// q = round(x / d)), and each weight block is multiplied into it with 8-bit integer dot products
// (vpdpbusd with AVX-512 VNNI, vpmaddubsw + vpmaddwd with AVX2), one f32 fma per block and row.
// Q4_0 nibbles are unpacked with a shift and a mask in registers and used unsigned (0..15); the
// -8 offset is applied through the per-block sums of x's quants. NR weight rows are processed per
// iteration so that each load of x serves NR rows.
//
// Include inside an anonymous namespace after defining RLX_Q8 (target + always_inline),
// RLX_Q8_ENTRY (target + noinline) and a struct Dot8 with
//   static __m256i dot(__m256i u, __m256i s): 8 int32 lanes, each the sum of 4 products u8 * s8
//   (pairs of products must not saturate int16: u <= 128 and |s| <= 127 here).

using QT8 = ::rlx::quant::QType;

RLX_Q8 float q8_h2f(const uint8_t* p) {
  uint16_t h;
  __builtin_memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

RLX_Q8 float q8_hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <QT8 T, int MR, int NR>
RLX_Q8 void q8_rows_impl(const ::rlx::cpu::qgemm_detail::Q8Args& a, int64_t j0, int64_t j1) {
  constexpr int64_t BB = T == QT8::q8_0 ? 34 : 18;
  const int64_t nb = a.nb;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  for (int64_t j = j0; j + NR <= j1; j += NR) {
    __m256 acc[NR][MR];
    float corr[NR][MR];
#pragma GCC unroll 4
    for (int n = 0; n < NR; ++n)
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) {
        acc[n][r] = _mm256_setzero_ps();
        corr[n][r] = 0.f;
      }
    const uint8_t* wr = a.w + j * a.ldw;
    for (int64_t b = 0; b < nb; ++b) {
      __m256i xq[MR];
      float dx[MR];
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) {
        xq[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qx + r * a.ldq + 32 * b));
        dx[r] = a.dx[r * a.ldd + b];
      }
#pragma GCC unroll 4
      for (int n = 0; n < NR; ++n) {
        const uint8_t* blk = wr + n * a.ldw + b * BB;
        __builtin_prefetch(blk + 8 * BB);
        const float dw = q8_h2f(blk);
        if constexpr (T == QT8::q8_0) {
          const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
          const __m256i u = _mm256_abs_epi8(wq);
#pragma GCC unroll 4
          for (int r = 0; r < MR; ++r) {
            const __m256i is = Dot8::dot(u, _mm256_sign_epi8(xq[r], wq));
            acc[n][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_set1_ps(dw * dx[r]), acc[n][r]);
          }
        } else {
          const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
          const __m256i u = _mm256_and_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(raw), _mm_srli_epi16(raw, 4), 1), m4);
#pragma GCC unroll 4
          for (int r = 0; r < MR; ++r) {
            const __m256i is = Dot8::dot(u, xq[r]);
            acc[n][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_set1_ps(dw * dx[r]), acc[n][r]);
            corr[n][r] += dw * a.cx[r * a.ldd + b];
          }
        }
      }
    }
#pragma GCC unroll 4
    for (int n = 0; n < NR; ++n)
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) a.y[r * a.ldy + j + n] = q8_hsum(acc[n][r]) - corr[n][r];
  }
}

template <QT8 T, int MR>
RLX_Q8_ENTRY void q8_rows(const ::rlx::cpu::qgemm_detail::Q8Args& a, int64_t j0, int64_t j1) {
  constexpr int NR = MR <= 2 ? 4 : 2;
  const int64_t full = j0 + (j1 - j0) / NR * NR;
  q8_rows_impl<T, MR, NR>(a, j0, full);
  q8_rows_impl<T, MR, 1>(a, full, j1);
}

template <QT8 T>
void fill_q8(::rlx::cpu::qgemm_detail::QKernelFamily& f) {
  const int t = static_cast<int>(T);
  f.q8rows[t][0] = q8_rows<T, 1>;
  f.q8rows[t][1] = q8_rows<T, 2>;
  f.q8rows[t][2] = q8_rows<T, 3>;
  f.q8rows[t][3] = q8_rows<T, 4>;
}

inline void fill_q8_family(::rlx::cpu::qgemm_detail::QKernelFamily& f) {
  fill_q8<QT8::q8_0>(f);
  fill_q8<QT8::q4_0>(f);
}
