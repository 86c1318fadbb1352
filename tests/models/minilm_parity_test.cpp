// MiniLM (all-MiniLM-L6-v2 architecture, random weights) against an independent plain
// PyTorch implementation (scripts/peers/bert_torch.py, Debian's python3-torch): sentence
// embeddings within 1e-4 max abs, for several batches and lengths, with padding.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <fstream>

#include "models/bert.h"
#include "rlx/compile.h"
#include "rlx/npy.h"

namespace rlx {
namespace {

const std::string kDir = std::string(RLX_BINARY_DIR) + "/test-models/minilm";

bool have_torch() {
  return std::system("/usr/bin/python3 -c 'import torch' > /dev/null 2>&1") == 0;
}

const std::string& model_dir() {
  static const std::string dir = [] {
    mkdir((std::string(RLX_BINARY_DIR) + "/test-models").c_str(), 0755);
    struct stat st;
    if (stat((kDir + "/model.safetensors").c_str(), &st) != 0) {
      Status s = models::write_random_bert(kDir, models::BertConfig{}, 7);
      EXPECT_TRUE(s.is_ok()) << s.to_string();
    }
    return kDir;
  }();
  return dir;
}

Tensor torch_embeddings(const Tensor& ids, const Tensor& mask, const std::string& tag) {
  const std::string base = std::string(RLX_BINARY_DIR) + "/test-models/parity_" + tag;
  EXPECT_TRUE(write_npy(base + "_ids.npy", ids).is_ok());
  EXPECT_TRUE(write_npy(base + "_mask.npy", mask).is_ok());
  std::string cmd = "/usr/bin/python3 " + std::string(RLX_SOURCE_DIR) + "/scripts/peers/bert_torch.py embed " +
                    model_dir() + " " + base + "_ids.npy " + base + "_mask.npy " + base + "_out.npy";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto t = read_npy(base + "_out.npy");
  EXPECT_TRUE(t.has_value()) << t.status().to_string();
  return t.has_value() ? *t : Tensor{};
}

TEST(MiniLmParity, MatchesPyTorchWithPadding) {
  if (!have_torch()) GTEST_SKIP() << "python3-torch is not installed (scripts/install-deps.sh installs it)";
  auto m = models::load_bert_folder(model_dir());
  ASSERT_TRUE(m.has_value()) << m.status().to_string();
  auto model = Model::compile(m->graph, {.device = "cpu"});
  ASSERT_TRUE(model.has_value()) << model.status().to_string();
  const std::vector<std::vector<std::string>> batches = {
      {"Hello world."},
      {"A short one.", "A considerably longer sentence, with punctuation; and some more words to pad the rest!"},
      {"One", "two words", "three words here", "and now four words with an accent: café"},
  };
  for (size_t bi = 0; bi < batches.size(); ++bi) {
    for (int64_t max_len : {int64_t{16}, int64_t{128}}) {
      text::Encoding e = m->tokenizer.encode_batch(batches[bi], max_len);
      std::vector<Tensor> in{e.ids_tensor(), e.mask_tensor(), e.type_tensor()};
      auto out = (*model)->run(in);
      ASSERT_TRUE(out.has_value()) << out.status().to_string();
      Tensor ref = torch_embeddings(in[0], in[1], std::to_string(bi) + "_" + std::to_string(max_len));
      ASSERT_EQ(ref.sizes(), (*out)[0].sizes());
      double worst = 0;
      for (int64_t i = 0; i < ref.numel(); ++i)
        worst = std::max(worst, std::fabs(ref.get_f64(i) - (*out)[0].get_f64(i)));
      EXPECT_LT(worst, 1e-4) << "batch " << bi << " max_len " << max_len;
      std::printf("batch %zu (%lld x %lld): max abs difference to PyTorch %.3g\n", bi,
                  static_cast<long long>(e.batch), static_cast<long long>(e.seq), worst);
    }
  }
}

TEST(MiniLmParity, PaddingDoesNotChangeEmbeddings) {
  auto m = models::load_bert_folder(model_dir());
  ASSERT_TRUE(m.has_value()) << m.status().to_string();
  auto model = Model::compile(m->graph, {.device = "cpu"});
  ASSERT_TRUE(model.has_value());
  text::Encoding tight = m->tokenizer.encode_batch({"padding must not matter"}, 128);
  text::Encoding padded = m->tokenizer.encode_batch({"padding must not matter"}, 128, 40);
  std::vector<Tensor> a{tight.ids_tensor(), tight.mask_tensor(), tight.type_tensor()};
  std::vector<Tensor> b{padded.ids_tensor(), padded.mask_tensor(), padded.type_tensor()};
  auto ea = (*model)->run(a);
  auto eb = (*model)->run(b);
  ASSERT_TRUE(ea.has_value() && eb.has_value());
  for (int64_t i = 0; i < 384; ++i) EXPECT_NEAR((*ea)[0].get_f64(i), (*eb)[0].get_f64(i), 1e-5);
}

}  // namespace
}  // namespace rlx
