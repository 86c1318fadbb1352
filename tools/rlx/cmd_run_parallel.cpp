// rlx run MODEL --tp T --pp P: one forward run of a model across ranks (docs/distributed.md).
// Tensor parallelism needs to know which matrix products pair up (column- then row-split) and
// how attention splits by heads; only the builders know that, so --tp takes the models rlx
// builds itself: a BERT or decoder folder, or a decoder GGUF file. Pipeline parallelism cuts at
// the layer ends a graph marks (values named layer.N.out: the builders' layers, or any graph
// that names its own), so --pp also takes such a graph in any format.
//
// Every rank synthesizes the inputs of the whole model from the same seed (an input a
// tensor-parallel shard has less of, such as a decoder KV cache of fewer heads, is this rank's
// block of the whole input), so the result equals the single-process `rlx run`. World rank 0
// prints output 0 (the logits or embeddings; the other outputs, e.g. the KV caches, stay
// sharded or on their stage) and writes it with --out.
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "cli.h"
#include "runtime/pipeline.h"
#include "models/bert.h"
#include "models/decoder.h"
#include "rlx/model_io.h"
#include "rlx/npy.h"

namespace rlx::cli {
namespace {

bool has_suffix(const std::string& s, const std::string& x) {
  return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
}

// The same decoder prefill step `rlx run` builds on one process (model_io.cpp, cmd_run.cpp).
models::DecoderGraphOptions prefill_options() { return models::standalone_step_options(); }

// Block `rank` of `ranks` of `whole` along the one axis where the shard's sizes are smaller.
Expected<Tensor> block_of(const Tensor& whole, const Sizes& shard, int rank, int ranks, const std::string& name) {
  const Sizes& s = whole.sizes();
  int axis = -1;
  for (size_t d = 0; d < s.size() && d < shard.size(); ++d)
    if (s[d] != shard[d]) {
      if (axis >= 0 || shard[d] * ranks != s[d]) axis = -2;
      else axis = static_cast<int>(d);
    }
  if (axis < 0 || s.size() != shard.size())
    return error(ErrorCode::internal, "input '", name, "': the shard's ", sizes_to_string(shard),
                 " is not a block of the whole ", sizes_to_string(s), " over ", ranks, " ranks");
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= s[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < s.size(); ++d) inner *= s[d];
  const int64_t len = shard[static_cast<size_t>(axis)];
  Tensor r = Tensor::zeros(whole.dtype(), shard);
  const size_t row = dtype_bytes(whole.dtype(), static_cast<size_t>(len * inner));
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(r.bytes() + static_cast<size_t>(o) * row,
                whole.bytes() + static_cast<size_t>(o * ranks + rank) * row, row);
  return r;
}

}  // namespace

int run_parallel(const Args& a) {
  auto run = [&]() -> Status {
    if (a.positional.size() != 1) return error(ErrorCode::invalid_argument, "expected one MODEL argument");
    const std::string path = a.positional[0];
    RLX_ASSIGN_OR_RETURN(const int64_t tp, a.integer("tp", 1, 1, 4096));
    RLX_ASSIGN_OR_RETURN(const int64_t pp, a.integer("pp", 1, 1, 4096));
    RLX_ASSIGN_OR_RETURN(const int64_t micro, a.integer("micro-batches", 1, 1, 4096));
    if (!a.all("input").empty() || a.get("inputs") || a.get("precision"))
      return error(ErrorCode::invalid_argument, "rlx run --tp/--pp synthesizes the inputs from --seed; --input, "
                   "--inputs and --precision are not supported with them yet");
    const bool is_dir = std::filesystem::is_directory(path);
    const bool bert = is_dir && models::is_bert_folder(path);
    const bool qwen3 = (is_dir || has_suffix(path, ".gguf")) && models::is_decoder_model(path);
    if (tp > 1 && !bert && !qwen3)
      return error(ErrorCode::unsupported, "rlx run --tp: ", path, " is not a model rlx builds itself; tensor "
                   "parallelism has to know which matrix products pair up (split by columns, then by rows) and how "
                   "attention splits by heads, which rlx knows for BERT and decoder folders and decoder GGUF files only "
                   "(an arbitrary graph runs on one process, or with --pp where it marks its layer ends)");
    // the ranks: a grid, the tensor-parallel group, or the pipeline
    std::shared_ptr<dist::Communicator> comm, stage_comm;
    models::TensorParallel shard;
    int world_rank = 0;
    if (tp > 1 && pp > 1) {
      RLX_ASSIGN_OR_RETURN(ProcessGrid grid, process_grid(tp, pp));
      comm = grid.pipeline;
      stage_comm = grid.stage;
      shard = {grid.tp_rank, static_cast<int>(tp)};
      world_rank = grid.world->rank();
    } else {
      RLX_ASSIGN_OR_RETURN(comm, process_group(pp > 1 ? pp : tp, pp > 1 ? "--pp" : "--tp"));
      world_rank = comm->rank();
      if (pp == 1) shard = {comm->rank(), comm->size()};
    }
    // the whole model's graph (its inputs are every rank's) and this rank's
    Graph whole, mine;
    std::string format;
    if (bert) {
      RLX_ASSIGN_OR_RETURN(models::BertModel m, models::load_bert_folder(path));
      whole = std::move(m.graph);
      if (shard.active()) {
        RLX_ASSIGN_OR_RETURN(models::BertModel s, models::load_bert_folder(path, models::BertOutput::sentence_embedding, shard));
        mine = std::move(s.graph);
      }
      format = "BERT folder";
    } else if (qwen3) {
      RLX_ASSIGN_OR_RETURN(models::DecoderWeights w, models::load_decoder(path));
      RLX_ASSIGN_OR_RETURN(whole, models::build_decoder(w, prefill_options()));
      if (shard.active()) {
        RLX_ASSIGN_OR_RETURN(models::DecoderWeights s, models::shard_decoder(w, shard));
        RLX_ASSIGN_OR_RETURN(mine, models::build_decoder(s, prefill_options()));
      }
      format = "decoder prefill step";
    } else {
      RLX_ASSIGN_OR_RETURN(LoadedModel m, load_model(path));
      whole = std::move(m.graph);
      RLX_TRY(synthesize_missing_weights(whole, 7).status());  // as rlx run does, the same on every rank
      format = m.format;
    }
    if (!shard.active()) mine = whole;
    // inputs of the whole model, as the single-process rlx run makes them
    DimBindings dims;
    if (auto d = a.get("dims")) {
      RLX_ASSIGN_OR_RETURN(dims, parse_dims(*d));
    }
    for (ValueId v : whole.inputs)
      for (const Dim& d : whole.values[v].type.shape)
        if (d.is_symbol()) dims.emplace(d.symbol_name(), 1);
    RLX_ASSIGN_OR_RETURN(const uint64_t seed, a.seed("seed", 1));
    RLX_ASSIGN_OR_RETURN(std::vector<Tensor> inputs, synthesize_inputs(whole, dims, seed));
    if (shard.active())
      for (size_t i = 0; i < mine.inputs.size(); ++i) {
        const Value& v = mine.values[mine.inputs[i]];
        RLX_ASSIGN_OR_RETURN(Sizes want, static_sizes(bind_shape(v.type.shape, dims), "input '" + v.name + "'"));
        if (want != inputs[i].sizes()) {
          RLX_ASSIGN_OR_RETURN(inputs[i], block_of(inputs[i], want, shard.rank, shard.size, v.name));
        }
      }
    const std::string device = a.get("device").value_or(default_device_name());
    RLX_ASSIGN_OR_RETURN(DispatchPolicy policy, policy_from(a));
    Tensor out0;
    if (pp > 1) {
      auto cuts = dist::even_cuts(mine, pp);
      if (!cuts)
        return cuts.status().with_context(cat("rlx run --pp ", pp, ": ", path, " (", format, ") cannot be cut into stages "
                                              "(the split pass cuts at values named layer.N.out, which rlx's builders "
                                              "mark)"));
      // the outputs' sizes: the graph's types with the dims bound and inferred through
      RLX_ASSIGN_OR_RETURN(Graph bound, bind_graph(mine, dims));
      std::vector<Tensor> outs;
      for (ValueId o : bound.outputs) {
        RLX_ASSIGN_OR_RETURN(Sizes s, static_sizes(bound.type(o).shape, "an output"));
        outs.push_back(Tensor::zeros(bound.type(o).dtype, s));
      }
      RLX_ASSIGN_OR_RETURN(auto runner, dist::PipelineRunner::create(mine, *cuts, comm,
                                                                     {.device = device, .policy = policy, .dims = dims,
                                                                      .comm = stage_comm},
                                                                     {static_cast<int>(micro), {0}}));
      RLX_TRY(runner->run_into(inputs, outs));
      out0 = outs[0];
    } else {
      RLX_ASSIGN_OR_RETURN(auto model, Model::compile(mine, {.device = device, .policy = policy, .dims = dims, .comm = comm}));
      RLX_ASSIGN_OR_RETURN(std::vector<Tensor> outs, model->run(inputs));
      out0 = outs[0];
    }
    if (world_rank != 0) return Status::ok();
    std::printf("model:    %s (%s)\ndevice:   %s\nparallel: --tp %lld --pp %lld (%lld ranks)\n", path.c_str(), format.c_str(),
                device.c_str(), static_cast<long long>(tp), static_cast<long long>(pp), static_cast<long long>(tp * pp));
    std::string name = whole.values[whole.outputs[0]].name.empty() ? "output_0" : whole.values[whole.outputs[0]].name;
    std::printf("output %s: %s\n", whole.value_label(whole.outputs[0]).c_str(), out0.to_string(8).c_str());
    if (auto dir = a.get("out")) {
      for (char& c : name)
        if (c == '/' || c == ':') c = '_';
      RLX_TRY(write_npy(*dir + "/" + name + ".npy", out0));
    }
    return Status::ok();
  };
  Status s = run();
  return s.is_ok() ? kOk : report_error(s);
}

}  // namespace rlx::cli
