// Optimizers as graph-level ops, and learning-rate schedules.
//
// An optimizer's update of one parameter is emitted into the training-step graph: it reads
// the parameter, its gradient, its state tensors and two scalar inputs (the learning rate
// and the 1-based step number, both f32 rank-0 graph inputs, so a schedule changes them
// without recompiling), and produces the new parameter and new state. The step is compiled
// with CompileOptions::donate so that those outputs are written over the inputs in place;
// the update being elementwise, the scheduler fuses it with the kernel that produces the
// gradient (as the GEMM's epilogue for a weight).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "rlx/op_builder.h"

namespace rlx::train {

enum class OptimizerKind : uint8_t { sgd, adam, adamw };
std::string_view optimizer_name(OptimizerKind k);
Expected<OptimizerKind> parse_optimizer(std::string_view name);

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::sgd;
  // SGD: v = momentum v + (g + wd p); p -= lr v (nesterov: p -= lr (g + wd p + momentum v)).
  // With momentum 0 there is no state: p -= lr (g + wd p). (PyTorch's torch.optim.SGD.)
  double momentum = 0.0;
  bool nesterov = false;
  // Adam:  g += wd p; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
  //        p -= lr (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
  // AdamW: the same without the g += wd p, and p -= lr wd p first (decoupled decay).
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weight_decay = 0.0;
};

// Number of state tensors per parameter (each shaped like the parameter, zero-initialized).
int state_slots(const OptimizerConfig& c);
// Names of the state slots ("momentum"; "exp_avg", "exp_avg_sq").
std::vector<std::string> state_slot_names(const OptimizerConfig& c);

struct ParamUpdate {
  ValueId param = kNoValue;
  std::vector<ValueId> state;
};

// Emits the update of one parameter. `lr` and `step` are rank-0 f32 values (`step` is the
// 1-based number of this update; only Adam/AdamW read it).
ParamUpdate apply_optimizer(OpBuilder& o, const OptimizerConfig& c, ValueId param, ValueId grad,
                            std::span<const ValueId> state, ValueId lr, ValueId step);

// Learning rate as a function of the 0-based global step.
struct LrSchedule {
  enum class Kind : uint8_t { constant, step, cosine } kind = Kind::constant;
  double base = 0.01;
  // step: lr = base * gamma^floor(step / step_size)
  int64_t step_size = 1;
  double gamma = 0.1;
  // cosine: lr = min_lr + (base - min_lr) (1 + cos(pi step / total_steps)) / 2, then min_lr
  int64_t total_steps = 1;
  double min_lr = 0.0;
  // linear warm-up from 0 over the first warmup_steps (any kind)
  int64_t warmup_steps = 0;

  double at(int64_t step) const;
};
Expected<LrSchedule::Kind> parse_schedule(std::string_view name);

}  // namespace rlx::train
