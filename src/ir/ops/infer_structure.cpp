// Type inference for contractions, normalizations, convolution/pooling and attention.
#include <algorithm>
#include <array>

#include "infer_util.h"

namespace rlx::infer {
namespace {

// The result type of a product with optional attribute out_type (dot, matmul, conv2d,
// attention): the
// operands' type, or f32 for f16 and bf16 operands (StableHLO's preferred_element_type).
Expected<DType> result_type(Op op, const NodeSig& sig, DType operands) {
  if (!sig.attrs.has("out_type")) return operands;
  const DType out_type = sig.attrs.dtype("out_type");
  const bool narrow_in = operands == DType::f16 || operands == DType::bf16;
  if (out_type != operands && !(narrow_in && out_type == DType::f32))
    return fail(ErrorCode::dtype_error, op, sig, "out_type ", dtype_name(out_type), " is not allowed for ",
                dtype_name(operands), " operands (f16 and bf16 operands may give an f32 result)");
  return out_type;
}

bool dims_compatible(const Dim& a, const Dim& b) { return a == b || a.is_unknown() || b.is_unknown(); }

Expected<Dim> conv_out(Op op, const NodeSig& sig, const Dim& in, int64_t k, int64_t stride, int64_t pad_lo,
                       int64_t pad_hi, int64_t dil, bool ceil_mode) {
  if (!in.is_static()) return Dim::unknown();
  if (stride <= 0 || dil <= 0 || k <= 0)
    return fail(ErrorCode::shape_error, op, sig, "kernel, stride and dilation must be positive");
  int64_t span = dil * (k - 1) + 1;
  int64_t avail = in.size() + pad_lo + pad_hi - span;
  if (avail < 0)
    return fail(ErrorCode::shape_error, op, sig, "kernel extent ", span, " exceeds padded input ",
                in.size() + pad_lo + pad_hi);
  int64_t n = ceil_mode ? (avail + stride - 1) / stride + 1 : avail / stride + 1;
  // PyTorch/ONNX rule: the last window must start inside the input or left padding.
  if (ceil_mode && (n - 1) * stride >= in.size() + pad_lo) --n;
  return Dim(n);
}

}  // namespace

Expected<Types> infer_contraction(Op op, const NodeSig& sig) {
  const TensorType& a = sig.inputs[0];
  const TensorType& b = sig.inputs[1];
  RLX_TRY(expect_same_dtype(op, sig, 0, 1));
  RLX_TRY(expect_numeric(op, sig, 0));
  if (is_packed(a.dtype)) return fail(ErrorCode::dtype_error, op, sig, "packed operands need qmatmul");
  if (op == Op::Dot) {
    auto lb = sig.attrs.ints("lhs_batch"), rb = sig.attrs.ints("rhs_batch");
    auto lc = sig.attrs.ints("lhs_contract"), rc = sig.attrs.ints("rhs_contract");
    if (lb.size() != rb.size() || lc.size() != rc.size())
      return fail(ErrorCode::shape_error, op, sig, "batch and contract dimension lists differ in length");
    std::vector<bool> lused(a.rank(), false), rused(b.rank(), false);
    auto use = [&](std::vector<bool>& used, int64_t d, int rank) -> bool {
      if (d < 0 || d >= rank || used[d]) return false;
      used[d] = true;
      return true;
    };
    Shape out;
    for (size_t i = 0; i < lb.size(); ++i) {
      if (!use(lused, lb[i], a.rank()) || !use(rused, rb[i], b.rank()))
        return fail(ErrorCode::shape_error, op, sig, "bad batch dimension");
      if (!dims_compatible(a.shape[lb[i]], b.shape[rb[i]]))
        return fail(ErrorCode::shape_error, op, sig, "batch dimensions differ: ", a.shape[lb[i]].to_string(),
                    " vs ", b.shape[rb[i]].to_string());
      out.push_back(a.shape[lb[i]]);
    }
    for (size_t i = 0; i < lc.size(); ++i) {
      if (!use(lused, lc[i], a.rank()) || !use(rused, rc[i], b.rank()))
        return fail(ErrorCode::shape_error, op, sig, "bad contracting dimension");
      if (!dims_compatible(a.shape[lc[i]], b.shape[rc[i]]))
        return fail(ErrorCode::shape_error, op, sig, "contracting dimensions differ: ",
                    a.shape[lc[i]].to_string(), " vs ", b.shape[rc[i]].to_string());
    }
    for (int i = 0; i < a.rank(); ++i)
      if (!lused[i]) out.push_back(a.shape[i]);
    for (int i = 0; i < b.rank(); ++i)
      if (!rused[i]) out.push_back(b.shape[i]);
    RLX_ASSIGN_OR_RETURN(DType out_type, result_type(op, sig, a.dtype));
    return Types{TensorType{out_type, out}};
  }
  if (op == Op::MatMul) {
    if (a.rank() == 0 || b.rank() == 0)
      return fail(ErrorCode::shape_error, op, sig, "operands must have rank >= 1");
    Shape sa = a.shape, sb = b.shape;
    if (sa.size() == 1) sa.insert(sa.begin(), Dim(1));
    if (sb.size() == 1) sb.push_back(Dim(1));
    const Dim& ka = sa[sa.size() - 1];
    const Dim& kb = sb[sb.size() - 2];
    if (!dims_compatible(ka, kb))
      return fail(ErrorCode::shape_error, op, sig, "inner dimensions differ: ", shape_to_string(a.shape), " x ",
                  shape_to_string(b.shape));
    Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
    auto batch = broadcast_shapes(ba, bb);
    if (!batch) return std::move(batch).take_status().with_context(where(op, sig));
    Shape out = *batch;
    if (a.rank() > 1) out.push_back(sa[sa.size() - 2]);
    if (b.rank() > 1) out.push_back(sb[sb.size() - 1]);
    RLX_ASSIGN_OR_RETURN(DType out_type, result_type(op, sig, a.dtype));
    return Types{TensorType{out_type, out}};
  }
  // Gemm
  if (a.rank() != 2 || b.rank() != 2)
    return fail(ErrorCode::shape_error, op, sig, "A and B must be 2-D, got ", shape_to_string(a.shape), " and ",
                shape_to_string(b.shape));
  bool ta = sig.attrs.i("trans_a", 0) != 0, tb = sig.attrs.i("trans_b", 0) != 0;
  Dim m = ta ? a.shape[1] : a.shape[0], ka = ta ? a.shape[0] : a.shape[1];
  Dim kb = tb ? b.shape[1] : b.shape[0], n = tb ? b.shape[0] : b.shape[1];
  if (!dims_compatible(ka, kb))
    return fail(ErrorCode::shape_error, op, sig, "inner dimensions differ: ", ka.to_string(), " vs ", kb.to_string());
  Shape out{m, n};
  if (sig.inputs.size() == 3) {
    RLX_TRY(expect_same_dtype(op, sig, 0, 2));
    auto c = broadcast_shapes(sig.inputs[2].shape, out);
    if (!c || *c != out)
      return fail(ErrorCode::shape_error, op, sig, "C ", shape_to_string(sig.inputs[2].shape),
                  " does not broadcast to ", shape_to_string(out));
  }
  return Types{TensorType{a.dtype, out}};
}

Expected<Types> infer_normalization(Op op, const NodeSig& sig) {
  const TensorType& x = sig.inputs[0];
  RLX_TRY(expect_float(op, sig, 0));
  int64_t axis_attr = sig.attrs.i("axis", -1);
  auto ax = normalize_axis(axis_attr, x.rank());
  if (!ax) return std::move(ax).take_status().with_context(where(op, sig));
  if (op == Op::LayerNorm || op == Op::RmsNorm) {
    Shape norm_shape(x.shape.begin() + *ax, x.shape.end());
    for (size_t i = 1; i < sig.inputs.size(); ++i) {
      RLX_TRY(expect_same_dtype(op, sig, 0, static_cast<int>(i)));
      auto b = broadcast_shapes(sig.inputs[i].shape, norm_shape);
      if (!b || *b != norm_shape)
        return fail(ErrorCode::shape_error, op, sig, (i == 1 ? "scale " : "bias "),
                    shape_to_string(sig.inputs[i].shape), " does not broadcast to the normalized shape ",
                    shape_to_string(norm_shape));
    }
  }
  return Types{x};
}

Expected<Types> infer_conv(Op op, const NodeSig& sig) {
  const TensorType& x = sig.inputs[0];
  const Attrs& a = sig.attrs;
  RLX_TRY(expect_float(op, sig, 0));
  if (x.rank() != 4) return fail(ErrorCode::shape_error, op, sig, "x must be NCHW (rank 4), got ", shape_to_string(x.shape));
  auto strides = a.ints("strides", {1, 1});
  auto pads = a.ints("pads", {0, 0, 0, 0});
  auto dil = a.ints("dilations", {1, 1});
  if (strides.size() != 2 || pads.size() != 4 || dil.size() != 2)
    return fail(ErrorCode::shape_error, op, sig, "strides and dilations need 2 entries, pads 4");
  for (int64_t p : pads)
    if (p < 0) return fail(ErrorCode::shape_error, op, sig, "negative padding");
  bool ceil_mode = a.i("ceil_mode", 0) != 0;
  if (op == Op::Conv2d) {
    const TensorType& w = sig.inputs[1];
    RLX_TRY(expect_same_dtype(op, sig, 0, 1));
    if (w.rank() != 4) return fail(ErrorCode::shape_error, op, sig, "w must be [M, C/group, kh, kw]");
    int64_t group = a.i("group", 1);
    if (group <= 0) return fail(ErrorCode::shape_error, op, sig, "group must be positive");
    if (!w.shape[2].is_static() || !w.shape[3].is_static() || !w.shape[0].is_static() || !w.shape[1].is_static())
      return fail(ErrorCode::shape_error, op, sig, "weight shape must be static");
    int64_t m = w.shape[0].size();
    if (m % group != 0) return fail(ErrorCode::shape_error, op, sig, "output channels ", m, " not divisible by group ", group);
    if (x.shape[1].is_static() && x.shape[1].size() != w.shape[1].size() * group)
      return fail(ErrorCode::shape_error, op, sig, "input channels ", x.shape[1].size(), " != ",
                  w.shape[1].size(), " x group ", group);
    RLX_ASSIGN_OR_RETURN(DType out_type, result_type(op, sig, x.dtype));
    if (sig.inputs.size() == 3) {
      if (sig.inputs[2].dtype != out_type)
        return fail(ErrorCode::dtype_error, op, sig, "bias is ", dtype_name(sig.inputs[2].dtype), " but the result is ",
                    dtype_name(out_type), " (the bias has the result's type)");
      if (sig.inputs[2].shape != Shape{Dim(m)})
        return fail(ErrorCode::shape_error, op, sig, "bias must be [", m, "]");
    }
    RLX_ASSIGN_OR_RETURN(Dim ho, conv_out(op, sig, x.shape[2], w.shape[2].size(), strides[0], pads[0], pads[2], dil[0], false));
    RLX_ASSIGN_OR_RETURN(Dim wo, conv_out(op, sig, x.shape[3], w.shape[3].size(), strides[1], pads[1], pads[3], dil[1], false));
    return Types{TensorType{out_type, {x.shape[0], Dim(m), ho, wo}}};
  }
  auto k = a.ints("kernel");
  if (k.size() != 2) return fail(ErrorCode::shape_error, op, sig, "kernel needs 2 entries");
  if (!a.has("strides")) strides = {1, 1};
  if (pads[0] >= k[0] || pads[2] >= k[0] || pads[1] >= k[1] || pads[3] >= k[1])
    return fail(ErrorCode::shape_error, op, sig, "padding must be smaller than the kernel");
  RLX_ASSIGN_OR_RETURN(Dim ho, conv_out(op, sig, x.shape[2], k[0], strides[0], pads[0], pads[2], dil[0], ceil_mode));
  RLX_ASSIGN_OR_RETURN(Dim wo, conv_out(op, sig, x.shape[3], k[1], strides[1], pads[1], pads[3], dil[1], ceil_mode));
  return Types{TensorType{x.dtype, {x.shape[0], x.shape[1], ho, wo}}};
}

namespace {

// paged_attention: q's dims `x` in (batch, heads, seq, dim) order; pools [Hkv, slots, D],
// block_table [B, T], mask broadcast to [B, Hq, S, T * block_size].
Expected<Types> infer_paged_attention(Op op, const NodeSig& sig, const std::array<Dim, 4>& x, bool bshd) {
  const TensorType &kp = sig.inputs[1], &vp = sig.inputs[2], &table = sig.inputs[3], &m = sig.inputs[4];
  const int64_t bs = sig.attrs.i("block_size", 0);
  if (bs <= 0) return fail(ErrorCode::verify_error, op, sig, "block_size must be positive, got ", bs);
  if (kp.rank() != 3 || vp.rank() != 3)
    return fail(ErrorCode::shape_error, op, sig, "k_pool and v_pool must be [Hkv, slots, D], got ",
                shape_to_string(kp.shape), " and ", shape_to_string(vp.shape));
  if (!dims_compatible(kp.shape[0], vp.shape[0]) || !dims_compatible(kp.shape[1], vp.shape[1]))
    return fail(ErrorCode::shape_error, op, sig, "k_pool and v_pool differ in heads or slots");
  if (kp.shape[1].is_static() && kp.shape[1].size() % bs != 0)
    return fail(ErrorCode::shape_error, op, sig, "the pools' ", kp.shape[1].size(), " slots are not whole blocks of ", bs);
  if (!dims_compatible(x[3], kp.shape[2])) return fail(ErrorCode::shape_error, op, sig, "q and k head dimensions differ");
  if (x[1].is_static() && kp.shape[0].is_static() &&
      (kp.shape[0].size() == 0 || x[1].size() % kp.shape[0].size() != 0))
    return fail(ErrorCode::shape_error, op, sig, "query heads ", x[1].size(), " are not a multiple of key/value heads ",
                kp.shape[0].size());
  RLX_TRY(expect_int(op, sig, 3));
  if (table.rank() != 2 || !dims_compatible(table.shape[0], x[0]))
    return fail(ErrorCode::shape_error, op, sig, "block_table must be [B, T], got ", shape_to_string(table.shape));
  if (m.dtype != DType::boolean && m.dtype != sig.inputs[0].dtype)
    return fail(ErrorCode::dtype_error, op, sig, "mask must be bool or ", dtype_name(sig.inputs[0].dtype));
  const Dim keys = table.shape[1].is_static() ? Dim(table.shape[1].size() * bs) : Dim::symbol("paged_keys");
  const Shape full{x[0], x[1], x[2], keys};
  if (m.rank() != 4 || !broadcast_shapes(m.shape, full))
    return fail(ErrorCode::shape_error, op, sig, "mask ", shape_to_string(m.shape), " does not broadcast to ",
                shape_to_string(full));
  const Dim dv = vp.shape[2];
  if (bshd) return Types{TensorType{sig.inputs[0].dtype, {x[0], x[2], x[1], dv}}};
  return Types{TensorType{sig.inputs[0].dtype, {x[0], x[1], x[2], dv}}};
}

}  // namespace

Expected<Types> infer_attention(Op op, const NodeSig& sig) {
  RLX_TRY(expect_float(op, sig, 0));
  const std::string layout = sig.attrs.s("layout", "bhsd");
  if (layout != "bhsd" && layout != "bshd")
    return fail(ErrorCode::verify_error, op, sig, "layout must be bhsd or bshd, got '", layout, "'");
  const bool bshd = layout == "bshd";
  const char* form = bshd ? "[B, S, H, D]" : "[B, H, S, D]";
  // dims of a 4-D operand in (batch, heads, seq, dim) order, whatever the layout
  auto bhsd = [&](const TensorType& t) -> std::array<Dim, 4> {
    if (bshd) return {t.shape[0], t.shape[2], t.shape[1], t.shape[3]};
    return {t.shape[0], t.shape[1], t.shape[2], t.shape[3]};
  };
  const TensorType& xt = sig.inputs[0];
  if (xt.rank() != 4) return fail(ErrorCode::shape_error, op, sig, "x must be ", form, ", got ", shape_to_string(xt.shape));
  const auto x = bhsd(xt);
  if (op == Op::Rope) {
    if (x[3].is_static() && x[3].size() % 2 != 0) return fail(ErrorCode::shape_error, op, sig, "head dimension must be even");
    const TensorType& pos = sig.inputs[1];
    RLX_TRY(expect_int(op, sig, 1));
    bool ok = (pos.rank() == 1 && dims_compatible(pos.shape[0], x[2])) ||
              (pos.rank() == 2 && dims_compatible(pos.shape[1], x[2]) && dims_compatible(pos.shape[0], x[0]));
    if (!ok) return fail(ErrorCode::shape_error, op, sig, "positions must be [S] or [B, S], got ", shape_to_string(pos.shape));
    return Types{xt};
  }
  RLX_TRY(expect_same_dtype(op, sig, 0, 1));
  RLX_TRY(expect_same_dtype(op, sig, 0, 2));
  if (op == Op::PagedAttention) return infer_paged_attention(op, sig, x, bshd);
  if (sig.inputs[1].rank() != 4 || sig.inputs[2].rank() != 4)
    return fail(ErrorCode::shape_error, op, sig, "q, k and v must be ", form);
  const auto k = bhsd(sig.inputs[1]);
  const auto v = bhsd(sig.inputs[2]);
  if (!dims_compatible(x[0], k[0]) || !dims_compatible(k[0], v[0]))
    return fail(ErrorCode::shape_error, op, sig, "batch sizes differ");
  if (!dims_compatible(x[3], k[3])) return fail(ErrorCode::shape_error, op, sig, "q and k head dimensions differ");
  if (!dims_compatible(k[1], v[1]) || !dims_compatible(k[2], v[2]))
    return fail(ErrorCode::shape_error, op, sig, "k and v differ in heads or length");
  if (x[1].is_static() && k[1].is_static() && (k[1].size() == 0 || x[1].size() % k[1].size() != 0))
    return fail(ErrorCode::shape_error, op, sig, "query heads ", x[1].size(), " are not a multiple of key/value heads ",
                k[1].size());
  if (sig.inputs.size() == 4) {
    const TensorType& m = sig.inputs[3];
    if (m.dtype != DType::boolean && m.dtype != xt.dtype)
      return fail(ErrorCode::dtype_error, op, sig, "mask must be bool or ", dtype_name(xt.dtype));
    Shape full{x[0], x[1], x[2], k[2]};
    auto b = broadcast_shapes(m.shape, full);
    if (!b || m.rank() > 4)
      return fail(ErrorCode::shape_error, op, sig, "mask ", shape_to_string(m.shape), " does not broadcast to ",
                  shape_to_string(full));
  }
  if (const int64_t i8 = sig.attrs.i("int8_scores", 0); i8 != 0 && i8 != 1)
    return fail(ErrorCode::verify_error, op, sig, "int8_scores must be 0 or 1, got ", i8);
  RLX_ASSIGN_OR_RETURN(DType out_type, result_type(op, sig, xt.dtype));
  if (bshd) return Types{TensorType{out_type, {x[0], x[2], x[1], v[3]}}};
  return Types{TensorType{out_type, {x[0], x[1], x[2], v[3]}}};
}

}  // namespace rlx::infer
