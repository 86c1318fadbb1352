// Vector-Jacobian rule of fake_quantize: the straight-through estimator. Rounding has zero
// derivative almost everywhere, which would stop training; quantization-aware training
// instead passes the gradient through unchanged where the value was representable, i.e.
// where round(x / scale) + zero_point lies inside [qmin, qmax], and zeroes it where the
// value was clipped. scale and zero_point get no gradient: the trainer tracks them (a running
// min/max of activations, max|w| of weights; src/train/qat.h), it does not learn them.
#include "vjp_internal.h"

namespace rlx::train::vjp {
namespace {

Status fake_quantize(Ctx& c, std::vector<ValueId>& out) {
  if (!c.need(0)) return Status::ok();
  OpBuilder& o = c.o;
  ValueId s = c.in(1), zp = c.in(2);
  if (c.attrs().has("axis")) {
    int64_t axis = c.attrs().i("axis");
    if (axis < 0) axis += c.rank(0);
    std::vector<int64_t> shape(static_cast<size_t>(c.rank(0)), 1);
    shape[static_cast<size_t>(axis)] = -1;
    s = o.reshape(s, shape);
    zp = o.reshape(zp, shape);
  }
  const double qmin = c.attrs().has("qmin") ? static_cast<double>(c.attrs().i("qmin")) : -128.0;
  const double qmax = c.attrs().has("qmax") ? static_cast<double>(c.attrs().i("qmax")) : 127.0;
  // the same x / scale rounding as the forward (quant_rules.cpp), so the mask is exact
  const ValueId q = o.add(o.op(Op::Round, {o.div(c.in(0), s)}), zp);
  const ValueId inside = o.op(Op::And, {o.op(Op::GreaterEqual, {q, c.c(qmin)}), o.op(Op::LessEqual, {q, c.c(qmax)})});
  out[0] = o.where(inside, c.g(), c.c(0.0));
  return o.status();
}

}  // namespace

void register_quant_vjps(std::vector<Rule>& t) { t[static_cast<size_t>(Op::FakeQuantize)] = fake_quantize; }

}  // namespace rlx::train::vjp
