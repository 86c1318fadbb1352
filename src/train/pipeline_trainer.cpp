// Pipeline-parallel training: the stage graphs, the two schedules and the update (see
// pipeline_trainer.h). Messages between stage k and k + 1 are tagged 2i (activation of
// micro-batch i) and 2i + 1 (its gradient), so the two directions never match each other.
#include "train/pipeline_trainer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "runtime/pipeline.h"
#include "train/autodiff.h"
#include "train/losses.h"

namespace rlx::train {

std::string_view schedule_name(PipelineSchedule s) { return s == PipelineSchedule::gpipe ? "gpipe" : "1f1b"; }

Expected<PipelineSchedule> parse_pipeline_schedule(std::string_view name) {
  if (name == "gpipe") return PipelineSchedule::gpipe;
  if (name == "1f1b") return PipelineSchedule::one_f_one_b;
  return error(ErrorCode::invalid_argument, "unknown pipeline schedule '", name, "' (gpipe or 1f1b)");
}

namespace {

TensorType batch_type(const ModelDef& m, int64_t batch) {
  Sizes s{batch};
  s.insert(s.end(), m.example_shape.begin(), m.example_shape.end());
  return TensorType{DType::f32, to_shape(s)};
}

// Rows [begin, begin + count) of a tensor's leading axis, as a view.
Tensor rows(const Tensor& t, int64_t begin, int64_t count) {
  Sizes s = t.sizes();
  const size_t row = t.nbytes() / static_cast<size_t>(std::max<int64_t>(1, s[0]));
  s[0] = count;
  return Tensor(t.dtype(), s, t.storage(), t.byte_offset() + static_cast<size_t>(begin) * row);
}

Tensor zeros_like(const TensorType& t) { return Tensor::zeros(t.dtype, *static_sizes(t.shape)); }

}  // namespace

// The compiled graphs of this stage for one micro-batch size.
struct StageGraphs {
  std::unique_ptr<Model> forward;   // stages but the last: boundary activation out
  std::unique_ptr<Model> backward;  // recompute + gradients (and the loss on the last stage)
  TensorType act_in, act_out;       // boundary activations (act_in: stages but the first)
  std::vector<int> fwd_inputs_from, bwd_inputs_from;  // original input index, -1 boundary, -2 grad/scale
};

struct PipelineTrainer::Impl {
  ModelDef model;
  TrainConfig config;
  std::shared_ptr<dist::Communicator> comm;
  PipelineConfig pc;
  int stage = 0, stages = 1;
  std::vector<int> my_params;             // indices into model.params
  std::vector<int> owner;                 // per model param: its stage
  std::vector<Tensor> params, grads, state;
  Tensor lr = Tensor::zeros(DType::f32, {}), step_no = Tensor::zeros(DType::f32, {});
  std::map<int64_t, StageGraphs> by_batch;
  std::unique_ptr<Model> update;
  std::vector<float> dp_buffer;  // data parallelism: batch size, loss and gradients, one all-reduce
  // mixed precision (amp.h): the loss scale, and the updates applied (Adam's step count)
  LossScaler scaler;
  bool scaling = false;
  int64_t applied = 0;

  bool first() const { return stage == 0; }
  bool last() const { return stage == stages - 1; }

  // The whole model's forward + loss for micro-batch size b, split into stages.
  Expected<std::vector<dist::Stage>> split(int64_t b) {
    Graph g;
    g.name = model.name;
    ValueId images = g.add_input("images", batch_type(model, b));
    ValueId labels = g.add_input("labels", TensorType{DType::i32, {Dim(b)}});
    std::vector<ValueId> ps;
    for (const ParamSpec& p : model.params) ps.push_back(g.add_input(p.name, p.init.type()));
    GraphBuilder gb(g);
    OpBuilder o(gb);
    std::vector<ValueId> ends;
    // under mixed precision the forward runs under the autocast policy, the loss in f32
    const ValueId logits = emit_under_autocast(o, config.amp, [&](OpBuilder& f) { return model.forward(f, images, ps, &ends); });
    ValueId loss = cross_entropy(o, logits, labels);
    RLX_TRY(o.status().with_context("building the forward graph"));
    g.outputs = {loss};
    for (size_t l = 0; l < ends.size(); ++l) g.values[ends[l]].name = cat("layer.", l, ".out");
    RLX_ASSIGN_OR_RETURN(std::vector<ValueId> cuts, dist::even_cuts(g, stages));
    return dist::split_stages(g, cuts);
  }

  Status plan_params() {
    RLX_ASSIGN_OR_RETURN(std::vector<dist::Stage> st, split(1));
    owner.assign(model.params.size(), -1);
    for (int k = 0; k < stages; ++k)
      for (int from : st[k].inputs_from) {
        if (from < 2) continue;
        const int p = from - 2;
        if (owner[p] >= 0 && owner[p] != k)
          return error(ErrorCode::invalid_argument, "pipeline parallelism: parameter ", model.params[p].name,
                       " is read by stages ", owner[p], " and ", k, " (tied weights across stages are not supported)");
        owner[p] = k;
      }
    for (size_t p = 0; p < owner.size(); ++p)
      if (owner[p] == stage) my_params.push_back(static_cast<int>(p));
    return Status::ok();
  }

  Expected<StageGraphs*> graphs(int64_t b) {
    auto it = by_batch.find(b);
    if (it != by_batch.end()) return &it->second;
    RLX_ASSIGN_OR_RETURN(std::vector<dist::Stage> st, split(b));
    dist::Stage& s = st[stage];
    StageGraphs sg;
    if (!first()) sg.act_in = s.graph.type(s.graph.inputs[0]);
    if (!last()) sg.act_out = s.graph.type(s.graph.outputs[0]);
    CompileOptions co;
    co.device = config.device;
    co.policy = config.policy;
    co.comm = config.tensor_parallel;  // a tensor-parallel stage's all-reduces join its shards
    sg.fwd_inputs_from = s.inputs_from;
    if (!last()) {
      Graph f = s.graph;
      f.outputs.resize(1);  // only the boundary activation
      RLX_ASSIGN_OR_RETURN(sg.forward, Model::compile(std::move(f), co));
    }
    // backward: the stage's forward, a surrogate loss, and its gradients
    Graph g = std::move(s.graph);
    sg.bwd_inputs_from = s.inputs_from;
    ValueId out = g.outputs[0];
    ValueId extra = g.add_input(last() ? "loss_scale" : "grad_out", last() ? TensorType{DType::f32, {}} : g.type(out));
    sg.bwd_inputs_from.push_back(-2);
    GraphBuilder gb(g);
    OpBuilder o(gb);
    // the last stage's loss is this micro-batch's mean: scaled by its share of the batch;
    // earlier stages continue the chain rule with the gradient of their output
    ValueId surrogate = last() ? o.mul(out, extra) : o.reduce_sum(o.mul(out, extra), {}, false);
    RLX_TRY(o.status().with_context("pipeline backward"));
    std::vector<ValueId> wrt;
    if (!first()) wrt.push_back(g.inputs[0]);
    for (size_t i = 0; i < s.inputs_from.size(); ++i)
      if (s.inputs_from[i] >= 2) wrt.push_back(g.inputs[i]);
    RLX_ASSIGN_OR_RETURN(Gradients gr, differentiate(g, surrogate, wrt));
    g.outputs = gr.grads;
    if (last()) g.outputs.push_back(surrogate);
    RLX_ASSIGN_OR_RETURN(sg.backward, Model::compile(std::move(g), co));
    return &(by_batch[b] = std::move(sg));
  }

  // The optimizer update of this stage's parameters (in place), compiled once.
  Status build_update() {
    Graph g;
    g.name = model.name + ".stage_update";
    const OptimizerConfig& opt = config.optimizer;
    const int slots = state_slots(opt);
    const size_t n = my_params.size();
    std::vector<ValueId> p, gr;
    for (int i : my_params) p.push_back(g.add_input(model.params[i].name, model.params[i].init.type()));
    for (int i : my_params) gr.push_back(g.add_input(model.params[i].name + ".grad", model.params[i].init.type()));
    std::vector<std::vector<ValueId>> st(n);
    for (int s = 0; s < slots; ++s)
      for (size_t i = 0; i < n; ++i)
        st[i].push_back(g.add_input(cat(model.params[my_params[i]].name, ".state", s), model.params[my_params[i]].init.type()));
    ValueId lr_v = g.add_input("lr", TensorType{DType::f32, {}});
    ValueId step_v = g.add_input("step", TensorType{DType::f32, {}});
    GraphBuilder gb(g);
    OpBuilder o(gb);
    std::vector<ValueId> new_p, new_s(n * slots);
    for (size_t i = 0; i < n; ++i) {
      ParamUpdate up = apply_optimizer(o, opt, p[i], gr[i], st[i], lr_v, step_v);
      new_p.push_back(up.param);
      for (int s = 0; s < slots; ++s) new_s[s * n + i] = up.state[s];
    }
    RLX_TRY(o.status().with_context("pipeline optimizer update"));
    g.outputs = new_p;
    g.outputs.insert(g.outputs.end(), new_s.begin(), new_s.end());
    CompileOptions co;
    co.device = config.device;
    co.policy = config.policy;
    for (size_t i = 0; i < n; ++i) co.donate.push_back({static_cast<int>(i), static_cast<int>(i)});
    for (size_t j = 0; j < n * slots; ++j)
      co.donate.push_back({static_cast<int>(n + j), static_cast<int>(2 * n + j)});
    RLX_ASSIGN_OR_RETURN(update, Model::compile(std::move(g), co));
    return Status::ok();
  }

  // Inputs of a stage graph from what it reads of the original graph.
  std::vector<Tensor> gather_inputs(const std::vector<int>& from, const Tensor& act, const Tensor& imgs,
                                    const Tensor& labels, const Tensor& extra) {
    std::vector<Tensor> in;
    for (int f : from) {
      if (f == -1) in.push_back(act);
      else if (f == -2) in.push_back(extra);
      else if (f == 0) in.push_back(imgs);
      else if (f == 1) in.push_back(labels);
      else in.push_back(params[std::find(my_params.begin(), my_params.end(), f - 2) - my_params.begin()]);
    }
    return in;
  }
};

PipelineTrainer::PipelineTrainer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PipelineTrainer::~PipelineTrainer() = default;

Expected<std::unique_ptr<PipelineTrainer>> PipelineTrainer::create(ModelDef model, TrainConfig config,
                                                                   std::shared_ptr<dist::Communicator> comm,
                                                                   PipelineConfig pipeline) {
  if (!model.forward || model.params.empty()) return error(ErrorCode::invalid_argument, "the model has no forward or no parameters");
  if (!comm) return error(ErrorCode::invalid_argument, "pipeline parallelism needs a communicator");
  if (pipeline.micro_batches < 1) return error(ErrorCode::invalid_argument, "--micro-batches must be at least 1");
  // each stage would track the ranges of its own sites; not wired up yet (train/qat.h)
  if (config.qat.enabled)
    return error(ErrorCode::unsupported, "quantization-aware training with pipeline parallelism is not supported yet");
  if (amp_enabled(config.amp)) {
    RLX_TRY(LossScaler::check(config.amp.scaler));
    for (const ParamSpec& p : model.params)
      if (p.init.dtype() != DType::f32)
        return error(ErrorCode::invalid_argument, "mixed precision: parameter ", p.name,
                     " must be f32 (the master weights), got ", dtype_name(p.init.dtype()));
  }
  auto impl = std::make_unique<Impl>();
  impl->model = std::move(model);
  impl->config = std::move(config);
  impl->comm = std::move(comm);
  impl->pc = pipeline;
  impl->stage = impl->comm->rank();
  impl->stages = impl->comm->size();
  impl->scaler = LossScaler(impl->config.amp.scaler);
  impl->scaling = amp_scaling(impl->config.amp);
  RLX_TRY(resolve_amp_compute(impl->config.amp, impl->config.device));
  RLX_TRY(impl->plan_params());
  const int slots = state_slots(impl->config.optimizer);
  for (int i : impl->my_params) {
    impl->params.push_back(impl->model.params[i].init.clone());
    impl->grads.push_back(Tensor::zeros(DType::f32, impl->model.params[i].init.sizes()));
  }
  for (int s = 0; s < slots; ++s)
    for (int i : impl->my_params) impl->state.push_back(Tensor::zeros(DType::f32, impl->model.params[i].init.sizes()));
  // data parallelism: every pipeline starts from the first one's parameters
  if (const auto& dp = impl->pc.data_parallel; dp && dp->size() > 1)
    for (Tensor& p : impl->params)
      RLX_TRY(dp->broadcast(p.bytes(), p.numel(), p.dtype(), 0).with_context("data-parallel pipelines: initial parameters"));
  RLX_TRY(impl->build_update());
  return std::unique_ptr<PipelineTrainer>(new PipelineTrainer(std::move(impl)));
}

Expected<float> PipelineTrainer::step(const Tensor& images, const Tensor& labels, double lr) {
  Impl& m = *impl_;
  dist::Communicator& c = *m.comm;
  const int64_t B = images.sizes().empty() ? 0 : images.sizes()[0];
  if (B < 1 || labels.numel() != B) return error(ErrorCode::invalid_argument, "a pipeline step needs a batch with labels");
  const int M = static_cast<int>(std::min<int64_t>(m.pc.micro_batches, B));
  std::vector<int64_t> begin(M), size(M);
  for (int i = 0; i < M; ++i) {
    const dist::Share sh = dist::even_share(B, M, i);
    begin[i] = sh.begin;
    size[i] = sh.size;
  }
  std::vector<StageGraphs*> sg(M);
  for (int i = 0; i < M; ++i) {
    RLX_ASSIGN_OR_RETURN(sg[i], m.graphs(size[i]));
  }
  for (Tensor& g : m.grads) std::memset(g.bytes(), 0, g.nbytes());
  std::vector<Tensor> act_in(M), act_out(M), grad_out(M), grad_in(M);
  double loss = 0.0;
  // mixed precision: the last stage's loss is scaled, so every gradient of the chain is too
  const double scale = m.scaling ? m.scaler.scale() : 1.0;
  const int prev = m.stage - 1, next = m.stage + 1;

  auto recv_fwd = [&](int i) -> Status {
    if (m.first()) return Status::ok();
    act_in[i] = zeros_like(sg[i]->act_in);
    return c.recv(act_in[i].bytes(), act_in[i].numel(), DType::f32, prev, 2 * i);
  };
  auto forward = [&](int i) -> Status {  // the last stage's forward is part of its backward
    if (m.last()) return Status::ok();
    std::vector<Tensor> in = m.gather_inputs(sg[i]->fwd_inputs_from, act_in[i], rows(images, begin[i], size[i]),
                                             rows(labels, begin[i], size[i]), Tensor());
    RLX_ASSIGN_OR_RETURN(std::vector<Tensor> out, sg[i]->forward->run(in));
    act_out[i] = out[0];
    return Status::ok();
  };
  auto send_fwd = [&](int i) -> Status {
    if (m.last()) return Status::ok();
    Status s = c.send(act_out[i].bytes(), act_out[i].numel(), DType::f32, next, 2 * i);
    act_out[i] = Tensor();
    return s;
  };
  auto recv_bwd = [&](int i) -> Status {
    if (m.last()) return Status::ok();
    grad_out[i] = zeros_like(sg[i]->act_out);
    return c.recv(grad_out[i].bytes(), grad_out[i].numel(), DType::f32, next, 2 * i + 1);
  };
  auto backward = [&](int i) -> Status {
    Tensor extra = grad_out[i];
    if (m.last())
      extra = Tensor::from_vector<float>(DType::f32, {}, {static_cast<float>(scale * static_cast<double>(size[i]) / static_cast<double>(B))});
    std::vector<Tensor> in = m.gather_inputs(sg[i]->bwd_inputs_from, act_in[i], rows(images, begin[i], size[i]),
                                             rows(labels, begin[i], size[i]), extra);
    RLX_ASSIGN_OR_RETURN(std::vector<Tensor> out, sg[i]->backward->run(in));
    size_t o = 0;
    if (!m.first()) grad_in[i] = out[o++];
    for (Tensor& g : m.grads) {
      const float* d = out[o++].data<float>();
      float* a = g.data<float>();
      for (int64_t e = 0; e < g.numel(); ++e) a[e] += d[e];
    }
    if (m.last()) loss += out[o].get_f64(0);
    act_in[i] = Tensor();
    grad_out[i] = Tensor();
    return Status::ok();
  };
  auto send_bwd = [&](int i) -> Status {
    if (m.first()) return Status::ok();
    Status s = c.send(grad_in[i].bytes(), grad_in[i].numel(), DType::f32, prev, 2 * i + 1);
    grad_in[i] = Tensor();
    return s;
  };
  const auto ctx = [&](const char* what, int i) { return cat("pipeline stage ", m.stage, ": ", what, " of micro-batch ", i); };

  if (m.pc.schedule == PipelineSchedule::gpipe) {
    for (int i = 0; i < M; ++i) {
      RLX_TRY(recv_fwd(i).with_context(ctx("receiving the activation", i)));
      RLX_TRY(forward(i).with_context(ctx("forward", i)));
      RLX_TRY(send_fwd(i).with_context(ctx("sending the activation", i)));
    }
    for (int i = 0; i < M; ++i) {
      RLX_TRY(recv_bwd(i).with_context(ctx("receiving the gradient", i)));
      RLX_TRY(backward(i).with_context(ctx("backward", i)));
      RLX_TRY(send_bwd(i).with_context(ctx("sending the gradient", i)));
    }
  } else {
    // 1F1B: the exchanges of the steady state go both ways at once (send_recv), as a
    // blocking send of one stage would otherwise wait on a blocking send of its neighbour
    const int warmup = std::min(m.stages - m.stage - 1, M);
    const int steady = M - warmup;
    for (int i = 0; i < warmup; ++i) {
      RLX_TRY(recv_fwd(i).with_context(ctx("receiving the activation", i)));
      RLX_TRY(forward(i).with_context(ctx("forward", i)));
      RLX_TRY(send_fwd(i).with_context(ctx("sending the activation", i)));
    }
    if (steady > 0) RLX_TRY(recv_fwd(warmup).with_context(ctx("receiving the activation", warmup)));
    for (int j = 0; j < steady; ++j) {
      const int f = warmup + j;
      RLX_TRY(forward(f).with_context(ctx("forward", f)));
      if (m.last()) {
        // nothing to send forward or receive backward
      } else {
        grad_out[j] = zeros_like(sg[j]->act_out);
        RLX_TRY(c.send_recv(act_out[f].bytes(), act_out[f].numel(), next, 2 * f, grad_out[j].bytes(),
                            grad_out[j].numel(), next, 2 * j + 1, DType::f32)
                    .with_context(ctx("exchanging with the next stage", f)));
        act_out[f] = Tensor();
      }
      RLX_TRY(backward(j).with_context(ctx("backward", j)));
      if (j + 1 == steady) {
        RLX_TRY(send_bwd(j).with_context(ctx("sending the gradient", j)));
      } else if (m.first()) {
        // no previous stage: the next micro-batch's input is the batch itself
      } else {
        act_in[f + 1] = zeros_like(sg[f + 1]->act_in);
        RLX_TRY(c.send_recv(grad_in[j].bytes(), grad_in[j].numel(), prev, 2 * j + 1, act_in[f + 1].bytes(),
                            act_in[f + 1].numel(), prev, 2 * (f + 1), DType::f32)
                    .with_context(ctx("exchanging with the previous stage", j)));
        grad_in[j] = Tensor();
      }
    }
    for (int j = steady; j < M; ++j) {
      RLX_TRY(recv_bwd(j).with_context(ctx("receiving the gradient", j)));
      RLX_TRY(backward(j).with_context(ctx("backward", j)));
      RLX_TRY(send_bwd(j).with_context(ctx("sending the gradient", j)));
    }
  }

  if (scale != 1.0) {  // unscaled in f32 before the replicas sum them
    loss /= scale;
    const float inv = static_cast<float>(1.0 / scale);
    for (Tensor& g : m.grads) {
      float* a = g.data<float>();
      for (int64_t e = 0; e < g.numel(); ++e) a[e] *= inv;
    }
  }
  // data parallelism across pipelines: this pipeline's gradients and loss (means over its
  // share of the batch) weighted by the share's size, summed over the group and divided by the
  // global batch, so uneven shares give the global mean. One all-reduce of [batch, batch *
  // loss, batch * gradients...] per step: the stage's gradients are final only after its last
  // backward, when the update is all that is left to do, so there is nothing to overlap with
  // and one call beats one per parameter.
  if (const auto& dp = m.pc.data_parallel; dp && dp->size() > 1) {
    size_t n = 2;
    for (const Tensor& g : m.grads) n += static_cast<size_t>(g.numel());
    m.dp_buffer.resize(n);
    float* buf = m.dp_buffer.data();
    const float b = static_cast<float>(B);
    buf[0] = b;
    buf[1] = static_cast<float>(b * loss);
    size_t at = 2;
    for (const Tensor& g : m.grads) {
      const float* a = g.data<float>();
      for (int64_t e = 0; e < g.numel(); ++e) buf[at++] = b * a[e];
    }
    RLX_TRY(dp->all_reduce(buf, static_cast<int64_t>(n), DType::f32, dist::ReduceOp::sum)
                .with_context("data-parallel pipelines: batch size, loss and gradients"));
    const float total = buf[0];
    loss = static_cast<double>(buf[1]) / total;
    at = 2;
    for (Tensor& g : m.grads) {
      float* a = g.data<float>();
      for (int64_t e = 0; e < g.numel(); ++e) a[e] = buf[at++] / total;
    }
  }
  // loss scaling: the step is skipped everywhere when any gradient of any stage (after the
  // replicas' sum), of any tensor-parallel shard, is inf or NaN (without scaling, as in
  // Trainer's step graph, nothing is skipped)
  bool finite = true;
  if (m.scaling) {
    float bad = 0.f;
    for (const Tensor& g : m.grads) {
      const float* a = g.data<float>();
      for (int64_t e = 0; e < g.numel() && bad == 0.f; ++e) bad = std::isfinite(a[e]) ? 0.f : 1.f;
    }
    for (dist::Communicator* group : {m.comm.get(), m.config.tensor_parallel.get(), m.pc.data_parallel.get()})
      if (group && group->size() > 1)
        RLX_TRY(group->all_reduce(&bad, 1, DType::f32, dist::ReduceOp::max).with_context("pipeline: the finite-gradient test"));
    finite = bad == 0.f;
    m.scaler.update(finite);
  }
  // the update of this stage's parameters
  m.lr.data<float>()[0] = static_cast<float>(lr);
  m.step_no.data<float>()[0] = static_cast<float>(m.applied + 1);  // Adam counts applied updates
  std::vector<Tensor> in = m.params;
  in.insert(in.end(), m.grads.begin(), m.grads.end());
  in.insert(in.end(), m.state.begin(), m.state.end());
  in.push_back(m.lr);
  in.push_back(m.step_no);
  std::vector<Tensor> out = m.params;
  out.insert(out.end(), m.state.begin(), m.state.end());
  if (finite) {
    RLX_ASSIGN_OR_RETURN(CompiledVariant * v, m.update->variant_for(in));
    RLX_TRY(v->executable->run_into(in, out));
    ++m.applied;
  }
  ++steps_;
  float l = static_cast<float>(loss);
  RLX_TRY(c.broadcast(&l, 1, DType::f32, m.stages - 1).with_context("pipeline: sharing the loss"));
  return l;
}

Expected<std::vector<std::pair<std::string, Tensor>>> PipelineTrainer::all_parameters() {
  Impl& m = *impl_;
  std::vector<std::pair<std::string, Tensor>> r;
  for (size_t p = 0; p < m.model.params.size(); ++p) {
    Tensor t;
    auto mine = std::find(m.my_params.begin(), m.my_params.end(), static_cast<int>(p));
    if (mine != m.my_params.end()) {
      t = m.params[mine - m.my_params.begin()].clone();
    } else {
      t = Tensor::zeros(m.model.params[p].init.dtype(), m.model.params[p].init.sizes());
    }
    RLX_TRY(m.comm->broadcast(t.bytes(), t.numel(), t.dtype(), m.owner[p]));
    r.push_back({m.model.params[p].name, t});
  }
  return r;
}

std::vector<std::string> PipelineTrainer::stage_parameters() const {
  std::vector<std::string> r;
  for (int i : impl_->my_params) r.push_back(impl_->model.params[i].name);
  return r;
}

}  // namespace rlx::train
