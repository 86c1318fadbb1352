// Vector-Jacobian rules of reductions (sum, mean, max, min, prod) and normalizations
// (softmax, log-softmax, layer norm, RMS norm).
#include "vjp_internal.h"

namespace rlx::train::vjp {
namespace {

struct Reduction {
  std::vector<int64_t> axes;
  Sizes in, keep;
};

Reduction reduction_of(Ctx& c) {
  Reduction r;
  r.in = sizes_of(c.in_types[0]);
  r.axes = norm_axes(c.attrs().ints("axes"), c.rank());
  r.keep = keepdims_shape(r.in, r.axes);
  return r;
}

Status reduce(Ctx& c, std::vector<ValueId>& out) {
  OpBuilder& o = c.o;
  const Reduction r = reduction_of(c);
  const ValueId x = c.in(0);
  ValueId gk = o.reshape(c.g(), r.keep);  // the gradient with the reduced axes kept as 1
  switch (c.node.op) {
    case Op::ReduceSum: out[0] = o.broadcast_to(gk, r.in); break;
    case Op::ReduceMean: out[0] = o.broadcast_to(o.mul(gk, c.c(1.0 / count_over(r.in, r.axes))), r.in); break;
    case Op::ReduceMax:
    case Op::ReduceMin: {
      // the gradient goes to the extreme elements, split evenly between ties
      ValueId yk = o.reshape(c.out(), r.keep);
      ValueId hit = o.op(Op::Equal, {x, yk});
      ValueId count = o.reduce_sum(o.cast(hit, c.dtype()), r.axes, true);
      out[0] = o.where(hit, o.div(gk, count), c.c(0.0));
      break;
    }
    case Op::ReduceProd: {
      // d prod / d x_i = product of the others, exact with zeros: with no zero it is
      // prod / x_i; with one zero only that element gets the product of the rest; with two
      // or more every derivative is 0
      ValueId is0 = o.op(Op::Equal, {x, c.c(0.0)});
      ValueId zeros_count = o.reduce_sum(o.cast(is0, c.dtype()), r.axes, true);
      ValueId nz_prod = o.reduce(Op::ReduceProd, o.where(is0, c.c(1.0), x), r.axes, true);
      ValueId at_zero = o.where(o.op(Op::Equal, {zeros_count, c.c(1.0)}), nz_prod, c.c(0.0));
      ValueId elsewhere = o.where(o.op(Op::Equal, {zeros_count, c.c(0.0)}), o.div(nz_prod, x), c.c(0.0));
      out[0] = o.mul(gk, o.where(is0, at_zero, elsewhere));
      break;
    }
    default: return error(ErrorCode::internal, "no reduction rule for ", op_name(c.node.op));
  }
  return o.status();
}

int64_t axis_of(Ctx& c) {
  int64_t a = c.attrs().i("axis", -1);
  return a < 0 ? a + c.rank() : a;
}

Status softmax(Ctx& c, std::vector<ValueId>& out) {
  OpBuilder& o = c.o;
  const int64_t ax = axis_of(c);
  const ValueId g = c.g(), y = c.out();
  if (c.node.op == Op::Softmax) {
    // y (g - sum(g y))
    out[0] = o.mul(y, o.sub(g, o.reduce_sum(o.mul(g, y), {ax}, true)));
  } else {
    // g - softmax(x) sum(g), with softmax(x) = exp(log_softmax(x))
    out[0] = o.sub(g, o.mul(o.exp(y), o.reduce_sum(g, {ax}, true)));
  }
  return o.status();
}

// Layer norm and RMS norm over axes [axis, rank):
//   xhat = (x - mean) rstd (layer norm) or x rstd (RMS norm), y = xhat * scale + bias
//   dx = rstd (gs - mean(gs) - xhat mean(gs xhat)) with gs = g * scale (RMS norm: no mean(gs))
Status norm(Ctx& c, std::vector<ValueId>& out) {
  OpBuilder& o = c.o;
  const bool layer = c.node.op == Op::LayerNorm;
  const Sizes in = sizes_of(c.in_types[0]);
  std::vector<int64_t> axes;
  for (int64_t i = axis_of(c); i < c.rank(); ++i) axes.push_back(i);
  const ValueId x = c.in(0), g = c.g();
  ValueId inv_n = c.c(1.0 / count_over(in, axes));
  auto mean = [&](ValueId v) { return o.mul(o.reduce_sum(v, axes, true), inv_n); };
  const double eps = c.attrs().f("epsilon", layer ? 1e-5 : 1e-6);
  ValueId centered = layer ? o.sub(x, mean(x)) : x;
  ValueId rstd = o.rsqrt(o.add(mean(o.mul(centered, centered)), c.c(eps)));
  ValueId xhat = o.mul(centered, rstd);
  const bool has_scale = c.node.inputs.size() > 1;
  ValueId gs = has_scale ? o.mul(g, c.in(1)) : g;
  if (c.need(0)) {
    ValueId inner = o.sub(gs, o.mul(xhat, mean(o.mul(gs, xhat))));
    if (layer) inner = o.sub(inner, mean(gs));
    out[0] = o.mul(rstd, inner);
  }
  if (has_scale && c.need(1)) out[1] = sum_to(o, o.mul(g, xhat), sizes_of(c.in_types[1]));
  if (layer && c.node.inputs.size() > 2 && c.need(2)) out[2] = sum_to(o, g, sizes_of(c.in_types[2]));
  return o.status();
}

}  // namespace

void register_reduce_vjps(std::vector<Rule>& t) {
  for (Op op : {Op::ReduceSum, Op::ReduceMean, Op::ReduceMax, Op::ReduceMin, Op::ReduceProd})
    t[static_cast<size_t>(op)] = reduce;
  t[static_cast<size_t>(Op::Softmax)] = softmax;
  t[static_cast<size_t>(Op::LogSoftmax)] = softmax;
  t[static_cast<size_t>(Op::LayerNorm)] = norm;
  t[static_cast<size_t>(Op::RmsNorm)] = norm;
}

}  // namespace rlx::train::vjp
