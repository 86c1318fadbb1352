#include "models/text/spm.h"

#include <algorithm>
#include <cstdio>
#include <queue>

#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

#include "support/json_fields.h"

namespace rlx::text::spm {
namespace {

// The length of the UTF-8 character starting at s[i], clamped to what is left. A byte that
// does not start a valid sequence is a character of its own (it becomes a byte token), so
// invalid text never stops encoding.
size_t char_len(std::string_view s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
  if (i + n > s.size()) return 1;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 1;
  return n;
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  std::string r;
  size_t pos = 0;
  for (size_t f; (f = s.find(from, pos)) != std::string::npos; pos = f + from.size()) {
    r.append(s, pos, f - pos);
    r.append(to);
  }
  r.append(s, pos, std::string::npos);
  s.swap(r);
}

std::string nfc(const std::string& text) {
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* n = icu::Normalizer2::getNFCInstance(err);
  if (U_FAILURE(err)) return text;
  icu::UnicodeString u = icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  icu::UnicodeString out = n->normalize(u, err);
  if (U_FAILURE(err)) return text;
  std::string r;
  out.toUTF8String(r);
  return r;
}

// A JSON object's "pattern": {"String": s} is supported; {"Regex": r} is refused, naming it.
Status literal_pattern(const json::Fields& f, const std::string& what, std::string& out) {
  RLX_ASSIGN_OR_RETURN(std::optional<json::Fields> p, f.object("pattern"));
  if (!p) return error(ErrorCode::format_error, f.where(), ": ", what, " has no pattern");
  if (p->has("Regex")) {
    std::string r;
    RLX_TRY(p->read("Regex", r));
    return error(ErrorCode::unsupported, f.where(), ": ", what, " with the Regex pattern '", r.substr(0, 200),
                 "' is not supported for a SentencePiece-style tokenizer (only String patterns)");
  }
  RLX_TRY(p->read("String", out));
  if (out.empty()) return error(ErrorCode::format_error, f.where(), ": ", what, " has an empty String pattern");
  return Status::ok();
}

// Flattens a component that may be a Sequence (of Sequences) into its parts, without recursion:
// a hostile file may nest them arbitrarily deep.
Status flatten(const nlohmann::json& root, const char* list_key, const std::string& where,
               std::vector<const nlohmann::json*>& parts) {
  std::vector<const nlohmann::json*> todo{&root};
  int visited = 0;
  while (!todo.empty()) {
    const nlohmann::json* j = todo.back();
    todo.pop_back();
    if (++visited > 4096) return error(ErrorCode::format_error, where, " has more than 4096 parts");
    if (j->is_null()) continue;
    if (!j->is_object()) return error(ErrorCode::format_error, where, " must be an object, got ", json::type_phrase(*j));
    const json::Fields f(*j, where);
    std::string type;
    RLX_TRY(f.read("type", type));
    if (type == "Sequence") {
      RLX_ASSIGN_OR_RETURN(const nlohmann::json* list, f.array(list_key));
      if (!list) return error(ErrorCode::format_error, where, ": a Sequence without '", list_key, "'");
      for (auto it = list->rbegin(); it != list->rend(); ++it) todo.push_back(&*it);
      continue;
    }
    parts.push_back(j);
  }
  return Status::ok();
}

Status parse_normalizer(const nlohmann::json& j, const std::string& where, Model& m) {
  std::vector<const nlohmann::json*> parts;
  RLX_TRY(flatten(j, "normalizers", where, parts));
  for (const nlohmann::json* p : parts) {
    const json::Fields f(*p, where);
    std::string type;
    RLX_TRY(f.read("type", type));
    NormOp op;
    if (type == "Prepend") {
      op.kind = NormOp::prepend;
      RLX_TRY(f.read("prepend", op.a));
    } else if (type == "Replace") {
      op.kind = NormOp::replace;
      RLX_TRY(literal_pattern(f, "Replace", op.a));
      RLX_TRY(f.read("content", op.b));
    } else if (type == "NFC") {
      op.kind = NormOp::nfc;
    } else {
      return error(ErrorCode::unsupported, where, ": the normalizer '", type.substr(0, 60),
                   "' is not supported for a SentencePiece-style tokenizer (Prepend, Replace, NFC, Sequence)");
    }
    m.norm.push_back(std::move(op));
  }
  return Status::ok();
}

Status parse_pre_tokenizer(const nlohmann::json& j, const std::string& where, Model& m) {
  std::vector<const nlohmann::json*> parts;
  RLX_TRY(flatten(j, "pretokenizers", where, parts));
  for (const nlohmann::json* p : parts) {
    const json::Fields f(*p, where);
    std::string type;
    RLX_TRY(f.read("type", type));
    PreOp op;
    if (type == "Metaspace") {
      op.kind = PreOp::metaspace;
      op.replacement = std::string(kSpace);
      RLX_TRY(f.read("replacement", op.replacement));
      if (op.replacement.empty()) return error(ErrorCode::format_error, where, ": Metaspace.replacement is empty");
      std::string scheme;
      bool add_prefix_space = true;  // the form before prepend_scheme existed
      RLX_TRY(f.read("add_prefix_space", add_prefix_space));
      scheme = add_prefix_space ? "always" : "never";
      RLX_TRY(f.read("prepend_scheme", scheme));
      if (scheme == "first") op.prepend_scheme = 1;
      else if (scheme == "always") op.prepend_scheme = 2;
      else if (scheme == "never") op.prepend_scheme = 0;
      else return error(ErrorCode::unsupported, where, ": Metaspace.prepend_scheme '", scheme.substr(0, 40), "' is not first, always or never");
      RLX_TRY(f.read("split", op.split_words));
    } else if (type == "Split") {
      op.kind = PreOp::split;
      RLX_TRY(literal_pattern(f, "Split", op.pattern));
      std::string behavior = "Isolated";
      RLX_TRY(f.read("behavior", behavior));
      if (behavior == "Removed") op.behavior = PreOp::removed;
      else if (behavior == "Isolated") op.behavior = PreOp::isolated;
      else if (behavior == "MergedWithPrevious") op.behavior = PreOp::merged_with_previous;
      else if (behavior == "MergedWithNext") op.behavior = PreOp::merged_with_next;
      else if (behavior == "Contiguous") op.behavior = PreOp::contiguous;
      else return error(ErrorCode::unsupported, where, ": Split.behavior '", behavior.substr(0, 40), "' is unknown");
      RLX_TRY(f.read("invert", op.invert));
      if (op.invert) return error(ErrorCode::unsupported, where, ": Split with invert: true is not supported");
    } else {
      return error(ErrorCode::unsupported, where, ": the pre-tokenizer '", type.substr(0, 60),
                   "' is not supported for a SentencePiece-style tokenizer (Metaspace, Split with a String pattern, Sequence)");
    }
    m.pre.push_back(std::move(op));
  }
  return Status::ok();
}

Status parse_decoder(const nlohmann::json& j, const std::string& where, Model& m) {
  std::vector<const nlohmann::json*> parts;
  RLX_TRY(flatten(j, "decoders", where, parts));
  for (const nlohmann::json* p : parts) {
    const json::Fields f(*p, where);
    std::string type;
    RLX_TRY(f.read("type", type));
    DecOp op;
    if (type == "Replace") {
      op.kind = DecOp::replace;
      RLX_TRY(literal_pattern(f, "Replace", op.a));
      RLX_TRY(f.read("content", op.b));
    } else if (type == "ByteFallback") {
      op.kind = DecOp::byte_fallback;
    } else if (type == "Fuse") {
      op.kind = DecOp::fuse;
    } else if (type == "Strip") {
      op.kind = DecOp::strip;
      RLX_TRY(f.read("content", op.a));
      if (op.a.empty()) return error(ErrorCode::format_error, where, ": Strip.content is empty");
      int64_t start = 0, stop = 0;
      RLX_TRY(f.read("start", start, 0, 1 << 20));
      RLX_TRY(f.read("stop", stop, 0, 1 << 20));
      op.start = static_cast<int>(start);
      op.stop = static_cast<int>(stop);
    } else if (type == "Metaspace") {
      op.kind = DecOp::metaspace;
      op.a = std::string(kSpace);
      RLX_TRY(f.read("replacement", op.a));
      std::string scheme = "always";
      bool add_prefix_space = true;
      RLX_TRY(f.read("add_prefix_space", add_prefix_space));
      if (!add_prefix_space) scheme = "never";
      RLX_TRY(f.read("prepend_scheme", scheme));
      op.strip_first = scheme != "never";
    } else {
      return error(ErrorCode::unsupported, where, ": the decoder '", type.substr(0, 60),
                   "' is not supported for a SentencePiece-style tokenizer (Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence)");
    }
    m.dec.push_back(std::move(op));
  }
  return Status::ok();
}

// Splits `s` at each occurrence of `pat` as Hugging Face's SplitDelimiterBehavior says.
void split_literal(const std::string& s, const std::string& pat, PreOp::Behavior b, std::vector<std::string>& out) {
  std::vector<std::pair<size_t, size_t>> spans;  // (start, end), delimiter or not alternating
  std::vector<bool> is_delim;
  size_t pos = 0;
  for (size_t f; (f = s.find(pat, pos)) != std::string::npos; pos = f + pat.size()) {
    if (f > pos) {
      spans.emplace_back(pos, f);
      is_delim.push_back(false);
    }
    spans.emplace_back(f, f + pat.size());
    is_delim.push_back(true);
  }
  if (pos < s.size()) {
    spans.emplace_back(pos, s.size());
    is_delim.push_back(false);
  }
  std::vector<std::string> pieces;
  std::string pending;  // merged_with_next: delimiters waiting for what follows
  for (size_t k = 0; k < spans.size(); ++k) {
    const std::string part = s.substr(spans[k].first, spans[k].second - spans[k].first);
    if (!is_delim[k]) {
      pieces.push_back(pending + part);
      pending.clear();
      continue;
    }
    switch (b) {
      case PreOp::removed:
        break;
      case PreOp::isolated:
        pieces.push_back(part);
        break;
      case PreOp::contiguous:
        if (k > 0 && is_delim[k - 1]) pieces.back() += part;
        else pieces.push_back(part);
        break;
      case PreOp::merged_with_previous:
        if (k > 0 && !is_delim[k - 1]) pieces.back() += part;
        else pieces.push_back(part);
        break;
      case PreOp::merged_with_next:
        if (!pending.empty()) {
          pieces.push_back(pending);
          pending.clear();
        }
        pending = part;
        break;
    }
  }
  if (!pending.empty()) pieces.push_back(pending);
  for (std::string& p : pieces)
    if (!p.empty()) out.push_back(std::move(p));
}

}  // namespace

// Through a heap with stale entries skipped, so a long word costs n log n, not n^2.
void merge_word(const Model& m, std::string_view w, std::vector<int64_t>& out) {
  const auto& vocab = m.vocab;
  if (m.ignore_merges) {
    auto it = vocab.find(std::string(w));
    if (it != vocab.end()) {
      out.push_back(it->second);
      return;
    }
  }
  struct Sym {
    int64_t id;
    int32_t prev, next;
    bool live;
  };
  std::vector<Sym> sym;
  int64_t unk_run = -1;  // fuse_unk: an unk waiting to be added
  auto add = [&](int64_t id) {
    const int32_t n = static_cast<int32_t>(sym.size());
    sym.push_back({id, n - 1, n + 1, true});
  };
  for (size_t i = 0; i < w.size();) {
    const size_t n = char_len(w, i);
    auto it = vocab.find(std::string(w.substr(i, n)));
    if (it != vocab.end()) {
      if (unk_run >= 0) add(unk_run), unk_run = -1;
      add(it->second);
    } else {
      bool bytes = m.byte_fallback;
      for (size_t k = 0; bytes && k < n; ++k) bytes = m.byte_ids[static_cast<unsigned char>(w[i + k])] >= 0;
      if (bytes) {
        if (unk_run >= 0) add(unk_run), unk_run = -1;
        for (size_t k = 0; k < n; ++k) add(m.byte_ids[static_cast<unsigned char>(w[i + k])]);
      } else if (m.unk_id >= 0) {
        if (unk_run >= 0 && !m.fuse_unk) add(unk_run);
        unk_run = m.unk_id;
      }
      // neither byte tokens nor an unk token: the character is dropped, as Hugging Face does
    }
    i += n;
  }
  if (unk_run >= 0) add(unk_run);
  if (sym.empty()) return;
  sym.back().next = -1;
  struct Cand {
    int32_t rank, pos, new_id;
    bool operator<(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  auto lookup = [&](int64_t a, int64_t b) {
    return m.merges.find(static_cast<uint64_t>(a) << 32 | static_cast<uint64_t>(b));
  };
  std::priority_queue<Cand> q;
  for (size_t i = 0; i + 1 < sym.size(); ++i) {
    auto it = lookup(sym[i].id, sym[i + 1].id);
    if (it != m.merges.end()) q.push({it->second.first, static_cast<int32_t>(i), it->second.second});
  }
  while (!q.empty()) {
    const Cand c = q.top();
    q.pop();
    Sym& s = sym[c.pos];
    if (!s.live || s.next < 0) continue;
    Sym& r = sym[s.next];
    auto it = lookup(s.id, r.id);
    if (it == m.merges.end() || it->second.second != c.new_id) continue;  // stale
    s.id = c.new_id;
    r.live = false;
    s.next = r.next;
    if (s.next >= 0) sym[s.next].prev = c.pos;
    if (s.prev >= 0) {
      auto p = lookup(sym[s.prev].id, s.id);
      if (p != m.merges.end()) q.push({p->second.first, s.prev, p->second.second});
    }
    if (s.next >= 0) {
      auto p = lookup(s.id, sym[s.next].id);
      if (p != m.merges.end()) q.push({p->second.first, c.pos, p->second.second});
    }
  }
  for (const Sym& s : sym)
    if (s.live) out.push_back(s.id);
}

namespace {

// llama.cpp's SPM rule on one stretch: characters, then any adjacent pair whose text is a token
// merges, highest score first and leftmost among equals; what is not a token becomes bytes.
void merge_by_score(const Model& m, std::string_view w, std::vector<int64_t>& out) {
  const auto& vocab = m.vocab;
  struct Sym {
    int32_t prev, next;
    size_t start, n;
  };
  std::vector<Sym> sym;
  for (size_t i = 0; i < w.size();) {
    const size_t n = char_len(w, i);
    const int32_t k = static_cast<int32_t>(sym.size());
    sym.push_back({k - 1, k + 1, i, n});
    i += n;
  }
  if (sym.empty()) return;
  sym.back().next = -1;
  struct Bigram {
    int32_t left, right;
    float score;
    size_t size;
    bool operator<(const Bigram& o) const { return score != o.score ? score < o.score : left > o.left; }
  };
  std::priority_queue<Bigram> q;
  auto try_add = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    auto it = vocab.find(std::string(w.substr(sym[l].start, sym[l].n + sym[r].n)));
    if (it == vocab.end() || it->second >= static_cast<int64_t>(m.scores.size())) return;
    q.push({l, r, m.scores[it->second], sym[l].n + sym[r].n});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(sym.size()); ++i) try_add(i - 1, i);
  while (!q.empty()) {
    const Bigram b = q.top();
    q.pop();
    Sym& l = sym[b.left];
    Sym& r = sym[b.right];
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;  // stale
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
  for (int32_t i = 0; i >= 0 && i < static_cast<int32_t>(sym.size()); i = sym[i].next) {
    const std::string text(w.substr(sym[i].start, sym[i].n));
    auto it = vocab.find(text);
    if (it != vocab.end()) {
      out.push_back(it->second);
      continue;
    }
    // only unmerged characters reach here (every merge result is a token)
    for (unsigned char c : text) {
      int64_t id = m.byte_ids[c];
      if (id < 0) {
        auto one = vocab.find(std::string(1, static_cast<char>(c)));
        id = one != vocab.end() ? one->second : m.unk_id;
      }
      if (id >= 0) out.push_back(id);
    }
  }
}

}  // namespace

void find_byte_tokens(Model& m) {
  const auto& vocab = m.vocab;
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    auto it = vocab.find(name);
    m.byte_ids[b] = it == vocab.end() ? -1 : it->second;
  }
}

Status parse_json(const nlohmann::json& root, const std::string& name, Model& m) {
  const auto& vocab = m.vocab;
  const json::Fields file(root, name);
  const json::Fields model(root["model"], name + ": model");
  RLX_TRY(model.read("byte_fallback", m.byte_fallback));
  RLX_TRY(model.read("fuse_unk", m.fuse_unk));
  RLX_TRY(model.read("ignore_merges", m.ignore_merges));
  std::string unk;
  RLX_TRY(model.read("unk_token", unk));
  if (!unk.empty()) {
    auto it = vocab.find(unk);
    if (it == vocab.end())
      return error(ErrorCode::format_error, name, ": model.unk_token '", unk.substr(0, 60), "' is not in model.vocab");
    m.unk_id = it->second;
  }
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    std::string s;
    RLX_TRY(model.read(k, s));
    if (!s.empty())
      return error(ErrorCode::unsupported, name, ": model.", k, " '", s.substr(0, 40),
                   "' is not supported for a SentencePiece-style tokenizer");
  }
  double dropout = 0;
  RLX_TRY(model.read("dropout", dropout));
  if (dropout > 0) return error(ErrorCode::unsupported, name, ": model.dropout ", dropout, " (random merges) is not supported");
  find_byte_tokens(m);
  RLX_ASSIGN_OR_RETURN(const nlohmann::json* merges, model.array("merges"));
  if (merges) {
    int32_t rank = 0;
    for (const auto& e : *merges) {
      std::string a, b;
      if (e.is_string()) {
        // "a b": SentencePiece vocabularies use "▁" for spaces, so one space separates the two
        const std::string s = e.get<std::string>();
        const size_t sp = s.find(' ');
        if (sp == std::string::npos || sp == 0 || sp + 1 >= s.size())
          return error(ErrorCode::format_error, name, ": model.merges[", rank, "] '", s.substr(0, 60), "' is not two tokens separated by a space");
        a = s.substr(0, sp);
        b = s.substr(sp + 1);
      } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
        a = e[0].get<std::string>();
        b = e[1].get<std::string>();
      } else {
        return error(ErrorCode::format_error, name, ": model.merges[", rank, "] is neither \"a b\" nor [a, b]");
      }
      auto ia = vocab.find(a), ib = vocab.find(b), ic = vocab.find(a + b);
      if (ia == vocab.end() || ib == vocab.end() || ic == vocab.end())
        return error(ErrorCode::format_error, name, ": model.merges[", rank, "] ('", a.substr(0, 40), "', '", b.substr(0, 40),
                     "') names a token, or makes one, that model.vocab lacks");
      // a later duplicate replaces an earlier one, as in Hugging Face's map
      m.merges[static_cast<uint64_t>(ia->second) << 32 | static_cast<uint64_t>(ib->second)] = {rank, static_cast<int32_t>(ic->second)};
      ++rank;
    }
  }
  if (file.has("normalizer")) RLX_TRY(parse_normalizer(root["normalizer"], name + ": normalizer", m));
  if (file.has("pre_tokenizer")) RLX_TRY(parse_pre_tokenizer(root["pre_tokenizer"], name + ": pre_tokenizer", m));
  if (file.has("decoder")) RLX_TRY(parse_decoder(root["decoder"], name + ": decoder", m));
  return Status::ok();
}

void gguf_pipeline(Model& m, bool add_space_prefix) {
  m.by_score = true;
  m.norm.clear();
  m.pre.clear();
  m.dec.clear();
  // llama.cpp prefixes a space to each stretch that begins the text or follows a special token,
  // which is every stretch between added tokens: Hugging Face's Prepend normalizer
  if (add_space_prefix) m.norm.push_back({NormOp::prepend, std::string(kSpace), ""});
  m.norm.push_back({NormOp::replace, " ", std::string(kSpace)});
  m.dec.push_back({DecOp::replace, std::string(kSpace), " "});
  m.dec.push_back({DecOp::byte_fallback, "", ""});
  m.dec.push_back({DecOp::fuse, "", ""});
  if (add_space_prefix) {
    DecOp s{DecOp::strip, " ", ""};
    s.start = 1;
    m.dec.push_back(s);
  }
}

std::string normalize(const Model& m, std::string_view text) {
  std::string s(text);
  for (const NormOp& op : m.norm) {
    if (op.kind == NormOp::prepend) {
      if (!s.empty()) s.insert(0, op.a);
    } else if (op.kind == NormOp::replace) {
      replace_all(s, op.a, op.b);
    } else {
      s = nfc(s);
    }
  }
  return s;
}

void encode_normalized(const Model& m, std::string_view text, bool at_start, std::vector<int64_t>& out) {
  std::vector<std::string> pieces{std::string(text)};
  for (const PreOp& op : m.pre) {
    std::vector<std::string> next;
    for (size_t k = 0; k < pieces.size(); ++k) {
      std::string& p = pieces[k];
      if (op.kind == PreOp::metaspace) {
        replace_all(p, " ", op.replacement);
        // "first": only the piece at offset 0 of the original text
        const bool prepend = op.prepend_scheme == 2 || (op.prepend_scheme == 1 && at_start && k == 0);
        if (prepend && p.compare(0, op.replacement.size(), op.replacement) != 0) p.insert(0, op.replacement);
        if (op.split_words) {
          split_literal(p, op.replacement, PreOp::merged_with_next, next);
        } else if (!p.empty()) {
          next.push_back(std::move(p));
        }
      } else {
        split_literal(p, op.pattern, op.behavior, next);
      }
    }
    pieces.swap(next);
  }
  for (const std::string& p : pieces) {
    if (p.empty()) continue;
    if (m.by_score) merge_by_score(m, p, out);
    else merge_word(m, p, out);
  }
}

std::string decode(const Model& m, std::vector<std::string> pieces, bool streaming) {
  auto byte_of = [](const std::string& t) -> int {
    if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
    int v = 0;
    for (int k = 3; k < 5; ++k) {
      const char c = t[k];
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) return -1;
      v = v * 16 + d;
    }
    return v;
  };
  for (const DecOp& op : m.dec) {
    switch (op.kind) {
      case DecOp::replace:
        for (std::string& p : pieces) replace_all(p, op.a, op.b);
        break;
      case DecOp::byte_fallback:
        // byte tokens become their bytes (Hugging Face writes U+FFFD for a run that is not
        // valid UTF-8; rlx keeps the bytes, so a stream can be reassembled)
        for (std::string& p : pieces) {
          const int b = byte_of(p);
          if (b >= 0) p.assign(1, static_cast<char>(b));
        }
        break;
      case DecOp::fuse: {
        std::string all;
        for (const std::string& p : pieces) all += p;
        pieces.assign(1, std::move(all));
        break;
      }
      case DecOp::strip:
        if (streaming) break;
        for (std::string& p : pieces) {
          for (int k = 0; k < op.start && p.compare(0, op.a.size(), op.a) == 0; ++k) p.erase(0, op.a.size());
          for (int k = 0; k < op.stop && p.size() >= op.a.size() && p.compare(p.size() - op.a.size(), op.a.size(), op.a) == 0; ++k)
            p.erase(p.size() - op.a.size());
        }
        break;
      case DecOp::metaspace:
        for (size_t k = 0; k < pieces.size(); ++k) {
          replace_all(pieces[k], op.a, " ");
          if (k == 0 && op.strip_first && !streaming && !pieces[k].empty() && pieces[k][0] == ' ') pieces[k].erase(0, 1);
        }
        break;
    }
  }
  std::string out;
  for (const std::string& p : pieces) out += p;
  return out;
}

std::vector<float> scores_from_merges(const Model& m, const std::vector<std::string>& tokens) {
  std::vector<int32_t> first(tokens.size(), INT32_MAX);
  for (const auto& [pair, rv] : m.merges)
    if (rv.second >= 0 && static_cast<size_t>(rv.second) < first.size()) first[rv.second] = std::min(first[rv.second], rv.first);
  std::vector<float> s(tokens.size(), 0.0f);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (first[i] != INT32_MAX) s[i] = -static_cast<float>(first[i]) - 1.0f;
    else if (!tokens[i].empty() && char_len(tokens[i], 0) < tokens[i].size()) s[i] = -1e9f;
  }
  return s;
}

}  // namespace rlx::text::spm
