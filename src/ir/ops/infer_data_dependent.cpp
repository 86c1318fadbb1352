// Type rules of the ops whose output shape depends on the input values (nonzero, unique,
// non_max_suppression, range, top_k). The dimension the values decide is the symbol named by the node's
// `count` attribute; everything else about the outputs is static where the inputs are.
#include "infer_util.h"

namespace rlx::infer {
namespace {

Expected<Dim> count_dim(Op op, const NodeSig& sig) {
  const std::string name = sig.attrs.s("count", "");
  if (name.empty()) return fail(ErrorCode::invalid_argument, op, sig, "count must name the output's symbolic dimension");
  return Dim::symbol(name);
}

// One value: a scalar or a 1-element 1-D tensor (ONNX writes both).
Status expect_one_value(Op op, const NodeSig& sig, int i) {
  const Shape& s = sig.inputs[i].shape;
  if (s.empty() || (s.size() == 1 && (!s[0].is_static() || s[0].size() == 1))) return Status::ok();
  return fail(ErrorCode::shape_error, op, sig, "input ", i, " must hold one value, got ", sig.inputs[i].to_string());
}

}  // namespace

Expected<Types> infer_data_dependent(Op op, const NodeSig& sig) {
  RLX_ASSIGN_OR_RETURN(Dim count, count_dim(op, sig));
  const TensorType& x = sig.inputs[0];
  if (is_packed(x.dtype) || is_complex(x.dtype))
    return fail(ErrorCode::dtype_error, op, sig, "takes real dtypes of whole bytes, got ", dtype_name(x.dtype));
  if (op == Op::NonZero) return Types{TensorType{DType::i64, {Dim(x.rank()), count}}};
  if (op == Op::TopK) {
    if (x.rank() == 0) return fail(ErrorCode::shape_error, op, sig, "needs a tensor of rank >= 1, got a scalar");
    if (x.dtype == DType::boolean) return fail(ErrorCode::dtype_error, op, sig, "takes numbers, got bool");
    auto axis = normalize_axis(sig.attrs.i("axis", -1), x.rank());
    if (!axis) return fail(ErrorCode::invalid_argument, op, sig, axis.status().message());
    if (!is_int(sig.inputs[1].dtype) || is_packed(sig.inputs[1].dtype))
      return fail(ErrorCode::dtype_error, op, sig, "k must be an integer, got ", sig.inputs[1].to_string());
    RLX_TRY(expect_one_value(op, sig, 1));
    TensorType v = x;
    v.shape[*axis] = count;
    TensorType i = v;
    i.dtype = DType::i64;
    return Types{v, i};
  }
  if (op == Op::Range) {
    if (x.dtype == DType::boolean) return fail(ErrorCode::dtype_error, op, sig, "takes numbers, got bool");
    for (int i = 0; i < 3; ++i) {
      RLX_TRY(expect_one_value(op, sig, i));
      if (sig.inputs[i].dtype != x.dtype) return fail(ErrorCode::dtype_error, op, sig, "start, limit and delta must have one dtype");
    }
    return Types{TensorType{x.dtype, {count}}};
  }
  if (op == Op::Unique) {
    TensorType y = x, inverse{DType::i64, {}};
    if (sig.attrs.has("axis")) {
      if (x.rank() == 0) return fail(ErrorCode::shape_error, op, sig, "axis needs a tensor of rank >= 1, got a scalar");
      auto axis = normalize_axis(sig.attrs.i("axis", 0), x.rank());
      if (!axis) return fail(ErrorCode::invalid_argument, op, sig, axis.status().message());
      inverse.shape = {x.shape[*axis]};
      y.shape[*axis] = count;
    } else {
      Dim n = Dim::unknown();
      if (is_static(x.shape)) {
        auto sizes = static_sizes(x.shape);
        auto total = checked_numel(*sizes);
        if (!total) return fail(ErrorCode::overflow, op, sig, total.status().message());
        n = Dim(*total);
      }
      inverse.shape = {n};
      y.shape = {count};
    }
    const int64_t sorted = sig.attrs.i("sorted", 1);
    if (sorted != 0 && sorted != 1) return fail(ErrorCode::invalid_argument, op, sig, "sorted must be 0 or 1, got ", sorted);
    TensorType idx{DType::i64, {count}};
    return Types{y, idx, inverse, idx};
  }
  // non_max_suppression
  const TensorType& scores = sig.inputs[1];
  if (x.dtype != DType::f32 || scores.dtype != DType::f32)
    return fail(ErrorCode::dtype_error, op, sig, "boxes and scores must be f32, got ", x.to_string(), " and ",
                scores.to_string());
  if (x.rank() != 3 || scores.rank() != 3)
    return fail(ErrorCode::shape_error, op, sig, "boxes must be [B, N, 4] and scores [B, C, N], got ", x.to_string(),
                " and ", scores.to_string());
  if (x.shape[2] != Dim(4)) return fail(ErrorCode::shape_error, op, sig, "boxes must be [B, N, 4], got ", x.to_string());
  for (int d : {0, 2}) {
    const Dim& a = x.shape[d == 0 ? 0 : 1];
    const Dim& b = scores.shape[d];
    if (a.is_static() && b.is_static() && a != b)
      return fail(ErrorCode::shape_error, op, sig, "boxes [B, N, 4] and scores [B, C, N] disagree: ", x.to_string(),
                  " and ", scores.to_string());
  }
  const int64_t cpb = sig.attrs.i("center_point_box", 0);
  if (cpb != 0 && cpb != 1) return fail(ErrorCode::invalid_argument, op, sig, "center_point_box must be 0 or 1, got ", cpb);
  if (sig.inputs.size() > 2) {
    if (!is_int(sig.inputs[2].dtype) || is_packed(sig.inputs[2].dtype))
      return fail(ErrorCode::dtype_error, op, sig, "max_output_boxes_per_class must be an integer, got ",
                  sig.inputs[2].to_string());
    RLX_TRY(expect_one_value(op, sig, 2));
  }
  for (size_t i = 3; i < sig.inputs.size(); ++i) {
    if (sig.inputs[i].dtype != DType::f32)
      return fail(ErrorCode::dtype_error, op, sig, "input ", i, " (a threshold) must be f32, got ", sig.inputs[i].to_string());
    RLX_TRY(expect_one_value(op, sig, static_cast<int>(i)));
  }
  return Types{TensorType{DType::i64, {count, Dim(3)}}};
}

}  // namespace rlx::infer
