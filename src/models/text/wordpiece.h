// The WordPiece tokenizer of BERT-family models, as Hugging Face's BertTokenizer behaves:
// clean text (drop control characters, map whitespace to spaces), put spaces around CJK
// ideographs, split on whitespace, lower-case and strip accents (NFD, drop Mn) when
// uncased, split off punctuation, then greedy longest-match-first word pieces with "##"
// continuations; a word longer than 100 characters or with no match becomes [UNK].
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "rlx/status.h"
#include "rlx/tensor.h"

namespace rlx::text {

struct WordPieceOptions {
  bool lower_case = true;
  bool strip_accents = true;      // follows lower_case unless set explicitly in tokenizer.json
  bool handle_chinese_chars = true;
  int max_chars_per_word = 100;
  std::string unk = "[UNK]", cls = "[CLS]", sep = "[SEP]", pad = "[PAD]";
  std::string continuation_prefix = "##";
};

// A batch of encoded texts, padded to one length.
struct Encoding {
  int64_t batch = 0, seq = 0;
  std::vector<int64_t> ids;             // [batch, seq]
  std::vector<int64_t> attention_mask;  // [batch, seq]: 1 for tokens, 0 for padding
  std::vector<int64_t> token_type_ids;  // [batch, seq]: zeros (single sentences)
  std::vector<int64_t> lengths;         // real tokens per row, [CLS] and [SEP] included
  Tensor ids_tensor() const;
  Tensor mask_tensor() const;
  Tensor type_tensor() const;
};

class WordPieceTokenizer {
 public:
  // From vocab.txt (one token per line, id = line number).
  static Expected<WordPieceTokenizer> from_vocab_file(const std::string& path, WordPieceOptions options = {});
  // From a Hugging Face tokenizer.json whose model is WordPiece (reads vocab, normalizer flags,
  // special tokens).
  static Expected<WordPieceTokenizer> from_tokenizer_json(const std::string& path);
  // The same from the file's text; `name` labels errors.
  static Expected<WordPieceTokenizer> from_tokenizer_json_text(std::string_view text, const std::string& name);
  // From a folder: tokenizer.json if present, else vocab.txt (+ tokenizer_config.json for
  // do_lower_case).
  static Expected<WordPieceTokenizer> from_folder(const std::string& dir);
  static Expected<WordPieceTokenizer> from_tokens(std::vector<std::string> tokens, WordPieceOptions options = {});

  // The word pieces of one text, without special tokens.
  std::vector<std::string> tokenize(const std::string& text) const;
  std::vector<int64_t> ids_of(const std::vector<std::string>& pieces) const;
  // [CLS] pieces [SEP], truncated to max_len (keeping [SEP]), padded with [PAD] to the
  // longest row (or to pad_to when it is larger), with the attention mask.
  Encoding encode_batch(const std::vector<std::string>& texts, int64_t max_len, int64_t pad_to = 0) const;
  int64_t vocab_size() const { return static_cast<int64_t>(tokens_.size()); }
  int64_t id_of(const std::string& token) const;  // -1 if absent
  const std::string& token(int64_t id) const { return tokens_[static_cast<size_t>(id)]; }

 private:
  std::vector<std::string> basic_split(const std::string& text) const;
  void word_pieces(const std::string& word, std::vector<std::string>& out) const;

  WordPieceOptions opt_;
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int64_t> index_;
  int64_t unk_id_ = 0, cls_id_ = 0, sep_id_ = 0, pad_id_ = 0;
};

}  // namespace rlx::text
