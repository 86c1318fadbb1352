// Type rules of the ops whose output shape depends on the input values (nonzero, unique,
// non_max_suppression, range, top_k, loop). The dimension the values decide is the symbol named by the node's
// `count` attribute; everything else about the outputs is static where the inputs are.
#include <map>

#include "infer_util.h"
#include "rlx/ir_text.h"

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

// `t` with the body's symbolic dims replaced by what the node's inputs bound them to.
TensorType substitute(TensorType t, const std::map<std::string, Dim>& bound) {
  for (Dim& d : t.shape)
    if (d.is_symbol()) {
      auto it = bound.find(d.symbol_name());
      if (it != bound.end()) d = it->second;
    }
  return t;
}

// loop: the body's signature against the node's inputs (its symbols bound from them), the
// carried values' types kept by every iteration, the scan values stacked under `count`.
Expected<Types> infer_loop(Op op, const NodeSig& sig, const Dim& count) {
  const int64_t num_state = sig.attrs.i("num_state", -1);
  const int64_t n_in = static_cast<int64_t>(sig.inputs.size());
  if (num_state < 0 || 2 + num_state > n_in)
    return fail(ErrorCode::invalid_argument, op, sig, "num_state ", num_state, " does not fit ", n_in, " inputs");
  RLX_ASSIGN_OR_RETURN(Graph body, parse_graph(sig.attrs.s("body", ""), "loop body"));
  if (static_cast<int64_t>(body.inputs.size()) != n_in)
    return fail(ErrorCode::invalid_argument, op, sig, "the body takes ", body.inputs.size(), " inputs, the node gives ", n_in);
  if (static_cast<int64_t>(body.outputs.size()) < 1 + num_state)
    return fail(ErrorCode::invalid_argument, op, sig, "the body returns ", body.outputs.size(), " values, fewer than cond and ",
                num_state, " carried values");
  if (!is_int(sig.inputs[0].dtype) || is_packed(sig.inputs[0].dtype))
    return fail(ErrorCode::dtype_error, op, sig, "M must be an integer, got ", sig.inputs[0].to_string());
  if (sig.inputs[1].dtype != DType::boolean) return fail(ErrorCode::dtype_error, op, sig, "cond must be bool, got ", sig.inputs[1].to_string());
  RLX_TRY(expect_one_value(op, sig, 0));
  RLX_TRY(expect_one_value(op, sig, 1));
  std::map<std::string, Dim> bound;
  for (int64_t k = 2; k < n_in; ++k) {
    const TensorType& want = body.type(body.inputs[static_cast<size_t>(k)]);
    const TensorType& got = sig.inputs[static_cast<size_t>(k)];
    bool ok = want.dtype == got.dtype && want.rank() == got.rank();
    for (int d = 0; ok && d < want.rank(); ++d) {
      const Dim& w = want.shape[static_cast<size_t>(d)];
      const Dim& g = got.shape[static_cast<size_t>(d)];
      if (w.is_symbol()) {
        auto [it, fresh] = bound.emplace(w.symbol_name(), g);
        ok = fresh || it->second == g;
      } else {
        ok = w == g;
      }
    }
    if (!ok) return fail(ErrorCode::shape_error, op, sig, "input ", k, " is ", got.to_string(), ", the body takes ", want.to_string());
  }
  const TensorType cond_out = body.type(body.outputs[0]);
  if (cond_out.dtype != DType::boolean || !(cond_out.rank() == 0 || (cond_out.rank() == 1 && cond_out.shape[0] == Dim(1))))
    return fail(ErrorCode::shape_error, op, sig, "the body's condition is ", cond_out.to_string(), ", not one bool");
  Types out;
  for (int64_t k = 0; k < num_state; ++k) {
    const TensorType t = substitute(body.type(body.outputs[static_cast<size_t>(1 + k)]), bound);
    if (t != sig.inputs[static_cast<size_t>(2 + k)])
      return fail(ErrorCode::shape_error, op, sig, "carried value ", k, " enters as ", sig.inputs[static_cast<size_t>(2 + k)].to_string(),
                  " and leaves the body as ", t.to_string(), " (rlx keeps a carried value's type)");
    out.push_back(t);
  }
  for (size_t k = static_cast<size_t>(1 + num_state); k < body.outputs.size(); ++k) {
    TensorType t = substitute(body.type(body.outputs[k]), bound);
    t.shape.insert(t.shape.begin(), count);
    out.push_back(t);
  }
  return out;
}

}  // namespace

Expected<Types> infer_data_dependent(Op op, const NodeSig& sig) {
  RLX_ASSIGN_OR_RETURN(Dim count, count_dim(op, sig));
  if (op == Op::Loop) return infer_loop(op, sig, count);
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
