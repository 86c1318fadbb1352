// Pipeline parallelism: a pass that cuts a graph into stages at boundary values, and the
// schedules that run the stages on consecutive ranks with micro-batches (docs/distributed.md).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "rlx/comm.h"
#include "rlx/compile.h"
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
// (minus what earlier stages computed), the last stage the rest. Values computed from graph
// inputs and sources alone (constants, parameters with their weights, a mask derived from an
// input) are copied into every stage that reads them. Errors name
// the node that reads a value across more than one boundary, or a boundary that does not
// separate the graph (a later stage that needs a value the cut does not carry).
Expected<std::vector<Stage>> split_stages(const Graph& g, std::span<const ValueId> cuts);

// Part `i` of `n` items split into `parts` nearly equal runs (the first n % parts get one more):
// how a batch is cut into micro-batches, or shared among data-parallel ranks.
struct Share {
  int64_t begin = 0, size = 0;
};
inline Share even_share(int64_t n, int64_t parts, int64_t i) {
  const int64_t q = n / parts, rem = n % parts;
  return {i * q + (i < rem ? i : rem), q + (i < rem ? 1 : 0)};
}

// The values a model builder marked as layer ends (named "layer.<N>.out"), in layer order:
// where split_stages may cut it.
std::vector<ValueId> layer_ends(const Graph& g);
// cuts for `stages` stages over those layer ends: stage k starts after layer
// k * layers / stages - 1 (layers = ends + 1). Error when there are fewer layers than stages.
Expected<std::vector<ValueId>> even_cuts(const Graph& g, int stages);

struct PipelineRunOptions {
  int micro_batches = 1;
  // Original outputs every rank receives (broadcast from the stage that computes them); the
  // others stay on their stage (e.g. the KV caches a stage updates in place).
  std::vector<int> shared_outputs;
};

// Pipeline-parallel inference: rank k of `comm` runs stage k of `g` (split at `cuts`), and
// each run's batch (axis 0 of every input and output whose first dim is the symbol `batch`)
// flows through the stages in micro-batches. For inference the GPipe and 1F1B orders are the
// same (there is no backward pass): a stage forwards micro-batch i as soon as it has it.
class PipelineRunner {
 public:
  // Compiles this rank's stage with `options` (its donations are mapped to the stage's own
  // inputs and outputs). `options.comm` is the group the stage's own collectives run over:
  // the tensor-parallel ranks of this stage when both are combined (null: this process), never
  // `comm`, the pipeline.
  static Expected<std::unique_ptr<PipelineRunner>> create(const Graph& g, std::span<const ValueId> cuts,
                                                          std::shared_ptr<Communicator> comm, CompileOptions options,
                                                          PipelineRunOptions run);
  // `inputs`: every original input, on every rank; `outputs`: every original output,
  // preallocated. This stage writes the outputs it computes; the shared outputs arrive on
  // every rank.
  Status run_into(std::span<const Tensor> inputs, std::span<Tensor> outputs);
  int stage() const { return stage_; }
  int stages() const { return stages_; }

 private:
  PipelineRunner() = default;
  Stage st_;
  std::vector<int> output_owner_;  // per original output: the stage that computes it
  std::vector<char> in_batched_, out_batched_;
  std::unique_ptr<Model> model_;
  std::shared_ptr<Communicator> comm_;
  PipelineRunOptions run_;
  int stage_ = 0, stages_ = 1;
};

}  // namespace rlx::dist
