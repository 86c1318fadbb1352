// Common subexpression elimination: one node per distinct (op, inputs, attributes).
#include <map>

#include "graph_passes.h"
#include "rewrite_util.h"

namespace rlx::passes {

int eliminate_common_subexpressions(Graph& g) {
  std::map<ValueId, ValueId> replace;
  std::vector<char> keep(g.nodes.size(), 1);
  // bucket by a cheap key, then compare attributes exactly
  std::map<std::pair<Op, std::vector<ValueId>>, std::vector<size_t>> seen;
  auto canon = [&](ValueId v) {
    auto it = replace.find(v);
    return it == replace.end() ? v : it->second;
  };
  int merged = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.op == Op::Random) continue;  // two draws are two draws even with one seed? keep them apart
    std::vector<ValueId> ins;
    for (ValueId v : n.inputs) ins.push_back(canon(v));
    auto& bucket = seen[{n.op, ins}];
    bool found = false;
    for (size_t j : bucket) {
      const Node& m = g.nodes[j];
      if (m.attrs == n.attrs && m.outputs.size() == n.outputs.size() && m.native == n.native) {
        for (size_t k = 0; k < n.outputs.size(); ++k) replace[n.outputs[k]] = m.outputs[k];
        keep[i] = 0;
        ++merged;
        found = true;
        break;
      }
    }
    if (!found) bucket.push_back(i);
  }
  if (merged) g = rebuild(g, [&](size_t i) { return keep[i] != 0; }, replace);
  return merged;
}

}  // namespace rlx::passes
