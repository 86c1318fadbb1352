// The stage-split pass (split_stages in pipeline.h). A node belongs to the first stage whose
// boundary value needs it; a stage may read only its own values, the boundary value of the
// stage before it, graph inputs and sources (copied into each stage that reads them). A value
// computed from graph inputs and sources alone that a later stage reads is recomputed there.
#include <algorithm>

#include "runtime/pipeline.h"

namespace rlx::dist {

Expected<std::vector<Stage>> split_stages(const Graph& g, std::span<const ValueId> cuts) {
  const int stages = static_cast<int>(cuts.size()) + 1;
  const int nn = static_cast<int>(g.nodes.size());
  std::vector<int> stage_of(nn, -1);
  // input-only: computed from graph inputs and sources alone, without any boundary value. A
  // stage that reads such a value from another stage computes its own copy (an attention mask
  // derived from the input mask), so no value but the boundary crosses a cut.
  std::vector<char> is_cut(g.values.size(), 0);
  for (ValueId c : cuts)
    if (c >= 0 && c < static_cast<ValueId>(g.values.size())) is_cut[c] = 1;
  std::vector<char> input_only(nn, 0);
  for (int n = 0; n < nn; ++n) {
    bool r = true;
    for (ValueId v : g.nodes[n].inputs)
      r = r && !is_cut[v] && (g.values[v].producer < 0 || input_only[g.values[v].producer]);
    input_only[n] = r;
  }
  auto is_source = [&](int n) { return g.nodes[n].inputs.empty(); };
  // boundary k is computed by stage k: its ancestors not claimed by an earlier boundary
  for (int k = 0; k + 1 < stages; ++k) {
    const ValueId c = cuts[k];
    if (c < 0 || c >= static_cast<ValueId>(g.values.size()))
      return error(ErrorCode::invalid_argument, "pipeline cut ", k, ": %", c, " is not a value of graph '", g.name, "'");
    if (g.values[c].producer < 0)
      return error(ErrorCode::invalid_argument, "pipeline cut ", k, ": ", g.value_label(c),
                   " is a graph input, not a value computed inside the graph");
    std::vector<int> stack{g.values[c].producer};
    while (!stack.empty()) {
      const int n = stack.back();
      stack.pop_back();
      if (stage_of[n] >= 0 || is_source(n)) continue;
      stage_of[n] = k;
      for (ValueId v : g.nodes[n].inputs)
        if (g.values[v].producer >= 0) stack.push_back(g.values[v].producer);
    }
    if (k > 0 && stage_of[g.values[c].producer] != k)
      return error(ErrorCode::invalid_argument, "pipeline cut ", k, ": ", g.value_label(c), " is computed before cut ",
                   k - 1, " (", g.value_label(cuts[k - 1]), "); cuts must follow the graph's order");
  }
  for (int n = 0; n < nn; ++n)
    if (stage_of[n] < 0 && !is_source(n)) stage_of[n] = stages - 1;

  // every read must stay inside its stage, come from the boundary just before it, or be an
  // input-only value the stage copies (copy[k][n]: stage k computes node n too)
  std::vector<std::vector<char>> copy(stages, std::vector<char>(nn, 0));
  auto stage_of_value = [&](ValueId v) { return g.values[v].producer < 0 ? -1 : stage_of[g.values[v].producer]; };
  for (int n = 0; n < nn; ++n) {
    if (is_source(n)) continue;
    const int k = stage_of[n];
    for (ValueId v : g.nodes[n].inputs) {
      const int from = stage_of_value(v);
      if (from < 0 || from == k) continue;  // graph input, source, or this stage
      if (from == k - 1 && cuts[k - 1] == v) continue;
      if (input_only[g.values[v].producer]) {
        copy[k][g.values[v].producer] = 1;
        continue;
      }
      return error(ErrorCode::invalid_argument, "pipeline split of '", g.name, "': ", g.node_label(n), " (stage ", k,
                   ") reads ", g.value_label(v), " from stage ", from, ", which ",
                   from == k - 1 ? cat("the boundary ", g.value_label(cuts[k - 1]), " does not carry")
                                 : "is not the stage just before it",
                   "; cut the model where a single activation passes between layers");
    }
  }
  // a copied node brings the input-only nodes it reads
  for (int k = 0; k < stages; ++k)
    for (int n = nn - 1; n >= 0; --n)
      if (copy[k][n])
        for (ValueId v : g.nodes[n].inputs) {
          const int p = g.values[v].producer;
          if (p >= 0 && !is_source(p)) copy[k][p] = 1;
        }
  auto in_stage = [&](int n, int k) { return !is_source(n) && (stage_of[n] == k || copy[k][n]); };

  std::vector<Stage> out(stages);
  for (int k = 0; k < stages; ++k) {
    Stage& st = out[k];
    Graph& sg = st.graph;
    sg.name = cat(g.name, ".stage", k);
    sg.level = g.level;
    std::vector<ValueId> map(g.values.size(), kNoValue);
    if (k > 0) {
      const ValueId c = cuts[k - 1];
      map[c] = sg.add_input(g.values[c].name.empty() ? cat("stage", k - 1, "_out") : g.values[c].name, g.type(c));
      st.inputs_from.push_back(-1);
    }
    // what this stage reads: its own and its copied nodes' inputs, and its outputs
    std::vector<char> read(g.values.size(), 0);
    for (int n = 0; n < nn; ++n)
      if (in_stage(n, k))
        for (ValueId v : g.nodes[n].inputs) read[v] = 1;
    for (size_t i = 0; i < g.outputs.size(); ++i) {
      const ValueId v = g.outputs[i];
      const int from = stage_of_value(v);
      if (from == k || (from < 0 && k == stages - 1)) read[v] = 1;
    }
    for (size_t i = 0; i < g.inputs.size(); ++i) {
      const ValueId v = g.inputs[i];
      if (!read[v]) continue;
      map[v] = sg.add_input(g.values[v].name, g.type(v));
      st.inputs_from.push_back(static_cast<int>(i));
    }
    // nodes in order: this stage's, its copies, and the sources it reads
    for (int n = 0; n < nn; ++n) {
      const Node& node = g.nodes[n];
      bool take = in_stage(n, k);
      if (is_source(n)) {
        take = false;
        for (ValueId v : node.outputs) take = take || read[v];
      }
      if (!take) continue;
      std::vector<ValueId> ins;
      for (ValueId v : node.inputs) ins.push_back(map[v]);
      std::vector<TensorType> types;
      for (ValueId v : node.outputs) types.push_back(g.type(v));
      std::vector<ValueId> outs = sg.add_node_typed(node.op, ins, node.attrs, types, node.name, node.origin);
      for (size_t j = 0; j < outs.size(); ++j) {
        map[node.outputs[j]] = outs[j];
        sg.values[outs[j]].name = g.values[node.outputs[j]].name;
      }
      if (node.op == Op::Param) {
        auto w = g.weights.find(node.attrs.s("name"));
        if (w != g.weights.end()) sg.weights[w->first] = w->second;
      }
    }
    if (k + 1 < stages) {
      sg.outputs.push_back(map[cuts[k]]);
      st.outputs_from.push_back(-1);
    }
    for (size_t i = 0; i < g.outputs.size(); ++i) {
      const ValueId v = g.outputs[i];
      const int from = stage_of_value(v);
      if (from == k || (from < 0 && k == stages - 1)) {
        if (map[v] == kNoValue)
          return error(ErrorCode::internal, "pipeline split: output ", g.value_label(v), " has no value in stage ", k);
        sg.outputs.push_back(map[v]);
        st.outputs_from.push_back(static_cast<int>(i));
      }
    }
  }
  return out;
}

}  // namespace rlx::dist
