#include "native_attention.h"

#include <cmath>

namespace rlx::cpu {

Expected<AttentionPlan> plan_attention(const Attrs& attrs, std::span<const TensorType> in,
                                       std::span<const TensorType> out) {
  if (in.size() < 3 || in.size() > 4 || out.size() != 1)
    return error(ErrorCode::unsupported, "attention takes q, k, v and an optional mask, and gives one output");
  for (int i = 0; i < 3; ++i)
    if (in[i].dtype != DType::f32)
      return error(ErrorCode::unsupported, "the native attention computes f32 only, got ", dtype_name(in[i].dtype),
                   " (narrow types decompose, computing in f32)");
  if (out[0].dtype != DType::f32) return error(ErrorCode::unsupported, "the output must be f32");
  for (const TensorType& t : in)
    if (!static_sizes(t.shape)) return error(ErrorCode::unsupported, "the native attention needs static shapes");
  for (const auto& [name, v] : attrs.items())
    if (name != "causal" && name != "scale" && name != "layout" && name != "softcap")
      return error(ErrorCode::unsupported, "unknown attribute '", name, "'");
  const std::string layout = attrs.s("layout", "bhsd");
  if (layout != "bhsd" && layout != "bshd") return error(ErrorCode::unsupported, "layout '", layout, "'");
  const bool bshd = layout == "bshd";
  for (int i = 0; i < 3; ++i)
    if (in[i].rank() != 4) return error(ErrorCode::unsupported, "q, k and v must have rank 4");
  // sizes in (batch, heads, seq, dim) order and the strides of (batch, head, position)
  auto bhsd = [&](const TensorType& t, int64_t dims[4], int64_t strides[3]) {
    const Sizes s = *static_sizes(t.shape);
    if (bshd) {
      dims[0] = s[0], dims[1] = s[2], dims[2] = s[1], dims[3] = s[3];
      strides[0] = s[1] * s[2] * s[3], strides[1] = s[3], strides[2] = s[2] * s[3];
    } else {
      dims[0] = s[0], dims[1] = s[1], dims[2] = s[2], dims[3] = s[3];
      strides[0] = s[1] * s[2] * s[3], strides[1] = s[2] * s[3], strides[2] = s[3];
    }
  };
  AttentionArgs a;
  int64_t q[4], k[4], v[4], o[4];
  bhsd(in[0], q, a.q_strides);
  bhsd(in[1], k, a.k_strides);
  bhsd(in[2], v, a.v_strides);
  bhsd(out[0], o, a.out_strides);
  if (q[0] != k[0] || k[0] != v[0]) return error(ErrorCode::unsupported, "batch sizes differ");
  if (q[3] != k[3]) return error(ErrorCode::unsupported, "q and k head dimensions differ");
  if (k[1] != v[1] || k[2] != v[2]) return error(ErrorCode::unsupported, "k and v differ in heads or length");
  if (k[1] <= 0 || q[1] % k[1] != 0)
    return error(ErrorCode::unsupported, "query heads ", q[1], " are not a multiple of key/value heads ", k[1]);
  if (q[3] <= 0 || v[3] <= 0) return error(ErrorCode::unsupported, "empty head dimension");
  if (o[0] != q[0] || o[1] != q[1] || o[2] != q[2] || o[3] != v[3])
    return error(ErrorCode::unsupported, "the output shape does not match q and v");
  a.batch = q[0];
  a.heads_q = q[1];
  a.seq_q = q[2];
  a.head_dim = q[3];
  a.heads_kv = k[1];
  a.seq_k = k[2];
  a.head_dim_v = v[3];
  a.causal = attrs.i("causal", 0) != 0;
  double scale = attrs.f("scale", 0.0);
  if (scale == 0.0) scale = 1.0 / std::sqrt(static_cast<double>(a.head_dim));
  a.scale = static_cast<float>(scale);
  const double softcap = attrs.f("softcap", 0.0);
  if (!(softcap >= 0) || !std::isfinite(softcap)) return error(ErrorCode::unsupported, "softcap ", softcap, " must be finite and >= 0");
  a.softcap = static_cast<float>(softcap);
  if (in.size() == 4) {
    const TensorType& m = in[3];
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
  }
  return AttentionPlan{a, in.size() == 4};
}

Claim claim_cpu_attention(const NodeDesc& n) {
  auto plan = plan_attention(n.attrs, n.inputs, n.outputs);
  if (!plan) return Claim::no(plan.status().message());
  const AttentionArgs& a = plan->args;
  std::string how = cat("fused attention f32 ", n.attrs.s("layout", "bhsd"), " b=", a.batch, " hq=", a.heads_q);
  if (a.heads_kv != a.heads_q) how += cat(" hkv=", a.heads_kv);
  how += cat(" sq=", a.seq_q, " sk=", a.seq_k, " d=", a.head_dim);
  if (a.head_dim_v != a.head_dim) how += cat(" dv=", a.head_dim_v);
  if (plan->has_mask) how += cat(" mask ", dtype_name(a.mask_dtype));
  if (a.causal) how += " causal";
  if (a.softcap > 0) how += cat(" softcap ", a.softcap);
  return Claim::yes(how);
}

}  // namespace rlx::cpu
