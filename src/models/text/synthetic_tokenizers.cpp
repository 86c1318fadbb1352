// Synthetic tokenizers for random-weight test models: a byte-level BPE one (Qwen's layout)
// and a SentencePiece-style one (Llama 2's or Gemma's layout), both learned from a small
// built-in text and padded with generated merges to the vocabulary size asked for.
#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "models/text/bpe.h"
#include "models/text/spm.h"
#include "models/text/unicode.h"

namespace rlx::text {
namespace {

// GPT-2's bytes_to_unicode, as UTF-8 strings indexed by byte.
std::vector<std::string> byte_level_chars() {
  std::vector<std::string> out(256);
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    const bool direct = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    utf8_append(out[b], direct ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++));
  }
  return out;
}

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

// The adjacent pair of pieces seen most often (at least twice; the first in order on a tie)
// whose merge is not a token yet: the next merge of BPE training.
std::optional<std::pair<std::string, std::string>> most_frequent_new_pair(
    const std::map<std::vector<std::string>, int64_t>& words, const std::set<std::string>& have) {
  std::map<std::pair<std::string, std::string>, int64_t> pairs;
  for (const auto& [w, n] : words)
    for (size_t i = 0; i + 1 < w.size(); ++i) pairs[{w[i], w[i + 1]}] += n;
  std::optional<std::pair<std::string, std::string>> best;
  int64_t best_n = 1;
  for (const auto& [p, n] : pairs)
    if (n > best_n && !have.count(p.first + p.second)) {
      best = p;
      best_n = n;
    }
  return best;
}

// Every word (its pieces, with a count) after merging adjacent pieces `best`: one step of
// learning merges from a text.
void apply_merge(std::map<std::vector<std::string>, int64_t>& words, const std::pair<std::string, std::string>& best) {
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

}  // namespace

Status write_synthetic_bpe_tokenizer(const std::string& path, int64_t vocab_size, uint64_t seed) {
  const int64_t n_special = 3;
  if (vocab_size < 256 + n_special)
    return error(ErrorCode::invalid_argument, "a byte-level tokenizer needs at least ", 256 + n_special, " tokens, got ",
                 vocab_size);
  const std::vector<std::string> bm_utf8 = byte_level_chars();
  std::vector<std::string> tokens;
  std::set<std::string> have;
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(bm_utf8[b]);
    have.insert(bm_utf8[b]);
  }
  const int64_t n_merges = vocab_size - n_special - 256;
  std::vector<std::pair<std::string, std::string>> merges;
  // 1. learned merges: classic BPE training on the built-in text
  std::map<std::vector<std::string>, int64_t> words;
  for (const std::string& piece : pre_tokenize(kCorpus, PreTokenizer::qwen2)) {
    std::vector<std::string> w;
    for (unsigned char c : piece) w.push_back(bm_utf8[c]);
    ++words[w];
  }
  while (static_cast<int64_t>(merges.size()) < n_merges) {
    const auto best_or = most_frequent_new_pair(words, have);
    if (!best_or) break;
    const std::pair<std::string, std::string> best = *best_or;
    merges.push_back(best);
    have.insert(best.first + best.second);
    tokens.push_back(best.first + best.second);
    apply_merge(words, best);
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
         {{{"type", "Split"}, {"pattern", {{"Regex", std::string(pre_tokenizer_pattern(PreTokenizer::qwen2))}}}, {"behavior", "Isolated"}, {"invert", false}},
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


Status write_synthetic_spm_tokenizer(const std::string& path, int64_t vocab_size, uint64_t seed, bool gemma_style) {
  const std::string sp(spm::kSpace);
  const std::vector<std::string> specials =
      gemma_style ? std::vector<std::string>{"<pad>", "<eos>", "<bos>", "<unk>"} : std::vector<std::string>{"<unk>", "<s>", "</s>"};
  const std::vector<std::string> extra = gemma_style ? std::vector<std::string>{"<start_of_turn>", "<end_of_turn>"}
                                                     : std::vector<std::string>{};
  std::vector<std::string> tokens = specials;
  std::set<std::string> have(tokens.begin(), tokens.end());
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    tokens.push_back(name);
    have.insert(name);
  }
  const size_t first_piece = tokens.size();
  // the words of the text as the normalizer leaves them: spaces are "▁", starting each word
  std::vector<std::vector<std::string>> words;
  {
    std::string word;
    auto flush = [&] {
      if (word.empty()) return;
      std::vector<std::string> w;
      for (char32_t c : utf8_decode(word)) {
        std::string ch;
        utf8_append(ch, c);
        w.push_back(ch);
      }
      words.push_back(std::move(w));
      word.clear();
    };
    for (char c : std::string(" ") + std::string(kCorpus)) {
      if (c == ' ') {
        flush();
        word = sp;
      } else {
        word += c;
      }
    }
    flush();
  }
  std::set<std::string> chars;
  for (const auto& w : words) chars.insert(w.begin(), w.end());
  for (const std::string& c : chars) {
    tokens.push_back(c);
    have.insert(c);
  }
  const int64_t n_fixed = static_cast<int64_t>(tokens.size() + extra.size());
  if (vocab_size < n_fixed)
    return error(ErrorCode::invalid_argument, "a SentencePiece-style synthetic tokenizer needs at least ", n_fixed,
                 " tokens, got ", vocab_size);
  const int64_t n_pieces = vocab_size - static_cast<int64_t>(extra.size());
  // 1. learned: classic BPE training on the words
  std::map<std::vector<std::string>, int64_t> counts;
  for (const auto& w : words) ++counts[w];
  while (static_cast<int64_t>(tokens.size()) < n_pieces) {
    const auto best_or = most_frequent_new_pair(counts, have);
    if (!best_or) break;
    const std::pair<std::string, std::string> best = *best_or;
    tokens.push_back(best.first + best.second);
    have.insert(tokens.back());
    apply_merge(counts, best);
  }
  // 2. generated: an existing piece followed by one that does not start a word
  std::mt19937_64 rng(seed);
  const size_t n_base = tokens.size();
  for (int guard = 0; static_cast<int64_t>(tokens.size()) < n_pieces && guard < 100000000; ++guard) {
    const std::string& a = tokens[first_piece + rng() % (tokens.size() - first_piece)];
    const std::string& b = tokens[first_piece + rng() % (std::min(tokens.size(), n_base + 64) - first_piece)];
    if (b.compare(0, sp.size(), sp) == 0 || a.size() + b.size() > 24 || have.count(a + b)) continue;
    tokens.push_back(a + b);
    have.insert(tokens.back());
  }
  if (static_cast<int64_t>(tokens.size()) < n_pieces)
    return error(ErrorCode::invalid_argument, "could not generate ", vocab_size, " distinct tokens");
  // every way to make each piece from two pieces, in the pieces' order: what Hugging Face's
  // SentencePiece converter writes, so that merging by rank and by score (llama.cpp) agree
  std::map<std::string, int64_t> id_of;
  for (size_t i = 0; i < tokens.size(); ++i) id_of[tokens[i]] = static_cast<int64_t>(i);
  nlohmann::json merges = nlohmann::json::array();
  for (size_t i = first_piece; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    std::vector<std::pair<int64_t, int64_t>> splits;
    for (size_t k = 1; k < t.size(); ++k) {
      if ((static_cast<unsigned char>(t[k]) & 0xC0) == 0x80) continue;
      auto l = id_of.find(t.substr(0, k)), r = id_of.find(t.substr(k));
      if (l != id_of.end() && r != id_of.end() && l->second >= static_cast<int64_t>(first_piece) &&
          r->second >= static_cast<int64_t>(first_piece))
        splits.emplace_back(l->second, r->second);
    }
    std::sort(splits.begin(), splits.end());
    for (const auto& [l, r] : splits) merges.push_back({tokens[l], tokens[r]});
  }
  nlohmann::json vocab = nlohmann::json::object();
  for (size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = static_cast<int64_t>(i);
  nlohmann::json added = nlohmann::json::array();
  auto add_token = [&](const std::string& s, int64_t id) {
    added.push_back({{"id", id}, {"content", s}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", false}, {"special", true}});
  };
  for (size_t i = 0; i < specials.size(); ++i) add_token(specials[i], static_cast<int64_t>(i));
  for (size_t i = 0; i < extra.size(); ++i) add_token(extra[i], static_cast<int64_t>(tokens.size() + i));
  const std::string bos = gemma_style ? "<bos>" : "<s>";
  const int64_t bos_id = gemma_style ? 2 : 1;
  nlohmann::json replace = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", sp}};
  nlohmann::json normalizer =
      gemma_style ? replace
                  : nlohmann::json{{"type", "Sequence"},
                                   {"normalizers", {{{"type", "Prepend"}, {"prepend", sp}}, replace}}};
  nlohmann::json decoders = {{{"type", "Replace"}, {"pattern", {{"String", sp}}}, {"content", " "}},
                             {{"type", "ByteFallback"}},
                             {{"type", "Fuse"}}};
  if (!gemma_style) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  nlohmann::json j = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", normalizer},
      {"pre_tokenizer", nullptr},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", {{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"pair",
         {{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
          {{"SpecialToken", {{"id", bos}, {"type_id", 1}}}},
          {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
        {"special_tokens", {{bos, {{"id", bos}, {"ids", {bos_id}}, {"tokens", {bos}}}}}}}},
      {"decoder", {{"type", "Sequence"}, {"decoders", decoders}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", "<unk>"},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", true},
        {"byte_fallback", true},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", merges}}}};
  std::ofstream f(path, std::ios::binary);
  f << j.dump(1) << "\n";
  if (!f) return error(ErrorCode::io_error, "cannot write ", path);
  return Status::ok();
}

}  // namespace rlx::text
