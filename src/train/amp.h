// Mixed-precision training (AMP): the autocast policy (passes/autocast.h) in the forward pass,
// f32 master weights and optimizer state, and dynamic loss scaling for f16.
//
//   AmpTrainer::create(model, {.optimizer = ...}, {.precision = Precision::f16})
//   auto r = trainer->step(images, labels, lr);   // r.loss, r.skipped
//
// The step graph takes images, labels, lr, step, loss_scale (all as in trainer.h, plus the
// scale [] f32), the parameters and the optimizer state; it differentiates loss * loss_scale
// (so small f16 gradients do not flush to zero in the narrow casts of the backward), divides
// the gradients by the scale in f32, and tests them all for inf/nan. When any is not finite
// the parameters and state are written back unchanged (the step is skipped); outputs are the
// loss (unscaled), `finite` (1 or 0, f32 []), the new parameters and the new state, updated in
// place through donation as in Trainer.
//
// The scale itself is host-side state (LossScaler), updated after each step from `finite`
// the way torch.cuda.amp.GradScaler does: halve it on overflow (and skip the step), double it
// after `growth_interval` finite steps in a row.
#pragma once

#include <memory>

#include "passes/autocast.h"
#include "trainer.h"

namespace rlx::train {

struct LossScalerConfig {
  double init_scale = 65536.0;  // 2^16, GradScaler's default
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  double min_scale = 1.0 / (1 << 24);  // the scale never falls below this
  double max_scale = 16777216.0;       // ... nor grows beyond 2^24
};

// Dynamic loss scale (host side).
class LossScaler {
 public:
  explicit LossScaler(LossScalerConfig c = {}) : c_(c), scale_(c.init_scale) {}
  // Errors name the field: scale, factors and interval must be positive, backoff < 1 < growth.
  static Status check(const LossScalerConfig& c);
  double scale() const { return scale_; }
  // After a step: gradients all finite (true) or not. Returns whether the step was applied.
  bool update(bool finite);
  int64_t skipped() const { return skipped_; }
  int64_t good_in_a_row() const { return good_; }

 private:
  LossScalerConfig c_;
  double scale_;
  int64_t good_ = 0, skipped_ = 0;
};

// The model with its forward emitted under the autocast policy (parameters unchanged, f32).
ModelDef autocast_model(ModelDef model, const passes::AutocastOptions& options);

struct AmpConfig {
  passes::Precision precision = passes::Precision::bf16;
  // Dynamic loss scaling; by default on for f16 only (bf16 has f32's exponent range).
  enum class Scaling : uint8_t { automatic, on, off } scaling = Scaling::automatic;
  LossScalerConfig scaler;
  passes::AutocastOptions::Compute compute = passes::AutocastOptions::Compute::widened;
};

struct AmpStepResult {
  float loss = 0.f;      // mean loss of the batch (unscaled)
  bool skipped = false;  // gradients had inf/nan: parameters unchanged, scale reduced
  double scale = 1.0;    // the loss scale used by this step
};

// The step graph described at the top of this file.
Expected<StepGraph> build_amp_step_graph(const ModelDef& model, const OptimizerConfig& opt, int64_t batch,
                                         const AmpConfig& amp);

class AmpTrainer {
 public:
  // config: optimizer, device and policy as for Trainer (no data parallelism or QAT here).
  static Expected<std::unique_ptr<AmpTrainer>> create(ModelDef model, TrainConfig config, AmpConfig amp);
  // One step (images f32 [B, ...], labels i32 [B]); see AmpStepResult.
  Expected<AmpStepResult> step(const Tensor& images, const Tensor& labels, double lr);
  // Accuracy and mean loss with the forward under the same autocast policy.
  Expected<EvalResult> evaluate(const Tensor& images, const Tensor& labels, int64_t batch);
  const LossScaler& scaler() const { return scaler_; }
  bool scaling() const { return scaling_; }
  int64_t steps_done() const { return steps_; }
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;

 private:
  AmpTrainer(ModelDef m, TrainConfig c, AmpConfig a) : model_(std::move(m)), config_(std::move(c)), amp_(a), scaler_(a.scaler) {}
  struct Compiled {
    std::unique_ptr<Model> model;
    CompiledVariant* variant = nullptr;
    std::vector<Tensor> inputs, outputs;
    Tensor out0, out1;
  };
  Expected<Compiled*> step_for(int64_t batch);
  Expected<Compiled*> eval_for(int64_t batch);

  ModelDef model_;
  TrainConfig config_;
  AmpConfig amp_;
  LossScaler scaler_;
  bool scaling_ = false;
  std::vector<Tensor> params_, state_;
  Tensor lr_, step_, scale_;
  int64_t steps_ = 0, applied_ = 0;
  std::map<int64_t, std::unique_ptr<Compiled>> steps_by_batch_, evals_by_batch_;
};

}  // namespace rlx::train
