// Mixed-precision training: autocast forward, loss scaling, skipped steps (amp.h).
#include "amp.h"

#include <algorithm>
#include <cmath>

#include "autodiff.h"
#include "losses.h"
#include "rlx/comm.h"

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

ModelDef autocast_model(ModelDef model, const passes::AutocastOptions& options) {
  auto inner = model.forward;
  model.forward = [inner, options](OpBuilder& o, ValueId images, std::span<const ValueId> params,
                                   std::vector<ValueId>* layer_ends) -> ValueId {
    passes::AutocastBuilder ab(o.builder(), options);
    OpBuilder narrow(ab);
    ValueId y = inner(narrow, images, params, layer_ends);
    if (!narrow.status().is_ok()) return o.fail(narrow.status());
    return y;
  };
  return model;
}

namespace {

TensorType batch_type(const ModelDef& m, int64_t batch) {
  Sizes s{batch};
  s.insert(s.end(), m.example_shape.begin(), m.example_shape.end());
  return TensorType{DType::f32, to_shape(s)};
}

passes::AutocastOptions autocast_options(const AmpConfig& a) {
  passes::AutocastOptions o;
  o.narrow = passes::precision_dtype(a.precision);
  o.compute = a.compute;
  return o;
}

std::vector<int64_t> all_axes(int rank) {
  std::vector<int64_t> a;
  for (int i = 0; i < rank; ++i) a.push_back(i);
  return a;
}

}  // namespace

Expected<StepGraph> build_amp_step_graph(const ModelDef& model, const OptimizerConfig& opt, int64_t batch,
                                         const AmpConfig& amp) {
  if (batch <= 0) return error(ErrorCode::invalid_argument, "batch size must be positive, got ", batch);
  const ModelDef narrow = amp.precision == passes::Precision::f32 ? model : autocast_model(model, autocast_options(amp));
  StepGraph sg;
  Graph& g = sg.graph;
  g.name = model.name + "_amp_train_step";
  StepLayout& L = sg.layout;
  const ValueId images = g.add_input("images", batch_type(model, batch));
  const ValueId labels = g.add_input("labels", TensorType{DType::i32, {Dim(batch)}});
  const ValueId lr = g.add_input("lr", TensorType{DType::f32, {}});
  const ValueId step = g.add_input("step", TensorType{DType::f32, {}});
  const ValueId scale = g.add_input("loss_scale", TensorType{DType::f32, {}});
  std::vector<ValueId> params;
  for (const ParamSpec& p : model.params) params.push_back(g.add_input(p.name, p.init.type()));
  const int slots = state_slots(opt);
  const auto slot_names = state_slot_names(opt);
  std::vector<std::vector<ValueId>> state(model.params.size());
  for (int s = 0; s < slots; ++s)
    for (size_t i = 0; i < model.params.size(); ++i)
      state[i].push_back(g.add_input(cat(model.params[i].name, ".", slot_names[s]), model.params[i].init.type()));
  L.first_param = 5;
  L.num_params = static_cast<int>(params.size());
  L.num_states = slots * L.num_params;
  L.first_state = L.first_param + L.num_params;
  L.first_new_param = 2;  // outputs: loss, finite, params..., state...
  L.first_new_state = L.first_new_param + L.num_params;

  GraphBuilder gb(g);
  OpBuilder o(gb);
  const ValueId logits = narrow.forward(o, images, params, nullptr);
  const ValueId loss = cross_entropy(o, logits, labels);  // f32: the policy keeps losses wide
  const ValueId scaled = o.mul(loss, scale);
  RLX_TRY(o.status().with_context("building the mixed-precision forward graph"));
  RLX_ASSIGN_OR_RETURN(Gradients gr, differentiate(g, scaled, params));
  GraphBuilder ub(g);
  OpBuilder u(ub);
  const ValueId inv = u.reciprocal(scale);
  // sum of g * 0 over every gradient: 0 when all are finite, NaN when any is inf or NaN
  ValueId probe = u.scalar(0.0, DType::f32);
  std::vector<ValueId> grads;
  for (ValueId gi : gr.grads) {
    const ValueId unscaled = u.mul(gi, inv);
    grads.push_back(unscaled);
    const int rank = static_cast<int>(u.type(gi).shape.size());
    const ValueId z = u.mul(gi, u.scalar(0.0, DType::f32));
    probe = u.add(probe, rank ? u.reduce_sum(z, all_axes(rank), false) : z);
  }
  const ValueId finite = u.op(Op::Equal, {probe, u.scalar(0.0, DType::f32)});
  std::vector<ValueId> new_params, new_state(static_cast<size_t>(L.num_states), kNoValue);
  for (size_t i = 0; i < params.size(); ++i) {
    ParamUpdate up = apply_optimizer(u, opt, params[i], grads[i], state[i], lr, step);
    RLX_TRY(u.status().with_context(cat("optimizer update of ", model.params[i].name)));
    new_params.push_back(u.where(finite, up.param, params[i]));
    for (int s = 0; s < slots; ++s) new_state[s * params.size() + i] = u.where(finite, up.state[s], state[i][s]);
  }
  const ValueId finite_f = u.cast(finite, DType::f32);
  RLX_TRY(u.status().with_context("loss unscaling and the finite-gradient test"));
  g.outputs = {loss, finite_f};
  g.outputs.insert(g.outputs.end(), new_params.begin(), new_params.end());
  g.outputs.insert(g.outputs.end(), new_state.begin(), new_state.end());
  L.first_saved = static_cast<int>(g.outputs.size());
  for (ValueId v : gr.reuse) {
    if (g.values[v].producer < 0 || std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end()) continue;
    g.outputs.push_back(v);
    ++L.num_saved;
  }
  for (int i = 0; i < L.num_params; ++i) L.donate.push_back({L.first_new_param + i, L.first_param + i});
  for (int i = 0; i < L.num_states; ++i) L.donate.push_back({L.first_new_state + i, L.first_state + i});
  return sg;
}

Expected<std::unique_ptr<AmpTrainer>> AmpTrainer::create(ModelDef model, TrainConfig config, AmpConfig amp) {
  if (!model.forward || model.params.empty()) return error(ErrorCode::invalid_argument, "the model has no forward or no parameters");
  if (config.comm && config.comm->size() > 1)
    return error(ErrorCode::unsupported, "mixed-precision training with data parallelism is not supported yet");
  if (config.qat.enabled)
    return error(ErrorCode::unsupported, "mixed precision and quantization-aware training together are not supported");
  RLX_TRY(LossScaler::check(amp.scaler));
  std::unique_ptr<AmpTrainer> t(new AmpTrainer(std::move(model), std::move(config), amp));
  t->scaling_ = amp.scaling == AmpConfig::Scaling::on ||
                (amp.scaling == AmpConfig::Scaling::automatic && amp.precision == passes::Precision::f16);
  for (const ParamSpec& p : t->model_.params) {
    if (p.init.dtype() != DType::f32)
      return error(ErrorCode::invalid_argument, "parameter ", p.name, " must be f32 (the master weights), got ",
                   dtype_name(p.init.dtype()));
    t->params_.push_back(p.init.clone());
  }
  const int slots = state_slots(t->config_.optimizer);
  for (int s = 0; s < slots; ++s)
    for (const ParamSpec& p : t->model_.params) t->state_.push_back(Tensor::zeros(p.init.dtype(), p.init.sizes()));
  t->lr_ = Tensor::zeros(DType::f32, {});
  t->step_ = Tensor::zeros(DType::f32, {});
  t->scale_ = Tensor::zeros(DType::f32, {});
  return t;
}

Expected<AmpTrainer::Compiled*> AmpTrainer::step_for(int64_t batch) {
  auto it = steps_by_batch_.find(batch);
  if (it != steps_by_batch_.end()) return it->second.get();
  RLX_ASSIGN_OR_RETURN(StepGraph sg, build_amp_step_graph(model_, config_.optimizer, batch, amp_));
  auto c = std::make_unique<Compiled>();
  CompileOptions opts;
  opts.device = config_.device;
  opts.policy = config_.policy;
  opts.donate = sg.layout.donate;
  const StepLayout layout = sg.layout;
  RLX_ASSIGN_OR_RETURN(c->model, Model::compile(std::move(sg.graph), opts));
  RLX_ASSIGN_OR_RETURN(c->variant, c->model->prepare({}));
  c->out0 = Tensor::zeros(DType::f32, {});
  c->out1 = Tensor::zeros(DType::f32, {});
  c->inputs = {Tensor(), Tensor(), lr_, step_, scale_};
  c->inputs.insert(c->inputs.end(), params_.begin(), params_.end());
  c->inputs.insert(c->inputs.end(), state_.begin(), state_.end());
  c->outputs = {c->out0, c->out1};
  c->outputs.insert(c->outputs.end(), params_.begin(), params_.end());
  c->outputs.insert(c->outputs.end(), state_.begin(), state_.end());
  const Graph& bound = c->model->graph();
  for (int i = 0; i < layout.num_saved; ++i) {
    const TensorType& t = bound.type(bound.outputs[static_cast<size_t>(layout.first_saved + i)]);
    c->outputs.push_back(Tensor::zeros(t.dtype, *static_sizes(t.shape)));
  }
  Compiled* p = c.get();
  steps_by_batch_[batch] = std::move(c);
  return p;
}

Expected<AmpStepResult> AmpTrainer::step(const Tensor& images, const Tensor& labels, double lr) {
  if (images.dtype() != DType::f32 || images.rank() != static_cast<int>(model_.example_shape.size()) + 1 ||
      labels.dtype() != DType::i32 || labels.rank() != 1 || labels.sizes()[0] != images.sizes()[0])
    return error(ErrorCode::invalid_argument, "images must be f32 [B, ", sizes_to_string(model_.example_shape),
                 "] and labels i32 [B], got ", images.type().to_string(), " and ", labels.type().to_string());
  for (size_t i = 0; i < model_.example_shape.size(); ++i)
    if (images.sizes()[i + 1] != model_.example_shape[i])
      return error(ErrorCode::invalid_argument, "images must be [B] + ", sizes_to_string(model_.example_shape), ", got ",
                   sizes_to_string(images.sizes()));
  RLX_ASSIGN_OR_RETURN(Compiled * c, step_for(images.sizes()[0]));
  AmpStepResult r;
  r.scale = scaling_ ? scaler_.scale() : 1.0;
  c->inputs[0] = images;
  c->inputs[1] = labels;
  lr_.data<float>()[0] = static_cast<float>(lr);
  step_.data<float>()[0] = static_cast<float>(applied_ + 1);  // Adam counts applied updates only
  scale_.data<float>()[0] = static_cast<float>(r.scale);
  RLX_TRY(c->variant->executable->run_into(c->inputs, c->outputs));
  c->inputs[0] = Tensor();
  c->inputs[1] = Tensor();
  ++steps_;
  r.loss = c->out0.data<float>()[0];
  const bool finite = c->out1.data<float>()[0] == 1.f;
  r.skipped = !finite;
  if (scaling_) scaler_.update(finite);
  if (finite) ++applied_;
  return r;
}

Expected<AmpTrainer::Compiled*> AmpTrainer::eval_for(int64_t batch) {
  auto it = evals_by_batch_.find(batch);
  if (it != evals_by_batch_.end()) return it->second.get();
  const ModelDef m = amp_.precision == passes::Precision::f32 ? model_ : autocast_model(model_, autocast_options(amp_));
  RLX_ASSIGN_OR_RETURN(Graph g, build_eval_graph(m, batch, false));
  auto c = std::make_unique<Compiled>();
  RLX_ASSIGN_OR_RETURN(c->model, Model::compile(std::move(g), {.device = config_.device, .policy = config_.policy}));
  RLX_ASSIGN_OR_RETURN(c->variant, c->model->prepare({}));
  c->out0 = Tensor::zeros(DType::f32, {});
  c->out1 = Tensor::zeros(DType::f32, {});
  c->outputs = {c->out0, c->out1};
  Compiled* p = c.get();
  evals_by_batch_[batch] = std::move(c);
  return p;
}

Expected<EvalResult> AmpTrainer::evaluate(const Tensor& images, const Tensor& labels, int64_t batch) {
  if (batch <= 0) return error(ErrorCode::invalid_argument, "evaluation batch must be positive");
  if (images.dtype() != DType::f32 || labels.dtype() != DType::i32 || images.rank() < 1 || labels.rank() != 1 ||
      labels.sizes()[0] != images.sizes()[0])
    return error(ErrorCode::invalid_argument, "images must be f32 [N, ...] and labels i32 [N], got ",
                 images.type().to_string(), " and ", labels.type().to_string());
  return evaluate_in_batches(images, labels, batch, params_,
                             [&](int64_t b, const std::vector<Tensor>& in) -> Expected<std::pair<double, double>> {
                               RLX_ASSIGN_OR_RETURN(Compiled * c, eval_for(b));
                               RLX_TRY(c->variant->executable->run_into(in, c->outputs));
                               return std::pair<double, double>{c->out0.data<float>()[0], c->out1.data<float>()[0]};
                             });
}

std::vector<std::pair<std::string, Tensor>> AmpTrainer::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> r;
  for (size_t i = 0; i < params_.size(); ++i) r.push_back({model_.params[i].name, params_[i]});
  return r;
}

}  // namespace rlx::train
