#include "rlx/graph.h"

namespace rlx {

ValueId Graph::add_input(std::string name, TensorType type) {
  ValueId id = static_cast<ValueId>(values.size());
  values.push_back(Value{std::move(type), -1, 0, std::move(name)});
  inputs.push_back(id);
  return id;
}

std::vector<ValueId> Graph::add_node_typed(Op op, std::vector<ValueId> ins, Attrs attrs,
                                           std::vector<TensorType> output_types, std::string node_name,
                                           int32_t origin) {
  Node n;
  n.op = op;
  n.inputs = std::move(ins);
  n.attrs = std::move(attrs);
  n.name = std::move(node_name);
  n.origin = origin;
  const int32_t idx = static_cast<int32_t>(nodes.size());
  for (size_t i = 0; i < output_types.size(); ++i) {
    ValueId id = static_cast<ValueId>(values.size());
    values.push_back(Value{std::move(output_types[i]), idx, static_cast<int32_t>(i), ""});
    n.outputs.push_back(id);
  }
  nodes.push_back(std::move(n));
  return nodes.back().outputs;
}

Expected<std::vector<ValueId>> Graph::add_node(Op op, std::vector<ValueId> ins, Attrs attrs,
                                               std::string node_name, int32_t origin) {
  std::vector<TensorType> in_types;
  in_types.reserve(ins.size());
  for (ValueId v : ins) {
    if (v < 0 || v >= static_cast<ValueId>(values.size()))
      return error(ErrorCode::invalid_argument, "node '", node_name, "' (", op_name(op),
                   ") uses an undefined value %", v);
    in_types.push_back(values[v].type);
  }
  NodeSig sig{in_types, attrs, node_name};
  RLX_ASSIGN_OR_RETURN(auto out_types, infer_types(op, sig));
  return add_node_typed(op, std::move(ins), std::move(attrs), std::move(out_types), std::move(node_name), origin);
}

ValueId Graph::add_param(const std::string& weight_name, TensorType type, Tensor data) {
  Sizes sizes;
  for (const Dim& d : type.shape) sizes.push_back(d.is_static() ? d.size() : 0);
  Attrs a{{"name", weight_name}, {"dtype", type.dtype}, {"shape", sizes}};
  auto outs = add_node_typed(Op::Param, {}, std::move(a), {type}, "", -1);
  if (data.storage()) weights[weight_name] = std::move(data);
  return outs[0];
}

std::string Graph::value_label(ValueId v) const {
  if (v >= 0 && v < static_cast<ValueId>(values.size()) && !values[v].name.empty()) return values[v].name;
  return cat("%", v);
}

std::string Graph::node_label(int32_t i) const {
  const Node& n = nodes[i];
  if (!n.name.empty()) return cat("node '", n.name, "' (", op_name(n.op), ")");
  return cat("node #", i, " (", op_name(n.op), ")");
}

std::vector<int32_t> Graph::use_counts() const {
  std::vector<int32_t> c(values.size(), 0);
  for (const Node& n : nodes)
    for (ValueId v : n.inputs) ++c[v];
  for (ValueId v : outputs) ++c[v];
  return c;
}

Expected<std::vector<ValueId>> GraphBuilder::emit(Op op, std::vector<ValueId> inputs, Attrs attrs) {
  std::string name = std::move(next_name_);
  next_name_.clear();
  return g_.add_node(op, std::move(inputs), std::move(attrs), std::move(name), origin_);
}

Expected<ValueId> GraphBuilder::param(const std::string& weight_name, TensorType type) {
  for (const Node& n : g_.nodes)
    if (n.op == Op::Param && n.attrs.s("name") == weight_name) {
      if (g_.type(n.outputs[0]) != type)
        return error(ErrorCode::shape_error, "weight '", weight_name, "' is used as ", type.to_string(),
                     " and as ", g_.type(n.outputs[0]).to_string());
      return n.outputs[0];
    }
  return g_.add_param(weight_name, std::move(type));
}

}  // namespace rlx
