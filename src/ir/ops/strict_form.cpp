// The strict (primitive-level) form of primitive ops: what the scheduler may assume.
#include <algorithm>

#include "infer_util.h"

namespace rlx {

Status check_strict_primitive(Op op, const NodeSig& sig, std::span<const TensorType> outputs) {
  using infer::fail;
  if (!is_primitive(op)) return fail(ErrorCode::verify_error, op, sig, "is not a primitive");
  for (size_t i = 0; i < sig.inputs.size(); ++i)
    if (!is_static(sig.inputs[i].shape))
      return fail(ErrorCode::verify_error, op, sig, "input ", i, " has a shape that is not static: ",
                  shape_to_string(sig.inputs[i].shape));
  for (const TensorType& t : outputs)
    if (!is_static(t.shape))
      return fail(ErrorCode::verify_error, op, sig, "output shape is not static: ", shape_to_string(t.shape));
  const Attrs& a = sig.attrs;
  const OpFamily fam = op_info(op).family;
  if (op == Op::Iota && !sig.inputs.empty())
    return fail(ErrorCode::verify_error, op, sig, "takes its shape from an attribute at the primitive level");
  switch (fam) {
    case OpFamily::binary:
    case OpFamily::compare:
    case OpFamily::logical:
    case OpFamily::ternary:
      for (size_t i = 1; i < sig.inputs.size(); ++i)
        if (sig.inputs[i].shape != sig.inputs[0].shape)
          return fail(ErrorCode::verify_error, op, sig, "operands differ in shape (",
                      shape_to_string(sig.inputs[0].shape), " vs ", shape_to_string(sig.inputs[i].shape),
                      "); broadcasts must be explicit at the primitive level");
      return Status::ok();
    case OpFamily::reduce:
      if (!a.has("axes") || a.ints("axes").empty())
        return fail(ErrorCode::verify_error, op, sig, "needs explicit axes at the primitive level");
      for (int64_t ax : a.ints("axes"))
        if (ax < 0) return fail(ErrorCode::verify_error, op, sig, "axes must be non-negative");
      return Status::ok();
    case OpFamily::argreduce:
    case OpFamily::movement:
      break;
    default:
      return Status::ok();
  }
  auto nonneg_axis = [&]() -> Status {
    if (a.i("axis", 0) < 0) return fail(ErrorCode::verify_error, op, sig, "axis must be non-negative");
    return Status::ok();
  };
  switch (op) {
    case Op::ArgMax:
    case Op::ArgMin:
    case Op::Concat:
    case Op::Gather:
    case Op::ScatterAdd:
    case Op::Scatter: return nonneg_axis();
    case Op::Reshape:
      for (int64_t d : a.ints("shape"))
        if (d <= 0 && !(d == 0 && a.i("allowzero", 0)))
          return fail(ErrorCode::verify_error, op, sig, "shape must be explicit (no 0 or -1)");
      return Status::ok();
    case Op::Transpose:
      if (!a.has("perm")) return fail(ErrorCode::verify_error, op, sig, "needs an explicit perm");
      return Status::ok();
    case Op::Expand: {
      const Shape& in = sig.inputs[0].shape;
      auto target = a.ints("shape");
      if (target.size() != in.size())
        return fail(ErrorCode::verify_error, op, sig, "must keep the rank at the primitive level");
      for (size_t i = 0; i < in.size(); ++i)
        if (in[i].size() != 1 && in[i].size() != target[i])
          return fail(ErrorCode::verify_error, op, sig, "dimension ", i, " is neither 1 nor the target size");
      return Status::ok();
    }
    case Op::Pad:
      if (a.s("mode", "constant") != "constant")
        return fail(ErrorCode::verify_error, op, sig, "only constant padding is a primitive");
      for (int64_t p : a.ints("pads"))
        if (p < 0) return fail(ErrorCode::verify_error, op, sig, "negative padding is a slice");
      return Status::ok();
    default: return Status::ok();
  }
}

}  // namespace rlx
