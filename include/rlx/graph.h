// rlx/graph.h: the graph and primitive IR levels. Both are a Graph: SSA values produced by
// nodes in topological order. A graph-level Graph may hold any op; a primitive-level Graph
// holds strict primitives plus composites that the target device claimed natively.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "rlx/attrs.h"
#include "rlx/ops.h"
#include "rlx/shape.h"
#include "rlx/status.h"
#include "rlx/tensor.h"

namespace rlx {

using ValueId = int32_t;
inline constexpr ValueId kNoValue = -1;

enum class IrLevel : uint8_t { graph, primitive };

struct Value {
  TensorType type;
  int32_t producer = -1;  // node index, or -1 for a graph input
  int32_t output_index = 0;
  std::string name;       // optional, from the source model or the text IR
};

struct Node {
  Op op;
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  Attrs attrs;
  std::string name;      // the source model's node name, when it has one
  int32_t origin = -1;   // index of the graph-level node this one was lowered from
  // Primitive level only: the device runs this node with a native kernel (composites at the
  // primitive level are always native; primitives are native when the device claimed them).
  bool native = false;
};

class Graph {
 public:
  std::string name = "main";
  IrLevel level = IrLevel::graph;
  std::vector<Value> values;
  std::vector<Node> nodes;         // topological order
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  // Weights referenced by `param` nodes, by name. Missing entries are allowed while a graph
  // is only explained; running needs them all.
  std::map<std::string, Tensor> weights;

  // Adds a graph input with a name and type.
  ValueId add_input(std::string name, TensorType type);
  // Appends a node after checking it against the ops table; returns its outputs.
  Expected<std::vector<ValueId>> add_node(Op op, std::vector<ValueId> inputs, Attrs attrs,
                                          std::string name = "", int32_t origin = -1);
  // Appends a node whose output types are already known (parsers, passes that copy nodes).
  std::vector<ValueId> add_node_typed(Op op, std::vector<ValueId> inputs, Attrs attrs,
                                      std::vector<TensorType> output_types, std::string name = "",
                                      int32_t origin = -1);
  // Adds a `param` node for weight `weight_name` and stores `data` (may be undefined).
  ValueId add_param(const std::string& weight_name, TensorType type, Tensor data = {});

  const TensorType& type(ValueId v) const { return values[v].type; }
  // A short description of value v for messages: its name, or %id.
  std::string value_label(ValueId v) const;
  // "node 'name' (op)" or "node #i (op)".
  std::string node_label(int32_t node_index) const;
  // For each value, the number of node inputs and graph outputs that use it.
  std::vector<int32_t> use_counts() const;
};

// Emits nodes into some destination with type inference. Model builders, rewrites and
// decompositions are all written against this interface; the legalizer provides one that
// legalizes each node as it is emitted.
class Builder {
 public:
  virtual ~Builder() = default;
  virtual Expected<std::vector<ValueId>> emit(Op op, std::vector<ValueId> inputs, Attrs attrs) = 0;
  virtual const TensorType& type(ValueId v) const = 0;
  // Adds (or reuses) a weight parameter.
  virtual Expected<ValueId> param(const std::string& weight_name, TensorType type) = 0;
};

// A Builder that appends to a Graph.
class GraphBuilder : public Builder {
 public:
  explicit GraphBuilder(Graph& g, int32_t origin = -1) : g_(g), origin_(origin) {}
  Expected<std::vector<ValueId>> emit(Op op, std::vector<ValueId> inputs, Attrs attrs) override;
  const TensorType& type(ValueId v) const override { return g_.type(v); }
  Expected<ValueId> param(const std::string& weight_name, TensorType type) override;
  Graph& graph() { return g_; }
  // Name given to the next emitted node (cleared after use).
  void set_next_name(std::string name) { next_name_ = std::move(name); }

 private:
  Graph& g_;
  int32_t origin_;
  std::string next_name_;
};

}  // namespace rlx
