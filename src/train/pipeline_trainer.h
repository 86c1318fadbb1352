// Pipeline-parallel training (docs/distributed.md): rank k of the communicator runs stage k of
// the model, cut at its layer ends (ModelDef::forward's layer_ends) into as many stages as
// ranks with the stage-split pass (src/runtime/pipeline.h). Each global batch is split into
// micro-batches that flow through the stages in one of two schedules:
//   gpipe  every micro-batch forward, then every micro-batch backward;
//   1f1b   (PipeDream-flush) a warm-up of forwards, then one forward and one backward in turn,
//          so a stage holds at most (stages - k) micro-batches' activations.
// A stage's backward graph recomputes its forward from the saved input activation (stage-level
// activation recomputation) rather than keeping every intermediate. Gradients are accumulated
// over the micro-batches, weighted by their share of the batch, so a step equals the
// single-process step on the same global batch; then every stage updates its own parameters
// with the optimizer (a compiled graph, in place).
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "rlx/comm.h"
#include "train/trainer.h"

namespace rlx::train {

enum class PipelineSchedule : uint8_t { gpipe, one_f_one_b };
std::string_view schedule_name(PipelineSchedule s);  // "gpipe", "1f1b"
Expected<PipelineSchedule> parse_pipeline_schedule(std::string_view name);

struct PipelineConfig {
  int micro_batches = 4;
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  // Data parallelism across pipelines (rlx train --dp D --pp P): the group of the D ranks that
  // run this same stage, one per pipeline; null: one pipeline. Each pipeline steps on its share
  // of the global batch; a stage's accumulated gradients are weighted by that share and
  // summed over the group before its update, so a step still equals the single-process step.
  std::shared_ptr<dist::Communicator> data_parallel;
  // (Tensor parallelism inside each stage, rlx train --tp T --pp P [--dp D]: TrainConfig::tensor_parallel,
  // the T ranks of this stage; the model is then this rank's shard, and the stage graphs'
  // all-reduces run over that group.)
};

class PipelineTrainer {
 public:
  // Stage comm->rank() of a comm->size()-stage pipeline. Errors when the model has fewer
  // layers than stages or a parameter is read by two stages.
  static Expected<std::unique_ptr<PipelineTrainer>> create(ModelDef model, TrainConfig config,
                                                           std::shared_ptr<dist::Communicator> comm,
                                                           PipelineConfig pipeline);
  ~PipelineTrainer();

  // One step on a global batch (the same images [B, ...] and labels [B] on every rank of the
  // pipeline; each stage reads what it needs; with data parallelism, this pipeline's share of
  // the global batch). Returns the global batch's mean loss, on every rank.
  Expected<float> step(const Tensor& images, const Tensor& labels, double lr);
  // Every parameter of the model in the model's order, on every rank (each stage broadcasts
  // its own): for evaluation and saving.
  Expected<std::vector<std::pair<std::string, Tensor>>> all_parameters();
  // Names of the parameters this stage holds.
  std::vector<std::string> stage_parameters() const;
  int64_t steps_done() const { return steps_; }

 private:
  struct Impl;
  explicit PipelineTrainer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  int64_t steps_ = 0;
};

}  // namespace rlx::train
