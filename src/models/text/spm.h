// SentencePiece-style BPE (Llama 2, Mistral, Gemma, Phi-3): the parts of text::BpeTokenizer
// that only that kind uses. Internal to src/models/text; users go through bpe.h.
//
// Two merge rules, as the two file formats define them:
//  - tokenizer.json (model BPE with byte_fallback): merges by rank over the characters of each
//    piece, exactly as Hugging Face's tokenizers (lowest rank first, then leftmost), with
//    characters missing from the vocabulary spelled as <0xXX> byte tokens (or the unk token).
//  - GGUF tokenizer.ggml.model "llama": merges by score as llama.cpp's SPM tokenizer does (any
//    adjacent pair whose concatenation is a token, highest score first, then leftmost), and
//    what did not become a token is spelled in byte tokens.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlx/status.h"

namespace rlx::text::spm {

// "▁" (U+2581), SentencePiece's visible space.
inline constexpr std::string_view kSpace = "\xe2\x96\x81";

// One step of the normalizer, applied to each stretch of text between added tokens.
struct NormOp {
  enum Kind : uint8_t { prepend, replace, nfc } kind = prepend;
  std::string a, b;  // prepend: a; replace: a -> b
};

// One pre-tokenizer; each splits every piece the previous ones produced.
struct PreOp {
  enum Kind : uint8_t { metaspace, split } kind = metaspace;
  // metaspace: replacement, prepend scheme (0 never, 1 first, 2 always), split on it or not
  std::string replacement;
  int prepend_scheme = 2;
  bool split_words = true;
  // split: a literal pattern and the behavior (Hugging Face's SplitDelimiterBehavior)
  std::string pattern;
  enum Behavior : uint8_t { removed, isolated, merged_with_previous, merged_with_next, contiguous } behavior = isolated;
  bool invert = false;
};

// One decoder step, over the list of token strings (as Hugging Face's decoders chain).
struct DecOp {
  enum Kind : uint8_t { replace, byte_fallback, fuse, strip, metaspace } kind = replace;
  std::string a, b;        // replace a -> b; strip: the character; metaspace: the replacement
  int start = 0, stop = 0;  // strip counts
  bool strip_first = true;  // metaspace: drop the first token's leading space
};

struct Model {
  // token text -> id as the merge rule sees it: tokenizer.json's model.vocab (added tokens are
  // not the model's), or every token of a GGUF (llama.cpp looks all of them up)
  std::unordered_map<std::string, int64_t> vocab;
  bool by_score = false;              // GGUF (llama.cpp rule) rather than tokenizer.json merges
  std::vector<float> scores;          // by_score: per id
  // by rank: (left id << 32 | right id) -> (rank, merged id)
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges;
  bool byte_fallback = true, fuse_unk = false, ignore_merges = false;
  int64_t unk_id = -1;
  int64_t byte_ids[256];              // <0xXX> token ids, -1 where absent
  std::vector<NormOp> norm;
  std::vector<PreOp> pre;
  std::vector<DecOp> dec;
  Model() {
    for (int64_t& b : byte_ids) b = -1;
  }
};

// Reads normalizer, pre_tokenizer, decoder and the BPE model fields of a tokenizer.json for this
// kind into `m`, whose vocab is already set (errors name `name` and the field).
Status parse_json(const nlohmann::json& root, const std::string& name, Model& m);
// The normalizer and decoder llama.cpp applies to a GGUF "llama" tokenizer.
void gguf_pipeline(Model& m, bool add_space_prefix);
// Finds the byte tokens (<0x00>..<0xFF>) in m.vocab.
void find_byte_tokens(Model& m);

// Hugging Face's BPE on one pre-tokenized word: its characters (or their byte tokens, or unk)
// merged by rank, lowest first and then leftmost. Byte-level BPE uses it too, on the word's
// bytes mapped to GPT-2's printable characters.
void merge_word(const Model& m, std::string_view word, std::vector<int64_t>& out);

// The normalizer's output for one stretch of text between added tokens.
std::string normalize(const Model& m, std::string_view text);
// Appends the ids of normalized text: pre-tokenized, then merged. `at_start`: the text begins
// the input (Metaspace's prepend_scheme "first" prepends only there).
void encode_normalized(const Model& m, std::string_view text, bool at_start, std::vector<int64_t>& out);

// Runs the decoder chain over token strings. `streaming`: one token of a stream, so steps that
// look at the whole text (Strip, Metaspace's first-token strip) are skipped.
std::string decode(const Model& m, std::vector<std::string> pieces, bool streaming);

// Scores for GGUF from tokenizer.json merges: a token made by a merge of rank r scores -r - 1,
// so llama.cpp's highest-score-first order follows the merge ranks; tokens no merge makes
// score 0 when they are one character (never a merge result) and -1e9 otherwise.
std::vector<float> scores_from_merges(const Model& m, const std::vector<std::string>& tokens);

}  // namespace rlx::text::spm
