// Constant folding: a node whose inputs are all known at compile time (constants, weights,
// or values folded before) is evaluated once by the caller's evaluator (the runtime gives
// the reference device's, which folds composite nodes through their decomposition).
#include <map>

#include "graph_passes.h"
#include "rewrite_util.h"

namespace rlx::passes {
namespace {

bool is_known_source(const Graph& g, const Node& n) {
  if (n.op == Op::Constant) return true;
  if (n.op == Op::Param) return g.weights.count(n.attrs.s("name")) > 0;
  return false;
}

// An f32 tensor rounded to f16 or bf16 on the host, with the rounding the reference device's
// cast uses (to nearest even): autocast's narrow form casts every weight, and the reference
// interpreter's element-by-element path took seconds for a model's matrices.
Tensor narrowed(const Tensor& t, DType to) {
  Tensor r = Tensor::zeros(to, t.sizes());
  const float* src = t.data<float>();
  uint16_t* dst = r.data<uint16_t>();
  for (int64_t i = 0; i < t.numel(); ++i) dst[i] = to == DType::f16 ? f32_to_f16(src[i]) : f32_to_bf16(src[i]);
  return r;
}

// Whether `n` is the f32 -> f16/bf16 cast of a known tensor, which `narrowed` folds here.
bool narrows_weight(const Node& n, const std::vector<Tensor>& ins, const std::vector<TensorType>& outs) {
  return n.op == Op::Cast && ins.size() == 1 && ins[0].dtype() == DType::f32 && outs.size() == 1 &&
         (outs[0].dtype == DType::f16 || outs[0].dtype == DType::bf16) && ins[0].storage();
}

}  // namespace

Expected<int> fold_constants(Graph& g, const NodeEvaluator& evaluate, int64_t max_elements) {
  std::map<ValueId, Tensor> known;
  for (const Node& n : g.nodes) {
    if (n.op == Op::Constant) known[n.outputs[0]] = *n.attrs.tensor("value");
    if (n.op == Op::Param) {
      auto it = g.weights.find(n.attrs.s("name"));
      if (it != g.weights.end()) known[n.outputs[0]] = it->second;
    }
  }
  std::map<ValueId, ValueId> replace;
  std::vector<char> keep(g.nodes.size(), 1);
  std::vector<std::pair<size_t, std::vector<Tensor>>> folded;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    // collectives communicate: their result depends on the other ranks, never only on inputs
    if (n.inputs.empty() || n.op == Op::Random || is_known_source(g, n) ||
        op_info(n.op).family == OpFamily::collective)
      continue;
    bool all = true;
    for (ValueId v : n.inputs) all &= known.count(v) > 0;
    if (!all) continue;
    bool small = true;
    std::vector<TensorType> out_types;
    for (ValueId v : n.outputs) {
      auto s = static_sizes(g.type(v).shape);
      if (!s || numel(*s) > max_elements) small = false;
      out_types.push_back(g.type(v));
    }
    if (!small) continue;
    std::vector<Tensor> ins;
    for (ValueId v : n.inputs) ins.push_back(known[v]);
    Expected<std::vector<Tensor>> r = narrows_weight(n, ins, out_types)
                                          ? Expected<std::vector<Tensor>>(std::vector<Tensor>{narrowed(ins[0], out_types[0].dtype)})
                                          : evaluate(n, ins, out_types);
    if (!r) continue;  // not evaluable (e.g. no decomposition on ref): leave it to the device
    for (size_t k = 0; k < n.outputs.size(); ++k) known[n.outputs[k]] = (*r)[k];
    keep[i] = 0;
    folded.push_back({i, std::move(*r)});
  }
  if (folded.empty()) return 0;
  // Rebuild: folded nodes become constant nodes in place (keeping SSA order).
  std::vector<ValueId> map;
  Graph out = start_rebuild(g, map);
  size_t f = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (f < folded.size() && folded[f].first == i) {
      for (size_t k = 0; k < n.outputs.size(); ++k) {
        auto c = out.add_node_typed(Op::Constant, {}, Attrs{{"value", folded[f].second[k]}}, {g.type(n.outputs[k])},
                                    n.name, n.origin);
        map[n.outputs[k]] = c[0];
        out.values[c[0]].name = g.values[n.outputs[k]].name;
      }
      ++f;
      continue;
    }
    std::vector<ValueId> ins;
    for (ValueId v : n.inputs) ins.push_back(map[v]);
    copy_node(g, n, ins, out, map);
  }
  for (ValueId v : g.outputs) out.outputs.push_back(map[v]);
  g = std::move(out);
  return static_cast<int>(folded.size());
}

Status simplify(Graph& g, const NodeEvaluator& evaluate) {
  for (int round = 0; round < 8; ++round) {
    int changed = eliminate_common_subexpressions(g);
    RLX_ASSIGN_OR_RETURN(int folded, fold_constants(g, evaluate));
    changed += folded;
    changed += fuse_attention(g);
    changed += eliminate_dead_code(g);
    if (changed == 0) break;
  }
  return Status::ok();
}

}  // namespace rlx::passes
