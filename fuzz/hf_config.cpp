// libFuzzer target: a Hugging Face config.json as the BERT and decoder loaders read it
// (models::BertConfig::from_json, models::DecoderConfig::from_json) on arbitrary bytes. Beyond "no
// crash, no throw, no sanitizer report", an accepted config has sizes in the ranges the loaders
// promise, so that what is built from it cannot overflow.
#include <cstdint>
#include <string_view>

#include "models/bert.h"
#include "models/decoder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto b = rlx::models::BertConfig::from_json(text, "config.json")) {
    for (int64_t v : {b->vocab_size, b->hidden, b->layers, b->heads, b->intermediate, b->max_positions, b->type_vocab})
      if (v < 1 || v > (int64_t{1} << 24)) __builtin_trap();
    if (b->hidden % b->heads != 0) __builtin_trap();
  } else if (b.status().message().empty()) {
    __builtin_trap();
  }
  if (auto q = rlx::models::DecoderConfig::from_json(text, "config.json")) {
    for (int64_t v : {q->vocab_size, q->hidden, q->layers, q->heads, q->kv_heads, q->head_dim, q->intermediate})
      if (v < 1 || v > (int64_t{1} << 24)) __builtin_trap();
    if (q->layers > 4096 || q->heads % q->kv_heads != 0) __builtin_trap();
  } else if (q.status().message().empty()) {
    __builtin_trap();
  }
  return 0;
}
