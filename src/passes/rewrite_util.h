// Rebuilding a graph with some nodes dropped and some values replaced, keeping SSA order.
#pragma once

#include <functional>
#include <map>

#include "rlx/graph.h"

namespace rlx::passes {

// Appends a copy of g's node n to out, reading `ins` (values of out), with the same output
// types, names and native choice; map[old output] is set to the new one.
inline void copy_node(const Graph& g, const Node& n, const std::vector<ValueId>& ins, Graph& out,
                      std::vector<ValueId>& map) {
  std::vector<TensorType> types;
  for (ValueId v : n.outputs) types.push_back(g.values[v].type);
  auto outs = out.add_node_typed(n.op, ins, n.attrs, types, n.name, n.origin);
  out.nodes.back().native = n.native;
  for (size_t k = 0; k < outs.size(); ++k) {
    map[n.outputs[k]] = outs[k];
    out.values[outs[k]].name = g.values[n.outputs[k]].name;
  }
}

// A graph with g's name, level, weights and inputs and no nodes yet, for a pass that copies
// g's nodes into it; map (sized to g's values) holds the new input for each of g's inputs.
inline Graph start_rebuild(const Graph& g, std::vector<ValueId>& map) {
  Graph out;
  out.name = g.name;
  out.level = g.level;
  out.weights = g.weights;
  map.assign(g.values.size(), kNoValue);
  for (ValueId in : g.inputs) map[in] = out.add_input(g.values[in].name, g.values[in].type);
  return out;
}

// A copy of g keeping the nodes `keep` accepts; uses of a value in `replace` read its
// replacement instead (replacements must be defined before their uses).
inline Graph rebuild(const Graph& g, const std::function<bool(size_t)>& keep, const std::map<ValueId, ValueId>& replace) {
  std::vector<ValueId> map;
  Graph out = start_rebuild(g, map);
  auto resolve = [&](ValueId v) {
    for (int guard = 0; guard < 64; ++guard) {
      auto it = replace.find(v);
      if (it == replace.end()) break;
      v = it->second;
    }
    return map[v];
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!keep(i)) continue;
    const Node& n = g.nodes[i];
    std::vector<ValueId> ins;
    for (ValueId v : n.inputs) ins.push_back(resolve(v));
    copy_node(g, n, ins, out, map);
  }
  for (ValueId v : g.outputs) out.outputs.push_back(resolve(v));
  return out;
}

}  // namespace rlx::passes
