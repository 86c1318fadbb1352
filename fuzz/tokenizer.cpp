// libFuzzer target: a tokenizer.json as the BPE (byte-level and SentencePiece-style) and
// WordPiece loaders read it (text::BpeTokenizer::from_json,
// text::WordPieceTokenizer::from_tokenizer_json_text) on arbitrary bytes; an accepted BPE
// tokenizer then encodes a fixed sentence (with and without its special tokens), decodes its ids
// and each token, and goes through its GGUF form (to_gguf_metadata -> from_gguf), which must
// load and give ids inside the vocabulary too.
#include <cstdint>
#include <cstring>
#include <string_view>

#include "models/text/bpe.h"
#include "models/text/wordpiece.h"

namespace {

void check_ids(const rlx::text::BpeTokenizer& t) {
  for (bool add : {false, true}) {
    auto ids = t.encode("Hello, world! 123 \xc3\xa9t\xc3\xa9 <|x|> <s>a  b</s>\n\t\xe2\x96\x81x \xff", add);
    for (int64_t id : ids) {
      if (id < 0 || id >= t.vocab_size()) __builtin_trap();
      (void)t.token_bytes(id);
    }
    (void)t.decode(ids);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto t = rlx::text::BpeTokenizer::from_json(text, "tokenizer.json")) {
    check_ids(*t);
    std::vector<rlx::gguf::KeyValue> md;
    md.push_back({"general.architecture", rlx::gguf::Value::string("llama"), 0});
    for (auto& [k, v] : t->to_gguf_metadata()) md.push_back({k, v, 0});
    if (auto bytes = rlx::gguf::serialize(md, {})) {
      auto storage = rlx::allocate_storage(bytes->size());
      std::memcpy(storage->data(), bytes->data(), bytes->size());
      if (auto f = rlx::gguf::parse(storage, "tok.gguf")) {
        if (auto g = rlx::text::BpeTokenizer::from_gguf(*f)) {
          check_ids(*g);
        } else if (g.status().message().empty()) {
          __builtin_trap();
        }
      }
    }
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
