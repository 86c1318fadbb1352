#include "attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <vector>

#include "avx512_transpose.h"
#include "gemm.h"
#include "qgemm.h"
#include "rlx/thread_pool.h"

// GCC 12 reports the undefined operand that its own intrinsics start from (unpacks and
// shuffles of the K^T transpose, _mm512_reduce_max_ps) as "(may be) used uninitialized";
// that operand is never read.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// (the bf16 kernels below: vdpbf16ps needs avx512bf16)
#define RLX_ATTENTION_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
// (and the int8 ones vpdpbusd, avx512vnni)
#define RLX_ATTENTION_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

namespace rlx::cpu {
namespace {

// exp for the softmax: x = n*ln2 + r with |r| <= ln2/2 (Cody-Waite) and a degree-6
// polynomial, about 1 ulp; inputs are <= 0 here (scores minus the row max), so only underflow
// matters. n is rounded with the 1.5*2^23 shifter, whose low mantissa bits then hold it, and
// 2^n is built in the exponent field: plain adds, shifts and FMAs, which issue every cycle
// (vrndscaleps and vscalefps, the obvious choices, are slower on some cores).
__attribute__((target("avx512f"))) __m512 exp512(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.3f);  // keeps n >= -126, so 2^n is a normal float
  const __m512 shifter = _mm512_set1_ps(0x1.8p23f);
  __m512 xc = _mm512_max_ps(x, lo);
  __m512 t = _mm512_fmadd_ps(xc, _mm512_set1_ps(1.44269504088896341f), shifter);
  __m512 n = _mm512_sub_ps(t, shifter);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), xc);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512i bias = _mm512_set1_epi32(127 - 0x4b400000);
  __m512 scale = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_castps_si512(t), bias), 23));
  __m512 y = _mm512_mul_ps(p, scale);
  // below the range exp is 0 (and -inf -> 0)
  __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
  return _mm512_mask_blend_ps(under, y, _mm512_setzero_ps());
}

// s[j] (+ add[j]) for the keys in mk, -inf for the others.
__attribute__((target("avx512f"))) inline __m512 load_scores(const float* add, const float* s, int64_t j,
                                                            __mmask16 mk) {
  __m512 x = _mm512_mask_loadu_ps(_mm512_set1_ps(-std::numeric_limits<float>::infinity()), mk, s + j);
  return add ? _mm512_add_ps(x, _mm512_maskz_loadu_ps(mk, add + j)) : x;
}

// exp(s_i[j] + add[j] - max_i) in place for nr <= 8 rows of one block (row stride lds, n
// keys; `add` an additive row shared by all of them, or null), inv_sum[i] = 1 / the row's sum.
// The rows go through the passes together, so the exps of different rows overlap in the
// pipeline (one row of 128 keys is only 8 vectors, too short a loop to hide the
// polynomial's latency and the horizontal reductions). A row whose every key is masked
// becomes NaN, and so does its inv_sum.
__attribute__((target("avx512f"))) void softmax_exp_rows_avx512(float* s, int64_t lds, int64_t nr, int64_t n,
                                                                const float* add, float* inv_sum) {
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const int64_t full = n / 16 * 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (n - full)) - 1);
  __m512 vmax[8], vsum[8];
  for (int64_t i = 0; i < nr; ++i) vmax[i] = ninf, vsum[i] = _mm512_setzero_ps();
  for (int64_t j = 0; j < full; j += 16)
    for (int64_t i = 0; i < nr; ++i) vmax[i] = _mm512_max_ps(vmax[i], load_scores(add, s + i * lds, j, 0xffff));
  if (tail)
    for (int64_t i = 0; i < nr; ++i) vmax[i] = _mm512_max_ps(vmax[i], load_scores(add, s + i * lds, full, tail));
  float m[8];
  for (int64_t i = 0; i < nr; ++i) {
    m[i] = _mm512_reduce_max_ps(vmax[i]);
    vmax[i] = _mm512_set1_ps(m[i] == -std::numeric_limits<float>::infinity() ? 0.f : m[i]);
  }
  for (int64_t j = 0; j < full; j += 16)
    for (int64_t i = 0; i < nr; ++i) {
      __m512 e = exp512(_mm512_sub_ps(load_scores(add, s + i * lds, j, 0xffff), vmax[i]));
      _mm512_storeu_ps(s + i * lds + j, e);
      vsum[i] = _mm512_add_ps(vsum[i], e);
    }
  if (tail)
    for (int64_t i = 0; i < nr; ++i) {
      __m512 e = _mm512_maskz_mov_ps(tail, exp512(_mm512_sub_ps(load_scores(add, s + i * lds, full, tail), vmax[i])));
      _mm512_mask_storeu_ps(s + i * lds + full, tail, e);
      vsum[i] = _mm512_add_ps(vsum[i], e);
    }
  for (int64_t i = 0; i < nr; ++i) {
    if (m[i] == -std::numeric_limits<float>::infinity()) {
      std::fill(s + i * lds, s + i * lds + n, std::numeric_limits<float>::quiet_NaN());
      inv_sum[i] = std::numeric_limits<float>::quiet_NaN();
    } else {
      inv_sum[i] = 1.0f / _mm512_reduce_add_ps(vsum[i]);
    }
  }
}

// Softmax of one row in place.
__attribute__((target("avx512f"))) void softmax_row_avx512(float* s, int64_t n) {
  float inv_sum;
  softmax_exp_rows_avx512(s, n, 1, n, nullptr, &inv_sum);
  if (inv_sum != inv_sum) return;
  const __m512 inv = _mm512_set1_ps(inv_sum);
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) _mm512_storeu_ps(s + j, _mm512_mul_ps(_mm512_loadu_ps(s + j), inv));
  if (j < n) {
    __mmask16 mk = static_cast<__mmask16>((1u << (n - j)) - 1);
    _mm512_mask_storeu_ps(s + j, mk, _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, s + j), inv));
  }
}

void softmax_row_portable(float* s, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) m = std::max(m, s[j]);
  if (m == -std::numeric_limits<float>::infinity()) {
    for (int64_t j = 0; j < n; ++j) s[j] = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    s[j] = std::exp(s[j] - m);
    sum += s[j];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < n; ++j) s[j] *= inv;
}

// exp512's method 8 lanes at a time, for CPUs with AVX2 and FMA but not AVX-512 (the same
// constants, so both give the same values).
__attribute__((target("avx2,fma"))) __m256 exp256(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.3f);
  const __m256 shifter = _mm256_set1_ps(0x1.8p23f);
  __m256 xc = _mm256_max_ps(x, lo);
  __m256 t = _mm256_fmadd_ps(xc, _mm256_set1_ps(1.44269504088896341f), shifter);
  __m256 n = _mm256_sub_ps(t, shifter);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187045e-06f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i bias = _mm256_set1_epi32(127 - 0x4b400000);
  __m256 scale = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_castps_si256(t), bias), 23));
  __m256 y = _mm256_mul_ps(p, scale);
  return _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));  // below the range: 0
}

// Softmax of one row in place with AVX2: max, exp and sum, scale (the portable loop's steps;
// the sum in f32 lanes, as the AVX-512 kernel sums).
__attribute__((target("avx2,fma"))) void softmax_row_avx2(float* s, int64_t n) {
  const float ninf = -std::numeric_limits<float>::infinity();
  __m256 vmax = _mm256_set1_ps(ninf);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(s + j));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, vmax);
  float m = ninf;
  for (float v : lanes) m = std::max(m, v);
  for (int64_t t = j; t < n; ++t) m = std::max(m, s[t]);
  if (m == ninf) {
    std::fill(s, s + n, std::numeric_limits<float>::quiet_NaN());
    return;
  }
  const __m256 vm = _mm256_set1_ps(m);
  __m256 vsum = _mm256_setzero_ps();
  for (j = 0; j + 8 <= n; j += 8) {
    const __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(s + j), vm));
    _mm256_storeu_ps(s + j, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  _mm256_store_ps(lanes, vsum);
  float sum = 0.f;
  for (float v : lanes) sum += v;
  for (int64_t t = j; t < n; ++t) {
    alignas(32) float one[8] = {s[t] - m};
    _mm256_store_ps(one, exp256(_mm256_load_ps(one)));
    s[t] = one[0];
    sum += one[0];
  }
  const __m256 inv = _mm256_set1_ps(1.0f / sum);
  for (j = 0; j + 8 <= n; j += 8) _mm256_storeu_ps(s + j, _mm256_mul_ps(_mm256_loadu_ps(s + j), inv));
  for (; j < n; ++j) s[j] *= 1.0f / sum;
}

using SoftmaxRow = void (*)(float*, int64_t);
SoftmaxRow pick_softmax() {
  if (__builtin_cpu_supports("avx512f")) return softmax_row_avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return softmax_row_avx2;
  return softmax_row_portable;
}

// ---- decode: one query position (its grouped heads as up to 8 rows) against every key
// The GEMM driver packs K^T into panels for each call, which for one query row costs as much as
// the product itself; here each key row is read once, in place, by every query row of the task.

// Dot product of n floats, 16 at a time in two accumulators.
__attribute__((target("avx2,fma"))) inline float dot_avx2(const float* a, const float* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t c = 0;
  for (; c + 16 <= n; c += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + c), _mm256_loadu_ps(b + c), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + c + 8), _mm256_loadu_ps(b + c + 8), acc1);
  }
  if (c + 8 <= n) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + c), _mm256_loadu_ps(b + c), acc0);
    c += 8;
  }
  const __m256 acc = _mm256_add_ps(acc0, acc1);
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
  float sum = _mm_cvtss_f32(h);
  for (; c < n; ++c) sum += a[c] * b[c];
  return sum;
}

// s[i * n + j] = scale * q_i . k_j for `rows` query rows and n keys (row stride k_ld).
__attribute__((target("avx2,fma"))) void decode_scores_avx2(const float* q, int64_t q_row, int64_t rows, const float* k,
                                                            int64_t k_ld, int64_t n, int64_t d, float scale, float* s) {
  for (int64_t j = 0; j < n; ++j) {
    const float* kj = k + j * k_ld;
    for (int64_t i = 0; i < rows; ++i) s[i * n + j] = scale * dot_avx2(q + i * q_row, kj, d);
  }
}

// o_i = sum_j p[i * n + j] * v_j for `rows` rows of dv values (row stride o_row); o is
// overwritten.
__attribute__((target("avx2,fma"))) void decode_values_avx2(const float* p, int64_t rows, const float* v, int64_t v_ld,
                                                            int64_t n, int64_t dv, float* o, int64_t o_row) {
  for (int64_t i = 0; i < rows; ++i) std::fill(o + i * o_row, o + i * o_row + dv, 0.f);
  const int64_t full = dv / 8 * 8;
  for (int64_t j = 0; j < n; ++j) {
    const float* vj = v + j * v_ld;
    for (int64_t i = 0; i < rows; ++i) {
      const float pij = p[i * n + j];
      const __m256 pb = _mm256_set1_ps(pij);
      float* oi = o + i * o_row;
      for (int64_t c = 0; c < full; c += 8)
        _mm256_storeu_ps(oi + c, _mm256_fmadd_ps(pb, _mm256_loadu_ps(vj + c), _mm256_loadu_ps(oi + c)));
      for (int64_t c = full; c < dv; ++c) oi[c] += pij * vj[c];
    }
  }
}

// ---- direct AVX-512 path for blocks of query rows (encoders, prefill)
// With a head dimension of 32 to 128, the products of one (batch, head) are too small for the
// GEMM driver to pay for its packing, and a 128x128 score tile (64 KiB) is twice L1. Here K is
// transposed once per task into [D, Sk rounded up to 16] (whole vectors per row, zero-padded),
// and the block's query rows go through in groups of 8: scores, mask and softmax, then the
// value product while those 8 score rows are still in L1. Dot products sum over the head
// dimension in order, as the GEMM does, and the scale multiplies the finished sum.

// Below this many query rows per task the transpose of K costs about as much as the products
// (each key meets few rows), and the GEMM path, which reads K in place, is used instead.
constexpr int64_t kDirectMinRows = 8;
// Above this head dimension K^T outgrows L1 (and its transpose, redone by every task of a
// head, costs more than the GEMM driver's packing): against the GEMM path, 12 heads of 64 in
// a causal prefill of 256 positions ran at 0.85x, 16 heads of 128 at 0.6x; MiniLM's 12 heads
// of 32 at 1.2-1.4x (bench/attention_bench.cpp).
constexpr int64_t kDirectMaxHeadDim = 32;
// bf16 operands: K^T holds pairs, so a head of 64 takes the L1 space of an f32 head of 32; the
// value product runs in column blocks of 32 (f32 kernel: at 2.8-3.1 ms the f32 GEMM path and
// 4.0 ms the widened bf16 one for 8 x 12 heads of 64 over 128 positions, before).
constexpr int64_t kDirectMaxHeadDimBf16 = 64;
// int8 scores: K^T holds quads (a head of 64 takes 4 KiB per 64 keys); V is f32 as for bf16.
constexpr int64_t kDirectMaxHeadDimI8 = 64;

// (The R x NV loops are unrolled by hand through the pragma: left as loops, GCC keeps the
// accumulator array in memory and stores it on every iteration.)

// S[r, 0:16*NV] = scale * sum_c Q[r, c] * Kt[c, 0:16*NV] for R rows.
template <int R, int NV>
__attribute__((target("avx512f"))) void qk_tile(const float* q, int64_t q_row, const float* kt, int64_t ldkt,
                                                int64_t d, float scale, float* s, int64_t lds) {
  __m512 acc[R][NV];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t c = 0; c < d; ++c) {
    __m512 kv[NV];
    #pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) kv[v] = _mm512_loadu_ps(kt + c * ldkt + 16 * v);
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 qb = _mm512_set1_ps(q[r * q_row + c]);
      #pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(qb, kv[v], acc[r][v]);
    }
  }
  const __m512 sc = _mm512_set1_ps(scale);
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(s + r * lds + 16 * v, _mm512_mul_ps(acc[r][v], sc));
}

// The bf16 tile (defined with the other bf16 kernels below): q's pairs against K^T pairs.
template <int R, int NV>
RLX_ATTENTION_BF16 void qk_tile(const uint16_t* q, int64_t q_row, const uint32_t* kt, int64_t ldkt, int64_t pairs,
                                float scale, float* s, int64_t lds);

// The int8 tile (with the bf16 ones): q's quads against K^T quads.
// K^T of int8 quads and, per key, what the tile needs besides: 128 * its sum of quants (the u8
// offset of q's quants) and its scale; column j of all three together (qk_rows steps keys).
struct I8Keys {
  const uint32_t* quads;
  const int32_t* offset;  // -128 * the key's sum of quants: where its accumulators start
  const float* scale;
  I8Keys operator+(int64_t j) const { return {quads + j, offset + j, scale + j}; }
};
// Q^T's u8 quads ([D/4, ldq] 32-bit lanes: row r's quants 4c .. 4c + 3, each + 128, in lane r
// of row c) and each row's scale; row r + of both together (qk_block steps rows).
struct I8Queries {
  const uint32_t* quads;
  int64_t ldq;
  const float* scale;
  I8Queries operator+(int64_t r) const { return {quads + r, ldq, scale + r}; }
};

template <int R, int NV>
RLX_ATTENTION_VNNI void qk_tile(I8Queries q, int64_t q_row, I8Keys kt, int64_t ldkt, int64_t quads, float scale,
                                float* s, int64_t lds);

// Scores of R rows against every (padded) key: 64 keys per tile, then the 16..48 left. Q and K
// are f32 and f32 K^T, bf16 and K^T pairs (uint32), or int8 quants and I8Keys, each with its
// qk_tile; `inner` counts the head dimension's elements, its pairs, or its quads.
template <int R, typename Q, typename K>
__attribute__((target("avx512f"))) void qk_rows(Q q, int64_t q_row, K kt, int64_t ldkt, int64_t inner,
                                                float scale, float* s) {
  int64_t j = 0;
  for (; j + 64 <= ldkt; j += 64) qk_tile<R, 4>(q, q_row, kt + j, ldkt, inner, scale, s + j, ldkt);
  switch ((ldkt - j) / 16) {
    case 3: qk_tile<R, 3>(q, q_row, kt + j, ldkt, inner, scale, s + j, ldkt); break;
    case 2: qk_tile<R, 2>(q, q_row, kt + j, ldkt, inner, scale, s + j, ldkt); break;
    case 1: qk_tile<R, 1>(q, q_row, kt + j, ldkt, inner, scale, s + j, ldkt); break;
    default: break;
  }
}

// O[r, 0:16*NV] = row_scale[r] * sum_j P[r, j] * V[j, 0:16*NV] for R rows; the last vector
// holds the columns set in `last` (the tail of the value dimension).
template <int R, int NV>
__attribute__((target("avx512f"))) void pv_tile(const float* p, int64_t ldp, const float* row_scale, const float* v,
                                                int64_t ldv, int64_t sk, __mmask16 last, float* o, int64_t ldo) {
  __m512 acc[R][NV];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 8
    for (int x = 0; x < NV; ++x) acc[r][x] = _mm512_setzero_ps();
  for (int64_t j = 0; j < sk; ++j) {
    __m512 vv[NV];
    #pragma GCC unroll 8
    for (int x = 0; x + 1 < NV; ++x) vv[x] = _mm512_loadu_ps(v + j * ldv + 16 * x);
    vv[NV - 1] = _mm512_maskz_loadu_ps(last, v + j * ldv + 16 * (NV - 1));
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 pb = _mm512_set1_ps(p[r * ldp + j]);
      #pragma GCC unroll 8
      for (int x = 0; x < NV; ++x) acc[r][x] = _mm512_fmadd_ps(pb, vv[x], acc[r][x]);
    }
  }
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m512 sc = _mm512_set1_ps(row_scale[r]);
    #pragma GCC unroll 8
    for (int x = 0; x + 1 < NV; ++x) _mm512_storeu_ps(o + r * ldo + 16 * x, _mm512_mul_ps(acc[r][x], sc));
    _mm512_mask_storeu_ps(o + r * ldo + 16 * (NV - 1), last, _mm512_mul_ps(acc[r][NV - 1], sc));
  }
}

// The bf16 tile (defined with the other bf16 kernels below): pairs of probabilities against
// pairs of value rows.
template <int R, int NV>
RLX_ATTENTION_BF16 void pv_tile(const uint32_t* p, int64_t ldp, const float* row_scale, const uint32_t* v, int64_t ldv,
                                int64_t pairs, __mmask16 last, float* o, int64_t ldo);

// Every value column (at most 32: kDirectMaxHeadDim) of R rows. P and V are f32 probabilities
// and value rows (sk of them), or bf16 pairs of both (sk = the pairs), each with its pv_tile.
template <int R, typename P, typename V>
__attribute__((target("avx512f"))) void pv_rows(const P* p, int64_t ldp, const float* row_scale, const V* v,
                                                int64_t ldv, int64_t sk, int64_t dv, float* o, int64_t ldo) {
  const __mmask16 last = static_cast<__mmask16>(dv % 16 ? (1u << (dv % 16)) - 1 : 0xffffu);
  if (dv > 16)
    pv_tile<R, 2>(p, ldp, row_scale, v, ldv, sk, last, o, ldo);
  else
    pv_tile<R, 1>(p, ldp, row_scale, v, ldv, sk, last, o, ldo);
}

// K^T and a contiguous copy of V for one head, prefetching the rows of K, V and Q a few
// positions ahead: the rows of a head are strided (H*D apart in bshd), which the hardware
// prefetcher follows poorly, and a task otherwise waits on each row's cache misses in turn.
// K goes through 16 x 16 register transposes (a scalar transpose of 128 x 32 floats was 1.2%
// of MiniLM's time at batch 1). Columns j >= sk of K^T are left for the caller to fill.
__attribute__((target("avx512f"))) void gather_head(const float* k, int64_t k_row, const float* v, int64_t v_row,
                                                    const float* q, int64_t q_row, int64_t sk, int64_t d, int64_t dv,
                                                    int64_t rows, float* kt, int64_t ldkt, float* vc) {
  constexpr int64_t ahead = 32;
  auto prefetch_row = [](const float* row, int64_t n) {
    for (int64_t c = 0; c < n; c += 16) _mm_prefetch(reinterpret_cast<const char*>(row + c), _MM_HINT_T0);
  };
  auto mask_of = [](int64_t n) { return static_cast<__mmask16>(n >= 16 ? 0xffffu : (1u << n) - 1u); };
  for (int64_t j = 0; j < std::min(ahead, sk); ++j) {
    prefetch_row(k + j * k_row, d);
    prefetch_row(v + j * v_row, dv);
  }
  for (int64_t j0 = 0; j0 < sk; j0 += 16) {
    const int64_t nj = std::min<int64_t>(16, sk - j0);
    for (int64_t j = j0; j < j0 + nj; ++j) {
      if (j + ahead < sk) {
        prefetch_row(k + (j + ahead) * k_row, d);
        prefetch_row(v + (j + ahead) * v_row, dv);
      }
      if (j < rows) prefetch_row(q + j * q_row, d);
    }
    const __mmask16 jmask = mask_of(nj);
    for (int64_t c0 = 0; c0 < d; c0 += 16) {
      const int64_t nc = std::min<int64_t>(16, d - c0);
      const __mmask16 cmask = mask_of(nc);
      __m512 r[16];
      for (int64_t i = 0; i < 16; ++i)
        r[i] = i < nj ? _mm512_maskz_loadu_ps(cmask, k + (j0 + i) * k_row + c0) : _mm512_setzero_ps();
      transpose16x16(r);
      for (int64_t c = 0; c < nc; ++c) _mm512_mask_storeu_ps(kt + (c0 + c) * ldkt + j0, jmask, r[c]);
    }
    for (int64_t j = j0; j < j0 + nj; ++j) {
      const float* vr = v + j * v_row;
      float* out = vc + j * dv;
      int64_t c = 0;
      for (; c + 16 <= dv; c += 16) _mm512_storeu_ps(out + c, _mm512_loadu_ps(vr + c));
      if (c < dv) _mm512_mask_storeu_ps(out + c, mask_of(dv - c), _mm512_maskz_loadu_ps(mask_of(dv - c), vr + c));
    }
  }
}

// The products of up to 8 rows, in register tiles of 4 rows (the remainder as one tile).
template <typename Q, typename K>
__attribute__((target("avx512f"))) void qk_block(int64_t rows, Q q, int64_t q_row, K kt, int64_t ldkt,
                                                 int64_t inner, float scale, float* s) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) qk_rows<4>(q + r * q_row, q_row, kt, ldkt, inner, scale, s + r * ldkt);
  switch (rows - r) {
    case 3: qk_rows<3>(q + r * q_row, q_row, kt, ldkt, inner, scale, s + r * ldkt); break;
    case 2: qk_rows<2>(q + r * q_row, q_row, kt, ldkt, inner, scale, s + r * ldkt); break;
    case 1: qk_rows<1>(q + r * q_row, q_row, kt, ldkt, inner, scale, s + r * ldkt); break;
    default: break;
  }
}

// row_scale[r] multiplies output row r (the softmax's 1/sum, applied once per output). A
// group of 8 rows is one tile (16 accumulators for 32 columns); fewer, a tile of that many.
template <typename P, typename V>
__attribute__((target("avx512f"))) void pv_block(int64_t rows, const P* p, int64_t ldp, const float* row_scale,
                                                 const V* v, int64_t ldv, int64_t sk, int64_t dv, float* o,
                                                 int64_t ldo) {
  switch (rows) {
    case 8: pv_rows<8>(p, ldp, row_scale, v, ldv, sk, dv, o, ldo); break;
    case 7: pv_rows<7>(p, ldp, row_scale, v, ldv, sk, dv, o, ldo); break;
    case 6: pv_rows<6>(p, ldp, row_scale, v, ldv, sk, dv, o, ldo); break;
    case 5: pv_rows<5>(p, ldp, row_scale, v, ldv, sk, dv, o, ldo); break;
    case 4: pv_rows<4>(p, ldp, row_scale, v, ldv, sk, dv, o, ldo); break;
    case 3: pv_rows<3>(p, ldp, row_scale, v, ldv, sk, dv, o, ldo); break;
    case 2: pv_rows<2>(p, ldp, row_scale, v, ldv, sk, dv, o, ldo); break;
    default: pv_rows<1>(p, ldp, row_scale, v, ldv, sk, dv, o, ldo); break;
  }
}

// ---- bf16 operands on AVX-512 BF16: the direct path's score product on pairs of the head
// dimension. K^T holds pairs, [D/2, ldkt] 32-bit lanes (key j's elements 2c and 2c + 1 in
// lane j of row c: a bf16 key row is already a sequence of such pairs, so the 32-bit 16 x 16
// transpose builds it), q's pairs are broadcast from where q is, and vdpbf16ps adds both
// products of a pair into an f32 lane: half the instructions of the f32 tile. V is widened to
// f32 as it is copied, and the value product is the f32 one on the f32 probabilities.

// S[r, 0:16*NV] = scale * sum_c Q[r, 2c:2c+2] . KtPairs[c, 0:16*NV] for R rows.
template <int R, int NV>
RLX_ATTENTION_BF16 void qk_tile(const uint16_t* q, int64_t q_row, const uint32_t* kt, int64_t ldkt, int64_t pairs,
                                     float scale, float* s, int64_t lds) {
  __m512 acc[R][NV];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t c = 0; c < pairs; ++c) {
    __m512bh kv[NV];
    #pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) kv[v] = (__m512bh)_mm512_loadu_si512(kt + c * ldkt + 16 * v);
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      uint32_t pair;
      std::memcpy(&pair, q + r * q_row + 2 * c, sizeof pair);
      const __m512bh qb = (__m512bh)_mm512_set1_epi32(static_cast<int>(pair));
      #pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], qb, kv[v]);
    }
  }
  const __m512 sc = _mm512_set1_ps(scale);
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(s + r * lds + 16 * v, _mm512_mul_ps(acc[r][v], sc));
}

// Keys as rows of `lanes` 32-bit lanes (src, row stride row_bytes: a bf16 key's pairs, an int8
// key's quads) -> K^T [lanes, ldkt] (key j in lane j of each row), through 16 x 16 register
// transposes. Columns j >= sk are left to the caller.
__attribute__((target("avx512f"))) void transpose_key_lanes(const void* src, int64_t row_bytes, int64_t sk,
                                                            int64_t lanes, uint32_t* kt, int64_t ldkt) {
  const char* k = static_cast<const char*>(src);
  for (int64_t j0 = 0; j0 < sk; j0 += 16) {
    const int64_t nj = std::min<int64_t>(16, sk - j0);
    const __mmask16 jmask = static_cast<__mmask16>(nj >= 16 ? 0xffffu : (1u << nj) - 1u);
    for (int64_t c0 = 0; c0 < lanes; c0 += 16) {
      const int64_t nc = std::min<int64_t>(16, lanes - c0);
      const __mmask16 pmask = static_cast<__mmask16>(nc >= 16 ? 0xffffu : (1u << nc) - 1u);
      __m512 r[16];
      for (int64_t i = 0; i < 16; ++i)
        r[i] = i < nj ? _mm512_castsi512_ps(_mm512_maskz_loadu_epi32(pmask, k + (j0 + i) * row_bytes + 4 * c0))
                      : _mm512_setzero_ps();
      transpose16x16(r);
      for (int64_t c = 0; c < nc; ++c)
        _mm512_mask_storeu_epi32(kt + (c0 + c) * ldkt + j0, jmask, _mm512_castps_si512(r[c]));
    }
  }
}

// The bf16 direct path's K^T pairs [pairs, ldkt] (columns j >= sk left to the caller) and V as
// pairs of rows [ceil(sk / 2), dv] (lane c of pair row t: v[2t][c] | v[2t + 1][c] << 16, the
// second zero past sk), for one head (d even, pairs = d / 2).
RLX_ATTENTION_BF16 void gather_head_bf16(const uint16_t* k, int64_t k_row, const uint16_t* v, int64_t v_row,
                                         int64_t sk, int64_t pairs, int64_t dv, uint32_t* kt, int64_t ldkt,
                                         uint32_t* vp) {
  transpose_key_lanes(k, 2 * k_row, sk, pairs, kt, ldkt);
  for (int64_t t = 0; 2 * t < sk; ++t)
    for (int64_t c = 0; c < dv; c += 16) {
      const int64_t n = std::min<int64_t>(16, dv - c);
      const __mmask16 m = static_cast<__mmask16>(n >= 16 ? 0xffffu : (1u << n) - 1u);
      const __m512i lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, v + 2 * t * v_row + c));
      const __m512i hi = 2 * t + 1 < sk ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, v + (2 * t + 1) * v_row + c))
                                        : _mm512_setzero_si512();
      _mm512_mask_storeu_epi32(vp + t * dv + c, m, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
    }
}

// nr rows of probabilities (f32, row stride lds, sk of them) as bf16 pairs (row stride ldp
// pairs; vcvtne2ps2bf16: nearest even), the second of the last pair zero for an odd sk.
RLX_ATTENTION_BF16 void probability_pairs(const float* s, int64_t lds, int64_t nr, int64_t sk, uint32_t* pp, int64_t ldp) {
  const int64_t pairs = (sk + 1) / 2;
  auto mask_of = [](int64_t n) { return static_cast<__mmask16>(n >= 16 ? 0xffffu : n <= 0 ? 0u : (1u << n) - 1u); };
  for (int64_t r = 0; r < nr; ++r)
    for (int64_t t = 0; t < pairs; t += 16) {
      const int64_t j = 2 * t;
      const __m512 lo = _mm512_maskz_loadu_ps(mask_of(sk - j), s + r * lds + j);
      const __m512 hi = _mm512_maskz_loadu_ps(mask_of(sk - j - 16), s + r * lds + j + 16);
      _mm512_mask_storeu_epi32(pp + r * ldp + t, mask_of(pairs - t), (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
}

// O[r, 0:16*NV] = row_scale[r] * sum_t P[r, t] . V[t, 0:16*NV] for R rows, pairs of keys at a
// time on vdpbf16ps; the last vector holds the columns set in `last`.
template <int R, int NV>
RLX_ATTENTION_BF16 void pv_tile(const uint32_t* p, int64_t ldp, const float* row_scale, const uint32_t* v, int64_t ldv,
                                int64_t pairs, __mmask16 last, float* o, int64_t ldo) {
  __m512 acc[R][NV];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 8
    for (int x = 0; x < NV; ++x) acc[r][x] = _mm512_setzero_ps();
  for (int64_t t = 0; t < pairs; ++t) {
    __m512bh vv[NV];
    #pragma GCC unroll 8
    for (int x = 0; x + 1 < NV; ++x) vv[x] = (__m512bh)_mm512_loadu_si512(v + t * ldv + 16 * x);
    vv[NV - 1] = (__m512bh)_mm512_maskz_loadu_epi32(last, v + t * ldv + 16 * (NV - 1));
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512bh pb = (__m512bh)_mm512_set1_epi32(static_cast<int>(p[r * ldp + t]));
      #pragma GCC unroll 8
      for (int x = 0; x < NV; ++x) acc[r][x] = _mm512_dpbf16_ps(acc[r][x], pb, vv[x]);
    }
  }
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m512 sc = _mm512_set1_ps(row_scale[r]);
    #pragma GCC unroll 8
    for (int x = 0; x + 1 < NV; ++x) _mm512_storeu_ps(o + r * ldo + 16 * x, _mm512_mul_ps(acc[r][x], sc));
    _mm512_mask_storeu_ps(o + r * ldo + 16 * (NV - 1), last, _mm512_mul_ps(acc[r][NV - 1], sc));
  }
}

// Each of n values rounded to bf16 and kept as f32 (nearest even, NaN kept): the probabilities
// of the widened bf16 paths.
void round_to_bf16(float* x, int64_t n) {
  for (int64_t j = 0; j < n; ++j) x[j] = bf16_to_f32(f32_to_bf16(x[j]));
}

// exp(s[j] - max) in place, rounded to bf16, and returns 1 / the sum of the unrounded values
// (NaN, with every value, when no key is seen): the probabilities of the widened bf16 paths
// that normalize a row at a time.
float bf16_probabilities_row(float* s, int64_t n) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  float inv_sum;
  if (avx512) {
    softmax_exp_rows_avx512(s, n, 1, n, nullptr, &inv_sum);
  } else {
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < n; ++j) m = std::max(m, s[j]);
    if (m == -std::numeric_limits<float>::infinity()) {
      std::fill(s, s + n, std::numeric_limits<float>::quiet_NaN());
      return std::numeric_limits<float>::quiet_NaN();
    }
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += (s[j] = std::exp(s[j] - m));
    inv_sum = static_cast<float>(1.0 / sum);
  }
  round_to_bf16(s, n);
  return inv_sum;
}

// rows x n bf16 values (row stride ld) widened into contiguous f32 rows.
void widen_rows(const uint16_t* src, int64_t ld, int64_t rows, int64_t n, float* dst) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c = 0; c < n; ++c) dst[i * n + c] = bf16_to_f32(src[i * ld + c]);
}

// ---- int8 scores (AttentionArgs::int8_scores). Rows of q and k are quantized as int8_matmul
// quantizes activations; the direct path on AVX-512 VNNI multiplies 4 quants at a time with
// vpdpbusd: K^T holds quads ([D/4, ldkt] 32-bit lanes, key j's quants 4c .. 4c + 3 in lane j of
// row c), each q row's quad is broadcast as u8 (q + 128), and 128 * (the key's sum of quants)
// comes off the exact int32 sum. A quarter of the f32 tile's instructions.

// The scale of a row of n floats and its quants: scale = max(max|x| / 127, 1e-30), quant =
// clamp(round_half_even(x / scale), -127, 127), in the scalar steps of the decomposition (the
// portable form, for the f32 paths' dequantized rows).
float quantize_row_scalar(const float* x, int64_t n, int8_t* q) {
  float amax = 0.f;
  for (int64_t c = 0; c < n; ++c) amax = std::max(amax, std::fabs(x[c]));
  const float s = std::max(amax / 127.f, 1e-30f);
  for (int64_t c = 0; c < n; ++c) {
    const float v = std::min(127.f, std::max(-127.f, x[c] / s));
    q[c] = static_cast<int8_t>(std::nearbyint(v));
  }
  return s;
}

// rows x n f32 values (row stride ld) through their int8 quants and back into contiguous rows
// (quant * scale, as the decomposition's product): the f32 paths' operands.
void dequantized_rows(const float* src, int64_t ld, int64_t rows, int64_t n, float* dst) {
  thread_local std::vector<int8_t> q;
  q.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < rows; ++i) {
    const float s = quantize_row_scalar(src + i * ld, n, q.data());
    for (int64_t c = 0; c < n; ++c) dst[i * n + c] = static_cast<float>(q[c]) * s;
  }
}

// Columns of a transposed operand xt [d, ldx] (column j: row j of q or k, zero-padded to whole
// vectors; n a multiple of 16) to int8 quads [d / 4, ldq] and scales [n], 16 rows at a time:
// amax and the sums are vertical, so no row needs a horizontal reduction. The quants are
// quantize_row_scalar's: x / s is x * (1 / s) except on a vector with a lane near a
// half-integer or a reciprocal that is not a normal float, which divides (kQuantTieBand in
// qgemm_q8.h: the two round alike elsewhere). u8: each quant + 128 (q's form for vpdpbusd);
// neg_offset (k): -128 * each row's sum of quants.
RLX_ATTENTION_VNNI void quantize_columns(const float* xt, int64_t ldx, int64_t d, int64_t n, bool u8, uint32_t* quads,
                                         int64_t ldq, float* scale, int32_t* neg_offset) {
  const __m512 lo = _mm512_set1_ps(-127.f), hi = _mm512_set1_ps(127.f), half = _mm512_set1_ps(0.5f);
  const __m512 band = _mm512_set1_ps(0x1p-13f), big = _mm512_set1_ps(0x1p126f);
  const __m512i low_byte = _mm512_set1_epi32(0xff), offset = _mm512_set1_epi32(u8 ? 128 : 0);
  for (int64_t j = 0; j < n; j += 16) {
    __m512 amax = _mm512_setzero_ps();
    for (int64_t c = 0; c < d; ++c) amax = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(xt + c * ldx + j)), amax);
    const __m512 sv = _mm512_max_ps(_mm512_div_ps(amax, _mm512_set1_ps(127.f)), _mm512_set1_ps(1e-30f));
    _mm512_storeu_ps(scale + j, sv);
    const __m512 rv = _mm512_div_ps(_mm512_set1_ps(1.f), sv);
    const bool divide_all = _mm512_cmp_ps_mask(sv, big, _CMP_GT_OQ) != 0;
    __m512i sum = _mm512_setzero_si512();
    for (int64_t c4 = 0; c4 < d / 4; ++c4) {
      __m512i quad = _mm512_setzero_si512();
      for (int t = 0; t < 4; ++t) {
        const __m512 x = _mm512_loadu_ps(xt + (4 * c4 + t) * ldx + j);
        __m512 v = _mm512_mul_ps(x, rv);
        const __m512 frac = _mm512_sub_ps(v, _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        if (divide_all || _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(_mm512_abs_ps(frac), half)), band, _CMP_LT_OQ))
          v = _mm512_div_ps(x, sv);
        v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
        const __m512i iv = _mm512_cvt_roundps_epi32(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        sum = _mm512_add_epi32(sum, iv);
        quad = _mm512_or_si512(quad, _mm512_slli_epi32(_mm512_and_si512(_mm512_add_epi32(iv, offset), low_byte), 8 * t));
      }
      _mm512_storeu_si512(quads + c4 * ldq + j, quad);
    }
    if (neg_offset) _mm512_storeu_si512(neg_offset + j, _mm512_mullo_epi32(sum, _mm512_set1_epi32(-128)));
  }
}

// S[r, 0:16*NV] = scale * sq_r * sk_j * sum_c q_r[4c:4c+4] . k_j[4c:4c+4] for R rows (the int32
// accumulators start at -128 * the key's sum of quants, which takes out q's + 128).
template <int R, int NV>
RLX_ATTENTION_VNNI void qk_tile(I8Queries q, int64_t q_row, I8Keys kt, int64_t ldkt, int64_t quads, float scale,
                                float* s, int64_t lds) {
  __m512i acc[R][NV];
  #pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) {
    const __m512i start = _mm512_loadu_si512(kt.offset + 16 * v);
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r][v] = start;
  }
  for (int64_t c = 0; c < quads; ++c) {
    __m512i kv[NV];
    #pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) kv[v] = _mm512_loadu_si512(kt.quads + c * ldkt + 16 * v);
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512i qb = _mm512_set1_epi32(static_cast<int>(q.quads[c * q.ldq + r * q_row]));
      #pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], qb, kv[v]);
    }
  }
  #pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) {
    const __m512 ks = _mm512_loadu_ps(kt.scale + 16 * v);
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      _mm512_storeu_ps(s + r * lds + 16 * v,
                       _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(acc[r][v]), ks), _mm512_set1_ps(q.scale[r * q_row] * scale)));
  }
}

}  // namespace

namespace {

// Strides of (batch, head, position), contiguous [B, H, S, D] when not given.
void strides_or_contiguous(const int64_t in[3], int64_t heads, int64_t seq, int64_t dim, int64_t out[3]) {
  if (in[0] == 0 && in[1] == 0 && in[2] == 0) {
    out[2] = dim;
    out[1] = seq * dim;
    out[0] = heads * seq * dim;
  } else {
    for (int i = 0; i < 3; ++i) out[i] = in[i];
  }
}

// The query rows of one task: a block of positions of one head, or with one query position
// and grouped heads, the query heads of a key/value head.
int64_t task_rows(const AttentionArgs& a, bool* grouped) {
  const int64_t rep = a.heads_q / a.heads_kv;
  *grouped = a.seq_q == 1 && rep > 1;
  return *grouped ? rep : a.seq_q <= 128 ? a.seq_q : 64;
}

// Keys that no row of a task sees (past causality, or false in every row's mask) take no part
// in either product: a block of a causal prefill sees about half of the keys, a sliding-window
// layer's block only its window. [*jlo, *jhi) holds every key some row of the task (rows from
// query q0 of head h0 in batch b; grouped: heads h0 .. at query q0) sees; if no row sees any
// key, all are kept (and every row becomes NaN, as the reference gives).
void seen_keys(const AttentionArgs& a, bool grouped, int64_t b, int64_t h0, int64_t q0, int64_t rows, bool shared_mask,
               int64_t* jlo_out, int64_t* jhi_out) {
  const int64_t sk = a.seq_k, shift = a.seq_k - a.seq_q;
  int64_t jlo = 0, jhi = sk;
  if (a.causal) jhi = std::min(sk, (grouped ? q0 : q0 + rows - 1) + shift + 1);
  if (a.mask) {
    int64_t first = jhi, last = jlo - 1;
    const int64_t js = a.mask_strides[3];
    for (int64_t i = 0; i < (shared_mask ? 1 : rows) && (first > jlo || last < jhi - 1); ++i) {
      const int64_t qi = grouped ? q0 : q0 + i, h = grouped ? h0 + i : h0;
      const int64_t base = b * a.mask_strides[0] + h * a.mask_strides[1] + qi * a.mask_strides[2];
      auto seen = [&](int64_t j) {
        return a.mask_dtype == DType::boolean
                   ? static_cast<const uint8_t*>(a.mask)[base + j * js] != 0
                   : static_cast<const float*>(a.mask)[base + j * js] != -std::numeric_limits<float>::infinity();
      };
      for (int64_t j = jlo; j < first; ++j)
        if (seen(j)) {
          first = j;
          break;
        }
      for (int64_t j = jhi - 1; j > last; --j)
        if (seen(j)) {
          last = j;
          break;
        }
    }
    jlo = first;
    jhi = last + 1;
  }
  if (jhi <= jlo) jlo = 0, jhi = sk;
  *jlo_out = jlo;
  *jhi_out = jhi;
}

// A task's q (rows of them), k and v (every key) as f32 rows for the f32 paths, from offsets
// off and row strides ld (q, k, v): bf16 operands widened (widen; the direct bf16 kernel reads
// them as they are, and then the pointers are null), and q and k through their int8 quants
// and back (dequantize: int8 scores off the vpdpbusd kernel). Thread-local buffers.
struct TaskRows {
  const float *q, *k, *v;
  int64_t q_rs, k_rs, v_rs;
};
TaskRows task_rows_f32(const AttentionArgs& a, bool widen, bool dequantize, const int64_t off[3], const int64_t ld[3],
                       int64_t rows) {
  const bool bf16 = a.operand_type == DType::bf16;
  const int64_t d = a.head_dim, dv = a.head_dim_v, sk = a.seq_k;
  TaskRows t{bf16 ? nullptr : a.q + off[0], bf16 ? nullptr : a.k + off[1], bf16 ? nullptr : a.v + off[2], ld[0], ld[1],
             ld[2]};
  if (widen) {
    thread_local std::vector<float> qw, kw, vw;
    qw.resize(static_cast<size_t>(rows * d));
    kw.resize(static_cast<size_t>(sk * d));
    vw.resize(static_cast<size_t>(sk * dv));
    widen_rows(a.q_bf16 + off[0], ld[0], rows, d, qw.data());
    widen_rows(a.k_bf16 + off[1], ld[1], sk, d, kw.data());
    widen_rows(a.v_bf16 + off[2], ld[2], sk, dv, vw.data());
    t = {qw.data(), kw.data(), vw.data(), d, d, dv};
  }
  if (dequantize) {
    thread_local std::vector<float> qw, kw;
    qw.resize(static_cast<size_t>(rows * d));
    kw.resize(static_cast<size_t>(sk * d));
    dequantized_rows(t.q, t.q_rs, rows, d, qw.data());
    dequantized_rows(t.k, t.k_rs, sk, d, kw.data());
    t.q = qw.data(), t.k = kw.data(), t.q_rs = d, t.k_rs = d;
  }
  return t;
}

// The keys jlo .. jhi - 1 of batch b's sequence in paged pools (k, v: the pools, row strides
// k_row, v_row), as matrices with one row stride each, which the products read: in place when
// their blocks follow each other in the pool (a sequence's blocks usually do: a fresh pool
// hands them out in order), else copied together into thread-local rows.
struct KeyRows {
  const float *k, *v;
  int64_t k_ld, v_ld;
};
KeyRows paged_key_rows(const AttentionArgs& a, int64_t b, const float* k, int64_t k_row, const float* v, int64_t v_row,
                       int64_t jlo, int64_t jhi, int64_t d, int64_t dv) {
  const int64_t* table = a.block_table + b * a.table_cols;
  const int64_t b0 = jlo / a.block_size, b1 = (jhi - 1) / a.block_size;
  bool in_place = true;
  for (int64_t blk = b0 + 1; blk <= b1 && in_place; ++blk) in_place = table[blk] == table[blk - 1] + 1;
  if (in_place) {
    const int64_t slot = table[b0] * a.block_size + jlo % a.block_size;
    return {k + slot * k_row, v + slot * v_row, k_row, v_row};
  }
  thread_local std::vector<float> kp_buf, vp_buf;
  const int64_t n = jhi - jlo;
  if (kp_buf.size() < static_cast<size_t>(n * d)) kp_buf.resize(static_cast<size_t>(n * d));
  if (vp_buf.size() < static_cast<size_t>(n * dv)) vp_buf.resize(static_cast<size_t>(n * dv));
  for (int64_t j = jlo; j < jhi; ++j) {
    const int64_t slot = table[j / a.block_size] * a.block_size + j % a.block_size;
    std::copy_n(k + slot * k_row, d, kp_buf.data() + (j - jlo) * d);
    std::copy_n(v + slot * v_row, dv, vp_buf.data() + (j - jlo) * dv);
  }
  return {kp_buf.data(), vp_buf.data(), d, dv};
}

// A mask that is the same for every row of a task (a padding mask [B, 1, 1, Sk]) as one
// additive row over the keys (0 or -inf for bool), for batch b and head h0.
void additive_mask_row(const AttentionArgs& a, int64_t b, int64_t h0, std::vector<float>& row) {
  const int64_t sk = a.seq_k;
  if (row.size() < static_cast<size_t>(sk)) row.resize(static_cast<size_t>(sk));
  const int64_t base = b * a.mask_strides[0] + h0 * a.mask_strides[1], js = a.mask_strides[3];
  if (a.mask_dtype == DType::boolean) {
    const uint8_t* m = static_cast<const uint8_t*>(a.mask) + base;
    for (int64_t j = 0; j < sk; ++j) row[j] = m[j * js] ? 0.f : -std::numeric_limits<float>::infinity();
  } else {
    const float* m = static_cast<const float*>(a.mask) + base;
    for (int64_t j = 0; j < sk; ++j) row[j] = m[j * js];
  }
}

// vpdpbusd for int8 scores: AVX-512 VNNI with the avx512 qgemm family selected (a test that
// selects another family gets the dequantized f32 paths).
bool i8_dot() {
  static const bool vnni = __builtin_cpu_supports("avx512vnni");
  return vnni && std::strcmp(qgemm_kernel_name(), "avx512") == 0;
}

}  // namespace

bool attention_int8_direct(const AttentionArgs& a) {
  bool grouped;
  return a.heads_kv > 0 && a.int8_scores && i8_dot() && a.head_dim % 4 == 0 && a.head_dim <= kDirectMaxHeadDimI8 &&
         a.head_dim_v <= kDirectMaxHeadDimI8 && task_rows(a, &grouped) >= kDirectMinRows && a.direct_kernel &&
         !a.block_table;
}

bool attention_bf16_direct(const AttentionArgs& a) {
  bool grouped;
  return a.heads_kv > 0 && gemm_bf16_dot() && __builtin_cpu_supports("avx512f") && a.head_dim % 2 == 0 &&
         a.head_dim <= kDirectMaxHeadDimBf16 && a.head_dim_v <= kDirectMaxHeadDimBf16 &&
         task_rows(a, &grouped) >= kDirectMinRows && a.direct_kernel && !a.block_table;
}

Status attention_f32(const AttentionArgs& a) {
  if (a.batch < 0 || a.heads_q <= 0 || a.heads_kv <= 0 || a.heads_q % a.heads_kv != 0 || a.seq_q < 0 || a.seq_k < 0 ||
      a.head_dim <= 0 || a.head_dim_v <= 0)
    return error(ErrorCode::invalid_argument, "attention: inconsistent sizes");
  if (a.batch == 0 || a.seq_q == 0) return Status::ok();
  const bool bf16 = a.operand_type == DType::bf16;
  if (a.operand_type != DType::f32 && !bf16)
    return error(ErrorCode::invalid_argument, "attention: operands must be f32 or bf16, got ", dtype_name(a.operand_type));
  if (!a.out || (bf16 ? !a.q_bf16 || !a.k_bf16 || !a.v_bf16 : !a.q || !a.k || !a.v))
    return error(ErrorCode::invalid_argument, "attention: null operand");
  if (bf16 && a.block_table) return error(ErrorCode::invalid_argument, "attention: bf16 operands with paged keys");
  if (a.int8_scores && (bf16 || a.block_table))
    return error(ErrorCode::invalid_argument, "attention: int8 scores need f32 operands and no paged keys");
  const bool paged = a.block_table != nullptr;
  if (paged) {
    if (a.block_size <= 0 || a.table_cols <= 0 || a.table_cols * a.block_size != a.seq_k || a.pool_blocks <= 0)
      return error(ErrorCode::invalid_argument, "paged attention: ", a.table_cols, " blocks of ", a.block_size,
                   " do not make ", a.seq_k, " keys");
    for (int64_t i = 0; i < a.batch * a.table_cols; ++i)
      if (a.block_table[i] < 0 || a.block_table[i] >= a.pool_blocks)
        return error(ErrorCode::out_of_range, "paged attention: block_table[", i / a.table_cols, ", ", i % a.table_cols,
                     "] = ", a.block_table[i], " is outside the pool's ", a.pool_blocks, " blocks");
  }
  static const SoftmaxRow softmax_row = pick_softmax();
  const bool has_bf16_dot = gemm_bf16_dot();
  const bool has_i8_dot = a.int8_scores && i8_dot();
  static const bool has_avx512 = __builtin_cpu_supports("avx512f");
  static const bool has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool direct = has_avx512 && a.direct_kernel && !paged;
  const int64_t rep = a.heads_q / a.heads_kv;
  const int64_t sk = a.seq_k, d = a.head_dim, dv = a.head_dim_v;
  int64_t qs[3], ks[3], vs[3], os[3];
  strides_or_contiguous(a.q_strides, a.heads_q, a.seq_q, d, qs);
  strides_or_contiguous(a.k_strides, a.heads_kv, sk, d, ks);
  strides_or_contiguous(a.v_strides, a.heads_kv, sk, dv, vs);
  strides_or_contiguous(a.out_strides, a.heads_q, a.seq_q, dv, os);
  // One query position with grouped heads: the rep query heads of a key/value head are the
  // rows of one task (rows step over heads). Otherwise a task is a block of query positions
  // of one head (rows step over positions); one block per head up to 128 positions.
  bool grouped;
  const int64_t qb = task_rows(a, &grouped);
  const int64_t blocks = grouped ? 1 : (a.seq_q + qb - 1) / qb;
  const int64_t heads_per_task = grouped ? rep : 1;
  const int64_t tasks = a.batch * (a.heads_q / heads_per_task) * blocks;
  const int64_t q_row = grouped ? qs[1] : qs[2], o_row = grouped ? os[1] : os[2];
  Status failure;
  std::mutex failure_mu;
  auto fail = [&](const Status& st) {
    std::lock_guard<std::mutex> lock(failure_mu);
    if (failure.is_ok()) failure = st;
  };
  ThreadPool::global().run(tasks, [&](int64_t t, int) {
    thread_local std::vector<float> scratch;
    const int64_t blk = t % blocks, bh = t / blocks;
    const int64_t ngroups = a.heads_q / heads_per_task;
    const int64_t h0 = (bh % ngroups) * heads_per_task, b = bh / ngroups, hk = h0 / rep;
    const int64_t q0 = blk * qb, rows = grouped ? rep : std::min(qb, a.seq_q - q0);
    float* o = a.out + b * os[0] + h0 * os[1] + q0 * os[2];
    if (sk == 0) {
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < dv; ++j) o[i * o_row + j] = std::numeric_limits<float>::quiet_NaN();
      return;
    }
    const int64_t q_off = b * qs[0] + h0 * qs[1] + q0 * qs[2], k_off = b * ks[0] + hk * ks[1],
                  v_off = b * vs[0] + hk * vs[1];
    // q, k and v as f32 rows (row strides q_rs, k_rs, v_rs). bf16 operands: the direct path
    // with AVX-512 BF16 reads them as they are (below); every other path reads the task's rows
    // widened to f32 here.
    const bool bf16_direct = bf16 && direct && rows >= kDirectMinRows && has_bf16_dot && d % 2 == 0 &&
                             d <= kDirectMaxHeadDimBf16 && dv <= kDirectMaxHeadDimBf16;
    const bool i8_direct = has_i8_dot && direct && rows >= kDirectMinRows && d % 4 == 0 && d <= kDirectMaxHeadDimI8 &&
                           dv <= kDirectMaxHeadDimI8;
    const bool direct_rows = bf16_direct || i8_direct ||
                             (direct && rows >= kDirectMinRows && d <= kDirectMaxHeadDim && dv <= kDirectMaxHeadDim);
    const int64_t offsets[3] = {q_off, k_off, v_off}, row_strides[3] = {q_row, ks[2], vs[2]};
    const TaskRows tr = task_rows_f32(a, bf16 && !bf16_direct, a.int8_scores && !i8_direct, offsets, row_strides, rows);
    const float *q = tr.q, *k = tr.k, *v = tr.v;
    const int64_t q_rs = tr.q_rs, k_rs = tr.k_rs, v_rs = tr.v_rs;
    const int64_t shift = sk - a.seq_q;
    // A mask that is the same for every row of the task (a padding mask [B, 1, 1, Sk]) becomes
    // one additive row (0 or -inf for bool), added with a vector loop.
    const bool shared_mask = a.mask && a.mask_strides[2] == 0 && (!grouped || a.mask_strides[1] == 0);
    thread_local std::vector<float> mask_row;
    if (shared_mask) additive_mask_row(a, b, h0, mask_row);
    // Soft-capping of a row of scaled scores (before the mask, as Gemma 2 applies it). The
    // row helpers take scores of keys [j0, j0 + n) (row[0] is key j0).
    auto cap_row = [&](float* row, int64_t n) {
      const float c = a.softcap, inv = 1.f / a.softcap;
      for (int64_t j = 0; j < n; ++j) row[j] = c * std::tanh(row[j] * inv);
    };
    // Causality, then the mask and causality, on the scaled scores of task row i.
    auto causal_row_scores = [&](float* row, int64_t i, int64_t j0, int64_t n) {
      const int64_t qi = grouped ? q0 : q0 + i;
      if (a.causal)
        for (int64_t j = std::max<int64_t>(j0, qi + shift + 1); j < j0 + n; ++j)
          row[j - j0] = -std::numeric_limits<float>::infinity();
    };
    auto mask_row_scores = [&](float* row, int64_t i, int64_t j0, int64_t n) {
      const int64_t qi = grouped ? q0 : q0 + i, h = grouped ? h0 + i : h0;
      if (shared_mask) {
        const float* mr = mask_row.data() + j0;
        for (int64_t j = 0; j < n; ++j) row[j] += mr[j];
      } else if (a.mask) {
        const int64_t js = a.mask_strides[3];
        const int64_t base = b * a.mask_strides[0] + h * a.mask_strides[1] + qi * a.mask_strides[2] + j0 * js;
        if (a.mask_dtype == DType::boolean) {
          const uint8_t* m = static_cast<const uint8_t*>(a.mask) + base;
          for (int64_t j = 0; j < n; ++j)
            if (!m[j * js]) row[j] = -std::numeric_limits<float>::infinity();
        } else {
          const float* m = static_cast<const float*>(a.mask) + base;
          for (int64_t j = 0; j < n; ++j) row[j] += m[j * js];
        }
      }
      causal_row_scores(row, i, j0, n);
    };
    if (direct_rows) {
      // K^T [D, ldkt] zero-padded, and V copied to contiguous rows: in the bshd layout the rows
      // of one head are H*D apart, and with 12 heads of 32 that stride maps a head's 128 rows
      // onto a few L1 sets, which the value product would otherwise miss on every row
      // (a row stride of a multiple of 1 KiB would put K^T's column writes in few L1 sets)
      int64_t ldkt = (sk + 15) / 16 * 16;
      if (ldkt % 256 == 0) ldkt += 16;
      thread_local std::vector<float> kt_buf, v_buf;
      thread_local std::vector<uint32_t> kt_pairs_buf;  // bf16: K^T as d / 2 rows of pairs; int8: d / 4 of quads
      // int8: Q^T (f32, then quads), and the scales of q's rows and k's, and the keys' offsets
      thread_local std::vector<float> qt_buf, q_scale_buf, k_scale_buf;
      thread_local std::vector<uint32_t> q_quads_buf;
      thread_local std::vector<int32_t> k_off_buf;
      const int64_t ldq = (rows + 15) / 16 * 16;
      float inv_sum[8];
      if (bf16_direct || i8_direct) {
        const int64_t lanes = bf16_direct ? d / 2 : d / 4;
        if (kt_pairs_buf.size() < static_cast<size_t>(lanes * ldkt)) kt_pairs_buf.resize(static_cast<size_t>(lanes * ldkt));
      }
      if (i8_direct) {
        qt_buf.resize(static_cast<size_t>(d * ldq));
        q_quads_buf.resize(static_cast<size_t>(d / 4 * ldq));
        q_scale_buf.resize(static_cast<size_t>(ldq));
        k_off_buf.resize(static_cast<size_t>(ldkt));
        k_scale_buf.resize(static_cast<size_t>(ldkt));
      }
      if (!bf16_direct && kt_buf.size() < static_cast<size_t>(d * ldkt)) kt_buf.resize(static_cast<size_t>(d * ldkt));
      // bf16: V as pairs of rows, and a group's probabilities as pairs
      thread_local std::vector<uint32_t> v_pairs_buf, p_pairs_buf;
      if (bf16_direct) {
        if (v_pairs_buf.size() < static_cast<size_t>((sk + 1) / 2 * dv)) v_pairs_buf.resize(static_cast<size_t>((sk + 1) / 2 * dv));
        if (p_pairs_buf.size() < static_cast<size_t>(8 * ldkt / 2)) p_pairs_buf.resize(static_cast<size_t>(8 * ldkt / 2));
      } else if (v_buf.size() < static_cast<size_t>(sk * dv)) {
        v_buf.resize(static_cast<size_t>(sk * dv));
      }
      if (scratch.size() < static_cast<size_t>(8 * ldkt)) scratch.resize(static_cast<size_t>(8 * ldkt));
      float* kt = kt_buf.data();
      uint32_t* kt_pairs = kt_pairs_buf.data();
      float* vc = v_buf.data();
      float* s = scratch.data();
      if (bf16_direct) {
        gather_head_bf16(a.k_bf16 + k_off, ks[2], a.v_bf16 + v_off, vs[2], sk, d / 2, dv, kt_pairs, ldkt,
                         v_pairs_buf.data());
        for (int64_t c = 0; c < d / 2; ++c)
          for (int64_t j = sk; j < ldkt; ++j) kt_pairs[c * ldkt + j] = 0;
      } else {
        gather_head(k, k_rs, v, v_rs, q, q_rs, sk, d, dv, rows, kt, ldkt, vc);
        for (int64_t c = 0; c < d; ++c)
          for (int64_t j = sk; j < ldkt; ++j) kt[c * ldkt + j] = 0.f;
      }
      if (i8_direct) {
        // f32 K^T and Q^T (zero-padded to whole vectors) to quads, 16 rows at a time
        float* qt = qt_buf.data();
        transpose_key_lanes(q, 4 * q_rs, rows, d, reinterpret_cast<uint32_t*>(qt), ldq);
        for (int64_t c = 0; c < d; ++c)
          for (int64_t i = rows; i < ldq; ++i) qt[c * ldq + i] = 0.f;
        quantize_columns(kt, ldkt, d, ldkt, false, kt_pairs, ldkt, k_scale_buf.data(), k_off_buf.data());
        quantize_columns(qt, ldq, d, ldq, true, q_quads_buf.data(), ldq, q_scale_buf.data(), nullptr);
      }
      for (int64_t r0 = 0; r0 < rows; r0 += 8) {
        const int64_t nr = std::min<int64_t>(8, rows - r0);
        if (i8_direct)
          qk_block(nr, I8Queries{q_quads_buf.data(), ldq, q_scale_buf.data()} + r0, 1,
                   I8Keys{kt_pairs, k_off_buf.data(), k_scale_buf.data()}, ldkt, d / 4, a.scale, s);
        else if (bf16_direct)
          qk_block(nr, a.q_bf16 + q_off + r0 * q_row, q_row, static_cast<const uint32_t*>(kt_pairs), ldkt, d / 2, a.scale, s);
        else
          qk_block(nr, q + r0 * q_rs, q_rs, kt, ldkt, d, a.scale, s);
        if (a.softcap > 0)
          for (int64_t i = 0; i < nr; ++i) cap_row(s + i * ldkt, sk);
        if (!shared_mask)
          for (int64_t i = 0; i < nr; ++i) mask_row_scores(s + i * ldkt, r0 + i, 0, sk);
        else if (a.causal)  // the shared row is added by the softmax; causality still per row
          for (int64_t i = 0; i < nr; ++i) causal_row_scores(s + i * ldkt, r0 + i, 0, sk);
        softmax_exp_rows_avx512(s, ldkt, nr, sk, shared_mask ? mask_row.data() : nullptr, inv_sum);
        // (in blocks of 32 value columns: a bf16 head has up to 64). bf16 operands: the
        // unnormalized probabilities rounded to bf16, as pairs on vdpbf16ps, or rounded in
        // place for the widened operands' f32 tile
        if (bf16_direct) {
          probability_pairs(s, ldkt, nr, sk, p_pairs_buf.data(), ldkt / 2);
          for (int64_t c0 = 0; c0 < dv; c0 += kDirectMaxHeadDim)
            pv_block(nr, static_cast<const uint32_t*>(p_pairs_buf.data()), ldkt / 2, inv_sum,
                     static_cast<const uint32_t*>(v_pairs_buf.data()) + c0, dv, (sk + 1) / 2,
                     std::min(kDirectMaxHeadDim, dv - c0), o + r0 * o_row + c0, o_row);
          continue;
        }
        if (bf16)
          for (int64_t i = 0; i < nr; ++i) round_to_bf16(s + i * ldkt, sk);
        for (int64_t c0 = 0; c0 < dv; c0 += kDirectMaxHeadDim)
          pv_block(nr, static_cast<const float*>(s), ldkt, inv_sum, static_cast<const float*>(vc) + c0, dv, sk,
                   std::min(kDirectMaxHeadDim, dv - c0), o + r0 * o_row + c0, o_row);
      }
      return;
    }
    int64_t jlo, jhi;
    seen_keys(a, grouped, b, h0, q0, rows, shared_mask, &jlo, &jhi);
    const int64_t n = jhi - jlo;
    const KeyRows kv = paged ? paged_key_rows(a, b, k, ks[2], v, vs[2], jlo, jhi, d, dv)
                             : KeyRows{k + jlo * k_rs, v + jlo * v_rs, k_rs, v_rs};
    const float *kr = kv.k, *vr = kv.v;
    const int64_t k_ld = kv.k_ld, v_ld = kv.v_ld;
    if (scratch.size() < static_cast<size_t>(rows * n)) scratch.resize(static_cast<size_t>(rows * n));
    float* s = scratch.data();
    // bf16 operands: the value product takes the unnormalized probabilities rounded to bf16,
    // and each output row is divided by its sum after it
    thread_local std::vector<float> row_inv;
    if (bf16) row_inv.resize(static_cast<size_t>(rows));
    auto probabilities = [&](float* row, int64_t i) {
      if (bf16)
        row_inv[static_cast<size_t>(i)] = bf16_probabilities_row(row, n);
      else
        softmax_row(row, n);
    };
    auto normalize_rows = [&] {
      if (bf16)
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t c = 0; c < dv; ++c) o[i * o_row + c] *= row_inv[static_cast<size_t>(i)];
    };
    if (has_avx2 && a.direct_kernel && a.seq_q == 1 && rows <= 8) {
      // decode (one query position, its grouped heads as the rows)
      decode_scores_avx2(q, q_rs, rows, kr, k_ld, n, d, a.scale, s);
      for (int64_t i = 0; i < rows; ++i) {
        if (a.softcap > 0) cap_row(s + i * n, n);
        mask_row_scores(s + i * n, i, jlo, n);
        probabilities(s + i * n, i);
      }
      decode_values_avx2(s, rows, vr, v_ld, n, dv, o, o_row);
      normalize_rows();
      return;
    }
    GemmArgs g;
    g.m = rows;
    g.n = n;
    g.k = d;
    g.a = q;
    g.lda = q_rs;
    g.b = kr;
    g.ldb = k_ld;
    g.trans_b = true;
    g.c = s;
    g.ldc = n;
    g.alpha = a.scale;
    Status st = sgemm(g);
    if (!st.is_ok()) {
      fail(st);
      return;
    }
    for (int64_t i = 0; i < rows; ++i) {
      if (a.softcap > 0) cap_row(s + i * n, n);
      mask_row_scores(s + i * n, i, jlo, n);
      probabilities(s + i * n, i);
    }
    GemmArgs pv;
    pv.m = rows;
    pv.n = dv;
    pv.k = n;
    pv.a = s;
    pv.lda = n;
    pv.b = vr;
    pv.ldb = v_ld;
    pv.c = o;
    pv.ldc = o_row;
    st = sgemm(pv);
    if (!st.is_ok()) fail(st);
    normalize_rows();
  });
  return failure;
}

}  // namespace rlx::cpu
