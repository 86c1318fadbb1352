// SentencePiece-style BPE without the npm peers: the synthetic Llama- and Gemma-style
// tokenizers (round trips, BOS, byte fallback, added tokens), merge order by rank and by score,
// GGUF "llama" metadata both ways, added-token flags, post-processors, and errors that name the
// file and the field. tokenizer_peer_test.cpp checks the same code against Hugging Face and
// llama.cpp.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstring>

#include <nlohmann/json.hpp>

#include "models/text/bpe.h"

namespace rlx::text {
namespace {

using Ids = std::vector<int64_t>;
const std::string kSp = "\xe2\x96\x81";  // ▁

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "/rlx_spm_" + std::to_string(getpid()) + "_" + name;
}

BpeTokenizer synthetic(bool gemma) {
  const std::string p = temp_path(gemma ? "gemma.json" : "llama.json");
  Status s = write_synthetic_spm_tokenizer(p, 800, 11, gemma);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  auto t = BpeTokenizer::from_json_file(p);
  EXPECT_TRUE(t.has_value()) << t.status().to_string();
  return *t;
}

Expected<BpeTokenizer> through_gguf(const std::vector<std::pair<std::string, gguf::Value>>& kv) {
  std::vector<gguf::KeyValue> md;
  md.push_back({"general.architecture", gguf::Value::string("llama"), 0});
  for (auto& [k, v] : kv) md.push_back({k, v, 0});
  RLX_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, gguf::serialize(md, {}));
  auto storage = allocate_storage(bytes.size());
  std::memcpy(storage->data(), bytes.data(), bytes.size());
  RLX_ASSIGN_OR_RETURN(gguf::File f, gguf::parse(storage, "tok.gguf"));
  return BpeTokenizer::from_gguf(f);
}

const std::vector<std::string> kTexts = {
    "Hello world!", "The quick brown fox jumps over the lazy dog.", "  leading and trailing  ",
    "tabs\tand\nnewlines\r\n\n", "caf\xc3\xa9 na\xc3\xafve", "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", "emoji \xf0\x9f\x91\x8d",
    "numbers 3.14159 and 1,000,000", "code: int main() { return 0; }", "", " ", "\n", "the model predicts the next token"};

TEST(Spm, SyntheticLlamaStyleRoundTripsAndAddsBos) {
  const BpeTokenizer t = synthetic(false);
  EXPECT_EQ(t.kind(), TokenizerKind::sentencepiece);
  EXPECT_EQ(t.vocab_size(), 800);
  EXPECT_TRUE(t.add_bos());
  EXPECT_FALSE(t.add_eos());
  EXPECT_EQ(t.bos_id, 1);
  EXPECT_EQ(t.eos_id, 2);
  EXPECT_EQ(t.unk_id, 0);
  for (const std::string& s : kTexts) {
    const Ids ids = t.encode(s);
    EXPECT_EQ(t.decode(ids), s) << s;
    Ids with = t.encode(s, true);
    ASSERT_FALSE(with.empty());
    EXPECT_EQ(with.front(), 1);
    EXPECT_EQ(Ids(with.begin() + 1, with.end()), ids);
    for (int64_t id : ids) EXPECT_TRUE(id >= 0 && id < t.vocab_size());
  }
  EXPECT_EQ(t.encode("", true), Ids{1});
  // a word of the built-in text is one token with its "▁"; the prefix space is the encoder's
  const Ids the = t.encode("the");
  ASSERT_EQ(the.size(), 1u);
  EXPECT_EQ(t.token_bytes(the[0]), " the");
  // a character outside the vocabulary is its UTF-8 bytes as <0xXX> tokens
  const Ids jp = t.encode("\xe6\x97\xa5");
  ASSERT_EQ(jp.size(), 4u);  // "▁" then three bytes
  EXPECT_EQ(jp[1], *t.token_id("<0xE6>"));
  EXPECT_EQ(t.token_bytes(jp[1]), "\xe6");
  // special tokens typed in text; the stretch after one is prefixed again (Hugging Face's legacy)
  const Ids sp = t.encode("<s>the</s>");
  ASSERT_EQ(sp.size(), 3u);
  EXPECT_EQ(sp[0], 1);
  EXPECT_EQ(sp[1], the[0]);
  EXPECT_EQ(sp[2], 2);
}

TEST(Spm, SyntheticGemmaStyleHasNoPrefixSpace) {
  const BpeTokenizer t = synthetic(true);
  EXPECT_EQ(t.bos_id, 2);
  EXPECT_EQ(t.eos_id, 1);
  EXPECT_EQ(t.vocab_size(), 800);
  const Ids the = t.encode("the");
  ASSERT_FALSE(the.empty());
  EXPECT_NE(t.token_bytes(the[0]).substr(0, 1), " ");
  const auto sot = t.token_id("<start_of_turn>"), eot = t.token_id("<end_of_turn>");
  ASSERT_TRUE(sot && eot);
  const Ids chat = t.encode("<start_of_turn>user\nhi<end_of_turn>", true);
  ASSERT_GE(chat.size(), 4u);
  EXPECT_EQ(chat[0], 2);
  EXPECT_EQ(chat[1], *sot);
  EXPECT_EQ(chat.back(), *eot);
  for (const std::string& s : kTexts) EXPECT_EQ(t.decode(t.encode(s)), s) << s;
}

// llama.cpp merges by score; the GGUF form's scores follow the merge ranks, so both agree.
TEST(Spm, GgufFormEncodesLikeTokenizerJson) {
  for (bool gemma : {false, true}) {
    const BpeTokenizer t = synthetic(gemma);
    auto md = t.to_gguf_metadata();
    bool has_scores = false;
    for (auto& [k, v] : md) {
      if (k == "tokenizer.ggml.model") {
        auto m = v.as_string();
        EXPECT_TRUE(m.has_value() && *m == "llama");
      }
      has_scores = has_scores || k == "tokenizer.ggml.scores";
    }
    EXPECT_TRUE(has_scores);
    auto g = through_gguf(md);
    ASSERT_TRUE(g.has_value()) << g.status().to_string();
    EXPECT_EQ(g->kind(), TokenizerKind::sentencepiece);
    EXPECT_EQ(g->bos_id, t.bos_id);
    EXPECT_EQ(g->eos_id, t.eos_id);
    EXPECT_EQ(g->unk_id, t.unk_id);
    EXPECT_EQ(g->add_bos(), t.add_bos());
    std::string all;
    for (const std::string& s : kTexts) {
      all += s + " ";
      EXPECT_EQ(g->encode(s, true), t.encode(s, true)) << s;
      EXPECT_EQ(g->decode(g->encode(s)), s) << s;
    }
    EXPECT_EQ(g->encode(all), t.encode(all));
    // and back again: the GGUF form writes the same scores it read
    auto g2 = through_gguf(g->to_gguf_metadata());
    ASSERT_TRUE(g2.has_value());
    EXPECT_EQ(g2->encode(all), g->encode(all));
  }
}

nlohmann::json tiny_spm() {
  nlohmann::json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}, {"a", 3}, {"b", 4}, {"c", 5}, {"bc", 6}, {"ab", 7},
                          {"abc", 8}, {kSp, 9}, {"<0x78>", 10}};
  return {{"normalizer", {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSp}}},
          {"added_tokens",
           {{{"id", 0}, {"content", "<unk>"}, {"special", true}},
            {{"id", 1}, {"content", "<s>"}, {"special", true}},
            {{"id", 2}, {"content", "</s>"}, {"special", true}}}},
          {"model",
           {{"type", "BPE"}, {"unk_token", "<unk>"}, {"byte_fallback", true}, {"fuse_unk", true}, {"vocab", vocab},
            {"merges", {"b c", {"a", "b"}, "a bc", "ab c"}}}}};
}

TEST(Spm, MergesByRankUnkAndByteFallback) {
  nlohmann::json j = tiny_spm();
  auto t = BpeTokenizer::from_json(j.dump(), "tiny.json");
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  EXPECT_EQ(t->encode("abc"), (Ids{8}));      // b c first (rank 0), then a bc
  EXPECT_EQ(t->encode("ab"), (Ids{7}));
  EXPECT_EQ(t->encode("abab"), (Ids{7, 7}));
  EXPECT_EQ(t->encode("x"), (Ids{10}));       // only its byte token exists
  EXPECT_EQ(t->encode("qqa"), (Ids{0, 3}));   // no byte tokens for q: one fused unk
  EXPECT_EQ(t->encode("a c"), (Ids{3, 9, 5}));
  EXPECT_FALSE(t->add_bos());                 // no post-processor
  j["model"]["fuse_unk"] = false;
  auto nf = BpeTokenizer::from_json(j.dump(), "tiny.json");
  ASSERT_TRUE(nf.has_value());
  EXPECT_EQ(nf->encode("qqa"), (Ids{0, 0, 3}));
}

TEST(Spm, AddedTokenFlags) {
  nlohmann::json j = tiny_spm();
  auto& vocab = j["model"]["vocab"];
  vocab["<m>"] = 11;
  vocab["<e>"] = 12;
  vocab["ab!"] = 13;
  j["added_tokens"].push_back({{"id", 11}, {"content", "<m>"}, {"special", true}, {"lstrip", true}});
  j["added_tokens"].push_back({{"id", 12}, {"content", "<e>"}, {"special", true}, {"rstrip", true}});
  j["added_tokens"].push_back({{"id", 13}, {"content", "ab!"}, {"special", false}, {"single_word", true}, {"normalized", false}});
  auto t = BpeTokenizer::from_json(j.dump(), "flags.json");
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  EXPECT_EQ(t->encode("a  <m>b"), (Ids{3, 11, 4}));       // lstrip takes the spaces before
  EXPECT_EQ(t->encode("a<e>  b"), (Ids{3, 12, 4}));       // rstrip the spaces after
  EXPECT_EQ(t->encode("ab! c"), (Ids{13, 9, 5}));         // a word of its own
  EXPECT_EQ(t->encode("cab!"), (Ids{5, 7, 0}));           // inside a word: text ("!" is unk)
  EXPECT_TRUE(t->is_special(11));
}

TEST(Spm, PostProcessors) {
  nlohmann::json j = tiny_spm();
  j["post_processor"] = {{"type", "RobertaProcessing"}, {"cls", {"<s>", 1}}, {"sep", {"</s>", 2}}};
  auto r = BpeTokenizer::from_json(j.dump(), "r.json");
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  EXPECT_EQ(r->encode("a", true), (Ids{1, 3, 2}));
  EXPECT_TRUE(r->add_bos() && r->add_eos());
  nlohmann::json single = nlohmann::json::array();
  single.push_back({{"SpecialToken", {{"id", "<s>"}}}});
  single.push_back({{"Sequence", {{"id", "A"}}}});
  single.push_back({{"SpecialToken", {{"id", "</s>"}}}});
  nlohmann::json specials = nlohmann::json::object();
  specials["<s>"] = {{"ids", {1}}};
  specials["</s>"] = {{"ids", {2}}};
  nlohmann::json processors = nlohmann::json::array();
  processors.push_back({{"type", "ByteLevel"}});
  processors.push_back({{"type", "TemplateProcessing"}, {"single", single}, {"special_tokens", specials}});
  j["post_processor"] = {{"type", "Sequence"}, {"processors", processors}};
  auto s = BpeTokenizer::from_json(j.dump(), "s.json");
  ASSERT_TRUE(s.has_value()) << s.status().to_string();
  EXPECT_EQ(s->encode("ab", true), (Ids{1, 7, 2}));
  EXPECT_EQ(s->encode("ab", false), (Ids{7}));
}

std::vector<std::pair<std::string, gguf::Value>> tiny_gguf(bool with_flags) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "<0x41>", kSp, "h", "i", kSp + "h", kSp + "hi", "hi", kSp + kSp};
  std::vector<float> scores = {0, 0, 0, 0, -1, -2, -3, -4, -5, -6, 0};
  std::vector<int32_t> types = {2, 3, 3, 6, 1, 1, 1, 1, 1, 1, 4};
  std::vector<std::pair<std::string, gguf::Value>> md = {
      {"tokenizer.ggml.model", gguf::Value::string("llama")},
      {"tokenizer.ggml.tokens", gguf::Value::array(tokens)},
      {"tokenizer.ggml.scores", gguf::Value::array(scores)},
      {"tokenizer.ggml.token_type", gguf::Value::array(types)}};
  if (with_flags) {
    md.emplace_back("tokenizer.ggml.add_bos_token", gguf::Value::boolean(false));
    md.emplace_back("tokenizer.ggml.add_space_prefix", gguf::Value::boolean(false));
  }
  return md;
}

TEST(Spm, GgufLlamaDefaultsAndScores) {
  auto t = through_gguf(tiny_gguf(false));
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  // llama.cpp's defaults: <s> = 1 added, </s> = 2, <unk> = 0, a space prefixed
  EXPECT_TRUE(t->add_bos());
  EXPECT_EQ(t->bos_id, 1);
  EXPECT_EQ(t->eos_id, 2);
  // "▁hi": ▁h (-4) beats hi (-6), then ▁h + i = ▁hi (-5)
  EXPECT_EQ(t->encode("hi", true), (Ids{1, 8}));
  EXPECT_EQ(t->encode("A"), (Ids{4, 3}));  // "▁", then A as its byte token
  EXPECT_EQ(t->decode(Ids{8}), "hi");      // the prefix space is stripped
  // a user-defined token is matched in the raw text (which has spaces, not "▁"), and merges
  // like any token by its score (0, the highest here), as in llama.cpp; it streams as spaces
  EXPECT_EQ(t->encode("  hi"), (Ids{10, 8}));
  EXPECT_EQ(t->token_bytes(10), "  ");
  EXPECT_EQ(t->token_bytes(1), "<s>");
  EXPECT_EQ(t->token_bytes(3), "A");
  auto n = through_gguf(tiny_gguf(true));
  ASSERT_TRUE(n.has_value());
  EXPECT_FALSE(n->add_bos());
  EXPECT_EQ(n->encode("hi"), (Ids{9}));    // no prefix: h + i
  EXPECT_EQ(n->encode("hi hi"), (Ids{9, 8}));
}

// llama.cpp's rule keyed on general.name (llama-vocab.cpp): in a Phi-3 model the whitespace
// after a special token other than <unk>, <s>, <|endoftext|> is dropped.
TEST(Spm, GgufPhi3DropsWhitespaceAfterSpecialTokens) {
  auto md = tiny_gguf(true);
  auto plain = through_gguf(md);
  ASSERT_TRUE(plain.has_value());
  md.emplace_back("general.name", gguf::Value::string("Phi-3-mini-4k-instruct"));
  auto phi = through_gguf(md);
  ASSERT_TRUE(phi.has_value()) << phi.status().to_string();
  EXPECT_EQ(plain->encode("</s> hi"), (Ids{2, 8}));  // "▁hi"
  EXPECT_EQ(phi->encode("</s> hi"), (Ids{2, 9}));    // "hi"
  EXPECT_EQ(phi->encode("<s> hi"), (Ids{1, 8}));  // <s> keeps it
}

TEST(Spm, ErrorsNameTheFileAndField) {
  auto expect_error = [](const nlohmann::json& j, ErrorCode code, std::initializer_list<const char*> parts) {
    auto t = BpeTokenizer::from_json(j.dump(), "bad.json");
    ASSERT_FALSE(t.has_value()) << j.dump().substr(0, 200);
    EXPECT_EQ(t.status().code(), code) << t.status().message();
    EXPECT_NE(t.status().message().find("bad.json"), std::string::npos) << t.status().message();
    for (const char* p : parts) EXPECT_NE(t.status().message().find(p), std::string::npos) << p << " in " << t.status().message();
  };
  nlohmann::json j = tiny_spm();
  j["normalizer"] = {{"type", "Lowercase"}};
  expect_error(j, ErrorCode::unsupported, {"normalizer", "Lowercase"});
  j = tiny_spm();
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "Digits"}}}}};
  expect_error(j, ErrorCode::unsupported, {"pre_tokenizer", "Digits"});
  j = tiny_spm();
  j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}};
  expect_error(j, ErrorCode::unsupported, {"normalizer", "Regex", " {2,}"});
  j = tiny_spm();
  j["decoder"] = {{"type", "CTC"}};
  expect_error(j, ErrorCode::unsupported, {"decoder", "CTC"});
  j = tiny_spm();
  j["model"]["merges"].push_back("a zz");
  expect_error(j, ErrorCode::format_error, {"model.merges[4]", "zz"});
  j = tiny_spm();
  j["model"]["unk_token"] = "<nope>";
  expect_error(j, ErrorCode::format_error, {"model.unk_token", "<nope>"});
  j = tiny_spm();
  j["added_tokens"].push_back({{"content", "<x>"}});
  expect_error(j, ErrorCode::format_error, {"added_tokens[3]", "id"});
  j = tiny_spm();
  j["added_tokens"][1]["lstrip"] = "yes";
  expect_error(j, ErrorCode::format_error, {"added_tokens[1]", "lstrip"});
  j = tiny_spm();
  j["post_processor"] = {{"type", "TemplateProcessing"}, {"single", {{{"SpecialToken", {{"id", "<bos>"}}}}}}, {"special_tokens", nlohmann::json::object()}};
  expect_error(j, ErrorCode::format_error, {"post_processor", "<bos>"});
  j = tiny_spm();
  j["post_processor"] = {{"type", "Fancy"}};
  expect_error(j, ErrorCode::unsupported, {"post_processor", "Fancy"});
  j = tiny_spm();
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"prepend_scheme", "sometimes"}};
  expect_error(j, ErrorCode::unsupported, {"prepend_scheme", "sometimes"});
  // deeply nested Sequences are walked without recursion
  j = tiny_spm();
  nlohmann::json nested = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSp}};
  for (int i = 0; i < 200; ++i) nested = {{"type", "Sequence"}, {"normalizers", {nested}}};
  j["normalizer"] = nested;
  auto deep = BpeTokenizer::from_json(j.dump(), "deep.json");
  ASSERT_TRUE(deep.has_value()) << deep.status().to_string();
  EXPECT_EQ(deep->encode("a c"), (Ids{3, 9, 5}));
  // GGUF
  auto md = tiny_gguf(false);
  md[2].second = gguf::Value::array(std::vector<float>{0, 1});
  auto s = through_gguf(md);
  ASSERT_FALSE(s.has_value());
  EXPECT_NE(s.status().message().find("tokenizer.ggml.scores"), std::string::npos) << s.status().message();
  md = tiny_gguf(false);
  md[0].second = gguf::Value::string("t5");
  auto u = through_gguf(md);
  ASSERT_FALSE(u.has_value());
  EXPECT_EQ(u.status().code(), ErrorCode::unsupported);
  EXPECT_NE(u.status().message().find("'t5'"), std::string::npos) << u.status().message();
  md = tiny_gguf(false);
  md.emplace_back("tokenizer.ggml.bos_token_id", gguf::Value::u32(99));
  auto b = through_gguf(md);
  ASSERT_FALSE(b.has_value());
  EXPECT_NE(b.status().message().find("bos_token_id"), std::string::npos) << b.status().message();
}

}  // namespace
}  // namespace rlx::text

namespace rlx::text {
namespace {

// One word of 200,000 characters: merging goes through a heap (n log n), for both kinds, so
// this takes milliseconds; the pairwise rescan it replaced took minutes.
TEST(Spm, LongWordsAreNotQuadratic) {
  const std::string bl_path = temp_path("bl.json");
  ASSERT_TRUE(write_synthetic_bpe_tokenizer(bl_path, 1000, 3).is_ok());
  auto bl = BpeTokenizer::from_json_file(bl_path);
  ASSERT_TRUE(bl.has_value());
  const BpeTokenizer sp = synthetic(false);
  for (const BpeTokenizer* t : std::vector<const BpeTokenizer*>{&*bl, &sp}) {
    for (const std::string unit : {"a", "the", "\xe6\x97\xa5"}) {
      std::string s;
      while (s.size() < 200000) s += unit;
      const auto t0 = std::chrono::steady_clock::now();
      const Ids ids = t->encode(s);
      const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      EXPECT_EQ(t->decode(ids), s);
      EXPECT_LT(sec, 5.0) << unit;
    }
  }
}

}  // namespace
}  // namespace rlx::text
