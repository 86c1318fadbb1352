// BPE tokenization of the two kinds decoder LLMs use, read from a Hugging Face tokenizer.json
// or from the tokenizer stored in GGUF metadata (tokenizer.ggml.*); docs/tokenizers.md says
// what is supported and how it is checked against Hugging Face's tokenizers and llama.cpp.
//
//  - byte-level BPE (GPT-2 / Qwen / Llama 3; GGUF model "gpt2"): each piece's UTF-8 bytes are
//    mapped to printable characters (GPT-2's bytes_to_unicode) and merged by rank.
//  - SentencePiece-style BPE (Llama 2, Mistral, Gemma, Phi-3; GGUF model "llama"): spaces are
//    "▁", characters merge (by rank from tokenizer.json, by score from GGUF, as llama.cpp), and
//    characters outside the vocabulary become <0xXX> byte tokens. Internals in spm.h.
//
// Encoding: added tokens (special or not) written in the text are cut out first, leftmost
// and then longest, with their lstrip / rstrip / single_word flags; every other stretch is
// normalized and pre-tokenized as the tokenizer says and merged. encode(text, true) then adds
// the tokens the post-processor adds (Llama 3's <|begin_of_text|>, Llama 2's <s>, Gemma's
// <bos>; Qwen's none). Decoding gives the bytes back, so decode(encode(text)) == text for any
// valid UTF-8 text the normalizer leaves unchanged.
//
// Pre-tokenization patterns are implemented by hand, exactly as the regexes match (leftmost
// alternative, greedy, with the (?!\S) look-ahead), for the three in use: Qwen2's
// ("qwen2"), Llama 3's ("llama-bpe": numbers in groups of up to 3) and GPT-2's ("gpt2"). A
// tokenizer.json or GGUF file naming another pattern is refused with unsupported, naming it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "rlx/gguf.h"
#include "rlx/status.h"

namespace rlx::text {

enum class PreTokenizer : uint8_t { qwen2, llama3, gpt2 };
enum class TokenizerKind : uint8_t { byte_level, sentencepiece };

namespace spm {
struct Model;
}

// A token of tokenizer.json's added_tokens (or a GGUF control / user-defined token), matched in
// raw text before normalization. The flags are Hugging Face's: lstrip / rstrip take the
// whitespace before / after a match into it; single_word matches only between non-word
// characters.
struct AddedToken {
  std::string content;
  int64_t id = -1;
  bool special = true, lstrip = false, rstrip = false, single_word = false;
  bool normalized = false;  // matched in the normalized text instead of the raw text
};

class BpeTokenizer {
 public:
  // A Hugging Face tokenizer.json with a BPE model (errors name the file and the field).
  static Expected<BpeTokenizer> from_json_file(const std::string& path);
  static Expected<BpeTokenizer> from_json(std::string_view json, const std::string& name);
  // tokenizer.ggml.model "gpt2" (tokens, merges, token_type, tokenizer.ggml.pre) or "llama"
  // (tokens, scores, token_type, add_space_prefix), with bos/eos/unk/padding ids and
  // add_bos_token / add_eos_token.
  static Expected<BpeTokenizer> from_gguf(const gguf::File& f);
  // A folder holding tokenizer.json (and, when present, tokenizer_config.json, whose
  // bos_token / eos_token name bos_id / eos_id), a .json file, or a .gguf file.
  static Expected<BpeTokenizer> load(const std::string& path);

  // Token ids of `text`; added and special tokens written in the text are recognized. Adds
  // nothing around them: the same as encode(text, false).
  std::vector<int64_t> encode(std::string_view text) const;
  // With add_special_tokens, also the tokens the tokenizer adds around a single sequence
  // (tokenizer.json's post_processor; GGUF's add_bos_token / add_eos_token): what
  // Hugging Face's encode(text, add_special_tokens=True) and llama.cpp's
  // llama_tokenize(add_special=true, parse_special=true) give.
  std::vector<int64_t> encode(std::string_view text, bool add_special_tokens) const;
  // Whether encode(text, true) starts with bos_id / ends with eos_id.
  bool add_bos() const { return !prefix_.empty(); }
  bool add_eos() const { return !suffix_.empty(); }
  // The text of `ids` (special tokens as their content), through the tokenizer's decoder
  // (SentencePiece-style: "▁" to space, byte tokens to bytes, the leading space the encoder
  // added removed); out-of-range ids are skipped. Byte tokens that do not form valid UTF-8
  // stay raw bytes (Hugging Face writes U+FFFD).
  std::string decode(std::span<const int64_t> ids) const;
  // The bytes of one token (for streaming; may be part of a UTF-8 sequence). A
  // SentencePiece-style token that starts a word keeps its leading space.
  std::string token_bytes(int64_t id) const;

  int64_t vocab_size() const { return static_cast<int64_t>(tokens_.size()); }
  // The id of a token given in its vocabulary form (byte-level characters, or a special token).
  std::optional<int64_t> token_id(std::string_view token) const;
  bool is_special(int64_t id) const;
  PreTokenizer pre_tokenizer() const { return pre_; }
  TokenizerKind kind() const { return kind_; }
  const std::vector<AddedToken>& added_tokens() const { return added_; }

  // tokenizer.ggml.* keys describing this tokenizer in llama.cpp's terms: byte-level as model
  // "gpt2" (pre, tokens, token_type, merges); SentencePiece-style as model "llama" (tokens,
  // scores, token_type, add_space_prefix; scores from the merge ranks when read from
  // tokenizer.json); both with bos/eos/unk/padding ids when known and add_bos_token /
  // add_eos_token.
  std::vector<std::pair<std::string, gguf::Value>> to_gguf_metadata() const;

  int64_t eos_id = -1, bos_id = -1, pad_id = -1, unk_id = -1;

 private:
  void bpe(const std::string& piece, std::vector<int64_t>& out) const;
  void encode_stretch(std::string_view text, bool at_start, std::vector<int64_t>& out) const;
  Status finish(const std::string& name);
  Status index_added(const std::string& name);
  Status read_post_processor(const nlohmann::json& root, const std::string& name);
  static Expected<BpeTokenizer> sentencepiece_from_gguf(const gguf::File& f);

  std::vector<std::string> tokens_;                  // id -> vocabulary form
  std::vector<int32_t> types_;  // GGUF token types: 1 normal, 2 unknown, 3 control, 4 user defined, 6 byte
  std::unordered_map<std::string, int64_t> vocab_;   // vocabulary form -> id
  std::vector<std::pair<std::string, std::string>> merges_;
  std::vector<AddedToken> added_;                    // all added tokens
  std::vector<std::string> match_;                   // per added token: the text it matches
  std::unordered_map<int64_t, std::string> decode_as_;  // normalized added tokens: their normalized text
  std::vector<std::vector<int32_t>> by_first_byte_;  // raw-text tokens by first byte, longest first
  std::vector<std::vector<int32_t>> by_first_byte_normalized_;  // normalized-text tokens
  std::vector<int64_t> prefix_, suffix_;             // added around a sequence by encode(text, true)
  PreTokenizer pre_ = PreTokenizer::qwen2;
  TokenizerKind kind_ = TokenizerKind::byte_level;
  bool nfc_ = false;
  bool ignore_merges_ = false;
  bool has_normalized_added_ = false;
  bool add_space_prefix_ = false;                     // sentencepiece: the GGUF add_space_prefix
  std::shared_ptr<const spm::Model> spm_;            // sentencepiece only
  std::shared_ptr<const spm::Model> byte_level_;     // byte-level only: its merges by id
};

// The token texts llama.cpp treats as end-of-generation and therefore as control tokens on
// loading any GGUF vocabulary, whatever type the file gives them (so "</s>" typed in text is one
// token for a Qwen GGUF in llama.cpp but three for Hugging Face); from_gguf does the same.
const std::vector<std::string>& llama_cpp_control_texts();
// The Split regex of pattern `p` as tokenizer.json files spell it.
std::string_view pre_tokenizer_pattern(PreTokenizer p);
// The pre-tokenization pieces of `text` under pattern `p` (exposed for tests).
std::vector<std::string> pre_tokenize(std::string_view text, PreTokenizer p);

// A byte-level BPE tokenizer.json with `vocab_size` tokens: the 256 byte tokens, merges
// learned from a small built-in English text and then generated pseudo-randomly from `seed`,
// and the special tokens <|endoftext|>, <|im_start|>, <|im_end|> as the last three ids.
Status write_synthetic_bpe_tokenizer(const std::string& path, int64_t vocab_size, uint64_t seed);
// The id of <|endoftext|> in such a tokenizer.
inline int64_t synthetic_bpe_eos_id(int64_t vocab_size) { return vocab_size - 3; }

// A SentencePiece-style tokenizer.json (Llama 2's layout: <unk> <s> </s> as ids 0-2, the 256
// <0xXX> byte tokens, "▁" and the characters of a small built-in text, then merges learned from
// it and generated pseudo-randomly from `seed` up to `vocab_size` tokens; Prepend/Replace
// normalizer, ByteFallback decoder, a TemplateProcessing post-processor adding <s>). With
// `gemma_style`, Gemma's layout instead: <pad> <eos> <bos> <unk> as ids 0-3, no prepended
// space, <bos> added, and <start_of_turn> / <end_of_turn> as added tokens.
Status write_synthetic_spm_tokenizer(const std::string& path, int64_t vocab_size, uint64_t seed, bool gemma_style = false);

}  // namespace rlx::text
