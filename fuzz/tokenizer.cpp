// libFuzzer target: a tokenizer.json as the byte-level BPE and WordPiece loaders read it
// (text::BpeTokenizer::from_json, text::WordPieceTokenizer::from_tokenizer_json_text) on
// arbitrary bytes; an accepted tokenizer then encodes a fixed sentence and decodes its ids, and
// every id it gives is inside its vocabulary.
#include <cstdint>
#include <string_view>

#include "models/text/bpe.h"
#include "models/text/wordpiece.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto t = rlx::text::BpeTokenizer::from_json(text, "tokenizer.json")) {
    auto ids = t->encode("Hello, world! 123 \xc3\xa9t\xc3\xa9 <|x|>");
    for (int64_t id : ids)
      if (id < 0 || id >= t->vocab_size()) __builtin_trap();
    (void)t->decode(ids);
  } else if (t.status().message().empty()) {
    __builtin_trap();
  }
  if (auto w = rlx::text::WordPieceTokenizer::from_tokenizer_json_text(text, "tokenizer.json")) {
    rlx::text::Encoding e = w->encode_batch({"Hello, world! unaffable"}, 16);
    for (int64_t id : e.ids)
      if (id < 0 || id >= w->vocab_size()) __builtin_trap();
  } else if (w.status().message().empty()) {
    __builtin_trap();
  }
  return 0;
}
