// Mixed-precision training: the loss scaler and the autocast forward (amp.h; the step graph is
// built by build_step_graph in trainer.cpp).
#include "amp.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

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
  if ((amp.compute && amp.narrow_conv2d) || !amp_enabled(amp)) return Status::ok();
  RLX_ASSIGN_OR_RETURN(auto dev, get_device(device));
  const DType narrow = passes::precision_dtype(amp.precision);
  if (!amp.compute) amp.compute = passes::inference_compute(dev->info(), narrow);
  if (!amp.narrow_conv2d) amp.narrow_conv2d = passes::narrow_conv2d(dev->info(), narrow);
  return Status::ok();
}

namespace {

// The input of v's producer when it is a Cast to `to`, else kNoValue.
ValueId cast_source(const Graph& g, ValueId v, DType to) {
  const int p = g.values[v].producer;
  if (p < 0 || g.nodes[p].op != Op::Cast || g.type(v).dtype != to) return kNoValue;
  return g.nodes[p].inputs[0];
}

}  // namespace

std::vector<WeightCopy> carry_weight_copies(Graph& g, OpBuilder& u, const std::vector<ValueId>& params,
                                            const std::vector<ValueId>& new_params, std::vector<ValueId>& new_copies,
                                            std::vector<ValueId>& replaced) {
  std::vector<WeightCopy> copies;
  // the copy each rounded value becomes: (param index, narrow type, widened) -> input
  std::map<std::tuple<int, DType, bool>, ValueId> inputs;
  std::map<ValueId, ValueId> replace;
  for (size_t i = 0; i < params.size(); ++i) {
    if (g.type(params[i]).dtype != DType::f32) continue;
    for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
      const Node& n = g.nodes[ni];
      if (n.op != Op::Cast || n.inputs[0] != params[i]) continue;
      const ValueId narrow = n.outputs[0];
      const DType nt = g.type(narrow).dtype;
      if (nt != DType::f16 && nt != DType::bf16) continue;
      auto copy_for = [&](bool widened) {
        auto [it, fresh] = inputs.try_emplace({static_cast<int>(i), nt, widened}, kNoValue);
        if (fresh) {
          const WeightCopy c{static_cast<int>(i), nt, widened};
          TensorType t = g.type(params[i]);
          t.dtype = c.dtype();
          it->second = g.add_input(cat(g.values[params[i]].name, "#", dtype_name(nt), widened ? "-f32" : ""), t);
          copies.push_back(c);
          const ValueId r = u.cast(new_params[i], nt);
          new_copies.push_back(widened ? u.cast(r, DType::f32) : r);
        }
        return it->second;
      };
      // each widening of the cast is replaced by the widened copy; the cast itself, when
      // anything else reads it, by the narrow one
      bool narrow_read = false;
      for (const Node& c : g.nodes) {
        for (ValueId in : c.inputs) {
          if (in != narrow) continue;
          const ValueId w = c.outputs[0];
          if (cast_source(g, w, DType::f32) == narrow) {
            replace[w] = copy_for(true);
          } else {
            narrow_read = true;
          }
        }
      }
      if (std::find(g.outputs.begin(), g.outputs.end(), narrow) != g.outputs.end()) narrow_read = true;
      if (narrow_read) replace[narrow] = copy_for(false);
    }
  }
  for (Node& n : g.nodes)
    for (ValueId& in : n.inputs)
      if (auto it = replace.find(in); it != replace.end()) in = it->second;
  for (ValueId& o : g.outputs)
    if (auto it = replace.find(o); it != replace.end()) o = it->second;
  for (const auto& [from, to] : replace) replaced.push_back(from);
  return copies;
}

void fill_weight_copy(const Tensor& param, const WeightCopy& c, Tensor& copy) {
  const float* p = param.data<float>();
  const int64_t n = param.numel();
  const bool f16 = c.narrow == DType::f16;
  if (c.widened) {
    float* d = copy.data<float>();
    for (int64_t i = 0; i < n; ++i) d[i] = passes::round_through(p[i], c.narrow);
    return;
  }
  uint16_t* d = copy.data<uint16_t>();
  for (int64_t i = 0; i < n; ++i) d[i] = f16 ? f32_to_f16(p[i]) : f32_to_bf16(p[i]);
}

passes::AutocastOptions amp_autocast_options(const AmpConfig& amp) {
  passes::AutocastOptions o;
  o.narrow = passes::precision_dtype(amp.precision);
  o.compute = amp.compute.value_or(passes::AutocastOptions::Compute::widened);
  o.narrow_conv2d = amp.narrow_conv2d.value_or(true);
  return o;
}

}  // namespace rlx::train
