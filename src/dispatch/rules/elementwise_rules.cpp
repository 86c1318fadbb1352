// Elementwise family: broadcasting made explicit (canonical form), and activations rewritten
// into elementwise graph ops.
#include <cmath>

#include "rules.h"

namespace rlx::dispatch {
namespace {

// Graph-level binary/compare/logical/ternary ops broadcast; the strict form expands every
// operand to the output shape first.
Status broadcast_operands(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  auto out = static_sizes(n.output_types[0].shape, "output");
  if (!out) return out.status();
  std::vector<ValueId> ins;
  for (ValueId v : n.inputs) ins.push_back(o.broadcast_to(v, *out));
  return single(o, o.op(n.op, ins, n.attrs), outputs);
}

Status relu(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  ValueId x = n.inputs[0];
  return single(o, o.max(x, o.scalar_like(0.0, x)), outputs);
}

Status leaky_relu(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  ValueId x = n.inputs[0];
  ValueId scaled = o.mul(x, o.scalar_like(n.attrs.f("alpha", 0.01), x));
  ValueId neg = o.op(Op::Less, {x, o.scalar_like(0.0, x)});
  return single(o, o.where(neg, scaled, x), outputs);
}

Status gelu(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  ValueId x = n.inputs[0];
  auto c = [&](double v) { return o.scalar_like(v, x); };
  ValueId inner;
  if (n.attrs.s("approximate", "none") == "tanh") {
    // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    ValueId x3 = o.mul(o.mul(x, x), x);
    ValueId arg = o.mul(c(std::sqrt(2.0 / M_PI)), o.add(x, o.mul(c(0.044715), x3)));
    inner = o.tanh(arg);
  } else {
    // 0.5 x (1 + erf(x / sqrt 2))
    inner = o.erf(o.mul(x, c(M_SQRT1_2)));
  }
  return single(o, o.mul(o.mul(c(0.5), x), o.add(c(1.0), inner)), outputs);
}

Status silu(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  ValueId x = n.inputs[0];
  return single(o, o.mul(x, o.sigmoid(x)), outputs);
}

Status softplus(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  // max(x, 0) + log(1 + exp(-|x|)): never overflows
  ValueId x = n.inputs[0];
  ValueId tail = o.log(o.add(o.scalar_like(1.0, x), o.exp(o.neg(o.abs(x)))));
  return single(o, o.add(o.max(x, o.scalar_like(0.0, x)), tail), outputs);
}

}  // namespace

void register_elementwise_rules(std::vector<OpRules>& t) {
  for (int i = 0; i < kNumOps; ++i) {
    Op op = static_cast<Op>(i);
    OpFamily f = op_info(op).family;
    if (f == OpFamily::binary || f == OpFamily::compare || f == OpFamily::logical || f == OpFamily::ternary)
      t[i].decompose = broadcast_operands;
  }
  t[static_cast<size_t>(Op::Relu)].rewrite = relu;
  t[static_cast<size_t>(Op::LeakyRelu)].rewrite = leaky_relu;
  t[static_cast<size_t>(Op::Gelu)].rewrite = gelu;
  t[static_cast<size_t>(Op::Silu)].rewrite = silu;
  t[static_cast<size_t>(Op::Softplus)].rewrite = softplus;
}

}  // namespace rlx::dispatch
