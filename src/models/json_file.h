// Reading the JSON files of model folders (config.json, tokenizer.json).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "rlx/status.h"

namespace rlx::models {

// The JSON object in the file at `path`; io_error when it cannot be opened, format_error
// (naming the file) when it is not valid JSON or not an object. Never throws.
Expected<nlohmann::json> read_json_object(const std::string& path);

}  // namespace rlx::models
