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
