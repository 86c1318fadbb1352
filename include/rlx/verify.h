// rlx/verify.h: the verifier of the graph and primitive IR levels.
//
// Every pass may assume its input verifies and must leave a graph that verifies; tests and
// debug builds run verify_graph after each pass, and every graph from outside (a file, text
// IR, an importer) is verified before it is compiled.
#pragma once

#include <cstdint>
#include <span>

#include "rlx/graph.h"
#include "rlx/ops.h"
#include "rlx/shape.h"
#include "rlx/status.h"

namespace rlx {

// Checks the invariants of `g` at its level (g.level):
//  - every value id (graph inputs and outputs, node inputs and outputs) is in range;
//  - every value is produced exactly once, by a graph input or by one node output, and is
//    defined before it is used (nodes are in topological order);
//  - each value's producer / output_index agree with the node that produces it, and graph
//    inputs record producer -1;
//  - re-running infer_types on each node gives exactly its recorded output types (a param's
//    symbolic or unknown dims are recorded as 0 in its `shape` attribute, see output_types_match);
//  - at IrLevel::primitive, verify_node_level holds for every node.
// Returns ErrorCode::verify_error with a message that names the node (Graph::node_label) or
// value at fault and the problem; ok otherwise.
Status verify_graph(const Graph& g);

// The level rules for node `node_index` alone (inputs and outputs must be in range). At the
// graph level there are none. At the primitive level a primitive node must be in strict form
// (check_strict_primitive) and a composite node, which means the device runs it natively,
// must have static input and output shapes. verify_error naming the node otherwise.
Status verify_node_level(const Graph& g, int32_t node_index);

// Whether `recorded` output types are right for a node of `op` whose type inference gave
// `inferred`: equal lists, except that for a param a symbolic or unknown recorded dim matches
// the 0 that Graph::add_param stores for it in the `shape` attribute.
bool output_types_match(Op op, std::span<const TensorType> inferred, std::span<const TensorType> recorded);

}  // namespace rlx
