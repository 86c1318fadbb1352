// Quantized weights: a device without a native quantized matmul runs it as dequantize then
// matmul (dequantize itself has no primitive decomposition: its bit unpacking is native).
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

}  // namespace

void register_quant_rules(std::vector<OpRules>& t) { t[static_cast<size_t>(Op::QMatMul)].rewrite = qmatmul; }

}  // namespace rlx::dispatch
