// Placeholder until the safetensors loader lands: says so instead of failing silently.
#include "../loaders.h"

namespace rlx::io {

Expected<LoadedModel> load_safetensors_model(const std::string& path) {
  return error(ErrorCode::unsupported, path, ": the safetensors loader is not built yet");
}

}  // namespace rlx::io
