// The evaluator constant folding uses (passes::fold_constants): one node on known inputs,
// compiled and run on the reference device. It lives in the runtime layer because it compiles
// a model; the passes below take it as a parameter.
#pragma once

#include "passes/graph_passes.h"

namespace rlx::runtime {

// Runs node `n` on `ins` on the reference device (a composite node through its
// decomposition) and gives its outputs; an error where ref cannot run it.
Expected<std::vector<Tensor>> evaluate_on_reference(const Node& n, const std::vector<Tensor>& ins,
                                                    const std::vector<TensorType>& outs);

}  // namespace rlx::runtime
