#include "support/json_fields.h"

#include <cmath>

#include "rlx/mapped_file.h"

namespace rlx::json {

Expected<nlohmann::json> read_object_file(const std::string& path, uint64_t max_bytes) {
  RLX_ASSIGN_OR_RETURN(std::string text, read_regular_file(path, max_bytes));
  return parse_object(text, path);
}

Expected<nlohmann::json> parse_object(std::string_view text, const std::string& name) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return error(ErrorCode::format_error, name, ": not valid JSON");
  if (!j.is_object()) return error(ErrorCode::format_error, name, ": not a JSON object (", type_phrase(j), ")");
  return j;
}

std::string type_phrase(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::object: return "an object";
    case nlohmann::json::value_t::array: return "an array";
    case nlohmann::json::value_t::string: return "a string";
    case nlohmann::json::value_t::boolean: return "a boolean";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return "an integer";
    case nlohmann::json::value_t::number_float: return "a number";
    default: return "a binary value";
  }
}

Fields::Fields(const nlohmann::json& object, std::string where) : j_(&object), where_(std::move(where)) {}

const nlohmann::json* Fields::find(std::string_view key) const {
  if (!j_->is_object()) return nullptr;
  auto it = j_->find(key);
  if (it == j_->end() || it->is_null()) return nullptr;
  return &*it;
}

bool Fields::has(std::string_view key) const { return find(key) != nullptr; }

Status Fields::wrong_type(std::string_view key, std::string_view what) const {
  const nlohmann::json* v = find(key);
  return error(ErrorCode::format_error, where_, ": '", key, "' must be ", what, ", got ", v ? type_phrase(*v) : "nothing");
}

Status Fields::read(std::string_view key, std::string& out) const {
  const nlohmann::json* v = find(key);
  if (!v) return Status::ok();
  if (!v->is_string()) return wrong_type(key, "a string");
  out = v->get<std::string>();
  return Status::ok();
}

Status Fields::read(std::string_view key, bool& out) const {
  const nlohmann::json* v = find(key);
  if (!v) return Status::ok();
  if (!v->is_boolean()) return wrong_type(key, "true or false");
  out = v->get<bool>();
  return Status::ok();
}

Status Fields::read(std::string_view key, double& out) const {
  const nlohmann::json* v = find(key);
  if (!v) return Status::ok();
  if (!v->is_number()) return wrong_type(key, "a number");
  const double d = v->get<double>();
  if (!std::isfinite(d)) return error(ErrorCode::format_error, where_, ": '", key, "' must be finite");
  out = d;
  return Status::ok();
}

Status Fields::read(std::string_view key, int64_t& out, int64_t min, int64_t max) const {
  const nlohmann::json* v = find(key);
  if (!v) return Status::ok();
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    return error(ErrorCode::format_error, where_, ": '", key, "' is ", v->get<uint64_t>(), ", out of range [", min, ", ", max, "]");
  if (!v->is_number_integer()) return wrong_type(key, "an integer");
  const int64_t x = v->get<int64_t>();
  if (x < min || x > max) return error(ErrorCode::format_error, where_, ": '", key, "' is ", x, ", out of range [", min, ", ", max, "]");
  out = x;
  return Status::ok();
}

Status Fields::read(std::string_view key, int& out, int min, int max) const {
  int64_t x = out;
  RLX_TRY(read(key, x, min, max));
  out = static_cast<int>(x);
  return Status::ok();
}

Status Fields::read(std::string_view key, std::vector<std::string>& out) const {
  const nlohmann::json* v = find(key);
  if (!v) return Status::ok();
  if (!v->is_array()) return wrong_type(key, "an array of strings");
  std::vector<std::string> r;
  for (const nlohmann::json& e : *v) {
    if (!e.is_string()) return error(ErrorCode::format_error, where_, ": '", key, "' must be an array of strings, has ", type_phrase(e));
    r.push_back(e.get<std::string>());
  }
  out = std::move(r);
  return Status::ok();
}

Expected<std::optional<Fields>> Fields::object(std::string_view key) const {
  const nlohmann::json* v = find(key);
  if (!v) return std::optional<Fields>();
  if (!v->is_object()) return wrong_type(key, "an object");
  return std::optional<Fields>(Fields(*v, cat(where_, ": ", key)));
}

Expected<const nlohmann::json*> Fields::array(std::string_view key) const {
  const nlohmann::json* v = find(key);
  if (!v) return static_cast<const nlohmann::json*>(nullptr);
  if (!v->is_array()) return wrong_type(key, "an array");
  return v;
}

Status require_string(const Fields& f, std::string_view key) {
  if (!f.json().is_object()) return Status::ok();
  auto it = f.json().find(key);
  if (it == f.json().end() || it->is_string()) return Status::ok();
  return error(ErrorCode::format_error, f.where(), ": '", key, "' must be a string, got ", type_phrase(*it));
}

}  // namespace rlx::json
