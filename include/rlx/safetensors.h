// rlx/safetensors.h: the safetensors format (https://github.com/huggingface/safetensors):
// an 8-byte little-endian header length, a JSON header, then the tensor bytes.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rlx/tensor.h"

namespace rlx::safetensors {

struct File {
  std::vector<std::string> names;         // in data-offset order
  std::map<std::string, Tensor> tensors;  // views into the mapped file where the dtype allows
  std::map<std::string, std::string> metadata;  // the "__metadata__" entries
};

// Loads a .safetensors file (memory-mapped, zero-copy), or a sharded checkpoint given its
// model.safetensors.index.json (every shard mapped, names checked against the index).
// F8_E4M3 / F8_E5M2 are converted to f32 on load. Errors name the file and tensor.
Expected<File> load(const std::string& path);

// Parses safetensors bytes held by `bytes` (tensors view into it); `name` is for messages.
Expected<File> parse(std::shared_ptr<Storage> bytes, const std::string& name);

// Writes tensors (in the given order) and metadata to `path`.
Status save(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
            const std::map<std::string, std::string>& metadata = {});

}  // namespace rlx::safetensors
