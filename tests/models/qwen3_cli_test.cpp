// rlx make-model qwen3-tiny and rlx generate, run as the command-line program.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

namespace {

const std::string kRlx = std::string(RLX_BINARY_DIR) + "/bin/rlx";
const std::string kDir = std::string(RLX_BINARY_DIR) + "/test-models/qwen3_cli";

bool have_rlx() {
  struct stat st;
  return stat(kRlx.c_str(), &st) == 0;
}

int run(const std::string& args) { return std::system((kRlx + " " + args + " > /dev/null 2>&1").c_str()); }

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f, nullptr, false);
}

TEST(Qwen3Cli, MakeModelThenGenerate) {
  if (!have_rlx()) GTEST_SKIP() << kRlx << " is not built (ninja rlx)";
  mkdir((std::string(RLX_BINARY_DIR) + "/test-models").c_str(), 0755);
  ASSERT_EQ(run("make-model qwen3-tiny --out " + kDir + " --vocab 600 --layers 1 --seed 3 --gguf"), 0);
  const std::string js = kDir + "/out.json";
  // token ids in, greedy: the folder and its f16 GGUF agree
  ASSERT_EQ(run("generate " + kDir + " --tokens 5,6,7,8 -n 6 --json " + js), 0);
  nlohmann::json a = read_json(js);
  ASSERT_FALSE(a.is_discarded());
  ASSERT_EQ(a["tokens"].size(), 1u);
  EXPECT_EQ(a["tokens"][0].size(), 6u);
  EXPECT_GT(a["prefill_tokens_per_s"].get<double>(), 0);
  EXPECT_GT(a["decode_tokens_per_s"].get<double>(), 0);
  ASSERT_EQ(run("generate " + kDir + "/model-f16.gguf --tokens 5,6,7,8 -n 6 --json " + js), 0);
  nlohmann::json b = read_json(js);
  EXPECT_EQ(a["tokens"], b["tokens"]);
  // text prompts, a batch of two with different lengths, sampling with a seed is repeatable
  const std::string sampled = "generate " + kDir + " --prompt 'Hello world' --prompt 'The quick brown fox jumps over' -n 5 "
                              "--temp 0.9 --top-k 20 --top-p 0.95 --seed 11 --ignore-eos --json " + js;
  ASSERT_EQ(run(sampled), 0);
  nlohmann::json c = read_json(js);
  ASSERT_EQ(c["tokens"].size(), 2u);
  EXPECT_EQ(c["tokens"][1].size(), 5u);
  ASSERT_EQ(run(sampled), 0);
  EXPECT_EQ(read_json(js)["tokens"], c["tokens"]);
  EXPECT_NE(WEXITSTATUS(run("generate " + kDir + " --tokens 1,999999 -n 3")), 0);  // id outside the vocabulary
}

TEST(Qwen3Cli, BadInputIsAnError) {
  if (!have_rlx()) GTEST_SKIP() << kRlx << " is not built (ninja rlx)";
  EXPECT_EQ(WEXITSTATUS(run("generate /nonexistent --tokens 1,2")), 2);
  EXPECT_EQ(WEXITSTATUS(run("generate /nonexistent -n 3")), 2);                    // no prompt
  EXPECT_EQ(WEXITSTATUS(run("generate /nonexistent --tokens 1 --prompt x")), 2);   // both
  EXPECT_NE(WEXITSTATUS(run("make-model qwen3-tiny")), 0);                         // no --out
}

}  // namespace
