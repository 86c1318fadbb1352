// rlx embed, rlx make-model: model families built from Hugging Face folders.
#include <chrono>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "entry.h"
#include "precision.h"
#include "runtime/pipeline.h"
#include "models/bert.h"
#include "models/decoder.h"
#include "rlx/npy.h"

namespace rlx::cli {
namespace {
double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}
bool ends_with(const std::string& s, const std::string& x) {
  return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
}
}  // namespace

Expected<EmbedResult> embed_texts(const std::string& dir, const std::vector<std::string>& texts,
                                  const EmbedOptions& options) {
  if (options.batch <= 0) return error(ErrorCode::invalid_argument, "--batch must be positive");
  EmbedResult r;
  double t0 = now_ms();
  const bool pipeline = options.pp > 1;
  // comm: the pipeline (with --pp) or the tensor-parallel group; stage_comm: with both, the
  // tensor-parallel group of this rank's stage (a grid of tp x pp ranks)
  std::shared_ptr<dist::Communicator> comm, stage_comm;
  models::TensorParallel tp;
  if (options.tp > 1 && pipeline) {
    RLX_ASSIGN_OR_RETURN(ProcessGrid grid, process_grid(options.tp, options.pp));
    comm = grid.pipeline;
    stage_comm = grid.stage;
    tp = {grid.tp_rank, options.tp};
    r.rank = grid.world->rank();
  } else {
    RLX_ASSIGN_OR_RETURN(comm, process_group(pipeline ? options.pp : options.tp, pipeline ? "--pp" : "--tp"));
    r.rank = comm->rank();
    if (!pipeline) tp = {comm->rank(), comm->size()};
  }
  RLX_ASSIGN_OR_RETURN(models::BertModel m, models::load_bert_folder(dir, models::BertOutput::sentence_embedding, tp));
  RLX_TRY(apply_precision(m.graph, options.precision, options.device).status());
  const int64_t max_len = options.max_length < 0 ? m.config.max_positions : options.max_length;
  if (max_len < 2 || max_len > m.config.max_positions)
    return error(ErrorCode::invalid_argument, "--max-length must be in [2, ", m.config.max_positions, "]");
  std::unique_ptr<Model> model;
  std::unique_ptr<dist::PipelineRunner> stages;
  if (pipeline) {
    // rank k runs the k-th range of layers; every rank receives the embeddings (output 0)
    RLX_ASSIGN_OR_RETURN(std::vector<ValueId> cuts, dist::even_cuts(m.graph, comm->size()));
    RLX_ASSIGN_OR_RETURN(stages, dist::PipelineRunner::create(m.graph, cuts, comm,
                                                              {.device = options.device, .policy = options.policy,
                                                               .comm = stage_comm},
                                                              {options.micro_batches, {0}}));
  } else {
    RLX_ASSIGN_OR_RETURN(model, Model::compile(m.graph, {.device = options.device, .policy = options.policy,
                                                         .comm = comm}));
  }
  r.load_compile_ms = now_ms() - t0;
  const int64_t dim = m.config.hidden;
  const size_t batch = static_cast<size_t>(options.batch);
  r.embeddings = Tensor::zeros(DType::f32, {static_cast<int64_t>(texts.size()), dim});
  for (size_t start = 0; start < texts.size(); start += batch) {
    std::vector<std::string> chunk(texts.begin() + static_cast<long>(start),
                                   texts.begin() + static_cast<long>(std::min(texts.size(), start + batch)));
    text::Encoding e = m.tokenizer.encode_batch(chunk, max_len);
    std::vector<Tensor> in{e.ids_tensor(), e.mask_tensor(), e.type_tensor()};
    if (stages) {
      std::vector<Tensor> out{Tensor::zeros(DType::f32, {static_cast<int64_t>(chunk.size()), dim})};
      r.dispatch = cat("pipeline stage ", stages->stage(), " of ", stages->stages());
      double a = now_ms();
      RLX_TRY(stages->run_into(in, out));
      r.run_ms += now_ms() - a;
      std::memcpy(r.embeddings.data<float>() + start * dim, out[0].data<float>(), static_cast<size_t>(out[0].nbytes()));
      continue;
    }
    RLX_ASSIGN_OR_RETURN(CompiledVariant * var, model->variant_for(in));
    r.dispatch = var->report.summary();
    double a = now_ms();
    RLX_ASSIGN_OR_RETURN(std::vector<Tensor> out, var->executable->run(in));
    r.run_ms += now_ms() - a;
    std::memcpy(r.embeddings.data<float>() + start * dim, out[0].data<float>(), static_cast<size_t>(out[0].nbytes()));
  }
  return r;
}

int cmd_embed(int argc, char** argv) {
  auto args = parse_args(argc, argv, 2, {"quiet"}, {"device", "policy", "batch", "out", "max-length", "tp", "pp", "micro-batches", "precision"});
  if (!args) return report_error(args.status());
  if (args->positional.size() < 2)
    return report_error(error(ErrorCode::invalid_argument, "usage: rlx embed MODEL_DIR TEXT..."));
  const std::string dir = args->positional[0];
  std::vector<std::string> texts(args->positional.begin() + 1, args->positional.end());
  auto policy = policy_from(*args);
  if (!policy) return report_error(policy.status());
  EmbedOptions eo;
  eo.policy = *policy;
  auto flags = [&]() -> Status {
    RLX_ASSIGN_OR_RETURN(eo.batch, args->integer("batch", 32, 1, 1 << 20));
    RLX_ASSIGN_OR_RETURN(eo.max_length, args->integer("max-length", eo.max_length, 1, 1 << 20));
    RLX_ASSIGN_OR_RETURN(int64_t tp, args->integer("tp", 1, 1, 4096));
    RLX_ASSIGN_OR_RETURN(int64_t pp, args->integer("pp", 1, 1, 4096));
    RLX_ASSIGN_OR_RETURN(int64_t mb, args->integer("micro-batches", 1, 1, 4096));
    eo.tp = static_cast<int>(tp);
    eo.pp = static_cast<int>(pp);
    eo.micro_batches = static_cast<int>(mb);
    return Status::ok();
  };
  if (Status s = flags(); !s) return report_error(s);
  if (auto out = args->get("out"); out && !ends_with(*out, ".npy") && !ends_with(*out, ".json"))
    return report_error(error(ErrorCode::invalid_argument, "--out ", *out, ": expected a file name ending in .npy or .json"));
  eo.device = args->get("device").value_or(default_device_name());
  eo.precision = args->get("precision").value_or("f32");
  auto r = embed_texts(dir, texts, eo);
  if (!r) return report_error(r.status());
  if (r->rank != 0) return kOk;  // rank 0 prints for the tensor-parallel group
  const Tensor& all = r->embeddings;
  const int64_t dim = all.sizes()[1];
  if (!args->has("quiet")) {
    if (!r->dispatch.empty()) std::printf("dispatch: %s\n", r->dispatch.c_str());
    for (size_t i = 0; i < texts.size(); ++i) {
      std::printf("[%zu] %s\n    [", i, texts[i].c_str());
      for (int64_t j = 0; j < std::min<int64_t>(dim, 6); ++j)
        std::printf("%s%.6f", j ? ", " : "", all.data<float>()[i * dim + j]);
      std::printf(", ...] (%lld dims)\n", static_cast<long long>(dim));
    }
    std::printf("time: load+compile %.1f ms, embed %.2f ms for %zu texts on %s\n", r->load_compile_ms, r->run_ms,
                texts.size(), eo.device.c_str());
  }
  if (auto out = args->get("out")) {
    if (ends_with(*out, ".json")) {
      nlohmann::json j = nlohmann::json::array();
      for (size_t i = 0; i < texts.size(); ++i)
        j.push_back(std::vector<float>(all.data<float>() + i * dim, all.data<float>() + (i + 1) * dim));
      std::ofstream f(*out);
      f << j.dump() << "\n";
      if (!f) return report_error(error(ErrorCode::io_error, "cannot write ", *out));
    } else {
      Status s = write_npy(*out, all);
      if (!s.is_ok()) return report_error(s);
    }
  }
  return kOk;
}

int cmd_make_model(int argc, char** argv) {
  if (argc > 2 && std::string_view(argv[2]).ends_with("-tiny")) return cmd_make_decoder_tiny(argc, argv);
  auto args = parse_args(argc, argv, 2, {}, {"out", "seed"});
  if (!args) return report_error(args.status());
  if (args->positional.size() != 1 || !args->get("out"))
    return report_error(error(ErrorCode::invalid_argument, "usage: rlx make-model KIND --out DIR [--seed S]"));
  const std::string kind = args->positional[0];
  auto seed_or = args->seed("seed", 0);
  if (!seed_or) return report_error(seed_or.status());
  const uint64_t seed = *seed_or;
  const std::string dir = *args->get("out");
  if (kind == "minilm") {
    models::BertConfig c;  // all-MiniLM-L6-v2's configuration is the default
    Status s = models::write_random_bert(dir, c, seed);
    if (!s.is_ok()) return report_error(s);
    std::printf("wrote %s: BERT (all-MiniLM-L6-v2 configuration: vocab %lld, hidden %lld, %lld layers, %lld heads), "
                "seed %llu\n",
                dir.c_str(), static_cast<long long>(c.vocab_size), static_cast<long long>(c.hidden),
                static_cast<long long>(c.layers), static_cast<long long>(c.heads), static_cast<unsigned long long>(seed));
    return kOk;
  }
  return report_error(error(ErrorCode::invalid_argument, "unknown model kind '", kind, "' (known: minilm, FAMILY-tiny for the decoder families ", models::family_names(), ")"));
}

}  // namespace rlx::cli
