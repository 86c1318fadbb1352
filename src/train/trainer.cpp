#include "trainer.h"

#include <algorithm>
#include <cstring>

#include "autodiff.h"
#include "dist/collective_ops.h"
#include "rlx/comm.h"
#include "losses.h"
#include "passes/graph_passes.h"
#include "qat.h"

namespace rlx::train {
namespace {

Tensor f32_scalar(double v) {
  Tensor t = Tensor::zeros(DType::f32, {});
  t.data<float>()[0] = static_cast<float>(v);
  return t;
}

TensorType batch_type(const ModelDef& m, int64_t batch) {
  Sizes s{batch};
  s.insert(s.end(), m.example_shape.begin(), m.example_shape.end());
  return TensorType{DType::f32, to_shape(s)};
}

Status check_batch(const ModelDef& m, const Tensor& images, const Tensor& labels) {
  if (images.dtype() != DType::f32 || images.rank() != static_cast<int>(m.example_shape.size()) + 1)
    return error(ErrorCode::invalid_argument, "images must be f32 [B, ", sizes_to_string(m.example_shape),
                 "...], got ", images.type().to_string());
  for (size_t i = 0; i < m.example_shape.size(); ++i)
    if (images.sizes()[i + 1] != m.example_shape[i])
      return error(ErrorCode::invalid_argument, "images must be [B] + ", sizes_to_string(m.example_shape), ", got ",
                   sizes_to_string(images.sizes()));
  if (labels.dtype() != DType::i32 || labels.rank() != 1 || labels.sizes()[0] != images.sizes()[0])
    return error(ErrorCode::invalid_argument, "labels must be i32 [", images.sizes()[0], "], got ", labels.type().to_string());
  return Status::ok();
}

}  // namespace

namespace {

// Data parallelism inside the step graph: each gradient weighted by this rank's share of the
// global batch (batch / the all_reduce of every rank's batch), then summed over ranks in
// buckets: gradients flattened and concatenated up to bucket_bytes, one all_reduce per
// bucket, split and reshaped back. Buckets go in reverse parameter order (the last layer's
// gradients, which the backward pass produces first, fill the first bucket), so that with the
// collectives issued early (sched::order_collectives_early) each bucket's all-reduce runs
// while the backward pass computes the earlier layers' gradients. Returns the global mean loss.
ValueId all_reduce_gradients(OpBuilder& o, const DataParallel& dp, int64_t batch, ValueId loss,
                             std::vector<ValueId>& grads) {
  Attrs sum{{"reduce", std::string("sum")}};
  if (dp.group != 0) sum.set("group", static_cast<int64_t>(dp.group));
  ValueId total = o.op(Op::AllReduce, {o.scalar(static_cast<double>(batch), DType::f32)}, sum);
  ValueId share = o.div(o.scalar(static_cast<double>(batch), DType::f32), total);
  size_t end = grads.size();  // buckets take grads[i, end), walking down
  while (end > 0) {
    std::vector<ValueId> flat;
    std::vector<int64_t> lens;
    int64_t bytes = 0;
    size_t i = end;
    for (; i > 0; --i) {
      const int64_t n = numel(*static_sizes(o.type(grads[i - 1]).shape));
      if (!flat.empty() && bytes + n * 4 > dp.bucket_bytes) break;
      flat.insert(flat.begin(), o.reshape(grads[i - 1], {-1}));
      lens.insert(lens.begin(), n);
      bytes += n * 4;
    }
    const size_t first = i;
    ValueId bucket = flat.size() == 1 ? flat[0] : o.concat(flat, 0);
    bucket = o.op(Op::AllReduce, {o.mul(bucket, share)}, sum);
    std::vector<ValueId> parts = flat.size() == 1 ? std::vector<ValueId>{bucket} : o.split(bucket, 0, lens);
    for (size_t k = 0; k < parts.size(); ++k) {
      const Sizes shape = *static_sizes(o.type(grads[first + k]).shape);
      grads[first + k] = o.reshape(parts[k], std::vector<int64_t>(shape.begin(), shape.end()));
    }
    end = first;
  }
  return o.op(Op::AllReduce, {o.mul(loss, share)}, sum);
}

// The forward of `model` (through fake_quantize when site_fn is given), emitted under the
// autocast policy with mixed precision. QAT's builder sees the model's ops first, so the narrow
// casts wrap the fake-quantized operands (the other order would hide the weights from it).
ValueId emit_forward(OpBuilder& o, const ModelDef& model, ValueId images, std::span<const ValueId> params,
                     const QatSiteFn* site_fn, const AmpConfig& amp) {
  return emit_under_autocast(o, amp, [&](OpBuilder& f) {
    return site_fn ? qat_forward(f, model, images, params, *site_fn) : model.forward(f, images, params, nullptr);
  });
}

// bool []: true when every gradient is finite. The sum of g * 0 over all of them is 0 when all
// are finite and NaN when any is inf or NaN.
// A matrix is summed over its last axis first: the row sums are a kernel over rows that the
// threads share, where one sum over everything is a single-threaded loop (27 us of the MNIST
// MLP's 410 us f16 step for its 784 x 128 weight gradient).
ValueId all_finite(OpBuilder& o, const std::vector<ValueId>& grads) {
  ValueId probe = o.scalar(0.0, DType::f32);
  for (ValueId gi : grads) {
    ValueId z = o.mul(gi, o.scalar(0.0, DType::f32));
    if (o.rank(z) >= 2) z = o.reduce_sum(z, {o.rank(z) - 1}, false);
    std::vector<int64_t> axes;
    for (int a = 0; a < o.rank(z); ++a) axes.push_back(a);
    probe = o.add(probe, axes.empty() ? z : o.reduce_sum(z, axes, false));
  }
  return o.op(Op::Equal, {probe, o.scalar(0.0, DType::f32)});
}

}  // namespace

Expected<StepGraph> build_step_graph(const ModelDef& model, const OptimizerConfig& opt, int64_t batch,
                                     const DataParallel& dp, const QatConfig& qat, const AmpConfig& amp) {
  if (dp.ranks < 1) return error(ErrorCode::invalid_argument, "data parallelism needs at least one rank");
  if (qat.enabled && !(qat.momentum > 0 && qat.momentum <= 1))
    return error(ErrorCode::invalid_argument, "the QAT range momentum must be in (0, 1], got ", qat.momentum);
  if (batch <= 0) return error(ErrorCode::invalid_argument, "batch size must be positive, got ", batch);
  const bool mixed = amp_enabled(amp);
  if (mixed)
    for (const ParamSpec& p : model.params)
      if (p.init.dtype() != DType::f32)
        return error(ErrorCode::invalid_argument, "mixed precision: parameter ", p.name,
                     " must be f32 (the master weights), got ", dtype_name(p.init.dtype()));
  StepGraph sg;
  Graph& g = sg.graph;
  g.name = model.name + (mixed ? "_amp_train_step" : "_train_step");
  StepLayout& L = sg.layout;
  const ValueId images = g.add_input("images", batch_type(model, batch));
  const ValueId labels = g.add_input("labels", TensorType{DType::i32, {Dim(batch)}});
  const ValueId lr = g.add_input("lr", TensorType{DType::f32, {}});
  const ValueId step = g.add_input("step", TensorType{DType::f32, {}});
  const ValueId scale = mixed ? g.add_input("loss_scale", TensorType{DType::f32, {}}) : kNoValue;
  if (mixed) {
    L.loss_scale = 4;
    L.first_param = 5;
    L.finite = 1;
    L.first_new_param = 2;
  }
  std::vector<ValueId> params;
  for (const ParamSpec& p : model.params) params.push_back(g.add_input(p.name, p.init.type()));
  const int slots = state_slots(opt);
  const auto slot_names = state_slot_names(opt);
  std::vector<std::vector<ValueId>> state(model.params.size());
  for (int s = 0; s < slots; ++s)
    for (size_t i = 0; i < model.params.size(); ++i)
      state[i].push_back(g.add_input(cat(model.params[i].name, ".", slot_names[s]), model.params[i].init.type()));
  std::vector<ValueId> qat_in, qat_out;  // min, max per site
  if (qat.enabled) {
    RLX_ASSIGN_OR_RETURN(std::vector<std::string> sites, qat_sites(model));
    for (const std::string& site : sites)
      for (const char* what : {"min", "max"}) qat_in.push_back(g.add_input(qat_tensor_name(site, what), TensorType{DType::f32, {}}));
    qat_out.resize(qat_in.size(), kNoValue);
  }
  L.num_params = static_cast<int>(params.size());
  L.num_states = slots * L.num_params;
  L.first_state = L.first_param + L.num_params;
  L.first_new_state = L.first_new_param + L.num_params;
  L.num_qat = static_cast<int>(qat_in.size());
  L.first_qat = L.first_state + L.num_states;
  L.first_new_qat = L.first_new_state + L.num_states;

  GraphBuilder gb(g);
  OpBuilder o(gb);
  ValueId logits = kNoValue;
  if (qat.enabled) {
    QatSiteFn track = [&](OpBuilder& b, int site, ValueId x) {
      const size_t k = static_cast<size_t>(site) * 2;
      if (k + 1 >= qat_in.size()) {  // qat_sites and this forward disagree: cannot happen for a pure forward
        b.fail(error(ErrorCode::internal, "QAT site ", site, " was not found when the sites were counted"));
        return std::pair{kNoValue, kNoValue};
      }
      return qat_track_range(b, x, qat_in[k], qat_in[k + 1], step, qat.momentum, &qat_out[k], &qat_out[k + 1],
                             dp.ranks > 1 ? dp.group : -1);
    };
    logits = emit_forward(o, model, images, params, &track, amp);
  } else {
    logits = emit_forward(o, model, images, params, nullptr, amp);
  }
  ValueId loss = cross_entropy(o, logits, labels);  // f32: the autocast policy keeps losses wide
  RLX_TRY(o.status().with_context("building the forward graph"));
  // Loss scaling and the finite test only where the scaler runs (f16, or asked for): bf16 has
  // f32's range, and skipping a step on a non-finite gradient is the scaler's rule, not
  // autocast's (as in torch, whose bf16 autocast runs without a GradScaler). Without them the
  // step's "finite" output is a constant 1 and the updates fuse as in f32.
  const bool scaled = amp_scaling(amp);
  RLX_ASSIGN_OR_RETURN(Gradients gr, differentiate(g, scaled ? o.mul(loss, scale) : loss, params));
  std::vector<ValueId> grads = gr.grads;
  std::vector<ValueId> new_params, new_state(static_cast<size_t>(L.num_states), kNoValue);
  GraphBuilder ub(g);
  OpBuilder u(ub);
  if (scaled) {  // unscale in f32 before the ranks sum the gradients
    const ValueId inv = u.reciprocal(scale);
    for (ValueId& gi : grads) gi = u.mul(gi, inv);
  }
  if (dp.ranks > 1) {
    loss = all_reduce_gradients(u, dp, batch, loss, grads);
    RLX_TRY(u.status().with_context("data-parallel gradient all-reduce"));
  }
  // The finite test reads the scaled gradients, before they are unscaled, as torch's
  // GradScaler does (1 / scale is finite and an f16 gradient times it stays in f32's range,
  // so the answer is the same; and a scaled f16 gradient * 0 is what the kernel builder
  // computes without rounding). With data parallelism it reads the all-reduced sums instead,
  // so that every rank skips together.
  const ValueId finite = scaled ? all_finite(u, dp.ranks > 1 ? grads : gr.grads) : kNoValue;
  for (size_t i = 0; i < params.size(); ++i) {
    ParamUpdate up = apply_optimizer(u, opt, params[i], grads[i], state[i], lr, step);
    RLX_TRY(u.status().with_context(cat("optimizer update of ", model.params[i].name)));
    new_params.push_back(scaled ? u.where(finite, up.param, params[i]) : up.param);
    for (int s = 0; s < slots; ++s)
      new_state[s * params.size() + i] = scaled ? u.where(finite, up.state[s], state[i][s]) : up.state[s];
  }
  RLX_TRY(u.status().with_context("the optimizer updates"));
  g.outputs = {loss};
  if (mixed) g.outputs.push_back(scaled ? u.cast(finite, DType::f32) : u.scalar(1.0, DType::f32));
  g.outputs.insert(g.outputs.end(), new_params.begin(), new_params.end());
  g.outputs.insert(g.outputs.end(), new_state.begin(), new_state.end());
  g.outputs.insert(g.outputs.end(), qat_out.begin(), qat_out.end());
  std::vector<ValueId> new_copies, replaced;
  if (mixed && amp.weight_copies) {
    L.first_copy = static_cast<int>(g.inputs.size());
    L.first_new_copy = static_cast<int>(g.outputs.size());
    L.copies = carry_weight_copies(g, u, params, new_params, new_copies, replaced);
    RLX_TRY(u.status().with_context("the weight copies"));
    g.outputs.insert(g.outputs.end(), new_copies.begin(), new_copies.end());
  }
  L.first_saved = static_cast<int>(g.outputs.size());
  for (ValueId v : gr.reuse) {
    if (g.values[v].producer < 0 || std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end()) continue;
    if (std::find(replaced.begin(), replaced.end(), v) != replaced.end()) continue;  // a copy now
    g.outputs.push_back(v);
    ++L.num_saved;
  }
  for (int i = 0; i < L.num_params; ++i) L.donate.push_back({L.first_new_param + i, L.first_param + i});
  for (int i = 0; i < L.num_states; ++i) L.donate.push_back({L.first_new_state + i, L.first_state + i});
  for (int i = 0; i < L.num_qat; ++i) L.donate.push_back({L.first_new_qat + i, L.first_qat + i});
  for (int i = 0; i < static_cast<int>(L.copies.size()); ++i) L.donate.push_back({L.first_new_copy + i, L.first_copy + i});
  if (!L.copies.empty()) passes::eliminate_dead_code(g);  // the forward's roundings the copies replaced
  return sg;
}

Expected<Graph> build_eval_graph(const ModelDef& model, int64_t batch, bool qat, const AmpConfig& amp) {
  Graph g;
  g.name = model.name + "_eval";
  const ValueId images = g.add_input("images", batch_type(model, batch));
  const ValueId labels = g.add_input("labels", TensorType{DType::i32, {Dim(batch)}});
  std::vector<ValueId> params;
  for (const ParamSpec& p : model.params) params.push_back(g.add_input(p.name, p.init.type()));
  std::vector<ValueId> qp;  // scale, zero point per site
  if (qat) {
    RLX_ASSIGN_OR_RETURN(std::vector<std::string> sites, qat_sites(model));
    for (const std::string& site : sites)
      for (const char* what : {"scale", "zero_point"}) qp.push_back(g.add_input(qat_tensor_name(site, what), TensorType{DType::f32, {}}));
  }
  GraphBuilder gb(g);
  OpBuilder o(gb);
  ValueId logits = kNoValue;
  if (qat) {
    QatSiteFn given = [&](OpBuilder&, int site, ValueId) {
      const size_t k = static_cast<size_t>(site) * 2;
      return k + 1 < qp.size() ? std::pair{qp[k], qp[k + 1]} : std::pair{kNoValue, kNoValue};
    };
    logits = emit_forward(o, model, images, params, &given, amp);
  } else {
    logits = emit_forward(o, model, images, params, nullptr, amp);
  }
  ValueId loss_sum = o.reduce_sum(cross_entropy_per_example(o, logits, labels), {0}, false);
  ValueId pred = o.cast(o.argmax(logits, 1, false), DType::i32);
  ValueId correct = o.reduce_sum(o.cast(o.op(Op::Equal, {pred, labels}), DType::f32), {0}, false);
  RLX_TRY(o.status());
  g.outputs = {loss_sum, correct};
  return g;
}

namespace {

bool several(const std::shared_ptr<dist::Communicator>& c) { return c && c->size() > 1; }

// What the step graph's collectives run over: the data-parallel group, the tensor-parallel
// group, or both (tensor-parallel group 0, data-parallel group 1).
std::shared_ptr<dist::Communicator> step_communicator(const TrainConfig& c) {
  if (!several(c.tensor_parallel)) return c.comm;
  if (!several(c.comm)) return c.tensor_parallel;
  return std::make_shared<dist::CommunicatorGroups>(std::vector<std::shared_ptr<dist::Communicator>>{c.tensor_parallel, c.comm});
}

}  // namespace

Expected<std::unique_ptr<Trainer>> Trainer::create(ModelDef model, TrainConfig config) {
  if (!model.forward || model.params.empty()) return error(ErrorCode::invalid_argument, "the model has no forward or no parameters");
  std::unique_ptr<Trainer> t(new Trainer(std::move(model), std::move(config)));
  for (const ParamSpec& p : t->model_.params) {
    if (!is_float(p.init.dtype())) return error(ErrorCode::invalid_argument, "parameter ", p.name, " is not a float tensor");
    t->params_.push_back(p.init.clone());
  }
  const int slots = state_slots(t->config_.optimizer);
  for (int s = 0; s < slots; ++s)
    for (const ParamSpec& p : t->model_.params) t->state_.push_back(Tensor::zeros(p.init.dtype(), p.init.sizes()));
  if (amp_enabled(t->config_.amp)) {
    RLX_TRY(LossScaler::check(t->config_.amp.scaler));
    RLX_TRY(resolve_amp_compute(t->config_.amp, t->config_.device));
    t->scaling_ = amp_scaling(t->config_.amp);
  }
  if (t->config_.qat.enabled) {
    if (several(t->config_.tensor_parallel))
      return error(ErrorCode::unsupported, "quantization-aware training with tensor parallelism is not supported yet");
    RLX_ASSIGN_OR_RETURN(t->qat_sites_, train::qat_sites(t->model_));
    for (size_t i = 0; i < 2 * t->qat_sites_.size(); ++i) t->qat_state_.push_back(Tensor::zeros(DType::f32, {}));
  }
  t->lr_ = Tensor::zeros(DType::f32, {});
  t->step_ = Tensor::zeros(DType::f32, {});
  t->scale_ = Tensor::zeros(DType::f32, {});
  // data parallelism: every rank starts from rank 0's parameters
  if (t->config_.comm && t->config_.comm->size() > 1)
    for (Tensor& p : t->params_)
      RLX_TRY(t->config_.comm->broadcast(p.bytes(), p.numel(), p.dtype(), 0));
  return t;
}

Expected<Trainer::Compiled*> Trainer::step_for(int64_t batch) {
  auto it = steps_by_batch_.find(batch);
  if (it != steps_by_batch_.end()) return it->second.get();
  const DataParallel dp{config_.comm ? config_.comm->size() : 1, config_.bucket_bytes,
                        several(config_.comm) && several(config_.tensor_parallel) ? 1 : 0};
  RLX_ASSIGN_OR_RETURN(StepGraph sg, build_step_graph(model_, config_.optimizer, batch, dp, config_.qat, config_.amp));
  auto c = std::make_unique<Compiled>();
  CompileOptions opts;
  opts.device = config_.device;
  opts.policy = config_.policy;
  opts.donate = sg.layout.donate;
  opts.comm = step_communicator(config_);
  const StepLayout layout = sg.layout;
  RLX_ASSIGN_OR_RETURN(c->model, Model::compile(std::move(sg.graph), opts));
  RLX_ASSIGN_OR_RETURN(c->variant, c->model->prepare({}));
  c->scalar_out = Tensor::zeros(DType::f32, {});
  c->scalar_out2 = Tensor::zeros(DType::f32, {});
  c->inputs = {Tensor(), Tensor(), lr_, step_};  // images and labels are bound per step
  if (layout.loss_scale >= 0) c->inputs.push_back(scale_);
  c->inputs.insert(c->inputs.end(), params_.begin(), params_.end());
  c->inputs.insert(c->inputs.end(), state_.begin(), state_.end());
  c->outputs = {c->scalar_out};
  if (layout.finite >= 0) c->outputs.push_back(c->scalar_out2);
  c->outputs.insert(c->outputs.end(), params_.begin(), params_.end());
  c->outputs.insert(c->outputs.end(), state_.begin(), state_.end());
  c->inputs.insert(c->inputs.end(), qat_state_.begin(), qat_state_.end());
  c->outputs.insert(c->outputs.end(), qat_state_.begin(), qat_state_.end());
  // the weight copies are the same for every batch size: made with the first step compiled
  if (copies_.empty() && !layout.copies.empty()) {
    copy_layout_ = layout.copies;
    for (const WeightCopy& w : copy_layout_) copies_.push_back(Tensor::zeros(w.dtype(), params_[w.param].sizes()));
    copies_stale_ = true;
  }
  if (layout.copies != copy_layout_)
    return error(ErrorCode::internal, "the step for batch ", batch, " carries other weight copies than an earlier one");
  c->inputs.insert(c->inputs.end(), copies_.begin(), copies_.end());
  c->outputs.insert(c->outputs.end(), copies_.begin(), copies_.end());
  const Graph& bound = c->model->graph();
  for (int i = 0; i < layout.num_saved; ++i) {
    const TensorType& t = bound.type(bound.outputs[static_cast<size_t>(layout.first_saved + i)]);
    c->saved.push_back(Tensor::zeros(t.dtype, *static_sizes(t.shape)));
  }
  c->outputs.insert(c->outputs.end(), c->saved.begin(), c->saved.end());
  Compiled* p = c.get();
  steps_by_batch_[batch] = std::move(c);
  return p;
}

Status Trainer::prepare(int64_t batch) { return step_for(batch).status(); }

Expected<const CompiledVariant*> Trainer::step_variant(int64_t batch) {
  RLX_ASSIGN_OR_RETURN(Compiled * c, step_for(batch));
  return static_cast<const CompiledVariant*>(c->variant);
}

Expected<float> Trainer::step(const Tensor& images, const Tensor& labels, double lr) {
  RLX_TRY(check_batch(model_, images, labels));
  RLX_ASSIGN_OR_RETURN(Compiled * c, step_for(images.sizes()[0]));
  const bool mixed = amp_enabled(config_.amp);
  c->inputs[0] = images;
  c->inputs[1] = labels;
  lr_.data<float>()[0] = static_cast<float>(lr);
  step_.data<float>()[0] = static_cast<float>(applied_ + 1);  // Adam counts applied updates only
  last_ = StepInfo{};
  last_.scale = scaling_ ? scaler_.scale() : 1.0;
  scale_.data<float>()[0] = static_cast<float>(last_.scale);
  if (copies_stale_) {
    for (size_t i = 0; i < copies_.size(); ++i) fill_weight_copy(params_[copy_layout_[i].param], copy_layout_[i], copies_[i]);
    copies_stale_ = false;
  }
  RLX_TRY(c->variant->executable->run_into(c->inputs, c->outputs));
  ++steps_;
  // drop the references to the caller's batch buffers
  c->inputs[0] = Tensor();
  c->inputs[1] = Tensor();
  last_.loss = c->scalar_out.data<float>()[0];
  const bool finite = !mixed || c->scalar_out2.data<float>()[0] == 1.f;
  last_.skipped = !finite;
  if (scaling_) scaler_.update(finite);
  if (finite) ++applied_;
  return last_.loss;
}

Expected<Trainer::Compiled*> Trainer::eval_for(int64_t batch) {
  auto it = evals_by_batch_.find(batch);
  if (it != evals_by_batch_.end()) return it->second.get();
  RLX_ASSIGN_OR_RETURN(Graph g, build_eval_graph(model_, batch, config_.qat.enabled, config_.amp));
  auto c = std::make_unique<Compiled>();
  // (a tensor-parallel model's all-reduces join the shards; evaluation has no data parallelism)
  RLX_ASSIGN_OR_RETURN(c->model, Model::compile(std::move(g), {.device = config_.device, .policy = config_.policy,
                                                               .comm = config_.tensor_parallel}));
  RLX_ASSIGN_OR_RETURN(c->variant, c->model->prepare({}));
  c->scalar_out = Tensor::zeros(DType::f32, {});
  c->scalar_out2 = Tensor::zeros(DType::f32, {});
  c->outputs = {c->scalar_out, c->scalar_out2};
  Compiled* p = c.get();
  evals_by_batch_[batch] = std::move(c);
  return p;
}

Expected<EvalResult> Trainer::evaluate(const Tensor& images, const Tensor& labels, int64_t batch) {
  RLX_TRY(check_batch(model_, images, labels));
  if (batch <= 0) return error(ErrorCode::invalid_argument, "evaluation batch must be positive");
  std::vector<Tensor> qat_params;  // the sites' scale and zero point, from the tracked ranges
  if (config_.qat.enabled) {
    if (steps_ == 0)
      return error(ErrorCode::invalid_argument, "a quantization-aware model has no activation ranges before its first "
                   "training step; train at least one step before evaluating");
    for (const QatRange& r : qat_ranges()) {
      const ActQuantParams q = act_quant_params(r.lo, r.hi);
      qat_params.push_back(f32_scalar(q.scale));
      qat_params.push_back(f32_scalar(static_cast<float>(q.zero_point)));
    }
  }
  std::vector<Tensor> extra = params_;
  extra.insert(extra.end(), qat_params.begin(), qat_params.end());
  return evaluate_in_batches(images, labels, batch, extra,
                             [&](int64_t b, const std::vector<Tensor>& in) -> Expected<std::pair<double, double>> {
                               RLX_ASSIGN_OR_RETURN(Compiled * c, eval_for(b));
                               RLX_TRY(c->variant->executable->run_into(in, c->outputs));
                               return std::pair<double, double>{c->scalar_out.data<float>()[0],
                                                                c->scalar_out2.data<float>()[0]};
                             });
}

Expected<EvalResult> evaluate_in_batches(const Tensor& images, const Tensor& labels, int64_t batch,
                                         const std::vector<Tensor>& extra, const EvalBatchFn& run) {
  const int64_t n = images.sizes()[0];
  const int64_t example = images.numel() / std::max<int64_t>(1, n);
  EvalResult r;
  double loss_sum = 0.0;
  for (int64_t start = 0; start < n; start += batch) {
    const int64_t b = std::min(batch, n - start);
    Sizes is = images.sizes();
    is[0] = b;
    // views into the dataset: no copy
    Tensor x(DType::f32, is, images.storage(), images.byte_offset() + static_cast<size_t>(start * example) * 4);
    Tensor y(DType::i32, {b}, labels.storage(), labels.byte_offset() + static_cast<size_t>(start) * 4);
    std::vector<Tensor> in{x, y};
    in.insert(in.end(), extra.begin(), extra.end());
    RLX_ASSIGN_OR_RETURN(auto loss_correct, run(b, in));
    loss_sum += loss_correct.first;
    r.correct += static_cast<int64_t>(loss_correct.second + 0.5);
    r.count += b;
  }
  r.loss = r.count ? loss_sum / static_cast<double>(r.count) : 0.0;
  return r;
}

std::vector<std::pair<std::string, Tensor>> Trainer::named_parameters() const {
  copies_stale_ = true;  // the caller may write to them
  std::vector<std::pair<std::string, Tensor>> r;
  for (size_t i = 0; i < params_.size(); ++i) r.push_back({model_.params[i].name, params_[i]});
  return r;
}

}  // namespace rlx::train

namespace rlx::train {

std::vector<QatRange> Trainer::qat_ranges() const {
  std::vector<QatRange> r;
  for (size_t k = 0; k + 1 < qat_state_.size(); k += 2)
    r.push_back({qat_state_[k].data<float>()[0], qat_state_[k + 1].data<float>()[0]});
  return r;
}

std::vector<std::pair<std::string, Tensor>> Trainer::qat_tensors() const {
  std::vector<std::pair<std::string, Tensor>> t;
  const std::vector<QatRange> ranges = qat_ranges();
  for (size_t i = 0; i < ranges.size(); ++i) {
    const ActQuantParams q = act_quant_params(ranges[i].lo, ranges[i].hi);
    t.push_back({qat_tensor_name(qat_sites_[i], "scale"), f32_scalar(q.scale)});
    t.push_back({qat_tensor_name(qat_sites_[i], "zero_point"), f32_scalar(static_cast<float>(q.zero_point))});
    t.push_back({qat_tensor_name(qat_sites_[i], "min"), f32_scalar(ranges[i].lo)});
    t.push_back({qat_tensor_name(qat_sites_[i], "max"), f32_scalar(ranges[i].hi)});
  }
  return t;
}

}  // namespace rlx::train
