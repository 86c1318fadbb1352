// rlx/model_io.h: loading models by path, whatever their format.
#pragma once

#include <map>
#include <string>

#include "rlx/graph.h"

namespace rlx {

struct LoadedModel {
  Graph graph;
  std::string format;                         // "rlx text IR", "onnx", ...
  std::map<std::string, std::string> metadata;
};

// Loads a model file or folder: text IR (.rlx) today; the format issues add ONNX, GGUF,
// safetensors and Hugging Face folders. Errors name the path and what is wrong.
Expected<LoadedModel> load_model(const std::string& path);

}  // namespace rlx
