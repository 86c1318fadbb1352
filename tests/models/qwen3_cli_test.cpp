// rlx make-model FAMILY-tiny and rlx generate (token ids, text prompts with the tokenizer's BOS,
// chat through the model's template), run as the command-line program.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <tuple>
#include <fstream>

#include <nlohmann/json.hpp>

#include "models/decoder.h"
#include "models/text/bpe.h"
#include "rlx/npy.h"

namespace {

const std::string kRlx = std::string(RLX_BINARY_DIR) + "/bin/rlx";
const std::string kDir = std::string(RLX_BINARY_DIR) + "/test-models/qwen3_cli";

bool have_rlx() {
  struct stat st;
  return stat(kRlx.c_str(), &st) == 0;
}

int run(const std::string& args) { return std::system((kRlx + " " + args + " > /dev/null 2>&1").c_str()); }

// The program's combined output and exit code.
std::pair<int, std::string> run_out(const std::string& args) {
  std::string out;
  FILE* p = popen((kRlx + " " + args + " 2>&1").c_str(), "r");
  if (!p) return {-1, ""};
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  return {WEXITSTATUS(status), out};
}

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

// --chat renders the model's chat template (ChatML in the made models, from
// tokenizer_config.json and from the GGUF's tokenizer.chat_template), tokenizes it without
// adding special tokens, and stops at the end of a turn as well as at EOS.
TEST(DecoderCli, ChatAppliesTheTemplateAndStopsAtTheEndOfTurn) {
  if (!have_rlx()) GTEST_SKIP() << kRlx << " is not built (ninja rlx)";
  mkdir((std::string(RLX_BINARY_DIR) + "/test-models").c_str(), 0755);
  const std::string dir = kDir + "_chat_" + std::to_string(getpid());
  ASSERT_EQ(run("make-model llama-tiny --out " + dir + " --vocab 600 --layers 1 --seed 4 --gguf"), 0);
  const std::string js = dir + "/out.json";
  auto [code, out] = run_out("generate " + dir + " --chat 'Hello there' --system 'Be brief.' -n 4 --quiet --json " + js);
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json a = read_json(js);
  auto tok = rlx::text::BpeTokenizer::load(dir);
  ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
  const std::vector<int64_t> prompt = a["prompt_tokens"][0].get<std::vector<int64_t>>();
  EXPECT_EQ(tok->decode(prompt),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n");
  const auto stop = a["stop_token_ids"].get<std::vector<int64_t>>();
  EXPECT_NE(std::find(stop.begin(), stop.end(), *tok->token_id("<|im_end|>")), stop.end());
  EXPECT_NE(std::find(stop.begin(), stop.end(), *tok->token_id("<|endoftext|>")), stop.end());
  // the GGUF file carries the template and the tokenizer: the same prompt and tokens
  std::tie(code, out) = run_out("generate " + dir + "/model-f16.gguf --chat 'Hello there' --system 'Be brief.' -n 4 --quiet --json " + js);
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json b = read_json(js);
  EXPECT_EQ(a["prompt_tokens"], b["prompt_tokens"]);
  EXPECT_EQ(a["tokens"], b["tokens"]);
  // a template that refuses the conversation: its message, exit 2
  {
    std::ofstream f(dir + "/tokenizer_config.json");
    f << R"({"chat_template": "{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"})";
  }
  std::tie(code, out) = run_out("generate " + dir + " --chat hi --system x -n 2 --quiet");
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("System role not supported"), std::string::npos) << out;
  std::tie(code, out) = run_out("generate " + dir + " --system x --tokens 1,2 -n 2 --quiet");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("--system needs --chat"), std::string::npos) << out;
}

// Text prompts get what the tokenizer adds to a sequence: a SentencePiece tokenizer in Llama 2's
// layout adds <s> (id 1) before the prompt, as Hugging Face's encode does.
TEST(DecoderCli, TextPromptsGetTheTokenizersBos) {
  if (!have_rlx()) GTEST_SKIP() << kRlx << " is not built (ninja rlx)";
  mkdir((std::string(RLX_BINARY_DIR) + "/test-models").c_str(), 0755);
  const std::string dir = kDir + "_bos_" + std::to_string(getpid());
  ASSERT_EQ(run("make-model llama-tiny --out " + dir + " --vocab 600 --layers 1 --seed 5"), 0);
  ASSERT_TRUE(rlx::text::write_synthetic_spm_tokenizer(dir + "/tokenizer.json", 600, 7).is_ok());
  std::remove((dir + "/tokenizer_config.json").c_str());
  auto [code, out] = run_out("generate " + dir + " --prompt 'Hello world' -n 2 --quiet --json " + dir + "/out.json");
  ASSERT_EQ(code, 0) << out;
  const auto prompt = read_json(dir + "/out.json")["prompt_tokens"][0].get<std::vector<int64_t>>();
  auto tok = rlx::text::BpeTokenizer::load(dir);
  ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
  ASSERT_TRUE(tok->add_bos());
  std::vector<int64_t> want{tok->bos_id};
  for (int64_t t : tok->encode("Hello world", false)) want.push_back(t);
  EXPECT_EQ(tok->bos_id, 1);
  EXPECT_EQ(prompt, want);
}

// --dump-layers writes the first prompt's residual stream after every layer (what the decoder
// tests compare with llama.cpp's layer by layer): the library's values, as .npy.
TEST(DecoderCli, DumpLayersWritesTheResidualStreamOfEachLayer) {
  if (!have_rlx()) GTEST_SKIP() << kRlx << " is not built (ninja rlx)";
  mkdir((std::string(RLX_BINARY_DIR) + "/test-models").c_str(), 0755);
  const std::string dir = kDir + "_layers";
  ASSERT_EQ(run("make-model llama-tiny --out " + dir + " --vocab 300 --layers 2 --seed 4"), 0);
  const std::string npy = dir + "/layers.npy";
  ASSERT_EQ(run("generate " + dir + " --tokens 5,6,7 --tokens 9,10 -n 2 --quiet --dump-layers " + npy), 0);
  auto dumped = rlx::read_npy(npy);
  ASSERT_TRUE(dumped.has_value()) << dumped.status().to_string();
  auto w = rlx::models::load_decoder(dir);
  ASSERT_TRUE(w.has_value()) << w.status().to_string();
  ASSERT_EQ(dumped->sizes(), (rlx::Sizes{2, 3, w->config.hidden}));
  auto want = rlx::models::decoder_layer_outputs(*w, {5, 6, 7}, "cpu", 3 + 2);
  ASSERT_TRUE(want.has_value()) << want.status().to_string();
  ASSERT_EQ(want->sizes(), dumped->sizes());
  double diff = 0, size = 0;
  for (int64_t i = 0; i < want->numel(); ++i) {
    diff = std::max(diff, std::fabs(double{dumped->data<float>()[i]} - want->data<float>()[i]));
    size = std::max(size, std::fabs(double{want->data<float>()[i]}));
  }
  EXPECT_EQ(diff, 0);
  EXPECT_GT(size, 0.1);  // not an empty file
  // f32 in one process only; an unwritable path names the flag
  auto [code, out] = run_out("generate " + dir + " --tokens 5,6 --precision bf16 --dump-layers " + npy);
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("--dump-layers"), std::string::npos) << out;
  std::tie(code, out) = run_out("generate " + dir + " --tokens 5,6 --dump-layers /nonexistent/dir/x.npy");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("--dump-layers /nonexistent/dir/x.npy"), std::string::npos) << out;
}

// make-model's size flags (benchmarks at a real checkpoint's shapes) reach config.json; sizes
// that do not fit together are refused naming the flag.
TEST(DecoderCli, MakeModelTakesTheSizesOfARealCheckpoint) {
  if (!have_rlx()) GTEST_SKIP() << kRlx << " is not built (ninja rlx)";
  mkdir((std::string(RLX_BINARY_DIR) + "/test-models").c_str(), 0755);
  const std::string dir = kDir + "_sizes";
  ASSERT_EQ(run("make-model llama-tiny --out " + dir + " --hidden 96 --heads 6 --kv-heads 2 --intermediate 160 --layers 1 --vocab 300"),
            0);
  const nlohmann::json c = read_json(dir + "/config.json");
  ASSERT_FALSE(c.is_discarded());
  EXPECT_EQ(c["hidden_size"], 96);
  EXPECT_EQ(c["num_attention_heads"], 6);
  EXPECT_EQ(c["num_key_value_heads"], 2);
  EXPECT_EQ(c["intermediate_size"], 160);
  EXPECT_EQ(c.value("head_dim", 96 / 6), 16);
  EXPECT_EQ(run("generate " + dir + " --tokens 1,2,3 -n 2 --quiet"), 0);
  auto [code, out] = run_out("make-model llama-tiny --out " + dir + " --hidden 100 --heads 7");
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("--hidden 100"), std::string::npos) << out;
  std::tie(code, out) = run_out("make-model llama-tiny --out " + dir + " --heads 8 --kv-heads 3");
  EXPECT_EQ(code, 2);  // 8 query heads do not share 3 key-value heads
}

TEST(Qwen3Cli, BadInputIsAnError) {
  if (!have_rlx()) GTEST_SKIP() << kRlx << " is not built (ninja rlx)";
  EXPECT_EQ(WEXITSTATUS(run("generate /nonexistent --tokens 1,2")), 2);
  EXPECT_EQ(WEXITSTATUS(run("generate /nonexistent -n 3")), 2);                    // no prompt
  EXPECT_EQ(WEXITSTATUS(run("generate /nonexistent --tokens 1 --prompt x")), 2);   // both
  EXPECT_NE(WEXITSTATUS(run("make-model qwen3-tiny")), 0);                         // no --out
}

}  // namespace
