// Vector-Jacobian rules of attention and rotary embedding.
//
// attention: a direct rule. The probabilities are recomputed from q and k as the forward's
// decomposition computes them (grouped-query heads as extra rows of their key/value head),
// then dv = P^T dO, dP = dO V^T, dS = P (dP - rowsum(dP P)), dq = scale dS K,
// dk = scale dS^T Q (both summed over the query heads sharing a key/value head by the same
// row grouping), and an additive float mask gets dS summed to its shape.
// rope: a rotation by angle pos * freq; its adjoint is the rotation by -pos * freq.
#include <cmath>
#include <limits>

#include "vjp_internal.h"

namespace rlx::train::vjp {
namespace {

Status attention(Ctx& c, std::vector<ValueId>& out) {
  OpBuilder& o = c.o;
  const Sizes qs = sizes_of(c.in_types[0]), ks = sizes_of(c.in_types[1]), vs = sizes_of(c.in_types[2]);
  const int64_t b = qs[0], hq = qs[1], sq = qs[2], d = qs[3];
  const int64_t hkv = ks[1], sk = ks[2], dv = vs[3];
  const int64_t rep = hq / hkv;
  // out_type (an f32 result of 16-bit operands): the gradients are computed in f32 from the
  // widened operands, as the forward sums, and rounded to the operands' type at the end. The
  // forward rounds the probabilities of 16-bit operands for the value product; the gradient
  // goes straight through that rounding (it is the f32 attention's)
  const DType dt = c.in_types[0].dtype;
  const bool widen = c.out_types[0].dtype != dt;
  auto wide = [&](ValueId x) { return widen ? o.cast(x, c.out_types[0].dtype) : x; };
  const ValueId q = wide(c.in(0)), k = wide(c.in(1)), v = wide(c.in(2));
  auto cst = [&](double x) { return o.scalar(x, c.out_types[0].dtype); };
  if (c.attrs().f("softcap", 0.0) != 0.0)
    return error(ErrorCode::unsupported, "the gradient of attention with softcap is not implemented");
  // rounding to quants has no useful derivative (a straight-through estimate would be a choice)
  if (c.attrs().i("int8_scores", 0) != 0)
    return error(ErrorCode::unsupported, "the gradient of attention with int8_scores is not implemented");
  double scale = c.attrs().f("scale", 0.0);
  if (scale == 0.0) scale = 1.0 / std::sqrt(static_cast<double>(d));
  const double neg_inf = -std::numeric_limits<double>::infinity();
  // forward probabilities
  ValueId qg = o.reshape(q, {b, hkv, rep * sq, d});
  ValueId s = o.reshape(o.dot(qg, k, {0, 1}, {0, 1}, {3}, {3}), {b, hq, sq, sk});
  s = o.mul(s, cst(scale));
  if (c.node.inputs.size() == 4) {
    ValueId m = c.in(3);
    s = c.in_types[3].dtype == DType::boolean ? o.where(m, s, cst(neg_inf)) : o.add(s, wide(m));
  }
  if (c.attrs().i("causal", 0)) {
    ValueId qi = o.iota(DType::i64, {sq, sk}, 0);
    ValueId kj = o.iota(DType::i64, {sq, sk}, 1);
    ValueId visible = o.op(Op::LessEqual, {kj, o.add(qi, o.scalar(static_cast<double>(sk - sq), DType::i64))});
    s = o.where(visible, s, cst(neg_inf));
  }
  ValueId p = o.reshape(o.softmax(s, 3), {b, hkv, rep * sq, sk});
  ValueId gg = o.reshape(c.g(), {b, hkv, rep * sq, dv});
  if (c.need(2)) out[2] = o.dot(p, gg, {0, 1}, {0, 1}, {2}, {2});  // [B, Hkv, Sk, Dv]
  if (c.need(0) || c.need(1) || c.need(3)) {
    ValueId dp = o.dot(gg, v, {0, 1}, {0, 1}, {3}, {3});  // [B, Hkv, rep*Sq, Sk]
    ValueId ds = o.mul(p, o.sub(dp, o.reduce_sum(o.mul(dp, p), {3}, true)));
    if (c.need(3)) out[3] = sum_to(o, o.reshape(ds, {b, hq, sq, sk}), sizes_of(c.in_types[3]));
    if (c.need(3) && widen) out[3] = o.cast(out[3], dt);
    ValueId dss = o.mul(ds, cst(scale));
    if (c.need(0)) out[0] = o.reshape(o.dot(dss, k, {0, 1}, {0, 1}, {3}, {2}), {b, hq, sq, d});
    if (c.need(1)) out[1] = o.dot(dss, qg, {0, 1}, {0, 1}, {2}, {2});  // [B, Hkv, Sk, D]
  }
  if (widen)
    for (int i = 0; i < 3; ++i)
      if (c.need(i)) out[i] = o.cast(out[i], dt);
  return o.status();
}

Status rope(Ctx& c, std::vector<ValueId>& out) {
  OpBuilder& o = c.o;
  out[0] = o.op(Op::Rope, {c.g(), o.neg(c.in(1))}, c.attrs());
  return o.status();
}

}  // namespace

void register_attention_vjps(std::vector<Rule>& t) {
  t[static_cast<size_t>(Op::Attention)] = attention;
  t[static_cast<size_t>(Op::Rope)] = rope;
}

}  // namespace rlx::train::vjp
