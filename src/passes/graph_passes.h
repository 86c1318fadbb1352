// Graph-level clean-up passes run on a bound graph (static shapes) before legalization.
// Each returns the number of nodes it changed.
#pragma once

#include "rlx/graph.h"

namespace rlx::passes {

// Removes nodes whose outputs reach no graph output (and weights no node uses).
int eliminate_dead_code(Graph& g);
// Merges nodes with the same op, inputs and attributes into one (sources included).
int eliminate_common_subexpressions(Graph& g);
// Evaluates nodes whose inputs are all constants or weights (up to `max_elements` output
// elements each) with the reference interpreter and replaces them by constants.
Expected<int> fold_constants(Graph& g, int64_t max_elements = int64_t{1} << 24);
// All of the above until nothing changes.
Status simplify(Graph& g);

}  // namespace rlx::passes
