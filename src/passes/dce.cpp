// Dead code elimination: keep the nodes graph outputs depend on.
#include <set>

#include "graph_passes.h"
#include "rewrite_util.h"

namespace rlx::passes {

int eliminate_dead_code(Graph& g) {
  std::vector<char> live(g.values.size(), 0);
  for (ValueId v : g.outputs) live[v] = 1;
  std::vector<char> keep(g.nodes.size(), 0);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    bool used = false;
    for (ValueId v : n.outputs) used |= live[v] != 0;
    if (!used) continue;
    keep[i] = 1;
    for (ValueId v : n.inputs) live[v] = 1;
  }
  int removed = 0;
  for (char k : keep) removed += k == 0;
  if (removed == 0) return 0;
  g = rebuild(g, [&](size_t i) { return keep[i] != 0; }, {});
  // weights no remaining param refers to
  std::set<std::string> used;
  for (const Node& n : g.nodes)
    if (n.op == Op::Param) used.insert(n.attrs.s("name"));
  for (auto it = g.weights.begin(); it != g.weights.end();) it = used.count(it->first) ? std::next(it) : g.weights.erase(it);
  return removed;
}

}  // namespace rlx::passes
