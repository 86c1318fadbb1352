// Ops whose output shape depends on the data (nonzero, unique, non_max_suppression, range, top_k; family
// data_dependent): their host implementations, and the graph surgery with which Model::run
// stages a graph around them. A run computes the inputs of the first such node with a device
// program (the graph cut down to those values), runs the node on the host, binds its `count`
// symbol to the size it produced, and continues with the rest of the graph, where the node's
// outputs have become graph inputs; every device runs the graph this way, and each stage is
// compiled once per binding of the symbols it sees, like any other symbolic dim.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "rlx/graph.h"

namespace rlx::runtime {

// Whether any node of g is a data-dependent op.
bool has_data_dependent(const Graph& g);
// Index of the first data-dependent node of g, or -1.
int32_t first_data_dependent(const Graph& g);

// Runs data-dependent node n on the host on its inputs (one tensor per input of n). Errors
// name the node (label).
Expected<std::vector<Tensor>> run_data_dependent(const Node& n, std::span<const Tensor> inputs, const std::string& label);

// ONNX Range: [max(ceil((limit - start) / delta), 0)] values start + i * delta, floats
// accumulating the additions in the element type as ONNX's reference and ONNX Runtime do
// (the importer folds constant Ranges with it). what: for messages.
Expected<Tensor> range_values(const Tensor& start, const Tensor& limit, const Tensor& delta, const std::string& what);

// The size the outputs of data-dependent node n give its `count` symbol.
Expected<int64_t> data_dependent_count(const Graph& g, const Node& n, std::span<const Tensor> outputs);

// g without node `node`, whose outputs become graph inputs appended after g's own (in output
// order, with their names and the node's output types, or `types` where given);
// source_node[i] is the index in g of the new graph's node i.
struct CutGraph {
  Graph graph;
  std::vector<int32_t> source_node;
};
CutGraph cut_node(const Graph& g, int32_t node, std::span<const TensorType> types = {});

// The types of data-dependent node n's outputs for what follows it: as inferred, with the dims
// inference could not tell (unknown) taken from the outputs computed.
std::vector<TensorType> computed_types(const Graph& g, const Node& n, std::span<const Tensor> outputs);

// g cut down to computing `values` (its outputs): the nodes they need, with all of g's inputs.
Graph with_outputs(const Graph& g, const std::vector<ValueId>& values);

}  // namespace rlx::runtime
