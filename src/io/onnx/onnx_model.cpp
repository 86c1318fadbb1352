// Placeholder until the onnx loader lands: says so instead of failing silently.
#include "../loaders.h"

namespace rlx::io {

Expected<LoadedModel> load_onnx_model(const std::string& path) {
  return error(ErrorCode::unsupported, path, ": the onnx loader is not built yet");
}

}  // namespace rlx::io
