// safetensors reading and writing. The header is parsed with nlohmann's SAX interface against
// the format's schema, so nothing is built for JSON the schema does not allow, duplicate keys
// are seen (a DOM parse keeps the last one silently), and no exception is involved.
#include "rlx/safetensors.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <new>
#include <set>

#include <nlohmann/json.hpp>

#include "rlx/checked.h"
#include "rlx/mapped_file.h"

namespace rlx::safetensors {
namespace {

using json = nlohmann::json;

// The largest model.safetensors.index.json accepted (real ones are a few MB at most).
constexpr uint64_t kMaxIndexBytes = 100'000'000;
// How deep a JSON value the schema ignores (an unknown field) may nest.
constexpr size_t kMaxSkipDepth = 64;

// A name or string from the file, quoted for a message: control bytes escaped, long ones cut.
std::string quote(std::string_view s) {
  constexpr size_t kMax = 120;
  std::string out = "'";
  const size_t n = std::min(s.size(), kMax);
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\'' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > n) out += "...";
  out += "'";
  return out;
}

// The offset of the first byte that does not begin a valid UTF-8 sequence (no overlong forms,
// no surrogates, nothing above U+10FFFF), or npos when all of it is valid.
size_t invalid_utf8_at(const uint8_t* p, size_t n) {
  static constexpr uint32_t kMinForLength[5] = {0, 0, 0x80, 0x800, 0x10000};
  size_t i = 0;
  while (i < n) {
    const uint8_t c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if ((c & 0xe0) == 0xc0) {
      len = 2, cp = c & 0x1fu;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3, cp = c & 0x0fu;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4, cp = c & 0x07u;
    } else {
      return i;
    }
    if (n - i < len) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) return i;
      cp = (cp << 6) | (p[i + k] & 0x3fu);
    }
    if (cp < kMinForLength[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += len;
  }
  return std::string_view::npos;
}

bool is_json_space(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// --- dtypes ---------------------------------------------------------------------------------

enum class Convert : uint8_t { none, f8_e4m3, f8_e5m2, f8_e8m0 };

struct DTypeRow {
  std::string_view name;
  uint64_t bytes;   // per element in the file
  DType dtype;      // what rlx holds after loading
  Convert convert;  // how file bytes become `dtype`
};

constexpr DTypeRow kDTypes[] = {
    {"BOOL", 1, DType::boolean, Convert::none}, {"U8", 1, DType::u8, Convert::none},
    {"I8", 1, DType::i8, Convert::none},        {"I16", 2, DType::i16, Convert::none},
    {"U16", 2, DType::u16, Convert::none},      {"F16", 2, DType::f16, Convert::none},
    {"BF16", 2, DType::bf16, Convert::none},    {"I32", 4, DType::i32, Convert::none},
    {"U32", 4, DType::u32, Convert::none},      {"F32", 4, DType::f32, Convert::none},
    {"F64", 8, DType::f64, Convert::none},      {"I64", 8, DType::i64, Convert::none},
    {"U64", 8, DType::u64, Convert::none},      {"C64", 8, DType::c64, Convert::none},
    {"F8_E4M3", 1, DType::f32, Convert::f8_e4m3}, {"F8_E5M2", 1, DType::f32, Convert::f8_e5m2},
    {"F8_E8M0", 1, DType::f32, Convert::f8_e8m0},
};
// Defined by the format, sub-byte, and not loaded by rlx.
constexpr std::string_view kUnsupportedDTypes[] = {"F4", "F6_E2M3", "F6_E3M2"};

const DTypeRow* find_dtype(std::string_view name) {
  for (const DTypeRow& r : kDTypes)
    if (r.name == name) return &r;
  return nullptr;
}

std::string dtype_list() {
  std::string s;
  for (const DTypeRow& r : kDTypes) s += (s.empty() ? "" : ", ") + std::string(r.name);
  return s;
}

template <float (*F)(uint8_t)>
const float* table() {
  static const auto t = [] {
    std::array<float, 256> a{};
    for (int i = 0; i < 256; ++i) a[i] = F(static_cast<uint8_t>(i));
    return a;
  }();
  return t.data();
}

// --- the header's schema, as SAX events -----------------------------------------------------

enum class Kind : uint8_t { object, array, string, unsigned_int, negative_int, fraction, boolean, null };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::object: return "an object";
    case Kind::array: return "an array";
    case Kind::string: return "a string";
    case Kind::unsigned_int: return "an integer";
    case Kind::negative_int: return "a negative integer";
    case Kind::fraction: return "a non-integer number";
    case Kind::boolean: return "a boolean";
    case Kind::null: return "null";
  }
  return "a value";
}

// Consumes a JSON value the schema ignores, still refusing duplicate keys and deep nesting.
class Skipper {
 public:
  bool active() const { return !stack_.empty(); }
  // Enters an object or array; returns an error text or "".
  std::string open(bool object) {
    if (stack_.size() >= kMaxSkipDepth) return cat("a value nests deeper than ", kMaxSkipDepth, " levels");
    stack_.push_back(object ? std::optional<std::set<std::string>>(std::in_place) : std::nullopt);
    return {};
  }
  void close() { stack_.pop_back(); }
  std::string key(const std::string& k) {
    if (!stack_.back()->insert(k).second) return cat("duplicate key ", quote(k));
    return {};
  }

 private:
  std::vector<std::optional<std::set<std::string>>> stack_;
};

// A tensor entry as read, before its checks.
struct RawEntry {
  std::string name;
  bool has_dtype = false, has_shape = false, has_offsets = false;
  std::string dtype;
  std::vector<uint64_t> shape;
  std::vector<uint64_t> offsets;
};

// A tensor entry that passed its own checks (not yet those against the other entries).
struct Entry {
  std::string name;
  const DTypeRow* row;
  Sizes sizes;
  uint64_t begin, end, count;
};

std::string shape_text(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Checks one entry on its own: fields present, dtype known, element count and byte size
// without overflow, offsets in order, inside the data section and matching the size.
Status check_entry(RawEntry& e, uint64_t data_len, Entry* out) {
  const std::string where = cat("tensor ", quote(e.name));
  if (!e.has_dtype) return error(ErrorCode::format_error, where, ": missing \"dtype\"");
  if (!e.has_shape) return error(ErrorCode::format_error, where, ": missing \"shape\"");
  if (!e.has_offsets) return error(ErrorCode::format_error, where, ": missing \"data_offsets\"");
  const DTypeRow* row = find_dtype(e.dtype);
  if (!row) {
    for (std::string_view u : kUnsupportedDTypes)
      if (u == e.dtype)
        return error(ErrorCode::unsupported, where, ": dtype ", e.dtype, " is defined by safetensors but rlx does not load it");
    return error(ErrorCode::format_error, where, ": unknown dtype ", quote(e.dtype), " (expected one of ", dtype_list(), ")");
  }
  // Every prefix product must fit int64: Sizes are int64 and rlx::numel multiplies unchecked.
  constexpr auto kMaxI64 = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  uint64_t count = 1;
  Sizes sizes;
  sizes.reserve(e.shape.size());
  for (size_t i = 0; i < e.shape.size(); ++i) {
    const uint64_t d = e.shape[i];
    auto next = checked_mul(count, d);
    if (d > kMaxI64 || !next || *next > kMaxI64)
      return error(ErrorCode::format_error, where, ": element count of shape ", shape_text(e.shape), " overflows (at dimension ",
                   i, ")");
    count = *next;
    sizes.push_back(static_cast<int64_t>(d));
  }
  auto nbytes = checked_mul(count, row->bytes);
  if (!nbytes)
    return error(ErrorCode::format_error, where, ": byte size of ", row->name, " x ", shape_text(e.shape), " overflows");
  if (e.offsets.size() != 2)
    return error(ErrorCode::format_error, where, ": \"data_offsets\" has ", e.offsets.size(), " elements, expected 2 [begin, end]");
  const uint64_t begin = e.offsets[0], end = e.offsets[1];
  if (begin > end)
    return error(ErrorCode::format_error, where, ": data_offsets [", begin, ", ", end, "] are reversed (begin > end)");
  if (end > data_len)
    return error(ErrorCode::format_error, where, ": data_offsets end ", end, " is past the end of the data section (", data_len,
                 " bytes)");
  if (end - begin != *nbytes)
    return error(ErrorCode::format_error, where, ": size mismatch: data_offsets [", begin, ", ", end, "] hold ", end - begin,
                 " bytes but ", row->name, " x ", shape_text(e.shape), " needs ", *nbytes);
  *out = Entry{std::move(e.name), row, std::move(sizes), begin, end, count};
  return Status::ok();
}

// Common SAX plumbing: every scalar and container start becomes one on_value(Kind) call with
// the payload in str_/uint_; a refusal stores the message in error_ and stops the parse.
template <class Derived>
class SaxBase {
 public:
  std::string error_;  // a schema violation ("" when none)
  ErrorCode error_code_ = ErrorCode::format_error;
  std::string syntax_error_;  // a JSON syntax error ("" when none)

  bool null() { return self().on_value(Kind::null); }
  bool boolean(bool v) {
    str_ = v ? "true" : "false";
    return self().on_value(Kind::boolean);
  }
  bool number_integer(json::number_integer_t v) {
    str_ = std::to_string(v);
    return self().on_value(v < 0 ? Kind::negative_int : Kind::unsigned_int);
  }
  bool number_unsigned(json::number_unsigned_t v) {
    uint_ = v;
    str_ = std::to_string(v);
    return self().on_value(Kind::unsigned_int);
  }
  bool number_float(json::number_float_t, const std::string& text) {
    str_ = text;
    return self().on_value(Kind::fraction);
  }
  bool string(std::string& s) {
    str_ = std::move(s);
    return self().on_value(Kind::string);
  }
  bool binary(json::binary_t&) { return fail("binary values are not JSON"); }
  bool start_object(std::size_t) { return self().on_value(Kind::object); }
  bool start_array(std::size_t) { return self().on_value(Kind::array); }
  bool parse_error(std::size_t position, const std::string&, const json::exception& ex) {
    std::string what = ex.what();
    if (what.size() > 240) what = what.substr(0, 240) + "...";
    syntax_error_ = cat("byte ", position, " of the JSON: ", what);
    return false;
  }

 protected:
  Derived& self() { return static_cast<Derived&>(*this); }
  bool fail(std::string msg, ErrorCode code = ErrorCode::format_error) {
    error_ = std::move(msg);
    error_code_ = code;
    return false;
  }
  // Handles a value event while skipping; returns false on error.
  bool skip_value(Kind k) {
    if (k == Kind::object || k == Kind::array) {
      std::string e = skip_.open(k == Kind::object);
      if (!e.empty()) return fail(e);
    }
    return true;
  }
  // Handles an end event while skipping; returns true when the skipped value is complete.
  bool skip_end() {
    skip_.close();
    return !skip_.active();
  }

  Skipper skip_;
  std::string str_;
  uint64_t uint_ = 0;
  std::string key_;
};

class HeaderSax : public SaxBase<HeaderSax> {
 public:
  explicit HeaderSax(uint64_t data_len) : data_len_(data_len) {}
  std::vector<Entry> entries;
  std::map<std::string, std::string> metadata;
  int metadata_count = 0;

  bool on_value(Kind k) {
    switch (ctx_) {
      case Ctx::top:
        if (k != Kind::object) return fail(cat("the header is ", kind_name(k), ", not a JSON object"));
        ctx_ = Ctx::top_object;
        return true;
      case Ctx::top_value:
        if (key_ == "__metadata__") {
          ++metadata_count;
          if (k == Kind::null) {
            ctx_ = Ctx::top_object;
            return true;
          }
          if (k != Kind::object)
            return fail(cat("\"__metadata__\" is ", kind_name(k), ", not an object of strings"));
          ctx_ = Ctx::meta;
          return true;
        }
        if (k != Kind::object) return fail(cat("tensor ", quote(key_), ": entry is ", kind_name(k), ", not an object"));
        cur_ = RawEntry{};
        cur_.name = std::move(key_);
        ctx_ = Ctx::entry;
        return true;
      case Ctx::meta_value:
        if (k != Kind::string)
          return fail(cat("\"__metadata__\" value for key ", quote(key_), " is ", kind_name(k), ", not a string"));
        if (!metadata.emplace(std::move(key_), std::move(str_)).second)
          return fail("duplicate key in \"__metadata__\"");  // unreachable: key() checks first
        ctx_ = Ctx::meta;
        return true;
      case Ctx::entry_value:
        return entry_value(k);
      case Ctx::array:
        return array_element(k);
      case Ctx::skip:
        return skip_value(k) || in_tensor();
      default:
        return fail("unexpected JSON event (internal)", ErrorCode::internal);
    }
  }

  bool key(std::string& k) {
    switch (ctx_) {
      case Ctx::top_object:
        key_ = std::move(k);
        ctx_ = Ctx::top_value;
        return true;
      case Ctx::meta:
        if (metadata.count(k)) return fail(cat("duplicate key ", quote(k), " in \"__metadata__\""));
        key_ = std::move(k);
        ctx_ = Ctx::meta_value;
        return true;
      case Ctx::entry: {
        RawEntry& e = cur_;
        if (k == "dtype" || k == "shape" || k == "data_offsets") {
          bool& seen = k == "dtype" ? e.has_dtype : k == "shape" ? e.has_shape : e.has_offsets;
          if (seen) return fail(cat("tensor ", quote(e.name), ": duplicate field \"", k, "\""));
          seen = true;
          field_ = k == "dtype" ? Field::dtype : k == "shape" ? Field::shape : Field::offsets;
        } else {
          if (!other_fields_.insert(k).second)
            return fail(cat("tensor ", quote(e.name), ": duplicate field ", quote(k)));
          field_ = Field::other;
        }
        ctx_ = Ctx::entry_value;
        return true;
      }
      case Ctx::skip: {
        std::string e = skip_.key(k);
        return e.empty() ? true : fail(cat("tensor ", quote(cur_.name), ": ", e));
      }
      default:
        return fail("unexpected JSON key (internal)", ErrorCode::internal);
    }
  }

  bool end_object() {
    switch (ctx_) {
      case Ctx::top_object:
        ctx_ = Ctx::done;
        return true;
      case Ctx::meta:
        ctx_ = Ctx::top_object;
        return true;
      case Ctx::entry: {
        other_fields_.clear();
        Entry checked;
        Status s = check_entry(cur_, data_len_, &checked);
        if (!s.is_ok()) return fail(s.message(), s.code());
        entries.push_back(std::move(checked));
        ctx_ = Ctx::top_object;
        return true;
      }
      case Ctx::skip:
        if (skip_end()) ctx_ = Ctx::entry;
        return true;
      default:
        return fail("unexpected end of object (internal)", ErrorCode::internal);
    }
  }

  bool end_array() {
    switch (ctx_) {
      case Ctx::array:
        ctx_ = Ctx::entry;
        return true;
      case Ctx::skip:
        if (skip_end()) ctx_ = Ctx::entry;
        return true;
      default:
        return fail("unexpected end of array (internal)", ErrorCode::internal);
    }
  }

  bool complete() const { return ctx_ == Ctx::done; }

 private:
  enum class Ctx : uint8_t { top, top_object, top_value, meta, meta_value, entry, entry_value, array, skip, done };
  enum class Field : uint8_t { dtype, shape, offsets, other };

  bool entry_value(Kind k) {
    RawEntry& e = cur_;
    switch (field_) {
      case Field::dtype:
        if (k != Kind::string) return fail(cat("tensor ", quote(e.name), ": \"dtype\" is ", kind_name(k), ", not a string"));
        e.dtype = std::move(str_);
        ctx_ = Ctx::entry;
        return true;
      case Field::shape:
      case Field::offsets:
        if (k != Kind::array)
          return fail(cat("tensor ", quote(e.name), ": \"", field_ == Field::shape ? "shape" : "data_offsets", "\" is ",
                          kind_name(k), ", not an array"));
        ctx_ = Ctx::array;
        return true;
      case Field::other:
        if (k == Kind::object || k == Kind::array) {
          ctx_ = Ctx::skip;
          return skip_value(k) || in_tensor();
        }
        ctx_ = Ctx::entry;
        return true;
    }
    return false;
  }

  bool array_element(Kind k) {
    RawEntry& e = cur_;
    const bool shape = field_ == Field::shape;
    std::vector<uint64_t>& v = shape ? e.shape : e.offsets;
    if (k != Kind::unsigned_int) {
      std::string shown = (k == Kind::object || k == Kind::array || k == Kind::null) ? "" : " (" + quote(str_) + ")";
      return fail(cat("tensor ", quote(e.name), ": \"", shape ? "shape" : "data_offsets", "\" element ", v.size(), " is ",
                      kind_name(k), shown, ", not a non-negative integer"));
    }
    if (shape && v.size() >= kMaxRank)
      return fail(cat("tensor ", quote(e.name), ": \"shape\" has more than ", kMaxRank, " dimensions"));
    if (!shape && v.size() >= 2)
      return fail(cat("tensor ", quote(e.name), ": \"data_offsets\" has more than 2 elements, expected [begin, end]"));
    v.push_back(uint_);
    return true;
  }

  // Prefixes the pending error with the current tensor's name; returns false.
  bool in_tensor() {
    error_ = cat("tensor ", quote(cur_.name), ": ", error_);
    return false;
  }

  Ctx ctx_ = Ctx::top;
  Field field_ = Field::other;
  uint64_t data_len_;
  RawEntry cur_;  // the entry being read
  std::set<std::string> other_fields_;
};

// Runs a SAX handler over [begin, end); errors are prefixed with the file `name`, and JSON
// syntax errors say `what` (the header, the index) is not valid JSON.
template <class Sax>
Status run_sax(Sax& sax, const char* begin, const char* end, const std::string& name, const char* what) {
  bool ok = false;
  try {
    ok = json::sax_parse(begin, end, &sax, json::input_format_t::json, /*strict=*/true, /*ignore_comments=*/false);
  } catch (const std::bad_alloc&) {
    return error(ErrorCode::runtime_error, name, ": out of memory while parsing ", what);
  } catch (const std::exception& e) {  // nlohmann reports through parse_error(); this is a guard
    return error(ErrorCode::format_error, name, ": ", what, " is not valid JSON: ", e.what());
  }
  if (!sax.error_.empty()) return Status(sax.error_code_, cat(name, ": ", sax.error_));
  if (!sax.syntax_error_.empty())
    return error(ErrorCode::format_error, name, ": ", what, " is not valid JSON: ", sax.syntax_error_);
  if (!ok || !sax.complete()) return error(ErrorCode::format_error, name, ": ", what, " is not valid JSON: it ends early");
  return Status::ok();
}

// --- sharded checkpoints ---------------------------------------------------------------------

class IndexSax : public SaxBase<IndexSax> {
 public:
  std::map<std::string, std::string> weight_map;  // tensor -> shard file name
  std::map<std::string, std::string> metadata;
  bool has_weight_map = false;

  bool on_value(Kind k) {
    switch (ctx_) {
      case Ctx::top:
        if (k != Kind::object) return fail(cat("the index is ", kind_name(k), ", not a JSON object"));
        ctx_ = Ctx::top_object;
        return true;
      case Ctx::top_value:
        if (key_ == "weight_map") {
          if (k != Kind::object) return fail(cat("\"weight_map\" is ", kind_name(k), ", not an object"));
          has_weight_map = true;
          ctx_ = Ctx::weight_map;
          return true;
        }
        if (key_ == "metadata" && k == Kind::object) {
          ctx_ = Ctx::meta;
          return true;
        }
        return begin_skip(k, Ctx::top_object);
      case Ctx::weight_map_value:
        if (k != Kind::string)
          return fail(cat("\"weight_map\" entry for tensor ", quote(key_), " is ", kind_name(k), ", not a file name"));
        weight_map.emplace(std::move(key_), std::move(str_));
        ctx_ = Ctx::weight_map;
        return true;
      case Ctx::meta_value:
        if (k == Kind::object || k == Kind::array) return begin_skip(k, Ctx::meta);
        metadata.emplace(std::move(key_), k == Kind::null ? std::string("null") : std::move(str_));
        ctx_ = Ctx::meta;
        return true;
      case Ctx::skip:
        return skip_value(k);
      default:
        return fail("unexpected JSON event (internal)", ErrorCode::internal);
    }
  }

  bool key(std::string& k) {
    switch (ctx_) {
      case Ctx::top_object:
        if (!top_keys_.insert(k).second) return fail(cat("duplicate key ", quote(k)));
        key_ = std::move(k);
        ctx_ = Ctx::top_value;
        return true;
      case Ctx::weight_map:
        if (weight_map.count(k)) return fail(cat("tensor ", quote(k), " is listed twice in \"weight_map\""));
        key_ = std::move(k);
        ctx_ = Ctx::weight_map_value;
        return true;
      case Ctx::meta:
        if (!meta_keys_.insert(k).second) return fail(cat("duplicate key ", quote(k), " in \"metadata\""));
        key_ = std::move(k);
        ctx_ = Ctx::meta_value;
        return true;
      case Ctx::skip: {
        std::string e = skip_.key(k);
        return e.empty() ? true : fail(e);
      }
      default:
        return fail("unexpected JSON key (internal)", ErrorCode::internal);
    }
  }

  bool end_object() {
    switch (ctx_) {
      case Ctx::top_object:
        ctx_ = Ctx::done;
        return true;
      case Ctx::weight_map:
      case Ctx::meta:
        ctx_ = Ctx::top_object;
        return true;
      case Ctx::skip:
        if (skip_end()) ctx_ = after_skip_;
        return true;
      default:
        return fail("unexpected end of object (internal)", ErrorCode::internal);
    }
  }
  bool end_array() {
    if (ctx_ != Ctx::skip) return fail("unexpected end of array (internal)", ErrorCode::internal);
    if (skip_end()) ctx_ = after_skip_;
    return true;
  }
  bool complete() const { return ctx_ == Ctx::done; }

 private:
  enum class Ctx : uint8_t { top, top_object, top_value, weight_map, weight_map_value, meta, meta_value, skip, done };

  bool begin_skip(Kind k, Ctx after) {
    if (k != Kind::object && k != Kind::array) {
      ctx_ = after;
      return true;
    }
    after_skip_ = after;
    ctx_ = Ctx::skip;
    return skip_value(k);
  }

  Ctx ctx_ = Ctx::top;
  Ctx after_skip_ = Ctx::top_object;
  std::set<std::string> top_keys_;
  std::set<std::string> meta_keys_;
};

namespace fs = std::filesystem;

bool is_dir(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// Checks a shard name from the index and resolves it inside `root` (canonical).
Expected<fs::path> resolve_shard(const fs::path& root, const std::string& shard, const std::string& tensor,
                                 const std::string& index_path) {
  const std::string where = cat(index_path, ": shard ", quote(shard), " (for tensor ", quote(tensor), ")");
  if (shard.empty()) return error(ErrorCode::format_error, where, ": the file name is empty");
  if (shard.find('\0') != std::string::npos) return error(ErrorCode::format_error, where, ": the file name holds a NUL byte");
  if (shard[0] == '/')
    return error(ErrorCode::format_error, where, ": absolute path; shards must be inside the index's folder");
  for (size_t b = 0; b <= shard.size();) {
    size_t e = shard.find('/', b);
    if (e == std::string::npos) e = shard.size();
    if (shard.compare(b, e - b, "..") == 0)
      return error(ErrorCode::format_error, where, ": the path contains '..'; shards must be inside the index's folder");
    b = e + 1;
  }
  std::error_code ec;
  fs::path resolved = fs::canonical(root / shard, ec);
  if (ec) {
    if (ec == std::errc::no_such_file_or_directory)
      return error(ErrorCode::format_error, where, ": no such file in ", root.string());
    return error(ErrorCode::io_error, where, ": ", ec.message());
  }
  const std::string r = root.string(), s = resolved.string();
  const std::string prefix = r.back() == '/' ? r : r + "/";
  if (s.compare(0, prefix.size(), prefix) != 0)
    return error(ErrorCode::format_error, where, ": resolves to ", s, ", outside the index's folder ", r,
                 " (a symlink leaving the folder?)");
  return resolved;
}

Expected<File> load_index(const std::string& path) {
  RLX_ASSIGN_OR_RETURN(std::shared_ptr<Storage> bytes, map_file(path));
  const size_t n = bytes->size();
  if (n > kMaxIndexBytes)
    return error(ErrorCode::format_error, path, ": the index is ", n, " bytes; the limit is ", kMaxIndexBytes);
  const char* text = reinterpret_cast<const char*>(bytes->data());
  if (size_t bad = invalid_utf8_at(bytes->data(), n); bad != std::string_view::npos)
    return error(ErrorCode::format_error, path, ": the index is not valid UTF-8 (byte ", bad, ")");
  if (const void* nul = std::memchr(text, 0, n))
    return error(ErrorCode::format_error, path, ": the index is not valid JSON: a NUL byte at offset ",
                 static_cast<const char*>(nul) - text);
  IndexSax sax;
  RLX_TRY(run_sax(sax, text, text + n, path, "the index"));
  if (!sax.has_weight_map) return error(ErrorCode::format_error, path, ": the index has no \"weight_map\" object");

  std::error_code ec;
  fs::path folder = fs::path(path).parent_path();
  if (folder.empty()) folder = ".";
  const fs::path root = fs::canonical(folder, ec);
  if (ec) return error(ErrorCode::io_error, path, ": cannot resolve its folder: ", ec.message());

  // Shards by resolved path, so two spellings of one file map it once.
  struct Shard {
    std::string label;  // as the index spells it (the first spelling seen)
    std::set<std::string> listed;
    File file;
  };
  std::map<fs::path, Shard> shards;
  std::map<std::string, const fs::path*> listed_in;  // tensor -> the shard the index names
  for (const auto& [tensor, shard_name] : sax.weight_map) {
    RLX_ASSIGN_OR_RETURN(fs::path resolved, resolve_shard(root, shard_name, tensor, path));
    auto [it, fresh] = shards.try_emplace(resolved);
    if (fresh) it->second.label = shard_name;
    it->second.listed.insert(tensor);
    listed_in[tensor] = &it->first;
  }

  File out;
  out.metadata = sax.metadata;
  std::map<std::string, const fs::path*> found_in;  // tensor -> the shard that holds it
  for (auto& [resolved, shard] : shards) {
    const std::string shard_path = (fs::path(folder) / shard.label).string();
    RLX_ASSIGN_OR_RETURN(std::shared_ptr<Storage> data, map_file(resolved.string()));
    RLX_ASSIGN_OR_RETURN(shard.file, parse(std::move(data), shard_path));
    for (const std::string& name : shard.file.names) {
      auto [it, fresh] = found_in.emplace(name, &resolved);
      if (!fresh)
        return error(ErrorCode::format_error, path, ": tensor ", quote(name), " appears in both shard ",
                     quote(shards[*it->second].label), " and shard ", quote(shard.label));
    }
  }
  for (auto& [resolved, shard] : shards) {
    for (const std::string& name : shard.file.names) {
      auto it = listed_in.find(name);
      if (it == listed_in.end())
        return error(ErrorCode::format_error, path, ": shard ", quote(shard.label), " holds tensor ", quote(name),
                     ", which the index does not list");
      if (*it->second != resolved)
        return error(ErrorCode::format_error, path, ": tensor ", quote(name), " is in shard ", quote(shard.label),
                     " but the index lists it in shard ", quote(shards[*it->second].label));
    }
    for (const std::string& name : shard.listed)
      if (!shard.file.tensors.count(name))
        return error(ErrorCode::format_error, path, ": tensor ", quote(name), " listed in the index is missing from shard ",
                     quote(shard.label));
  }
  for (auto& [resolved, shard] : shards) {
    for (auto& [k, v] : shard.file.metadata) out.metadata.emplace(k, v);
    for (std::string& name : shard.file.names) {
      out.tensors.emplace(name, std::move(shard.file.tensors[name]));
      out.names.push_back(std::move(name));
    }
  }
  return out;
}

// --- writing ---------------------------------------------------------------------------------

void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          out += b;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

bool valid_utf8(std::string_view s) {
  return invalid_utf8_at(reinterpret_cast<const uint8_t*>(s.data()), s.size()) == std::string_view::npos;
}

}  // namespace

// --- public ----------------------------------------------------------------------------------

float f8_e4m3_to_f32(uint8_t v) {
  const int e = (v >> 3) & 0xf, m = v & 0x7;
  float mag;
  if (e == 0xf && m == 0x7) {
    mag = std::numeric_limits<float>::quiet_NaN();
  } else if (e == 0) {
    mag = std::ldexp(static_cast<float>(m), -9);  // m/8 * 2^-6
  } else {
    mag = std::ldexp(static_cast<float>(8 + m), e - 10);  // (1 + m/8) * 2^(e-7)
  }
  return (v & 0x80) ? -mag : mag;
}

float f8_e5m2_to_f32(uint8_t v) {
  const int e = (v >> 2) & 0x1f, m = v & 0x3;
  float mag;
  if (e == 0x1f) {
    mag = m == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  } else if (e == 0) {
    mag = std::ldexp(static_cast<float>(m), -16);  // m/4 * 2^-14
  } else {
    mag = std::ldexp(static_cast<float>(4 + m), e - 17);  // (1 + m/4) * 2^(e-15)
  }
  return (v & 0x80) ? -mag : mag;
}

float f8_e8m0_to_f32(uint8_t v) {
  if (v == 0xff) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(v) - 127);
}

std::optional<std::string_view> dtype_to_safetensors(DType t) {
  for (const DTypeRow& r : kDTypes)
    if (r.convert == Convert::none && r.dtype == t) return r.name;
  return std::nullopt;
}

std::optional<DType> dtype_from_safetensors(std::string_view name) {
  if (const DTypeRow* r = find_dtype(name)) return r->dtype;
  return std::nullopt;
}

Expected<File> parse(std::shared_ptr<Storage> bytes, const std::string& name) {
  if (!bytes) return error(ErrorCode::invalid_argument, name, ": no bytes to parse");
  const uint8_t* base = bytes->data();
  const uint64_t size = bytes->size();
  if (size < 8)
    return error(ErrorCode::format_error, name, ": the file is ", size,
                 " bytes, shorter than the 8-byte header length that starts a safetensors file");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | base[i];
  if (n > kMaxHeaderBytes)
    return error(ErrorCode::format_error, name, ": header length ", n, " is over the limit of ", kMaxHeaderBytes, " bytes");
  if (n > size - 8)
    return error(ErrorCode::format_error, name, ": header length ", n, " runs past the end of the file (",
                 size - 8, " bytes follow the length)");
  const uint8_t* header = base + 8;
  if (size_t bad = invalid_utf8_at(header, n); bad != std::string_view::npos)
    return error(ErrorCode::format_error, name, ": the header is not valid UTF-8 (file offset ", 8 + bad, ")");
  // nlohmann's lexer takes a NUL byte for the end of input, which would let "{}\0junk" pass;
  // JSON allows no raw NUL anywhere, so refuse it before the parser sees it.
  if (const void* nul = std::memchr(header, 0, n))
    return error(ErrorCode::format_error, name, ": the header is not valid JSON: a NUL byte at file offset ",
                 8 + (static_cast<const uint8_t*>(nul) - header));
  size_t first = 0;
  while (first < n && is_json_space(header[first])) ++first;
  if (first == n) return error(ErrorCode::format_error, name, ": the header is empty, not a JSON object");
  if (header[first] != '{')
    return error(ErrorCode::format_error, name, ": the header is not a JSON object (its first byte is ",
                 static_cast<int>(header[first]), ", not '{')");

  const uint64_t data_start = 8 + n;
  const uint64_t data_len = size - data_start;
  HeaderSax sax(data_len);
  const char* text = reinterpret_cast<const char*>(header);
  RLX_TRY(run_sax(sax, text, text + n, name, "the header"));
  if (sax.metadata_count > 1) return error(ErrorCode::format_error, name, ": duplicate \"__metadata__\" in the header");

  std::vector<Entry>& entries = sax.entries;
  // duplicate names (a DOM parse would keep the last silently)
  {
    std::vector<const std::string*> sorted;
    sorted.reserve(entries.size());
    for (const Entry& e : entries) sorted.push_back(&e.name);
    std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return *a < *b; });
    for (size_t i = 1; i < sorted.size(); ++i)
      if (*sorted[i] == *sorted[i - 1])
        return error(ErrorCode::format_error, name, ": duplicate tensor name ", quote(*sorted[i]), " in the header");
  }

  // The tensors, sorted by position, must tile the data section: no overlap, no gap, no tail.
  std::vector<size_t> order(entries.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (entries[a].begin != entries[b].begin) return entries[a].begin < entries[b].begin;
    if (entries[a].end != entries[b].end) return entries[a].end < entries[b].end;
    return entries[a].name < entries[b].name;
  });
  uint64_t pos = 0;
  const size_t none = static_cast<size_t>(-1);
  size_t prev = none;
  for (size_t i : order) {
    const Entry& c = entries[i];
    if (c.begin < pos)
      return error(ErrorCode::format_error, name, ": tensor ", quote(entries[i].name), " (bytes [", c.begin, ", ", c.end,
                   ")) overlaps tensor ", quote(entries[prev].name), " (bytes [", entries[prev].begin, ", ",
                   entries[prev].end, "))");
    if (c.begin > pos) {
      if (prev == none)
        return error(ErrorCode::format_error, name, ": gap: the first ", c.begin, " bytes of the data section, before tensor ",
                     quote(entries[i].name), ", belong to no tensor");
      return error(ErrorCode::format_error, name, ": gap: ", c.begin - pos, " bytes between tensor ",
                   quote(entries[prev].name), " (ends at ", pos, ") and tensor ", quote(entries[i].name),
                   " (begins at ", c.begin, ") belong to no tensor");
    }
    pos = c.end;
    prev = i;
  }
  if (pos != data_len)
    return error(ErrorCode::format_error, name, ": ", data_len - pos, " trailing bytes after ",
                 prev == none ? std::string("the header") : "tensor " + quote(entries[prev].name),
                 " are not covered by any tensor (the data section is ", data_len, " bytes)");

  File out;
  out.metadata = std::move(sax.metadata);
  out.names.reserve(order.size());
  for (size_t i : order) {
    Entry& c = entries[i];
    const uint8_t* src = base + data_start + c.begin;
    Tensor t;
    if (c.row->convert != Convert::none) {
      std::shared_ptr<Storage> conv = allocate_storage(static_cast<size_t>(c.count) * sizeof(float));
      if (!conv)
        return error(ErrorCode::runtime_error, name, ": tensor ", quote(entries[i].name), ": cannot allocate ",
                     c.count * sizeof(float), " bytes to convert ", c.row->name, " to f32");
      const float* tab = c.row->convert == Convert::f8_e4m3   ? table<f8_e4m3_to_f32>()
                         : c.row->convert == Convert::f8_e5m2 ? table<f8_e5m2_to_f32>()
                                                              : table<f8_e8m0_to_f32>();
      float* dst = reinterpret_cast<float*>(conv->data());
      for (uint64_t k = 0; k < c.count; ++k) dst[k] = tab[src[k]];
      t = Tensor(DType::f32, std::move(c.sizes), std::move(conv));
    } else {
      if (c.row->dtype == DType::boolean) {
        for (uint64_t k = 0; k < c.count; ++k)
          if (src[k] > 1)
            return error(ErrorCode::format_error, name, ": tensor ", quote(entries[i].name), ": BOOL element ", k,
                         " is byte ", static_cast<int>(src[k]), "; BOOL elements must be 0 or 1");
      }
      t = Tensor(c.row->dtype, std::move(c.sizes), bytes, static_cast<size_t>(data_start + c.begin));
    }
    out.tensors.emplace(entries[i].name, std::move(t));
    out.names.push_back(std::move(entries[i].name));
  }
  return out;
}

Expected<File> load(const std::string& path) {
  if (is_dir(path)) {
    const std::string dir = path.back() == '/' ? path : path + "/";
    if (exists(dir + "model.safetensors.index.json")) return load_index(dir + "model.safetensors.index.json");
    if (exists(dir + "model.safetensors")) return load(dir + "model.safetensors");
    return error(ErrorCode::io_error, path, ": the folder has neither model.safetensors.index.json nor model.safetensors");
  }
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) return load_index(path);
  RLX_ASSIGN_OR_RETURN(std::shared_ptr<Storage> bytes, map_file(path));
  return parse(std::move(bytes), path);
}

Status save(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
            const std::map<std::string, std::string>& metadata) {
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      if (!valid_utf8(k) || !valid_utf8(v))
        return error(ErrorCode::invalid_argument, path, ": metadata key ", quote(k), ": key and value must be valid UTF-8");
      if (!first) header += ',';
      first = false;
      append_json_string(header, k);
      header += ':';
      append_json_string(header, v);
    }
    header += "}";
  }
  std::set<std::string_view> seen;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    const std::string where = cat(path, ": tensor ", quote(name));
    if (name == "__metadata__") return error(ErrorCode::invalid_argument, where, ": the name is reserved for metadata");
    if (!seen.insert(name).second) return error(ErrorCode::invalid_argument, where, ": the name is given twice");
    if (!valid_utf8(name)) return error(ErrorCode::invalid_argument, where, ": the name is not valid UTF-8");
    auto dname = dtype_to_safetensors(t.dtype());
    if (!dname)
      return error(ErrorCode::invalid_argument, where, ": dtype ", dtype_name(t.dtype()), " has no safetensors equivalent");
    uint64_t count = 1;
    for (int64_t d : t.sizes()) {
      auto next = d < 0 ? std::nullopt : checked_mul(count, static_cast<uint64_t>(d));
      if (!next) return error(ErrorCode::invalid_argument, where, ": bad shape ", sizes_to_string(t.sizes()));
      count = *next;
    }
    auto nbytes = checked_mul(count, static_cast<uint64_t>(dtype_bits(t.dtype()) / 8));
    if (!nbytes) return error(ErrorCode::invalid_argument, where, ": byte size overflows");
    if (*nbytes > 0) {
      const auto& st = t.storage();
      auto need = checked_add(t.byte_offset(), *nbytes);
      if (!st || !need || st->size() < *need)
        return error(ErrorCode::invalid_argument, where, ": the tensor's storage does not hold its ", *nbytes, " bytes");
    }
    if (header.size() > 1) header += ',';
    append_json_string(header, name);
    header += ":{\"dtype\":\"";
    header += *dname;
    header += "\",\"shape\":[";
    for (size_t i = 0; i < t.sizes().size(); ++i) header += (i ? "," : "") + std::to_string(t.sizes()[i]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + *nbytes) + "]}";
    offset += *nbytes;
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  if (header.size() > kMaxHeaderBytes)
    return error(ErrorCode::invalid_argument, path, ": the header would be ", header.size(), " bytes, over the ",
                 kMaxHeaderBytes, "-byte limit readers enforce");

  return write_file_via_rename(path, [&](std::FILE* f, const std::string& tmp) -> Status {
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(header.size()) >> (8 * i));
    bool ok = std::fwrite(len, 1, 8, f) == 8 && std::fwrite(header.data(), 1, header.size(), f) == header.size();
    for (const auto& [name, t] : tensors) {
      if (!ok) break;
      const size_t nb = t.nbytes();
      if (nb) ok = std::fwrite(t.bytes(), 1, nb, f) == nb;
    }
    if (!ok) return error(ErrorCode::io_error, "cannot write ", tmp, ": ", std::strerror(errno));
    return Status::ok();
  });
}

}  // namespace rlx::safetensors
