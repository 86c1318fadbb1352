// rlx generate: text generation with decoder models (docs/generation.md: Llama, Mistral, Qwen2,
// Qwen3, Gemma 2/3, Phi-3; Hugging Face folder or GGUF file), and rlx make-model FAMILY-tiny.
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "entry.h"
#include "models/chat.h"
#include "models/decoder.h"
#include "models/text/bpe.h"
#include "rlx/npy.h"

namespace rlx::cli {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int64_t sample_token(const float* logits, int64_t vocab, const Sampling& s, std::mt19937_64& rng) {
  if (s.temp <= 0.0) return static_cast<int64_t>(std::max_element(logits, logits + vocab) - logits);
  std::vector<int64_t> idx(static_cast<size_t>(vocab));
  std::iota(idx.begin(), idx.end(), 0);
  const int64_t k = s.top_k > 0 ? std::min(s.top_k, vocab) : vocab;
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
  idx.resize(static_cast<size_t>(k));
  std::vector<double> p(idx.size());
  const double mx = logits[idx[0]];
  double sum = 0;
  for (size_t i = 0; i < idx.size(); ++i) sum += p[i] = std::exp((logits[idx[i]] - mx) / s.temp);
  // top-p: the smallest prefix (most likely first) whose probability reaches p
  size_t keep = idx.size();
  if (s.top_p < 1.0) {
    double c = 0;
    for (size_t i = 0; i < idx.size(); ++i) {
      c += p[i] / sum;
      if (c >= s.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += p[i];
  double r = std::uniform_real_distribution<double>(0.0, total)(rng);
  for (size_t i = 0; i < keep; ++i) {
    r -= p[i];
    if (r <= 0) return idx[i];
  }
  return idx[keep - 1];
}

// The k largest logits of a row with their tokens, largest first.
static std::vector<std::pair<int64_t, float>> top_logits(const float* row, int64_t vocab, int64_t k) {
  std::vector<int64_t> idx(vocab);
  std::iota(idx.begin(), idx.end(), int64_t{0});
  k = std::min(k, vocab);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int64_t a, int64_t b) { return row[a] > row[b]; });
  std::vector<std::pair<int64_t, float>> top;
  for (int64_t i = 0; i < k; ++i) top.emplace_back(idx[i], row[idx[i]]);
  return top;
}

int cmd_make_decoder_tiny(int argc, char** argv) {
  const std::string kind = argv[2];
  const auto family = models::family_from_name(kind.substr(0, kind.size() - std::string_view("-tiny").size()));
  if (!family)
    return report_error(error(ErrorCode::invalid_argument, "unknown model kind '", kind, "' (decoder kinds: FAMILY-tiny with FAMILY one of ",
                              models::family_names(), ")"));
  auto args = parse_args(argc, argv, 3, {"gguf"},
                         {"out", "seed", "gguf-type", "vocab", "layers", "hidden", "heads", "kv-heads", "intermediate"});
  if (!args) return report_error(args.status());
  if (!args->get("out"))
    return report_error(error(ErrorCode::invalid_argument, "usage: rlx make-model ", kind,
                              " --out DIR [--gguf] [--gguf-type f16|f32|q8_0|q4_0|q4_k|q6_k] [--seed S] [--vocab V] [--layers L] "
                              "[--hidden H --heads Q --kv-heads K --intermediate I]"));
  const std::string dir = *args->get("out");
  auto seed = args->seed("seed", 0);
  if (!seed) return report_error(seed.status());
  // hidden 512, 8 layers, 8 / 4 heads of 64, intermediate 1408, vocab 32000, and the family's switches
  models::DecoderConfig c = models::DecoderConfig::for_family(*family);
  if (c.sliding_window > 0) c.sliding_window = 64;  // short enough that the window matters in tests
  if (c.attention_scale == 0 && (*family == models::DecoderFamily::gemma2 || *family == models::DecoderFamily::gemma3))
    c.attention_scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  if (*family == models::DecoderFamily::mistral || *family == models::DecoderFamily::phi3) c.sliding_window = 0;  // (their GGUF form has none)
  // the sizes of a real checkpoint (e.g. Llama 3.2 1B: --hidden 2048 --heads 32 --kv-heads 8
  // --intermediate 8192 --layers 16 --vocab 128256), for benchmarks at real shapes
  auto sizes = [&]() -> Status {
    RLX_ASSIGN_OR_RETURN(c.vocab_size, args->integer("vocab", c.vocab_size, 16, int64_t{1} << 24));
    RLX_ASSIGN_OR_RETURN(c.layers, args->integer("layers", c.layers, 1, 1024));
    RLX_ASSIGN_OR_RETURN(c.hidden, args->integer("hidden", c.hidden, 2, int64_t{1} << 16));
    RLX_ASSIGN_OR_RETURN(c.heads, args->integer("heads", c.hidden / c.head_dim, 1, 1024));
    RLX_ASSIGN_OR_RETURN(c.kv_heads, args->integer("kv-heads", std::min(c.kv_heads, c.heads), 1, 1024));
    RLX_ASSIGN_OR_RETURN(c.intermediate, args->integer("intermediate", c.intermediate, 1, int64_t{1} << 20));
    if (c.hidden % c.heads != 0)
      return error(ErrorCode::invalid_argument, "--hidden ", c.hidden, " is not a multiple of --heads ", c.heads);
    c.head_dim = c.hidden / c.heads;
    return c.validate("rlx make-model");
  };
  if (Status st = sizes(); !st) return report_error(st);
  const std::string type = args->get("gguf-type").value_or("f16");
  std::string gguf;
  if (args->has("gguf") || args->get("gguf-type")) {
    std::string base = dir;
    while (base.size() > 1 && base.back() == '/') base.pop_back();
    gguf = base + "/model-" + type + ".gguf";
  }
  Status s = models::write_random_decoder(dir, c, *seed, gguf, type);
  if (!s.is_ok()) return report_error(s);
  std::printf("wrote %s: %s (vocab %lld, hidden %lld, %lld layers, %lld query / %lld KV heads of %lld, intermediate %lld), "
              "seed %llu%s%s\n",
              dir.c_str(), std::string(models::family_name(c.family)).c_str(), static_cast<long long>(c.vocab_size),
              static_cast<long long>(c.hidden), static_cast<long long>(c.layers), static_cast<long long>(c.heads),
              static_cast<long long>(c.kv_heads), static_cast<long long>(c.head_dim), static_cast<long long>(c.intermediate),
              static_cast<unsigned long long>(*seed), gguf.empty() ? "" : "; GGUF: ", gguf.c_str());
  return kOk;
}

double GenerateResult::prefill_tokens_per_s() const {
  return prefill_s > 0 ? static_cast<double>(prompt_token_count) / prefill_s : 0.0;
}
double GenerateResult::decode_tokens_per_s() const {
  const int64_t batch = static_cast<int64_t>(tokens.size());
  return decode_steps > 0 ? static_cast<double>(decode_steps * batch) / decode_s : 0.0;
}
double GenerateResult::decode_weight_gb_per_s() const {
  return decode_steps > 0 ? static_cast<double>(weight_bytes_per_step) * decode_steps / decode_s / 1e9 : 0.0;
}

Expected<RankedDecoder> load_decoder_on_ranks(const std::string& path, int tp, int pp, int micro_batches) {
  RankedDecoder r;
  RLX_ASSIGN_OR_RETURN(r.weights, models::load_decoder(path));
  r.parallel = {nullptr, pp > 1, micro_batches, nullptr};
  if (tp > 1 && pp > 1) {
    // a grid: each stage's layers sharded over its tp ranks
    RLX_ASSIGN_OR_RETURN(ProcessGrid grid, process_grid(tp, pp));
    RLX_ASSIGN_OR_RETURN(r.weights, models::shard_decoder(r.weights, {grid.tp_rank, tp}));
    r.world = grid.world;
    r.parallel.comm = grid.pipeline;
    r.parallel.stage_comm = grid.stage;
  } else {
    RLX_ASSIGN_OR_RETURN(r.world, process_group(pp > 1 ? pp : tp, pp > 1 ? "--pp" : "--tp"));
    if (r.world->size() > 1 && pp == 1) {
      RLX_ASSIGN_OR_RETURN(r.weights, models::shard_decoder(r.weights, {r.world->rank(), r.world->size()}));
    }
    r.parallel.comm = r.world;
  }
  return r;
}

Expected<GenerateResult> generate_text(const std::string& path, const GenerateOptions& o) {
  const Sampling& sp = o.sampling;
  if (!o.prompts.empty() + !o.prompt_tokens.empty() + !o.chat.empty() != 1)
    return error(ErrorCode::invalid_argument, "give prompts with --prompt, --tokens or --chat (one of them)");
  if (!o.system.empty() && o.chat.empty()) return error(ErrorCode::invalid_argument, "--system needs --chat");
  if (o.runs < 1) return error(ErrorCode::invalid_argument, "--runs must be at least 1");
  if (o.n < 1 || sp.temp < 0 || sp.top_k < 0 || !(sp.top_p > 0 && sp.top_p <= 1))
    return error(ErrorCode::invalid_argument, "need -n >= 1, --temp >= 0, --top-k >= 0, 0 < --top-p <= 1");
  const int64_t n = o.n;
  RLX_ASSIGN_OR_RETURN(RankedDecoder ranked, load_decoder_on_ranks(path, o.tp, o.pp, o.micro_batches));
  const models::DecoderWeights& weights = ranked.weights;
  // comm: every rank of the job (the sampled tokens come from its rank 0); par: the session's groups
  const std::shared_ptr<dist::Communicator>& comm = ranked.world;
  const models::DecoderParallel& par = ranked.parallel;
  auto tokenizer = text::BpeTokenizer::load(path);
  if (!tokenizer && o.prompt_tokens.empty()) return tokenizer.status();
  GenerateResult r;
  r.has_tokenizer = tokenizer.has_value();
  std::vector<std::vector<int64_t>>& prompts = r.prompt_tokens;
  if (!o.chat.empty()) {
    std::vector<text::ChatMessage> messages;
    if (!o.system.empty()) messages.push_back({"system", o.system});
    messages.push_back({"user", o.chat});
    RLX_ASSIGN_OR_RETURN(std::string text, models::chat_prompt(path, messages));
    prompts.push_back(tokenizer->encode(text, /*add_special_tokens=*/false));  // the template wrote them
  } else if (!o.prompts.empty()) {
    for (const auto& t : o.prompts) prompts.push_back(tokenizer->encode(t, /*add_special_tokens=*/true));
  } else {
    prompts = o.prompt_tokens;
  }
  int64_t longest = 0;
  for (const auto& p : prompts) {
    if (p.empty()) return error(ErrorCode::invalid_argument, "a prompt has no tokens");
    longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()));
    r.prompt_token_count += static_cast<int64_t>(p.size());
  }
  const int64_t batch = static_cast<int64_t>(prompts.size());
  const int64_t context = o.context > 0 ? o.context : longest + n;
  if (context < longest + n)
    return error(ErrorCode::invalid_argument, "--context ", context, " is shorter than the prompt plus -n");
  const std::vector<int64_t> stop = models::end_of_generation_ids(path, weights.config, tokenizer ? &*tokenizer : nullptr);
  r.stop_ids = stop;
  const int64_t eos = stop.empty() ? 0 : stop[0];  // what finished sequences are fed

  RLX_ASSIGN_OR_RETURN(passes::Precision prec, passes::parse_precision(o.precision));
  auto t_compile = std::chrono::steady_clock::now();
  if (o.prompt_top1 && comm->size() > 1)
    return error(ErrorCode::unsupported, "--prompt-top1 runs in one process (without --tp / --pp)");
  if (!o.dump_layers.empty()) {
    if (comm->size() > 1 || prec != passes::Precision::f32)
      return error(ErrorCode::unsupported, "--dump-layers runs in f32 in one process (without --precision, --tp and --pp)");
    RLX_ASSIGN_OR_RETURN(Tensor layers, models::decoder_layer_outputs(weights, prompts[0], o.device, context));
    if (Status s = write_npy(o.dump_layers, layers); !s)
      return error(ErrorCode::io_error, "--dump-layers ", o.dump_layers, ": ", s.message());
  }
  RLX_ASSIGN_OR_RETURN(auto session, models::DecoderSession::create(weights, batch, context, o.device, o.prompt_top1, par, prec));
  r.rank = comm->rank();
  r.ranks = comm->size();
  RLX_TRY(session->prepare(longest));
  r.compile_s = seconds_since(t_compile);

  const int64_t V = weights.config.vocab_size;
  std::vector<std::vector<int64_t>>& out = r.tokens;
  // runs > 1 repeats the whole generation (same seed) and keeps the fastest times
  for (int64_t run = 0; run < o.runs; ++run) {
    const bool show = run == 0 && batch == 1 && o.stream && r.rank == 0;
    std::mt19937_64 rng(o.seed);
    out.assign(batch, {});
    std::vector<bool> done(batch, false);
    if (run == 0) r.top_logits.assign(batch, {});
    if (show && tokenizer) o.stream(tokenizer->decode(prompts[0]));
    auto t0 = std::chrono::steady_clock::now();
    RLX_ASSIGN_OR_RETURN(Tensor logits, session->prefill(prompts));
    const double p_s = seconds_since(t0);
    // all-position logits [batch, P, V] (--prompt-top1): prompts are left padded, so every
    // prompt's last token is at P - 1, and token i of prompt b at pad(b) + i
    int64_t P = o.prompt_top1 ? logits.sizes()[1] : 1;
    if (o.prompt_top1 && run == 0) {
      r.prompt_top1.assign(batch, {});
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t i = 0; i < static_cast<int64_t>(prompts[b].size()); ++i) {
          const float* row = logits.data<float>() + (b * P + session->pad(b) + i) * V;
          r.prompt_top1[b].push_back(static_cast<int64_t>(std::max_element(row, row + V) - row));
        }
    }
    auto t1 = std::chrono::steady_clock::now();
    int64_t steps = 0;
    for (int64_t step = 0; step < n; ++step) {
      std::vector<int64_t> next(batch, eos);
      bool any = false;
      for (int64_t b = 0; b < batch; ++b) {
        if (done[b]) continue;
        const float* row = logits.data<float>() + (b * P + P - 1) * V;
        next[b] = sample_token(row, V, sp, rng);
        if (run == 0) r.top_logits[b].push_back(top_logits(row, V, GenerateResult::kTopLogits));
      }
      // every rank continues with rank 0's tokens (their logits agree, up to the summation
      // order of the all_reduce, which a near tie could expose)
      if (comm->size() > 1) RLX_TRY(comm->broadcast(next.data(), batch, DType::i64, 0));
      for (int64_t b = 0; b < batch; ++b) {
        if (done[b]) continue;
        const int64_t tok = next[b];
        out[b].push_back(tok);
        if (b == 0 && show) o.stream(tokenizer ? tokenizer->token_bytes(tok) : " " + std::to_string(tok));
        if (!o.ignore_eos && std::binary_search(stop.begin(), stop.end(), tok)) done[b] = true;
        any = any || !done[b];
      }
      if (!any || step + 1 == n) break;
      RLX_ASSIGN_OR_RETURN(logits, session->decode(next));
      P = 1;
      ++steps;
    }
    const double d_s = seconds_since(t1);
    if (run == 0 || p_s < r.prefill_s) r.prefill_s = p_s;
    if (run == 0 || (steps > 0 && d_s / steps < r.decode_s / std::max<int64_t>(1, r.decode_steps))) {
      r.decode_s = d_s;
      r.decode_steps = steps;
    }
  }
  r.weight_bytes_per_step = static_cast<int64_t>(session->weight_bytes_per_step());
  if (tokenizer)
    for (int64_t b = 0; b < batch; ++b) {
      r.prompt_texts.push_back(tokenizer->decode(prompts[b]));
      r.texts.push_back(tokenizer->decode(out[b]));
    }
  return r;
}

int cmd_generate(int argc, char** argv) {
  // -n N is accepted as well as --n N
  std::vector<std::string> store(argv, argv + argc);
  for (auto& a : store)
    if (a == "-n") a = "--n";
  std::vector<char*> av;
  for (auto& a : store) av.push_back(a.data());
  auto args = parse_args(argc, av.data(), 2, {"quiet", "ignore-eos", "prompt-top1"},
                         {"prompt", "tokens", "chat", "system", "n", "temp", "top-k", "top-p", "seed", "json", "device", "context", "runs", "tp", "pp", "micro-batches", "precision", "dump-layers"});
  if (!args) return report_error(args.status());
  const char* usage =
      "usage: rlx generate MODEL ((--prompt TEXT | --tokens 1,2,3)... | --chat MESSAGE [--system TEXT]) [-n N] [--temp T --top-k K --top-p P --seed S] "
      "[--json FILE] [--device D] [--context C] [--runs R] [--ignore-eos] [--quiet] [--prompt-top1] [--dump-layers FILE.npy] [--tp T] [--pp P [--micro-batches M]] (under mpirun -np T*P)";
  if (args->positional.size() != 1) return report_error(error(ErrorCode::invalid_argument, usage));
  const std::string path = args->positional[0];
  GenerateOptions o;
  o.prompts = args->all("prompt");
  const auto prompts_ids = args->all("tokens");
  o.chat = args->get("chat").value_or("");
  o.system = args->get("system").value_or("");
  if (!o.prompts.empty() + !prompts_ids.empty() + args->get("chat").has_value() != 1)
    return report_error(error(ErrorCode::invalid_argument, "give prompts with --prompt, --tokens or --chat (one of them); ", usage));
  if (args->get("chat") && o.chat.empty()) return report_error(error(ErrorCode::invalid_argument, "--chat needs a message"));
  Sampling& sp = o.sampling;
  // every count is bounded so that sums of them (prompt + n, the KV cache) cannot overflow
  constexpr int64_t kMaxTokens = int64_t{1} << 24;
  auto flags = [&]() -> Status {
    RLX_ASSIGN_OR_RETURN(o.runs, args->integer("runs", o.runs, 1, 1000000));
    RLX_ASSIGN_OR_RETURN(o.n, args->integer("n", o.n, 1, kMaxTokens));
    RLX_ASSIGN_OR_RETURN(sp.temp, args->number("temp", sp.temp, 0, 1e6));
    RLX_ASSIGN_OR_RETURN(sp.top_k, args->integer("top-k", sp.top_k, 0, kMaxTokens));
    RLX_ASSIGN_OR_RETURN(sp.top_p, args->number("top-p", sp.top_p, 0, 1));
    if (!(sp.top_p > 0)) return error(ErrorCode::invalid_argument, "--top-p must be above 0");
    RLX_ASSIGN_OR_RETURN(o.seed, args->seed("seed", o.seed));
    RLX_ASSIGN_OR_RETURN(int64_t tp, args->integer("tp", o.tp, 1, 4096));
    RLX_ASSIGN_OR_RETURN(int64_t pp, args->integer("pp", o.pp, 1, 4096));
    RLX_ASSIGN_OR_RETURN(int64_t mb, args->integer("micro-batches", o.micro_batches, 1, 4096));
    o.tp = static_cast<int>(tp);
    o.pp = static_cast<int>(pp);
    o.micro_batches = static_cast<int>(mb);
    RLX_ASSIGN_OR_RETURN(o.context, args->integer("context", o.context, 1, kMaxTokens));
    return Status::ok();
  };
  if (Status s = flags(); !s) return report_error(s);
  if (args->get("precision")) o.precision = *args->get("precision");
  for (const auto& t : prompts_ids) {
    auto ids = parse_int_list(t, "--tokens");
    if (!ids) return report_error(ids.status());
    o.prompt_tokens.push_back(*ids);
  }
  o.device = args->get("device").value_or("cpu");
  o.ignore_eos = args->has("ignore-eos");
  o.prompt_top1 = args->has("prompt-top1");
  o.dump_layers = args->get("dump-layers").value_or("");
  const bool quiet = args->has("quiet");
  if (!quiet)
    o.stream = [](const std::string& piece) {
      std::fputs(piece.c_str(), stdout);
      std::fflush(stdout);
    };
  auto r = generate_text(path, o);
  if (!r) return report_error(r.status());
  if (r->rank != 0) return kOk;  // rank 0 prints for the tensor-parallel group
  const int64_t batch = static_cast<int64_t>(r->tokens.size());
  if (batch == 1 && !quiet) std::printf("\n");
  if (batch > 1 && !quiet)
    for (int64_t b = 0; b < batch; ++b) {
      std::printf("[%lld] ", static_cast<long long>(b));
      if (r->has_tokenizer) {
        std::printf("%s%s\n", r->prompt_texts[b].c_str(), r->texts[b].c_str());
      } else {
        for (int64_t t : r->tokens[b]) std::printf("%lld ", static_cast<long long>(t));
        std::printf("\n");
      }
    }
  std::fprintf(stderr,
               "prefill: %lld tokens in %.1f ms (%.1f tokens/s); decode: %lld steps x %lld in %.1f ms (%.1f tokens/s, "
               "%.2f GB/s of weights); compile %.2f s\n",
               static_cast<long long>(r->prompt_token_count), r->prefill_s * 1e3, r->prefill_tokens_per_s(),
               static_cast<long long>(r->decode_steps), static_cast<long long>(batch), r->decode_s * 1e3,
               r->decode_tokens_per_s(), r->decode_weight_gb_per_s(), r->compile_s);
  if (auto jf = args->get("json")) {
    nlohmann::json j;
    j["model"] = path;
    j["batch"] = batch;
    j["prompt_tokens"] = r->prompt_tokens;
    j["tokens"] = r->tokens;
    if (r->has_tokenizer) j["text"] = r->texts;
    if (o.prompt_top1) j["prompt_top1"] = r->prompt_top1;
    j["top_logits"] = r->top_logits;
    j["stop_token_ids"] = r->stop_ids;
    j["prefill_tokens_per_s"] = r->prefill_tokens_per_s();
    j["decode_tokens_per_s"] = r->decode_tokens_per_s();
    j["prefill_ms"] = r->prefill_s * 1e3;
    j["decode_ms"] = r->decode_s * 1e3;
    j["decode_steps"] = r->decode_steps;
    j["decode_weight_gb_per_s"] = r->decode_weight_gb_per_s();
    j["weight_bytes_per_step"] = r->weight_bytes_per_step;
    j["compile_s"] = r->compile_s;
    j["sampling"] = {{"temp", sp.temp}, {"top_k", sp.top_k}, {"top_p", sp.top_p}, {"seed", o.seed}};
    std::ofstream f(*jf);
    f << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    if (!f) return report_error(error(ErrorCode::io_error, "cannot write ", *jf));
  }
  return kOk;
}

}  // namespace rlx::cli
