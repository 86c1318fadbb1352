// Per-format loaders behind rlx::load_model. Each lives in its own folder under src/io/.
#pragma once

#include <string>

#include "rlx/model_io.h"

namespace rlx::io {

// A .safetensors file, or a sharded checkpoint through its model.safetensors.index.json:
// the weights (memory-mapped, zero-copy where the dtype allows) in graph.weights, no nodes.
Expected<LoadedModel> load_safetensors_model(const std::string& path);
// A GGUF file: metadata, and its tensors (quantized ones stay packed as u8 rows).
Expected<LoadedModel> load_gguf_model(const std::string& path);
// An ONNX ModelProto: the graph, its initializers as weights, symbolic input dims.
Expected<LoadedModel> load_onnx_model(const std::string& path);
// An rten file (version 1 or 2), translated to ONNX and imported (src/io/rten/, docs/rten.md).
Expected<LoadedModel> load_rten_model(const std::string& path);

}  // namespace rlx::io
