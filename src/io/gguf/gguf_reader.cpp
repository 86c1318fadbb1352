// The GGUF reader: parses the header, metadata and tensor infos of a mapped file with every
// check listed in rlx/gguf.h's security note. Every length read from the file is compared with
// the bytes that remain before anything is allocated, and every sum and product is checked.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include "gguf_internal.h"
#include "rlx/checked.h"
#include "rlx/mapped_file.h"

namespace rlx::gguf {
namespace {

// Smallest encodings, used to bound counts by the bytes left: a key-value needs a key length
// (8), a non-empty key (1), a type (4) and a value (>= 1); a tensor info needs a name length
// (8), a non-empty name (1), n_dims (4), a type (4) and an offset (8).
constexpr uint64_t kMinKvBytes = 14;
constexpr uint64_t kMinTensorInfoBytes = 25;
constexpr uint64_t kHeaderBytes = 24;

class Parser {
 public:
  Parser(const uint8_t* data, uint64_t size, const std::string& name) : p_(data), size_(size), name_(name) {}

  Expected<File> parse();

 private:
  uint64_t left() const { return size_ - pos_; }

  template <class... Args>
  Status fail(uint64_t at, const Args&... args) const {
    return error(ErrorCode::format_error, name_, ": offset ", at, ": ", args...);
  }

  template <class T>
  Expected<T> read(std::string_view what) {
    if (left() < sizeof(T))
      return fail(pos_, what, " needs ", sizeof(T), " bytes but the file ends after ", left());
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  Expected<std::string> read_string(std::string_view what, uint64_t max_bytes);
  Expected<Value> read_value(ValueType t, int depth, const std::string& key);
  Status read_metadata(File& f, uint64_t n_kv);
  Status read_tensor_infos(File& f, uint64_t n_tensors);
  Status place_tensors(File& f);

  const uint8_t* p_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& name_;
};

bool known_value_type(uint32_t t) { return t <= 12; }

template <class T>
T load_le(const uint8_t* q) {
  T v;
  std::memcpy(&v, q, sizeof(T));
  return v;
}

// The scalar of type t stored at q (t is neither string nor array).
Value scalar_value(ValueType t, const uint8_t* q) {
  switch (t) {
    case ValueType::u8: return Value::u8(q[0]);
    case ValueType::i8: return Value::i8(static_cast<int8_t>(q[0]));
    case ValueType::u16: return Value::u16(load_le<uint16_t>(q));
    case ValueType::i16: return Value::i16(load_le<int16_t>(q));
    case ValueType::u32: return Value::u32(load_le<uint32_t>(q));
    case ValueType::i32: return Value::i32(load_le<int32_t>(q));
    case ValueType::f32: return Value::f32(load_le<float>(q));
    case ValueType::boolean: return Value::boolean(q[0] != 0);
    case ValueType::u64: return Value::u64(load_le<uint64_t>(q));
    case ValueType::i64: return Value::i64(load_le<int64_t>(q));
    case ValueType::f64: return Value::f64(load_le<double>(q));
    default: return Value();
  }
}

Expected<std::string> Parser::read_string(std::string_view what, uint64_t max_bytes) {
  const uint64_t at = pos_;
  RLX_ASSIGN_OR_RETURN(uint64_t n, read<uint64_t>(cat(what, " length")));
  if (n > left()) return fail(at, what, ": string length ", n, " exceeds the ", left(), " bytes left in the file");
  if (n > max_bytes) return fail(at, what, ": string length ", n, " exceeds the limit of ", max_bytes);
  std::string s(reinterpret_cast<const char*>(p_ + pos_), static_cast<size_t>(n));
  pos_ += n;
  return s;
}

Expected<Value> Parser::read_value(ValueType t, int depth, const std::string& key) {
  const uint64_t at = pos_;
  const std::string what = cat("key '", key, "'");
  switch (t) {
    case ValueType::string: {
      RLX_ASSIGN_OR_RETURN(std::string s, read_string(what, UINT64_MAX));
      return Value::string(std::move(s));
    }
    case ValueType::array: {
      if (depth >= kMaxArrayDepth)
        return fail(at, what, ": arrays nest more than ", kMaxArrayDepth, " levels deep");
      RLX_ASSIGN_OR_RETURN(uint32_t et, read<uint32_t>(what + " array element type"));
      if (!known_value_type(et)) return fail(at, what, ": unknown array element type ", et);
      const auto elem = static_cast<ValueType>(et);
      RLX_ASSIGN_OR_RETURN(uint64_t n, read<uint64_t>(what + " array length"));
      // the smallest encoding of one element bounds how many the rest of the file can hold
      const uint64_t min_elem = elem == ValueType::string ? 8 : elem == ValueType::array ? 12 : scalar_bytes(elem);
      if (n > left() / min_elem)
        return fail(at, what, ": array of ", n, " ", value_type_name(elem), " needs at least ", min_elem,
                    " bytes each, only ", left(), " bytes are left in the file");
      std::vector<uint8_t> raw;
      std::vector<std::string> strings;
      std::vector<Value> nested;
      if (elem == ValueType::string) {
        strings.reserve(static_cast<size_t>(n));
        for (uint64_t i = 0; i < n; ++i) {
          RLX_ASSIGN_OR_RETURN(std::string s, read_string(cat(what, " element ", i), UINT64_MAX));
          strings.push_back(std::move(s));
        }
      } else if (elem == ValueType::array) {
        nested.reserve(static_cast<size_t>(n));
        for (uint64_t i = 0; i < n; ++i) {
          RLX_ASSIGN_OR_RETURN(Value v, read_value(ValueType::array, depth + 1, key));
          nested.push_back(std::move(v));
        }
      } else {
        const uint64_t bytes = n * min_elem;  // <= left(), checked above
        raw.assign(p_ + pos_, p_ + pos_ + bytes);
        if (elem == ValueType::boolean)
          for (uint64_t i = 0; i < n; ++i)
            if (raw[i] > 1) return fail(pos_ + i, what, ": bool element ", i, " is ", int(raw[i]), ", neither 0 nor 1");
        pos_ += bytes;
      }
      return Value::make_array(elem, n, std::move(raw), std::move(strings), std::move(nested));
    }
    default: {
      const size_t w = scalar_bytes(t);
      if (left() < w) return fail(at, what, ": a ", value_type_name(t), " value needs ", w, " bytes, ", left(), " are left");
      const uint8_t* q = p_ + pos_;
      if (t == ValueType::boolean && q[0] > 1) return fail(at, what, ": bool value ", int(q[0]), " is neither 0 nor 1");
      pos_ += w;
      return scalar_value(t, q);
    }
  }
}

Status Parser::read_metadata(File& f, uint64_t n_kv) {
  std::unordered_set<std::string> seen;
  f.metadata.reserve(static_cast<size_t>(n_kv));
  for (uint64_t i = 0; i < n_kv; ++i) {
    const uint64_t at = pos_;
    RLX_ASSIGN_OR_RETURN(std::string key, read_string(cat("key ", i), kMaxKeyBytes));
    if (key.empty()) return fail(at, "key ", i, " is empty");
    if (!seen.insert(key).second) return fail(at, "duplicate key '", key, "'");
    RLX_ASSIGN_OR_RETURN(uint32_t t, read<uint32_t>(cat("key '", key, "' type")));
    if (!known_value_type(t)) return fail(pos_ - 4, "key '", key, "' has unknown value type ", t);
    RLX_ASSIGN_OR_RETURN(Value v, read_value(static_cast<ValueType>(t), 0, key));
    f.metadata.push_back(KeyValue{std::move(key), std::move(v), at});
  }
  return Status::ok();
}

Status Parser::read_tensor_infos(File& f, uint64_t n_tensors) {
  std::unordered_set<std::string> seen;
  f.tensors.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo ti;
    ti.info_offset = pos_;
    RLX_ASSIGN_OR_RETURN(ti.name, read_string(cat("tensor ", i, " name"), kMaxNameBytes));
    if (ti.name.empty()) return fail(ti.info_offset, "tensor ", i, " has an empty name");
    if (!seen.insert(ti.name).second) return fail(ti.info_offset, "duplicate tensor name '", ti.name, "'");
    const std::string what = cat("tensor '", ti.name, "'");
    RLX_ASSIGN_OR_RETURN(uint32_t n_dims, read<uint32_t>(what + " n_dims"));
    if (n_dims > static_cast<uint32_t>(kMaxDims))
      return fail(pos_ - 4, what, " has ", n_dims, " dims, at most ", kMaxDims, " are allowed");
    int64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t at = pos_;
      RLX_ASSIGN_OR_RETURN(uint64_t ne, read<uint64_t>(cat(what, " dim ", d)));
      if (ne == 0) return fail(at, what, " dim ", d, " is 0 (dims must be >= 1)");
      if (ne > static_cast<uint64_t>(INT64_MAX))
        return fail(at, what, " dim ", d, " is ", static_cast<int64_t>(ne), " (negative as int64; dims must be >= 1)");
      auto prod = checked_mul_i64(numel, static_cast<int64_t>(ne));
      if (!prod) return fail(at, what, " has more than INT64_MAX elements (dim ", d, " = ", ne, ")");
      numel = *prod;
      ti.ne.push_back(static_cast<int64_t>(ne));
    }
    const uint64_t type_at = pos_;
    RLX_ASSIGN_OR_RETURN(uint32_t type, read<uint32_t>(what + " type"));
    auto info = ggml_type_info(type);
    if (!info && (type >> 16) == 0x524C)  // rlx's own type range (rlx/gguf.h)
      return fail(type_at, what, " has rlx-specific type ", type, " (number ", (type & 0xFFFF),
                  " of rlx's own range), which this version of rlx does not know (written by a newer rlx quantize?)");
    if (!info) return fail(type_at, what, " has unknown ggml type ", type);
    ti.type = info->type;
    const int64_t row = ti.ne.empty() ? 1 : ti.ne[0];
    if (row % info->block_elems != 0)
      return fail(type_at, what, " of type ", info->name, " has rows of ", row, " values, not a multiple of its block size ",
                  info->block_elems);
    auto nbytes = checked_mul(static_cast<uint64_t>(numel / info->block_elems), static_cast<uint64_t>(info->block_bytes));
    if (!nbytes || *nbytes > static_cast<uint64_t>(INT64_MAX))
      return fail(type_at, what, " takes more than INT64_MAX bytes");
    ti.nbytes = *nbytes;
    const uint64_t off_at = pos_;
    RLX_ASSIGN_OR_RETURN(ti.offset, read<uint64_t>(what + " offset"));
    if (ti.offset % f.alignment != 0)
      return fail(off_at, what, " data offset ", ti.offset, " is not a multiple of the alignment ", f.alignment);
    f.tensors.push_back(std::move(ti));
  }
  return Status::ok();
}

Status Parser::place_tensors(File& f) {
  // the data section starts at the next multiple of the alignment after the tensor infos
  auto padded = checked_add(pos_, (f.alignment - pos_ % f.alignment) % f.alignment);
  if (f.tensors.empty()) {
    f.data_offset = padded && *padded <= size_ ? *padded : size_;
    return Status::ok();
  }
  if (!padded || *padded > size_)
    return fail(pos_, "the data section (aligned to ", f.alignment, ") would start past the end of the ", size_,
                "-byte file");
  f.data_offset = *padded;
  const uint64_t data_bytes = size_ - f.data_offset;
  for (const TensorInfo& t : f.tensors) {
    auto end = checked_add(t.offset, t.nbytes);
    if (!end || *end > data_bytes)
      return fail(t.info_offset, "tensor '", t.name, "' data [", t.offset, ", +", t.nbytes, ") at file offset ",
                  f.data_offset, " + ", t.offset, " runs past the end of the ", size_, "-byte file");
  }
  std::vector<size_t> order(f.tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return f.tensors[a].offset < f.tensors[b].offset; });
  for (size_t i = 1; i < order.size(); ++i) {
    const TensorInfo& a = f.tensors[order[i - 1]];
    const TensorInfo& b = f.tensors[order[i]];
    if (a.offset + a.nbytes > b.offset)
      return fail(b.info_offset, "tensor '", b.name, "' data at ", b.offset, " overlaps tensor '", a.name, "' at ",
                  a.offset, " (", a.nbytes, " bytes)");
  }
  return Status::ok();
}

Expected<File> Parser::parse() {
  File f;
  f.name = name_;
  if (size_ < 4 || std::memcmp(p_, "GGUF", 4) != 0) {
    if (size_ < 4) return fail(0, "truncated header: the file has ", size_, " bytes, a GGUF header needs ", kHeaderBytes);
    char m[5] = {0};
    for (int i = 0; i < 4; ++i) m[i] = (p_[i] >= 32 && p_[i] < 127) ? static_cast<char>(p_[i]) : '?';
    return fail(0, "bad magic '", m, "', expected 'GGUF'");
  }
  if (size_ < kHeaderBytes)
    return fail(0, "truncated header: the file has ", size_, " bytes, a GGUF header needs ", kHeaderBytes);
  pos_ = 4;
  RLX_ASSIGN_OR_RETURN(f.version, read<uint32_t>("version"));
  if (f.version == 0) return fail(4, "bad version 0");
  if ((f.version & 0xFFFF) == 0)
    return fail(4, "version ", f.version, " looks byte-swapped: big-endian GGUF files are not supported");
  if (f.version == 1) return fail(4, "GGUF version 1 is not supported (only versions 2 and 3)");
  if (f.version > 3) return fail(4, "GGUF version ", f.version, " is newer than this reader (versions 2 and 3)");
  RLX_ASSIGN_OR_RETURN(uint64_t n_tensors, read<uint64_t>("tensor count"));
  RLX_ASSIGN_OR_RETURN(uint64_t n_kv, read<uint64_t>("metadata count"));
  if (n_kv > left() / kMinKvBytes)
    return fail(16, "metadata count ", n_kv, " cannot fit in the ", left(), " bytes left in the file");
  if (n_tensors > left() / kMinTensorInfoBytes)
    return fail(8, "tensor count ", n_tensors, " cannot fit in the ", left(), " bytes left in the file");
  auto need = checked_add(n_kv * kMinKvBytes, n_tensors * kMinTensorInfoBytes);
  if (!need || *need > left())
    return fail(8, n_tensors, " tensors and ", n_kv, " metadata entries cannot fit in the ", left(),
                " bytes left in the file");
  RLX_TRY(read_metadata(f, n_kv));
  if (const KeyValue* a = f.find("general.alignment")) {
    if (a->value.type() != ValueType::u32)
      return fail(a->offset, "key 'general.alignment' must be u32, got ", value_type_name(a->value.type()));
    const uint32_t al = static_cast<uint32_t>(*a->value.as_uint());
    if (al == 0 || (al & (al - 1)) != 0)
      return fail(a->offset, "key 'general.alignment' = ", al, " is not a power of two");
    f.alignment = al;
  }
  RLX_TRY(read_tensor_infos(f, n_tensors));
  RLX_TRY(place_tensors(f));
  return f;
}

}  // namespace

Expected<File> parse(std::shared_ptr<Storage> bytes, const std::string& name) {
  if (!bytes) return error(ErrorCode::invalid_argument, name, ": no bytes to parse");
  Parser p(bytes->data(), bytes->size(), name);
  RLX_ASSIGN_OR_RETURN(File f, p.parse());
  f.storage = std::move(bytes);
  return f;
}

Expected<File> load(const std::string& path) {
  RLX_ASSIGN_OR_RETURN(std::shared_ptr<Storage> s, map_file(path));
  return parse(std::move(s), path);
}

}  // namespace rlx::gguf
