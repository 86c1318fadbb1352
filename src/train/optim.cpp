#include "optim.h"

#include <cmath>

namespace rlx::train {

std::string_view optimizer_name(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::sgd: return "sgd";
    case OptimizerKind::adam: return "adam";
    case OptimizerKind::adamw: return "adamw";
  }
  return "?";
}

Expected<OptimizerKind> parse_optimizer(std::string_view name) {
  if (name == "sgd") return OptimizerKind::sgd;
  if (name == "adam") return OptimizerKind::adam;
  if (name == "adamw") return OptimizerKind::adamw;
  return error(ErrorCode::invalid_argument, "unknown optimizer '", name, "' (expected sgd, adam or adamw)");
}

int state_slots(const OptimizerConfig& c) {
  if (c.kind == OptimizerKind::sgd) return c.momentum != 0.0 ? 1 : 0;
  return 2;
}

std::vector<std::string> state_slot_names(const OptimizerConfig& c) {
  if (c.kind == OptimizerKind::sgd) return c.momentum != 0.0 ? std::vector<std::string>{"momentum"} : std::vector<std::string>{};
  return {"exp_avg", "exp_avg_sq"};
}

ParamUpdate apply_optimizer(OpBuilder& o, const OptimizerConfig& c, ValueId p, ValueId g,
                            std::span<const ValueId> state, ValueId lr, ValueId step) {
  ParamUpdate u;
  if (!o.ok()) return u;
  if (static_cast<int>(state.size()) != state_slots(c)) {
    o.fail(error(ErrorCode::invalid_argument, optimizer_name(c.kind), " takes ", state_slots(c), " state tensors per parameter, got ",
                 state.size()));
    return u;
  }
  const DType dt = o.dtype(p);
  auto k = [&](double v) { return o.scalar(v, dt); };
  // lr and step are f32 inputs; parameters of another float type get them cast
  ValueId lr_p = dt == o.dtype(lr) ? lr : o.cast(lr, dt);
  if (c.kind == OptimizerKind::sgd) {
    ValueId d = c.weight_decay != 0.0 ? o.add(g, o.mul(p, k(c.weight_decay))) : g;
    if (c.momentum == 0.0) {
      u.param = o.sub(p, o.mul(d, lr_p));
      return u;
    }
    ValueId v = o.add(o.mul(state[0], k(c.momentum)), d);
    ValueId dir = c.nesterov ? o.add(d, o.mul(v, k(c.momentum))) : v;
    u.param = o.sub(p, o.mul(dir, lr_p));
    u.state = {v};
    return u;
  }
  const bool decoupled = c.kind == OptimizerKind::adamw;
  ValueId d = (!decoupled && c.weight_decay != 0.0) ? o.add(g, o.mul(p, k(c.weight_decay))) : g;
  ValueId m = o.add(o.mul(state[0], k(c.beta1)), o.mul(d, k(1.0 - c.beta1)));
  ValueId v = o.add(o.mul(state[1], k(c.beta2)), o.mul(o.mul(d, d), k(1.0 - c.beta2)));
  // bias corrections from the step input: rank-0 math, computed once per kernel call
  ValueId t = dt == o.dtype(step) ? step : o.cast(step, dt);
  ValueId bc1 = o.sub(k(1.0), o.pow(k(c.beta1), t));
  ValueId bc2 = o.sub(k(1.0), o.pow(k(c.beta2), t));
  ValueId step_size = o.div(lr_p, bc1);
  ValueId denom = o.add(o.sqrt(o.div(v, bc2)), k(c.eps));
  ValueId base = decoupled && c.weight_decay != 0.0 ? o.mul(p, o.sub(k(1.0), o.mul(lr_p, k(c.weight_decay)))) : p;
  u.param = o.sub(base, o.mul(step_size, o.div(m, denom)));
  u.state = {m, v};
  return u;
}

double LrSchedule::at(int64_t step) const {
  double lr = base;
  switch (kind) {
    case Kind::constant: break;
    case Kind::step: lr = base * std::pow(gamma, static_cast<double>(step / std::max<int64_t>(1, step_size))); break;
    case Kind::cosine: {
      const double t = std::min(1.0, static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, total_steps)));
      lr = min_lr + (base - min_lr) * 0.5 * (1.0 + std::cos(M_PI * t));
      break;
    }
  }
  if (warmup_steps > 0 && step < warmup_steps) lr *= static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  return lr;
}

Expected<LrSchedule::Kind> parse_schedule(std::string_view name) {
  if (name == "constant") return LrSchedule::Kind::constant;
  if (name == "step") return LrSchedule::Kind::step;
  if (name == "cosine") return LrSchedule::Kind::cosine;
  return error(ErrorCode::invalid_argument, "unknown learning-rate schedule '", name, "' (expected constant, step or cosine)");
}

}  // namespace rlx::train
