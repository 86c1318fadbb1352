// rlx generate: text generation with Qwen3-family models (Hugging Face folder or GGUF file),
// and rlx make-model qwen3-tiny.
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
#include "models/qwen3.h"
#include "models/text/bpe.h"

namespace rlx::cli {
namespace {

struct Sampling {
  double temp = 0.0;  // 0: greedy
  int64_t top_k = 0;  // 0: all
  double top_p = 1.0;
};

// Picks the next token from a row of logits.
int64_t sample(const float* logits, int64_t vocab, const Sampling& s, std::mt19937_64& rng) {
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

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int cmd_make_qwen3_tiny(int argc, char** argv) {
  auto args = parse_args(argc, argv, 3, {"gguf"}, {"out", "seed", "gguf-type", "vocab", "layers"});
  if (!args) return report_error(args.status());
  if (!args->get("out"))
    return report_error(error(ErrorCode::invalid_argument,
                              "usage: rlx make-model qwen3-tiny --out DIR [--gguf] [--gguf-type f16|f32|q8_0|q4_0|q4_k|q6_k] [--seed S]"));
  const std::string dir = *args->get("out");
  const uint64_t seed = std::strtoull(args->get("seed").value_or("0").c_str(), nullptr, 10);
  models::Qwen3Config c;  // hidden 512, 8 layers, 8 / 4 heads of 64, intermediate 1408, vocab 32000
  if (args->get("vocab")) c.vocab_size = std::strtoll(args->get("vocab")->c_str(), nullptr, 10);
  if (args->get("layers")) c.layers = std::strtoll(args->get("layers")->c_str(), nullptr, 10);
  const std::string type = args->get("gguf-type").value_or("f16");
  std::string gguf;
  if (args->has("gguf") || args->get("gguf-type")) {
    std::string base = dir;
    while (base.size() > 1 && base.back() == '/') base.pop_back();
    gguf = base + "/model-" + type + ".gguf";
  }
  Status s = models::write_random_qwen3(dir, c, seed, gguf, type);
  if (!s.is_ok()) return report_error(s);
  std::printf("wrote %s: Qwen3 (vocab %lld, hidden %lld, %lld layers, %lld query / %lld KV heads of %lld, intermediate %lld), "
              "seed %llu%s%s\n",
              dir.c_str(), static_cast<long long>(c.vocab_size), static_cast<long long>(c.hidden),
              static_cast<long long>(c.layers), static_cast<long long>(c.heads), static_cast<long long>(c.kv_heads),
              static_cast<long long>(c.head_dim), static_cast<long long>(c.intermediate),
              static_cast<unsigned long long>(seed), gguf.empty() ? "" : "; GGUF: ", gguf.c_str());
  return kOk;
}

int cmd_generate(int argc, char** argv) {
  // -n N is accepted as well as --n N
  std::vector<std::string> store(argv, argv + argc);
  for (auto& a : store)
    if (a == "-n") a = "--n";
  std::vector<char*> av;
  for (auto& a : store) av.push_back(a.data());
  auto args = parse_args(argc, av.data(), 2, {"quiet", "ignore-eos"},
                         {"prompt", "tokens", "n", "temp", "top-k", "top-p", "seed", "json", "device", "context", "runs"});
  if (!args) return report_error(args.status());
  const char* usage =
      "usage: rlx generate MODEL (--prompt TEXT | --tokens 1,2,3)... [-n N] [--temp T --top-k K --top-p P --seed S] "
      "[--json FILE] [--device D] [--context C] [--runs R] [--ignore-eos] [--quiet]";
  if (args->positional.size() != 1) return report_error(error(ErrorCode::invalid_argument, usage));
  const std::string path = args->positional[0];
  const auto prompts_text = args->all("prompt");
  const auto prompts_ids = args->all("tokens");
  if (prompts_text.empty() == prompts_ids.empty())
    return report_error(error(ErrorCode::invalid_argument, "give prompts with --prompt or with --tokens (not both); ", usage));
  Sampling sp;
  int64_t n = 32, runs = 1;
  uint64_t seed = 0;
  try {
    if (args->get("runs")) runs = std::stoll(*args->get("runs"));
    if (args->get("n")) n = std::stoll(*args->get("n"));
    if (args->get("temp")) sp.temp = std::stod(*args->get("temp"));
    if (args->get("top-k")) sp.top_k = std::stoll(*args->get("top-k"));
    if (args->get("top-p")) sp.top_p = std::stod(*args->get("top-p"));
    if (args->get("seed")) seed = std::stoull(*args->get("seed"));
  } catch (const std::exception&) {
    return report_error(error(ErrorCode::invalid_argument, "a number option has a value that is not a number"));
  }
  if (runs < 1) return report_error(error(ErrorCode::invalid_argument, "--runs must be at least 1"));
  if (n < 1 || sp.temp < 0 || sp.top_k < 0 || !(sp.top_p > 0 && sp.top_p <= 1))
    return report_error(error(ErrorCode::invalid_argument, "need -n >= 1, --temp >= 0, --top-k >= 0, 0 < --top-p <= 1"));
  const bool quiet = args->has("quiet");

  auto weights = models::load_qwen3(path);
  if (!weights) return report_error(weights.status());
  auto tokenizer = text::BpeTokenizer::load(path);
  if (!tokenizer && !prompts_text.empty()) return report_error(tokenizer.status());
  std::vector<std::vector<int64_t>> prompts;
  if (!prompts_text.empty()) {
    for (const auto& t : prompts_text) prompts.push_back(tokenizer->encode(t));
  } else {
    for (const auto& t : prompts_ids) {
      auto ids = parse_int_list(t);
      if (!ids) return report_error(ids.status());
      prompts.push_back(*ids);
    }
  }
  int64_t longest = 0, prompt_tokens = 0;
  for (const auto& p : prompts) {
    if (p.empty()) return report_error(error(ErrorCode::invalid_argument, "a prompt has no tokens"));
    longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()));
    prompt_tokens += static_cast<int64_t>(p.size());
  }
  const int64_t batch = static_cast<int64_t>(prompts.size());
  int64_t context = longest + n;
  if (args->get("context")) context = std::strtoll(args->get("context")->c_str(), nullptr, 10);
  if (context < longest + n)
    return report_error(error(ErrorCode::invalid_argument, "--context ", context, " is shorter than the prompt plus -n"));
  const int64_t eos = weights->config.eos_token_id >= 0 ? weights->config.eos_token_id : (tokenizer ? tokenizer->eos_id : -1);

  auto t_compile = std::chrono::steady_clock::now();
  auto session = models::Qwen3Session::create(*weights, batch, context, args->get("device").value_or("cpu"));
  if (!session) return report_error(session.status());
  if (Status s = (*session)->prepare(longest); !s.is_ok()) return report_error(s);
  const double compile_s = seconds_since(t_compile);

  const int64_t V = weights->config.vocab_size;
  std::vector<std::vector<int64_t>> out;
  double prefill_s = 0, decode_s = 0;
  int64_t decode_steps = 0;
  // --runs R repeats the whole generation (same seed) and keeps the fastest times
  for (int64_t run = 0; run < runs; ++run) {
    const bool show = run == 0 && batch == 1 && !quiet;
    std::mt19937_64 rng(seed);
    out.assign(batch, {});
    std::vector<bool> done(batch, false);
    if (show && tokenizer) {
      std::fputs(tokenizer->decode(prompts[0]).c_str(), stdout);
      std::fflush(stdout);
    }
    auto t0 = std::chrono::steady_clock::now();
    auto logits = (*session)->prefill(prompts);
    if (!logits) return report_error(logits.status());
    const double p_s = seconds_since(t0);
    auto t1 = std::chrono::steady_clock::now();
    int64_t steps = 0;
    for (int64_t step = 0; step < n; ++step) {
      std::vector<int64_t> next(batch, eos >= 0 ? eos : 0);
      bool any = false;
      for (int64_t b = 0; b < batch; ++b) {
        if (done[b]) continue;
        const int64_t tok = sample(logits->data<float>() + b * V, V, sp, rng);
        next[b] = tok;
        out[b].push_back(tok);
        if (b == 0 && show) {
          if (tokenizer) {
            std::fputs(tokenizer->token_bytes(tok).c_str(), stdout);
          } else {
            std::printf(" %lld", static_cast<long long>(tok));
          }
          std::fflush(stdout);
        }
        if (tok == eos && !args->has("ignore-eos")) done[b] = true;
        any = any || !done[b];
      }
      if (!any || step + 1 == n) break;
      logits = (*session)->decode(next);
      if (!logits) return report_error(logits.status());
      ++steps;
    }
    const double d_s = seconds_since(t1);
    if (run == 0 || p_s < prefill_s) prefill_s = p_s;
    if (run == 0 || (steps > 0 && d_s / steps < decode_s / std::max<int64_t>(1, decode_steps))) {
      decode_s = d_s;
      decode_steps = steps;
    }
  }
  if (batch == 1 && !quiet) std::printf("\n");
  if (batch > 1 && !quiet)
    for (int64_t b = 0; b < batch; ++b) {
      std::printf("[%lld] ", static_cast<long long>(b));
      if (tokenizer) {
        std::printf("%s%s\n", tokenizer->decode(prompts[b]).c_str(), tokenizer->decode(out[b]).c_str());
      } else {
        for (int64_t t : out[b]) std::printf("%lld ", static_cast<long long>(t));
        std::printf("\n");
      }
    }
  const double prefill_tps = static_cast<double>(prompt_tokens) / prefill_s;
  const double decode_tps = decode_steps > 0 ? static_cast<double>(decode_steps * batch) / decode_s : 0.0;
  const double gbps =
      decode_steps > 0 ? static_cast<double>((*session)->weight_bytes_per_step()) * decode_steps / decode_s / 1e9 : 0.0;
  std::fprintf(stderr,
               "prefill: %lld tokens in %.1f ms (%.1f tokens/s); decode: %lld steps x %lld in %.1f ms (%.1f tokens/s, "
               "%.2f GB/s of weights); compile %.2f s\n",
               static_cast<long long>(prompt_tokens), prefill_s * 1e3, prefill_tps, static_cast<long long>(decode_steps),
               static_cast<long long>(batch), decode_s * 1e3, decode_tps, gbps, compile_s);
  if (auto jf = args->get("json")) {
    nlohmann::json j;
    j["model"] = path;
    j["batch"] = batch;
    j["prompt_tokens"] = prompts;
    j["tokens"] = out;
    if (tokenizer) {
      std::vector<std::string> texts;
      for (const auto& o : out) texts.push_back(tokenizer->decode(o));
      j["text"] = texts;
    }
    j["prefill_tokens_per_s"] = prefill_tps;
    j["decode_tokens_per_s"] = decode_tps;
    j["prefill_ms"] = prefill_s * 1e3;
    j["decode_ms"] = decode_s * 1e3;
    j["decode_steps"] = decode_steps;
    j["decode_weight_gb_per_s"] = gbps;
    j["weight_bytes_per_step"] = (*session)->weight_bytes_per_step();
    j["compile_s"] = compile_s;
    j["sampling"] = {{"temp", sp.temp}, {"top_k", sp.top_k}, {"top_p", sp.top_p}, {"seed", seed}};
    std::ofstream f(*jf);
    f << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    if (!f) return report_error(error(ErrorCode::io_error, "cannot write ", *jf));
  }
  return kOk;
}

}  // namespace rlx::cli
