// Static activation scales (`rlx quantize --scheme int8 --calib DATA`, quant/calibrate.h) on the
// deterministic random-weight MiniLM of `rlx make-model`: calibrated on the 64 sentences of
// tests/quant/calib_sentences.txt with min-max and with the 99.99th percentile, every Linear runs
// as int8_matmul with a fixed x_scale, and the embeddings of the parity sentences (those of
// ptq_test.cpp) keep a cosine similarity of at least 0.99 to f32. The speed of static and
// dynamic (per-token) int8 against f32 is printed (ratios measured in the same run).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <fstream>

#include "models/bert.h"
#include "quant/calibrate.h"
#include "quant/ptq.h"
#include "rlx/compile.h"
#include "rlx/safetensors.h"

namespace rlx {
namespace {

const std::string kDir = std::string(RLX_BINARY_DIR) + "/test-models/quant";
const std::string kCalib = std::string(RLX_SOURCE_DIR) + "/tests/quant/calib_sentences.txt";

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Tensor embed(Model& m, const models::BertModel& b, const std::vector<std::string>& texts, int64_t max_len, double* ms) {
  text::Encoding e = b.tokenizer.encode_batch(texts, max_len);
  std::vector<Tensor> in{e.ids_tensor(), e.mask_tensor(), e.type_tensor()};
  auto out = m.run(in);
  EXPECT_TRUE(out.has_value()) << out.status().to_string();
  if (!out) return Tensor::zeros(DType::f32, {1, 1});
  if (ms) {
    double best = 1e30;
    for (int r = 0; r < 5; ++r) {
      const double t0 = now_ms();
      auto o = m.run(in);
      best = std::min(best, now_ms() - t0);
    }
    *ms = best;
  }
  return (*out)[0].clone();
}

double worst_cosine(const Tensor& a, const Tensor& b) {
  const int64_t n = a.sizes()[0], d = a.sizes()[1];
  double worst = 1;
  for (int64_t t = 0; t < n; ++t) {
    double dot = 0, na = 0, nb = 0;
    for (int64_t i = 0; i < d; ++i) {
      const double x = a.data<float>()[t * d + i], y = b.data<float>()[t * d + i];
      dot += x * y;
      na += x * x;
      nb += y * y;
    }
    worst = std::min(worst, dot / std::sqrt(na * nb));
  }
  return worst;
}

std::unique_ptr<Model> compile_or_fail(const Graph& g) {
  auto m = Model::compile(g, {.device = "cpu"});
  EXPECT_TRUE(m.has_value()) << m.status().to_string();
  return m ? std::move(*m) : nullptr;
}

TEST(Calibration, StaticInt8MiniLmKeepsCosineAbove099) {
  mkdir((std::string(RLX_BINARY_DIR) + "/test-models").c_str(), 0755);
  mkdir(kDir.c_str(), 0755);
  const std::string f32_dir = kDir + "/minilm-calib";
  ASSERT_TRUE(models::write_random_bert(f32_dir, models::BertConfig{}, 7).is_ok());
  auto sentences = quant::read_calibration_sentences(kCalib);
  ASSERT_TRUE(sentences.has_value()) << sentences.status().to_string();
  ASSERT_EQ(sentences->size(), 64u);

  auto f32 = models::load_bert_folder(f32_dir);
  ASSERT_TRUE(f32.has_value()) << f32.status().to_string();
  std::unique_ptr<Model> mf = compile_or_fail(f32->graph);
  ASSERT_TRUE(mf);
  const std::vector<std::string> texts = {
      "Hello world.", "A short one.", "A considerably longer sentence, with punctuation; and some more words to pad the rest!",
      "One", "two words", "three words here", "and now four words with an accent: café"};
  std::vector<std::string> batch;  // speed: 8 texts of 128 tokens
  for (int i = 0; i < 8; ++i) batch.push_back(std::string(600, "abcdefgh"[i]) + " words");
  const Tensor ef = embed(*mf, *f32, texts, 32, nullptr);

  // dynamic (per-token) int8 for comparison
  const std::string dyn_dir = kDir + "/minilm-calib-dynamic";
  ASSERT_TRUE(quant::quantize_int8_folder(f32_dir, dyn_dir).is_ok());
  auto dyn = models::load_bert_folder(dyn_dir);
  ASSERT_TRUE(dyn.has_value()) << dyn.status().to_string();
  std::unique_ptr<Model> md = compile_or_fail(dyn->graph);
  ASSERT_TRUE(md);
  const double cos_dyn = worst_cosine(ef, embed(*md, *dyn, texts, 32, nullptr));

  struct Method { const char* name; quant::CalibrationOptions o; };
  quant::CalibrationOptions mm, pc;
  mm.method = "minmax";
  pc.method = "percentile";
  pc.percentile = 99.99;
  for (const Method& meth : {Method{"minmax", mm}, Method{"percentile", pc}}) {
    SCOPED_TRACE(meth.name);
    auto cr = quant::calibrate_bert(f32_dir, *sentences, meth.o);
    ASSERT_TRUE(cr.has_value()) << cr.status().to_string();
    EXPECT_EQ(cr->input_scales.size(), 36u) << "6 layers x 6 Linear layers";
    EXPECT_GT(cr->tokens, 64 * 5) << cr->description;
    for (const auto& [name, s] : cr->input_scales) EXPECT_TRUE(s > 0 && std::isfinite(s)) << name << " " << s;
    const std::string out = kDir + "/minilm-calib-" + meth.name;
    std::string summary;
    Status st = quant::quantize_int8_folder(f32_dir, out, &summary, &*cr);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    std::printf("%s\n", summary.c_str());
    EXPECT_NE(summary.find("1 Linear layers the calibration did not reach stay per token: pooler.dense.weight"), std::string::npos)
        << summary;
    auto file = safetensors::load(out + "/model.safetensors");
    ASSERT_TRUE(file.has_value()) << file.status().to_string();
    EXPECT_EQ(file->metadata.at("rlx.activation_scales"), cr->description);
    const Tensor& xs = file->tensors.at("encoder.layer.0.attention.self.query.input_scale");
    EXPECT_EQ(xs.rank(), 0);
    EXPECT_EQ(xs.data<float>()[0], cr->input_scales.at("encoder.layer.0.attention.self.query.weight"));

    auto q = models::load_bert_folder(out);
    ASSERT_TRUE(q.has_value()) << q.status().to_string();
    int statics = 0;
    for (const Node& n : q->graph.nodes) statics += n.op == Op::Int8MatMul && n.attrs.has("x_scale");
    EXPECT_EQ(statics, 36) << "every int8_matmul takes its calibrated x_scale";
    std::unique_ptr<Model> mq = compile_or_fail(q->graph);
    ASSERT_TRUE(mq);
    const double cos = worst_cosine(ef, embed(*mq, *q, texts, 32, nullptr));
    EXPECT_GE(cos, 0.99) << meth.name;
    double ms_f32 = 0, ms_dyn = 0, ms_static = 0;
    embed(*mf, *f32, batch, 128, &ms_f32);
    embed(*md, *dyn, batch, 128, &ms_dyn);
    embed(*mq, *q, batch, 128, &ms_static);
    if (std::string(meth.name) == "minmax") {
      // the scales are used: shrunk 100x they clip nearly every activation, and the embeddings break
      quant::CalibrationResult shrunk = *cr;
      for (auto& [name, sc] : shrunk.input_scales) sc *= 0.01f;
      ASSERT_TRUE(quant::quantize_int8_folder(f32_dir, out + "-shrunk", nullptr, &shrunk).is_ok());
      auto qs = models::load_bert_folder(out + "-shrunk");
      ASSERT_TRUE(qs.has_value()) << qs.status().to_string();
      std::unique_ptr<Model> ms = compile_or_fail(qs->graph);
      ASSERT_TRUE(ms);
      const double bad = worst_cosine(ef, embed(*ms, *qs, texts, 32, nullptr));
      EXPECT_LT(bad, 0.95) << "scales 100x too small should clip the activations";
      std::printf("  (the same with every scale 100x too small: worst cosine %.3f)\n", bad);
    }
    std::printf("MiniLM int8 static (%s): worst cosine %.5f (dynamic per-token %.5f) over %zu parity sentences; "
                "batch 8 x 128 tokens: f32 %.1f ms, dynamic %.1f ms (%.2fx), static %.1f ms (%.2fx)\n",
                cr->description.c_str(), cos, cos_dyn, texts.size(), ms_f32, ms_dyn, ms_f32 / ms_dyn, ms_static,
                ms_f32 / ms_static);
  }
}

TEST(Calibration, BadInputsAreClearErrors) {
  // its own folder: ctest runs the tests of this file in parallel, and the other one rewrites minilm-calib
  const std::string f32_dir = kDir + "/minilm-calib-errors";
  mkdir((std::string(RLX_BINARY_DIR) + "/test-models").c_str(), 0755);
  mkdir(kDir.c_str(), 0755);
  if (!models::is_bert_folder(f32_dir)) ASSERT_TRUE(models::write_random_bert(f32_dir, models::BertConfig{}, 7).is_ok());
  const std::vector<std::string> one{"a sentence"};
  quant::CalibrationOptions o;
  o.method = "entropy";
  auto r = quant::calibrate_bert(f32_dir, one, o);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("expected minmax or percentile"), std::string::npos) << r.status().to_string();
  o.method = "percentile";
  o.percentile = 0;
  r = quant::calibrate_bert(f32_dir, one, o);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("(0, 100]"), std::string::npos) << r.status().to_string();
  auto missing = quant::read_calibration_sentences(kDir + "/no-such-file.txt");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.status().code(), ErrorCode::io_error);
  const std::string empty = kDir + "/empty-calib.txt";
  { std::ofstream(empty) << "\n  \n"; }
  auto none = quant::read_calibration_sentences(empty);
  ASSERT_FALSE(none.has_value());
  EXPECT_NE(none.status().message().find("no sentences"), std::string::npos) << none.status().to_string();
  // an already quantized folder is refused (calibration runs the f32 model)
  const std::string dyn_dir = kDir + "/minilm-calib-dynamic2";
  ASSERT_TRUE(quant::quantize_int8_folder(f32_dir, dyn_dir).is_ok());
  o.method = "minmax";
  r = quant::calibrate_bert(dyn_dir, one, o);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("already quantized"), std::string::npos) << r.status().to_string();
  // layers a calibration did not reach stay per token, and the summary names them
  quant::CalibrationResult partial;
  partial.input_scales["encoder.layer.0.attention.self.query.weight"] = 0.1f;
  std::string summary;
  Status st = quant::quantize_int8_folder(f32_dir, kDir + "/minilm-calib-partial", &summary, &partial);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_NE(summary.find("36 Linear layers the calibration did not reach stay per token"), std::string::npos) << summary;
  EXPECT_NE(summary.find("pooler.dense.weight"), std::string::npos) << summary;
  auto q = models::load_bert_folder(kDir + "/minilm-calib-partial");
  ASSERT_TRUE(q.has_value()) << q.status().to_string();
  int statics = 0;
  for (const Node& n : q->graph.nodes) statics += n.op == Op::Int8MatMul && n.attrs.has("x_scale");
  EXPECT_EQ(statics, 1);
}

}  // namespace
}  // namespace rlx
