#include "rules.h"

namespace rlx::dispatch {

const OpRules& rules_for(Op op) {
  static const std::vector<OpRules> table = [] {
    std::vector<OpRules> t(kNumOps);
    register_elementwise_rules(t);
    register_reduce_rules(t);
    register_movement_rules(t);
    register_contraction_rules(t);
    register_normalization_rules(t);
    register_conv_rules(t);
    register_attention_rules(t);
    register_quant_rules(t);
    register_linalg_rules(t);
    register_splat_rules(t);
    register_sparse_rules(t);
    register_collective_rules(t);
    register_data_dependent_rules(t);
    return t;
  }();
  return table[static_cast<size_t>(op)];
}

Sizes static_sizes_or_empty(const TensorType& t) {
  Sizes s;
  for (const Dim& d : t.shape) s.push_back(d.is_static() ? d.size() : -1);
  return s;
}

Int8Rows int8_rows(OpBuilder& o, ValueId x, int64_t rank) {
  ValueId s = o.div(o.reduce_max(o.abs(x), {rank - 1}, true), o.scalar(127, DType::f32));
  s = o.max(s, o.scalar(1e-30f, DType::f32));
  ValueId q = o.op(Op::Round, {o.div(x, s)});
  return {o.min(o.max(q, o.scalar(-127, DType::f32)), o.scalar(127, DType::f32)), s};
}

void set_family_decompose(std::vector<OpRules>& t, OpFamily family, RuleFn f) {
  for (int i = 0; i < kNumOps; ++i)
    if (op_info(static_cast<Op>(i)).family == family) t[static_cast<size_t>(i)].decompose = f;
}

}  // namespace rlx::dispatch
