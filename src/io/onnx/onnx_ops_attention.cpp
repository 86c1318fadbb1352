// ONNX's transformer ops of opset 23: Attention (multi-head, grouped-query, masks, causal,
// softcap, past keys and values) and RotaryEmbedding, with their semantics as ONNX Runtime runs
// them. Attention maps to rlx's attention composite (native kernels) when the node asks for
// nothing it lacks, and to matmul/softmax primitives otherwise.
#include <cmath>

#include "onnx_internal.h"

namespace rlx::onnx_import {
namespace {

// [B, S, H*E] -> [B, H, S, E] (the 3-D form of Attention's inputs) for a static H*E.
Expected<ValueId> heads_first(Importer& m, ValueId x, int64_t heads, const char* what) {
  OpBuilder& o = m.o();
  const Dim& hidden = o.shape(x)[2];
  if (heads <= 0) return m.fail(ErrorCode::invalid_argument, what, " is 3-D, so ", what, "'s num_heads attribute is needed");
  if (!hidden.is_static() || hidden.size() % heads != 0)
    return m.fail(ErrorCode::shape_error, what, " hidden size ", hidden.to_string(), " is not a multiple of ", heads, " heads");
  return o.transpose(o.reshape(x, {0, 0, heads, hidden.size() / heads}), {0, 2, 1, 3});
}

// Repeats each of kv's H heads `group` times: head h of the queries reads kv head h / group.
Expected<ValueId> repeat_heads(Importer& m, ValueId kv, int64_t group) {
  if (group == 1) return kv;
  OpBuilder& o = m.o();
  auto s = static_sizes(o.shape(kv));
  if (!s) return m.fail(ErrorCode::unsupported, "grouped-query attention needs static K and V shapes here");
  const Sizes& d = *s;
  ValueId x = o.expand(o.reshape(kv, {d[0], d[1], 1, d[2], d[3]}), {d[0], d[1], group, d[2], d[3]});
  return o.reshape(x, {d[0], d[1] * group, d[2], d[3]});
}

Status map_attention(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId q, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId k, m.in(1));
  RLX_ASSIGN_OR_RETURN(ValueId v, m.in(2));
  OpBuilder& o = m.o();
  const int qr = o.rank(q);
  if (qr != 3 && qr != 4) return m.fail(ErrorCode::shape_error, "Q must be 3-D or 4-D, got rank ", qr);
  if (o.rank(k) != qr || o.rank(v) != qr) return m.fail(ErrorCode::shape_error, "Q, K and V must have the same rank");
  if (qr == 3) {
    RLX_ASSIGN_OR_RETURN(q, heads_first(m, q, m.ai("q_num_heads", 0), "Q"));
    RLX_ASSIGN_OR_RETURN(k, heads_first(m, k, m.ai("kv_num_heads", 0), "K"));
    RLX_ASSIGN_OR_RETURN(v, heads_first(m, v, m.ai("kv_num_heads", 0), "V"));
  } else {
    (void)m.ai("q_num_heads", 0);  // the 4-D form carries its heads in its shape
    (void)m.ai("kv_num_heads", 0);
  }
  // past keys and values come first along the sequence; the outputs 1 and 2 are the totals
  if (m.has(4) != m.has(5)) return m.fail(ErrorCode::invalid_argument, "past_key and past_value come together");
  if (m.has(6)) return m.fail(ErrorCode::unsupported, "nonpad_kv_seqlen (opset 24) is not supported");
  if (m.has(4)) {
    RLX_ASSIGN_OR_RETURN(ValueId pk, m.in(4));
    RLX_ASSIGN_OR_RETURN(ValueId pv, m.in(5));
    k = o.concat({pk, k}, 2);
    v = o.concat({pv, v}, 2);
  }
  RLX_TRY(m.ok().with_context(m.where()));
  const Shape& qs = o.shape(q);
  const Shape& ks = o.shape(k);
  const Shape& vs = o.shape(v);
  if (!qs[1].is_static() || !ks[1].is_static() || !qs[3].is_static())
    return m.fail(ErrorCode::unsupported, "needs static head counts and head size");
  const int64_t hq = qs[1].size(), hkv = ks[1].size(), e = qs[3].size();
  if (hkv <= 0 || hq % hkv != 0)
    return m.fail(ErrorCode::shape_error, hq, " query heads are not a multiple of ", hkv, " key/value heads");
  if (vs[1] != ks[1] || vs[2] != ks[2]) return m.fail(ErrorCode::shape_error, "K and V differ in heads or length");
  const double scale = m.has_attr("scale") ? m.af("scale", 0) : 1.0 / std::sqrt(static_cast<double>(e));
  const double softcap = m.af("softcap", 0.0);
  const bool causal = m.ai("is_causal", 0) != 0;
  (void)m.ai("softmax_precision", 0);  // rlx's softmax accumulates in f32 for every float type
  ValueId mask = kNoValue;
  if (m.has(3)) { RLX_ASSIGN_OR_RETURN(mask, m.in(3)); }
  if (m.wants(1)) RLX_TRY(m.out(1, k));
  if (m.wants(2)) RLX_TRY(m.out(2, v));

  const Dim sq = qs[2], skv = ks[2];
  if (mask != kNoValue && o.rank(mask) > 0) {
    // a mask shorter than the keys (past included) leaves the rest out
    const Dim& ml = o.shape(mask).back();
    if (ml.is_static() && skv.is_static() && ml.size() < skv.size()) {
      std::vector<int64_t> pads(2 * static_cast<size_t>(o.rank(mask)), 0);
      pads.back() = skv.size() - ml.size();
      const bool b = o.dtype(mask) == DType::boolean;
      mask = o.op(Op::Pad, {mask}, Attrs{{"pads", pads}, {"value", b ? 0.0 : -INFINITY}, {"mode", std::string("constant")}});
    }
  }
  // Causal: query i attends keys j <= i + the past length (bottom-right aligned once a past is
  // given, upper-left without one), as ONNX Runtime and ONNX's reference compute it.
  int64_t offset = 0;
  if (m.has(4)) {
    if (!skv.is_static() || !sq.is_static()) return m.fail(ErrorCode::unsupported, "a causal mask with a past needs static lengths");
    offset = skv.size() - sq.size();
  }
  const bool lower_right = sq.is_static() && skv.is_static() && offset == skv.size() - sq.size();
  const int64_t qk_mode = m.ai("qk_matmul_output_mode", 0);
  if (m.wants(3) && qk_mode != 0 && qk_mode != 3)
    return m.fail(ErrorCode::unsupported, "qk_matmul_output_mode ", qk_mode,
                  " (its meaning changed between revisions of the spec; rlx gives modes 0 and 3)");
  ValueId y;
  const bool composite = softcap == 0 && !m.wants(3) && vs[3] == qs[3] && (!causal || lower_right || sq == skv);
  if (composite) {
    y = o.attention(q, k, v, mask, causal, scale);
  } else {
    const int64_t group = hq / hkv;
    RLX_ASSIGN_OR_RETURN(ValueId kk, repeat_heads(m, k, group));
    RLX_ASSIGN_OR_RETURN(ValueId vv, repeat_heads(m, v, group));
    ValueId s = o.mul(o.matmul(q, o.transpose(kk, {0, 1, 3, 2})), o.scalar_like(scale, q));
    ValueId qk_out = s;
    // softcap comes before the mask, so that masked scores stay -inf
    if (softcap > 0) s = o.mul(o.tanh(o.div(s, o.scalar_like(softcap, s))), o.scalar_like(softcap, s));
    if (causal) {
      if (!sq.is_static() || !skv.is_static()) return m.fail(ErrorCode::unsupported, "a causal mask needs static lengths");
      ValueId qi = o.iota(DType::i64, {sq.size(), skv.size()}, 0), kj = o.iota(DType::i64, {sq.size(), skv.size()}, 1);
      ValueId allowed = o.binary(Op::LessEqual, kj, o.add(qi, o.scalar(static_cast<double>(offset), DType::i64)));
      s = o.where(allowed, s, o.scalar_like(-INFINITY, s));
    }
    if (mask != kNoValue)
      s = o.dtype(mask) == DType::boolean ? o.where(mask, s, o.scalar_like(-INFINITY, s)) : o.add(s, mask);
    ValueId p = o.softmax(s, -1);
    if (qk_mode == 3) qk_out = p;
    if (m.wants(3)) RLX_TRY(m.out(3, qk_out));
    y = o.matmul(p, vv);
  }
  if (qr == 3) y = o.reshape(o.transpose(y, {0, 2, 1, 3}), {0, 0, -1});
  return m.out(0, y);
}

// RotaryEmbedding (opset 23): x [B, H, S, D] or [B, S, H*D] (num_heads given) rotated over its
// first rotary_embedding_dim (default D) channels of each head, by cos/sin caches indexed by
// position_ids [B, S] ([max_position, rd/2] caches), or given per token ([B, S, rd/2]) without
// them. Halves rotate as (x1, x2) -> (x1 cos - x2 sin, x1 sin + x2 cos); interleaved takes the
// pairs (x[2i], x[2i+1]) instead.
Status map_rotary_embedding(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId cos, m.in(1));
  RLX_ASSIGN_OR_RETURN(ValueId sin, m.in(2));
  OpBuilder& o = m.o();
  const int r = o.rank(x);
  const bool interleaved = m.ai("interleaved", 0) != 0;
  const int64_t heads = m.ai("num_heads", 0);
  if (r != 3 && r != 4) return m.fail(ErrorCode::shape_error, "input must be 3-D or 4-D, got rank ", r);
  ValueId xb;  // [B, S, H, D]
  if (r == 4) {
    xb = o.transpose(x, {0, 2, 1, 3});
  } else {
    const Dim& hidden = o.shape(x)[2];
    if (heads <= 0) return m.fail(ErrorCode::invalid_argument, "a 3-D input needs num_heads");
    if (!hidden.is_static() || hidden.size() % heads != 0)
      return m.fail(ErrorCode::shape_error, "hidden size ", hidden.to_string(), " is not a multiple of ", heads, " heads");
    xb = o.reshape(x, {0, 0, heads, hidden.size() / heads});
  }
  RLX_TRY(m.ok().with_context(m.where()));
  const Dim& dd = o.shape(xb)[3];
  if (!dd.is_static()) return m.fail(ErrorCode::unsupported, "needs a static head size");
  const int64_t d = dd.size();
  const int64_t rd = m.ai("rotary_embedding_dim", 0) > 0 ? m.ai("rotary_embedding_dim", 0) : d;
  if (rd > d || rd % 2 != 0) return m.fail(ErrorCode::invalid_argument, "rotary_embedding_dim ", rd, " for head size ", d);
  if (m.has(3)) {
    RLX_ASSIGN_OR_RETURN(ValueId pos, m.in(3));
    cos = o.gather(cos, pos, 0);
    sin = o.gather(sin, pos, 0);
  }
  RLX_TRY(m.ok().with_context(m.where()));
  if (o.rank(cos) != 3 || o.shape(cos)[2] != Dim(rd / 2))
    return m.fail(ErrorCode::shape_error, "cos/sin per token must be [B, S, ", rd / 2, "], got ", shape_to_string(o.shape(cos)));
  cos = o.reshape(cos, {0, 0, 1, rd / 2});  // over the heads
  sin = o.reshape(sin, {0, 0, 1, rd / 2});
  ValueId rot = rd == d ? xb : o.slice(xb, {0}, {rd}, {3});
  ValueId x1, x2;
  if (interleaved) {
    x1 = o.slice(rot, {0}, {rd}, {3}, {2});
    x2 = o.slice(rot, {1}, {rd}, {3}, {2});
  } else {
    x1 = o.slice(rot, {0}, {rd / 2}, {3});
    x2 = o.slice(rot, {rd / 2}, {rd}, {3});
  }
  ValueId re = o.sub(o.mul(x1, cos), o.mul(x2, sin));
  ValueId im = o.add(o.mul(x1, sin), o.mul(x2, cos));
  ValueId y;
  if (interleaved) {
    y = o.reshape(o.concat({o.reshape(re, {0, 0, 0, rd / 2, 1}), o.reshape(im, {0, 0, 0, rd / 2, 1})}, 4), {0, 0, 0, rd});
  } else {
    y = o.concat({re, im}, 3);
  }
  if (rd < d) y = o.concat({y, o.slice(xb, {rd}, {d}, {3})}, 3);
  y = r == 4 ? o.transpose(y, {0, 2, 1, 3}) : o.reshape(y, {0, 0, -1});
  return m.out(0, y);
}

}  // namespace

void register_attention_ops(OpTable& t) {
  t["Attention"] = {map_attention};
  t["RotaryEmbedding"] = {map_rotary_embedding};
}

}  // namespace rlx::onnx_import
