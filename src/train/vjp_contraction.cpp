// Vector-Jacobian rules of contractions: dot (general), matmul (numpy batching and
// broadcasting, 1-D promotion), gemm (transposes, alpha, beta, C) and qmatmul (gradient of x).
// The gradients are emitted as dots whose contracting dims sit where a GEMM with transposed
// operands can read them in place (dA = g B^T, dB = A^T g), so no transpose is materialized.
#include <algorithm>
#include <numeric>

#include "vjp_internal.h"

namespace rlx::train::vjp {
namespace {

std::vector<int64_t> iota_dims(int64_t from, int64_t to) {
  std::vector<int64_t> v;
  for (int64_t i = from; i < to; ++i) v.push_back(i);
  return v;
}

bool contains(const std::vector<int64_t>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

int64_t position(const std::vector<int64_t>& v, int64_t x) {
  return static_cast<int64_t>(std::find(v.begin(), v.end(), x) - v.begin());
}

// Free dims of an operand: neither batch nor contracting, in dim order.
std::vector<int64_t> free_dims(int rank, const std::vector<int64_t>& batch, const std::vector<int64_t>& contract) {
  std::vector<int64_t> f;
  for (int64_t d = 0; d < rank; ++d)
    if (!contains(batch, d) && !contains(contract, d)) f.push_back(d);
  return f;
}

// Gradient of one operand of out = dot(lhs, rhs): dot(g, other) or dot(other, g), then the
// permutation back to the operand's dim order.
//   `self` dims: batch sb, contracting sc (paired with the other's oc), free sf;
//   g dims: [batch, lhs free, rhs free]; `g_self_free` are g's dims of self's free dims,
//   `g_other_free` those of the other operand's free dims.
ValueId operand_grad(OpBuilder& o, ValueId g, ValueId other, bool self_is_lhs, int self_rank,
                     const std::vector<int64_t>& sb, const std::vector<int64_t>& sc, const std::vector<int64_t>& sf,
                     const std::vector<int64_t>& ob, const std::vector<int64_t>& oc, const std::vector<int64_t>& of,
                     const std::vector<int64_t>& g_self_free, const std::vector<int64_t>& g_other_free) {
  const int64_t nb = static_cast<int64_t>(sb.size());
  std::vector<int64_t> g_batch = iota_dims(0, nb);
  // contract g's dims of the other operand's free dims with those dims of the other operand
  ValueId r;
  // the other operand's dims left over are its contracting dims `oc`, in its dim order
  std::vector<int64_t> oc_sorted = oc;
  std::sort(oc_sorted.begin(), oc_sorted.end());
  std::vector<int64_t> perm(self_rank);
  if (self_is_lhs) {
    // r = dot(g, other): [batch, g free = self free, other's leftover = oc sorted]
    r = o.dot(g, other, g_batch, ob, g_other_free, of);
    for (int64_t i = 0; i < nb; ++i) perm[sb[i]] = i;
    for (size_t k = 0; k < sf.size(); ++k) perm[sf[k]] = nb + static_cast<int64_t>(k);
    for (size_t i = 0; i < sc.size(); ++i)
      perm[sc[i]] = nb + static_cast<int64_t>(sf.size()) + position(oc_sorted, oc[i]);
  } else {
    // r = dot(other, g): [batch, other's leftover = oc sorted, g free = self free]
    r = o.dot(other, g, ob, g_batch, of, g_other_free);
    for (int64_t i = 0; i < nb; ++i) perm[sb[i]] = i;
    for (size_t i = 0; i < sc.size(); ++i) perm[sc[i]] = nb + position(oc_sorted, oc[i]);
    for (size_t k = 0; k < sf.size(); ++k) perm[sf[k]] = nb + static_cast<int64_t>(oc.size()) + static_cast<int64_t>(k);
  }
  (void)g_self_free;
  return transpose_if(o, r, perm);
}

Status dot(Ctx& c, std::vector<ValueId>& out) {
  OpBuilder& o = c.o;
  const auto lb = c.attrs().ints("lhs_batch"), rb = c.attrs().ints("rhs_batch");
  const auto lc = c.attrs().ints("lhs_contract"), rc = c.attrs().ints("rhs_contract");
  const int rl = c.rank(0), rr = c.rank(1);
  const auto lf = free_dims(rl, lb, lc), rf = free_dims(rr, rb, rc);
  const int64_t nb = static_cast<int64_t>(lb.size());
  const auto g_lf = iota_dims(nb, nb + static_cast<int64_t>(lf.size()));
  const auto g_rf = iota_dims(nb + static_cast<int64_t>(lf.size()), nb + static_cast<int64_t>(lf.size() + rf.size()));
  // out_type (a result wider than the operands): the gradient is rounded to the operands' type
  // and the gradient products are dots of that type, each operand's gradient in its own type
  // (as torch autocast's backward of a bf16 product)
  ValueId g = c.g();
  if (c.out_types[0].dtype != c.dtype(0)) g = o.cast(g, c.dtype(0));
  if (c.need(0)) out[0] = operand_grad(o, g, c.in(1), true, rl, lb, lc, lf, rb, rc, rf, g_lf, g_rf);
  if (c.need(1)) out[1] = operand_grad(o, g, c.in(0), false, rr, rb, rc, rf, lb, lc, lf, g_rf, g_lf);
  return o.status();
}

Status matmul(Ctx& c, std::vector<ValueId>& out) {
  OpBuilder& o = c.o;
  const Sizes sa0 = sizes_of(c.in_types[0]), sb0 = sizes_of(c.in_types[1]);
  Sizes sa = sa0, sb = sb0;
  if (sa.size() == 1) sa.insert(sa.begin(), 1);
  if (sb.size() == 1) sb.push_back(1);
  ValueId a = reshape_if(o, c.in(0), sa);
  ValueId b = reshape_if(o, c.in(1), sb);
  // out_type: the gradient in the operands' type, as dot's
  const ValueId g0 = c.out_types[0].dtype != c.dtype(0) ? o.cast(c.g(), c.dtype(0)) : c.g();
  const int64_t ra = static_cast<int64_t>(sa.size()), rbk = static_cast<int64_t>(sb.size());
  const int64_t m = sa[ra - 2], k = sa[ra - 1], n = sb[rbk - 1];
  if (rbk == 2) {
    // [batch..., M, K] x [K, N]: batch rows are more GEMM rows
    Sizes gs(sa.begin(), sa.end() - 1);
    gs.push_back(n);
    ValueId g = reshape_if(o, g0, gs);
    if (c.need(0)) out[0] = reshape_if(o, o.dot(g, b, {}, {}, {ra - 1}, {1}), sa0);  // g B^T
    if (c.need(1)) {
      const int64_t rows = numel(sa) / k;
      ValueId a2 = reshape_if(o, a, {rows, k});
      ValueId g2 = reshape_if(o, g, {rows, n});
      out[1] = reshape_if(o, o.dot(a2, g2, {}, {}, {0}, {0}), sb0);  // A^T g
    }
    return o.status();
  }
  // batched: gradients summed back over the batch dims an operand was broadcast along
  Sizes ba(sa.begin(), sa.end() - 2), bbt(sb.begin(), sb.end() - 2);
  auto bs = broadcast_shapes(to_shape(ba), to_shape(bbt));
  if (!bs) return bs.status();
  Sizes batch = *static_sizes(*bs);
  const int64_t r = static_cast<int64_t>(batch.size()) + 2;
  Sizes ta = batch, tb = batch, tg = batch;
  ta.insert(ta.end(), {m, k});
  tb.insert(tb.end(), {k, n});
  tg.insert(tg.end(), {m, n});
  ValueId g = reshape_if(o, g0, tg);
  const auto bd = iota_dims(0, static_cast<int64_t>(batch.size()));
  if (c.need(0)) {
    ValueId da;
    if (numel(bbt) == 1) {
      // B shared by the whole batch: one GEMM over all rows, B read transposed in place
      da = o.dot(g, reshape_if(o, b, {k, n}), {}, {}, {r - 1}, {1});  // [batch, M, K]
    } else {
      da = o.dot(g, o.broadcast_to(b, tb), bd, bd, {r - 1}, {r - 1});  // [batch, M, K]
    }
    out[0] = reshape_if(o, sum_to(o, da, sa), sa0);
  }
  if (c.need(1)) {
    ValueId db;
    if (numel(ba) == 1) {
      // A shared by the whole batch (a weight, as in conv2d's im2col product): a broadcast
      // matmul with A^T, which the native GEMM runs with a zero batch stride for A
      db = o.matmul(o.transpose(reshape_if(o, a, {m, k}), {1, 0}), g);  // [batch, K, N]
    } else {
      db = o.dot(o.broadcast_to(a, ta), g, bd, bd, {r - 2}, {r - 2});  // [batch, K, N]
    }
    out[1] = reshape_if(o, sum_to(o, db, sb), sb0);
  }
  return o.status();
}

Status gemm(Ctx& c, std::vector<ValueId>& out) {
  OpBuilder& o = c.o;
  const bool ta = c.attrs().i("trans_a", 0) != 0, tb = c.attrs().i("trans_b", 0) != 0;
  const double alpha = c.attrs().f("alpha", 1.0), beta = c.attrs().f("beta", 1.0);
  const ValueId A = c.in(0), B = c.in(1);
  ValueId g = alpha == 1.0 ? c.g() : o.mul(c.g(), c.c(alpha));
  if (c.need(0)) {
    // op(A) = A: dA = g op(B)^T; op(A) = A^T: dA = op(B) g^T
    out[0] = ta ? o.dot(B, g, {}, {}, {tb ? 0 : 1}, {1}) : o.dot(g, B, {}, {}, {1}, {tb ? 0 : 1});
  }
  if (c.need(1)) {
    // op(B) = B: dB = op(A)^T g; op(B) = B^T: dB = g^T op(A)
    out[1] = tb ? o.dot(g, A, {}, {}, {0}, {ta ? 1 : 0}) : o.dot(A, g, {}, {}, {ta ? 1 : 0}, {0});
  }
  if (c.node.inputs.size() == 3 && c.need(2)) {
    ValueId gc = beta == 1.0 ? c.g() : o.mul(c.g(), c.c(beta));
    out[2] = sum_to(o, gc, sizes_of(c.in_types[2]));
  }
  return o.status();
}

Status qmatmul(Ctx& c, std::vector<ValueId>& out) {
  OpBuilder& o = c.o;
  const Sizes xs = sizes_of(c.in_types[0]);
  const int64_t k = xs.back();
  ValueId w = o.op(Op::Dequantize, {c.in(1)}, Attrs{{"format", c.attrs().s("format")}, {"cols", k}});  // [N, K]
  if (c.dtype(0) != DType::f32) w = o.cast(w, c.dtype(0));
  const int64_t r = static_cast<int64_t>(xs.size());
  out[0] = o.dot(c.g(), w, {}, {}, {r - 1}, {0});
  return o.status();
}

}  // namespace

void register_contraction_vjps(std::vector<Rule>& t) {
  t[static_cast<size_t>(Op::Dot)] = dot;
  t[static_cast<size_t>(Op::MatMul)] = matmul;
  t[static_cast<size_t>(Op::Gemm)] = gemm;
  t[static_cast<size_t>(Op::QMatMul)] = qmatmul;
}

}  // namespace rlx::train::vjp
