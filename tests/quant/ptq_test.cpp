// Post-training quantization end to end (quant/ptq.h), on the deterministic random-weight
// models of `rlx make-model`: MiniLM quantized to int8 keeps its sentence embeddings (cosine
// similarity to f32 on the parity sentences of tests/models/minilm_parity_test.cpp), and a small
// Qwen3 quantized to int8 (folder) or written as q8_0 / q4_k / q4_0 / q4_1 / int4_g128[_asym] GGUF keeps the f32 model's top-1 next token at most
// positions. Speed and agreement figures are printed (ratios measured in the same run); only
// accuracy is asserted.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <random>

#include "models/bert.h"
#include "models/qwen3.h"
#include "quant/ptq.h"
#include "rlx/compile.h"

namespace rlx {
namespace {

const std::string kDir = std::string(RLX_BINARY_DIR) + "/test-models/quant";

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Tensor embed(Model& m, const models::BertModel& b, const std::vector<std::string>& texts, int64_t max_len, double* ms) {
  text::Encoding e = b.tokenizer.encode_batch(texts, max_len);
  std::vector<Tensor> in{e.ids_tensor(), e.mask_tensor(), e.type_tensor()};
  auto out = m.run(in);  // compiles this shape
  EXPECT_TRUE(out.has_value()) << out.status().to_string();
  if (ms) {
    double best = 1e30;
    for (int r = 0; r < 5; ++r) {
      double t0 = now_ms();
      auto o = m.run(in);
      best = std::min(best, now_ms() - t0);
    }
    *ms = best;
  }
  return (*out)[0].clone();
}

TEST(Ptq, MiniLmInt8EmbeddingsKeepCosineAbove099) {
  mkdir((std::string(RLX_BINARY_DIR) + "/test-models").c_str(), 0755);
  mkdir(kDir.c_str(), 0755);
  const std::string f32_dir = kDir + "/minilm", int8_dir = kDir + "/minilm-int8";
  ASSERT_TRUE(models::write_random_bert(f32_dir, models::BertConfig{}, 7).is_ok());
  std::string summary;
  Status s = quant::quantize_int8_folder(f32_dir, int8_dir, &summary);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  std::printf("%s\n", summary.c_str());
  auto a = models::load_bert_folder(f32_dir);
  ASSERT_TRUE(a.has_value()) << a.status().to_string();
  auto b = models::load_bert_folder(int8_dir);
  ASSERT_TRUE(b.has_value()) << b.status().to_string();
  int int8_nodes = 0;
  for (const Node& n : b->graph.nodes) int8_nodes += n.op == Op::Int8MatMul;
  EXPECT_EQ(int8_nodes, 36) << "6 layers x 6 Linear layers run as int8_matmul";
  auto ma = Model::compile(a->graph, {.device = "cpu"});
  ASSERT_TRUE(ma.has_value()) << ma.status().to_string();
  auto mb = Model::compile(b->graph, {.device = "cpu"});
  ASSERT_TRUE(mb.has_value()) << mb.status().to_string();
  const std::vector<std::string> texts = {
      "Hello world.", "A short one.", "A considerably longer sentence, with punctuation; and some more words to pad the rest!",
      "One", "two words", "three words here", "and now four words with an accent: café"};
  Tensor ea = embed(**ma, *a, texts, 32, nullptr), eb = embed(**mb, *b, texts, 32, nullptr);
  const int64_t d = ea.sizes()[1];
  double worst = 1;
  for (size_t t = 0; t < texts.size(); ++t) {
    double dot = 0, na = 0, nb = 0;
    for (int64_t i = 0; i < d; ++i) {
      const double x = ea.data<float>()[t * d + i], y = eb.data<float>()[t * d + i];
      dot += x * y;
      na += x * x;
      nb += y * y;
    }
    const double cos = dot / std::sqrt(na * nb);
    worst = std::min(worst, cos);
    EXPECT_GE(cos, 0.99) << "'" << texts[t] << "'";
  }
  // speed: a batch of 8 texts of 128 tokens, best of 5, f32 and int8 in the same run
  std::vector<std::string> batch;
  for (int i = 0; i < 8; ++i) batch.push_back(std::string(600, "abcdefgh"[i]) + " words");
  double ms_f32 = 0, ms_int8 = 0;
  embed(**ma, *a, batch, 128, &ms_f32);
  embed(**mb, *b, batch, 128, &ms_int8);
  std::printf("MiniLM int8: worst cosine %.5f over %zu parity sentences; batch 8 x 128 tokens: f32 %.1f ms, int8 %.1f ms, "
              "speed-up %.2fx\n", worst, texts.size(), ms_f32, ms_int8, ms_f32 / ms_int8);
}

TEST(Ptq, Qwen3GgufSchemesTop1Agreement) {
  mkdir((std::string(RLX_BINARY_DIR) + "/test-models").c_str(), 0755);
  mkdir(kDir.c_str(), 0755);
  models::Qwen3Config c;  // small enough for CI; rows tile q4_k's blocks of 256
  c.vocab_size = 4096;
  c.hidden = 256;
  c.layers = 4;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 64;
  c.intermediate = 768;
  const std::string dir = kDir + "/qwen3";
  ASSERT_TRUE(models::write_random_qwen3(dir, c, 11).is_ok());
  std::mt19937 rng(std::random_device{}());
  std::vector<int64_t> prompt(48);
  for (auto& t : prompt) t = std::uniform_int_distribution<int64_t>(0, c.vocab_size - 1)(rng);
  auto logits_of = [&](const std::string& path) -> std::vector<int64_t> {
    auto w = models::load_qwen3(path);
    EXPECT_TRUE(w.has_value()) << w.status().to_string();
    if (!w) return {};
    auto s = models::Qwen3Session::create(*w, 1, 64, "cpu", true);
    EXPECT_TRUE(s.has_value()) << s.status().to_string();
    if (!s) return {};
    auto l = (*s)->prefill({prompt});
    EXPECT_TRUE(l.has_value()) << l.status().to_string();
    if (!l) return {};
    std::vector<int64_t> top;
    const int64_t v = l->sizes()[2];
    for (size_t p = 0; p < prompt.size(); ++p) {
      const float* r = l->data<float>() + p * v;
      top.push_back(std::max_element(r, r + v) - r);
    }
    return top;
  };
  const std::vector<int64_t> ref = logits_of(dir);
  ASSERT_EQ(ref.size(), prompt.size());
  for (const char* scheme : {"int8", "q8_0", "q4_k", "q4_0", "q4_1", "int4_g128", "int4_g128_asym"}) {
    const bool int8 = std::string(scheme) == "int8";
    const std::string out = kDir + "/qwen3-" + scheme + (int8 ? "" : ".gguf");
    Status st = int8 ? quant::quantize_int8_folder(dir, out) : quant::quantize_qwen3_gguf(dir, out, scheme);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    if (int8) {
      auto w = models::load_qwen3(out);
      ASSERT_TRUE(w.has_value()) << w.status().to_string();
      auto g = models::build_qwen3(*w, {});
      ASSERT_TRUE(g.has_value()) << g.status().to_string();
      int nodes = 0;
      for (const Node& n : g->nodes) nodes += n.op == Op::Int8MatMul;
      EXPECT_EQ(nodes, 4 * 7) << "4 layers x 7 projections run as int8_matmul (the tied head stays f32)";
    }
    const std::vector<int64_t> top = logits_of(out);
    ASSERT_EQ(top.size(), ref.size());
    int agree = 0;
    for (size_t i = 0; i < ref.size(); ++i) agree += top[i] == ref[i];
    const double frac = static_cast<double>(agree) / ref.size();
    std::printf("Qwen3 (random weights, %zu positions) %s: top-1 agreement with f32 %.1f%%\n", ref.size(), scheme, 100 * frac);
    // random weights give nearly flat logits, so 4-bit rounding flips many near-ties; the
    // bounds are far above chance (1 / 4096) and catch a broken format or kernel
    EXPECT_GE(frac, int8 || std::string(scheme) == "q8_0" ? 0.85 : 0.25) << scheme;
  }
}

}  // namespace
}  // namespace rlx
