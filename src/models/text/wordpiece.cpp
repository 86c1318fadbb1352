#include "wordpiece.h"

#include <sys/stat.h>

#include <sstream>

#include <nlohmann/json.hpp>

#include "rlx/mapped_file.h"
#include "support/json_fields.h"
#include "unicode.h"

namespace rlx::text {

Tensor Encoding::ids_tensor() const { return Tensor::from_vector(DType::i64, {batch, seq}, ids); }
Tensor Encoding::mask_tensor() const { return Tensor::from_vector(DType::i64, {batch, seq}, attention_mask); }
Tensor Encoding::type_tensor() const { return Tensor::from_vector(DType::i64, {batch, seq}, token_type_ids); }

Expected<WordPieceTokenizer> WordPieceTokenizer::from_tokens(std::vector<std::string> tokens, WordPieceOptions o) {
  WordPieceTokenizer t;
  t.opt_ = std::move(o);
  t.tokens_ = std::move(tokens);
  for (size_t i = 0; i < t.tokens_.size(); ++i) t.index_.emplace(t.tokens_[i], static_cast<int64_t>(i));
  auto need = [&](const std::string& s, int64_t& id) -> Status {
    id = t.id_of(s);
    if (id < 0) return error(ErrorCode::format_error, "the vocabulary has no ", s, " token");
    return Status::ok();
  };
  RLX_TRY(need(t.opt_.unk, t.unk_id_));
  RLX_TRY(need(t.opt_.cls, t.cls_id_));
  RLX_TRY(need(t.opt_.sep, t.sep_id_));
  RLX_TRY(need(t.opt_.pad, t.pad_id_));
  return t;
}

Expected<WordPieceTokenizer> WordPieceTokenizer::from_vocab_file(const std::string& path, WordPieceOptions o) {
  // a vocabulary of millions of tokens is a few tens of MiB
  RLX_ASSIGN_OR_RETURN(std::string text, read_regular_file(path, uint64_t{1} << 30));
  std::istringstream f(text);
  std::vector<std::string> tokens;
  std::string line;
  while (std::getline(f, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    tokens.push_back(line);
  }
  auto t = from_tokens(std::move(tokens), std::move(o));
  if (!t) return t.status().with_context(path);
  return t;
}

Expected<WordPieceTokenizer> WordPieceTokenizer::from_tokenizer_json(const std::string& path) {
  RLX_ASSIGN_OR_RETURN(std::string text, read_regular_file(path, uint64_t{1} << 30));
  return from_tokenizer_json_text(text, path);
}

Expected<WordPieceTokenizer> WordPieceTokenizer::from_tokenizer_json_text(std::string_view text, const std::string& path) {
  RLX_ASSIGN_OR_RETURN(nlohmann::json j, json::parse_object(text, path));
  const json::Fields file(j, path);
  RLX_ASSIGN_OR_RETURN(std::optional<json::Fields> model, file.object("model"));
  std::string type;
  if (model) RLX_TRY(model->read("type", type));
  if (!model || type != "WordPiece")
    return error(ErrorCode::format_error, path, ": not a WordPiece tokenizer (model.type must be WordPiece)");
  RLX_ASSIGN_OR_RETURN(std::optional<json::Fields> vocab, model->object("vocab"));
  if (!vocab) return error(ErrorCode::format_error, path, ": model.vocab must be an object");
  std::vector<std::string> tokens(vocab->json().size());
  for (const auto& [tok, id] : vocab->json().items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<uint64_t>() >= tokens.size())
      return error(ErrorCode::format_error, path, ": token '", tok.substr(0, 40), "' has a bad id");
    tokens[id.get<size_t>()] = tok;
  }
  WordPieceOptions o;
  RLX_TRY(model->read("unk_token", o.unk));
  RLX_TRY(model->read("continuing_subword_prefix", o.continuation_prefix));
  RLX_TRY(model->read("max_input_chars_per_word", o.max_chars_per_word, 1, 1 << 20));
  RLX_ASSIGN_OR_RETURN(std::optional<json::Fields> norm, file.object("normalizer"));
  if (norm) {
    RLX_TRY(norm->read("lowercase", o.lower_case));
    RLX_TRY(norm->read("handle_chinese_chars", o.handle_chinese_chars));
    o.strip_accents = o.lower_case;  // BertNormalizer's default: strip accents when lowercasing
    RLX_TRY(norm->read("strip_accents", o.strip_accents));
  }
  auto t = from_tokens(std::move(tokens), std::move(o));
  if (!t) return t.status().with_context(path);
  return t;
}

Expected<WordPieceTokenizer> WordPieceTokenizer::from_folder(const std::string& dir) {
  struct stat st;
  if (stat((dir + "/tokenizer.json").c_str(), &st) == 0) return from_tokenizer_json(dir + "/tokenizer.json");
  WordPieceOptions o;
  const std::string cfg = dir + "/tokenizer_config.json";
  if (stat(cfg.c_str(), &st) == 0) {
    RLX_ASSIGN_OR_RETURN(nlohmann::json j, json::read_object_file(cfg));
    const json::Fields f(j, cfg);
    RLX_TRY(f.read("do_lower_case", o.lower_case));
    // not used (the model's max_position_embeddings bounds a sequence), but typed; a number,
    // since files without a limit write 1e30
    double max_length = 0;
    RLX_TRY(f.read("model_max_length", max_length));
    o.strip_accents = o.lower_case;
    RLX_TRY(f.read("strip_accents", o.strip_accents));
  }
  return from_vocab_file(dir + "/vocab.txt", std::move(o));
}

int64_t WordPieceTokenizer::id_of(const std::string& token) const {
  auto it = index_.find(token);
  return it == index_.end() ? -1 : it->second;
}

std::vector<std::string> WordPieceTokenizer::basic_split(const std::string& text) const {
  std::vector<char32_t> cps = utf8_decode(text);
  // clean, and isolate CJK ideographs
  std::vector<char32_t> clean;
  for (char32_t c : cps) {
    if (c == 0 || c == 0xFFFD || is_control(c)) continue;
    if (is_whitespace(c)) {
      clean.push_back(' ');
    } else if (opt_.handle_chinese_chars && is_cjk(c)) {
      clean.push_back(' ');
      clean.push_back(c);
      clean.push_back(' ');
    } else {
      clean.push_back(c);
    }
  }
  std::vector<std::string> words;
  std::vector<char32_t> word;
  auto flush_word = [&] {
    if (word.empty()) return;
    std::vector<char32_t> w = word;
    word.clear();
    if (opt_.lower_case)
      for (char32_t& c : w) c = to_lower(c);
    if (opt_.strip_accents) {
      std::vector<char32_t> d = nfd(w);
      w.clear();
      for (char32_t c : d)
        if (!is_mark_nonspacing(c)) w.push_back(c);
    }
    // split off punctuation, each mark its own word
    std::vector<char32_t> cur;
    for (char32_t c : w) {
      if (is_punctuation(c)) {
        if (!cur.empty()) words.push_back(utf8_encode(cur));
        cur.clear();
        words.push_back(utf8_encode({c}));
      } else {
        cur.push_back(c);
      }
    }
    if (!cur.empty()) words.push_back(utf8_encode(cur));
  };
  for (char32_t c : clean) {
    if (c == ' ') {
      flush_word();
    } else {
      word.push_back(c);
    }
  }
  flush_word();
  return words;
}

void WordPieceTokenizer::word_pieces(const std::string& word, std::vector<std::string>& out) const {
  std::vector<char32_t> cps = utf8_decode(word);
  if (static_cast<int>(cps.size()) > opt_.max_chars_per_word) {
    out.push_back(opt_.unk);
    return;
  }
  std::vector<std::string> pieces;
  size_t start = 0;
  while (start < cps.size()) {
    size_t end = cps.size();
    std::string found;
    while (start < end) {
      std::string sub = utf8_encode(std::vector<char32_t>(cps.begin() + static_cast<long>(start), cps.begin() + static_cast<long>(end)));
      if (start > 0) sub = opt_.continuation_prefix + sub;
      if (index_.count(sub)) {
        found = std::move(sub);
        break;
      }
      --end;
    }
    if (found.empty()) {
      out.push_back(opt_.unk);
      return;
    }
    pieces.push_back(std::move(found));
    start = end;
  }
  out.insert(out.end(), pieces.begin(), pieces.end());
}

std::vector<std::string> WordPieceTokenizer::tokenize(const std::string& text) const {
  // Special tokens typed in the text ("[SEP]") are those tokens, as in Hugging Face's
  // tokenizers, which match them in the raw text (case and all) before normalizing the rest.
  std::vector<std::string> specials;
  for (const std::string* s : {&opt_.unk, &opt_.cls, &opt_.sep, &opt_.pad})
    if (!s->empty()) specials.push_back(*s);
  if (id_of("[MASK]") >= 0) specials.push_back("[MASK]");
  std::vector<std::string> out;
  size_t p = 0;
  while (p <= text.size()) {
    size_t at = std::string::npos, len = 0;
    for (const std::string& s : specials) {
      const size_t f = text.find(s, p);
      if (f < at || (f == at && s.size() > len)) {
        at = f;
        len = s.size();
      }
    }
    for (const std::string& w : basic_split(text.substr(p, at == std::string::npos ? std::string::npos : at - p)))
      word_pieces(w, out);
    if (at == std::string::npos) break;
    out.push_back(text.substr(at, len));
    p = at + len;
  }
  return out;
}

std::vector<int64_t> WordPieceTokenizer::ids_of(const std::vector<std::string>& pieces) const {
  std::vector<int64_t> ids;
  ids.reserve(pieces.size());
  for (const std::string& p : pieces) {
    int64_t id = id_of(p);
    ids.push_back(id < 0 ? unk_id_ : id);
  }
  return ids;
}

Encoding WordPieceTokenizer::encode_batch(const std::vector<std::string>& texts, int64_t max_len, int64_t pad_to) const {
  Encoding e;
  e.batch = static_cast<int64_t>(texts.size());
  std::vector<std::vector<int64_t>> rows;
  int64_t longest = 0;
  for (const std::string& t : texts) {
    std::vector<int64_t> ids = ids_of(tokenize(t));
    const int64_t room = std::max<int64_t>(0, max_len - 2);
    if (static_cast<int64_t>(ids.size()) > room) ids.resize(static_cast<size_t>(room));
    ids.insert(ids.begin(), cls_id_);
    ids.push_back(sep_id_);
    longest = std::max<int64_t>(longest, static_cast<int64_t>(ids.size()));
    rows.push_back(std::move(ids));
  }
  e.seq = std::max(longest, pad_to);
  for (const auto& r : rows) {
    e.lengths.push_back(static_cast<int64_t>(r.size()));
    for (int64_t j = 0; j < e.seq; ++j) {
      bool real = j < static_cast<int64_t>(r.size());
      e.ids.push_back(real ? r[static_cast<size_t>(j)] : pad_id_);
      e.attention_mask.push_back(real ? 1 : 0);
      e.token_type_ids.push_back(0);
    }
  }
  return e;
}

}  // namespace rlx::text
