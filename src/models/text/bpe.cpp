#include "bpe.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "rlx/mapped_file.h"
#include "support/json_fields.h"
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include "models/text/unicode.h"

namespace rlx::text {
namespace {

// The Split regexes of the supported pre-tokenizers, as tokenizer.json files spell them.
constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// GPT-2's bytes_to_unicode: printable bytes map to themselves, the others to U+0100 upwards.
struct ByteMap {
  char32_t to_cp[256];
  std::unordered_map<char32_t, uint8_t> to_byte;
  std::string utf8[256];
  ByteMap() {
    std::vector<bool> direct(256, false);
    for (int b = '!'; b <= '~'; ++b) direct[b] = true;
    for (int b = 0xA1; b <= 0xAC; ++b) direct[b] = true;
    for (int b = 0xAE; b <= 0xFF; ++b) direct[b] = true;
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      to_cp[b] = direct[b] ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      to_byte[to_cp[b]] = static_cast<uint8_t>(b);
      utf8_append(utf8[b], to_cp[b]);
    }
  }
};
const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

bool is_space(char32_t c) { return u_isUWhiteSpace(static_cast<UChar32>(c)) != 0; }
bool is_nl(char32_t c) { return c == U'\r' || c == U'\n'; }
char32_t ascii_lower(char32_t c) { return c >= U'A' && c <= U'Z' ? c + 32 : c; }

// The end of the pattern's match at i (> i), or i when nothing matches there.
size_t match_at(const std::vector<char32_t>& s, size_t i, PreTokenizer p) {
  const size_t n = s.size();
  auto L = [&](size_t k) { return k < n && is_letter(s[k]); };
  auto N = [&](size_t k) { return k < n && is_number(s[k]); };
  auto S = [&](size_t k) { return k < n && is_space(s[k]); };
  auto X = [&](size_t k) { return k < n && !is_space(s[k]) && !is_letter(s[k]) && !is_number(s[k]); };
  auto run = [&](size_t k, auto pred) {
    while (pred(k)) ++k;
    return k;
  };
  // contractions
  if (s[i] == U'\'' && i + 1 < n) {
    const bool ci = p != PreTokenizer::gpt2;
    auto at = [&](size_t k) { return k < n ? (ci ? ascii_lower(s[k]) : s[k]) : char32_t{0}; };
    const char32_t a = at(i + 1), b = at(i + 2);
    if (a == U's' || a == U't' || a == U'm' || a == U'd') return i + 2;
    if ((a == U'r' && b == U'e') || (a == U'v' && b == U'e') || (a == U'l' && b == U'l')) return i + 3;
  }
  if (p == PreTokenizer::gpt2) {
    const size_t j = s[i] == U' ' ? i + 1 : i;
    if (L(j)) return run(j, L);
    if (N(j)) return run(j, N);
    if (X(j)) return run(j, X);
    if (j != i) {  // the space alone did not start a piece: try without it
      if (L(i)) return run(i, L);
    }
  } else {
    if (L(i)) return run(i, L);
    if (!is_nl(s[i]) && !L(i) && !N(i) && L(i + 1)) return run(i + 1, L);
    if (N(i)) {
      if (p == PreTokenizer::qwen2) return i + 1;
      size_t k = i;
      while (k < i + 3 && N(k)) ++k;
      return k;
    }
    if (s[i] == U' ' && X(i + 1)) return run(run(i + 1, X), [&](size_t k) { return k < n && is_nl(s[k]); });
    if (X(i)) return run(run(i, X), [&](size_t k) { return k < n && is_nl(s[k]); });
    // \s*[\r\n]+ : up to the last newline of the whitespace run
    const size_t e = run(i, S);
    for (size_t k = e; k > i; --k)
      if (is_nl(s[k - 1])) return k;
  }
  // \s+(?!\S) then \s+
  const size_t e = run(i, S);
  if (e > i) {
    if (e == n) return e;
    if (e - i >= 2) return e - 1;
    return e;
  }
  return i;
}

std::string nfc(std::string_view text) {
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* n = icu::Normalizer2::getNFCInstance(err);
  if (U_FAILURE(err)) return std::string(text);
  icu::UnicodeString u = icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  if (n->isNormalized(u, err) && U_SUCCESS(err)) return std::string(text);
  err = U_ZERO_ERROR;
  icu::UnicodeString out = n->normalize(u, err);
  if (U_FAILURE(err)) return std::string(text);
  std::string r;
  out.toUTF8String(r);
  return r;
}

Expected<PreTokenizer> pre_from_pattern(const std::string& pattern, const std::string& name) {
  if (pattern == kQwen2Pattern) return PreTokenizer::qwen2;
  if (pattern == kLlama3Pattern) return PreTokenizer::llama3;
  if (pattern == kGpt2Pattern) return PreTokenizer::gpt2;
  return error(ErrorCode::unsupported, name, ": the pre-tokenization pattern '", pattern,
               "' is not one rlx implements (qwen2, llama-bpe, gpt2)");
}

// Finds the Split regex (or a ByteLevel with use_regex) inside a pre_tokenizer object, walking
// nested Sequences with an explicit stack (a file may nest them arbitrarily deep).
Status find_pattern(const nlohmann::json& root, const std::string& name, std::string& pattern, bool& byte_level_regex) {
  std::vector<const nlohmann::json*> todo{&root};
  int visited = 0;
  while (!todo.empty()) {
    const nlohmann::json& j = *todo.back();
    todo.pop_back();
    if (++visited > 4096) return error(ErrorCode::format_error, name, ": pre_tokenizer has more than 4096 parts");
    if (j.is_array()) {
      for (auto it = j.rbegin(); it != j.rend(); ++it) todo.push_back(&*it);
      continue;
    }
    if (!j.is_object()) continue;
    const json::Fields f(j, name + ": pre_tokenizer");
    std::string type;
    RLX_TRY(f.read("type", type));
    if (type == "Split") {
      RLX_ASSIGN_OR_RETURN(std::optional<json::Fields> p, f.object("pattern"));
      if (p) RLX_TRY(p->read("Regex", pattern));
    }
    bool use_regex = true;
    RLX_TRY(f.read("use_regex", use_regex));
    if (type == "ByteLevel" && use_regex) byte_level_regex = true;
    if (f.has("pretokenizers")) todo.push_back(&j["pretokenizers"]);
  }
  return Status::ok();
}

}  // namespace

std::vector<std::string> pre_tokenize(std::string_view text, PreTokenizer p) {
  std::vector<char32_t> cps = utf8_decode(text);
  std::vector<std::string> out;
  size_t i = 0;
  while (i < cps.size()) {
    size_t e = match_at(cps, i, p);
    if (e <= i) e = i + 1;  // not reachable with these patterns; keep the character as a piece
    out.push_back(utf8_encode(std::vector<char32_t>(cps.begin() + i, cps.begin() + e)));
    i = e;
  }
  return out;
}

Status BpeTokenizer::finish(const std::string& name) {
  vocab_.clear();
  for (size_t i = 0; i < tokens_.size(); ++i)
    if (!tokens_[i].empty()) vocab_.emplace(tokens_[i], static_cast<int64_t>(i));
  merge_rank_.clear();
  for (size_t r = 0; r < merges_.size(); ++r)
    merge_rank_.emplace(merges_[r].first + " " + merges_[r].second, static_cast<int32_t>(r));
  const ByteMap& bm = byte_map();
  for (int b = 0; b < 256; ++b)
    if (!vocab_.count(bm.utf8[b]))
      return error(ErrorCode::format_error, name, ": the vocabulary lacks the byte token for byte ", b,
                   " (not a byte-level BPE tokenizer)");
  std::sort(specials_.begin(), specials_.end(), [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  auto find = [&](const char* t) -> int64_t {
    auto it = vocab_.find(t);
    return it == vocab_.end() ? -1 : it->second;
  };
  if (eos_id < 0) eos_id = find("<|endoftext|>");
  if (pad_id < 0) pad_id = eos_id;
  return Status::ok();
}

Expected<BpeTokenizer> BpeTokenizer::from_json_file(const std::string& path) {
  RLX_ASSIGN_OR_RETURN(std::string text, read_regular_file(path, uint64_t{1} << 30));
  return from_json(text, path);
}

Expected<BpeTokenizer> BpeTokenizer::from_json(std::string_view text, const std::string& name) {
  RLX_ASSIGN_OR_RETURN(nlohmann::json j, json::parse_object(text, name));
  const json::Fields file(j, name);
  RLX_ASSIGN_OR_RETURN(std::optional<json::Fields> model, file.object("model"));
  if (!model) return error(ErrorCode::format_error, name, ": no 'model' object");
  const auto& m = model->json();
  std::string type = "BPE";
  RLX_TRY(model->read("type", type));
  if (type != "BPE") return error(ErrorCode::unsupported, name, ": model.type is '", type.substr(0, 40), "', expected BPE");
  RLX_ASSIGN_OR_RETURN(std::optional<json::Fields> vocab, model->object("vocab"));
  if (!vocab) return error(ErrorCode::format_error, name, ": model.vocab must be an object");
  {
    // fields of a BPE model that rlx does not use, checked as Hugging Face's tokenizers check
    // them: a file that library refuses is refused here too
    std::string text_field;
    bool flag = false;
    double number = 0;
    for (const char* k : {"unk_token", "continuing_subword_prefix", "end_of_word_suffix"}) RLX_TRY(model->read(k, text_field));
    for (const char* k : {"fuse_unk", "byte_fallback"}) RLX_TRY(model->read(k, flag));
    RLX_TRY(model->read("dropout", number));
  }
  BpeTokenizer t;
  int64_t max_id = -1;
  for (const auto& [tok, id] : m["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > (int64_t{1} << 24))
      return error(ErrorCode::format_error, name, ": model.vocab['", tok, "'] is not a valid id");
    max_id = std::max(max_id, id.get<int64_t>());
  }
  std::vector<std::pair<std::string, int64_t>> added;
  RLX_ASSIGN_OR_RETURN(const nlohmann::json* added_tokens, file.array("added_tokens"));
  if (added_tokens) {
    for (const auto& a : *added_tokens) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
          !a["content"].is_string() || a["id"].get<int64_t>() < 0 || a["id"].get<int64_t>() > (int64_t{1} << 24))
        return error(ErrorCode::format_error, name, ": an added_tokens entry lacks a valid id or content");
      added.emplace_back(a["content"].get<std::string>(), a["id"].get<int64_t>());
      max_id = std::max(max_id, a["id"].get<int64_t>());
    }
  }
  t.tokens_.assign(static_cast<size_t>(max_id + 1), "");
  t.types_.assign(static_cast<size_t>(max_id + 1), 1);
  for (const auto& [tok, id] : m["vocab"].items()) t.tokens_[id.get<int64_t>()] = tok;
  for (const auto& [content, id] : added) {
    t.tokens_[id] = content;
    t.types_[id] = 3;
    if (!content.empty()) t.specials_.emplace_back(content, id);
  }
  RLX_ASSIGN_OR_RETURN(const nlohmann::json* merges, model->array("merges"));
  if (merges) {
    for (const auto& e : *merges) {
      if (e.is_string()) {
        const std::string s = e.get<std::string>();
        const size_t sp = s.find(' ');
        if (sp == std::string::npos || sp == 0 || sp + 1 >= s.size())
          return error(ErrorCode::format_error, name, ": merge '", s, "' is not two tokens separated by a space");
        t.merges_.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
        t.merges_.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
      } else {
        return error(ErrorCode::format_error, name, ": a merge is neither \"a b\" nor [a, b]");
      }
    }
  }
  RLX_TRY(model->read("ignore_merges", t.ignore_merges_));
  std::string pattern;
  bool byte_level_regex = false;
  if (file.has("pre_tokenizer")) RLX_TRY(find_pattern(j["pre_tokenizer"], name, pattern, byte_level_regex));
  if (!pattern.empty()) {
    RLX_ASSIGN_OR_RETURN(t.pre_, pre_from_pattern(pattern, name));
  } else if (byte_level_regex) {
    t.pre_ = PreTokenizer::gpt2;
  } else {
    return error(ErrorCode::unsupported, name, ": the pre_tokenizer has no Split pattern nor a ByteLevel regex");
  }
  // NFC, alone or inside a Sequence's normalizers
  RLX_ASSIGN_OR_RETURN(std::optional<json::Fields> norm, file.object("normalizer"));
  if (norm) {
    std::string ntype;
    RLX_TRY(norm->read("type", ntype));
    if (ntype == "NFC") t.nfc_ = true;
    RLX_ASSIGN_OR_RETURN(const nlohmann::json* parts, norm->array("normalizers"));
    if (parts)
      for (const auto& e : *parts) {
        if (!e.is_object()) continue;
        std::string ptype;
        RLX_TRY(json::Fields(e, name + ": normalizer").read("type", ptype));
        if (ptype == "NFC") t.nfc_ = true;
      }
  }
  RLX_TRY(t.finish(name));
  return t;
}

Expected<BpeTokenizer> BpeTokenizer::from_gguf(const gguf::File& f) {
  RLX_ASSIGN_OR_RETURN(std::string model, f.get_string("tokenizer.ggml.model"));
  if (model != "gpt2")
    return error(ErrorCode::unsupported, f.name, ": tokenizer.ggml.model is '", model, "', rlx reads byte-level BPE ('gpt2')");
  BpeTokenizer t;
  RLX_ASSIGN_OR_RETURN(t.tokens_, f.get_array<std::string>("tokenizer.ggml.tokens"));
  t.types_.assign(t.tokens_.size(), 1);
  if (f.find("tokenizer.ggml.token_type")) {
    RLX_ASSIGN_OR_RETURN(std::vector<int32_t> types, f.get_array<int32_t>("tokenizer.ggml.token_type"));
    if (types.size() != t.tokens_.size())
      return error(ErrorCode::format_error, f.name, ": tokenizer.ggml.token_type has ", types.size(), " entries for ",
                   t.tokens_.size(), " tokens");
    t.types_ = types;
  }
  for (size_t i = 0; i < t.tokens_.size(); ++i)
    if ((t.types_[i] == 3 || t.types_[i] == 4) && !t.tokens_[i].empty())
      t.specials_.emplace_back(t.tokens_[i], static_cast<int64_t>(i));
  if (f.find("tokenizer.ggml.merges")) {
    RLX_ASSIGN_OR_RETURN(std::vector<std::string> merges, f.get_array<std::string>("tokenizer.ggml.merges"));
    for (const std::string& s : merges) {
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || sp == 0 || sp + 1 >= s.size())
        return error(ErrorCode::format_error, f.name, ": tokenizer.ggml.merges entry '", s, "' is not two tokens");
      t.merges_.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    }
  }
  std::string pre = "gpt2";
  if (f.find("tokenizer.ggml.pre")) {
    RLX_ASSIGN_OR_RETURN(pre, f.get_string("tokenizer.ggml.pre"));
  }
  if (pre == "qwen2") {
    t.pre_ = PreTokenizer::qwen2;
    t.nfc_ = true;
  } else if (pre == "llama-bpe" || pre == "llama3") {
    t.pre_ = PreTokenizer::llama3;
    t.ignore_merges_ = true;
  } else if (pre == "gpt2" || pre == "default") {
    t.pre_ = PreTokenizer::gpt2;
  } else {
    return error(ErrorCode::unsupported, f.name, ": tokenizer.ggml.pre '", pre, "' is not one rlx implements (qwen2, llama-bpe, gpt2)");
  }
  auto id = [&](const char* key, int64_t& out) -> Status {
    if (!f.find(key)) return Status::ok();
    RLX_ASSIGN_OR_RETURN(out, f.get_int(key));
    if (out < 0 || out >= static_cast<int64_t>(t.tokens_.size()))
      return error(ErrorCode::format_error, f.name, ": ", key, " = ", out, " is outside the vocabulary");
    return Status::ok();
  };
  RLX_TRY(id("tokenizer.ggml.eos_token_id", t.eos_id));
  RLX_TRY(id("tokenizer.ggml.bos_token_id", t.bos_id));
  RLX_TRY(id("tokenizer.ggml.padding_token_id", t.pad_id));
  RLX_TRY(t.finish(f.name));
  return t;
}

Expected<BpeTokenizer> BpeTokenizer::load(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return from_json_file(path + "/tokenizer.json");
  if (path.size() > 5 && path.substr(path.size() - 5) == ".json") return from_json_file(path);
  RLX_ASSIGN_OR_RETURN(gguf::File f, gguf::load(path));
  return from_gguf(f);
}

void BpeTokenizer::bpe(const std::string& piece, std::vector<int64_t>& out) const {
  const ByteMap& bm = byte_map();
  std::string mapped;
  std::vector<std::string> sym;
  for (unsigned char c : piece) {
    sym.push_back(bm.utf8[c]);
    mapped += bm.utf8[c];
  }
  if (ignore_merges_) {
    auto it = vocab_.find(mapped);
    if (it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  while (sym.size() > 1) {
    int32_t best = INT32_MAX;
    for (size_t i = 0; i + 1 < sym.size(); ++i) {
      auto it = merge_rank_.find(sym[i] + " " + sym[i + 1]);
      if (it != merge_rank_.end() && it->second < best) best = it->second;
    }
    if (best == INT32_MAX) break;
    const auto& [a, b] = merges_[best];
    std::vector<std::string> next;
    for (size_t i = 0; i < sym.size(); ++i) {
      if (i + 1 < sym.size() && sym[i] == a && sym[i + 1] == b) {
        next.push_back(a + b);
        ++i;
      } else {
        next.push_back(sym[i]);
      }
    }
    sym.swap(next);
  }
  for (const std::string& s : sym) {
    auto it = vocab_.find(s);
    if (it != vocab_.end()) {
      out.push_back(it->second);
    } else {
      // a merge result missing from the vocabulary: fall back to its characters' byte tokens
      for (char32_t cp : utf8_decode(s)) {
        auto b = bm.to_byte.find(cp);
        if (b != bm.to_byte.end()) out.push_back(vocab_.at(bm.utf8[b->second]));
      }
    }
  }
}

void BpeTokenizer::split_pieces(std::string_view text, std::vector<std::string>& pieces) const {
  const std::string norm = nfc_ ? nfc(text) : std::string(text);
  for (std::string& p : pre_tokenize(norm, pre_)) pieces.push_back(std::move(p));
}

std::vector<int64_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<int64_t> out;
  size_t start = 0, i = 0;
  auto flush = [&](size_t end) {
    if (end > start) {
      std::vector<std::string> pieces;
      split_pieces(text.substr(start, end - start), pieces);
      for (const std::string& p : pieces) bpe(p, out);
    }
  };
  while (i < text.size()) {
    bool hit = false;
    for (const auto& [content, id] : specials_) {
      if (text.compare(i, content.size(), content) == 0) {
        flush(i);
        out.push_back(id);
        i += content.size();
        start = i;
        hit = true;
        break;
      }
    }
    if (!hit) ++i;
  }
  flush(text.size());
  return out;
}

std::string BpeTokenizer::token_bytes(int64_t id) const {
  if (id < 0 || id >= vocab_size()) return "";
  if (is_special(id)) return tokens_[id];
  const ByteMap& bm = byte_map();
  std::string out;
  for (char32_t cp : utf8_decode(tokens_[id])) {
    auto b = bm.to_byte.find(cp);
    if (b != bm.to_byte.end()) {
      out.push_back(static_cast<char>(b->second));
    } else {
      utf8_append(out, cp);
    }
  }
  return out;
}

std::string BpeTokenizer::decode(std::span<const int64_t> ids) const {
  std::string out;
  for (int64_t id : ids) out += token_bytes(id);
  return out;
}

std::optional<int64_t> BpeTokenizer::token_id(std::string_view token) const {
  auto it = vocab_.find(std::string(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

bool BpeTokenizer::is_special(int64_t id) const {
  return id >= 0 && id < static_cast<int64_t>(types_.size()) && (types_[id] == 3 || types_[id] == 4);
}

std::vector<std::pair<std::string, gguf::Value>> BpeTokenizer::to_gguf_metadata() const {
  std::vector<std::pair<std::string, gguf::Value>> md;
  md.emplace_back("tokenizer.ggml.model", gguf::Value::string("gpt2"));
  const char* pre = pre_ == PreTokenizer::qwen2 ? "qwen2" : pre_ == PreTokenizer::llama3 ? "llama-bpe" : "gpt2";
  md.emplace_back("tokenizer.ggml.pre", gguf::Value::string(pre));
  md.emplace_back("tokenizer.ggml.tokens", gguf::Value::array(tokens_));
  md.emplace_back("tokenizer.ggml.token_type", gguf::Value::array(types_));
  std::vector<std::string> merges;
  merges.reserve(merges_.size());
  for (const auto& [a, b] : merges_) merges.push_back(a + " " + b);
  md.emplace_back("tokenizer.ggml.merges", gguf::Value::array(merges));
  if (eos_id >= 0) md.emplace_back("tokenizer.ggml.eos_token_id", gguf::Value::u32(static_cast<uint32_t>(eos_id)));
  if (bos_id >= 0) md.emplace_back("tokenizer.ggml.bos_token_id", gguf::Value::u32(static_cast<uint32_t>(bos_id)));
  if (pad_id >= 0) md.emplace_back("tokenizer.ggml.padding_token_id", gguf::Value::u32(static_cast<uint32_t>(pad_id)));
  md.emplace_back("tokenizer.ggml.add_bos_token", gguf::Value::boolean(false));
  return md;
}

// ---------------------------------------------------------------------------------------
// A synthetic tokenizer

namespace {

constexpr std::string_view kCorpus =
    "The quick brown fox jumps over the lazy dog. A language model predicts the next token from the "
    "tokens before it, and a tokenizer turns text into those tokens. Byte pair encoding starts from "
    "single bytes and merges the most frequent pairs, so common words become one token while rare "
    "words are spelled out in pieces. This is a small test of the generation program: it reads a "
    "prompt, runs the model over it once, and then produces one token at a time, reusing the keys and "
    "values it has already computed. Numbers such as 2024, 3.14 and 1000000 are split into digits. "
    "Once upon a time there was a little model that wanted to write stories about the sea, the sky, "
    "the mountains and the people who lived in the small village by the river. Every morning it "
    "would wake up, read the news, and try to answer questions about science, history, music and "
    "computers. int main() { return 0; } def hello(name): print(f\"Hello, {name}!\") "
    "Hello world! How are you today? I'm fine, thanks. We'll see what they've done. "
    "In the beginning the engineers measured the speed of the program in tokens per second, and "
    "they compared it with other programs running on the same machine with the same threads.";

}  // namespace

Status write_synthetic_bpe_tokenizer(const std::string& path, int64_t vocab_size, uint64_t seed) {
  const int64_t n_special = 3;
  if (vocab_size < 256 + n_special)
    return error(ErrorCode::invalid_argument, "a byte-level tokenizer needs at least ", 256 + n_special, " tokens, got ",
                 vocab_size);
  const ByteMap& bm = byte_map();
  std::vector<std::string> tokens;
  std::set<std::string> have;
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(bm.utf8[b]);
    have.insert(bm.utf8[b]);
  }
  const int64_t n_merges = vocab_size - n_special - 256;
  std::vector<std::pair<std::string, std::string>> merges;
  // 1. learned merges: classic BPE training on the built-in text
  std::map<std::vector<std::string>, int64_t> words;
  for (const std::string& piece : pre_tokenize(kCorpus, PreTokenizer::qwen2)) {
    std::vector<std::string> w;
    for (unsigned char c : piece) w.push_back(bm.utf8[c]);
    ++words[w];
  }
  while (static_cast<int64_t>(merges.size()) < n_merges) {
    std::map<std::pair<std::string, std::string>, int64_t> pairs;
    for (const auto& [w, n] : words)
      for (size_t i = 0; i + 1 < w.size(); ++i) pairs[{w[i], w[i + 1]}] += n;
    std::pair<std::string, std::string> best;
    int64_t best_n = 1;
    for (const auto& [p, n] : pairs)
      if (n > best_n && !have.count(p.first + p.second)) {
        best = p;
        best_n = n;
      }
    if (best_n < 2) break;
    merges.push_back(best);
    have.insert(best.first + best.second);
    tokens.push_back(best.first + best.second);
    std::map<std::vector<std::string>, int64_t> next;
    for (const auto& [w, n] : words) {
      std::vector<std::string> m;
      for (size_t i = 0; i < w.size(); ++i) {
        if (i + 1 < w.size() && w[i] == best.first && w[i + 1] == best.second) {
          m.push_back(best.first + best.second);
          ++i;
        } else {
          m.push_back(w[i]);
        }
      }
      next[m] += n;
    }
    words.swap(next);
  }
  // 2. generated merges: a random existing token followed by a printable byte or short token
  std::mt19937_64 rng(seed);
  std::vector<std::string> shortish(tokens.begin() + '!', tokens.begin() + '~' + 1);
  while (static_cast<int64_t>(merges.size()) < n_merges) {
    const bool learned = tokens.size() > 256 && rng() % 4 != 0;
    const std::string a = learned ? tokens[256 + rng() % (tokens.size() - 256)] : shortish[rng() % shortish.size()];
    const std::string b = (rng() % 3 == 0 && tokens.size() > 256) ? tokens[256 + rng() % (tokens.size() - 256)]
                                                                  : shortish[rng() % shortish.size()];
    if (a.size() + b.size() > 24 || have.count(a + b)) continue;
    merges.emplace_back(a, b);
    have.insert(a + b);
    tokens.push_back(a + b);
  }
  nlohmann::json vocab = nlohmann::json::object();
  for (size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = static_cast<int64_t>(i);
  nlohmann::json jm = nlohmann::json::array();
  for (const auto& [a, b] : merges) jm.push_back(a + " " + b);
  nlohmann::json added = nlohmann::json::array();
  int64_t id = static_cast<int64_t>(tokens.size());
  for (const char* s : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"})
    added.push_back({{"id", id++}, {"content", s}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", false}, {"special", true}});
  nlohmann::json j = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"Regex", std::string(kQwen2Pattern)}}}, {"behavior", "Isolated"}, {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}}}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", jm}}}};
  std::ofstream f(path, std::ios::binary);
  f << j.dump(1) << "\n";
  if (!f) return error(ErrorCode::io_error, "cannot write ", path);
  return Status::ok();
}

}  // namespace rlx::text
