// libFuzzer target: the GGUF reader on arbitrary bytes (from memory), then everything a loader
// does with a file that parsed: metadata as text, typed accessors, tensor views, and decoding
// the first rows of tensors whose format rlx decodes, and, for a decoder family's file, the
// decoder loader (configuration keys, tensor names and shapes) and its graph builder. Seeds: fuzz/corpus/gguf/ (made by
// tests/io/gguf_corrupt_test.cpp with RLX_GGUF_WRITE_CORPUS=DIR, plus small valid files).
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/ggml_quants.h"
#include "models/decoder.h"
#include "rlx/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto storage = rlx::allocate_storage(size);
  if (size) std::memcpy(storage->data(), data, size);
  auto f = rlx::gguf::parse(storage, "fuzz.gguf");
  if (!f) return 0;
  size_t sink = 0;
  for (const rlx::gguf::KeyValue& kv : f->metadata) {
    sink += kv.value.to_string().size();
    sink += f->get_int(kv.key).has_value() + f->get_string(kv.key).has_value() + f->get_float(kv.key).has_value();
    sink += f->get_array<int32_t>(kv.key).has_value() + f->get_array<std::string>(kv.key).has_value();
    sink += f->get_array<double>(kv.key).has_value() + f->get_array<bool>(kv.key).has_value();
  }
  std::vector<float> row;
  for (const rlx::gguf::TensorInfo& ti : f->tensors) {
    auto t = f->tensor(ti);
    if (!t) __builtin_trap();  // the reader promised every tensor lies inside the file
    sink += t->nbytes();
    auto info = rlx::gguf::ggml_type_info(static_cast<uint32_t>(ti.type));
    auto q = info ? rlx::quant::qtype_from_name(info->name) : std::nullopt;
    if (!q || ti.ne.empty()) continue;
    // decode up to 4 rows of at most 4096 values
    const int64_t cols = ti.ne[0] > 4096 ? 4096 / info->block_elems * info->block_elems : ti.ne[0];
    if (cols <= 0) continue;
    const int64_t rb = ti.ne[0] / info->block_elems * info->block_bytes;
    const int64_t rows = static_cast<int64_t>(ti.nbytes / static_cast<uint64_t>(rb));
    row.resize(static_cast<size_t>(cols));
    auto blocks = f->tensor_blocks(ti);
    if (!blocks) __builtin_trap();
    for (int64_t r = 0; r < rows && r < 4; ++r) {
      rlx::quant::dequantize_row(*q, blocks->bytes() + r * rb, row.data(), cols);
      sink += row[0] != 0;
    }
  }
  // a decoder family's file: the loader checks every key and tensor it reads; the step graph of
  // what it accepted builds or fails with an error
  if (rlx::models::is_decoder_arch(*f)) {
    auto w = rlx::models::decoder_from_gguf(*f, "fuzz.gguf");
    if (w) sink += rlx::models::build_decoder(*w, {.context = 4, .all_logits = false, .decode = true}).has_value();
  }
  return sink == 0xdeadbeef;
}
