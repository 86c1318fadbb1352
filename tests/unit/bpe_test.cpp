// Byte-level BPE: Qwen2 / Llama 3 / GPT-2 pre-tokenization, merge order, special tokens,
// round trips, tokenizer.json and GGUF metadata giving the same encodings, and errors.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>

#include <nlohmann/json.hpp>

#include "models/text/bpe.h"
#include "models/text/unicode.h"

namespace rlx::text {
namespace {

using Pieces = std::vector<std::string>;

TEST(BpePreTokenize, Qwen2Pattern) {
  EXPECT_EQ(pre_tokenize("Hello world", PreTokenizer::qwen2), (Pieces{"Hello", " world"}));
  EXPECT_EQ(pre_tokenize("I'm fine, THEY'LL go", PreTokenizer::qwen2),
            (Pieces{"I", "'m", " fine", ",", " THEY", "'LL", " go"}));
  EXPECT_EQ(pre_tokenize("2024 is", PreTokenizer::qwen2), (Pieces{"2", "0", "2", "4", " is"}));
  EXPECT_EQ(pre_tokenize("a  b", PreTokenizer::qwen2), (Pieces{"a", " ", " b"}));
  EXPECT_EQ(pre_tokenize("x\n\ny", PreTokenizer::qwen2), (Pieces{"x", "\n\n", "y"}));
  EXPECT_EQ(pre_tokenize("a \n b", PreTokenizer::qwen2), (Pieces{"a", " \n", " b"}));
  EXPECT_EQ(pre_tokenize("hi!!\n", PreTokenizer::qwen2), (Pieces{"hi", "!!\n"}));
  EXPECT_EQ(pre_tokenize(" (x)", PreTokenizer::qwen2), (Pieces{" (", "x", ")"}));
  EXPECT_EQ(pre_tokenize("end  ", PreTokenizer::qwen2), (Pieces{"end", "  "}));
  EXPECT_EQ(pre_tokenize("$hello", PreTokenizer::qwen2), (Pieces{"$hello"}));
  EXPECT_EQ(pre_tokenize("café 日本", PreTokenizer::qwen2), (Pieces{"café", " 日本"}));
}

TEST(BpePreTokenize, Llama3AndGpt2Patterns) {
  EXPECT_EQ(pre_tokenize("12345 x", PreTokenizer::llama3), (Pieces{"123", "45", " x"}));
  EXPECT_EQ(pre_tokenize("12345 x", PreTokenizer::gpt2), (Pieces{"12345", " x"}));
  EXPECT_EQ(pre_tokenize("I'M", PreTokenizer::gpt2), (Pieces{"I", "'", "M"}));  // case sensitive
  EXPECT_EQ(pre_tokenize("a  b!", PreTokenizer::gpt2), (Pieces{"a", " ", " b", "!"}));
  EXPECT_EQ(pre_tokenize("$hello", PreTokenizer::gpt2), (Pieces{"$", "hello"}));
}

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "/rlx_bpe_" + std::to_string(getpid()) + "_" + name;
}

const BpeTokenizer& synthetic() {
  static const BpeTokenizer t = [] {
    const std::string p = temp_path("tokenizer.json");
    Status s = write_synthetic_bpe_tokenizer(p, 2000, 7);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    auto t = BpeTokenizer::from_json_file(p);
    EXPECT_TRUE(t.has_value()) << t.status().to_string();
    return *t;
  }();
  return t;
}

TEST(Bpe, RoundTripsText) {
  const BpeTokenizer& t = synthetic();
  EXPECT_EQ(t.vocab_size(), 2000);
  for (const std::string s :
       {"Hello world!", "The quick brown fox jumps over the lazy dog.", "  leading and trailing  ", "tabs\tand\nnewlines\r\n\n",
        "café naïve résumé", "日本語のテキスト", "emoji 👍🏽 and ZWJ 👨‍👩‍👧", "numbers 3.14159 and 1,000,000",
        "code: int main() { return 0; }", "I'm sure they'll've done it", "", " ", "\n"}) {
    std::vector<int64_t> ids = t.encode(s);
    EXPECT_EQ(t.decode(ids), s) << s;
    for (int64_t id : ids) EXPECT_TRUE(id >= 0 && id < t.vocab_size());
  }
}

TEST(Bpe, MergesShortenCommonText) {
  const BpeTokenizer& t = synthetic();
  const std::string s = "the model predicts the next token";
  std::vector<int64_t> ids = t.encode(s);
  EXPECT_LT(ids.size(), s.size() / 2) << "merges learned from the built-in text should apply";
  // a word from the built-in text is one token (with its leading space)
  EXPECT_EQ(t.encode(" the").size(), 1u);
}

TEST(Bpe, SpecialTokensAreMatchedInText) {
  const BpeTokenizer& t = synthetic();
  auto start = t.token_id("<|im_start|>"), end = t.token_id("<|im_end|>"), eot = t.token_id("<|endoftext|>");
  ASSERT_TRUE(start && end && eot);
  EXPECT_EQ(*eot, synthetic_bpe_eos_id(2000));
  EXPECT_EQ(t.eos_id, *eot);
  const std::string s = "<|im_start|>user\nhi<|im_end|><|endoftext|>";
  std::vector<int64_t> ids = t.encode(s);
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids.front(), *start);
  EXPECT_EQ(ids[ids.size() - 2], *end);
  EXPECT_EQ(ids.back(), *eot);
  EXPECT_TRUE(t.is_special(*start));
  EXPECT_EQ(t.decode(ids), s);
  // a partial special token is ordinary text
  std::vector<int64_t> partial = t.encode("<|im_sta");
  for (int64_t id : partial) EXPECT_FALSE(t.is_special(id));
}

// A hand-made tokenizer: merges apply by rank, not by position.
TEST(Bpe, MergesApplyInRankOrder) {
  nlohmann::json vocab = nlohmann::json::object();
  // the 256 byte tokens in GPT-2's byte-to-character mapping order does not matter here: ids by byte
  std::vector<char32_t> cps;
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool direct = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    std::string s;
    utf8_append(s, direct ? static_cast<char32_t>(b) : static_cast<char32_t>(next++));
    vocab[s] = b;
  }
  vocab["bc"] = 256;
  vocab["ab"] = 257;
  vocab["abc"] = 258;
  nlohmann::json j = {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"b c", {"a", "b"}, "a bc"}}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"use_regex", true}}},
  };
  auto t = BpeTokenizer::from_json(j.dump(), "hand.json");
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  EXPECT_EQ(t->pre_tokenizer(), PreTokenizer::gpt2);
  EXPECT_EQ(t->encode("abc"), (std::vector<int64_t>{258}));   // b c first, then a bc
  EXPECT_EQ(t->encode("abab"), (std::vector<int64_t>{257, 257}));
  EXPECT_EQ(t->encode("xbc"), (std::vector<int64_t>{'x', 256}));
}

TEST(Bpe, GgufMetadataEncodesLikeTokenizerJson) {
  const BpeTokenizer& t = synthetic();
  std::vector<gguf::KeyValue> md;
  md.push_back({"general.architecture", gguf::Value::string("qwen3"), 0});
  for (auto& [k, v] : t.to_gguf_metadata()) md.push_back({k, v, 0});
  auto bytes = gguf::serialize(md, {});
  ASSERT_TRUE(bytes.has_value()) << bytes.status().to_string();
  auto storage = allocate_storage(bytes->size());
  std::memcpy(storage->data(), bytes->data(), bytes->size());
  auto f = gguf::parse(storage, "tok.gguf");
  ASSERT_TRUE(f.has_value()) << f.status().to_string();
  auto g = BpeTokenizer::from_gguf(*f);
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  EXPECT_EQ(g->vocab_size(), t.vocab_size());
  EXPECT_EQ(g->eos_id, t.eos_id);
  for (const std::string s : {"Hello world! 2024", "<|im_start|>assistant\nsure<|im_end|>", "café 日本語 👍"})
    EXPECT_EQ(g->encode(s), t.encode(s)) << s;
}

TEST(Bpe, ErrorsNameTheProblem) {
  auto bad_json = BpeTokenizer::from_json("{", "x.json");
  ASSERT_FALSE(bad_json.has_value());
  EXPECT_NE(bad_json.status().message().find("x.json"), std::string::npos);
  nlohmann::json j = {{"model", {{"type", "BPE"}, {"vocab", {{"a", 0}}}, {"merges", nlohmann::json::array()}}},
                      {"pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", "\\w+"}}}}}};
  auto pat = BpeTokenizer::from_json(j.dump(), "p.json");
  ASSERT_FALSE(pat.has_value());
  EXPECT_EQ(pat.status().code(), ErrorCode::unsupported);
  EXPECT_NE(pat.status().message().find("\\w+"), std::string::npos) << pat.status().message();
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"use_regex", true}};
  auto bytes = BpeTokenizer::from_json(j.dump(), "b.json");
  ASSERT_FALSE(bytes.has_value());
  EXPECT_NE(bytes.status().message().find("byte token"), std::string::npos) << bytes.status().message();
  auto missing = BpeTokenizer::from_json_file("/nonexistent/tokenizer.json");
  EXPECT_EQ(missing.status().code(), ErrorCode::io_error);
}

}  // namespace
}  // namespace rlx::text
