// Type inference for sources, elementwise ops (with numpy broadcasting) and reductions.
#include <algorithm>

#include "infer_util.h"

namespace rlx::infer {

Expected<Types> infer_source(Op op, const NodeSig& sig) {
  const Attrs& a = sig.attrs;
  switch (op) {
    case Op::Constant: {
      const Tensor* t = a.tensor("value");
      if (!t) return fail(ErrorCode::verify_error, op, sig, "needs a tensor 'value'");
      return Types{t->type()};
    }
    case Op::Iota:
      if (!sig.inputs.empty()) {
        if (a.has("shape")) return fail(ErrorCode::verify_error, op, sig, "takes a shape attribute or an input, not both");
        const DType dt = a.dtype("dtype");
        RLX_TRY(normalize_axis(a.i("axis"), sig.inputs[0].rank()).status());
        if (dt == DType::boolean || is_packed(dt) || is_complex(dt))
          return fail(ErrorCode::dtype_error, op, sig, "dtype must be numeric");
        return Types{TensorType{dt, sig.inputs[0].shape}};
      }
      if (!a.has("shape")) return fail(ErrorCode::verify_error, op, sig, "needs a shape attribute or an input");
      [[fallthrough]];
    case Op::Param:
    case Op::Random: {
      Sizes sizes = a.ints("shape");
      for (int64_t d : sizes)
        if (d < 0) return fail(ErrorCode::shape_error, op, sig, "negative dimension in shape");
      RLX_TRY(checked_numel(sizes).status());
      DType dt = a.dtype("dtype");
      if (op == Op::Iota) {
        RLX_TRY(normalize_axis(a.i("axis"), static_cast<int>(sizes.size())).status());
        if (dt == DType::boolean || is_packed(dt) || is_complex(dt))
          return fail(ErrorCode::dtype_error, op, sig, "dtype must be numeric");
      }
      if (op == Op::Random) {
        if (!is_float(dt)) return fail(ErrorCode::dtype_error, op, sig, "dtype must be a float type");
        std::string d = a.s("dist");
        if (d != "uniform" && d != "normal")
          return fail(ErrorCode::verify_error, op, sig, "dist must be uniform or normal, got '", d, "'");
      }
      return Types{TensorType{dt, to_shape(sizes)}};
    }
    default: break;
  }
  return fail(ErrorCode::internal, op, sig, "not a source op");
}

namespace {

Status check_unary_dtype(Op op, const NodeSig& sig) {
  switch (op) {
    case Op::Neg:
    case Op::Abs:
    case Op::Sign:
    case Op::Relu:
    case Op::LeakyRelu: return expect_numeric(op, sig, 0);
    case Op::Not:  // logical on bool, bitwise on integers
      if (sig.inputs[0].dtype == DType::boolean || (is_int(sig.inputs[0].dtype) && !is_packed(sig.inputs[0].dtype)))
        return Status::ok();
      return fail(ErrorCode::dtype_error, op, sig, "input 0 must be bool or an integer type, got ",
                  dtype_name(sig.inputs[0].dtype));
    case Op::Cast: return Status::ok();
    case Op::Real:
    case Op::Imag:
    case Op::Conj:
    case Op::Angle:
      if (is_complex(sig.inputs[0].dtype)) return Status::ok();
      return fail(ErrorCode::dtype_error, op, sig, "input 0 must be c64 (", op_name(op), " takes a complex value), got ",
                  dtype_name(sig.inputs[0].dtype));
    default: return expect_float(op, sig, 0);
  }
}

}  // namespace

Expected<Types> infer_elementwise(Op op, const NodeSig& sig) {
  const OpFamily fam = op_info(op).family;
  if (fam == OpFamily::unary || fam == OpFamily::activation || fam == OpFamily::cast) {
    RLX_TRY(check_unary_dtype(op, sig));
    TensorType t = sig.inputs[0];
    if (op == Op::Cast) {
      if (is_packed(sig.attrs.dtype("to")))
        return fail(ErrorCode::dtype_error, op, sig, "cannot cast to a packed type");
      if (is_packed(t.dtype))
        return fail(ErrorCode::dtype_error, op, sig, "cannot cast from a packed type");
      t.dtype = sig.attrs.dtype("to");
    }
    if (op == Op::IsNan || op == Op::IsInf) t.dtype = DType::boolean;
    // the parts, modulus and argument of a c64 value are f32 (NumPy, PyTorch)
    if (is_complex(t.dtype) && (op == Op::Real || op == Op::Imag || op == Op::Angle || op == Op::Abs))
      t.dtype = DType::f32;
    if (op == Op::Gelu) {
      std::string ap = sig.attrs.s("approximate", "none");
      if (ap != "none" && ap != "tanh")
        return fail(ErrorCode::verify_error, op, sig, "approximate must be none or tanh, got '", ap, "'");
    }
    return Types{t};
  }
  // binary, compare, logical, ternary: broadcast all inputs
  Shape shape = sig.inputs[0].shape;
  for (size_t i = 1; i < sig.inputs.size(); ++i) {
    auto b = broadcast_shapes(shape, sig.inputs[i].shape);
    if (!b) return std::move(b).take_status().with_context(where(op, sig));
    shape = *b;
  }
  DType out = sig.inputs[0].dtype;
  if (op == Op::Complex) {  // f32 parts -> c64 (c64 is a pair of f32)
    for (int i = 0; i < 2; ++i)
      if (sig.inputs[i].dtype != DType::f32)
        return fail(ErrorCode::dtype_error, op, sig, "input ", i, " must be f32 (the ", i == 0 ? "real" : "imaginary",
                    " part of a c64 value), got ", dtype_name(sig.inputs[i].dtype), "; cast it to f32 first");
    return Types{TensorType{DType::c64, shape}};
  }
  if (fam == OpFamily::ternary) {
    RLX_TRY(expect_bool(op, sig, 0));
    RLX_TRY(expect_same_dtype(op, sig, 1, 2));
    out = sig.inputs[1].dtype;
  } else if (fam == OpFamily::logical) {
    // logical on bool, bitwise on two integers of one type (numpy's &, |, ^)
    if (sig.inputs[0].dtype == DType::boolean) {
      RLX_TRY(expect_bool(op, sig, 1));
    } else {
      RLX_TRY(expect_same_dtype(op, sig, 0, 1));
      if (!is_int(out) || is_packed(out))
        return fail(ErrorCode::dtype_error, op, sig, "inputs must be bool or an integer type, got ", dtype_name(out));
    }
  } else {
    RLX_TRY(expect_same_dtype(op, sig, 0, 1));
    if (is_packed(out)) return fail(ErrorCode::dtype_error, op, sig, "packed types are storage only");
    if (fam == OpFamily::compare) {
      out = DType::boolean;
    } else {
      RLX_TRY(expect_numeric(op, sig, 0));
    }
  }
  return Types{TensorType{out, shape}};
}

Expected<Types> infer_reduce(Op op, const NodeSig& sig) {
  const TensorType& x = sig.inputs[0];
  if (op_info(op).family == OpFamily::argreduce) {
    RLX_TRY(expect_numeric(op, sig, 0));
    auto axis = normalize_axis(sig.attrs.i("axis", 0), x.rank());
    if (!axis) return std::move(axis).take_status().with_context(where(op, sig));
    if (x.rank() == 0) return fail(ErrorCode::shape_error, op, sig, "needs rank >= 1");
    Shape s = x.shape;
    if (sig.attrs.i("keepdims", 1)) {
      s[*axis] = 1;
    } else {
      s.erase(s.begin() + *axis);
    }
    return Types{TensorType{DType::i64, s}};
  }
  RLX_TRY(expect_numeric(op, sig, 0));
  if (op == Op::ReduceMean) RLX_TRY(expect_float(op, sig, 0));
  RLX_ASSIGN_OR_RETURN(auto axes, normalize_axes(op, sig, sig.attrs.ints("axes"), x.rank(), true));
  const bool keep = sig.attrs.i("keepdims", 1) != 0;
  Shape s;
  for (int i = 0; i < x.rank(); ++i) {
    bool reduced = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (!reduced) {
      s.push_back(x.shape[i]);
    } else {
      if (keep) s.push_back(1);
      if (x.shape[i].is_static() && x.shape[i].size() == 0 &&
          (op == Op::ReduceMax || op == Op::ReduceMin))
        return fail(ErrorCode::shape_error, op, sig, "cannot reduce an empty axis with max/min");
    }
  }
  return Types{TensorType{x.dtype, s}};
}

}  // namespace rlx::infer
