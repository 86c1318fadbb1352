// Attention family: scaled dot-product attention (GQA without copying key/value heads,
// causal and padding masks) and rotary position embedding, as primitives.
#include <cmath>
#include <limits>

#include "rules.h"

namespace rlx::dispatch {
namespace {

bool narrow(DType t) { return t == DType::f16 || t == DType::bf16; }

// The bshd layout is the bhsd computation between transposes (which fuse into neighbours).
Status attention_bshd(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  Attrs a = n.attrs;
  a.erase("layout");
  std::vector<ValueId> ins;
  for (size_t i = 0; i < 3; ++i) ins.push_back(o.transpose(n.inputs[i], {0, 2, 1, 3}));
  if (n.inputs.size() == 4) ins.push_back(n.inputs[3]);
  ValueId y = o.op(n.op, ins, a);
  return single(o, o.transpose(y, {0, 2, 1, 3}), outputs);
}

Status attention(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  if (n.attrs.s("layout", "bhsd") == "bshd") return attention_bshd(o, n, outputs);
  const Shape& qs = n.input_types[0].shape;
  const Shape& ks = n.input_types[1].shape;
  const Shape& vs = n.input_types[2].shape;
  const int64_t b = qs[0].size(), hq = qs[1].size(), sq = qs[2].size(), d = qs[3].size();
  const int64_t hkv = ks[1].size(), sk = ks[2].size(), dv = vs[3].size();
  const int64_t rep = hq / hkv;
  const DType dt = n.input_types[0].dtype;
  auto wide = [&](ValueId v) { return narrow(dt) ? o.cast(v, DType::f32) : v; };
  ValueId q = wide(n.inputs[0]), k = wide(n.inputs[1]), v = wide(n.inputs[2]);
  if (n.attrs.i("int8_scores", 0)) {
    // each row of q and of k through its int8 quants (in f32) and back: the scores are then the
    // quants' integer dot products times both rows' scales, up to rounding
    for (ValueId* x : {&q, &k}) {
      const Int8Rows r = int8_rows(o, dt == DType::f64 ? o.cast(*x, DType::f32) : *x, 4);
      *x = o.mul(r.quants, r.scale);
      if (dt == DType::f64) *x = o.cast(*x, DType::f64);
    }
  }
  // Query heads that share a key/value head become extra rows: [B, Hkv, rep*Sq, D].
  ValueId qg = o.reshape(q, {b, hkv, rep * sq, d});
  ValueId s = o.dot(qg, k, {0, 1}, {0, 1}, {3}, {3});  // [B, Hkv, rep*Sq, Sk]
  s = o.reshape(s, {b, hq, sq, sk});
  double scale = n.attrs.f("scale", 0.0);
  if (scale == 0.0) scale = 1.0 / std::sqrt(static_cast<double>(d));
  s = o.mul(s, o.scalar_like(scale, s));
  if (const double cap = n.attrs.f("softcap", 0.0); cap > 0)
    s = o.mul(o.tanh(o.mul(s, o.scalar_like(1.0 / cap, s))), o.scalar_like(cap, s));
  const double neg_inf = -std::numeric_limits<double>::infinity();
  if (n.inputs.size() == 4) {
    ValueId m = n.inputs[3];
    if (n.input_types[3].dtype == DType::boolean) {
      s = o.where(m, s, o.scalar_like(neg_inf, s));
    } else {
      s = o.add(s, wide(m));
    }
  }
  if (n.attrs.i("causal", 0)) {
    // key j is visible to query i when j <= i + (Sk - Sq): the last query sees every key
    ValueId qi = o.iota(DType::i64, {sq, sk}, 0);
    ValueId kj = o.iota(DType::i64, {sq, sk}, 1);
    ValueId visible = o.op(Op::LessEqual, {kj, o.add(qi, o.scalar(static_cast<double>(sk - sq), DType::i64))});
    s = o.where(visible, s, o.scalar_like(neg_inf, s));
  }
  ValueId out;
  if (narrow(dt)) {
    // 16-bit operands: the value product takes the unnormalized probabilities exp(s - max)
    // rounded to the operands' type, and the f32 sum of the unrounded ones divides the result
    // (as FlashAttention and PyTorch's CPU flash attention round P before P V)
    ValueId e = o.exp(o.sub(s, o.reduce_max(s, {3}, true)));
    ValueId l = o.reduce_sum(e, {3}, true);  // [B, Hq, Sq, 1]
    ValueId eg = o.reshape(o.cast(o.cast(e, dt), DType::f32), {b, hkv, rep * sq, sk});
    out = o.reshape(o.dot(eg, v, {0, 1}, {0, 1}, {3}, {2}), {b, hq, sq, dv});
    out = o.div(out, l);
  } else {
    ValueId pg = o.reshape(o.softmax(s, 3), {b, hkv, rep * sq, sk});
    out = o.dot(pg, v, {0, 1}, {0, 1}, {3}, {2});  // [B, Hkv, rep*Sq, Dv]
    out = o.reshape(out, {b, hq, sq, dv});
  }
  // rounded to the operands' type, or kept in f32 by out_type
  return single(o, o.cast(out, n.attrs.dtype("out_type", dt)), outputs);
}

// Paged attention as attention over gathered keys: each sequence's blocks are gathered from the
// pools ([Hkv, N, bs, D] -> [Hkv, B, T, bs, D]) into [B, Hkv, T*bs, D] (bshd: [B, T*bs, Hkv, D]).
// Gather clamps an index outside [0, N), where the CPU's kernel refuses it; the session never
// writes one.
Status paged_attention(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  const int64_t bs = n.attrs.i("block_size", 0);
  const Shape& ps = n.input_types[1].shape;
  const Shape& ts = n.input_types[3].shape;
  const int64_t hkv = ps[0].size(), blocks = ps[1].size() / bs, b = ts[0].size(), t = ts[1].size();
  const bool bshd = n.attrs.s("layout", "bhsd") == "bshd";
  auto gathered = [&](ValueId pool, int64_t d) {
    ValueId g = o.gather(o.reshape(pool, {hkv, blocks, bs, d}), n.inputs[3], 1);  // [Hkv, B, T, bs, D]
    g = o.reshape(g, {hkv, b, t * bs, d});
    return o.transpose(g, bshd ? std::vector<int64_t>{1, 2, 0, 3} : std::vector<int64_t>{1, 0, 2, 3});
  };
  Attrs a = n.attrs;
  a.erase("block_size");
  ValueId k = gathered(n.inputs[1], ps[2].size());
  ValueId v = gathered(n.inputs[2], n.input_types[2].shape[2].size());
  return single(o, o.op(Op::Attention, {n.inputs[0], k, v, n.inputs[4]}, a), outputs);
}

Status rope(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  if (n.attrs.s("layout", "bhsd") == "bshd") {
    Attrs a = n.attrs;
    a.erase("layout");
    ValueId y = o.op(n.op, {o.transpose(n.inputs[0], {0, 2, 1, 3}), n.inputs[1]}, a);
    return single(o, o.transpose(y, {0, 2, 1, 3}), outputs);
  }
  const Shape& xs = n.input_types[0].shape;
  const int64_t b = xs[0].size(), h = xs[1].size(), s = xs[2].size(), d = xs[3].size(), half = d / 2;
  const DType dt = n.input_types[0].dtype;
  const double theta = n.attrs.f("theta", 10000.0);
  ValueId x = narrow(dt) ? o.cast(n.inputs[0], DType::f32) : n.inputs[0];
  const DType ct = dt == DType::f64 ? DType::f64 : DType::f32;
  std::vector<double> inv = n.attrs.floats("inv_freq");
  if (inv.empty()) {
    inv.resize(static_cast<size_t>(half));
    for (int64_t i = 0; i < half; ++i) inv[i] = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(d));
  } else if (static_cast<int64_t>(inv.size()) != half) {
    return error(ErrorCode::shape_error, "rope: inv_freq has ", inv.size(), " frequencies for head dimension ", d);
  }
  ValueId inv_freq = o.constant(Tensor::from_f64(ct, {half}, inv));
  ValueId pos = o.cast(n.inputs[1], ct);
  const bool batched = n.input_types[1].rank() == 2;
  Sizes pos_shape = batched ? Sizes{b, s, 1} : Sizes{s, 1};
  ValueId ang = o.mul(o.reshape(pos, std::vector<int64_t>(pos_shape)), inv_freq);  // [.., S, half]
  std::vector<int64_t> bshape = batched ? std::vector<int64_t>{b, 1, s, half} : std::vector<int64_t>{1, 1, s, half};
  ValueId cs = o.reshape(o.op(Op::Cos, {ang}), bshape);
  ValueId sn = o.reshape(o.op(Op::Sin, {ang}), bshape);
  ValueId y;
  if (n.attrs.i("interleaved", 0)) {
    ValueId xp = o.reshape(x, {b, h, s, half, 2});
    ValueId x1 = o.reshape(o.strided_slice(xp, {0, 0, 0, 0, 0}, {1, 1, 1, 1, 1}, {b, h, s, half, 1}), {b, h, s, half});
    ValueId x2 = o.reshape(o.strided_slice(xp, {0, 0, 0, 0, 1}, {1, 1, 1, 1, 1}, {b, h, s, half, 1}), {b, h, s, half});
    ValueId r1 = o.sub(o.mul(x1, cs), o.mul(x2, sn));
    ValueId r2 = o.add(o.mul(x2, cs), o.mul(x1, sn));
    y = o.reshape(o.concat({o.reshape(r1, {b, h, s, half, 1}), o.reshape(r2, {b, h, s, half, 1})}, 4), {b, h, s, d});
  } else {
    ValueId x1 = o.strided_slice(x, {0, 0, 0, 0}, {1, 1, 1, 1}, {b, h, s, half});
    ValueId x2 = o.strided_slice(x, {0, 0, 0, half}, {1, 1, 1, 1}, {b, h, s, half});
    ValueId r1 = o.sub(o.mul(x1, cs), o.mul(x2, sn));
    ValueId r2 = o.add(o.mul(x2, cs), o.mul(x1, sn));
    y = o.concat({r1, r2}, 3);
  }
  return single(o, o.cast(y, dt), outputs);
}

}  // namespace

void register_attention_rules(std::vector<OpRules>& t) {
  t[static_cast<size_t>(Op::Attention)].decompose = attention;
  t[static_cast<size_t>(Op::Rope)].decompose = rope;
  t[static_cast<size_t>(Op::PagedAttention)].decompose = paged_attention;
}

}  // namespace rlx::dispatch
