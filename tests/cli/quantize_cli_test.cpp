// `rlx quantize` as a user runs it for the schemes of docs/quantization.md that need more than a
// library call: int4-g128[-asym] GGUF files that `rlx run` and `rlx generate` load, and int8 with
// static activation scales from `--calib SENTENCES.txt`, which `rlx embed` runs; bad arguments
// are errors with exit status 2 that name the culprit.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/run_rlx.h"

namespace {

using rlx_cli_test::rlx;

std::string temp(const std::string& name) {
  const std::string d = std::string(RLX_BINARY_DIR) + "/quantize_cli_test";
  std::filesystem::create_directories(d);
  return d + "/" + name;
}

const std::string kSentences = std::string(RLX_SOURCE_DIR) + "/tests/quant/calib_sentences.txt";

TEST(QuantizeCli, Int4G128GgufRunsAndGenerates) {
  const std::string q3 = temp("q3");
  std::filesystem::remove_all(q3);
  auto r = rlx("make-model qwen3-tiny --out " + q3);
  ASSERT_EQ(r.code, 0) << r.out;
  for (const std::string scheme : {"int4-g128", "int4-g128-asym"}) {
    const std::string fmt = scheme == "int4-g128" ? "int4_g128" : "int4_g128_asym";
    const std::string out = temp("q3-" + scheme + ".gguf");
    r = rlx("quantize " + q3 + " " + out + " --scheme " + scheme);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("decoder matrices in " + fmt), std::string::npos) << r.out;
    r = rlx("run " + out);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("qmatmul " + fmt), std::string::npos) << r.out;
    r = rlx("generate " + out + " --tokens 1,2,3 -n 4 --ignore-eos");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("decode:"), std::string::npos) << r.out;
  }
}

TEST(QuantizeCli, Int8WithCalibrationEmbeds) {
  const std::string m = temp("minilm"), q = temp("minilm-int8-static");
  std::filesystem::remove_all(m);
  auto r = rlx("make-model minilm --out " + m);
  ASSERT_EQ(r.code, 0) << r.out;
  r = rlx("quantize " + m + " " + q + " --scheme int8 --calib " + kSentences + " --calib-method percentile --percentile 99.9");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("static activation scales, percentile 99.9 over 64 sentences"), std::string::npos) << r.out;
  r = rlx("embed " + q + " \"Hello world.\"");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("(384 dims)"), std::string::npos) << r.out;
}

// --attention-scores int8: the folder's metadata asks for int8 attention scores, which the
// BERT builder passes to every attention (explain shows them) and embed runs.
TEST(QuantizeCli, Int8AttentionScoresExplainAndEmbed) {
  const std::string m = temp("minilm-scores"), q = temp("minilm-int8-scores");
  std::filesystem::remove_all(q);
  if (!std::filesystem::exists(m + "/config.json")) ASSERT_EQ(rlx("make-model minilm --out " + m).code, 0);
  auto r = rlx("quantize " + m + " " + q + " --scheme int8 --attention-scores int8");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("attention scores from int8 q and k"), std::string::npos) << r.out;
  r = rlx("explain " + q);
  ASSERT_EQ(r.code, 0) << r.out;
  size_t scores = 0;
  for (size_t at = r.out.find("int8 scores"); at != std::string::npos; at = r.out.find("int8 scores", at + 1)) ++scores;
  EXPECT_EQ(scores, 6u) << "one attention per layer\n" << r.out;
  r = rlx("embed " + q + " \"Hello world.\"");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("(384 dims)"), std::string::npos) << r.out;
}

TEST(QuantizeCli, BadArgumentsExitTwo) {
  const std::string m = temp("minilm-args");
  if (!std::filesystem::exists(m + "/config.json")) ASSERT_EQ(rlx("make-model minilm --out " + m).code, 0);
  const std::string out = temp("never-written");
  struct Case { std::string args, says; };
  for (const Case& c : {Case{"--scheme int8 --percentile 99", "--calib-method and --percentile need --calib DATA"},
                        Case{"--scheme int8 --calib " + temp("no-such.txt"), "cannot open " + temp("no-such.txt")},
                        Case{"--scheme int8 --calib " + kSentences + " --calib-method entropy", "expected minmax or percentile"},
                        Case{"--scheme int8 --calib " + kSentences + " --calib-method percentile --percentile abc",
                             "--percentile expects a number from 0 to 100, got 'abc'"},
                        Case{"--scheme int8 --calib " + kSentences + " --calib-method percentile --percentile 0", "(0, 100]"},
                        Case{"--scheme int4-g128 --calib " + kSentences, "--calib applies to --scheme int8"},
                        Case{"--scheme int4-g64", "unknown scheme 'int4-g64'"},
                        Case{"--scheme int8 --attention-scores int4", "--attention-scores int4: f32 or int8"},
                        Case{"--scheme int4-g32 --attention-scores int8",
                             "--attention-scores applies to --scheme int8 on BERT-family folders"}}) {
    auto r = rlx("quantize " + m + " " + out + " " + c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.says), std::string::npos) << c.args << "\n" << r.out;
  }
  // q4_k's blocks of 256 do not tile MiniLM's K = 384 (int4-g32 / int4-g128 do: below)
  auto r = rlx("quantize " + m + " " + out + " --scheme q4_k");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("tensor 'encoder.layer.0.attention.self.query.weight' has rows of 384 values (not a multiple of 256)"),
            std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(out));
  // a folder of neither family
  std::filesystem::create_directories(temp("not-a-model"));
  r = rlx("quantize " + temp("not-a-model") + " " + out + " --scheme int4-g32");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("quantizes BERT-family folders (to a folder) and decoder models"), std::string::npos) << r.out;
}

TEST(QuantizeCli, Int4BertFolderEmbedsBenchesAndRuns) {
  const std::string m = temp("minilm-int4-src"), q = temp("minilm-int4-g32");
  std::filesystem::remove_all(m);
  std::filesystem::remove_all(q);
  auto r = rlx("make-model minilm --out " + m);
  ASSERT_EQ(r.code, 0) << r.out;
  r = rlx("quantize " + m + " " + q + " --scheme int4-g32");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("37 Linear weights as q4_0 blocks of 32"), std::string::npos) << r.out;
  r = rlx("embed " + q + " \"Hello world.\"");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("(384 dims)"), std::string::npos) << r.out;
  r = rlx("bench " + q + " --batch 1 --seq 16 --runs 1 --warmup 0");
  ASSERT_EQ(r.code, 0) << r.out;
  r = rlx("run " + q + " --dims batch=1,seq=8");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("qmatmul q4_0"), std::string::npos) << r.out;
}

// rlx generate --prompt-top1 (bench/precision_bench.py's agreement figure): one greedy token per
// prompt position, teacher forced; the last one is the token greedy generation continues with.
TEST(QuantizeCli, GeneratePromptTop1) {
  const std::string q3 = temp("q3-top1"), json = temp("top1.json");
  std::filesystem::remove_all(q3);
  auto r = rlx("make-model qwen3-tiny --layers 1 --out " + q3);
  ASSERT_EQ(r.code, 0) << r.out;
  r = rlx("generate " + q3 + " --tokens 5,900,31000,7,7,123 -n 2 --ignore-eos --quiet --prompt-top1 --json " + json);
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream f(json);
  const nlohmann::json j = nlohmann::json::parse(f);
  ASSERT_EQ(j["prompt_top1"].size(), 1u) << j.dump();
  const auto top1 = j["prompt_top1"][0].get<std::vector<int64_t>>();
  ASSERT_EQ(top1.size(), 6u) << j.dump();
  EXPECT_EQ(top1.back(), j["tokens"][0][0].get<int64_t>()) << j.dump();
  for (int64_t t : top1) EXPECT_TRUE(t >= 0 && t < 32000) << t;
}

}  // namespace
