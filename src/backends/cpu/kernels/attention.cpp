#include "attention.h"

#include <immintrin.h>

#include <cmath>
#include <limits>
#include <mutex>
#include <vector>

#include "gemm.h"
#include "rlx/thread_pool.h"

namespace rlx::cpu {
namespace {

// exp for the softmax: Cody-Waite reduction to [-ln2/2, ln2/2] and a degree-6 polynomial,
// about 1 ulp; inputs are <= 0 here (scores minus the row max), so only underflow matters.
__attribute__((target("avx512f"))) __m512 exp512(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.3f);
  __m512 xc = _mm512_max_ps(x, lo);
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), xc);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  __m512 y = _mm512_scalef_ps(p, n);
  // below the range exp is 0 (and -inf -> 0)
  __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
  return _mm512_mask_blend_ps(under, y, _mm512_setzero_ps());
}

// Softmax of one row in place (scores already scaled and masked; -inf = masked).
__attribute__((target("avx512f"))) void softmax_row_avx512(float* s, int64_t n) {
  __m512 vmax = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(s + j));
  float m = _mm512_reduce_max_ps(vmax);
  for (; j < n; ++j) m = std::max(m, s[j]);
  if (m == -std::numeric_limits<float>::infinity()) {
    for (j = 0; j < n; ++j) s[j] = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  const __m512 vm = _mm512_set1_ps(m);
  __m512 vsum = _mm512_setzero_ps();
  for (j = 0; j + 16 <= n; j += 16) {
    __m512 e = exp512(_mm512_sub_ps(_mm512_loadu_ps(s + j), vm));
    _mm512_storeu_ps(s + j, e);
    vsum = _mm512_add_ps(vsum, e);
  }
  if (j < n) {
    __mmask16 mk = static_cast<__mmask16>((1u << (n - j)) - 1);
    __m512 x = _mm512_mask_loadu_ps(vm, mk, s + j);
    __m512 e = exp512(_mm512_sub_ps(x, vm));
    e = _mm512_maskz_mov_ps(mk, e);
    _mm512_mask_storeu_ps(s + j, mk, e);
    vsum = _mm512_add_ps(vsum, e);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(vsum));
  for (j = 0; j + 16 <= n; j += 16) _mm512_storeu_ps(s + j, _mm512_mul_ps(_mm512_loadu_ps(s + j), inv));
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

using SoftmaxRow = void (*)(float*, int64_t);
SoftmaxRow pick_softmax() {
  return __builtin_cpu_supports("avx512f") ? softmax_row_avx512 : softmax_row_portable;
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

}  // namespace

Status attention_f32(const AttentionArgs& a) {
  if (a.batch < 0 || a.heads_q <= 0 || a.heads_kv <= 0 || a.heads_q % a.heads_kv != 0 || a.seq_q < 0 || a.seq_k < 0 ||
      a.head_dim <= 0 || a.head_dim_v <= 0)
    return error(ErrorCode::invalid_argument, "attention: inconsistent sizes");
  if (a.batch == 0 || a.seq_q == 0) return Status::ok();
  if (!a.q || !a.k || !a.v || !a.out) return error(ErrorCode::invalid_argument, "attention: null operand");
  static const SoftmaxRow softmax_row = pick_softmax();
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
  const bool grouped = a.seq_q == 1 && rep > 1;
  const int64_t qb = grouped ? rep : a.seq_q <= 128 ? a.seq_q : 64;
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
    if (scratch.size() < static_cast<size_t>(rows * sk)) scratch.resize(static_cast<size_t>(rows * sk));
    float* s = scratch.data();
    const float* q = a.q + b * qs[0] + h0 * qs[1] + q0 * qs[2];
    const float* k = a.k + b * ks[0] + hk * ks[1];
    const float* v = a.v + b * vs[0] + hk * vs[1];
    GemmArgs g;
    g.m = rows;
    g.n = sk;
    g.k = d;
    g.a = q;
    g.lda = q_row;
    g.b = k;
    g.ldb = ks[2];
    g.trans_b = true;
    g.c = s;
    g.ldc = sk;
    g.alpha = a.scale;
    Status st = sgemm(g);
    if (!st.is_ok()) {
      fail(st);
      return;
    }
    const int64_t shift = sk - a.seq_q;
    // A mask that is the same for every row of the task (a padding mask [B, 1, 1, Sk]) becomes
    // one additive row (0 or -inf for bool), added with a vector loop.
    const bool shared_mask = a.mask && a.mask_strides[2] == 0 && (!grouped || a.mask_strides[1] == 0);
    thread_local std::vector<float> mask_row;
    if (shared_mask) {
      if (mask_row.size() < static_cast<size_t>(sk)) mask_row.resize(static_cast<size_t>(sk));
      const int64_t base = b * a.mask_strides[0] + h0 * a.mask_strides[1], js = a.mask_strides[3];
      if (a.mask_dtype == DType::boolean) {
        const uint8_t* m = static_cast<const uint8_t*>(a.mask) + base;
        for (int64_t j = 0; j < sk; ++j) mask_row[j] = m[j * js] ? 0.f : -std::numeric_limits<float>::infinity();
      } else {
        const float* m = static_cast<const float*>(a.mask) + base;
        for (int64_t j = 0; j < sk; ++j) mask_row[j] = m[j * js];
      }
    }
    for (int64_t i = 0; i < rows; ++i) {
      float* row = s + i * sk;
      const int64_t qi = grouped ? q0 : q0 + i, h = grouped ? h0 + i : h0;
      if (shared_mask) {
        const float* mr = mask_row.data();
        for (int64_t j = 0; j < sk; ++j) row[j] += mr[j];
      } else if (a.mask) {
        const int64_t base = b * a.mask_strides[0] + h * a.mask_strides[1] + qi * a.mask_strides[2];
        const int64_t js = a.mask_strides[3];
        if (a.mask_dtype == DType::boolean) {
          const uint8_t* m = static_cast<const uint8_t*>(a.mask) + base;
          for (int64_t j = 0; j < sk; ++j)
            if (!m[j * js]) row[j] = -std::numeric_limits<float>::infinity();
        } else {
          const float* m = static_cast<const float*>(a.mask) + base;
          for (int64_t j = 0; j < sk; ++j) row[j] += m[j * js];
        }
      }
      if (a.causal)
        for (int64_t j = std::max<int64_t>(0, qi + shift + 1); j < sk; ++j) row[j] = -std::numeric_limits<float>::infinity();
      softmax_row(row, sk);
    }
    GemmArgs pv;
    pv.m = rows;
    pv.n = dv;
    pv.k = sk;
    pv.a = s;
    pv.lda = sk;
    pv.b = v;
    pv.ldb = vs[2];
    pv.c = o;
    pv.ldc = o_row;
    st = sgemm(pv);
    if (!st.is_ok()) fail(st);
  });
  return failure;
}

}  // namespace rlx::cpu
