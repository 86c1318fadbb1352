#include "json_file.h"

#include <fstream>

namespace rlx::models {

Expected<nlohmann::json> read_json_object(const std::string& path) {
  std::ifstream f(path);
  if (!f) return error(ErrorCode::io_error, "cannot open ", path);
  nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return error(ErrorCode::format_error, path, ": not a JSON object");
  return j;
}

}  // namespace rlx::models
