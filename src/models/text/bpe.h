// Byte-level BPE tokenization (GPT-2 / Qwen / Llama 3 style), read from a Hugging Face
// tokenizer.json or from the tokenizer stored in GGUF metadata (tokenizer.ggml.*).
//
// Encoding: special (added) tokens are cut out of the text first (longest match wins); every
// other stretch is NFC-normalized when the tokenizer says so, split by the pre-tokenization
// pattern, each piece's UTF-8 bytes are mapped to printable characters (GPT-2's
// bytes_to_unicode) and merged by rank. Decoding maps the characters back to bytes, so
// decode(encode(text)) == text for any valid UTF-8 text that NFC leaves unchanged.
//
// Pre-tokenization patterns are implemented by hand, exactly as the regexes match (leftmost
// alternative, greedy, with the (?!\S) look-ahead), for the three in use: Qwen2's
// ("qwen2"), Llama 3's ("llama-bpe": numbers in groups of up to 3) and GPT-2's ("gpt2"). A
// tokenizer.json or GGUF file naming another pattern is refused with unsupported, naming it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rlx/gguf.h"
#include "rlx/status.h"

namespace rlx::text {

enum class PreTokenizer : uint8_t { qwen2, llama3, gpt2 };

class BpeTokenizer {
 public:
  // A Hugging Face tokenizer.json with a BPE model (errors name the file and the field).
  static Expected<BpeTokenizer> from_json_file(const std::string& path);
  static Expected<BpeTokenizer> from_json(std::string_view json, const std::string& name);
  // tokenizer.ggml.model "gpt2" with tokens, merges, token_type and tokenizer.ggml.pre.
  static Expected<BpeTokenizer> from_gguf(const gguf::File& f);
  // A folder holding tokenizer.json, or a .gguf file.
  static Expected<BpeTokenizer> load(const std::string& path);

  // Token ids of `text`; special tokens written in the text are recognized.
  std::vector<int64_t> encode(std::string_view text) const;
  // The text of `ids` (special tokens as their content); out-of-range ids are skipped.
  std::string decode(std::span<const int64_t> ids) const;
  // The bytes of one token (for streaming; may be part of a UTF-8 sequence).
  std::string token_bytes(int64_t id) const;

  int64_t vocab_size() const { return static_cast<int64_t>(tokens_.size()); }
  // The id of a token given in its vocabulary form (byte-level characters, or a special token).
  std::optional<int64_t> token_id(std::string_view token) const;
  bool is_special(int64_t id) const;
  PreTokenizer pre_tokenizer() const { return pre_; }

  // tokenizer.ggml.* keys describing this tokenizer (model gpt2, pre, tokens, token_type,
  // merges, eos/padding ids when known).
  std::vector<std::pair<std::string, gguf::Value>> to_gguf_metadata() const;

  int64_t eos_id = -1, bos_id = -1, pad_id = -1;

 private:
  void split_pieces(std::string_view text, std::vector<std::string>& pieces) const;
  void bpe(const std::string& piece, std::vector<int64_t>& out) const;
  Status finish(const std::string& name);

  std::vector<std::string> tokens_;                  // id -> vocabulary form
  std::vector<int32_t> types_;                       // GGUF token types (1 normal, 3 control, 4 user defined)
  std::unordered_map<std::string, int64_t> vocab_;   // vocabulary form -> id
  std::vector<std::pair<std::string, std::string>> merges_;
  std::unordered_map<std::string, int32_t> merge_rank_;  // "a b" -> rank
  std::vector<std::pair<std::string, int64_t>> specials_;  // content, id; longest first
  PreTokenizer pre_ = PreTokenizer::qwen2;
  bool nfc_ = false;
  bool ignore_merges_ = false;
};

// The pre-tokenization pieces of `text` under pattern `p` (exposed for tests).
std::vector<std::string> pre_tokenize(std::string_view text, PreTokenizer p);

// A byte-level BPE tokenizer.json with `vocab_size` tokens: the 256 byte tokens, merges
// learned from a small built-in English text and then generated pseudo-randomly from `seed`,
// and the special tokens <|endoftext|>, <|im_start|>, <|im_end|> as the last three ids.
Status write_synthetic_bpe_tokenizer(const std::string& path, int64_t vocab_size, uint64_t seed);
// The id of <|endoftext|> in such a tokenizer.
inline int64_t synthetic_bpe_eos_id(int64_t vocab_size) { return vocab_size - 3; }

}  // namespace rlx::text
