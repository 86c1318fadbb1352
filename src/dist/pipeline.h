// Pipeline parallelism: a pass that cuts a graph into stages at boundary values, and the
// schedules that run the stages on consecutive ranks with micro-batches (docs/distributed.md).
#pragma once

#include <span>
#include <vector>

#include "rlx/graph.h"

namespace rlx::dist {

// One stage of a split graph. Its inputs are the boundary activation from the previous stage
// (every stage but the first, always input 0) followed by the original graph inputs the stage
// reads; its outputs are the boundary activation for the next stage (every stage but the
// last, always output 0) followed by the original outputs the stage computes.
struct Stage {
  Graph graph;
  std::vector<int> inputs_from;   // per stage input: index of the original graph input, -1 for the boundary
  std::vector<int> outputs_from;  // per stage output: index of the original graph output, -1 for the boundary
};

// Splits `g` into cuts.size() + 1 stages: stage k computes what boundary value cuts[k] needs
// (minus what earlier stages computed), the last stage the rest. Sources (constants,
// parameters) are copied into every stage that reads them, with their weights. Errors name
// the node that reads a value across more than one boundary, or a boundary that does not
// separate the graph (a later stage that needs a value the cut does not carry).
Expected<std::vector<Stage>> split_stages(const Graph& g, std::span<const ValueId> cuts);

}  // namespace rlx::dist
