// The work behind the verbs embed, generate and train, without argument parsing or printing of
// results, so that the rlx program and the Python module (python/) call the same functions.
// They live in the rlx_cli library (every tools/rlx source but main.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/decoder.h"
#include "rlx/compile.h"
#include "rlx/splat.h"
#include "rlx/tensor.h"
#include "train/optim.h"

namespace rlx::cli {

// ---- embed -------------------------------------------------------------------------------

struct EmbedOptions {
  std::string device = "cpu";
  DispatchPolicy policy;
  int64_t batch = 32;       // texts per run
  int64_t max_length = -1;  // tokens per text; -1: the model's max_position_embeddings
  int tp = 1;               // tensor-parallel ranks (a job started with mpirun -np tp)
  int pp = 1;               // pipeline stages (mpirun -np pp, or tp * pp with --tp)
  int micro_batches = 1;    // per run, with pp
  std::string precision = "f32";  // f32 | f16 | bf16: the autocast policy (src/passes/autocast.h)
};

struct EmbedResult {
  Tensor embeddings;          // f32 [texts, hidden]
  std::string dispatch;       // the dispatch report's summary line
  double load_compile_ms = 0, run_ms = 0;
  int rank = 0;               // this process in the tensor-parallel group (rank 0 prints)
};

// Sentence embeddings of `texts` with the BERT-family Hugging Face folder `dir` (what
// `rlx embed` prints). Errors name the folder, file or option at fault.
Expected<EmbedResult> embed_texts(const std::string& dir, const std::vector<std::string>& texts,
                                  const EmbedOptions& options);

// ---- generate ----------------------------------------------------------------------------

struct Sampling {
  double temp = 0.0;  // 0: greedy
  int64_t top_k = 0;  // 0: all
  double top_p = 1.0;
};
// Picks the next token from a row of logits: the largest at temp 0 (the first of ties), else a
// draw from softmax(logits / temp) over the top_k most likely (all at 0), cut to the smallest
// most-likely-first prefix whose probability reaches top_p.
int64_t sample_token(const float* logits, int64_t vocab, const Sampling& s, std::mt19937_64& rng);

struct GenerateOptions {
  // Prompts as text (needs the model's tokenizer), as token ids, or one chat message; exactly
  // one is given. Text prompts get the special tokens the tokenizer adds (Llama's BOS); a chat
  // message becomes the prompt the model's chat template makes of [system,] user (docs/chat.md).
  std::vector<std::string> prompts;
  std::vector<std::vector<int64_t>> prompt_tokens;
  std::string chat, system;
  int64_t n = 32;          // new tokens per prompt (at most)
  Sampling sampling;
  uint64_t seed = 0;
  std::string device = "cpu";
  int64_t context = 0;     // KV-cache slots; 0: longest prompt + n
  int64_t runs = 1;        // repeat the generation (same seed), keep the fastest times
  bool ignore_eos = false;
  // Tensor-parallel ranks: the job must have been started with that many ranks (mpirun -np);
  // each holds 1/tp of the weights, and rank 0's sampled tokens are used by all.
  int tp = 1;
  // Pipeline stages (mpirun -np pp, or tp * pp with tp): stage k runs the k-th range of layers; each
  // step's batch of sequences flows through in micro_batches.
  int pp = 1;
  int micro_batches = 1;
  std::string precision = "f32";  // --precision f16|bf16: the autocast policy (src/passes/autocast.h)
  // --prompt-top1: also record the greedy next token at every prompt position (teacher forced,
  // for agreement between two models); the prefill then computes the logits of every position,
  // so its time includes the output projection of every prompt token. One process only.
  bool prompt_top1 = false;
  // --dump-layers FILE.npy: write the first prompt's residual stream after every layer, f32
  // [layers, tokens, hidden] (models::decoder_layer_outputs), to compare with another
  // implementation layer by layer. f32 and one process only.
  std::string dump_layers;
  // Called (on rank 0 only) with text pieces as they are generated (the prompt first, then each token), for
  // one prompt on the first run only; token ids in decimal when there is no tokenizer.
  std::function<void(const std::string&)> stream;
};

struct GenerateResult {
  std::vector<std::vector<int64_t>> prompt_tokens, tokens;  // per prompt
  std::vector<int64_t> stop_ids;  // the ids that end a sequence (models::end_of_generation_ids)
  std::vector<std::vector<int64_t>> prompt_top1;  // with prompt_top1: per prompt, argmax of the logits after each token
  // per prompt and generated step, the kTopLogits best (token, logit) pairs the step chose from:
  // what tells a near tie (which summation order or rounding may flip) from a real difference
  static constexpr int64_t kTopLogits = 4;
  std::vector<std::vector<std::vector<std::pair<int64_t, float>>>> top_logits;
  bool has_tokenizer = false;
  std::vector<std::string> prompt_texts, texts;  // decoded (when there is a tokenizer)
  int64_t prompt_token_count = 0, decode_steps = 0, weight_bytes_per_step = 0;
  double prefill_s = 0, decode_s = 0, compile_s = 0;
  int rank = 0, ranks = 1;  // this process in the tensor-parallel group
  double prefill_tokens_per_s() const;
  double decode_tokens_per_s() const;
  double decode_weight_gb_per_s() const;
};

// Generates tokens with a decoder model (docs/generation.md) (Hugging Face folder or GGUF file), as
// `rlx generate` does.
Expected<GenerateResult> generate_text(const std::string& path, const GenerateOptions& options);

// A decoder model as this rank of a job holds it: with tp > 1 and / or pp > 1 (under mpirun
// -np tp * pp) its tensor-parallel shard and the groups a DecoderSession spreads over; `world`
// is every rank of the job (this process alone without mpirun).
struct RankedDecoder {
  models::DecoderWeights weights;
  models::DecoderParallel parallel;
  std::shared_ptr<dist::Communicator> world;
};
Expected<RankedDecoder> load_decoder_on_ranks(const std::string& path, int tp, int pp, int micro_batches);

// ---- train -------------------------------------------------------------------------------

struct TrainOptions {
  std::string arch = "mlp", data, json, save, device, export_dir;
  int64_t epochs = 1, batch = 128, eval_batch = 1000, train_size = 60000, test_size = 10000;
  double lr = 0.05;
  uint64_t seed = 1;
  bool synthetic = false, quiet = false, gzip = false;
  bool limit_train = false, limit_test = false;  // --train-size / --test-size given with --data
  train::OptimizerConfig opt;
  train::LrSchedule sched;
  double step_epochs = 1.0;
  int dp = 1;  // data-parallel ranks (a job started with mpirun -np dp); rank 0 prints and saves
  int64_t bucket_kb = 25 * 1024;  // with dp: gradient all-reduce buckets of at most this many KiB
  // pipeline stages (mpirun -np pp, or dp * pp with --dp), micro-batches per batch, schedule
  int pp = 1;
  int tp = 1;  // tensor-parallel ranks (--tp; with --dp or --pp, a grid of tp * dp or tp * pp ranks)
  int micro_batches = 4;
  std::string schedule = "1f1b";  // --pp-schedule
  std::string qat;  // --qat int8: quantization-aware training (train/qat.h); empty: f32
  std::string init;  // --init FILE.safetensors: start from these parameters (fine-tuning)
  std::string precision = "f32";  // --precision f16|bf16: mixed precision (train/amp.h)
};

// Parses the arguments of `rlx train` (after the verb: "mnist", "--arch", "mlp", ...) into
// options, with the program's defaults and checks.
Expected<TrainOptions> parse_train_args(const std::vector<std::string>& args);

struct TrainResult {
  nlohmann::json records;  // one object per epoch, as written by --json
  std::vector<std::pair<std::string, Tensor>> parameters;  // trained, by name
  double test_accuracy = 0, test_loss = 0;
};

// Trains as `rlx train mnist` does (progress printed unless the options say quiet).
Expected<TrainResult> train_mnist(const TrainOptions& options);

// ---- splat (cmd_splat.cpp, docs/splatting.md) --------------------------------------------

// Renders a 3DGS scene (rlx/splat.h's Scene) with `camera` on `device` (cpu or ref): an f32
// image [height, width, 3].
Expected<Tensor> splat_render(const splat::Scene& scene, const splat::Camera& camera,
                              const std::array<float, 3>& background, const std::string& device = "cpu");

struct SplatFitOptions {
  int64_t gaussians = 64;  // fitted Gaussians (the synthetic target has half as many)
  int64_t size = 64;       // image width and height
  int steps = 300;
  double lr = 0.02;        // Adam step for log-scales, quaternions and SH (means: lr / 2, opacities: 2 lr)
  uint64_t seed = 1;
  std::string out_dir;     // target.png, initial.png, step_NNNN.png, final.png, fit.ply
  bool quiet = false;
};
struct SplatFitResult {
  double first_loss = 0, final_loss = 0;
  splat::Scene scene;  // the fitted Gaussians
};
// Fits Gaussians with Adam to the image of a seeded synthetic scene (what `rlx splat fit` does).
Expected<SplatFitResult> splat_fit(const SplatFitOptions& options);

}  // namespace rlx::cli
