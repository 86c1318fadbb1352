// Mixed-precision training: the loss scaler and the autocast forward (amp.h; the step graph is
// built by build_step_graph in trainer.cpp).
#include "amp.h"

#include <algorithm>
#include <cmath>

#include "rlx/device.h"

namespace rlx::train {

Status LossScaler::check(const LossScalerConfig& c) {
  if (!(c.init_scale > 0) || !std::isfinite(c.init_scale))
    return error(ErrorCode::invalid_argument, "loss scaler: init_scale must be positive and finite, got ", c.init_scale);
  if (!(c.growth_factor > 1)) return error(ErrorCode::invalid_argument, "loss scaler: growth_factor must be > 1, got ", c.growth_factor);
  if (!(c.backoff_factor > 0 && c.backoff_factor < 1))
    return error(ErrorCode::invalid_argument, "loss scaler: backoff_factor must be in (0, 1), got ", c.backoff_factor);
  if (c.growth_interval <= 0)
    return error(ErrorCode::invalid_argument, "loss scaler: growth_interval must be positive, got ", c.growth_interval);
  if (!(c.min_scale > 0 && c.min_scale <= c.max_scale))
    return error(ErrorCode::invalid_argument, "loss scaler: need 0 < min_scale <= max_scale");
  return Status::ok();
}

bool LossScaler::update(bool finite) {
  if (!finite) {
    scale_ = std::max(c_.min_scale, scale_ * c_.backoff_factor);
    good_ = 0;
    ++skipped_;
    return false;
  }
  if (++good_ >= c_.growth_interval) {
    scale_ = std::min(c_.max_scale, scale_ * c_.growth_factor);
    good_ = 0;
  }
  return true;
}

bool amp_enabled(const AmpConfig& amp) { return amp.precision != passes::Precision::f32; }

bool amp_scaling(const AmpConfig& amp) {
  return amp_enabled(amp) && (amp.scaling == AmpConfig::Scaling::on ||
                              (amp.scaling == AmpConfig::Scaling::automatic && amp.precision == passes::Precision::f16));
}

ValueId emit_under_autocast(OpBuilder& o, const AmpConfig& amp, const std::function<ValueId(OpBuilder& f)>& forward) {
  if (!amp_enabled(amp)) return forward(o);
  passes::AutocastBuilder ab(o.builder(), amp_autocast_options(amp));
  OpBuilder f(ab);
  const ValueId y = forward(f);
  if (!f.ok()) return o.fail(f.status());
  return y;
}

Status resolve_amp_compute(AmpConfig& amp, const std::string& device) {
  if (amp.compute || !amp_enabled(amp)) return Status::ok();
  RLX_ASSIGN_OR_RETURN(auto dev, get_device(device));
  amp.compute = passes::inference_compute(dev->info(), passes::precision_dtype(amp.precision));
  return Status::ok();
}

passes::AutocastOptions amp_autocast_options(const AmpConfig& amp) {
  passes::AutocastOptions o;
  o.narrow = passes::precision_dtype(amp.precision);
  o.compute = amp.compute.value_or(passes::AutocastOptions::Compute::widened);
  return o;
}

}  // namespace rlx::train
