#include "rlx/unary_math.h"

#include <cmath>

namespace rlx {
namespace {

// Round half to even (ONNX Round, numpy.round), keeping the sign of zero.
double round_half_even(double x) {
  if (!std::isfinite(x)) return x;
  const double fl = std::floor(x);
  const double diff = x - fl;
  double r;
  if (diff > 0.5) {
    r = fl + 1.0;
  } else if (diff < 0.5) {
    r = fl;
  } else {
    r = std::fmod(fl, 2.0) == 0.0 ? fl : fl + 1.0;
  }
  return r == 0.0 ? std::copysign(0.0, x) : r;
}

double exp_(double x) { return std::exp(x); }
double log_(double x) { return std::log(x); }
double sqrt_(double x) { return std::sqrt(x); }
double rsqrt_(double x) { return 1.0 / std::sqrt(x); }
double reciprocal_(double x) { return 1.0 / x; }
double tanh_(double x) { return std::tanh(x); }
double sigmoid_(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double erf_(double x) { return std::erf(x); }
double sin_(double x) { return std::sin(x); }
double cos_(double x) { return std::cos(x); }
double floor_(double x) { return std::floor(x); }
double ceil_(double x) { return std::ceil(x); }

ValueId d_exp(OpBuilder& o, ValueId g, ValueId, ValueId y, DType) { return o.mul(g, y); }
ValueId d_log(OpBuilder& o, ValueId g, ValueId x, ValueId, DType) { return o.div(g, x); }
ValueId d_sqrt(OpBuilder& o, ValueId g, ValueId, ValueId y, DType t) { return o.div(g, o.mul(y, o.scalar(2.0, t))); }
ValueId d_rsqrt(OpBuilder& o, ValueId g, ValueId, ValueId y, DType t) {
  return o.mul(g, o.mul(o.scalar(-0.5, t), o.mul(y, o.mul(y, y))));
}
ValueId d_reciprocal(OpBuilder& o, ValueId g, ValueId, ValueId y, DType) { return o.neg(o.mul(g, o.mul(y, y))); }
ValueId d_tanh(OpBuilder& o, ValueId g, ValueId, ValueId y, DType t) {
  return o.mul(g, o.sub(o.scalar(1.0, t), o.mul(y, y)));
}
ValueId d_sigmoid(OpBuilder& o, ValueId g, ValueId, ValueId y, DType t) {
  return o.mul(g, o.mul(y, o.sub(o.scalar(1.0, t), y)));
}
ValueId d_erf(OpBuilder& o, ValueId g, ValueId x, ValueId, DType t) {
  return o.mul(g, o.mul(o.scalar(2.0 / std::sqrt(M_PI), t), o.exp(o.neg(o.mul(x, x)))));
}
ValueId d_sin(OpBuilder& o, ValueId g, ValueId x, ValueId, DType) { return o.mul(g, o.op(Op::Cos, {x})); }
ValueId d_cos(OpBuilder& o, ValueId g, ValueId x, ValueId, DType) { return o.neg(o.mul(g, o.op(Op::Sin, {x}))); }

// op, reference, f32 call, f64 call, GLSL f64, transcendental, ONNX, derivative
constexpr UnaryMathOp kRows[] = {
    {Op::Exp, exp_, "rlx_exp_f32(%)", "rlx_exp_f64(%)", true, true, "Exp", d_exp},
    {Op::Log, log_, "rlx_log_f32(%)", "rlx_log_f64(%)", true, true, "Log", d_log},
    {Op::Sqrt, sqrt_, "rlx_sqrt_f32(%)", "rlx_sqrt_f64(%)", true, false, "Sqrt", d_sqrt},
    {Op::Rsqrt, rsqrt_, "rlx_rsqrt_f32(%)", "rlx_rsqrt_f64(%)", true, false, nullptr, d_rsqrt},
    {Op::Reciprocal, reciprocal_, "(1.0f / %)", "(1.0 / %)", true, false, "Reciprocal", d_reciprocal},
    {Op::Tanh, tanh_, "rlx_tanh_f32(%)", "rlx_tanh_f64(%)", true, true, "Tanh", d_tanh},
    {Op::Sigmoid, sigmoid_, "rlx_sigmoid_f32(%)", "rlx_sigmoid_f64(%)", true, true, "Sigmoid", d_sigmoid},
    {Op::Erf, erf_, "rlx_erf_f32(%)", "rlx_erf_f64(%)", false, true, "Erf", d_erf},
    {Op::Sin, sin_, "rlx_sin_f32(%)", "rlx_sin_f64(%)", false, true, "Sin", d_sin},
    {Op::Cos, cos_, "rlx_cos_f32(%)", "rlx_cos_f64(%)", false, true, "Cos", d_cos},
    {Op::Floor, floor_, "floorf(%)", "floor(%)", true, false, "Floor", nullptr},
    {Op::Ceil, ceil_, "ceilf(%)", "ceil(%)", true, false, "Ceil", nullptr},
    {Op::Round, round_half_even, "rlx_round_f32(%)", "rlx_round_f64(%)", true, false, "Round", nullptr},
};

}  // namespace

std::span<const UnaryMathOp> unary_math_ops() { return kRows; }

const UnaryMathOp* unary_math(Op op) {
  for (const UnaryMathOp& r : kRows)
    if (r.op == op) return &r;
  return nullptr;
}

std::string unary_math_call(const UnaryMathOp& row, DType t, const std::string& operand) {
  std::string s = t == DType::f64 ? row.f64_call : row.f32_call;
  const size_t at = s.find('%');
  return s.replace(at, 1, operand);
}

}  // namespace rlx
