// Shared by the decoder's files (decoder*.cpp): the GGUF form of a configuration and the
// names llama.cpp gives each family's tensors.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/decoder.h"
#include "rlx/gguf.h"

namespace rlx::models {

// general.architecture of llama.cpp's conversion of `f` ("llama" for mistral).
std::string_view gguf_arch(DecoderFamily f);
// The configuration from a GGUF file's keys (general.architecture, ARCH.*, tokenizer ids);
// errors name `path` and the key.
Status read_gguf_config(const gguf::File& f, const std::string& path, DecoderConfig& c);
// The keys llama.cpp reads for c's family (general.architecture, ARCH.*).
void write_gguf_config(const DecoderConfig& c, std::vector<gguf::KeyValue>& md);
// Llama 3's rope scaling as the per-frequency divisors llama.cpp's rope_freqs.weight holds.
std::vector<double> llama3_rope_factors(const DecoderConfig& c);

inline std::string layer_prefix(int64_t l) { return "model.layers." + std::to_string(l) + "."; }

// One per-layer tensor: llama.cpp's name (after "blk.N.") and Hugging Face's (after
// "model.layers.N."), and whether it is a vector (a norm scale or a bias).
struct LayerTensorName {
  std::string gguf, hf;
  bool vector = false;
};
// The per-layer tensors of c's family as rlx's builder reads them (q/k/v and gate/up
// separately even where the files fuse them).
std::vector<LayerTensorName> layer_tensor_names(const DecoderConfig& c);

}  // namespace rlx::models
