// Graph-level clean-up passes run on a bound graph (static shapes) before legalization.
// Each returns the number of nodes it changed.
#pragma once

#include <functional>
#include <vector>

#include "rlx/graph.h"

namespace rlx::passes {

// Evaluates one node on known input tensors, giving its outputs (of the types given). The
// folding pass calls it for nodes whose inputs are all known at compile time; the runtime
// layer supplies the reference device's evaluation (runtime/reference_eval.h), so that the
// passes depend on no device.
using NodeEvaluator = std::function<Expected<std::vector<Tensor>>(const Node&, const std::vector<Tensor>&,
                                                                  const std::vector<TensorType>&)>;

// Removes nodes whose outputs reach no graph output (and weights no node uses).
int eliminate_dead_code(Graph& g);
// Merges nodes with the same op, inputs and attributes into one (sources included).
int eliminate_common_subexpressions(Graph& g);
// Evaluates nodes whose inputs are all constants or weights (up to `max_elements` output
// elements each) with `evaluate` and replaces them by constants; a node `evaluate` refuses
// is left to the device.
Expected<int> fold_constants(Graph& g, const NodeEvaluator& evaluate, int64_t max_elements = int64_t{1} << 24);
// Replaces attention written out op by op (transposes to heads first, MatMul(Q, K^T), a
// scalar Div or Mul, an optional additive f32 mask, Softmax over the keys, MatMul by V; the
// form of exported BERT-family models) by one `attention` node in the bshd layout; returns the
// number replaced. Graph level only; the match is exact or the graph is left as it is
// (attention_fusion.cpp lists the conditions).
int fuse_attention(Graph& g);
// All of the above until nothing changes (folding with `evaluate`).
Status simplify(Graph& g, const NodeEvaluator& evaluate);

}  // namespace rlx::passes
