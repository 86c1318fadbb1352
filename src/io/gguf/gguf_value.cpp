// GGUF metadata values, ggml type traits, tensor infos and the typed accessors of gguf::File.
#include <array>
#include <cctype>
#include <charconv>
#include <cstring>
#include <limits>

#include "gguf_internal.h"

namespace rlx::gguf {
namespace {

constexpr size_t kScalarBytes[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

constexpr std::array<GgmlTypeInfo, 36> kGgmlTypes = {{
    {GgmlType::f32, "f32", 1, 4, DType::f32},       {GgmlType::f16, "f16", 1, 2, DType::f16},
    {GgmlType::q4_0, "q4_0", 32, 18, {}},           {GgmlType::q4_1, "q4_1", 32, 20, {}},
    {GgmlType::q5_0, "q5_0", 32, 22, {}},           {GgmlType::q5_1, "q5_1", 32, 24, {}},
    {GgmlType::q8_0, "q8_0", 32, 34, {}},           {GgmlType::q8_1, "q8_1", 32, 36, {}},
    {GgmlType::q2_k, "q2_k", 256, 84, {}},          {GgmlType::q3_k, "q3_k", 256, 110, {}},
    {GgmlType::q4_k, "q4_k", 256, 144, {}},         {GgmlType::q5_k, "q5_k", 256, 176, {}},
    {GgmlType::q6_k, "q6_k", 256, 210, {}},         {GgmlType::q8_k, "q8_k", 256, 292, {}},
    {GgmlType::iq2_xxs, "iq2_xxs", 256, 66, {}},    {GgmlType::iq2_xs, "iq2_xs", 256, 74, {}},
    {GgmlType::iq3_xxs, "iq3_xxs", 256, 98, {}},    {GgmlType::iq1_s, "iq1_s", 256, 50, {}},
    {GgmlType::iq4_nl, "iq4_nl", 32, 18, {}},       {GgmlType::iq3_s, "iq3_s", 256, 110, {}},
    {GgmlType::iq2_s, "iq2_s", 256, 82, {}},        {GgmlType::iq4_xs, "iq4_xs", 256, 136, {}},
    {GgmlType::i8, "i8", 1, 1, DType::i8},          {GgmlType::i16, "i16", 1, 2, DType::i16},
    {GgmlType::i32, "i32", 1, 4, DType::i32},       {GgmlType::i64, "i64", 1, 8, DType::i64},
    {GgmlType::f64, "f64", 1, 8, DType::f64},       {GgmlType::iq1_m, "iq1_m", 256, 56, {}},
    {GgmlType::bf16, "bf16", 1, 2, DType::bf16},    {GgmlType::tq1_0, "tq1_0", 256, 54, {}},
    {GgmlType::tq2_0, "tq2_0", 256, 66, {}},        {GgmlType::mxfp4, "mxfp4", 32, 17, {}},
    {GgmlType::nvfp4, "nvfp4", 64, 36, {}},         {GgmlType::q1_0, "q1_0", 128, 18, {}},
    // rlx's own (rlx/gguf.h); the names are the qmatmul formats
    {GgmlType::rlx_int4_g128, "int4_g128", 128, 66, {}}, {GgmlType::rlx_int4_g128_asym, "int4_g128_asym", 128, 68, {}},
}};

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

std::string fmt_double(double v, bool single) {
  char buf[64];
  auto r = single ? std::to_chars(buf, buf + sizeof(buf), static_cast<float>(v)) : std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

Status type_error(std::string_view what, ValueType got) {
  return error(ErrorCode::format_error, "is ", value_type_name(got), ", expected ", what);
}

// Element i of packed numeric storage as int64 / uint64 / double, by type.
bool elem_int(ValueType t, const uint8_t* p, int64_t& out, bool& negative_u64_overflow) {
  negative_u64_overflow = false;
  switch (t) {
    case ValueType::u8: out = load<uint8_t>(p); return true;
    case ValueType::i8: out = load<int8_t>(p); return true;
    case ValueType::u16: out = load<uint16_t>(p); return true;
    case ValueType::i16: out = load<int16_t>(p); return true;
    case ValueType::u32: out = load<uint32_t>(p); return true;
    case ValueType::i32: out = load<int32_t>(p); return true;
    case ValueType::i64: out = load<int64_t>(p); return true;
    case ValueType::u64: {
      const uint64_t u = load<uint64_t>(p);
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        negative_u64_overflow = true;
        return false;
      }
      out = static_cast<int64_t>(u);
      return true;
    }
    default: return false;
  }
}

bool elem_float(ValueType t, const uint8_t* p, double& out) {
  if (t == ValueType::f32) {
    out = load<float>(p);
    return true;
  }
  if (t == ValueType::f64) {
    out = load<double>(p);
    return true;
  }
  return false;
}

std::string scalar_string(ValueType t, const uint8_t* p) {
  switch (t) {
    case ValueType::f32: return fmt_double(load<float>(p), true);
    case ValueType::f64: return fmt_double(load<double>(p), false);
    case ValueType::boolean: return load<uint8_t>(p) ? "true" : "false";
    case ValueType::u64: return std::to_string(load<uint64_t>(p));
    default: {
      int64_t v = 0;
      bool ovf;
      elem_int(t, p, v, ovf);
      return std::to_string(v);
    }
  }
}

}  // namespace

std::string_view value_type_name(ValueType t) {
  static constexpr std::string_view kNames[13] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                                  "bool", "string", "array", "u64", "i64", "f64"};
  const auto i = static_cast<uint32_t>(t);
  return i < 13 ? kNames[i] : std::string_view("unknown");
}

bool is_integer(ValueType t) {
  switch (t) {
    case ValueType::u8: case ValueType::i8: case ValueType::u16: case ValueType::i16: case ValueType::u32:
    case ValueType::i32: case ValueType::u64: case ValueType::i64: return true;
    default: return false;
  }
}

size_t scalar_bytes(ValueType t) {
  const auto i = static_cast<uint32_t>(t);
  return i < 13 ? kScalarBytes[i] : 0;
}

// ---- Value ----

Value Value::string(std::string v) {
  Value r;
  r.type_ = ValueType::string;
  r.count_ = 1;
  r.strings_.push_back(std::move(v));
  return r;
}

Value Value::array(const std::vector<std::string>& items) {
  return make_array(ValueType::string, items.size(), {}, items, {});
}

Value Value::array_of_arrays(std::vector<Value> items) {
  const uint64_t n = items.size();
  return make_array(ValueType::array, n, {}, {}, std::move(items));
}

Value Value::make_array(ValueType elem, uint64_t count, std::vector<uint8_t> raw, std::vector<std::string> strings,
                        std::vector<Value> nested) {
  Value r;
  r.type_ = ValueType::array;
  r.elem_ = elem;
  r.count_ = count;
  r.raw_ = std::move(raw);
  r.strings_ = std::move(strings);
  r.nested_ = std::move(nested);
  return r;
}

Expected<int64_t> Value::as_int() const {
  if (type_ == ValueType::array || type_ == ValueType::string || !is_integer(type_))
    return type_error("an integer", type_);
  int64_t v;
  bool ovf;
  if (!elem_int(type_, raw_.data(), v, ovf))
    return error(ErrorCode::format_error, "value ", load<uint64_t>(raw_.data()), " does not fit in int64");
  return v;
}

Expected<uint64_t> Value::as_uint() const {
  if (type_ == ValueType::u64) return load<uint64_t>(raw_.data());
  RLX_ASSIGN_OR_RETURN(int64_t v, as_int());
  if (v < 0) return error(ErrorCode::format_error, "value ", v, " is negative, expected a non-negative integer");
  return static_cast<uint64_t>(v);
}

Expected<double> Value::as_float() const {
  double v = 0;
  if (type_ == ValueType::array || !elem_float(type_, raw_.data(), v)) return type_error("f32 or f64", type_);
  return v;
}

Expected<bool> Value::as_bool() const {
  if (type_ != ValueType::boolean) return type_error("bool", type_);
  return raw_[0] != 0;
}

Expected<std::string> Value::as_string() const {
  if (type_ != ValueType::string) return type_error("string", type_);
  return strings_[0];
}

Expected<int64_t> Value::int_at(uint64_t i) const {
  if (type_ != ValueType::array || !is_integer(elem_)) return error(ErrorCode::format_error, "is not an integer array");
  if (i >= count_) return error(ErrorCode::format_error, "index ", i, " is past the ", count_, " elements");
  int64_t v;
  bool ovf;
  if (!elem_int(elem_, raw_.data() + i * scalar_bytes(elem_), v, ovf))
    return error(ErrorCode::format_error, "element ", i, " does not fit in int64");
  return v;
}

Expected<double> Value::float_at(uint64_t i) const {
  if (type_ != ValueType::array || (elem_ != ValueType::f32 && elem_ != ValueType::f64))
    return error(ErrorCode::format_error, "is not a float array");
  if (i >= count_) return error(ErrorCode::format_error, "index ", i, " is past the ", count_, " elements");
  double v = 0;
  elem_float(elem_, raw_.data() + i * scalar_bytes(elem_), v);
  return v;
}

Expected<std::string> Value::string_at(uint64_t i) const {
  if (type_ != ValueType::array || elem_ != ValueType::string)
    return error(ErrorCode::format_error, "is not a string array");
  if (i >= count_) return error(ErrorCode::format_error, "index ", i, " is past the ", count_, " elements");
  return strings_[i];
}

std::string Value::to_string() const {
  if (type_ == ValueType::string) return strings_[0];
  if (type_ != ValueType::array) return scalar_string(type_, raw_.data());
  if (elem_ == ValueType::string) return cat("[", count_, count_ == 1 ? " string]" : " strings]");
  if (elem_ == ValueType::array) return cat("[", count_, count_ == 1 ? " array]" : " arrays]");
  if (count_ > 16) return cat("[", count_, " ", value_type_name(elem_), "]");
  std::string s = "[";
  const size_t w = scalar_bytes(elem_);
  for (uint64_t i = 0; i < count_; ++i) s += (i ? ", " : "") + scalar_string(elem_, raw_.data() + i * w);
  return s + "]";
}

bool Value::operator==(const Value& o) const {
  return type_ == o.type_ && count_ == o.count_ && (type_ != ValueType::array || elem_ == o.elem_) &&
         raw_ == o.raw_ && strings_ == o.strings_ && nested_ == o.nested_;
}

// ---- ggml types ----

std::optional<GgmlTypeInfo> ggml_type_info(uint32_t type) {
  for (const GgmlTypeInfo& i : kGgmlTypes)
    if (static_cast<uint32_t>(i.type) == type) return i;
  return std::nullopt;
}

std::optional<GgmlTypeInfo> ggml_type_from_name(std::string_view name) {
  for (const GgmlTypeInfo& i : kGgmlTypes) {
    if (i.name.size() != name.size()) continue;
    bool eq = true;
    for (size_t k = 0; k < name.size() && eq; ++k)
      eq = std::tolower(static_cast<unsigned char>(name[k])) == i.name[k];
    if (eq) return i;
  }
  return std::nullopt;
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;  // the reader checked that this does not overflow
  return n;
}

Sizes TensorInfo::shape() const {
  Sizes s(ne.rbegin(), ne.rend());
  auto ti = ggml_type_info(static_cast<uint32_t>(type));
  if (ti && !ti->dtype && !s.empty()) s.back() = s.back() / ti->block_elems * ti->block_bytes;
  return s;
}

// ---- File accessors ----

const KeyValue* File::find(std::string_view key) const {
  for (const KeyValue& kv : metadata)
    if (kv.key == key) return &kv;
  return nullptr;
}

const TensorInfo* File::find_tensor(std::string_view n) const {
  for (const TensorInfo& t : tensors)
    if (t.name == n) return &t;
  return nullptr;
}

namespace {

template <class T, class F>
Expected<T> access(const File& f, std::string_view key, F get) {
  const KeyValue* kv = f.find(key);
  if (!kv) return error(ErrorCode::format_error, f.name, ": no metadata key '", key, "'");
  auto r = get(kv->value);
  if (!r) return error(ErrorCode::format_error, f.name, ": key '", key, "' at offset ", kv->offset, " ", r.status().message());
  return std::move(r).value();
}

}  // namespace

Expected<int64_t> File::get_int(std::string_view key) const {
  return access<int64_t>(*this, key, [](const Value& v) { return v.as_int(); });
}
Expected<uint64_t> File::get_uint(std::string_view key) const {
  return access<uint64_t>(*this, key, [](const Value& v) { return v.as_uint(); });
}
Expected<double> File::get_float(std::string_view key) const {
  return access<double>(*this, key, [](const Value& v) { return v.as_float(); });
}
Expected<bool> File::get_bool(std::string_view key) const {
  return access<bool>(*this, key, [](const Value& v) { return v.as_bool(); });
}
Expected<std::string> File::get_string(std::string_view key) const {
  return access<std::string>(*this, key, [](const Value& v) { return v.as_string(); });
}

template <class T>
Expected<std::vector<T>> File::get_array(std::string_view key) const {
  return access<std::vector<T>>(*this, key, [](const Value& v) -> Expected<std::vector<T>> {
    if (v.type() != ValueType::array) return type_error("an array", v.type());
    std::vector<T> out;
    out.reserve(static_cast<size_t>(v.size()));
    if constexpr (std::is_same_v<T, std::string>) {
      if (v.elem_type() != ValueType::string) return error(ErrorCode::format_error, "is an array of ", value_type_name(v.elem_type()), ", expected strings");
      return v.strings();
    } else if constexpr (std::is_same_v<T, bool>) {
      if (v.elem_type() != ValueType::boolean) return error(ErrorCode::format_error, "is an array of ", value_type_name(v.elem_type()), ", expected bool");
      for (uint8_t b : v.raw()) out.push_back(b != 0);
      return out;
    } else if constexpr (std::is_floating_point_v<T>) {
      const bool ok = v.elem_type() == ValueType::f32 || (std::is_same_v<T, double> && v.elem_type() == ValueType::f64);
      if (!ok) return error(ErrorCode::format_error, "is an array of ", value_type_name(v.elem_type()), ", expected ",
                            std::is_same_v<T, float> ? "f32" : "f32 or f64");
      for (uint64_t i = 0; i < v.size(); ++i) out.push_back(static_cast<T>(*v.float_at(i)));
      return out;
    } else {
      if (!is_integer(v.elem_type()))
        return error(ErrorCode::format_error, "is an array of ", value_type_name(v.elem_type()), ", expected integers");
      const size_t w = scalar_bytes(v.elem_type());
      for (uint64_t i = 0; i < v.size(); ++i) {
        const uint8_t* p = v.raw().data() + i * w;
        if (v.elem_type() == ValueType::u64) {
          const uint64_t u = load<uint64_t>(p);
          if (u > static_cast<uint64_t>(std::numeric_limits<T>::max()))
            return error(ErrorCode::format_error, "element ", i, " = ", u, " does not fit in the requested type");
          out.push_back(static_cast<T>(u));
          continue;
        }
        int64_t x = 0;
        bool ovf;
        elem_int(v.elem_type(), p, x, ovf);
        if ((std::is_signed_v<T> && (x < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
                                     x > static_cast<int64_t>(std::numeric_limits<T>::max()))) ||
            (!std::is_signed_v<T> && (x < 0 || static_cast<uint64_t>(x) > static_cast<uint64_t>(std::numeric_limits<T>::max()))))
          return error(ErrorCode::format_error, "element ", i, " = ", x, " does not fit in the requested type");
        out.push_back(static_cast<T>(x));
      }
      return out;
    }
  });
}

template Expected<std::vector<std::string>> File::get_array<std::string>(std::string_view) const;
template Expected<std::vector<bool>> File::get_array<bool>(std::string_view) const;
template Expected<std::vector<float>> File::get_array<float>(std::string_view) const;
template Expected<std::vector<double>> File::get_array<double>(std::string_view) const;
template Expected<std::vector<uint8_t>> File::get_array<uint8_t>(std::string_view) const;
template Expected<std::vector<int8_t>> File::get_array<int8_t>(std::string_view) const;
template Expected<std::vector<uint16_t>> File::get_array<uint16_t>(std::string_view) const;
template Expected<std::vector<int16_t>> File::get_array<int16_t>(std::string_view) const;
template Expected<std::vector<uint32_t>> File::get_array<uint32_t>(std::string_view) const;
template Expected<std::vector<int32_t>> File::get_array<int32_t>(std::string_view) const;
template Expected<std::vector<uint64_t>> File::get_array<uint64_t>(std::string_view) const;
template Expected<std::vector<int64_t>> File::get_array<int64_t>(std::string_view) const;

Expected<Tensor> File::tensor(std::string_view n) const {
  const TensorInfo* ti = find_tensor(n);
  if (!ti) return error(ErrorCode::format_error, name, ": no tensor '", n, "'");
  return tensor(*ti);
}

Expected<Tensor> File::tensor_blocks(const TensorInfo& info) const {
  auto ti = ggml_type_info(static_cast<uint32_t>(info.type));
  if (!ti || !storage) return error(ErrorCode::format_error, name, ": tensor '", info.name, "' has no data");
  const uint64_t abs = data_offset + info.offset;
  if (abs > storage->size() || info.nbytes > storage->size() - abs)
    return error(ErrorCode::format_error, name, ": tensor '", info.name, "' lies outside the file");
  Sizes s(info.ne.rbegin(), info.ne.rend());
  if (s.empty()) s.push_back(1);
  s.back() = s.back() / ti->block_elems * ti->block_bytes;
  return Tensor(DType::u8, std::move(s), storage, static_cast<size_t>(abs));
}

Expected<Tensor> File::tensor(const TensorInfo& info) const {
  auto ti = ggml_type_info(static_cast<uint32_t>(info.type));
  if (!ti || !storage) return error(ErrorCode::format_error, name, ": tensor '", info.name, "' has no data");
  if (!ti->dtype) {
    RLX_ASSIGN_OR_RETURN(Tensor t, tensor_blocks(info));
    if (info.ne.empty()) return t.reshaped({});
    return t;
  }
  const uint64_t abs = data_offset + info.offset;
  if (abs > storage->size() || info.nbytes > storage->size() - abs)
    return error(ErrorCode::format_error, name, ": tensor '", info.name, "' lies outside the file");
  Sizes s = info.shape();
  const size_t elem = static_cast<size_t>(ti->block_bytes);
  const uint8_t* p = storage->data() + abs;
  if (reinterpret_cast<uintptr_t>(p) % elem != 0) {
    // only with general.alignment < the element size: copy so that typed loads are aligned
    Tensor t = Tensor::zeros(*ti->dtype, std::move(s));
    std::memcpy(t.bytes(), p, static_cast<size_t>(info.nbytes));
    return t;
  }
  return Tensor(*ti->dtype, std::move(s), storage, static_cast<size_t>(abs));
}

}  // namespace rlx::gguf
