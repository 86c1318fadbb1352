// The training step as one compiled graph, and a trainer that runs it.
//
//   auto model = rlx::train::mnist_model("mlp", seed);
//   auto trainer = rlx::train::Trainer::create(*model, {.optimizer = {.kind = OptimizerKind::adam}});
//   float loss = *(*trainer)->step(images, labels, lr);   // forward + backward + update
//
// The step graph (build_step_graph) takes, in this order,
//   images [B, example...] f32, labels [B] i32, lr [] f32, step [] f32,
//   under mixed precision (amp.h) the loss scale [] f32,
//   every parameter, then every optimizer state tensor (slot by slot, parameters in order),
//   then, under quantization-aware training (qat.h), the tracked range of every site (min [] f32,
//   max [] f32, site by site), then under mixed precision the weight copies (amp.h, WeightCopy:
//   the parameters as the forward's casts round them, StepLayout::copies),
// and returns the mean loss [] f32, under mixed precision `finite` [] f32 (1: the step was
// applied, 0: a gradient was inf/nan and nothing changed), the new parameters, the new state, the new ranges and the
// new weight copies in the same order (then any saved intermediates, see StepLayout::first_saved).
// It is compiled with CompileOptions::donate pairing each new parameter / state output with
// its input, and run with the same tensors as inputs and outputs, so parameters and state are
// updated in place; a step allocates nothing. The learning rate and the step number are
// inputs, so a schedule needs no recompilation.
//
// Batch sizes: each distinct batch size gets its own compiled step (static shapes let the
// GEMMs and fused kernels be planned exactly); the trainer caches them, so an epoch whose last
// batch is partial compiles two variants once and reuses them. Nothing is padded or masked.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "amp.h"
#include "models.h"
#include "optim.h"
#include "qat.h"
#include "rlx/compile.h"

namespace rlx::train {

// Data parallelism: every rank holds all parameters and trains on its share of each global
// batch; the step graph sums the ranks' gradients with all_reduce ops, each weighted by the
// rank's share of the global batch (so uneven shares give the global mean exactly), packed into
// buckets of at most `bucket_bytes` (one collective per bucket rather than per tensor).
struct DataParallel {
  int ranks = 1;
  int64_t bucket_bytes = int64_t{25} << 20;  // PyTorch DDP's default bucket size
  // the communicator group of the data-parallel collectives (their `group` attribute): 1 when
  // the step also has tensor-parallel collectives (group 0, dist::CommunicatorGroups)
  int group = 0;
};

struct TrainConfig {
  OptimizerConfig optimizer;
  std::string device = "cpu";
  DispatchPolicy policy;
  // The data-parallel group (rlx/comm.h); null: this process alone. Parameters are broadcast
  // from rank 0 when the trainer is created, so every rank starts from the same values.
  std::shared_ptr<dist::Communicator> comm;
  // Tensor parallelism (tensor_parallel_models.h): the ranks that hold the shards of one
  // replica, which the model's own all-reduces run over; null: none. The model is then this
  // rank's shard. With `comm` too, the step graph's collectives run over both groups.
  std::shared_ptr<dist::Communicator> tensor_parallel;
  int64_t bucket_bytes = int64_t{25} << 20;
  // Quantization-aware training (qat.h): fake_quantize where the int8 targets quantize, the
  // activation ranges tracked in the step. With data parallelism the ranks' batch ranges are
  // reduced (min of the minima, max of the maxima), so every rank tracks the global batch's.
  QatConfig qat;
  // Mixed precision (amp.h): autocast forward, f32 master weights, loss scaling for f16.
  AmpConfig amp;
};

// Inputs / outputs layout of a step graph (indices into Graph::inputs / Graph::outputs).
struct StepLayout {
  int images = 0, labels = 1, lr = 2, step = 3;
  int loss_scale = -1;                   // input, under mixed precision only
  int first_param = 4, first_state = 0;  // inputs
  int loss = 0, first_new_param = 1, first_new_state = 0;  // outputs
  int finite = -1;                       // output, under mixed precision only
  int num_params = 0, num_states = 0;
  // quantization-aware training: the sites' ranges (min, max per site), inputs and outputs
  int first_qat = 0, first_new_qat = 0, num_qat = 0;
  // mixed precision: the weight copies (amp.h), inputs and outputs, one per entry of `copies`
  int first_copy = 0, first_new_copy = 0;
  std::vector<WeightCopy> copies;
  // After the new state: values autodiff asked to materialize (Gradients::reuse), outputs
  // only so that the scheduler keeps them in memory instead of recomputing them per use.
  int first_saved = 0, num_saved = 0;
  std::vector<std::pair<int, int>> donate;  // (output, input)
};

struct StepGraph {
  Graph graph;
  StepLayout layout;
};

// The training step of `model` for batch size `batch` (see the top of this file).
// With dp.ranks > 1 the graph is one rank's step of data-parallel training (DataParallel):
// `batch` is this rank's share, the returned loss is the global batch's mean.
// With qat.enabled the forward carries fake_quantize (qat.h) and the tracked ranges.
// With amp_enabled(amp) the forward runs under autocast and the loss is scaled (amp.h).
Expected<StepGraph> build_step_graph(const ModelDef& model, const OptimizerConfig& opt, int64_t batch,
                                     const DataParallel& dp = {}, const QatConfig& qat = {},
                                     const AmpConfig& amp = {});
// The evaluation graph: inputs images, labels, parameters; outputs the sum of per-example
// cross-entropy [] f32 and the number of correct argmax predictions [] f32. With `qat`, the
// forward carries fake_quantize and, after the parameters, takes each site's scale and zero
// point (f32 [] each, site by site). With amp_enabled(amp) the forward runs under autocast.
Expected<Graph> build_eval_graph(const ModelDef& model, int64_t batch, bool qat = false, const AmpConfig& amp = {});

struct EvalResult {
  double loss = 0.0;  // mean cross-entropy
  int64_t correct = 0, count = 0;
  double accuracy() const { return count ? static_cast<double>(correct) / static_cast<double>(count) : 0.0; }
};

// Runs an evaluation graph for batch size b on `inputs` ({images, labels} views of one batch,
// then the extra inputs) and returns its two outputs: summed loss and number correct.
using EvalBatchFn = std::function<Expected<std::pair<double, double>>(int64_t b, const std::vector<Tensor>& inputs)>;
// Evaluates a dataset `batch` examples at a time (the last batch partial): the batches are
// views into images [N, ...] f32 and labels [N] i32 (no copy), followed by `extra` (the
// parameters, ...). The loss is averaged over all examples.
Expected<EvalResult> evaluate_in_batches(const Tensor& images, const Tensor& labels, int64_t batch,
                                         const std::vector<Tensor>& extra, const EvalBatchFn& run);

class Trainer {
 public:
  static Expected<std::unique_ptr<Trainer>> create(ModelDef model, TrainConfig config);

  // One step on a batch: images [B, example...] f32, labels [B] i32 (values in [0, classes)).
  // Returns the batch's mean loss (before the update); with data parallelism, this rank's
  // share of the global batch, and the global batch's mean loss.
  Expected<float> step(const Tensor& images, const Tensor& labels, double lr);
  // What the last step() did (mixed precision may skip a step whose gradients overflowed).
  struct StepInfo {
    float loss = 0.f;      // mean loss of the batch (unscaled)
    bool skipped = false;  // gradients had inf/nan: parameters unchanged, loss scale reduced
    double scale = 1.0;    // the loss scale the step used (1 without loss scaling)
  };
  const StepInfo& last_step() const { return last_; }
  // Mixed precision: the loss scaler, and whether it is in use (f16 by default).
  const LossScaler& scaler() const { return scaler_; }
  bool scaling() const { return scaling_; }
  // Compiles the step for batch size b ahead of time (so a timed loop does not include it).
  Status prepare(int64_t batch);
  // Accuracy and mean loss over a dataset, `batch` images at a time (last batch partial).
  Expected<EvalResult> evaluate(const Tensor& images, const Tensor& labels, int64_t batch);

  const ModelDef& model() const { return model_; }
  const TrainConfig& config() const { return config_; }
  int64_t steps_done() const { return steps_; }
  // Current parameters, updated in place by step(); and the optimizer state. Under mixed
  // precision the step also keeps rounded copies of the weights (AmpConfig::weight_copies);
  // they are rebuilt from the parameters before the next step after each call, so a caller may
  // change the tensors this returns until it calls step() (a write through a tensor kept from
  // an earlier call, after a step, is not seen by the copies: call named_parameters() again).
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  const std::vector<Tensor>& state() const { return state_; }
  // Quantization-aware training: the sites (qat_sites) and their tracked ranges (zeros before
  // the first step), and the tensors a checkpoint carries for them ("qat.<site>.scale",
  // ".zero_point", ".min", ".max"; qat.h). Empty without QAT.
  const std::vector<std::string>& qat_sites() const { return qat_sites_; }
  std::vector<QatRange> qat_ranges() const;
  std::vector<std::pair<std::string, Tensor>> qat_tensors() const;
  // The compiled step for batch size b (compiled on first use), for reports and tests.
  Expected<const CompiledVariant*> step_variant(int64_t batch);

 private:
  Trainer(ModelDef m, TrainConfig c) : model_(std::move(m)), config_(std::move(c)), scaler_(config_.amp.scaler) {}
  struct Compiled {
    std::unique_ptr<Model> model;
    CompiledVariant* variant = nullptr;
    std::vector<Tensor> inputs, outputs;
    Tensor scalar_out;
    Tensor scalar_out2;  // evaluation: the number correct; mixed-precision step: `finite`
    std::vector<Tensor> saved;
  };
  Expected<Compiled*> step_for(int64_t batch);
  Expected<Compiled*> eval_for(int64_t batch);

  ModelDef model_;
  TrainConfig config_;
  std::vector<Tensor> params_, state_;
  std::vector<std::string> qat_sites_;
  std::vector<Tensor> qat_state_;  // min, max per site, updated in place by step()
  // Weight copies (StepLayout::copies), updated in place by step(); the same for every batch
  // size. Stale: to be rebuilt from params_ before the next step (on creation, and after
  // named_parameters() handed the parameters out).
  std::vector<WeightCopy> copy_layout_;
  std::vector<Tensor> copies_;
  mutable bool copies_stale_ = true;
  Tensor lr_, step_, scale_;
  int64_t steps_ = 0, applied_ = 0;  // steps run, steps whose update was applied
  LossScaler scaler_;
  bool scaling_ = false;
  StepInfo last_;
  std::map<int64_t, std::unique_ptr<Compiled>> steps_by_batch_, evals_by_batch_;
};

}  // namespace rlx::train
