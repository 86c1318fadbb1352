// Mixed-precision training (AMP): the autocast policy (passes/autocast.h) in the forward pass,
// f32 master weights and optimizer state, and dynamic loss scaling for f16. Trainer runs it
// when TrainConfig::amp asks for a narrow precision (trainer.h):
//
//   Trainer::create(model, {.optimizer = ..., .amp = {.precision = Precision::f16}})
//   float loss = *trainer->step(images, labels, lr);   // trainer->last_step().skipped
//
// The step graph then also takes the loss scale [] f32 (StepLayout::loss_scale) and returns
// `finite` [] f32 (StepLayout::finite): it differentiates loss * loss_scale (so small f16
// gradients do not flush to zero in the narrow casts of the backward), divides the gradients
// by the scale in f32 (before any data-parallel all-reduce, so every rank sums true
// gradients), and tests them all for inf/nan after the all-reduce (so every rank decides the
// same). When any is not finite the parameters and optimizer state are written back
// unchanged (the step is skipped). That is with loss scaling (f16 by default, or
// AmpConfig::scaling on); without it (bf16 by default, as torch's bf16 autocast runs without a
// GradScaler) the loss is not scaled, nothing is tested or skipped and `finite` is the constant 1.
//
// The scale itself is host-side state (LossScaler), updated after each step from `finite`
// the way torch.cuda.amp.GradScaler does: halve it on overflow (and skip the step), double it
// after `growth_interval` finite steps in a row.
#pragma once

#include <optional>
#include <string>

#include <functional>
#include <memory>

#include "passes/autocast.h"
#include "models.h"

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

// Precision::f32 (the default) is plain f32 training: no autocast, no loss scale input.
struct AmpConfig {
  passes::Precision precision = passes::Precision::f32;
  // Dynamic loss scaling; by default on for f16 only (bf16 has f32's exponent range).
  enum class Scaling : uint8_t { automatic, on, off } scaling = Scaling::automatic;
  LossScalerConfig scaler;
  // How the products are expressed (passes/autocast.h). Unset: the device's choice
  // (passes::inference_compute: the narrow form with f32-result dots where the device has fast
  // native narrow products, bf16 on AVX-512 BF16 CPUs; the widened form elsewhere), settled
  // by resolve_amp_compute when the trainer is created.
  std::optional<passes::AutocastOptions::Compute> compute;
  // Convolutions in the narrow form too (AutocastOptions::narrow_conv2d). Unset: the device's
  // choice (passes::narrow_conv2d), settled with `compute`.
  std::optional<bool> narrow_conv2d;
  // Carry the rounded weights from step to step (WeightCopy below) instead of rounding the f32
  // master weights in every step. Off: every step rounds them (the same values).
  bool weight_copies = true;
};

// Sets amp.compute and amp.narrow_conv2d, when unset, to the form `device` runs fastest
// (above). Errors: an unknown device.
Status resolve_amp_compute(AmpConfig& amp, const std::string& device);

// Whether `amp` asks for mixed precision at all (a narrow precision), and whether it scales
// the loss (Scaling::automatic: f16 only, since bf16 has f32's exponent range).
bool amp_enabled(const AmpConfig& amp);
bool amp_scaling(const AmpConfig& amp);

// The autocast options of `amp` (narrow dtype and how products are expressed).
passes::AutocastOptions amp_autocast_options(const AmpConfig& amp);

// Weight copies: the forward's rounding of a parameter (autocast's cast of it to the narrow
// type, or the widened form's round trip through it) carried from one step to the next instead
// of recomputed from the f32 master weight in every step. The step reads the copy as an input,
// and writes the rounding of the updated parameter as an output, which the scheduler stores
// from the kernel that stores the updated parameter (its second output), so no pass of its own
// reads the weight again. The trainer keeps the copies beside the parameters, as apex's O2
// level and DeepSpeed keep a 16-bit model beside f32 master weights.
struct WeightCopy {
  int param = 0;                // index into the step's parameters
  DType narrow = DType::bf16;   // the type the parameter is rounded to (f16 or bf16)
  bool widened = false;         // held as the f32 values of the round trip, else as `narrow`
  DType dtype() const { return widened ? DType::f32 : narrow; }
  bool operator==(const WeightCopy&) const = default;
};

// Rewrites a finished step graph g to carry weight copies: every cast of params[i] to f16 or
// bf16, and every widening of such a cast back to f32, is replaced by a new graph input (named
// "<parameter>#<narrow>", "#<narrow>-f32" when widened; appended to g.inputs) and its
// rounding of new_params[i] is emitted through `u` (a builder on g) into new_copies. Returns
// the copies in the order of their inputs, and the values replaced (now unused) in
// `replaced`. Parameters read otherwise too keep those reads.
std::vector<WeightCopy> carry_weight_copies(Graph& g, OpBuilder& u, const std::vector<ValueId>& params,
                                            const std::vector<ValueId>& new_params, std::vector<ValueId>& new_copies,
                                            std::vector<ValueId>& replaced);

// Writes into `copy` (of c.dtype() and param's shape) the rounding of `param` (f32) that copy c
// holds: what the step's casts compute, bit for bit.
void fill_weight_copy(const Tensor& param, const WeightCopy& c, Tensor& copy);

// Emits forward(f) with f the builder to emit into: `o`'s own when amp is not enabled, else
// one that applies the autocast policy on the way to `o`'s graph (the model's forward then
// runs under the policy, while the loss and the update emitted through `o` do not).
// Errors of forward's builder end up in `o`.
ValueId emit_under_autocast(OpBuilder& o, const AmpConfig& amp, const std::function<ValueId(OpBuilder& f)>& forward);

}  // namespace rlx::train
