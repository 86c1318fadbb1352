// Reverse-mode automatic differentiation as a graph transformation.
//
//   rlx::Graph g = ...;                      // graph level, static shapes
//   auto grads = rlx::train::gradients(g, loss, {w1, b1, w2, b2});
//   g.outputs = {loss, (*grads)[0], ...};
//
// gradients() appends the backward nodes to the same graph: they are ordinary graph-level
// ops (matmul, dot, reductions, where, pad, scatter_add, conv2d, ...), so the dispatch
// contract, the graph passes and the scheduler treat them like any other node and fuse
// across the forward/backward boundary. Every differentiable op of the ops table has a
// vector-Jacobian rule (src/train/vjp_*.cpp); tests/train/vjp_test.cpp checks each rule
// against central finite differences in f64.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "rlx/graph.h"

namespace rlx::train {

// How autodiff treats an op.
enum class Differentiability : uint8_t {
  source,             // no inputs to differentiate (constant, param, random)
  differentiable,     // has a vector-Jacobian rule
  not_differentiable  // argmax/argmin, comparisons, logical ops, iota, isnan/isinf, dequantize:
                      // no gradient; a gradient that has to flow through one is an error
};
Differentiability differentiability(Op op);

// Whether input `i` of a node of `op` (with these input types) carries a gradient: e.g. not
// the indices of gather/embedding/scatter_add, the condition of where, a bool attention mask,
// the positions of rope, or the quantized blocks of qmatmul.
bool input_is_differentiable(Op op, int i, std::span<const TensorType> inputs);

// Whether a vector-Jacobian rule is registered for `op` (true for every differentiable op;
// tests check this against the ops table).
bool has_vjp_rule(Op op);

struct GradientOptions {
  // Prefix of the names given to backward nodes ("<prefix>/<forward node>").
  std::string name_prefix = "grad";
};

struct Gradients {
  std::vector<ValueId> grads;  // d loss / d wrt[i], each with wrt[i]'s type
  // Values the backward reads many times per element it computes (a pooling window's
  // maximum, a col2im sum). The CPU scheduler inlines every elementwise value into its
  // consumers and recomputes it per use, so a caller should make these graph outputs (the
  // training step does: they are written once and then loaded). Forward values may appear.
  std::vector<ValueId> reuse;
};

// Appends to `g` (IrLevel::graph) the nodes that compute d loss / d wrt[i] and returns those
// values, each with wrt[i]'s type. `loss` must be a float value with exactly one element
// (rank 0 or all dims 1); `wrt` may name graph inputs, param outputs or any other values.
// A wrt value the loss does not depend on gets zeros.
//
// Requirements and errors (ErrorCode in brackets):
//  - shapes of the nodes between wrt and loss must be static: bind symbolic dims first with
//    rlx::bind_graph [shape_error];
//  - a gradient that would flow through a non-differentiable node (argmax, a comparison, iota,
//    an integer op, a cast from an integer type) is refused with a message naming that node
//    and, where different, the node that produced the integer value [invalid_argument];
//  - ops outside this list, none today, would be [unsupported].
// Gradients of gradients are not supported (the backward rules are not themselves tested for
// differentiation, though they are ordinary ops).
Expected<std::vector<ValueId>> gradients(Graph& g, ValueId loss, std::span<const ValueId> wrt,
                                         const GradientOptions& options = {});
// The same, with the materialization hints.
Expected<Gradients> differentiate(Graph& g, ValueId loss, std::span<const ValueId> wrt,
                                  const GradientOptions& options = {});

}  // namespace rlx::train
