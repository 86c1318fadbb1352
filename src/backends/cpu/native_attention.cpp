#include "native_attention.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string_view>

namespace rlx::cpu {

namespace {

// The mask's dtype and its strides in the [B, Hq, Sq, Sk] view (a.batch .. a.seq_k set).
Status plan_mask(const TensorType& m, AttentionArgs& a) {
  if (m.dtype != DType::boolean && m.dtype != DType::f32)
    return error(ErrorCode::unsupported, "the mask must be bool or f32, got ", dtype_name(m.dtype));
  const Sizes ms = *static_sizes(m.shape);
  if (ms.size() > 4) return error(ErrorCode::unsupported, "the mask has rank ", ms.size(), " (at most 4)");
  // right-aligned broadcast to [B, Hq, Sq, Sk]; a dim of 1 broadcasts (stride 0)
  const int64_t full[4] = {a.batch, a.heads_q, a.seq_q, a.seq_k};
  int64_t stride = 1;
  const int64_t off = 4 - static_cast<int64_t>(ms.size());
  for (int64_t i = 3; i >= 0; --i) {
    if (i < off) {
      a.mask_strides[i] = 0;
      continue;
    }
    const int64_t dim = ms[i - off];
    if (dim != full[i] && dim != 1)
      return error(ErrorCode::unsupported, "mask ", sizes_to_string(ms), " does not broadcast to [", full[0], ", ",
                   full[1], ", ", full[2], ", ", full[3], "]");
    a.mask_strides[i] = dim == 1 ? 0 : stride;
    stride *= dim;
  }
  a.mask_dtype = m.dtype;
  return Status::ok();
}

// Sizes of a 4-D operand in (batch, heads, seq, dim) order, and its strides of (batch, head,
// position): bshd reads [B, S, H, D] in place.
void bhsd_dims(const TensorType& t, bool bshd, int64_t dims[4], int64_t strides[3]) {
  const Sizes s = *static_sizes(t.shape);
  if (bshd) {
    dims[0] = s[0], dims[1] = s[2], dims[2] = s[1], dims[3] = s[3];
    strides[0] = s[1] * s[2] * s[3], strides[1] = s[3], strides[2] = s[2] * s[3];
  } else {
    dims[0] = s[0], dims[1] = s[1], dims[2] = s[2], dims[3] = s[3];
    strides[0] = s[1] * s[2] * s[3], strides[1] = s[2] * s[3], strides[2] = s[3];
  }
}

// What attention and paged attention share: the attributes (only `allowed` ones), the layout,
// q and the output (their dims in q / o), scale and softcap.
Status plan_common(const Attrs& attrs, std::initializer_list<std::string_view> allowed, const TensorType& qt,
                   const TensorType& ot, AttentionArgs& a, int64_t q[4], int64_t o[4]) {
  if (ot.dtype != DType::f32) return error(ErrorCode::unsupported, "the output must be f32");
  for (const auto& [name, v] : attrs.items())
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end())
      return error(ErrorCode::unsupported, "unknown attribute '", name, "'");
  const std::string layout = attrs.s("layout", "bhsd");
  if (layout != "bhsd" && layout != "bshd") return error(ErrorCode::unsupported, "layout '", layout, "'");
  if (qt.rank() != 4 || ot.rank() != 4) return error(ErrorCode::unsupported, "q and the output must have rank 4");
  bhsd_dims(qt, layout == "bshd", q, a.q_strides);
  bhsd_dims(ot, layout == "bshd", o, a.out_strides);
  if (q[3] <= 0) return error(ErrorCode::unsupported, "empty head dimension");
  a.batch = q[0];
  a.heads_q = q[1];
  a.seq_q = q[2];
  a.head_dim = q[3];
  double scale = attrs.f("scale", 0.0);
  if (scale == 0.0) scale = 1.0 / std::sqrt(static_cast<double>(a.head_dim));
  a.scale = static_cast<float>(scale);
  const double softcap = attrs.f("softcap", 0.0);
  if (!(softcap >= 0) || !std::isfinite(softcap)) return error(ErrorCode::unsupported, "softcap ", softcap, " must be finite and >= 0");
  a.softcap = static_cast<float>(softcap);
  return Status::ok();
}

}  // namespace

Expected<AttentionPlan> plan_attention(const Attrs& attrs, std::span<const TensorType> in,
                                       std::span<const TensorType> out) {
  if (in.size() < 3 || in.size() > 4 || out.size() != 1)
    return error(ErrorCode::unsupported, "attention takes q, k, v and an optional mask, and gives one output");
  // f32 operands, or bf16 ones with an f32 result (out_type): the kernel sums in f32 either way
  const DType operands = in[0].dtype;
  if ((operands != DType::f32 && operands != DType::bf16) || in[1].dtype != operands || in[2].dtype != operands)
    return error(ErrorCode::unsupported, "the native attention takes f32, or bf16 with out_type f32, operands; got ",
                 dtype_name(in[0].dtype), " (other types decompose, computing in f32)");
  if (operands == DType::bf16 && attrs.dtype("out_type", DType::bf16) != DType::f32)
    return error(ErrorCode::unsupported, "the native attention gives an f32 result: bf16 operands need out_type f32 "
                 "(without it they decompose, computing in f32)");
  for (const TensorType& t : in)
    if (!static_sizes(t.shape)) return error(ErrorCode::unsupported, "the native attention needs static shapes");
  for (int i = 1; i < 3; ++i)
    if (in[i].rank() != 4) return error(ErrorCode::unsupported, "q, k and v must have rank 4");
  AttentionArgs a;
  a.operand_type = operands;
  int64_t q[4], k[4], v[4], o[4];
  RLX_TRY(plan_common(attrs, {"causal", "scale", "layout", "softcap", "out_type", "int8_scores"}, in[0], out[0], a, q, o));
  a.int8_scores = attrs.i("int8_scores", 0) != 0;
  if (a.int8_scores && operands != DType::f32)
    return error(ErrorCode::unsupported, "int8 scores of ", dtype_name(operands),
                 " operands (the native attention quantizes f32 ones; these decompose)");
  const bool bshd = attrs.s("layout", "bhsd") == "bshd";
  bhsd_dims(in[1], bshd, k, a.k_strides);
  bhsd_dims(in[2], bshd, v, a.v_strides);
  if (q[0] != k[0] || k[0] != v[0]) return error(ErrorCode::unsupported, "batch sizes differ");
  if (q[3] != k[3]) return error(ErrorCode::unsupported, "q and k head dimensions differ");
  if (k[1] != v[1] || k[2] != v[2]) return error(ErrorCode::unsupported, "k and v differ in heads or length");
  if (k[1] <= 0 || q[1] % k[1] != 0)
    return error(ErrorCode::unsupported, "query heads ", q[1], " are not a multiple of key/value heads ", k[1]);
  if (v[3] <= 0) return error(ErrorCode::unsupported, "empty head dimension");
  if (o[0] != q[0] || o[1] != q[1] || o[2] != q[2] || o[3] != v[3])
    return error(ErrorCode::unsupported, "the output shape does not match q and v");
  a.heads_kv = k[1];
  a.seq_k = k[2];
  a.head_dim_v = v[3];
  a.causal = attrs.i("causal", 0) != 0;
  if (in.size() == 4) RLX_TRY(plan_mask(in[3], a));
  return AttentionPlan{a, in.size() == 4};
}

Expected<AttentionPlan> plan_paged_attention(const Attrs& attrs, std::span<const TensorType> in,
                                             std::span<const TensorType> out) {
  if (in.size() != 5 || out.size() != 1)
    return error(ErrorCode::unsupported, "paged attention takes q, k_pool, v_pool, block_table and mask");
  for (int i = 0; i < 3; ++i)
    if (in[i].dtype != DType::f32)
      return error(ErrorCode::unsupported, "the native paged attention computes f32 only, got ", dtype_name(in[i].dtype));
  if (in[3].dtype != DType::i64) return error(ErrorCode::unsupported, "the block table must be i64");
  for (const TensorType& t : in)
    if (!static_sizes(t.shape)) return error(ErrorCode::unsupported, "the native attention needs static shapes");
  const Sizes kp = *static_sizes(in[1].shape), vp = *static_sizes(in[2].shape), tb = *static_sizes(in[3].shape);
  const int64_t bs = attrs.i("block_size", 0);
  if (kp.size() != 3 || vp.size() != 3 || tb.size() != 2 || bs <= 0 || kp[1] % bs != 0 || kp[0] != vp[0] ||
      kp[1] != vp[1])
    return error(ErrorCode::unsupported, "pools [Hkv, slots, D] of whole blocks and a table [B, T]");
  AttentionArgs a;
  int64_t q[4], o[4];
  RLX_TRY(plan_common(attrs, {"block_size", "scale", "layout", "softcap"}, in[0], out[0], a, q, o));
  a.heads_kv = kp[0];
  a.head_dim_v = vp[2];
  a.k_strides[1] = kp[1] * kp[2], a.k_strides[2] = kp[2];
  a.v_strides[1] = vp[1] * vp[2], a.v_strides[2] = vp[2];
  a.block_size = bs;
  a.table_cols = tb[1];
  a.pool_blocks = kp[1] / bs;
  a.seq_k = tb[1] * bs;
  if (tb[0] != q[0]) return error(ErrorCode::unsupported, "the block table's batch differs from q's");
  if (q[3] != kp[2]) return error(ErrorCode::unsupported, "q and k head dimensions differ");
  if (kp[0] <= 0 || q[1] % kp[0] != 0)
    return error(ErrorCode::unsupported, "query heads ", q[1], " are not a multiple of key/value heads ", kp[0]);
  if (o[0] != q[0] || o[1] != q[1] || o[2] != q[2] || o[3] != vp[2])
    return error(ErrorCode::unsupported, "the output shape does not match q and v");
  if (vp[2] <= 0) return error(ErrorCode::unsupported, "empty head dimension");
  RLX_TRY(plan_mask(in[4], a));
  return AttentionPlan{a, true, true};
}

Expected<AttentionPlan> plan_attention_node(Op op, const Attrs& attrs, std::span<const TensorType> inputs,
                                            std::span<const TensorType> outputs) {
  return op == Op::PagedAttention ? plan_paged_attention(attrs, inputs, outputs) : plan_attention(attrs, inputs, outputs);
}

Claim claim_cpu_attention(const NodeDesc& n) {
  auto plan = plan_attention_node(n.op, n.attrs, n.inputs, n.outputs);
  if (!plan) return Claim::no(plan.status().message());
  const AttentionArgs& a = plan->args;
  const bool bf16 = a.operand_type == DType::bf16;
  std::string how = cat(plan->paged ? "paged attention f32 " : bf16 ? "fused attention bf16 -> f32 " : "fused attention f32 ",
                        n.attrs.s("layout", "bhsd"),
                        " b=", a.batch, " hq=", a.heads_q);
  if (a.heads_kv != a.heads_q) how += cat(" hkv=", a.heads_kv);
  how += cat(" sq=", a.seq_q, " sk=", a.seq_k, " d=", a.head_dim);
  if (a.head_dim_v != a.head_dim) how += cat(" dv=", a.head_dim_v);
  if (plan->has_mask) how += cat(" mask ", dtype_name(a.mask_dtype));
  if (a.causal) how += " causal";
  if (plan->paged) how += cat(" blocks of ", a.block_size, " in a pool of ", a.pool_blocks);
  if (a.softcap > 0) how += cat(" softcap ", a.softcap);
  // the bf16 score product runs on vdpbf16ps in the direct kernel; elsewhere the task's
  // operands are widened to f32
  if (bf16) how += attention_bf16_direct(a) ? " vdpbf16ps" : " widened";
  // int8 scores: vpdpbusd on the quants in the direct kernel, else the dequantized rows in f32
  if (a.int8_scores) how += attention_int8_direct(a) ? " int8 scores vpdpbusd" : " int8 scores dequantized";
  return Claim::yes(how);
}

}  // namespace rlx::cpu
