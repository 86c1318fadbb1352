// rlx/ir_text.h: the text form of the graph and primitive IR levels.
//
// The printer and the parser round-trip: for every graph g that passes verify_graph,
// print_graph(parse_graph(print_graph(g))) == print_graph(g), and parse_graph(print_graph(g))
// reproduces ops, attributes, value types, value names, node names, the native flag, weight
// names and the order of inputs and outputs. docs/ir.md is the syntax reference; in short:
//
//   # comment to end of line
//   graph @mlp(%x: f32[batch, 784]) -> (f32[batch, 10]) {
//     %w1 = param "fc1.weight" : f32[784, 10]
//     %h  = matmul(%x, %w1) : f32[batch, 10]
//     %a  = gelu(%h) {approximate = "tanh"} loc("/act") : f32[batch, 10]
//     return %a
//   }
//
// What the text does not carry: weight data (Graph::weights), Node::origin, and value names
// that are not identifiers made of letters, digits, `_`, `.` and `-` (such values print as
// %<value id>).
#pragma once

#include <string>
#include <string_view>

#include "rlx/graph.h"
#include "rlx/status.h"

namespace rlx {

// Prints `g` as text IR (`graph @name` or `primitive @name`, by g.level), one node per line,
// with every output type written out. Never fails: a graph that does not verify still prints
// (values that are out of range print as `%<bad:N>`), though the text may not parse back.
std::string print_graph(const Graph& g);

// Parses one graph from `text`. Output types after `:` are optional; when absent they are
// inferred from the ops table, when present they must equal the inferred types. At the
// primitive level every node must also pass the primitive-level rules of verify_node_level.
// Weights are not part of the text: the result has an empty Graph::weights.
//
// Errors carry ErrorCode::parse_error (or, for a failed type inference, the inference's own
// code such as shape_error or dtype_error; for a primitive-level violation verify_error) and
// a message that starts with `<source_name>:<line>:<col>: ` and names the offending token or
// node. The parser does not throw, and bounds its recursion (nested lists at most 64 deep).
Expected<Graph> parse_graph(std::string_view text, std::string_view source_name = "<text>");

// Reads the file at `path` and parses it, using `path` as the source name. An unreadable file
// is an ErrorCode::io_error naming the path.
Expected<Graph> parse_graph_file(const std::string& path);

}  // namespace rlx
