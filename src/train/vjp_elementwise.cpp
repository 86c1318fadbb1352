// Vector-Jacobian rules of elementwise ops: unary math, activations, binary ops with numpy
// broadcasting (gradients summed back to each operand's shape), where and cast. Rules use
// the forward output where that is cheaper (relu, exp, tanh, sigmoid), so the backward reads
// values the forward kept anyway.
#include <cmath>

#include "vjp_internal.h"
#include "rlx/unary_math.h"

namespace rlx::train::vjp {
namespace {

Status set(Ctx& c, std::vector<ValueId>& out, int i, ValueId v) {
  if (c.need(i)) out[i] = sum_to(c.o, v, sizes_of(c.in_types[i]));
  return c.o.status();
}

Status unary(Ctx& c, std::vector<ValueId>& out) {
  OpBuilder& o = c.o;
  const ValueId g = c.g(), x = c.in(0), y = c.out();
  ValueId r = kNoValue;
  if (const UnaryMathOp* row = unary_math(c.node.op)) {  // rlx/unary_math.h
    // no derivative: piecewise constant, zero almost everywhere (as PyTorch and JAX define them)
    out[0] = row->vjp ? row->vjp(o, g, x, y, c.in_types[0].dtype) : zeros(o, c.dtype(), sizes_of(c.in_types[0]));
    return o.status();
  }
  switch (c.node.op) {
    case Op::Neg: r = o.neg(g); break;
    case Op::Abs: r = o.mul(g, o.op(Op::Sign, {x})); break;
    // piecewise constant: zero almost everywhere (as PyTorch and JAX define them)
    case Op::Sign: r = zeros(o, c.dtype(), sizes_of(c.in_types[0])); break;
    default: return error(ErrorCode::internal, "no unary rule for ", op_name(c.node.op));
  }
  out[0] = r;
  return o.status();
}

Status activation(Ctx& c, std::vector<ValueId>& out) {
  OpBuilder& o = c.o;
  const ValueId g = c.g(), x = c.in(0), y = c.out();
  ValueId r = kNoValue;
  switch (c.node.op) {
    case Op::Relu:
      // y > 0 exactly where x > 0: reading the output lets the forward's pre-activation go
      r = o.where(o.op(Op::Greater, {y, c.c(0.0)}), g, c.c(0.0));
      break;
    case Op::LeakyRelu:
      r = o.where(o.op(Op::Less, {x, c.c(0.0)}), o.mul(g, c.c(c.attrs().f("alpha", 0.01))), g);
      break;
    case Op::Gelu:
      if (c.attrs().s("approximate", "none") == "tanh") {
        const double k = std::sqrt(2.0 / M_PI);
        ValueId x2 = o.mul(x, x);
        ValueId t = o.tanh(o.mul(c.c(k), o.add(x, o.mul(c.c(0.044715), o.mul(x2, x)))));
        ValueId du = o.mul(c.c(k), o.add(c.c(1.0), o.mul(c.c(3.0 * 0.044715), x2)));
        ValueId d = o.add(o.mul(c.c(0.5), o.add(c.c(1.0), t)),
                          o.mul(o.mul(c.c(0.5), x), o.mul(o.sub(c.c(1.0), o.mul(t, t)), du)));
        r = o.mul(g, d);
      } else {
        ValueId cdf = o.mul(c.c(0.5), o.add(c.c(1.0), o.erf(o.mul(x, c.c(M_SQRT1_2)))));
        ValueId pdf = o.mul(c.c(1.0 / std::sqrt(2.0 * M_PI)), o.exp(o.mul(o.mul(x, x), c.c(-0.5))));
        r = o.mul(g, o.add(cdf, o.mul(x, pdf)));
      }
      break;
    case Op::Silu: {
      ValueId s = o.sigmoid(x);
      r = o.mul(g, o.mul(s, o.add(c.c(1.0), o.mul(x, o.sub(c.c(1.0), s)))));
      break;
    }
    case Op::Softplus: r = o.mul(g, o.sigmoid(x)); break;
    default: return error(ErrorCode::internal, "no activation rule for ", op_name(c.node.op));
  }
  out[0] = r;
  return o.status();
}

Status binary(Ctx& c, std::vector<ValueId>& out) {
  OpBuilder& o = c.o;
  const ValueId g = c.g(), a = c.in(0), b = c.in(1), y = c.out();
  auto zero = [&] { return c.c(0.0); };
  switch (c.node.op) {
    case Op::Add:
      RLX_TRY(set(c, out, 0, g));
      return set(c, out, 1, g);
    case Op::Sub:
      RLX_TRY(set(c, out, 0, g));
      return c.need(1) ? set(c, out, 1, o.neg(g)) : Status::ok();
    case Op::Mul:
      if (c.need(0)) RLX_TRY(set(c, out, 0, o.mul(g, b)));
      if (c.need(1)) RLX_TRY(set(c, out, 1, o.mul(g, a)));
      return o.status();
    case Op::Div:
      if (c.need(0)) RLX_TRY(set(c, out, 0, o.div(g, b)));
      if (c.need(1)) RLX_TRY(set(c, out, 1, o.neg(o.div(o.mul(g, y), b))));
      return o.status();
    case Op::Pow:
      if (c.need(0)) RLX_TRY(set(c, out, 0, o.mul(g, o.mul(b, o.pow(a, o.sub(b, c.c(1.0)))))));
      if (c.need(1)) {
        // y log a; 0 where a == 0 (the limit for b > 0), NaN for a < 0 as in PyTorch
        ValueId d = o.where(o.op(Op::Equal, {a, zero()}), zero(), o.mul(y, o.log(a)));
        RLX_TRY(set(c, out, 1, o.mul(g, d)));
      }
      return o.status();
    case Op::Max:
    case Op::Min: {
      // the larger (smaller) operand takes the gradient; ties split it evenly
      const Op wins = c.node.op == Op::Max ? Op::Greater : Op::Less;
      ValueId tie = o.op(Op::Equal, {a, b});
      ValueId half = o.mul(g, c.c(0.5));
      if (c.need(0)) RLX_TRY(set(c, out, 0, o.where(o.op(wins, {a, b}), g, o.where(tie, half, zero()))));
      if (c.need(1)) RLX_TRY(set(c, out, 1, o.where(o.op(wins, {b, a}), g, o.where(tie, half, zero()))));
      return o.status();
    }
    case Op::Mod: {
      // a - q b with q = floor(a / b) (fmod = 0) or trunc(a / b) (fmod = 1)
      if (c.need(0)) RLX_TRY(set(c, out, 0, g));
      if (c.need(1)) {
        ValueId q = o.div(a, b);
        ValueId fl = o.op(Op::Floor, {q});
        if (c.attrs().i("fmod", 0)) fl = o.where(o.op(Op::Less, {q, zero()}), o.op(Op::Ceil, {q}), fl);
        RLX_TRY(set(c, out, 1, o.neg(o.mul(g, fl))));
      }
      return o.status();
    }
    default: break;
  }
  return error(ErrorCode::internal, "no binary rule for ", op_name(c.node.op));
}

Status where(Ctx& c, std::vector<ValueId>& out) {
  OpBuilder& o = c.o;
  const ValueId cond = c.in(0), g = c.g();
  ValueId zero = o.scalar(0.0, c.out_types[0].dtype);
  if (c.need(1)) RLX_TRY(set(c, out, 1, o.where(cond, g, zero)));
  if (c.need(2)) RLX_TRY(set(c, out, 2, o.where(cond, zero, g)));
  return o.status();
}

Status cast(Ctx& c, std::vector<ValueId>& out) {
  out[0] = c.o.cast(c.g(), c.dtype(0));
  return c.o.status();
}

}  // namespace

void register_elementwise_vjps(std::vector<Rule>& t) {
  auto set_rule = [&](Op op, Rule r) { t[static_cast<size_t>(op)] = r; };
  for (Op op : {Op::Neg, Op::Abs, Op::Sign}) set_rule(op, unary);
  for (const UnaryMathOp& row : unary_math_ops()) set_rule(row.op, unary);
  for (Op op : {Op::Relu, Op::LeakyRelu, Op::Gelu, Op::Silu, Op::Softplus}) set_rule(op, activation);
  for (Op op : {Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Pow, Op::Max, Op::Min, Op::Mod}) set_rule(op, binary);
  set_rule(Op::Where, where);
  set_rule(Op::Cast, cast);
}

}  // namespace rlx::train::vjp
