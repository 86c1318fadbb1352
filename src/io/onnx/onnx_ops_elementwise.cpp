// ONNX elementwise ops: unary math, activations, binary arithmetic and comparisons, variadic
// Sum/Mean/Max/Min, Where, Cast, Clip. Ops with no rlx primitive are written in primitives.
#include <cmath>

#include "onnx_internal.h"
#include "rlx/unary_math.h"

namespace rlx::onnx_import {
namespace {

MapFn unary(Op op) {
  return [op](Importer& m) -> Status {
    RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
    return m.out(0, m.o().unary(op, x));
  };
}

MapFn binary(Op op) {
  return [op](Importer& m) -> Status {
    RLX_ASSIGN_OR_RETURN(ValueId a, m.in(0));
    RLX_ASSIGN_OR_RETURN(ValueId b, m.in(1));
    if (m.o().dtype(a) != m.o().dtype(b))
      return m.fail(ErrorCode::dtype_error, "inputs have different data types (", dtype_name(m.o().dtype(a)), " and ",
                    dtype_name(m.o().dtype(b)), ")");
    return m.out(0, m.o().binary(op, a, b));
  };
}

// f(x) written with the OpBuilder; attrs read inside.
using Body = std::function<ValueId(Importer&, OpBuilder&, ValueId)>;
MapFn unary_body(Body f) {
  return [f](Importer& m) -> Status {
    RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
    ValueId y = f(m, m.o(), x);
    return m.out(0, y);
  };
}

ValueId k(OpBuilder& o, double v, ValueId like) { return o.scalar_like(v, like); }

MapFn variadic(Op op, bool mean) {
  return [op, mean](Importer& m) -> Status {
    if (m.num_inputs() < 1) return m.fail(ErrorCode::format_error, "needs at least one input");
    RLX_ASSIGN_OR_RETURN(ValueId acc, m.in(0));
    for (int i = 1; i < m.num_inputs(); ++i) {
      RLX_ASSIGN_OR_RETURN(ValueId b, m.in(i));
      acc = m.o().binary(op, acc, b);
    }
    if (mean) acc = m.o().div(acc, m.o().scalar_like(m.num_inputs(), acc));
    return m.out(0, acc);
  };
}

Status map_cast(Importer& m) {
  (void)m.ai("saturate", 1);  // opset 19: applies to float8 targets only, which rlx has not
  const bool to_string = m.ai("to", 0) == ::onnx::TensorProto::STRING;
  auto to = dtype_from_onnx(static_cast<int32_t>(m.ai("to", 0)));
  if (to_string || (m.is_strings(0) && to)) return map_cast_strings(m, to_string, to ? *to : DType::u8);
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  // ONNX saturates a cast to 4 bits (rlx's cast wraps); QuantizeLinear is the way to make them
  if (!to || is_packed(*to))
    return m.fail(ErrorCode::unsupported, "cast to ", onnx_dtype_name(static_cast<int32_t>(m.ai("to", 0))), " is not supported");
  return m.out(0, m.o().cast(x, *to));
}

Status map_cast_like(Importer& m) {
  (void)m.ai("saturate", 1);  // as Cast's
  if (m.is_strings(1)) {
    m.ignore_input(1);  // only its type matters
    return map_cast_strings(m, true, DType::u8);
  }
  if (m.is_strings(0)) return map_cast_strings(m, false, m.type(1).dtype);
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  if (is_packed(m.type(1).dtype)) return m.fail(ErrorCode::unsupported, "cast to ", dtype_name(m.type(1).dtype), " is not supported");
  return m.out(0, m.o().cast(x, m.type(1).dtype));
}

Status map_clip(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  OpBuilder& o = m.o();
  ValueId lo = kNoValue, hi = kNoValue;
  if (m.opset < 11) {
    if (m.has_attr("min")) lo = o.scalar_like(m.af("min", 0), x);
    if (m.has_attr("max")) hi = o.scalar_like(m.af("max", 0), x);
  } else {
    if (m.has(1)) { RLX_ASSIGN_OR_RETURN(lo, m.in(1)); }
    if (m.has(2)) { RLX_ASSIGN_OR_RETURN(hi, m.in(2)); }
  }
  ValueId y = x;
  if (lo != kNoValue) y = o.max(y, lo);
  if (hi != kNoValue) y = o.min(y, hi);
  if (y == x) y = o.reshape(x, std::vector<int64_t>(o.rank(x), 0));
  return m.out(0, y);
}

Status map_pow(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId a, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId b, m.in(1));
  OpBuilder& o = m.o();
  DType dt = o.dtype(a);
  if (is_int(dt)) {
    // integer power through f64 (exact for the results that fit)
    ValueId r = o.pow(o.cast(a, DType::f64), o.cast(b, DType::f64));
    return m.out(0, o.cast(o.op(Op::Round, {r}), dt));
  }
  return m.out(0, o.pow(a, o.cast(b, dt)));
}

Status map_div(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId a, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId b, m.in(1));
  if (m.o().dtype(a) != m.o().dtype(b)) return m.fail(ErrorCode::dtype_error, "inputs have different data types");
  return m.out(0, m.o().div(a, b));
}

Status map_mod(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId a, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId b, m.in(1));
  return m.out(0, m.o().op(Op::Mod, {a, b}, Attrs{{"fmod", m.ai("fmod", 0)}}));
}

Status map_where(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId c, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId a, m.in(1));
  RLX_ASSIGN_OR_RETURN(ValueId b, m.in(2));
  return m.out(0, m.o().where(c, a, b));
}

Status map_not_compare(Importer& m, Op op) {
  RLX_ASSIGN_OR_RETURN(ValueId a, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId b, m.in(1));
  return m.out(0, m.o().binary(op, a, b));
}

Status map_isinf(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  return m.out(0, m.o().op(Op::IsInf, {x},
                           Attrs{{"detect_positive", m.ai("detect_positive", 1)}, {"detect_negative", m.ai("detect_negative", 1)}}));
}

Status map_prelu(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId s, m.in(1));
  OpBuilder& o = m.o();
  ValueId zero = k(o, 0, x);
  return m.out(0, o.where(o.binary(Op::Less, x, zero), o.mul(x, s), x));
}

Status map_identity(Importer& m) {
  RLX_ASSIGN_OR_RETURN(OValue v, m.input_value(0));
  if (v.seq || v.none || v.strs) return m.out_value(0, v);  // a sequence, empty optional or string tensor passes through
  if (m.is_konst(0)) {
    RLX_ASSIGN_OR_RETURN(Tensor t, m.konst(0));
    return m.out_const(0, t);
  }
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  return m.out(0, m.o().reshape(x, std::vector<int64_t>(m.o().rank(x), 0)));
}

Status map_bitshift(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId s, m.in(1));
  OpBuilder& o = m.o();
  DType dt = o.dtype(x);
  if (!is_unsigned_int(dt)) return m.fail(ErrorCode::dtype_error, "BitShift needs unsigned integers");
  std::string dir = m.as("direction", "");
  // x * 2^s or floor(x / 2^s), computed exactly in the integer type
  ValueId p = o.cast(o.op(Op::Round, {o.pow(o.scalar(2, DType::f64), o.cast(s, DType::f64))}), dt);
  if (dir == "LEFT") return m.out(0, o.mul(x, p));
  if (dir == "RIGHT") return m.out(0, o.div(x, p));
  return m.fail(ErrorCode::format_error, "direction must be LEFT or RIGHT");
}

// atan on any real x: reduce to [0, tan(pi/12)] (1/x above 1, then the pi/6 shift) where an
// odd polynomial to x^11 is accurate to ~1e-9; no rlx primitive computes it directly.
ValueId atan_of(OpBuilder& o, ValueId x) {
  const double pi = 3.14159265358979323846, s3 = 1.7320508075688772;
  ValueId t = o.abs(x);
  ValueId big = o.binary(Op::Greater, t, k(o, 1, x));
  ValueId u = o.where(big, o.reciprocal(t), t);
  ValueId mid = o.binary(Op::Greater, u, k(o, 0.2679491924311227, x));
  ValueId z = o.where(mid, o.div(o.sub(o.mul(u, k(o, s3, x)), k(o, 1, x)), o.add(u, k(o, s3, x))), u);
  ValueId z2 = o.mul(z, z);
  ValueId p = k(o, -1.0 / 11, x);
  for (double c : {1.0 / 9, -1.0 / 7, 1.0 / 5, -1.0 / 3, 1.0}) p = o.add(o.mul(p, z2), k(o, c, x));
  ValueId a = o.mul(p, z);
  a = o.where(mid, o.add(a, k(o, pi / 6, x)), a);
  a = o.where(big, o.sub(k(o, pi / 2, x), a), a);
  return o.mul(o.op(Op::Sign, {x}), a);
}

ValueId asin_of(OpBuilder& o, ValueId x) {
  return atan_of(o, o.div(x, o.sqrt(o.sub(k(o, 1, x), o.mul(x, x)))));
}

}  // namespace

void register_elementwise_ops(OpTable& t) {
  for (const UnaryMathOp& row : unary_math_ops())  // rlx/unary_math.h: the one-to-one imports
    if (row.onnx) t[row.onnx] = {unary(row.op)};
  t["Abs"] = {unary(Op::Abs)};
  t["Neg"] = {unary(Op::Neg)};
  t["Sign"] = {unary(Op::Sign)};
  t["Not"] = {unary(Op::Not)};
  t["IsNaN"] = {unary(Op::IsNan)};
  t["Relu"] = {unary(Op::Relu)};
  t["IsInf"] = {map_isinf};
  t["Identity"] = {map_identity};
  t["Tan"] = {unary_body([](Importer&, OpBuilder& o, ValueId x) { return o.div(o.op(Op::Sin, {x}), o.op(Op::Cos, {x})); })};
  t["Atan"] = {unary_body([](Importer&, OpBuilder& o, ValueId x) { return atan_of(o, x); })};
  t["Asin"] = {unary_body([](Importer&, OpBuilder& o, ValueId x) { return asin_of(o, x); })};
  t["Acos"] = {unary_body([](Importer&, OpBuilder& o, ValueId x) {
    return o.sub(k(o, 1.57079632679489661923, x), asin_of(o, x));
  })};
  t["Sinh"] = {unary_body([](Importer&, OpBuilder& o, ValueId x) {
    return o.mul(o.sub(o.exp(x), o.exp(o.neg(x))), k(o, 0.5, x));
  })};
  t["Cosh"] = {unary_body([](Importer&, OpBuilder& o, ValueId x) {
    return o.mul(o.add(o.exp(x), o.exp(o.neg(x))), k(o, 0.5, x));
  })};
  t["Asinh"] = {unary_body([](Importer&, OpBuilder& o, ValueId x) {
    return o.log(o.add(x, o.sqrt(o.add(o.mul(x, x), k(o, 1, x)))));
  })};
  t["Acosh"] = {unary_body([](Importer&, OpBuilder& o, ValueId x) {
    return o.log(o.add(x, o.sqrt(o.sub(o.mul(x, x), k(o, 1, x)))));
  })};
  t["Atanh"] = {unary_body([](Importer&, OpBuilder& o, ValueId x) {
    return o.mul(o.log(o.div(o.add(k(o, 1, x), x), o.sub(k(o, 1, x), x))), k(o, 0.5, x));
  })};
  t["Softplus"] = {unary_body([](Importer&, OpBuilder& o, ValueId x) { return o.log(o.add(o.exp(x), k(o, 1, x))); })};
  t["Softsign"] = {unary_body([](Importer&, OpBuilder& o, ValueId x) { return o.div(x, o.add(o.abs(x), k(o, 1, x))); })};
  t["Elu"] = {unary_body([](Importer& m, OpBuilder& o, ValueId x) {
    double a = m.af("alpha", 1.0);
    return o.where(o.binary(Op::Less, x, k(o, 0, x)), o.mul(k(o, a, x), o.sub(o.exp(x), k(o, 1, x))), x);
  })};
  t["Celu"] = {unary_body([](Importer& m, OpBuilder& o, ValueId x) {
    double a = m.af("alpha", 1.0);
    ValueId neg = o.mul(k(o, a, x), o.sub(o.exp(o.div(x, k(o, a, x))), k(o, 1, x)));
    return o.add(o.max(x, k(o, 0, x)), o.min(k(o, 0, x), neg));
  })};
  t["Selu"] = {unary_body([](Importer& m, OpBuilder& o, ValueId x) {
    double a = m.af("alpha", 1.67326319217681884765625), g = m.af("gamma", 1.05070102214813232421875);
    ValueId neg = o.sub(o.mul(k(o, a, x), o.exp(x)), k(o, a, x));
    return o.mul(k(o, g, x), o.where(o.binary(Op::LessEqual, x, k(o, 0, x)), neg, x));
  })};
  t["LeakyRelu"] = {unary_body([](Importer& m, OpBuilder& o, ValueId x) {
    return o.where(o.binary(Op::Less, x, k(o, 0, x)), o.mul(x, k(o, m.af("alpha", 0.01), x)), x);
  })};
  t["ThresholdedRelu"] = {unary_body([](Importer& m, OpBuilder& o, ValueId x) {
    return o.where(o.binary(Op::Greater, x, k(o, m.af("alpha", 1.0), x)), x, k(o, 0, x));
  })};
  t["HardSigmoid"] = {unary_body([](Importer& m, OpBuilder& o, ValueId x) {
    ValueId y = o.add(o.mul(x, k(o, m.af("alpha", 0.2), x)), k(o, m.af("beta", 0.5), x));
    return o.min(o.max(y, k(o, 0, x)), k(o, 1, x));
  })};
  t["HardSwish"] = {unary_body([](Importer&, OpBuilder& o, ValueId x) {
    ValueId y = o.add(o.mul(x, k(o, 1.0 / 6, x)), k(o, 0.5, x));
    return o.mul(x, o.min(o.max(y, k(o, 0, x)), k(o, 1, x)));
  })};
  t["Shrink"] = {unary_body([](Importer& m, OpBuilder& o, ValueId x) {
    double l = m.af("lambd", 0.5), b = m.af("bias", 0.0);
    ValueId lo = o.binary(Op::Less, x, k(o, -l, x)), hi = o.binary(Op::Greater, x, k(o, l, x));
    return o.where(lo, o.add(x, k(o, b, x)), o.where(hi, o.sub(x, k(o, b, x)), k(o, 0, x)));
  })};
  t["Mish"] = {unary_body([](Importer&, OpBuilder& o, ValueId x) {
    return o.mul(x, o.tanh(o.log(o.add(o.exp(x), k(o, 1, x)))));
  })};
  t["Gelu"] = {[](Importer& m) -> Status {  // opset 20
    RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
    const std::string approximate = m.as("approximate", "none");
    if (approximate != "none" && approximate != "tanh")
      return m.fail(ErrorCode::invalid_argument, "approximate must be none or tanh, got '", approximate, "'");
    return m.out(0, m.o().gelu(x, approximate));
  }};
  t["PRelu"] = {map_prelu};
  t["Add"] = {binary(Op::Add)};
  t["Sub"] = {binary(Op::Sub)};
  t["Mul"] = {binary(Op::Mul)};
  t["Div"] = {map_div};
  t["Pow"] = {map_pow};
  t["Mod"] = {map_mod};
  t["BitShift"] = {map_bitshift};
  t["Equal"] = {[](Importer& m) { return map_not_compare(m, Op::Equal); }};
  t["Less"] = {[](Importer& m) { return map_not_compare(m, Op::Less); }};
  t["LessOrEqual"] = {[](Importer& m) { return map_not_compare(m, Op::LessEqual); }};
  t["Greater"] = {[](Importer& m) { return map_not_compare(m, Op::Greater); }};
  t["GreaterOrEqual"] = {[](Importer& m) { return map_not_compare(m, Op::GreaterEqual); }};
  t["And"] = {binary(Op::And)};
  t["Or"] = {binary(Op::Or)};
  t["Xor"] = {binary(Op::Xor)};
  // opset 18: rlx's and/or/xor/not are bitwise on integers
  t["BitwiseAnd"] = {binary(Op::And)};
  t["BitwiseOr"] = {binary(Op::Or)};
  t["BitwiseXor"] = {binary(Op::Xor)};
  t["BitwiseNot"] = {unary(Op::Not)};
  t["Where"] = {map_where};
  t["Max"] = {variadic(Op::Max, false)};
  t["Min"] = {variadic(Op::Min, false)};
  t["Sum"] = {variadic(Op::Add, false)};
  t["Mean"] = {variadic(Op::Add, true)};
  t["Cast"] = {map_cast};
  t["CastLike"] = {map_cast_like};
  t["Clip"] = {map_clip};
}

}  // namespace rlx::onnx_import
