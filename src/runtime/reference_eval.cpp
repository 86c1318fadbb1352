#include "runtime/reference_eval.h"

#include "rlx/compile.h"

namespace rlx::runtime {

Expected<std::vector<Tensor>> evaluate_on_reference(const Node& n, const std::vector<Tensor>& ins,
                                                    const std::vector<TensorType>& outs) {
  Graph sub;
  std::vector<ValueId> in_ids;
  for (size_t i = 0; i < ins.size(); ++i) in_ids.push_back(sub.add_input(cat("in", i), ins[i].type()));
  auto o = sub.add_node(n.op, in_ids, n.attrs);
  if (!o) return o.status();
  sub.outputs = *o;
  RLX_ASSIGN_OR_RETURN(auto model, Model::compile(std::move(sub), {.device = "ref"}));
  return model->run(ins);
}

}  // namespace rlx::runtime
