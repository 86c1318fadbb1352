// Typed, checked access to the JSON files that come with models (config.json, tokenizer.json,
// tokenizer_config.json, safetensors indexes). These files come from strangers: a field of the
// wrong type must be an error that names the file and the key, never an exception thrown from
// deep inside nlohmann::json (whose get<T>() and value() throw type_error on a mismatch).
//
// Reading a file: read_json_file refuses what is not a regular file (a FIFO would block in
// open, a directory fails in read) and what is not a JSON object.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlx/status.h"

namespace rlx::json {

// The JSON object in the file at `path`: io_error when it is missing, not a regular file, or
// unreadable; format_error, naming the file, when it is not valid JSON or not an object. A file
// over `max_bytes` is refused before it is read. Never throws.
Expected<nlohmann::json> read_object_file(const std::string& path, uint64_t max_bytes = uint64_t{1} << 30);
// The same for text already in memory; `name` labels errors.
Expected<nlohmann::json> parse_object(std::string_view text, const std::string& name);

// The JSON type of `j` as an error message says it ("a number", "null", "an array", ...).
std::string type_phrase(const nlohmann::json& j);

// A JSON object and where it came from ("config.json", "tokenizer.json: model"), read field by
// field. Every read leaves its output unchanged when the key is absent or null, and returns a
// format_error "<where>: '<key>' must be <what>, got <type>" when the value has another type.
class Fields {
 public:
  // `object` must outlive this; a non-object reads as empty.
  Fields(const nlohmann::json& object, std::string where);

  const std::string& where() const { return where_; }
  const nlohmann::json& json() const { return *j_; }
  // The key is present and not null.
  bool has(std::string_view key) const;

  Status read(std::string_view key, std::string& out) const;
  Status read(std::string_view key, bool& out) const;
  Status read(std::string_view key, double& out) const;
  // An integer (a float with an integral value is not accepted) within [min, max].
  Status read(std::string_view key, int64_t& out, int64_t min = INT64_MIN, int64_t max = INT64_MAX) const;
  Status read(std::string_view key, int& out, int min, int max) const;
  // An array of strings.
  Status read(std::string_view key, std::vector<std::string>& out) const;

  // The object at `key`: nullopt when absent or null, an error when not an object. Its errors
  // say "<where>: <key>".
  Expected<std::optional<Fields>> object(std::string_view key) const;
  // The array at `key`: nullptr when absent or null, an error when not an array.
  Expected<const nlohmann::json*> array(std::string_view key) const;

  // The error for `key` holding a value that is not `what`.
  Status wrong_type(std::string_view key, std::string_view what) const;

 private:
  const nlohmann::json* find(std::string_view key) const;
  const nlohmann::json* j_;
  std::string where_;
};

// When the object has `key` (even null), it must be a string: for keys that say what a file is
// (config.json's model_type), where a null is as wrong as a number.
Status require_string(const Fields& f, std::string_view key);

}  // namespace rlx::json
