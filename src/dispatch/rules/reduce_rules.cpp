// Reduction family: explicit, sorted, non-negative axes (canonical form); mean as sum / count.
#include <algorithm>

#include "rules.h"

namespace rlx::dispatch {
namespace {

std::vector<int64_t> resolved_axes(const RuleNode& n) {
  const int rank = n.input_types[0].rank();
  std::vector<int64_t> axes = n.attrs.ints("axes");
  if (axes.empty())
    for (int i = 0; i < rank; ++i) axes.push_back(i);
  for (int64_t& a : axes)
    if (a < 0) a += rank;
  std::sort(axes.begin(), axes.end());
  return axes;
}

Status canonical_reduce(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  std::vector<int64_t> axes = resolved_axes(n);
  ValueId x = n.inputs[0];
  if (axes.empty()) {  // a rank-0 input: nothing to reduce
    return single(o, o.reshape(x, {}), outputs);
  }
  return single(o, o.reduce(n.op, x, axes, n.attrs.i("keepdims", 1) != 0), outputs);
}

Status canonical_argreduce(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  Attrs a = n.attrs;
  int64_t axis = a.i("axis", 0);
  if (axis < 0) axis += n.input_types[0].rank();
  a.set("axis", axis);
  return single(o, o.op(n.op, {n.inputs[0]}, a), outputs);
}

Status reduce_mean(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  std::vector<int64_t> axes = resolved_axes(n);
  const Shape& s = n.input_types[0].shape;
  double count = 1;
  for (int64_t a : axes) count *= static_cast<double>(s[a].size());
  ValueId x = n.inputs[0];
  ValueId sum = o.reduce_sum(x, axes, n.attrs.i("keepdims", 1) != 0);
  return single(o, o.div(sum, o.scalar_like(count, x)), outputs);
}

}  // namespace

void register_reduce_rules(std::vector<OpRules>& t) {
  for (Op op : {Op::ReduceSum, Op::ReduceMax, Op::ReduceMin, Op::ReduceProd})
    t[static_cast<size_t>(op)].decompose = canonical_reduce;
  for (Op op : {Op::ArgMax, Op::ArgMin}) t[static_cast<size_t>(op)].decompose = canonical_argreduce;
  t[static_cast<size_t>(Op::ReduceMean)].decompose = reduce_mean;
}

}  // namespace rlx::dispatch
