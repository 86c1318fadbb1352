// cpu/kernels/qgemm_q8.h: integer matrix-vector kernels for few rows of x (decode), as
// llama.cpp runs them: x is quantized once per call to int8 blocks of 32 (Q8_0: d = amax / 127,
// q = round(x / d)), and each weight block is multiplied into it with 8-bit integer dot products
// (vpdpbusd with AVX-512 VNNI, vpmaddubsw + vpmaddwd with AVX2), one f32 fma per block and row.
// Q4_0 nibbles are unpacked with a shift and a mask in registers and used unsigned (0..15); the
// -8 offset is applied through the per-block sums of x's quants. The kernels can take NR weight
// rows per iteration (each load of x serving NR rows); the decode entries use NR = 1, one
// sequential weight stream, which was faster (see rows_kernel in qgemm_impl.h).
//
// Include inside an anonymous namespace after defining RLX_Q8 (target + always_inline),
// RLX_Q8_ENTRY (target + noinline) and a struct Dot8 with
//   static __m256i dot(__m256i u, __m256i s): 8 int32 lanes, each the sum of 4 products u8 * s8
//   (pairs of products must not saturate int16: u <= 128 and |s| <= 127 here);
//   static __m256i dotacc(__m256i acc, __m256i u, __m256i s): acc + dot(u, s);
//   kFullU8: whether dot takes any u8 (no int16 step); kNR: weight rows per int8 tile.

using QT8 = ::rlx::quant::QType;

// int8_matmul quantizes x to round(x / s) (to nearest even). The vector loops compute x / s as
// x * (1 / s): 1 / s and the product each round once, so the two differ by at most 2^-22 of
// x / s, 3.1e-5 for |x / s| <= 127.5 (beyond, both clamp to 127), and round to the same
// integer unless x * (1 / s) lies within that of a half-integer. A vector with a lane within
// this band (four times that distance; about 0.4% of vectors on random data) is divided instead; a
// reciprocal that is not a normal float (s above 2^126) divides every vector.
constexpr float kQuantTieBand = 0x1p-13f;

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

// Independent f32 accumulator chains per row of x: one fma per block into one register would
// wait on that fma's latency (4 cycles) every block, which bounded every decode kernel here to
// about 4.5 cycles per block of 32 whatever its bytes (q4_0 and q8_0 ran the same 0.68 ms on a
// 4096 x 4096 matrix). With fewer rows of x the chains run side by side, so fewer are needed;
// at 4 rows the register file (16 ymm on AVX2) has no room for more.
template <int MR>
inline constexpr int kQ8Chains = MR == 1 ? 4 : MR == 2 ? 2 : 1;

template <int MR, int NR, int K>
RLX_Q8 void q8_zero(__m256 (&acc)[K][NR][MR]) {
#pragma GCC unroll 4
  for (int c = 0; c < K; ++c)
#pragma GCC unroll 4
    for (int n = 0; n < NR; ++n)
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) acc[c][n][r] = _mm256_setzero_ps();
}

// The sum over the chains of acc[.][n][r], reduced to one float.
template <int MR, int NR, int K>
RLX_Q8 float q8_chain_sum(const __m256 (&acc)[K][NR][MR], int n, int r) {
  __m256 s = acc[0][n][r];
#pragma GCC unroll 4
  for (int c = 1; c < K; ++c) s = _mm256_add_ps(s, acc[c][n][r]);
  return q8_hsum(s);
}

// One q8_0 / q4_0 block b of NR weight rows (from wr) times MR rows of x, into acc and corr.
template <QT8 T, int MR, int NR>
RLX_Q8 void q8_block(const ::rlx::cpu::qgemm_detail::Q8Args& a, const uint8_t* wr, int64_t b, __m256 (&acc)[NR][MR],
                     float (&corr)[NR][MR]) {
  constexpr int64_t BB = T == QT8::q8_0 ? 34 : 18;
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
      const __m256i u = _mm256_and_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(raw), _mm_srli_epi16(raw, 4), 1),
                                         _mm256_set1_epi8(0x0F));
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) {
        const __m256i is = Dot8::dot(u, xq[r]);
        acc[n][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_set1_ps(dw * dx[r]), acc[n][r]);
        corr[n][r] += dw * a.cx[r * a.ldd + b];
      }
    }
  }
}

template <QT8 T, int MR, int NR>
RLX_Q8 void q8_rows_impl(const ::rlx::cpu::qgemm_detail::Q8Args& a, int64_t j0, int64_t j1) {
  constexpr int K = kQ8Chains<MR>;
  const int64_t nb = a.nb;
  for (int64_t j = j0; j + NR <= j1; j += NR) {
    __m256 acc[K][NR][MR];
    float corr[K][NR][MR] = {};
    q8_zero(acc);
    const uint8_t* wr = a.w + j * a.ldw;
    int64_t b = 0;
    for (; b + K <= nb; b += K)
#pragma GCC unroll 4
      for (int c = 0; c < K; ++c) q8_block<T, MR, NR>(a, wr, b + c, acc[c], corr[c]);
    for (; b < nb; ++b) q8_block<T, MR, NR>(a, wr, b, acc[0], corr[0]);
#pragma GCC unroll 4
    for (int n = 0; n < NR; ++n)
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) {
        float c = 0.f;
#pragma GCC unroll 4
        for (int u = 0; u < K; ++u) c += corr[u][n][r];
        a.y[r * a.ldy + j + n] = q8_chain_sum(acc, n, r) - c;
      }
  }
}

// int4_g128 / int4_g128_asym (rlx's 4-bit groups of 128): 4 chunks of 32, each a q4_0 body,
// under one f16 scale d (and min m). Each chunk lines up with one block of x, so with the
// nibbles q used unsigned (0..15): sum = sum_c d * dx_c * isum_c + corr, where
// corr = -d * sum_c cx_c (symmetric, cx = 8 * dx * (sum of x's quants): the -8 offset) or
// m * sum_c cx_c (asymmetric, cx = dx * (sum of x's quants)).
template <bool Asym, int MR, int NR>
RLX_Q8 void g128_rows_impl(const ::rlx::cpu::qgemm_detail::Q8Args& a, int64_t j0, int64_t j1) {
  constexpr int64_t BB = Asym ? 68 : 66, QO = Asym ? 4 : 2;
  const int64_t nb = a.nb / 4;  // a.nb counts blocks of 32
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  constexpr int K = kQ8Chains<MR>;
  for (int64_t j = j0; j + NR <= j1; j += NR) {
    __m256 acc[K][NR][MR];
    float corr[NR][MR] = {};
    q8_zero(acc);
    const uint8_t* wr = a.w + j * a.ldw;
    for (int64_t b = 0; b < nb; ++b) {
      float dw[NR];
#pragma GCC unroll 4
      for (int n = 0; n < NR; ++n) {
        const uint8_t* blk = wr + n * a.ldw + b * BB;
        __builtin_prefetch(blk + 4 * BB);
        __builtin_prefetch(blk + 4 * BB + 64);
        dw[n] = q8_h2f(blk);
        const float coef = Asym ? q8_h2f(blk + 2) : -dw[n];
#pragma GCC unroll 4
        for (int r = 0; r < MR; ++r) {
          const float* cx = a.cx + r * a.ldd + 4 * b;
          corr[n][r] += coef * ((cx[0] + cx[1]) + (cx[2] + cx[3]));
        }
      }
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        __m256i xq[MR];
#pragma GCC unroll 4
        for (int r = 0; r < MR; ++r)
          xq[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qx + r * a.ldq + 128 * b + 32 * c));
#pragma GCC unroll 4
        for (int n = 0; n < NR; ++n) {
          const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wr + n * a.ldw + b * BB + QO + 16 * c));
          const __m256i u = _mm256_and_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(raw), _mm_srli_epi16(raw, 4), 1), m4);
#pragma GCC unroll 4
          for (int r = 0; r < MR; ++r) {
            const __m256i is = Dot8::dot(u, xq[r]);
            __m256& ac = acc[c % K][n][r];
            ac = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_set1_ps(dw[n] * a.dx[r * a.ldd + 4 * b + c]), ac);
          }
        }
      }
    }
#pragma GCC unroll 4
    for (int n = 0; n < NR; ++n)
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) a.y[r * a.ldy + j + n] = q8_chain_sum(acc, n, r) + corr[n][r];
  }
}

template <bool Asym, int MR>
RLX_Q8_ENTRY void g128_rows(const ::rlx::cpu::qgemm_detail::Q8Args& a, int64_t j0, int64_t j1) {
  g128_rows_impl<Asym, MR, 1>(a, j0, j1);  // one weight stream (qgemm_impl.h's rows_kernel)
}

// Q4_K: 256-value blocks of 8 sub-blocks of 32 with 6-bit scales sc and mins m:
// w = d * sc * q - dmin * m. Each sub-block lines up with one block of x, so
// sum = sum_s d * sc_s * dx_s * isum_s - dmin * m_s * dx_s * (sum of x's quants over s).
RLX_Q8 void q8_k4_scales(const uint8_t* q, uint8_t* sc, uint8_t* mn) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = q[j] & 63;
    mn[j] = q[j + 4] & 63;
    sc[j + 4] = static_cast<uint8_t>((q[j + 8] & 0xF) | ((q[j] >> 6) << 4));
    mn[j + 4] = static_cast<uint8_t>((q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4));
  }
}

template <int MR, int NR>
RLX_Q8 void q4k_rows_impl(const ::rlx::cpu::qgemm_detail::Q8Args& a, int64_t j0, int64_t j1) {
  constexpr int64_t BB = 144;
  const int64_t nb = a.nb / 8;  // a.nb counts blocks of 32
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  constexpr int K = kQ8Chains<MR>;
  for (int64_t j = j0; j + NR <= j1; j += NR) {
    __m256 acc[K][NR][MR], accm[1][NR][MR];
    q8_zero(acc);
    q8_zero(accm);
    const uint8_t* wr = a.w + j * a.ldw;
    for (int64_t b = 0; b < nb; ++b) {
#pragma GCC unroll 4
      for (int n = 0; n < NR; ++n) {
        const uint8_t* blk = wr + n * a.ldw + b * BB;
        __builtin_prefetch(blk + 2 * BB);
        __builtin_prefetch(blk + 2 * BB + 64);
        __builtin_prefetch(blk + 2 * BB + 128);
        alignas(16) uint8_t sc[8], mn[8];
        q8_k4_scales(blk + 4, sc, mn);
        const __m256 scv = _mm256_mul_ps(_mm256_set1_ps(q8_h2f(blk)),
                                         _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc)))));
        const __m256 mv = _mm256_mul_ps(_mm256_set1_ps(q8_h2f(blk + 2)),
                                        _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn)))));
        alignas(32) float s8[MR][8];
#pragma GCC unroll 4
        for (int r = 0; r < MR; ++r) {
          accm[0][n][r] = _mm256_fmadd_ps(mv, _mm256_loadu_ps(a.cx + r * a.ldd + 8 * b), accm[0][n][r]);
          _mm256_store_ps(s8[r], _mm256_mul_ps(scv, _mm256_loadu_ps(a.dx + r * a.ldd + 8 * b)));
        }
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) {
          const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16 + 32 * c));
          const __m256i lo = _mm256_and_si256(raw, m4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
#pragma GCC unroll 4
          for (int r = 0; r < MR; ++r) {
            const int8_t* xq = a.qx + r * a.ldq + 256 * b + 64 * c;
            const __m256i il = Dot8::dot(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq)));
            const __m256i ih = Dot8::dot(hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32)));
            __m256& al = acc[(2 * c) % K][n][r];
            __m256& ah = acc[(2 * c + 1) % K][n][r];
            al = _mm256_fmadd_ps(_mm256_cvtepi32_ps(il), _mm256_set1_ps(s8[r][2 * c]), al);
            ah = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ih), _mm256_set1_ps(s8[r][2 * c + 1]), ah);
          }
        }
      }
    }
#pragma GCC unroll 4
    for (int n = 0; n < NR; ++n)
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) a.y[r * a.ldy + j + n] = q8_chain_sum(acc, n, r) - q8_chain_sum(accm, n, r);
  }
}

template <int MR>
RLX_Q8_ENTRY void q4k_rows(const ::rlx::cpu::qgemm_detail::Q8Args& a, int64_t j0, int64_t j1) {
  q4k_rows_impl<MR, 1>(a, j0, j1);  // one weight stream (qgemm_impl.h's rows_kernel)
}

// Q6_K: 256-value blocks (ql[128], qh[64], int8 scales[16], d): 32-value group g (element
// order, one block of x) holds 6-bit q (ql nibble | 2 bits of qh << 4) - 32, with scale
// scales[2g] for its first 16 values and scales[2g + 1] for the rest. Products q * x go
// through vpmaddubsw (|q| unsigned, x with q's sign) into int16 pairs, vpmaddwd by the int16
// scales into int32, then one f32 fma per group with d * dx.
alignas(16) constexpr uint8_t kQ6ScaleShuf[8][16] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},         {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5},         {6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7},
    {8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9},         {10, 10, 10, 10, 10, 10, 10, 10, 11, 11, 11, 11, 11, 11, 11, 11},
    {12, 12, 12, 12, 12, 12, 12, 12, 13, 13, 13, 13, 13, 13, 13, 13}, {14, 14, 14, 14, 14, 14, 14, 14, 15, 15, 15, 15, 15, 15, 15, 15}};

template <int MR, int NR>
RLX_Q8 void q6k_rows_impl(const ::rlx::cpu::qgemm_detail::Q8Args& a, int64_t j0, int64_t j1) {
  constexpr int64_t BB = 210;
  const int64_t nb = a.nb / 8;
  const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(0x03), k32 = _mm256_set1_epi8(32);
  constexpr int K = kQ8Chains<MR>;
  for (int64_t j = j0; j + NR <= j1; j += NR) {
    __m256 acc[K][NR][MR];
    q8_zero(acc);
    const uint8_t* wr = a.w + j * a.ldw;
    for (int64_t b = 0; b < nb; ++b) {
#pragma GCC unroll 4
      for (int n = 0; n < NR; ++n) {
        const uint8_t* blk = wr + n * a.ldw + b * BB;
        __builtin_prefetch(blk + 2 * BB);
        __builtin_prefetch(blk + 2 * BB + 64);
        __builtin_prefetch(blk + 2 * BB + 128);
        __builtin_prefetch(blk + 2 * BB + 192);
        const float d = q8_h2f(blk + 208);
        const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192));
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * h));
          const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * h + 32));
          const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * h));
          __m256i q[4];
          q[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m3), 4));
          q[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m3), 4));
          q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m3), 4));
          q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m3), 4));
#pragma GCC unroll 4
          for (int qq = 0; qq < 4; ++qq) {
            const int g = 4 * h + qq;
            const __m256i qs = _mm256_sub_epi8(q[qq], k32);
            const __m256i u = _mm256_abs_epi8(qs);
            const __m256i s16 = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc, _mm_load_si128(reinterpret_cast<const __m128i*>(kQ6ScaleShuf[g]))));
#pragma GCC unroll 4
            for (int r = 0; r < MR; ++r) {
              const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qx + r * a.ldq + 256 * b + 32 * g));
              const __m256i is = _mm256_madd_epi16(_mm256_maddubs_epi16(u, _mm256_sign_epi8(xq, qs)), s16);
              __m256& ac = acc[qq % K][n][r];
              ac = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_set1_ps(d * a.dx[r * a.ldd + 8 * b + g]), ac);
            }
          }
        }
      }
    }
#pragma GCC unroll 4
    for (int n = 0; n < NR; ++n)
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) a.y[r * a.ldy + j + n] = q8_chain_sum(acc, n, r);
  }
}

template <int MR>
RLX_Q8_ENTRY void q6k_rows(const ::rlx::cpu::qgemm_detail::Q8Args& a, int64_t j0, int64_t j1) {
  q6k_rows_impl<MR, 1>(a, j0, j1);  // one weight stream (qgemm_impl.h's rows_kernel)
}

template <QT8 T, int MR>
RLX_Q8_ENTRY void q8_rows(const ::rlx::cpu::qgemm_detail::Q8Args& a, int64_t j0, int64_t j1) {
  q8_rows_impl<T, MR, 1>(a, j0, j1);  // one weight stream (qgemm_impl.h's rows_kernel)
}

// Prefill of q4_0, q8_0, q4_k and q6_k (many rows of x): the panel of weight rows [j0, j1) is first
// repacked, per group of 8 rows and per block, into 8 vectors of 32 bytes (vector g holds in
// its 32-bit lane r values 4g..4g+3 of row r: q4_0's nibbles unsigned, q8_0's quants signed)
// and the 8 rows' scales. Each 4 bytes of x broadcast to all lanes then multiply 8 rows at
// once, and each lane ends as one output: no horizontal sums.
//  - q4_0: vpmaddubsw(nibbles, x), whose pair sums (at most 2 * 15 * 127) add up over a block's
//    8 vectors in int16 without saturating (8 * 3810 < 32767); one vpmaddwd, conversion and
//    fma per block and row of x, the -8 offset through x's quant sums. About 4x fewer
//    multiply-port instructions per product than the per-row dot products of q8_rows_impl.
//  - q8_0: vpmaddubsw(|w|, x with w's sign) (pairs up to 2 * 127 * 127 fit int16, two do
//    not), so every product vector is widened with vpmaddwd and summed in int32.
//  - q4_k: each 32-value sub-block is one block of the panel, with scale d * sc and offset
//    coefficient dmin * m (x's plain quant sums), otherwise as q4_0.
//  - int4_g128 (and _asym): each 32-value chunk of a group is one block with the group's
//    scale, otherwise as q4_0 (the min: as q4_k's offset, with x's plain quant sums).
//  - q6_k: each 32-value group is one block, its quants signed (q - 32), with two scales
//    (d * scale of its first and of its second 16 values, in place of the offset
//    coefficients); vpmaddubsw(|w|, x with w's sign) pairs reach 2 * 32 * 127, so a half
//    block's 4 vectors add up in int16 (32512) before one vpmaddwd per half.
// Block b (of 32 values) of up to 8 rows: quants to out_q (8 vectors), scales to out_d and the
// offset coefficients (q4_0: its scale, as x's sums carry the 8; q4_k: dmin * m) to out_m.
// Vector g goes to out_q + pitch * g (32: the 8-row panels; 64: two 8-row groups side by side,
// the 16-row zmm panels of the AVX-512 family).
template <QT8 T>
RLX_Q8 void panel_repack_block8(const uint8_t* w, int64_t ldw, int64_t rows, int64_t b, uint8_t* out_q, float* out_d,
                                float* out_m, int64_t pitch = 32) {
  constexpr int64_t BB = T == QT8::q8_0 ? 34 : 18;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256i r[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    if (i < rows) {
      if constexpr (T == QT8::q6_k) {
        const uint8_t* blk = w + i * ldw + 210 * (b / 8);
        const int64_t grp = b % 8, h = grp / 4, qq = grp % 4;
        const __m256i m3 = _mm256_set1_epi8(0x03);
        const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * h + 32 * (qq % 2)));
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * h));
        const __m256i lo = _mm256_and_si256(qq < 2 ? ql : _mm256_srli_epi16(ql, 4), m4);
        const __m256i hi = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(static_cast<int>(2 * qq))), m3);
        r[i] = _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)), _mm256_set1_epi8(32));
        const float d = q8_h2f(blk + 208);
        out_d[i] = d * static_cast<float>(static_cast<int8_t>(blk[192 + 8 * h + 2 * qq]));
        out_m[i] = d * static_cast<float>(static_cast<int8_t>(blk[192 + 8 * h + 2 * qq + 1]));
      } else if constexpr (T == QT8::q4_k) {
        const uint8_t* blk = w + i * ldw + 144 * (b / 8);
        const int64_t sub = b % 8;
        alignas(16) uint8_t sc[8], mn[8];
        q8_k4_scales(blk + 4, sc, mn);
        const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16 + 32 * (sub / 2)));
        r[i] = _mm256_and_si256(sub % 2 ? _mm256_srli_epi16(raw, 4) : raw, m4);
        out_d[i] = q8_h2f(blk) * static_cast<float>(sc[sub]);
        out_m[i] = q8_h2f(blk + 2) * static_cast<float>(mn[sub]);
      } else if constexpr (T == QT8::int4_g128 || T == QT8::int4_g128_asym) {
        // each 32-value chunk of a group of 128 is one panel block: q4_0's nibble layout, the
        // group's scale, and its offset coefficient: d for the symmetric -8 (x's sums carry
        // the 8), -m for the asymmetric min (plain sums; acc -= coefficient * sums)
        constexpr bool kAsym = T == QT8::int4_g128_asym;
        const uint8_t* blk = w + i * ldw + (kAsym ? 68 : 66) * (b / 4);
        const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + (kAsym ? 4 : 2) + 16 * (b % 4)));
        r[i] = _mm256_and_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(raw), _mm_srli_epi16(raw, 4), 1), m4);
        out_d[i] = q8_h2f(blk);
        out_m[i] = kAsym ? -q8_h2f(blk + 2) : out_d[i];
      } else {
        const uint8_t* blk = w + i * ldw + BB * b;
        if constexpr (T == QT8::q8_0) {
          r[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
        } else {
          const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
          r[i] = _mm256_and_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(raw), _mm_srli_epi16(raw, 4), 1), m4);
        }
        out_d[i] = out_m[i] = q8_h2f(blk);
      }
    } else {
      r[i] = _mm256_setzero_si256();
      out_d[i] = out_m[i] = 0.f;
    }
  }
  // 8 x 8 transpose of 32-bit lanes: output g gathers lane g of every row
  __m256i t[8], u[8];
#pragma GCC unroll 4
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
  }
#pragma GCC unroll 2
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out_q + pitch * g), _mm256_permute2x128_si256(u[g], u[g + 4], 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out_q + pitch * (g + 4)), _mm256_permute2x128_si256(u[g], u[g + 4], 0x31));
  }
}

// With VNNI (Dot8::kFullU8) the 8-bit products go through vpdpbusd straight into int32 lanes:
// one instruction where vpmaddubsw + vpmaddwd (+ vpaddd) took two or three.
inline constexpr bool kPanelVnni = Dot8::kFullU8;

// MR rows of quantized x (a.qx, a.dx, a.cx) against one repacked group of 8 weight rows (pq:
// nb * 256 bytes, pd: nb * 8 scales); the first `cols` of the 8 outputs go to y (row stride ldy).
template <QT8 T, int MR>
RLX_Q8 void panel_group8(const ::rlx::cpu::qgemm_detail::Q8Args& a, const uint8_t* pq, const float* pd, const float* pm,
                         float* y, int64_t ldy, int64_t cols) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[MR];
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < a.nb; ++b) {
    if constexpr (T == QT8::q6_k) {
#pragma GCC unroll 2
      for (int half = 0; half < 2; ++half) {
        __m256i s[MR];
#pragma GCC unroll 4
        for (int r = 0; r < MR; ++r) s[r] = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int g = 4 * half; g < 4 * half + 4; ++g) {
          const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pq + 256 * b + 32 * g));
          const __m256i u = _mm256_abs_epi8(wv);
#pragma GCC unroll 4
          for (int r = 0; r < MR; ++r) {
            int32_t x4;
            __builtin_memcpy(&x4, a.qx + r * a.ldq + 32 * b + 4 * g, 4);
            const __m256i sx = _mm256_sign_epi8(_mm256_set1_epi32(x4), wv);
            if constexpr (kPanelVnni)
              s[r] = Dot8::dotacc(s[r], u, sx);  // int32 lanes
            else
              s[r] = _mm256_add_epi16(s[r], _mm256_maddubs_epi16(u, sx));
          }
        }
        const __m256 d8 = _mm256_loadu_ps((half ? pm : pd) + 8 * b);
#pragma GCC unroll 4
        for (int r = 0; r < MR; ++r)
          acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(kPanelVnni ? s[r] : _mm256_madd_epi16(s[r], ones)),
                                   _mm256_mul_ps(d8, _mm256_set1_ps(a.dx[r * a.ldd + b])), acc[r]);
      }
      continue;
    }
    __m256i s[MR];
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) s[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pq + 256 * b + 32 * g));
      if constexpr (T == QT8::q8_0) {
        const __m256i u = _mm256_abs_epi8(wv);
#pragma GCC unroll 4
        for (int r = 0; r < MR; ++r) {
          int32_t x4;
          __builtin_memcpy(&x4, a.qx + r * a.ldq + 32 * b + 4 * g, 4);
          const __m256i sx = _mm256_sign_epi8(_mm256_set1_epi32(x4), wv);
          if constexpr (kPanelVnni)
            s[r] = Dot8::dotacc(s[r], u, sx);
          else
            s[r] = _mm256_add_epi32(s[r], _mm256_madd_epi16(_mm256_maddubs_epi16(u, sx), ones));
        }
      } else {
#pragma GCC unroll 4
        for (int r = 0; r < MR; ++r) {
          int32_t x4;
          __builtin_memcpy(&x4, a.qx + r * a.ldq + 32 * b + 4 * g, 4);
          if constexpr (kPanelVnni)
            s[r] = Dot8::dotacc(s[r], wv, _mm256_set1_epi32(x4));  // unsigned nibbles x signed x
          else
            s[r] = _mm256_add_epi16(s[r], _mm256_maddubs_epi16(wv, _mm256_set1_epi32(x4)));
        }
      }
    }
    const __m256 d8 = _mm256_loadu_ps(pd + 8 * b);
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) {
      const __m256i s32 = T == QT8::q8_0 || kPanelVnni ? s[r] : _mm256_madd_epi16(s[r], ones);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32), _mm256_mul_ps(d8, _mm256_set1_ps(a.dx[r * a.ldd + b])), acc[r]);
      if constexpr (T != QT8::q8_0)  // q4_0's -8, q4_k's mins
        acc[r] = _mm256_fnmadd_ps(_mm256_loadu_ps(pm + 8 * b), _mm256_set1_ps(a.cx[r * a.ldd + b]), acc[r]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r) {
    if (cols == 8) {
      _mm256_storeu_ps(y + r * ldy, acc[r]);
    } else {
      alignas(32) float t[8];
      _mm256_store_ps(t, acc[r]);
      for (int64_t c = 0; c < cols; ++c) y[r * ldy + c] = t[c];
    }
  }
}

// The panel driver: all m rows of quantized x against weight rows [j0, j1), through a
// per-thread repack buffer that only grows. Weight rows are repacked in groups of G (8: the
// 8-row kernels below; 16: two 8-row groups side by side, vector g of each block at pitch
// 64, for the AVX-512 family's zmm kernels), per group nb * G scales then nb * G offset
// coefficients; Group::run<MR>(a, pq, pd, pm, y, ldy, cols) multiplies MR rows of x by one
// group, in steps of 4 rows.
// Repacks weight rows [j0, j1) in groups of G into per-thread buffers that only grow (the
// layout panel_driver describes) and returns them: quants, then scales and offsets.
template <QT8 T, int G>
RLX_Q8 std::pair<const uint8_t*, const float*> panel_repack(const ::rlx::cpu::qgemm_detail::Q8Args& a, int64_t j0,
                                                            int64_t j1) {
  thread_local std::vector<uint8_t> qbuf;
  thread_local std::vector<float> dbuf;
  const int64_t groups = (j1 - j0 + G - 1) / G, nb = a.nb;
  if (qbuf.size() < static_cast<size_t>(groups * nb * 32 * G)) qbuf.resize(static_cast<size_t>(groups * nb * 32 * G));
  if (dbuf.size() < static_cast<size_t>(groups * nb * 2 * G)) dbuf.resize(static_cast<size_t>(groups * nb * 2 * G));
  for (int64_t g = 0; g < groups; ++g) {
    float* gd = dbuf.data() + g * nb * 2 * G;
    for (int64_t h = 0; h < G / 8; ++h) {
      // rows past j1 are repacked as zeros
      const int64_t first = j0 + G * g + 8 * h, rows = std::min<int64_t>(8, j1 - first);
      const uint8_t* w = rows > 0 ? a.w + first * a.ldw : a.w;
      for (int64_t b = 0; b < nb; ++b)
        panel_repack_block8<T>(w, a.ldw, rows, b, qbuf.data() + (g * nb + b) * 32 * G + 32 * h, gd + b * G + 8 * h,
                               gd + nb * G + b * G + 8 * h, 4 * G);
    }
  }
  return {qbuf.data(), dbuf.data()};
}

template <QT8 T, int G, typename Group>
RLX_Q8 void panel_driver(const ::rlx::cpu::qgemm_detail::Q8Args& a, int64_t m, int64_t j0, int64_t j1) {
  const int64_t groups = (j1 - j0 + G - 1) / G, nb = a.nb;
  const auto [qdata, ddata] = panel_repack<T, G>(a, j0, j1);
  ::rlx::cpu::qgemm_detail::Q8Args r = a;
  for (int64_t i = 0; i < m; i += 4) {
    r.qx = a.qx + i * a.ldq;
    r.dx = a.dx + i * a.ldd;
    r.cx = a.cx + i * a.ldd;
    float* y = a.y + i * a.ldy + j0;
    for (int64_t g = 0; g < groups; ++g) {
      const uint8_t* pq = qdata + g * nb * 32 * G;
      const float* pd = ddata + g * nb * 2 * G;
      const float* pm = pd + nb * G;
      const int64_t cols = std::min<int64_t>(G, j1 - j0 - G * g);
      switch (std::min<int64_t>(4, m - i)) {
        case 4: Group::template run<4>(r, pq, pd, pm, y + G * g, a.ldy, cols); break;
        case 3: Group::template run<3>(r, pq, pd, pm, y + G * g, a.ldy, cols); break;
        case 2: Group::template run<2>(r, pq, pd, pm, y + G * g, a.ldy, cols); break;
        default: Group::template run<1>(r, pq, pd, pm, y + G * g, a.ldy, cols); break;
      }
    }
  }
}

template <QT8 T>
struct Group8 {
  template <int MR>
  static RLX_Q8 void run(const ::rlx::cpu::qgemm_detail::Q8Args& a, const uint8_t* pq, const float* pd, const float* pm,
                         float* y, int64_t ldy, int64_t cols) {
    panel_group8<T, MR>(a, pq, pd, pm, y, ldy, cols);
  }
};

// The panel kernel (Q8PanelFn) of q4_0 / q8_0 / q4_k / q6_k / int4_g128[_asym] on 8-row groups.
template <QT8 T>
RLX_Q8_ENTRY void q8_panel(const ::rlx::cpu::qgemm_detail::Q8Args& a, int64_t m, int64_t j0, int64_t j1) {
  panel_driver<T, 8, Group8<T>>(a, m, j0, j1);
}

// Rows [i0, i1) of x (row stride ldx, nb blocks of 32) to Q8_0 blocks: per block
// d = amax / 127 and q = round_half_even(x / d) (cvtps with the default rounding mode, as the
// portable loop's 1.5 * 2^23 trick), quants to qx (row stride ldq), d to dx and to cx either
// d * sum(q) (plain_sums) or 8 * d * sum(q) (q4_0's -8 offset), both with row stride ldd.
RLX_Q8_ENTRY void q8_quantize_rows(const float* x, int64_t ldx, int64_t nb, int64_t i0, int64_t i1, int8_t* qx,
                                   int64_t ldq, float* dx, float* cx, int64_t ldd, bool plain_sums) {
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t i = i0; i < i1; ++i) {
    for (int64_t b = 0; b < nb; ++b) {
      const float* xb = x + i * ldx + 32 * b;
      __m256 v[4];
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) v[c] = _mm256_loadu_ps(xb + 8 * c);
      __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v[0], absmask), _mm256_and_ps(v[1], absmask)),
                               _mm256_max_ps(_mm256_and_ps(v[2], absmask), _mm256_and_ps(v[3], absmask)));
      __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
      h = _mm_max_ps(h, _mm_movehl_ps(h, h));
      h = _mm_max_ss(h, _mm_movehdup_ps(h));
      const float d = _mm_cvtss_f32(h) / 127.f, id = d != 0.f ? 1.f / d : 0.f;
      const __m256 idv = _mm256_set1_ps(id);
      __m256i q[4];
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) q[c] = _mm256_cvtps_epi32(_mm256_mul_ps(v[c], idv));
      const __m256i s4 = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
      __m128i s = _mm_add_epi32(_mm256_castsi256_si128(s4), _mm256_extracti128_si256(s4, 1));
      s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
      s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
      const int sum = _mm_cvtsi128_si32(s);
      // packs work within 128-bit lanes: the permutation puts the 8 groups of 4 back in order
      const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(qx + i * ldq + 32 * b), _mm256_permutevar8x32_epi32(p, order));
      dx[i * ldd + b] = d;
      cx[i * ldd + b] = (plain_sums ? 1.f : 8.f) * d * static_cast<float>(sum);
    }
  }
}

// The int8 linear layer (I8Args): int8 weights with one scale per row, x quantized per row.
// Products are summed exactly in int32 over all of k and scaled once at the end. With
// Dot8::kFullU8 (VNNI: u8 x s8 with no int16 step) x is stored as u8 q + 128 and the offset
// is taken back out through each weight row's sum (accumulated in the same loop by a dot with
// ones); otherwise |w| multiplies x with w's sign (vpsignb), as for q8_0. A tile is MR rows of
// x by NR weight rows, so each load of x serves NR rows and each load of w MR rows; k % 32
// trailing values are summed in scalar code.
RLX_Q8 int32_t i8_hsum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

template <int MR, int NR>
RLX_Q8 void i8_tile(const ::rlx::cpu::qgemm_detail::I8Args& a, int64_t i, int64_t j) {
  const int64_t nb = a.k / 32;
  __m256i acc[NR][MR], wsum[NR];
#pragma GCC unroll 4
  for (int n = 0; n < NR; ++n) {
    wsum[n] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) acc[n][r] = _mm256_setzero_si256();
  }
  const __m256i ones = _mm256_set1_epi8(1);
  const int8_t* w0 = a.w + j * a.ldw;
  const uint8_t* x0 = a.qx + i * a.ldq;
  for (int64_t b = 0; b < nb; ++b) {
    __m256i wv[NR];
#pragma GCC unroll 4
    for (int n = 0; n < NR; ++n) {
      // weights stream from memory once per call when x has few rows: fetch ahead
      if (MR <= 2) __builtin_prefetch(w0 + n * a.ldw + 32 * b + 384);
      wv[n] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w0 + n * a.ldw + 32 * b));
    }
    if constexpr (Dot8::kFullU8) {
#pragma GCC unroll 4
      for (int n = 0; n < NR; ++n) wsum[n] = Dot8::dotacc(wsum[n], ones, wv[n]);
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) {
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x0 + r * a.ldq + 32 * b));
#pragma GCC unroll 4
        for (int n = 0; n < NR; ++n) acc[n][r] = Dot8::dotacc(acc[n][r], xv, wv[n]);
      }
    } else {
      __m256i u[NR];
#pragma GCC unroll 4
      for (int n = 0; n < NR; ++n) u[n] = _mm256_abs_epi8(wv[n]);
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) {
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x0 + r * a.ldq + 32 * b));
#pragma GCC unroll 4
        for (int n = 0; n < NR; ++n) acc[n][r] = Dot8::dotacc(acc[n][r], u[n], _mm256_sign_epi8(xv, wv[n]));
      }
    }
  }
#pragma GCC unroll 4
  for (int n = 0; n < NR; ++n) {
    const int8_t* wr = w0 + n * a.ldw;
    const int32_t off = Dot8::kFullU8 ? 128 * i8_hsum(wsum[n]) : 0;
    const float wsc = a.ws[(j + n) * a.ws_stride];
    const float bias = a.bias ? a.bias[j + n] : 0.f;
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) {
      const uint8_t* xr = x0 + r * a.ldq;
      int32_t t = i8_hsum(acc[n][r]) - off;
      for (int64_t p = 32 * nb; p < a.k; ++p) {
        const int32_t q = Dot8::kFullU8 ? static_cast<int32_t>(xr[p]) - 128 : static_cast<int32_t>(static_cast<int8_t>(xr[p]));
        t += q * wr[p];
      }
      a.y[(i + r) * a.ldy + j + n] = static_cast<float>(t) * a.sx[i + r] * wsc + bias;
    }
  }
}

// One row of x to int8 for the int8 linear layer: s = x_scale, or max(amax / 127, 1e-30)
// when x_scale is 0; q = clamp(round_half_even(x / s), -127, 127) (+ 128 with kFullU8).
// Returns s. The same operations as the portable loop in qgemm.cpp, 8 values at a time.
RLX_Q8_ENTRY float i8_quantize_row(const float* x, int64_t k, float x_scale, uint8_t* q) {
  float s = x_scale;
  int64_t p = 0;
  if (s == 0.f) {
    __m256 m = _mm256_setzero_ps();
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    for (; p + 8 <= k; p += 8) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + p), absmask));
    alignas(32) float t[8];
    _mm256_store_ps(t, m);
    float amax = 0.f;
    for (float v : t) amax = std::max(amax, v);
    for (; p < k; ++p) amax = std::max(amax, std::fabs(x[p]));
    s = std::max(amax / 127.f, 1e-30f);
  }
  const __m256 sv = _mm256_set1_ps(s), lo = _mm256_set1_ps(-127.f), hi = _mm256_set1_ps(127.f);
  const __m256i off = _mm256_set1_epi32(Dot8::kFullU8 ? 128 : 0);
  // x / s as x * (1 / s) away from half-integers (kQuantTieBand)
  const float r = 1.f / s;
  const bool multiply = std::isnormal(r);
  const __m256 rv = _mm256_set1_ps(r), half = _mm256_set1_ps(0.5f), near = _mm256_set1_ps(kQuantTieBand);
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  for (p = 0; p + 8 <= k; p += 8) {
    const __m256 xv = _mm256_loadu_ps(x + p);
    __m256 v;
    if (multiply) {
      v = _mm256_mul_ps(xv, rv);
      const __m256 frac = _mm256_and_ps(_mm256_sub_ps(v, _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)), absmask);
      if (_mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(_mm256_sub_ps(frac, half), absmask), near, _CMP_LT_OQ)))
        v = _mm256_div_ps(xv, sv);
    } else {
      v = _mm256_div_ps(xv, sv);
    }
    v = _mm256_min_ps(hi, _mm256_max_ps(lo, v));
    const __m256i iv = _mm256_add_epi32(_mm256_cvtps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)), off);
    alignas(32) int32_t t[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(t), iv);
    for (int e = 0; e < 8; ++e) q[p + e] = static_cast<uint8_t>(t[e]);
  }
  for (; p < k; ++p) {
    const float v = std::min(127.f, std::max(-127.f, x[p] / s));
    q[p] = static_cast<uint8_t>(static_cast<int>(std::nearbyint(v)) + (Dot8::kFullU8 ? 128 : 0));
  }
  return s;
}

template <int NR>
RLX_Q8 void i8_col(const ::rlx::cpu::qgemm_detail::I8Args& a, int64_t j) {
  int64_t i = 0;
  for (; i + 4 <= a.m; i += 4) i8_tile<4, NR>(a, i, j);
  switch (a.m - i) {
    case 3: i8_tile<3, NR>(a, i, j); break;
    case 2: i8_tile<2, NR>(a, i, j); break;
    case 1: i8_tile<1, NR>(a, i, j); break;
    default: break;
  }
}

RLX_Q8_ENTRY void i8_rows(const ::rlx::cpu::qgemm_detail::I8Args& a, int64_t j0, int64_t j1) {
  constexpr int NR = Dot8::kNR;
  int64_t j = j0;
  for (; j + NR <= j1; j += NR) i8_col<NR>(a, j);
  for (; j < j1; ++j) i8_col<1>(a, j);
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
  f.i8rows = i8_rows;
  f.i8quant = i8_quantize_row;
  f.i8_offset_x = Dot8::kFullU8;
  f.q8quant = q8_quantize_rows;
  fill_q8<QT8::q8_0>(f);
  fill_q8<QT8::q4_0>(f);
  f.q8panel[static_cast<int>(QT8::q4_0)] = q8_panel<QT8::q4_0>;
  f.q8panel[static_cast<int>(QT8::q8_0)] = q8_panel<QT8::q8_0>;
  f.q8panel[static_cast<int>(QT8::q4_k)] = q8_panel<QT8::q4_k>;
  f.q8panel[static_cast<int>(QT8::q6_k)] = q8_panel<QT8::q6_k>;
  f.q8panel[static_cast<int>(QT8::int4_g128)] = q8_panel<QT8::int4_g128>;
  f.q8panel[static_cast<int>(QT8::int4_g128_asym)] = q8_panel<QT8::int4_g128_asym>;
  const int t = static_cast<int>(QT8::q4_k);
  f.q8rows[t][0] = q4k_rows<1>;
  f.q8rows[t][1] = q4k_rows<2>;
  f.q8rows[t][2] = q4k_rows<3>;
  f.q8rows[t][3] = q4k_rows<4>;
  const int tg = static_cast<int>(QT8::int4_g128), ta = static_cast<int>(QT8::int4_g128_asym);
  f.q8rows[tg][0] = g128_rows<false, 1>;
  f.q8rows[tg][1] = g128_rows<false, 2>;
  f.q8rows[tg][2] = g128_rows<false, 3>;
  f.q8rows[tg][3] = g128_rows<false, 4>;
  f.q8rows[ta][0] = g128_rows<true, 1>;
  f.q8rows[ta][1] = g128_rows<true, 2>;
  f.q8rows[ta][2] = g128_rows<true, 3>;
  f.q8rows[ta][3] = g128_rows<true, 4>;
  const int t6 = static_cast<int>(QT8::q6_k);
  f.q8rows[t6][0] = q6k_rows<1>;
  f.q8rows[t6][1] = q6k_rows<2>;
  f.q8rows[t6][2] = q6k_rows<3>;
  f.q8rows[t6][3] = q6k_rows<4>;
}
