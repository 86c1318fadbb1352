// Pipeline-parallel inference (PipelineRunner in pipeline.h). Between stages each micro-batch
// sends a shape message (the boundary activation's sizes, since symbolic dims such as `seq`
// are only known per run) and then the activation itself, tagged by micro-batch.
#include <algorithm>
#include <cstring>

#include "runtime/pipeline.h"

namespace rlx::dist {
namespace {

constexpr int kMaxRank = 8;

bool batched(const TensorType& t) { return t.rank() > 0 && t.shape[0].is_symbol() && t.shape[0].symbol_name() == "batch"; }

Tensor rows(const Tensor& t, int64_t begin, int64_t count) {
  Sizes s = t.sizes();
  const size_t row = s[0] ? t.nbytes() / static_cast<size_t>(s[0]) : 0;
  s[0] = count;
  return Tensor(t.dtype(), s, t.storage(), t.byte_offset() + static_cast<size_t>(begin) * row);
}

}  // namespace

std::vector<ValueId> layer_ends(const Graph& g) {
  std::vector<std::pair<int64_t, ValueId>> found;
  for (size_t v = 0; v < g.values.size(); ++v) {
    const std::string& n = g.values[v].name;
    if (n.rfind("layer.", 0) != 0 || n.size() < 11 || n.compare(n.size() - 4, 4, ".out") != 0) continue;
    const std::string num = n.substr(6, n.size() - 10);
    if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos) continue;
    found.push_back({std::stoll(num), static_cast<ValueId>(v)});
  }
  std::sort(found.begin(), found.end());
  std::vector<ValueId> r;
  for (const auto& f : found) r.push_back(f.second);
  return r;
}

Expected<std::vector<ValueId>> even_cuts(const Graph& g, int stages) {
  const std::vector<ValueId> ends = layer_ends(g);
  const int layers = static_cast<int>(ends.size()) + 1;
  if (stages < 1 || stages > layers)
    return error(ErrorCode::invalid_argument, "pipeline parallelism: graph '", g.name, "' has ", layers,
                 " layers, fewer than the ", stages, " stages asked for");
  std::vector<ValueId> cuts;
  for (int k = 1; k < stages; ++k) cuts.push_back(ends[k * layers / stages - 1]);
  return cuts;
}

Expected<std::unique_ptr<PipelineRunner>> PipelineRunner::create(const Graph& g, std::span<const ValueId> cuts,
                                                                  std::shared_ptr<Communicator> comm,
                                                                  CompileOptions options, PipelineRunOptions run) {
  if (!comm) return error(ErrorCode::invalid_argument, "pipeline parallelism needs a communicator");
  if (static_cast<int>(cuts.size()) + 1 != comm->size())
    return error(ErrorCode::invalid_argument, "pipeline parallelism: ", cuts.size() + 1, " stages on a group of ",
                 comm->size(), " ranks");
  if (run.micro_batches < 1) return error(ErrorCode::invalid_argument, "micro-batches must be at least 1");
  RLX_ASSIGN_OR_RETURN(std::vector<Stage> stages, split_stages(g, cuts));
  std::unique_ptr<PipelineRunner> r(new PipelineRunner());
  r->stage_ = comm->rank();
  r->stages_ = comm->size();
  r->comm_ = std::move(comm);
  r->run_ = std::move(run);
  r->output_owner_.assign(g.outputs.size(), -1);
  for (int k = 0; k < r->stages_; ++k)
    for (int f : stages[k].outputs_from)
      if (f >= 0) r->output_owner_[f] = k;
  for (int f : r->run_.shared_outputs)
    if (f < 0 || f >= static_cast<int>(g.outputs.size()))
      return error(ErrorCode::invalid_argument, "pipeline: shared output ", f, " is not an output of '", g.name, "'");
  for (ValueId v : g.inputs) r->in_batched_.push_back(batched(g.type(v)));
  for (ValueId v : g.outputs) r->out_batched_.push_back(batched(g.type(v)));
  r->st_ = std::move(stages[r->stage_]);
  // donations (original output, original input) -> this stage's own positions
  std::vector<std::pair<int, int>> donate;
  for (auto [o, i] : options.donate) {
    auto lo = std::find(r->st_.outputs_from.begin(), r->st_.outputs_from.end(), o);
    auto li = std::find(r->st_.inputs_from.begin(), r->st_.inputs_from.end(), i);
    if (lo != r->st_.outputs_from.end() && li != r->st_.inputs_from.end())
      donate.push_back({static_cast<int>(lo - r->st_.outputs_from.begin()), static_cast<int>(li - r->st_.inputs_from.begin())});
  }
  options.donate = donate;
  RLX_ASSIGN_OR_RETURN(r->model_, Model::compile(r->st_.graph, options));
  return r;
}

Status PipelineRunner::run_into(std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  if (inputs.size() != in_batched_.size() || outputs.size() != out_batched_.size())
    return error(ErrorCode::invalid_argument, "pipeline: expected ", in_batched_.size(), " inputs and ",
                 out_batched_.size(), " outputs, got ", inputs.size(), " and ", outputs.size());
  int64_t B = -1;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (in_batched_[i] && inputs[i].rank() > 0) B = inputs[i].sizes()[0];
  if (B < 1) return error(ErrorCode::invalid_argument, "pipeline: no input has a `batch` dimension to split");
  const int M = static_cast<int>(std::min<int64_t>(run_.micro_batches, B));
  const bool first = stage_ == 0, last = stage_ == stages_ - 1;
  for (int i = 0; i < M; ++i) {
    const auto [begin, size] = even_share(B, M, i);
    const auto ctx = cat("pipeline stage ", stage_, " of ", stages_, ", micro-batch ", i);
    Tensor act;
    if (!first) {
      int64_t shape[kMaxRank + 1] = {};
      RLX_TRY(comm_->recv(shape, kMaxRank + 1, DType::i64, stage_ - 1, 2 * i).with_context(ctx));
      if (shape[0] < 0 || shape[0] > kMaxRank) return error(ErrorCode::runtime_error, ctx, ": a malformed activation shape");
      act = Tensor::zeros(st_.graph.type(st_.graph.inputs[0]).dtype, Sizes(shape + 1, shape + 1 + shape[0]));
      RLX_TRY(comm_->recv(act.bytes(), act.numel(), act.dtype(), stage_ - 1, 2 * i + 1).with_context(ctx));
    }
    std::vector<Tensor> in, out;
    for (int f : st_.inputs_from) {
      if (f < 0) in.push_back(act);
      else in.push_back(in_batched_[f] ? rows(inputs[f], begin, size) : inputs[f]);
    }
    RLX_ASSIGN_OR_RETURN(CompiledVariant * v, model_->variant_for(in));
    const Graph& pg = v->primitive_graph;
    for (size_t k = 0; k < st_.outputs_from.size(); ++k) {
      const int f = st_.outputs_from[k];
      if (f >= 0) {
        out.push_back(out_batched_[f] ? rows(outputs[f], begin, size) : outputs[f]);
      } else {
        RLX_ASSIGN_OR_RETURN(Sizes s, static_sizes(pg.type(pg.outputs[k]).shape, "the boundary activation"));
        out.push_back(Tensor::zeros(pg.type(pg.outputs[k]).dtype, s));
      }
    }
    RLX_TRY(v->executable->run_into(in, out).with_context(ctx));
    if (!last) {
      const Tensor& a = out[0];
      if (a.rank() > kMaxRank) return error(ErrorCode::unsupported, ctx, ": activations of rank > ", kMaxRank);
      int64_t shape[kMaxRank + 1] = {a.rank()};
      for (int d = 0; d < a.rank(); ++d) shape[d + 1] = a.sizes()[d];
      RLX_TRY(comm_->send(shape, kMaxRank + 1, DType::i64, stage_ + 1, 2 * i).with_context(ctx));
      RLX_TRY(comm_->send(a.bytes(), a.numel(), a.dtype(), stage_ + 1, 2 * i + 1).with_context(ctx));
    }
  }
  for (int f : run_.shared_outputs) {
    Tensor& t = outputs[f];
    RLX_TRY(comm_->broadcast(t.bytes(), t.numel(), t.dtype(), output_owner_[f])
                .with_context(cat("pipeline: sharing output ", f, " from stage ", output_owner_[f])));
  }
  return Status::ok();
}

}  // namespace rlx::dist
