// Issuing collectives early: a reordering of a graph's nodes that computes each collective as
// soon as the values it depends on allow, instead of where the graph builder appended it.
// With asynchronous collectives (the CPU executable starts one and waits for it just before
// the first step that reads its result) the communication then runs while the rest of the
// graph computes: a data-parallel step's gradient buckets go out one by one as the backward
// pass produces them.
//
// A priority topological sort. Each node's key is the position (in the original order) of the
// earliest collective it feeds, directly or through other nodes; a node that feeds none keeps
// its own position; a collective comes first as soon as its inputs are ready. Among the nodes
// whose inputs are ready, the smallest (key, position) goes next. So the first collective's
// ancestors run first (in their original order), then it, then what the next collective still
// needs, and so on; work that feeds no collective keeps its place relative to the work that
// does (a layer's KV-cache update is not held back to the end, which would keep every layer's
// new keys and values alive at once). Without collectives the order is unchanged. The order is a function of the graph alone, and every
// rank compiles the same graph, so every rank issues the collectives in the same order.
#include <algorithm>
#include <limits>
#include <queue>

#include "schedule.h"

namespace rlx::sched {

void order_collectives_early(Graph& g) {
  const int nn = static_cast<int>(g.nodes.size());
  bool any = false;
  for (const Node& n : g.nodes) any = any || op_info(n.op).family == OpFamily::collective;
  if (!any) return;
  std::vector<std::vector<int>> users(static_cast<size_t>(nn));
  std::vector<int> pending(static_cast<size_t>(nn), 0);  // inputs produced by nodes not yet placed
  for (int i = 0; i < nn; ++i)
    for (ValueId v : g.nodes[i].inputs) {
      const int p = g.values[v].producer;
      if (p < 0) continue;
      users[p].push_back(i);
      ++pending[i];
    }
  constexpr int kNone = std::numeric_limits<int>::max();
  std::vector<int> key(static_cast<size_t>(nn), kNone);
  for (int n = nn - 1; n >= 0; --n) {
    if (op_info(g.nodes[n].op).family == OpFamily::collective) key[n] = n;
    for (int u : users[n]) key[n] = std::min(key[n], key[u]);
  }
  for (int n = 0; n < nn; ++n) {
    if (key[n] == kNone) key[n] = n;
    // a collective goes as soon as it is ready, ahead of independent work
    if (op_info(g.nodes[n].op).family == OpFamily::collective) key[n] = -1;
  }
  using Item = std::pair<int, int>;  // (key, position)
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> ready;
  for (int n = 0; n < nn; ++n)
    if (pending[n] == 0) ready.push({key[n], n});
  std::vector<int> order;
  order.reserve(static_cast<size_t>(nn));
  while (!ready.empty()) {
    const int n = ready.top().second;
    ready.pop();
    order.push_back(n);
    for (int u : users[n])
      if (--pending[u] == 0) ready.push({key[u], u});
  }
  if (static_cast<int>(order.size()) != nn) return;  // not a DAG in order: leave it to the verifier
  // apply the permutation: node indices change, value ids do not
  std::vector<Node> nodes;
  nodes.reserve(static_cast<size_t>(nn));
  for (int n : order) nodes.push_back(std::move(g.nodes[n]));
  g.nodes = std::move(nodes);
  for (int i = 0; i < nn; ++i)
    for (ValueId v : g.nodes[i].outputs) g.values[v].producer = i;
}

}  // namespace rlx::sched
