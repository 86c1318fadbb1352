#include "bpe.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "rlx/mapped_file.h"
#include "support/json_fields.h"
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include "models/text/spm.h"
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
Status find_pattern(const nlohmann::json& root, const std::string& name, std::string& pattern, bool& byte_level_regex,
                    bool& has_byte_level) {
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
    if (type == "ByteLevel") has_byte_level = true;
    if (type == "ByteLevel" && use_regex) byte_level_regex = true;
    if (f.has("pretokenizers")) todo.push_back(&j["pretokenizers"]);
  }
  return Status::ok();
}

}  // namespace

const std::vector<std::string>& llama_cpp_control_texts() {
  static const std::vector<std::string> texts = {
      "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
      "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
      "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>"};
  return texts;
}

std::string_view pre_tokenizer_pattern(PreTokenizer p) {
  return p == PreTokenizer::qwen2 ? kQwen2Pattern : p == PreTokenizer::llama3 ? kLlama3Pattern : kGpt2Pattern;
}

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
  auto find = [&](std::initializer_list<const char*> names) -> int64_t {
    for (const char* n : names) {
      auto it = vocab_.find(n);
      if (it != vocab_.end()) return it->second;
    }
    return -1;
  };
  if (kind_ == TokenizerKind::byte_level) {
    const ByteMap& bm = byte_map();
    for (int b = 0; b < 256; ++b)
      if (!vocab_.count(bm.utf8[b]))
        return error(ErrorCode::format_error, name, ": the vocabulary lacks the byte token for byte ", b,
                     " (not a byte-level BPE tokenizer)");
    // the merges by token id; a merge naming or making a token the vocabulary lacks can never
    // apply (Hugging Face refuses such a file; rlx has always read it and skips the merge)
    auto bl = std::make_shared<spm::Model>();
    bl->vocab = vocab_;
    bl->byte_fallback = false;
    bl->ignore_merges = ignore_merges_;
    for (size_t r = 0; r < merges_.size(); ++r) {
      auto a = vocab_.find(merges_[r].first), b = vocab_.find(merges_[r].second),
           c = vocab_.find(merges_[r].first + merges_[r].second);
      if (a == vocab_.end() || b == vocab_.end() || c == vocab_.end()) continue;
      bl->merges[static_cast<uint64_t>(a->second) << 32 | static_cast<uint64_t>(b->second)] = {
          static_cast<int32_t>(r), static_cast<int32_t>(c->second)};
    }
    byte_level_ = std::move(bl);
    if (eos_id < 0) eos_id = find({"<|endoftext|>", "<|end_of_text|>"});
  } else {
    if (bos_id < 0) bos_id = find({"<s>", "<bos>"});
    if (eos_id < 0) eos_id = find({"</s>", "<eos>"});
  }
  if (!prefix_.empty()) bos_id = prefix_.front();
  if (!suffix_.empty()) eos_id = suffix_.back();
  if (pad_id < 0) pad_id = eos_id;
  return index_added(name);
}

Status BpeTokenizer::index_added(const std::string& name) {
  // normalized tokens are matched in normalized text, in their normalized form (Hugging Face
  // normalizes their content too: with a Prepend normalizer "foo" matches as "▁foo")
  by_first_byte_.assign(256, {});
  by_first_byte_normalized_.assign(256, {});
  match_.assign(added_.size(), "");
  decode_as_.clear();
  has_normalized_added_ = false;
  for (size_t i = 0; i < added_.size(); ++i) {
    const AddedToken& a = added_[i];
    if (a.content.empty()) continue;  // Hugging Face ignores empty added tokens
    if (a.id < 0 || a.id >= vocab_size())
      return error(ErrorCode::format_error, name, ": added token '", a.content.substr(0, 60), "' has id ", a.id, " outside the vocabulary");
    match_[i] = !a.normalized                            ? a.content
                : kind_ == TokenizerKind::sentencepiece ? spm::normalize(*spm_, a.content)
                : nfc_                                  ? nfc(a.content)
                                                        : a.content;
    if (match_[i].empty()) continue;
    // Hugging Face decodes such a token as its normalized form too ("▁foo" -> " foo")
    if (match_[i] != a.content) decode_as_.emplace(a.id, match_[i]);
    (a.normalized ? by_first_byte_normalized_ : by_first_byte_)[static_cast<unsigned char>(match_[i][0])].push_back(
        static_cast<int32_t>(i));
    has_normalized_added_ = has_normalized_added_ || a.normalized;
  }
  for (auto* index : {&by_first_byte_, &by_first_byte_normalized_})
    for (auto& list : *index)
      std::stable_sort(list.begin(), list.end(), [&](int32_t a, int32_t b) { return match_[a].size() > match_[b].size(); });
  return Status::ok();
}

Status BpeTokenizer::read_post_processor(const nlohmann::json& root, const std::string& name) {
  // walks nested Sequences with an explicit stack: a file may nest them arbitrarily deep
  std::vector<const nlohmann::json*> todo{&root};
  int visited = 0;
  const std::string where = name + ": post_processor";
  auto id_of = [&](const nlohmann::json& pair, const char* field) -> Expected<int64_t> {
    // RobertaProcessing / BertProcessing: "cls": ["<s>", 0]
    if (!pair.is_array() || pair.size() != 2 || !pair[1].is_number_integer() || pair[1].get<int64_t>() < 0 ||
        pair[1].get<int64_t>() >= vocab_size())
      return error(ErrorCode::format_error, where, ": '", field, "' must be [token, id] with an id in the vocabulary");
    return pair[1].get<int64_t>();
  };
  while (!todo.empty()) {
    const nlohmann::json& j = *todo.back();
    todo.pop_back();
    if (++visited > 4096) return error(ErrorCode::format_error, where, " has more than 4096 parts");
    if (j.is_null()) continue;
    if (!j.is_object()) return error(ErrorCode::format_error, where, " must be an object, got ", json::type_phrase(j));
    const json::Fields f(j, where);
    std::string type;
    RLX_TRY(f.read("type", type));
    if (type == "Sequence") {
      RLX_ASSIGN_OR_RETURN(const nlohmann::json* list, f.array("processors"));
      if (list)
        for (auto it = list->rbegin(); it != list->rend(); ++it) todo.push_back(&*it);
    } else if (type == "ByteLevel") {
      // offsets only
    } else if (type == "RobertaProcessing" || type == "BertProcessing") {
      if (!f.has("cls") || !f.has("sep")) return error(ErrorCode::format_error, where, ": ", type, " without cls and sep");
      RLX_ASSIGN_OR_RETURN(int64_t cls, id_of(j["cls"], "cls"));
      RLX_ASSIGN_OR_RETURN(int64_t sep, id_of(j["sep"], "sep"));
      prefix_ = {cls};
      suffix_ = {sep};
    } else if (type == "TemplateProcessing") {
      RLX_ASSIGN_OR_RETURN(const nlohmann::json* single, f.array("single"));
      RLX_ASSIGN_OR_RETURN(std::optional<json::Fields> specials, f.object("special_tokens"));
      if (!single) return error(ErrorCode::format_error, where, ": TemplateProcessing without 'single'");
      prefix_.clear();
      suffix_.clear();
      bool seen_a = false;
      for (const auto& item : *single) {
        if (item.is_object() && item.contains("Sequence")) {
          seen_a = true;
          continue;
        }
        if (!item.is_object() || !item.contains("SpecialToken") || !item["SpecialToken"].is_object())
          return error(ErrorCode::format_error, where, ": TemplateProcessing.single has an item that is neither Sequence nor SpecialToken");
        std::string sid;
        RLX_TRY(json::Fields(item["SpecialToken"], where + ": single").read("id", sid));
        if (!specials || !specials->json().contains(sid) || !specials->json()[sid].is_object())
          return error(ErrorCode::format_error, where, ": TemplateProcessing.special_tokens lacks '", sid.substr(0, 60), "'");
        RLX_ASSIGN_OR_RETURN(const nlohmann::json* ids,
                             json::Fields(specials->json()[sid], where + ": special_tokens." + sid).array("ids"));
        if (!ids) return error(ErrorCode::format_error, where, ": special_tokens['", sid.substr(0, 60), "'] has no ids");
        for (const auto& v : *ids) {
          if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= vocab_size())
            return error(ErrorCode::format_error, where, ": special_tokens['", sid.substr(0, 60), "'].ids holds an id outside the vocabulary");
          (seen_a ? suffix_ : prefix_).push_back(v.get<int64_t>());
        }
      }
    } else {
      return error(ErrorCode::unsupported, where, ": the post-processor '", type.substr(0, 60),
                   "' is not supported (TemplateProcessing, RobertaProcessing, BertProcessing, ByteLevel, Sequence)");
    }
  }
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
    // fields checked as Hugging Face's tokenizers checks them: a file that library refuses is
    // refused here too
    std::string text_field;
    bool flag = false;
    double number = 0;
    for (const char* k : {"unk_token", "continuing_subword_prefix", "end_of_word_suffix"}) RLX_TRY(model->read(k, text_field));
    for (const char* k : {"fuse_unk", "byte_fallback", "ignore_merges"}) RLX_TRY(model->read(k, flag));
    RLX_TRY(model->read("dropout", number));
  }
  BpeTokenizer t;
  int64_t max_id = -1;
  for (const auto& [tok, id] : m["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > (int64_t{1} << 24))
      return error(ErrorCode::format_error, name, ": model.vocab['", tok.substr(0, 60), "'] is not a valid id");
    max_id = std::max(max_id, id.get<int64_t>());
  }
  RLX_ASSIGN_OR_RETURN(const nlohmann::json* added_tokens, file.array("added_tokens"));
  if (added_tokens) {
    size_t k = 0;
    for (const auto& a : *added_tokens) {
      const std::string where = name + ": added_tokens[" + std::to_string(k++) + "]";
      if (!a.is_object()) return error(ErrorCode::format_error, where, " is not an object");
      const json::Fields f(a, where);
      AddedToken at;
      if (!f.has("id") || !f.has("content")) return error(ErrorCode::format_error, where, " lacks id or content");
      RLX_TRY(f.read("id", at.id, 0, int64_t{1} << 24));
      RLX_TRY(f.read("content", at.content));
      // Hugging Face's defaults: special false, normalized = !special
      at.special = false;
      RLX_TRY(f.read("special", at.special));
      at.normalized = !at.special;
      RLX_TRY(f.read("normalized", at.normalized));
      RLX_TRY(f.read("lstrip", at.lstrip));
      RLX_TRY(f.read("rstrip", at.rstrip));
      RLX_TRY(f.read("single_word", at.single_word));
      max_id = std::max(max_id, at.id);
      t.added_.push_back(std::move(at));
    }
  }
  t.tokens_.assign(static_cast<size_t>(max_id + 1), "");
  t.types_.assign(static_cast<size_t>(max_id + 1), 1);
  for (const auto& [tok, id] : m["vocab"].items()) t.tokens_[id.get<int64_t>()] = tok;
  for (const AddedToken& a : t.added_) {
    t.tokens_[a.id] = a.content;
    t.types_[a.id] = a.special ? 3 : 4;
  }
  std::string pattern;
  bool byte_level_regex = false, has_byte_level = false;
  if (file.has("pre_tokenizer")) RLX_TRY(find_pattern(j["pre_tokenizer"], name, pattern, byte_level_regex, has_byte_level));
  std::string decoder_type;
  if (j.contains("decoder") && j["decoder"].is_object()) RLX_TRY(json::Fields(j["decoder"], name + ": decoder").read("type", decoder_type));
  t.kind_ = has_byte_level || !pattern.empty() || decoder_type == "ByteLevel" ? TokenizerKind::byte_level
                                                                              : TokenizerKind::sentencepiece;
  if (t.kind_ == TokenizerKind::sentencepiece) {
    // the model's vocabulary without the added tokens: Hugging Face's BPE sees only that
    auto sp = std::make_shared<spm::Model>();
    for (const auto& [tok, id] : m["vocab"].items()) sp->vocab.emplace(tok, id.get<int64_t>());
    RLX_TRY(spm::parse_json(j, name, *sp));
    t.unk_id = sp->unk_id;
    for (int b = 0; b < 256; ++b)
      if (sp->byte_ids[b] >= 0 && t.types_[sp->byte_ids[b]] == 1) t.types_[sp->byte_ids[b]] = 6;
    if (t.unk_id >= 0) t.types_[t.unk_id] = 2;
    // llama.cpp's add_space_prefix when written to GGUF: the encoder prepends "▁"
    for (const spm::NormOp& op : sp->norm)
      if (op.kind == spm::NormOp::prepend && op.a == spm::kSpace) t.add_space_prefix_ = true;
    for (const spm::PreOp& op : sp->pre)
      if (op.kind == spm::PreOp::metaspace && op.prepend_scheme != 0) t.add_space_prefix_ = true;
    t.spm_ = std::move(sp);
  } else {
    RLX_ASSIGN_OR_RETURN(const nlohmann::json* merges, model->array("merges"));
    if (merges) {
      for (const auto& e : *merges) {
        if (e.is_string()) {
          const std::string s = e.get<std::string>();
          const size_t sp = s.find(' ');
          if (sp == std::string::npos || sp == 0 || sp + 1 >= s.size())
            return error(ErrorCode::format_error, name, ": merge '", s.substr(0, 60), "' is not two tokens separated by a space");
          t.merges_.emplace_back(s.substr(0, sp), s.substr(sp + 1));
        } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
          t.merges_.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
        } else {
          return error(ErrorCode::format_error, name, ": a merge is neither \"a b\" nor [a, b]");
        }
      }
    }
    RLX_TRY(model->read("ignore_merges", t.ignore_merges_));
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
  }
  if (file.has("post_processor")) RLX_TRY(t.read_post_processor(j["post_processor"], name));
  RLX_TRY(t.finish(name));
  return t;
}

namespace {

// tokenizer.ggml.token_type, checked against the token count.
Status read_types(const gguf::File& f, size_t n, std::vector<int32_t>& types) {
  types.assign(n, 1);
  if (!f.find("tokenizer.ggml.token_type")) return Status::ok();
  RLX_ASSIGN_OR_RETURN(types, f.get_array<int32_t>("tokenizer.ggml.token_type"));
  if (types.size() != n)
    return error(ErrorCode::format_error, f.name, ": tokenizer.ggml.token_type has ", types.size(), " entries for ", n, " tokens");
  return Status::ok();
}

// bos/eos/unk/padding ids and add_bos_token / add_eos_token.
Status read_ids(const gguf::File& f, int64_t n, int64_t* ids[4], bool& add_bos, bool& add_eos) {
  const char* keys[4] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id",
                         "tokenizer.ggml.padding_token_id"};
  for (int k = 0; k < 4; ++k) {
    if (!f.find(keys[k])) continue;
    RLX_ASSIGN_OR_RETURN(int64_t v, f.get_int(keys[k]));
    if (v < 0 || v >= n) return error(ErrorCode::format_error, f.name, ": ", keys[k], " = ", v, " is outside the vocabulary");
    *ids[k] = v;
  }
  if (f.find("tokenizer.ggml.add_bos_token")) {
    RLX_ASSIGN_OR_RETURN(add_bos, f.get_bool("tokenizer.ggml.add_bos_token"));
  }
  if (f.find("tokenizer.ggml.add_eos_token")) {
    RLX_ASSIGN_OR_RETURN(add_eos, f.get_bool("tokenizer.ggml.add_eos_token"));
  }
  return Status::ok();
}

// llama.cpp's override: tokens spelled like an end of generation become control tokens
// (except "</s>" in a vocabulary that has "<|tool_response>", Gemma 4's, where it is text).
void force_control(const std::vector<std::string>& tokens, std::vector<int32_t>& types) {
  std::unordered_map<std::string_view, size_t> where;
  for (size_t i = 0; i < tokens.size(); ++i) where.emplace(tokens[i], i);
  const bool gemma4 = where.count("<|tool_response>") > 0;
  for (const std::string& t : llama_cpp_control_texts()) {
    auto it = where.find(t);
    if (it == where.end() || (gemma4 && t == "</s>")) continue;
    types[it->second] = 3;
  }
}

// llama.cpp keys one tokenizer rule on the model's name, as GGUF has no field for it: in a
// model whose general.name says Phi-3, the whitespace after a special token is dropped
// (rstrip), except after <unk>, <s> and <|endoftext|>.
Status phi3_rstrip(const gguf::File& f, std::vector<AddedToken>& added) {
  if (!f.find("general.name")) return Status::ok();
  RLX_ASSIGN_OR_RETURN(std::string name, f.get_string("general.name"));
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (name.find("phi-3") == std::string::npos && name.find("phi3") == std::string::npos) return Status::ok();
  for (AddedToken& a : added)
    a.rstrip = a.content != "<unk>" && a.content != "<s>" && a.content != "<|endoftext|>";
  return Status::ok();
}

}  // namespace

Expected<BpeTokenizer> BpeTokenizer::sentencepiece_from_gguf(const gguf::File& f) {
  BpeTokenizer t;
  t.kind_ = TokenizerKind::sentencepiece;
  RLX_ASSIGN_OR_RETURN(t.tokens_, f.get_array<std::string>("tokenizer.ggml.tokens"));
  const size_t n = t.tokens_.size();
  if (n == 0 || n > (size_t{1} << 24)) return error(ErrorCode::format_error, f.name, ": tokenizer.ggml.tokens has ", n, " entries");
  RLX_TRY(read_types(f, n, t.types_));
  force_control(t.tokens_, t.types_);
  auto sp = std::make_shared<spm::Model>();
  sp->scores.assign(n, 0.0f);
  if (f.find("tokenizer.ggml.scores")) {
    RLX_ASSIGN_OR_RETURN(sp->scores, f.get_array<float>("tokenizer.ggml.scores"));
    if (sp->scores.size() != n)
      return error(ErrorCode::format_error, f.name, ": tokenizer.ggml.scores has ", sp->scores.size(), " entries for ", n, " tokens");
  }
  // llama.cpp's defaults for an SPM vocabulary
  t.bos_id = 1 < static_cast<int64_t>(n) ? 1 : -1;
  t.eos_id = 2 < static_cast<int64_t>(n) ? 2 : -1;
  t.unk_id = 0;
  bool add_bos = true, add_eos = false;
  int64_t* ids[4] = {&t.bos_id, &t.eos_id, &t.unk_id, &t.pad_id};
  RLX_TRY(read_ids(f, static_cast<int64_t>(n), ids, add_bos, add_eos));
  t.add_space_prefix_ = true;
  if (f.find("tokenizer.ggml.add_space_prefix")) {
    RLX_ASSIGN_OR_RETURN(t.add_space_prefix_, f.get_bool("tokenizer.ggml.add_space_prefix"));
  }
  if (add_bos && t.bos_id >= 0) t.prefix_ = {t.bos_id};
  if (add_eos && t.eos_id >= 0) t.suffix_ = {t.eos_id};
  // llama.cpp matches unknown, control and user-defined tokens in text
  for (size_t i = 0; i < n; ++i)
    if ((t.types_[i] == 2 || t.types_[i] == 3 || t.types_[i] == 4) && !t.tokens_[i].empty())
      t.added_.push_back({t.tokens_[i], static_cast<int64_t>(i), t.types_[i] != 4, false, false, false, false});
  RLX_TRY(phi3_rstrip(f, t.added_));
  for (size_t i = 0; i < n; ++i) sp->vocab.emplace(t.tokens_[i], static_cast<int64_t>(i));
  spm::find_byte_tokens(*sp);
  sp->unk_id = t.unk_id;
  spm::gguf_pipeline(*sp, t.add_space_prefix_);
  t.spm_ = std::move(sp);
  RLX_TRY(t.finish(f.name));
  return t;
}

Expected<BpeTokenizer> BpeTokenizer::from_gguf(const gguf::File& f) {
  RLX_ASSIGN_OR_RETURN(std::string model, f.get_string("tokenizer.ggml.model"));
  if (model == "llama") return sentencepiece_from_gguf(f);
  if (model != "gpt2")
    return error(ErrorCode::unsupported, f.name, ": tokenizer.ggml.model is '", model.substr(0, 40),
                 "', rlx reads byte-level BPE ('gpt2') and SentencePiece-style BPE ('llama')");
  BpeTokenizer t;
  RLX_ASSIGN_OR_RETURN(t.tokens_, f.get_array<std::string>("tokenizer.ggml.tokens"));
  RLX_TRY(read_types(f, t.tokens_.size(), t.types_));
  force_control(t.tokens_, t.types_);
  for (size_t i = 0; i < t.tokens_.size(); ++i)
    if ((t.types_[i] == 3 || t.types_[i] == 4) && !t.tokens_[i].empty())
      t.added_.push_back({t.tokens_[i], static_cast<int64_t>(i), t.types_[i] == 3, false, false, false, false});
  RLX_TRY(phi3_rstrip(f, t.added_));
  if (f.find("tokenizer.ggml.merges")) {
    RLX_ASSIGN_OR_RETURN(std::vector<std::string> merges, f.get_array<std::string>("tokenizer.ggml.merges"));
    for (const std::string& s : merges) {
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || sp == 0 || sp + 1 >= s.size())
        return error(ErrorCode::format_error, f.name, ": tokenizer.ggml.merges entry '", s.substr(0, 60), "' is not two tokens");
      t.merges_.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    }
  }
  std::string pre = "gpt2";
  if (f.find("tokenizer.ggml.pre")) {
    RLX_ASSIGN_OR_RETURN(pre, f.get_string("tokenizer.ggml.pre"));
  }
  if (pre == "qwen2") {
    // no NFC: llama.cpp does not normalize (Hugging Face's Qwen files do; text that NFC
    // changes tokenizes differently from tokenizer.json, as it does in llama.cpp)
    t.pre_ = PreTokenizer::qwen2;
  } else if (pre == "llama-bpe" || pre == "llama3") {
    t.pre_ = PreTokenizer::llama3;
    t.ignore_merges_ = true;
  } else if (pre == "gpt2" || pre == "default") {
    t.pre_ = PreTokenizer::gpt2;
  } else {
    return error(ErrorCode::unsupported, f.name, ": tokenizer.ggml.pre '", pre.substr(0, 40), "' is not one rlx implements (qwen2, llama-bpe, gpt2)");
  }
  // rlx's default when the file does not say: nothing added (llama.cpp converters always write
  // add_bos_token for byte-level vocabularies)
  bool add_bos = false, add_eos = false;
  int64_t* ids[4] = {&t.bos_id, &t.eos_id, &t.unk_id, &t.pad_id};
  RLX_TRY(read_ids(f, static_cast<int64_t>(t.tokens_.size()), ids, add_bos, add_eos));
  if (add_bos && t.bos_id >= 0) t.prefix_ = {t.bos_id};
  if (add_eos && t.eos_id >= 0) t.suffix_ = {t.eos_id};
  RLX_TRY(t.finish(f.name));
  return t;
}

Expected<BpeTokenizer> BpeTokenizer::load(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    RLX_ASSIGN_OR_RETURN(BpeTokenizer t, from_json_file(path + "/tokenizer.json"));
    // tokenizer_config.json names the bos / eos tokens ("eos_token": "<end_of_turn>" or
    // {"content": ...}); the post-processor's own tokens stay as they are
    const std::string cfg_path = path + "/tokenizer_config.json";
    if (stat(cfg_path.c_str(), &st) == 0) {
      RLX_ASSIGN_OR_RETURN(nlohmann::json cfg, json::read_object_file(cfg_path, uint64_t{64} << 20));
      for (const char* key : {"bos_token", "eos_token"}) {
        if (!cfg.contains(key)) continue;
        const nlohmann::json& v = cfg[key];
        std::string content;
        if (v.is_string()) content = v.get<std::string>();
        else if (v.is_object() && v.contains("content") && v["content"].is_string()) content = v["content"].get<std::string>();
        else if (!v.is_null()) return error(ErrorCode::format_error, cfg_path, ": '", key, "' must be a string or {\"content\": ...}");
        if (content.empty()) continue;
        // a name tokenizer.json lacks is skipped: transformers would add it as a new token, which
        // the model's embeddings do not have, so nothing could generate or read it anyway
        auto id = t.token_id(content);
        if (!id) continue;
        if (std::string_view(key) == "eos_token") t.eos_id = *id;
        else if (t.prefix_.empty()) t.bos_id = *id;
      }
    }
    return t;
  }
  if (path.size() > 5 && path.substr(path.size() - 5) == ".json") return from_json_file(path);
  RLX_ASSIGN_OR_RETURN(gguf::File f, gguf::load(path));
  return from_gguf(f);
}

void BpeTokenizer::bpe(const std::string& piece, std::vector<int64_t>& out) const {
  const ByteMap& bm = byte_map();
  std::string mapped;
  for (unsigned char c : piece) mapped += bm.utf8[c];
  spm::merge_word(*byte_level_, mapped, out);
}

namespace {

bool is_word_char(char32_t c) { return is_letter(c) || is_number(c) || c == U'_'; }

// The code point that ends at byte `end` of `s` (0 at the start), and its first byte.
char32_t cp_before(std::string_view s, size_t end, size_t& start) {
  if (end == 0) {
    start = 0;
    return 0;
  }
  start = end - 1;
  while (start > 0 && end - start < 4 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  std::vector<char32_t> cps = utf8_decode(s.substr(start, end - start));
  if (cps.size() != 1) start = end - 1;  // not one valid character: step one byte
  return cps.size() == 1 ? cps[0] : 0xFFFD;
}

// The code point that starts at byte `pos` of `s` (0 at the end), and its length in bytes.
char32_t cp_at(std::string_view s, size_t pos, size_t& len) {
  if (pos >= s.size()) {
    len = 0;
    return 0;
  }
  const unsigned char c = static_cast<unsigned char>(s[pos]);
  len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
  len = std::min(len, s.size() - pos);
  std::vector<char32_t> cps = utf8_decode(s.substr(pos, len));
  if (cps.size() != 1) len = 1;
  return cps.size() == 1 ? cps[0] : 0xFFFD;
}

// Cuts the added tokens whose normalized flag is `normalized` out of `text`, leftmost first and
// the longest at a position (as Hugging Face's leftmost-longest automaton), applying their
// flags; calls on_text(begin, end) for the text between and on_token(id) for each token.
template <class OnText, class OnToken>
void cut_added(std::string_view text, const std::vector<AddedToken>& added, const std::vector<std::string>& match,
               const std::vector<std::vector<int32_t>>& index, OnText on_text, OnToken on_token) {
  size_t seg = 0, i = 0;
  while (i < text.size() && !index.empty()) {
    const AddedToken* hit = nullptr;
    size_t hit_len = 0;
    for (int32_t k : index[static_cast<unsigned char>(text[i])]) {
      if (text.compare(i, match[k].size(), match[k]) == 0) {
        hit = &added[k];
        hit_len = match[k].size();
        break;
      }
    }
    if (!hit) {
      ++i;
      continue;
    }
    size_t s = i, e = i + hit_len, len = 0, at = 0;
    if (hit->single_word &&
        ((s > 0 && is_word_char(cp_before(text, s, at))) || (e < text.size() && is_word_char(cp_at(text, e, len))))) {
      i = e;  // the match stays text, and matching goes on after it
      continue;
    }
    if (hit->lstrip)
      while (s > seg && is_whitespace(cp_before(text, s, at))) s = at;
    if (hit->rstrip)
      while (e < text.size() && is_whitespace(cp_at(text, e, len))) e += len;
    on_text(seg, s);
    on_token(hit->id);
    seg = i = e;
  }
  on_text(seg, text.size());
}

}  // namespace

void BpeTokenizer::encode_stretch(std::string_view text, bool at_start, std::vector<int64_t>& out) const {
  if (text.empty()) return;
  const std::string norm =
      kind_ == TokenizerKind::sentencepiece ? spm::normalize(*spm_, text) : nfc_ ? nfc(text) : std::string(text);
  auto model = [&](size_t b, size_t e) {
    if (e <= b) return;
    const std::string_view piece = std::string_view(norm).substr(b, e - b);
    if (kind_ == TokenizerKind::sentencepiece) {
      spm::encode_normalized(*spm_, piece, at_start && b == 0, out);
    } else {
      for (const std::string& p : pre_tokenize(piece, pre_)) bpe(p, out);
    }
  };
  if (!has_normalized_added_) return model(0, norm.size());
  cut_added(norm, added_, match_, by_first_byte_normalized_, model, [&](int64_t id) { out.push_back(id); });
}

std::vector<int64_t> BpeTokenizer::encode(std::string_view text) const { return encode(text, false); }

std::vector<int64_t> BpeTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int64_t> out;
  if (add_special_tokens) out = prefix_;
  cut_added(
      text, added_, match_, by_first_byte_,
      [&](size_t b, size_t e) { encode_stretch(text.substr(b, e - b), b == 0, out); },
      [&](int64_t id) { out.push_back(id); });
  if (add_special_tokens) out.insert(out.end(), suffix_.begin(), suffix_.end());
  return out;
}

std::string BpeTokenizer::token_bytes(int64_t id) const {
  if (id < 0 || id >= vocab_size()) return "";
  if (kind_ == TokenizerKind::sentencepiece) {
    // control tokens as written; user-defined ones (Gemma's runs of "▁", say) through the
    // decoder like any other token, as llama.cpp's token_to_piece does
    if (types_[id] == 3) return tokens_[id];
    auto it = decode_as_.find(id);
    return spm::decode(*spm_, {it != decode_as_.end() ? it->second : tokens_[id]}, true);
  }
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
  if (kind_ == TokenizerKind::sentencepiece) {
    // Hugging Face runs the decoder over every token's text, added tokens included
    std::vector<std::string> pieces;
    for (int64_t id : ids) {
      if (id < 0 || id >= vocab_size()) continue;
      auto it = decode_as_.find(id);
      pieces.push_back(it != decode_as_.end() ? it->second : tokens_[id]);
    }
    return spm::decode(*spm_, std::move(pieces), false);
  }
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
  if (kind_ == TokenizerKind::sentencepiece) {
    md.emplace_back("tokenizer.ggml.model", gguf::Value::string("llama"));
    md.emplace_back("tokenizer.ggml.tokens", gguf::Value::array(tokens_));
    md.emplace_back("tokenizer.ggml.scores",
                    gguf::Value::array(spm_->by_score ? spm_->scores : spm::scores_from_merges(*spm_, tokens_)));
    md.emplace_back("tokenizer.ggml.token_type", gguf::Value::array(types_));
    md.emplace_back("tokenizer.ggml.add_space_prefix", gguf::Value::boolean(add_space_prefix_));
    if (unk_id >= 0) md.emplace_back("tokenizer.ggml.unknown_token_id", gguf::Value::u32(static_cast<uint32_t>(unk_id)));
  } else {
    md.emplace_back("tokenizer.ggml.model", gguf::Value::string("gpt2"));
    const char* pre = pre_ == PreTokenizer::qwen2 ? "qwen2" : pre_ == PreTokenizer::llama3 ? "llama-bpe" : "gpt2";
    md.emplace_back("tokenizer.ggml.pre", gguf::Value::string(pre));
    md.emplace_back("tokenizer.ggml.tokens", gguf::Value::array(tokens_));
    md.emplace_back("tokenizer.ggml.token_type", gguf::Value::array(types_));
    std::vector<std::string> merges;
    merges.reserve(merges_.size());
    for (const auto& [a, b] : merges_) merges.push_back(a + " " + b);
    md.emplace_back("tokenizer.ggml.merges", gguf::Value::array(merges));
  }
  if (eos_id >= 0) md.emplace_back("tokenizer.ggml.eos_token_id", gguf::Value::u32(static_cast<uint32_t>(eos_id)));
  if (bos_id >= 0) md.emplace_back("tokenizer.ggml.bos_token_id", gguf::Value::u32(static_cast<uint32_t>(bos_id)));
  if (pad_id >= 0) md.emplace_back("tokenizer.ggml.padding_token_id", gguf::Value::u32(static_cast<uint32_t>(pad_id)));
  // GGUF says only "BOS" / "EOS": a post-processor adding other tokens cannot be written
  md.emplace_back("tokenizer.ggml.add_bos_token", gguf::Value::boolean(!prefix_.empty()));
  md.emplace_back("tokenizer.ggml.add_eos_token", gguf::Value::boolean(!suffix_.empty()));
  return md;
}


}  // namespace rlx::text
