// Placeholder until the gguf loader lands: says so instead of failing silently.
#include "../loaders.h"

namespace rlx::io {

Expected<LoadedModel> load_gguf_model(const std::string& path) {
  return error(ErrorCode::unsupported, path, ": the gguf loader is not built yet");
}

}  // namespace rlx::io
