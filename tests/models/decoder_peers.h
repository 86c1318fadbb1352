// Shared by the decoder tests (qwen3_parity_test.cpp, decoder_families_test.cpp): the PyTorch
// reference (scripts/peers/decoder_torch.py, f64) and llama.cpp (tests/models/llama_cpp_peer.mjs
// on node-llama-cpp) as oracles, and logit comparisons.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlx/npy.h"
#include "rlx/tensor.h"

namespace rlx::decoder_tests {

// Where the tests write their random models (one name per process: ctest runs tests in parallel).
inline const std::string kModelBase = std::string(RLX_BINARY_DIR) + "/test-models/";

inline bool have_torch() {
  static const bool ok = std::system("/usr/bin/python3 -c 'import torch' > /dev/null 2>&1") == 0;
  return ok;
}

// Logits [N, L, vocab] of each sequence alone, from the PyTorch peer (f64).
inline Tensor torch_logits(const std::string& dir, const std::vector<std::vector<int64_t>>& seqs, const std::string& tag) {
  size_t longest = 0;
  for (const auto& s : seqs) longest = std::max(longest, s.size());
  Tensor ids = Tensor::zeros(DType::i64, {static_cast<int64_t>(seqs.size()), static_cast<int64_t>(longest)});
  Tensor lens = Tensor::zeros(DType::i64, {static_cast<int64_t>(seqs.size())});
  for (size_t i = 0; i < seqs.size(); ++i) {
    lens.data<int64_t>()[i] = static_cast<int64_t>(seqs[i].size());
    for (size_t j = 0; j < seqs[i].size(); ++j) ids.data<int64_t>()[i * longest + j] = seqs[i][j];
  }
  const std::string base = kModelBase + "torch_" + tag + "_" + std::to_string(getpid());
  EXPECT_TRUE(write_npy(base + "_ids.npy", ids).is_ok());
  EXPECT_TRUE(write_npy(base + "_lens.npy", lens).is_ok());
  const std::string cmd = "/usr/bin/python3 " + std::string(RLX_SOURCE_DIR) + "/scripts/peers/decoder_torch.py logits " + dir +
                          " " + base + "_ids.npy " + base + "_lens.npy " + base + "_out.npy";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto t = read_npy(base + "_out.npy");
  EXPECT_TRUE(t.has_value()) << t.status().to_string();
  return t.has_value() ? *t : Tensor{};
}

// llama.cpp's greedy next token after every prompt position and `n` greedy tokens.
struct LlamaCppResult {
  std::vector<int64_t> prompt_top1, tokens;
  std::string error;  // non-empty when the peer failed (its output)
};
inline LlamaCppResult llama_cpp_greedy(const std::string& npm_dir, const std::string& gguf, const std::vector<int64_t>& prompt,
                                       int n) {
  std::string ids;
  for (int64_t t : prompt) ids += (ids.empty() ? "" : ",") + std::to_string(t);
  // (node-llama-cpp refuses an empty CI variable; its value does not matter to it here)
  const std::string cmd = "env -u CI node " + std::string(RLX_SOURCE_DIR) + "/tests/models/llama_cpp_peer.mjs '" + npm_dir + "' '" + gguf +
                          "' " + ids + " " + std::to_string(n) + " 2>&1";
  LlamaCppResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    r.error = "cannot run " + cmd;
    return r;
  }
  std::string out;
  char buf[4096];
  size_t got;
  while ((got = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, got);
  const int status = pclose(p);
  const size_t line = out.rfind("{\"prompt_top1\"");
  if (status != 0 || line == std::string::npos) {
    r.error = cmd + ":\n" + out;
    return r;
  }
  const nlohmann::json j = nlohmann::json::parse(out.substr(line), nullptr, false);
  if (j.is_discarded()) {
    r.error = "unparsable output: " + out;
    return r;
  }
  r.prompt_top1 = j["prompt_top1"].get<std::vector<int64_t>>();
  r.tokens = j["tokens"].get<std::vector<int64_t>>();
  return r;
}

// llama.cpp's residual stream after every layer ([layers, tokens, hidden]) and its logits after
// every position ([tokens, vocab]) for `prompt`, from tests/peer_tools/llama_cpp_layers.cpp.
struct LlamaCppLayers {
  Tensor layers, logits;
  std::string error;  // non-empty when the tool is missing or failed
};
inline LlamaCppLayers llama_cpp_layers(const std::string& gguf, const std::vector<int64_t>& prompt, const std::string& tag) {
  LlamaCppLayers r;
  if (std::string(RLX_LLAMA_CPP_LAYERS).empty()) {
    r.error = "rlx_llama_cpp_layers was not built: node-llama-cpp was not installed when CMake configured the build "
              "(run scripts/install-npm.sh build/npm, then cmake again)";
    return r;
  }
  std::string ids;
  for (int64_t t : prompt) ids += (ids.empty() ? "" : ",") + std::to_string(t);
  const std::string base = kModelBase + "llama_layers_" + tag + "_" + std::to_string(getpid());
  const std::string cmd = std::string(RLX_LLAMA_CPP_LAYERS) + " '" + gguf + "' " + ids + " " + base + "_layers.npy " + base +
                          "_logits.npy 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    r.error = "failed: " + cmd;
    return r;
  }
  auto layers = read_npy(base + "_layers.npy");
  auto logits = read_npy(base + "_logits.npy");
  if (!layers || !logits) {
    r.error = "cannot read the outputs of " + cmd;
    return r;
  }
  r.layers = *layers;
  r.logits = *logits;
  return r;
}

// Per layer, the largest absolute difference between two [layers, tokens, hidden] stacks over
// the largest magnitude of `want`'s layer: where a divergence starts.
inline std::vector<double> layer_differences(const Tensor& got, const Tensor& want) {
  std::vector<double> rel;
  if (got.sizes() != want.sizes() || got.rank() != 3) return rel;
  const int64_t per = got.sizes()[1] * got.sizes()[2];
  for (int64_t l = 0; l < got.sizes()[0]; ++l) {
    double diff = 0, scale = 0;
    for (int64_t i = l * per; i < (l + 1) * per; ++i) {
      diff = std::max(diff, std::fabs(static_cast<double>(got.data<float>()[i]) - want.data<float>()[i]));
      scale = std::max(scale, std::fabs(static_cast<double>(want.data<float>()[i])));
    }
    rel.push_back(scale > 0 ? diff / scale : diff);
  }
  return rel;
}

inline int64_t argmax_row(const float* row, int64_t n) { return static_cast<int64_t>(std::max_element(row, row + n) - row); }

inline std::vector<int64_t> random_tokens(std::mt19937_64& rng, int64_t n, int64_t vocab) {
  std::vector<int64_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int64_t>(rng() % static_cast<uint64_t>(vocab));
  return t;
}

struct Compare {
  double max_abs = 0;
  int64_t positions = 0, top1_equal = 0;
};

// rlx row `got` [vocab] against reference row `want`.
inline void compare_row(const float* got, const float* want, int64_t vocab, Compare& c) {
  for (int64_t v = 0; v < vocab; ++v) c.max_abs = std::max(c.max_abs, std::fabs(static_cast<double>(got[v]) - want[v]));
  ++c.positions;
  c.top1_equal += argmax_row(got, vocab) == argmax_row(want, vocab);
}

}  // namespace rlx::decoder_tests
