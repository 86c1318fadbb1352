// Quantized weights: a device without a native quantized matmul runs it as dequantize then
// matmul (dequantize itself has no primitive decomposition: its bit unpacking is native).
// int8_matmul and fake_quantize decompose into primitives.
#include "rules.h"

namespace rlx::dispatch {
namespace {

Status qmatmul(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  const Shape& xs = n.input_types[0].shape;
  const int64_t k = xs.back().size();
  ValueId w = o.op(Op::Dequantize, {n.inputs[1]}, Attrs{{"format", n.attrs.s("format")}, {"cols", k}});
  if (n.input_types[0].dtype != DType::f32) w = o.cast(w, n.input_types[0].dtype);
  return single(o, o.matmul(n.inputs[0], o.transpose(w, {1, 0})), outputs);
}

// int8_matmul in primitives, in the order the CPU kernel computes it: the scale of x (per
// token max|x| / 127, floored at 1e-30 so an all-zero row gives zeros, or the x_scale
// attribute), q = clamp(round_half_even(x / scale), -127, 127), the integer sums (exact in the
// reference's f64 accumulation), then * scale * w_scale + bias.
Status int8_matmul(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  ValueId x = n.inputs[0];
  const int64_t r = static_cast<int64_t>(n.input_types[0].rank());
  ValueId s, q;
  if (n.attrs.has("x_scale")) {
    s = o.scalar(static_cast<float>(n.attrs.f("x_scale")), DType::f32);
    q = o.op(Op::Round, {o.div(x, s)});
    q = o.min(o.max(q, o.scalar(-127, DType::f32)), o.scalar(127, DType::f32));
  } else {
    const Int8Rows rows = int8_rows(o, x, r);
    q = rows.quants, s = rows.scale;
  }
  ValueId acc = o.dot(q, o.cast(n.inputs[1], DType::f32), {}, {}, {r - 1}, {1});
  ValueId y = o.mul(o.mul(acc, s), n.inputs[2]);
  if (n.inputs.size() == 4) y = o.add(y, n.inputs[3]);
  return single(o, y, outputs);
}

// fake_quantize in primitives: q = clamp(round_half_even(x / scale) + zero_point, qmin, qmax),
// y = (q - zero_point) * scale, with a per-channel scale reshaped to broadcast along its axis.
// x / scale is a division (not a product by 1 / scale) so the rounding matches the int8 targets'
// quantize_input; every step is one correctly rounded f32 operation, so each device agrees with
// the reference bit for bit.
Status fake_quantize(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  const TensorType& xt = n.input_types[0];
  ValueId s = n.inputs[1], zp = n.inputs[2];
  if (n.attrs.has("axis")) {
    const int64_t r = xt.rank();
    int64_t axis = n.attrs.i("axis");
    if (axis < 0) axis += r;
    std::vector<int64_t> shape(static_cast<size_t>(r), 1);
    shape[static_cast<size_t>(axis)] = -1;
    s = o.reshape(s, shape);
    zp = o.reshape(zp, shape);
  }
  const double qmin = n.attrs.has("qmin") ? static_cast<double>(n.attrs.i("qmin")) : -128.0;
  const double qmax = n.attrs.has("qmax") ? static_cast<double>(n.attrs.i("qmax")) : 127.0;
  ValueId q = o.add(o.op(Op::Round, {o.div(n.inputs[0], s)}), zp);
  q = o.min(o.max(q, o.scalar(qmin, xt.dtype)), o.scalar(qmax, xt.dtype));
  return single(o, o.mul(o.sub(q, zp), s), outputs);
}

}  // namespace

void register_quant_rules(std::vector<OpRules>& t) {
  t[static_cast<size_t>(Op::QMatMul)].rewrite = qmatmul;
  t[static_cast<size_t>(Op::Int8MatMul)].decompose = int8_matmul;
  t[static_cast<size_t>(Op::FakeQuantize)].decompose = fake_quantize;
}

}  // namespace rlx::dispatch
