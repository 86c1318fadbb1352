// Normalization family: softmax, log-softmax, layer norm and RMS norm as reductions plus
// elementwise ops. Narrow float types compute in f32 and round once at the end.
#include "rules.h"

namespace rlx::dispatch {
namespace {

bool narrow(DType t) { return t == DType::f16 || t == DType::bf16; }

// Input 0 widened to f32 when narrow.
ValueId widened(OpBuilder& o, const RuleNode& n, int i) {
  ValueId v = n.inputs[i];
  return narrow(n.input_types[i].dtype) ? o.cast(v, DType::f32) : v;
}

Status finish(OpBuilder& o, const RuleNode& n, ValueId y, std::vector<ValueId>& outputs) {
  return single(o, o.cast(y, n.output_types[0].dtype), outputs);
}

int64_t axis_of(const RuleNode& n) {
  int64_t a = n.attrs.i("axis", -1);
  return a < 0 ? a + n.input_types[0].rank() : a;
}

Status softmax(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  ValueId x = widened(o, n, 0);
  const int64_t ax = axis_of(n);
  ValueId e = o.exp(o.sub(x, o.reduce_max(x, {ax}, true)));
  return finish(o, n, o.div(e, o.reduce_sum(e, {ax}, true)), outputs);
}

Status log_softmax(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  ValueId x = widened(o, n, 0);
  const int64_t ax = axis_of(n);
  ValueId d = o.sub(x, o.reduce_max(x, {ax}, true));
  return finish(o, n, o.sub(d, o.log(o.reduce_sum(o.exp(d), {ax}, true))), outputs);
}

// Axes [axis, rank) and their element count.
std::pair<std::vector<int64_t>, double> norm_axes(const RuleNode& n) {
  const TensorType& x = n.input_types[0];
  std::vector<int64_t> axes;
  double count = 1;
  for (int64_t i = axis_of(n); i < x.rank(); ++i) {
    axes.push_back(i);
    count *= static_cast<double>(x.shape[i].size());
  }
  return {axes, count};
}

Status layer_norm(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  ValueId x = widened(o, n, 0);
  auto [axes, count] = norm_axes(n);
  ValueId inv_n = o.scalar_like(1.0 / count, x);
  ValueId mean = o.mul(o.reduce_sum(x, axes, true), inv_n);
  ValueId d = o.sub(x, mean);
  ValueId var = o.mul(o.reduce_sum(o.mul(d, d), axes, true), inv_n);
  ValueId y = o.mul(d, o.rsqrt(o.add(var, o.scalar_like(n.attrs.f("epsilon", 1e-5), x))));
  if (n.inputs.size() > 1) y = o.mul(y, widened(o, n, 1));
  if (n.inputs.size() > 2) y = o.add(y, widened(o, n, 2));
  return finish(o, n, y, outputs);
}

Status rms_norm(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  ValueId x = widened(o, n, 0);
  auto [axes, count] = norm_axes(n);
  ValueId ms = o.mul(o.reduce_sum(o.mul(x, x), axes, true), o.scalar_like(1.0 / count, x));
  ValueId y = o.mul(x, o.rsqrt(o.add(ms, o.scalar_like(n.attrs.f("epsilon", 1e-6), x))));
  if (n.inputs.size() > 1) y = o.mul(y, widened(o, n, 1));
  return finish(o, n, y, outputs);
}

}  // namespace

void register_normalization_rules(std::vector<OpRules>& t) {
  t[static_cast<size_t>(Op::Softmax)].decompose = softmax;
  t[static_cast<size_t>(Op::LogSoftmax)].decompose = log_softmax;
  t[static_cast<size_t>(Op::LayerNorm)].decompose = layer_norm;
  t[static_cast<size_t>(Op::RmsNorm)].decompose = rms_norm;
}

}  // namespace rlx::dispatch
