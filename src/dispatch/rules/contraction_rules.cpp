// Contraction family: matmul (numpy semantics) and gemm expressed with the general `dot`.
#include "rules.h"

namespace rlx::dispatch {
namespace {

// dot(a, b) with matmul's out_type, when it has one (the dot then sums in it).
ValueId dot_of(OpBuilder& o, const RuleNode& n, ValueId a, ValueId b, std::vector<int64_t> lb, std::vector<int64_t> rb,
               std::vector<int64_t> lc, std::vector<int64_t> rc) {
  Attrs attrs{{"lhs_batch", std::move(lb)}, {"rhs_batch", std::move(rb)}, {"lhs_contract", std::move(lc)},
              {"rhs_contract", std::move(rc)}};
  if (n.attrs.has("out_type")) attrs.set("out_type", n.attrs.dtype("out_type"));
  return o.op(Op::Dot, {a, b}, std::move(attrs));
}

Status matmul(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  ValueId a = n.inputs[0], b = n.inputs[1];
  Sizes sa = static_sizes_or_empty(n.input_types[0]), sb = static_sizes_or_empty(n.input_types[1]);
  if (sa.size() == 1) { sa.insert(sa.begin(), 1); a = o.reshape(a, sa); }
  if (sb.size() == 1) { sb.push_back(1); b = o.reshape(b, sb); }
  const int ra = static_cast<int>(sa.size()), rb = static_cast<int>(sb.size());
  ValueId out;
  if (rb == 2) {
    // [batch..., M, K] x [K, N]: the weight has no batch dims, so batch rows are just more M rows.
    out = dot_of(o, n, a, b, {}, {}, {ra - 1}, {0});
  } else {
    // Broadcast batch dims of both sides to a common shape, then a batched dot.
    Sizes batch_a(sa.begin(), sa.end() - 2), batch_b(sb.begin(), sb.end() - 2);
    auto bs = broadcast_shapes(to_shape(batch_a), to_shape(batch_b));
    if (!bs) return bs.status();
    Sizes batch = *static_sizes(*bs);
    Sizes ta = batch, tb = batch;
    ta.push_back(sa[ra - 2]); ta.push_back(sa[ra - 1]);
    tb.push_back(sb[rb - 2]); tb.push_back(sb[rb - 1]);
    a = o.broadcast_to(a, ta);
    b = o.broadcast_to(b, tb);
    std::vector<int64_t> bd;
    for (size_t i = 0; i < batch.size(); ++i) bd.push_back(static_cast<int64_t>(i));
    const int64_t r = static_cast<int64_t>(batch.size()) + 2;
    out = dot_of(o, n, a, b, bd, bd, {r - 1}, {r - 2});
  }
  // Drop promoted unit dims of 1-D operands.
  return single(o, o.reshape_to(out, static_sizes_or_empty(n.output_types[0])), outputs);
}

Status gemm(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  const bool ta = n.attrs.i("trans_a", 0) != 0, tb = n.attrs.i("trans_b", 0) != 0;
  ValueId a = n.inputs[0];
  ValueId y = o.dot(a, n.inputs[1], {}, {}, {ta ? 0 : 1}, {tb ? 1 : 0});
  const double alpha = n.attrs.f("alpha", 1.0), beta = n.attrs.f("beta", 1.0);
  if (alpha != 1.0) y = o.mul(y, o.scalar_like(alpha, a));
  if (n.inputs.size() == 3 && beta != 0.0) {
    ValueId c = n.inputs[2];
    if (beta != 1.0) c = o.mul(c, o.scalar_like(beta, a));
    y = o.add(y, c);
  }
  return single(o, y, outputs);
}

}  // namespace

void register_contraction_rules(std::vector<OpRules>& t) {
  t[static_cast<size_t>(Op::MatMul)].decompose = matmul;
  t[static_cast<size_t>(Op::Gemm)].decompose = gemm;
}

}  // namespace rlx::dispatch
