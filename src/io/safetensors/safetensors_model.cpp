// rlx info / load_model for safetensors: a weight-only model (no nodes), one graph weight per
// tensor, viewing the mapped file.
#include "io/loaders.h"
#include "rlx/safetensors.h"

namespace rlx::io {

Expected<LoadedModel> load_safetensors_model(const std::string& path) {
  RLX_ASSIGN_OR_RETURN(safetensors::File file, safetensors::load(path));
  LoadedModel m;
  m.format = "safetensors";
  m.metadata = std::move(file.metadata);
  m.graph.weights = std::move(file.tensors);
  return m;
}

}  // namespace rlx::io
