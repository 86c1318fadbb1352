// Qwen3 (random weights, tiny configurations) against an independent plain PyTorch
// implementation (scripts/peers/decoder_torch.py, computing in f64): logits at every position of
// left-padded batches {1, 2, 4} x prompts {8, 32, 128} within kLogitTol and the same top-1
// token everywhere; decoding with the KV cache equals recomputing the whole sequence; an f16
// GGUF gives the same tokens as the safetensors folder; quantized GGUF top-1 agreement with f32
// is reported.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>

#include "models/decoder.h"
#include "models/text/bpe.h"
#include "decoder_peers.h"
#include "rlx/npy.h"

namespace rlx {
namespace {

using namespace decoder_tests;

// Max abs difference of logits to the f64 reference (logits here are O(1..10); f32 rounding
// gives about 1e-6).
constexpr double kLogitTol = 1e-4;

const std::string& kBase = kModelBase;

// Tiny configurations: A is tied with 2 query heads per KV head and head_dim * heads == hidden;
// B is untied, 4 query heads per KV head, head_dim * heads != hidden, another rope theta.
models::DecoderConfig config_a() {
  models::DecoderConfig c;
  c.vocab_size = 384;
  c.hidden = 64;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 16;
  c.intermediate = 96;
  c.max_positions = 512;
  c.rope_theta = 1000000.0;
  c.tie_embeddings = true;
  return c;
}
models::DecoderConfig config_b() {
  models::DecoderConfig c = config_a();
  c.vocab_size = 300;
  c.hidden = 64;
  c.heads = 4;
  c.kv_heads = 1;
  c.head_dim = 32;
  c.intermediate = 128;
  c.rope_theta = 10000.0;
  c.tie_embeddings = false;
  c.rms_eps = 1e-5;
  return c;
}

// Writes the model once per test binary (folder plus f16 GGUF).
std::string model_dir(const std::string& name, const models::DecoderConfig& c, uint64_t seed) {
  mkdir(kBase.c_str(), 0755);
  // one folder per process: ctest may run these tests in parallel
  const std::string dir = kBase + name + "_" + std::to_string(getpid());
  Status s = models::write_random_decoder(dir, c, seed, dir + ".f16.gguf", "f16");
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return dir;
}
const std::string& dir_a() {
  static const std::string d = model_dir("qwen3_a", config_a(), 11);
  return d;
}
const std::string& dir_b() {
  static const std::string d = model_dir("qwen3_b", config_b(), 12);
  return d;
}

void check_prefill_parity(const std::string& dir, const std::vector<int64_t>& batches, const std::vector<int64_t>& prompts,
                          const std::string& tag) {
  auto w = models::load_decoder(dir);
  ASSERT_TRUE(w.has_value()) << w.status().to_string();
  const int64_t V = w->config.vocab_size;
  std::mt19937_64 rng(5);
  struct Case {
    int64_t batch, prompt;
    std::vector<std::vector<int64_t>> seqs;
    Tensor logits;
    std::vector<int64_t> pads;
  };
  std::vector<Case> cases;
  std::vector<std::vector<int64_t>> all;
  for (int64_t b : batches) {
    auto session = models::DecoderSession::create(*w, b, 136, "cpu", /*all_logits=*/true);
    ASSERT_TRUE(session.has_value()) << session.status().to_string();
    for (int64_t p : prompts) {
      Case c{b, p, {}, {}, {}};
      // different lengths in one batch: the first is the longest, the others shorter
      for (int64_t i = 0; i < b; ++i) c.seqs.push_back(random_tokens(rng, std::max<int64_t>(1, p - i * (p / 4 + 1)), V));
      auto logits = (*session)->prefill(c.seqs);
      ASSERT_TRUE(logits.has_value()) << logits.status().to_string();
      c.logits = logits->clone();
      for (int64_t i = 0; i < b; ++i) c.pads.push_back((*session)->pad(i));
      for (const auto& s : c.seqs) all.push_back(s);
      cases.push_back(std::move(c));
    }
  }
  Tensor ref = torch_logits(dir, all, tag);
  ASSERT_EQ(ref.rank(), 3);
  const int64_t L = ref.sizes()[1];
  int64_t row = 0;
  Compare total;
  for (const Case& c : cases) {
    Compare cc;
    for (int64_t i = 0; i < c.batch; ++i, ++row) {
      const int64_t n = static_cast<int64_t>(c.seqs[i].size());
      ASSERT_EQ(c.pads[i], c.prompt - n);
      for (int64_t t = 0; t < n; ++t) {
        const float* got = c.logits.data<float>() + ((i * c.prompt) + c.pads[i] + t) * V;
        const float* want = ref.data<float>() + (row * L + t) * V;
        compare_row(got, want, V, cc);
      }
    }
    std::printf("%s batch %lld prompt %lld: max abs logit difference %.3g, top-1 equal %lld / %lld\n", tag.c_str(),
                static_cast<long long>(c.batch), static_cast<long long>(c.prompt), cc.max_abs,
                static_cast<long long>(cc.top1_equal), static_cast<long long>(cc.positions));
    EXPECT_LT(cc.max_abs, kLogitTol) << "batch " << c.batch << " prompt " << c.prompt;
    EXPECT_EQ(cc.top1_equal, cc.positions) << "batch " << c.batch << " prompt " << c.prompt;
    total.max_abs = std::max(total.max_abs, cc.max_abs);
  }
}

TEST(Qwen3Parity, PrefillMatchesPyTorchAtEveryPosition) {
  if (!have_torch()) GTEST_SKIP() << "python3-torch is not installed (scripts/install-deps.sh installs it)";
  check_prefill_parity(dir_a(), {1, 2, 4}, {8, 32, 128}, "a");
}

TEST(Qwen3Parity, UntiedWideHeadsMatchPyTorch) {
  if (!have_torch()) GTEST_SKIP() << "python3-torch is not installed (scripts/install-deps.sh installs it)";
  check_prefill_parity(dir_b(), {2}, {32}, "b");
}

// A configuration drawn from a seeded generator (printed), batch 3 with different lengths.
TEST(Qwen3Parity, DrawnConfigurationMatchesPyTorch) {
  if (!have_torch()) GTEST_SKIP() << "python3-torch is not installed (scripts/install-deps.sh installs it)";
  std::mt19937_64 rng(2026);
  auto pick = [&](std::vector<int64_t> v) { return v[rng() % v.size()]; };
  models::DecoderConfig c;
  c.vocab_size = pick({260, 333, 500});
  c.hidden = pick({32, 48, 96});
  c.kv_heads = pick({1, 2, 3});
  c.heads = c.kv_heads * pick({1, 2, 4});
  c.head_dim = pick({8, 16, 24});
  c.intermediate = pick({40, 64, 136});
  c.layers = pick({1, 3});
  c.tie_embeddings = rng() % 2 == 0;
  c.rope_theta = pick({10000, 500000, 1000000});
  std::printf("drawn: vocab %lld hidden %lld layers %lld heads %lld/%lld head_dim %lld intermediate %lld tied %d theta %g\n",
              static_cast<long long>(c.vocab_size), static_cast<long long>(c.hidden), static_cast<long long>(c.layers),
              static_cast<long long>(c.heads), static_cast<long long>(c.kv_heads), static_cast<long long>(c.head_dim),
              static_cast<long long>(c.intermediate), c.tie_embeddings ? 1 : 0, c.rope_theta);
  check_prefill_parity(model_dir("qwen3_c", c, 13), {3}, {24}, "c");
}

// Greedy decoding with the cache; returns per step the logits [batch, vocab] and the tokens.
struct Generated {
  std::vector<std::vector<int64_t>> tokens;  // per sequence
  std::vector<Tensor> logits;                // per step: [batch, 1, vocab] (step 0: prefill's last)
};
Generated greedy(const models::DecoderWeights& w, const std::vector<std::vector<int64_t>>& prompts, int64_t steps) {
  Generated g;
  const int64_t B = static_cast<int64_t>(prompts.size()), V = w.config.vocab_size;
  auto session = models::DecoderSession::create(w, B, 64, "cpu", false);
  EXPECT_TRUE(session.has_value()) << session.status().to_string();
  if (!session) return g;
  g.tokens.resize(B);
  auto logits = (*session)->prefill(prompts);
  EXPECT_TRUE(logits.has_value()) << logits.status().to_string();
  for (int64_t s = 0; s < steps && logits; ++s) {
    g.logits.push_back(logits->clone());
    std::vector<int64_t> next;
    for (int64_t b = 0; b < B; ++b) next.push_back(argmax_row(logits->data<float>() + b * V, V));
    for (int64_t b = 0; b < B; ++b) g.tokens[b].push_back(next[b]);
    if (s + 1 < steps) {
      logits = (*session)->decode(next);
      EXPECT_TRUE(logits.has_value()) << logits.status().to_string();
    }
  }
  return g;
}

TEST(Qwen3Parity, DecodeWithCacheEqualsRecomputation) {
  auto w = models::load_decoder(dir_a());
  ASSERT_TRUE(w.has_value()) << w.status().to_string();
  const int64_t V = w->config.vocab_size, steps = 12;
  std::mt19937_64 rng(9);
  std::vector<std::vector<int64_t>> prompts = {random_tokens(rng, 11, V), random_tokens(rng, 5, V)};
  Generated g = greedy(*w, prompts, steps);
  ASSERT_EQ(g.logits.size(), static_cast<size_t>(steps));
  // the whole sequences (prompt + generated but the last) recomputed in one prefill, unpadded
  std::vector<std::vector<int64_t>> full;
  for (size_t b = 0; b < prompts.size(); ++b) {
    std::vector<int64_t> s = prompts[b];
    s.insert(s.end(), g.tokens[b].begin(), g.tokens[b].end() - 1);
    full.push_back(s);
  }
  Compare self, peer;
  for (size_t b = 0; b < full.size(); ++b) {
    auto session = models::DecoderSession::create(*w, 1, 64, "cpu", true);
    ASSERT_TRUE(session.has_value());
    auto all = (*session)->prefill({full[b]});
    ASSERT_TRUE(all.has_value()) << all.status().to_string();
    const int64_t n = static_cast<int64_t>(full[b].size());
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t pos = static_cast<int64_t>(prompts[b].size()) - 1 + s;
      compare_row(g.logits[s].data<float>() + b * V, all->data<float>() + pos * V, V, self);
    }
    ASSERT_EQ(all->sizes()[1], n);
  }
  std::printf("decode vs recomputation: max abs %.3g, top-1 equal %lld / %lld\n", self.max_abs,
              static_cast<long long>(self.top1_equal), static_cast<long long>(self.positions));
  EXPECT_LT(self.max_abs, 1e-4);
  EXPECT_EQ(self.top1_equal, self.positions);
  if (!have_torch()) GTEST_SKIP() << "python3-torch is not installed: compared with rlx's own recomputation only";
  Tensor ref = torch_logits(dir_a(), full, "decode");
  const int64_t L = ref.sizes()[1];
  for (size_t b = 0; b < full.size(); ++b)
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t pos = static_cast<int64_t>(prompts[b].size()) - 1 + s;
      compare_row(g.logits[s].data<float>() + b * V, ref.data<float>() + (static_cast<int64_t>(b) * L + pos) * V, V, peer);
    }
  std::printf("decode vs PyTorch recomputation: max abs %.3g, top-1 equal %lld / %lld\n", peer.max_abs,
              static_cast<long long>(peer.top1_equal), static_cast<long long>(peer.positions));
  EXPECT_LT(peer.max_abs, kLogitTol);
  EXPECT_EQ(peer.top1_equal, peer.positions);
}

TEST(Qwen3Parity, GgufF16GivesTheSameTokensAsSafetensors) {
  auto st = models::load_decoder(dir_a());
  ASSERT_TRUE(st.has_value()) << st.status().to_string();
  auto gg = models::load_decoder(dir_a() + ".f16.gguf");
  ASSERT_TRUE(gg.has_value()) << gg.status().to_string();
  EXPECT_EQ(gg->tensors.at("model.layers.0.self_attn.q_proj.weight").format, "f16");
  const int64_t V = st->config.vocab_size;
  std::mt19937_64 rng(3);
  std::vector<std::vector<int64_t>> prompts = {random_tokens(rng, 9, V), random_tokens(rng, 17, V)};
  Generated a = greedy(*st, prompts, 16), b = greedy(*gg, prompts, 16);
  ASSERT_EQ(a.tokens, b.tokens);
  double worst = 0;
  for (size_t s = 0; s < a.logits.size(); ++s)
    for (int64_t i = 0; i < a.logits[s].numel(); ++i)
      worst = std::max(worst, std::fabs(a.logits[s].get_f64(i) - b.logits[s].get_f64(i)));
  std::printf("f16 GGUF vs safetensors: same %zu x %zu greedy tokens, max abs logit difference %.3g\n", a.tokens.size(),
              a.tokens[0].size(), worst);
  EXPECT_LT(worst, 1e-3);
  // an f16 Hugging Face checkpoint (matrices run as f16 qmatmul, tied head included)
  auto f16w = *st;
  for (auto& [name, t] : f16w.tensors) {
    Tensor h = Tensor::zeros(DType::f16, t.data.sizes());
    for (int64_t i = 0; i < h.numel(); ++i) h.set_f64(i, t.data.get_f64(i));
    t.data = h;
  }
  auto fg = models::build_decoder(f16w, {.context = 16});
  ASSERT_TRUE(fg.has_value()) << fg.status().to_string();
  int64_t qmm = 0;
  for (const Node& n : fg->nodes) qmm += n.op == Op::QMatMul;
  EXPECT_EQ(qmm, 7 * st->config.layers + 1);
  Generated c = greedy(f16w, prompts, 16);
  EXPECT_EQ(a.tokens, c.tokens);
  // the tokenizer in the GGUF metadata encodes like tokenizer.json
  auto tj = text::BpeTokenizer::load(dir_a());
  auto tg = text::BpeTokenizer::load(dir_a() + ".f16.gguf");
  ASSERT_TRUE(tj.has_value() && tg.has_value());
  const std::string s = "Hello world! The model predicts 2024 tokens.<|endoftext|>";
  EXPECT_EQ(tj->encode(s), tg->encode(s));
}

// Top-1 agreement of quantized GGUF weights with f32 over teacher-forced positions.
TEST(Qwen3Parity, QuantizedGgufTop1AgreementWithF32) {
  models::DecoderConfig c = config_a();
  c.hidden = 256;  // k-quant blocks hold 256 values
  c.intermediate = 256;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 64;
  c.layers = 2;
  c.tie_embeddings = false;  // a tied head mostly echoes the input token; untied tests the whole stack
  const std::string dir = model_dir("qwen3_q", c, 21);
  auto f32 = models::load_decoder(dir);
  ASSERT_TRUE(f32.has_value()) << f32.status().to_string();
  std::mt19937_64 rng(4);
  std::vector<std::vector<int64_t>> prompts = {random_tokens(rng, 64, c.vocab_size), random_tokens(rng, 64, c.vocab_size)};
  auto run = [&](const models::DecoderWeights& w) {
    auto session = models::DecoderSession::create(w, 2, 64, "cpu", true);
    EXPECT_TRUE(session.has_value()) << session.status().to_string();
    auto l = (*session)->prefill(prompts);
    EXPECT_TRUE(l.has_value()) << l.status().to_string();
    return l->clone();
  };
  Tensor want = run(*f32);
  for (const char* q : {"q8_0", "q6_k", "q4_k", "q4_0"}) {
    const std::string path = dir + "." + q + ".gguf";
    ASSERT_TRUE(models::write_decoder_gguf(path, *f32, q, dir + "/tokenizer.json").is_ok());
    auto w = models::load_decoder(path);
    ASSERT_TRUE(w.has_value()) << w.status().to_string();
    EXPECT_EQ(w->tensors.at("model.layers.1.mlp.down_proj.weight").format, q);
    Tensor got = run(*w);
    Compare cmp;
    for (int64_t r = 0; r < want.numel() / c.vocab_size; ++r)
      compare_row(got.data<float>() + r * c.vocab_size, want.data<float>() + r * c.vocab_size, c.vocab_size, cmp);
    const double agree = static_cast<double>(cmp.top1_equal) / static_cast<double>(cmp.positions);
    std::printf("%s GGUF vs f32: top-1 agreement %.1f%% (%lld / %lld positions), max abs logit difference %.3g\n", q,
                100.0 * agree, static_cast<long long>(cmp.top1_equal), static_cast<long long>(cmp.positions), cmp.max_abs);
    // quantization noise may flip near-ties; a broken kernel agrees at chance level (~0.3%)
    EXPECT_GT(agree, std::string(q) == "q8_0" ? 0.9 : 0.5) << q;
  }
}

}  // namespace
}  // namespace rlx

namespace rlx {
namespace {

TEST(Qwen3Load, ErrorsNameTheFileAndTensor) {
  auto w = models::load_decoder(dir_a());
  ASSERT_TRUE(w.has_value()) << w.status().to_string();
  auto missing = *w;
  missing.tensors.erase("model.layers.1.mlp.up_proj.weight");
  auto g = models::build_decoder(missing, {.context = 8});
  ASSERT_FALSE(g.has_value());
  EXPECT_NE(g.status().message().find("model.layers.1.mlp.up_proj.weight"), std::string::npos) << g.status().message();
  auto wrong = *w;
  wrong.tensors["model.layers.0.self_attn.k_proj.weight"].data = Tensor::zeros(DType::f32, {3, 64});
  g = models::build_decoder(wrong, {.context = 8});
  ASSERT_FALSE(g.has_value());
  EXPECT_NE(g.status().message().find("k_proj"), std::string::npos) << g.status().message();
  // a configuration whose query heads do not divide into key/value heads
  const std::string bad = kBase + "qwen3_badcfg_" + std::to_string(getpid());
  mkdir(bad.c_str(), 0755);
  std::ofstream(bad + "/config.json") << R"({"model_type": "qwen3", "num_attention_heads": 6, "num_key_value_heads": 4})";
  auto c = models::load_decoder(bad);
  ASSERT_FALSE(c.has_value());
  EXPECT_NE(c.status().message().find(bad + "/config.json"), std::string::npos) << c.status().message();
  EXPECT_FALSE(models::is_decoder_model("/nonexistent"));
  EXPECT_TRUE(models::is_decoder_model(dir_a()));
  EXPECT_TRUE(models::is_decoder_model(dir_a() + ".f16.gguf"));
  // a GGUF of another architecture is refused by name
  auto other = models::load_decoder_gguf("/nonexistent.gguf");
  EXPECT_FALSE(other.has_value());
}

}  // namespace
}  // namespace rlx
