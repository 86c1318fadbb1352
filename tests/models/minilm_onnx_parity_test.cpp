// MiniLM (random weights) exported to ONNX by the independent PyTorch implementation
// (scripts/peers/bert_torch.py export-onnx) and run by ONNX Runtime (npm onnxruntime-node,
// scripts/install-npm.sh, through scripts/peers/minilm_ort.js): rlx on the Hugging Face folder
// and rlx on the ONNX export (rlx::onnx import) both within 1e-4 max abs of ONNX Runtime's
// sentence embeddings, for several batches and lengths with padding.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "models/bert.h"
#include "rlx/compile.h"
#include "rlx/onnx.h"

namespace rlx {
namespace {

const std::string kDir = std::string(RLX_BINARY_DIR) + "/test-models/minilm-onnx";

bool exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

// The npm folder of scripts/install-npm.sh: $RLX_NPM_DIR, <build>/npm, then build/npm.
std::string npm_dir() {
  std::vector<std::string> dirs;
  if (const char* e = std::getenv("RLX_NPM_DIR")) dirs.push_back(e);
  dirs.push_back(std::string(RLX_BINARY_DIR) + "/npm");
  dirs.push_back(std::string(RLX_SOURCE_DIR) + "/build/npm");
  for (const std::string& d : dirs)
    if (exists(d + "/node_modules/onnxruntime-node/package.json")) return d;
  return "";
}

// Model folder plus its ONNX export, made once per build folder.
std::string model_dir() {
  static const std::string dir = [] {
    mkdir((std::string(RLX_BINARY_DIR) + "/test-models").c_str(), 0755);
    if (!exists(kDir + "/model.safetensors")) {
      Status s = models::write_random_bert(kDir, models::BertConfig{}, 11);
      EXPECT_TRUE(s.is_ok()) << s.to_string();
    }
    if (!exists(kDir + "/model.onnx")) {
      std::string cmd = "/usr/bin/python3 " + std::string(RLX_SOURCE_DIR) + "/scripts/peers/bert_torch.py export-onnx " +
                        kDir + " " + kDir + "/model.onnx.tmp > /dev/null 2>&1 && mv " + kDir + "/model.onnx.tmp " + kDir +
                        "/model.onnx";
      EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    }
    return kDir;
  }();
  return dir;
}

void write_i64(const std::string& path, const Tensor& t) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(t.bytes()), static_cast<std::streamsize>(t.nbytes()));
}

// ONNX Runtime's embeddings for these inputs, [batch, hidden].
Tensor ort_embeddings(const std::vector<Tensor>& in, const std::string& tag, int64_t hidden) {
  const std::string base = std::string(RLX_BINARY_DIR) + "/test-models/ort_" + tag;
  const char* names[] = {"_ids.bin", "_mask.bin", "_types.bin"};
  for (int i = 0; i < 3; ++i) write_i64(base + names[i], in[i]);
  const int64_t b = in[0].sizes()[0], s = in[0].sizes()[1];
  std::string cmd = "printf 'save " + base + "_out.bin\\nquit\\n' | NODE_PATH=" + npm_dir() + "/node_modules node " +
                    std::string(RLX_SOURCE_DIR) + "/scripts/peers/minilm_ort.js " + model_dir() + "/model.onnx " +
                    std::to_string(b) + " " + std::to_string(s) + " " + base + names[0] + " " + base + names[1] + " " +
                    base + names[2] + " 2 > /dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  Tensor out = Tensor::zeros(DType::f32, {b, hidden});
  std::ifstream f(base + "_out.bin", std::ios::binary);
  EXPECT_TRUE(static_cast<bool>(f.read(reinterpret_cast<char*>(out.data<float>()), static_cast<std::streamsize>(out.nbytes()))))
      << "ONNX Runtime wrote no output for " << tag;
  return out;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  double worst = 0;
  for (int64_t i = 0; i < std::min(a.numel(), b.numel()); ++i) worst = std::max(worst, std::fabs(a.get_f64(i) - b.get_f64(i)));
  return worst;
}

TEST(MiniLmOnnxParity, MatchesOnnxRuntimeWithPadding) {
  if (std::system("/usr/bin/python3 -c 'import torch' > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "python3-torch is not installed (the ONNX export needs it; scripts/install-deps.sh installs it)";
  if (std::system("node --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "node is not installed";
  if (npm_dir().empty())
    GTEST_SKIP() << "onnxruntime-node is not installed: run scripts/install-npm.sh (into build/npm or " << RLX_BINARY_DIR
                 << "/npm, or set RLX_NPM_DIR)";
  auto m = models::load_bert_folder(model_dir());
  ASSERT_TRUE(m.has_value()) << m.status().to_string();
  ASSERT_TRUE(exists(model_dir() + "/model.onnx"));
  auto folder_model = Model::compile(m->graph, {.device = "cpu"});
  ASSERT_TRUE(folder_model.has_value()) << folder_model.status().to_string();
  const std::vector<std::vector<std::string>> batches = {
      {"Hello world."},
      {"A short one.", "A considerably longer sentence, with punctuation; and some more words to pad the rest!",
       "third"},
  };
  for (size_t bi = 0; bi < batches.size(); ++bi) {
    for (int64_t max_len : {int64_t{16}, int64_t{64}}) {
      text::Encoding e = m->tokenizer.encode_batch(batches[bi], max_len, max_len);  // padded to max_len
      std::vector<Tensor> in{e.ids_tensor(), e.mask_tensor(), e.type_tensor()};
      const std::string tag = std::to_string(bi) + "_" + std::to_string(max_len);
      Tensor ort = ort_embeddings(in, tag, m->config.hidden);
      auto a = (*folder_model)->run(in);
      ASSERT_TRUE(a.has_value()) << a.status().to_string();
      const double d_folder = max_abs_diff((*a)[0], ort);
      EXPECT_LT(d_folder, 1e-4) << tag;
      auto r = onnx::load_and_run(model_dir() + "/model.onnx",
                                  {{"input_ids", in[0]}, {"attention_mask", in[1]}, {"token_type_ids", in[2]}}, "cpu");
      ASSERT_TRUE(r.has_value()) << r.status().to_string();
      ASSERT_FALSE(r->outputs.empty());
      const double d_onnx = max_abs_diff(r->outputs[0], ort);
      EXPECT_LT(d_onnx, 1e-4) << tag;
      std::printf("batch %lld x %lld: max abs difference to ONNX Runtime: rlx folder %.3g, rlx on the ONNX export %.3g\n",
                  static_cast<long long>(e.batch), static_cast<long long>(e.seq), d_folder, d_onnx);
    }
  }
}

}  // namespace
}  // namespace rlx
