// rlx/gguf.h: GGUF files (llama.cpp's model format, versions 2 and 3), read and written.
//
// Layout: "GGUF", u32 version, u64 tensor count, u64 metadata count, the metadata (key
// string, u32 value type, value), the tensor infos (name, u32 n_dims, u64 ne[n_dims]
// innermost first, u32 ggml type, u64 offset into the data section), padding to
// `general.alignment` (default 32), then the data section. Strings are a u64 length and
// bytes; arrays are a u32 element type, a u64 count and the elements (arrays may nest).
//
// SECURITY: what the reader promises for any input bytes (hostile files included)
// ------------------------------------------------------------------------------
// - It never aborts, asserts, throws or reads outside the file: every failure is an
//   ErrorCode::format_error whose message names the file, the byte offset and the key or
//   tensor at fault (io_error if the file cannot be opened or mapped).
// - Allocation is bounded by the file size: a string, array, key count or tensor count is
//   checked against the bytes that remain before anything is allocated (an array of n
//   elements needs at least n times the smallest encoding of its element type), so a lying
//   length fails fast instead of allocating. Parsed metadata takes at most a small constant
//   times the file size (strings and nested arrays) and arrays nest at most kMaxArrayDepth deep.
// - Size arithmetic is overflow-checked: element counts (each dim >= 1 and the product
//   <= INT64_MAX), byte sizes, offset + size, and padding.
// - Checked like llama.cpp's gguf.cpp, and more: magic; version 2 or 3 (1, 0, big-endian and
//   future versions named as such); keys non-empty, at most 65535 bytes, unique; value and
//   element types known; general.alignment a u32 power of two; tensor names non-empty, at most
//   65535 bytes, unique; 0..4 dims (GGML_MAX_DIMS); a known ggml type whose block size divides
//   the row length; data offsets multiples of the alignment, inside the file and not
//   overlapping one another.
// - Tensors are views of the memory-mapped file (mapped copy-on-write, so writes to a tensor
//   never reach the file); data is never copied, except a typed tensor whose bytes are not
//   aligned to its element size (possible only when general.alignment is 1 or 2), which is copied.
// - It does not check that tensor data decodes to finite numbers, nor metadata meaning (an
//   architecture's keys): that is the model builder's job, through the typed accessors below,
//   which check type and range.
// ------------------------------------------------------------------------------
//
// Shapes: GGUF lists dims innermost first (ne[0] is the row length); rlx lists them outermost
// first, so ne = [K, N] is an rlx tensor [N, K]. Quantized tensors (any type whose block holds
// more than one value) are u8 tensors [rows..., row_bytes]: ne = [K, N] in q4_k is u8
// [N, K / 256 * 144]. Float and integer types (f32, f16, bf16, f64, i8, i16, i32, i64) are
// typed tensors.
//
// rlx::load_model on a GGUF file returns format "gguf", every tensor in graph.weights (as
// above), metadata["gguf.version"], each key's value as text (File's Value::to_string: long
// arrays summarized, "[32000 strings]"), and for each block-quantized tensor T the key
// "rlx.tensor_format.T" holding its format as rlx's dequantize / qmatmul ops name it ("q4_k").
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "rlx/status.h"
#include "rlx/tensor.h"

namespace rlx::gguf {

inline constexpr uint32_t kDefaultAlignment = 32;
inline constexpr int kMaxDims = 4;            // GGML_MAX_DIMS
inline constexpr int kMaxArrayDepth = 4;      // arrays of arrays of ... at most 4 levels
inline constexpr uint64_t kMaxKeyBytes = 65535;
inline constexpr uint64_t kMaxNameBytes = 65535;

// Metadata value types, as numbered in the file.
enum class ValueType : uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7, string = 8, array = 9,
  u64 = 10, i64 = 11, f64 = 12,
};
std::string_view value_type_name(ValueType t);  // "u8", ..., "string", "array"
bool is_integer(ValueType t);

// One metadata value: a scalar, a string, or an array of one element type. Numeric arrays are
// kept packed (little-endian, as in the file); string arrays as strings; nested arrays as Values.
class Value {
 public:
  Value() = default;
  static Value u8(uint8_t v) { return scalar(ValueType::u8, v); }
  static Value i8(int8_t v) { return scalar(ValueType::i8, v); }
  static Value u16(uint16_t v) { return scalar(ValueType::u16, v); }
  static Value i16(int16_t v) { return scalar(ValueType::i16, v); }
  static Value u32(uint32_t v) { return scalar(ValueType::u32, v); }
  static Value i32(int32_t v) { return scalar(ValueType::i32, v); }
  static Value u64(uint64_t v) { return scalar(ValueType::u64, v); }
  static Value i64(int64_t v) { return scalar(ValueType::i64, v); }
  static Value f32(float v) { return scalar(ValueType::f32, v); }
  static Value f64(double v) { return scalar(ValueType::f64, v); }
  static Value boolean(bool v) { return scalar(ValueType::boolean, static_cast<uint8_t>(v ? 1 : 0)); }
  static Value string(std::string v);
  // An array of numbers or bools: T one of uint8_t..int64_t, float, double, bool.
  template <class T>
  static Value array(const std::vector<T>& items);
  static Value array(const std::vector<std::string>& items);
  // An array whose elements are arrays (all of them `elem` arrays, element type checked by the writer).
  static Value array_of_arrays(std::vector<Value> items);

  ValueType type() const { return type_; }
  // Arrays: the element type, and the number of elements.
  ValueType elem_type() const { return elem_; }
  uint64_t size() const { return count_; }

  // Scalars. as_int: any integer type (u64 above INT64_MAX fails); as_uint: non-negative
  // integers; as_float: f32 or f64; each fails with format_error naming the type found.
  Expected<int64_t> as_int() const;
  Expected<uint64_t> as_uint() const;
  Expected<double> as_float() const;
  Expected<bool> as_bool() const;
  Expected<std::string> as_string() const;
  // Array element access (bounds and type checked).
  Expected<int64_t> int_at(uint64_t i) const;
  Expected<double> float_at(uint64_t i) const;
  Expected<std::string> string_at(uint64_t i) const;
  const std::vector<Value>& arrays() const { return nested_; }
  // Packed little-endian bytes of a numeric or bool array (or of a scalar).
  const std::vector<uint8_t>& raw() const { return raw_; }
  const std::vector<std::string>& strings() const { return strings_; }

  // "42", "3.5", "true", the string itself; arrays of up to 16 numbers in full
  // ("[1, 2, 3]"), longer ones summarized ("[32000 strings]", "[151936 i32]").
  std::string to_string() const;
  bool operator==(const Value& o) const;

  // Internal (reader): builds an array value in place.
  static Value make_array(ValueType elem, uint64_t count, std::vector<uint8_t> raw, std::vector<std::string> strings,
                          std::vector<Value> nested);

 private:
  template <class T>
  static Value scalar(ValueType t, T v);
  ValueType type_ = ValueType::u8;
  ValueType elem_ = ValueType::u8;
  uint64_t count_ = 0;
  std::vector<uint8_t> raw_;          // numeric scalars and arrays
  std::vector<std::string> strings_;  // the string, or a string array's elements
  std::vector<Value> nested_;         // an array of arrays
};

struct KeyValue {
  std::string key;
  Value value;
  uint64_t offset = 0;  // where the key starts in the file (0 for values not read from a file)
};

// GGML tensor types (GGML_TYPE_*). Values missing from the list were removed from ggml and
// are rejected in files. The two rlx_* types are rlx's own 4-bit formats in groups of 128
// (kernels/ggml_quants.h: int4_g128, int4_g128_asym), written by `rlx quantize --scheme
// int4-g128[-asym]` together with the key "rlx.quantization"; their ids ("RL" 0x0001 / 0x0002)
// lie far outside ggml's, so llama.cpp and other GGUF readers refuse them as unknown types.
enum class GgmlType : uint32_t {
  f32 = 0, f16 = 1, q4_0 = 2, q4_1 = 3, q5_0 = 6, q5_1 = 7, q8_0 = 8, q8_1 = 9, q2_k = 10, q3_k = 11,
  q4_k = 12, q5_k = 13, q6_k = 14, q8_k = 15, iq2_xxs = 16, iq2_xs = 17, iq3_xxs = 18, iq1_s = 19,
  iq4_nl = 20, iq3_s = 21, iq2_s = 22, iq4_xs = 23, i8 = 24, i16 = 25, i32 = 26, i64 = 27, f64 = 28,
  iq1_m = 29, bf16 = 30, tq1_0 = 34, tq2_0 = 35, mxfp4 = 39, nvfp4 = 40, q1_0 = 41,
  rlx_int4_g128 = 0x524C0001, rlx_int4_g128_asym = 0x524C0002,
};

struct GgmlTypeInfo {
  GgmlType type;
  std::string_view name;  // lower case: "f32", "q4_k", "iq4_xs", ...
  int64_t block_elems;
  int64_t block_bytes;
  // The rlx dtype of a typed view (f32, f16, bf16, f64, i8, i16, i32, i64), or nullopt for
  // block formats (viewed as u8 rows).
  std::optional<DType> dtype;
};
// The traits of GGML type id `type`, or nullopt for an id ggml does not define.
std::optional<GgmlTypeInfo> ggml_type_info(uint32_t type);
// By name, any case ("Q4_K", "q4_k"); nullopt if unknown.
std::optional<GgmlTypeInfo> ggml_type_from_name(std::string_view name);

struct TensorInfo {
  std::string name;
  std::vector<int64_t> ne;   // GGUF order: ne[0] is the row length
  GgmlType type = GgmlType::f32;
  uint64_t offset = 0;       // from the start of the data section
  uint64_t nbytes = 0;
  uint64_t info_offset = 0;  // where this tensor's info starts in the file

  int64_t numel() const;
  // The rlx shape: reversed ne, with the row length replaced by the row's bytes for block formats.
  Sizes shape() const;
};

// A parsed GGUF file. Tensors view the bytes in `storage` (the mapped file).
struct File {
  std::string name;  // the path, or the name given to parse(), for messages
  uint32_t version = 3;
  uint32_t alignment = kDefaultAlignment;
  uint64_t data_offset = 0;  // absolute offset of the data section
  std::vector<KeyValue> metadata;      // file order
  std::vector<TensorInfo> tensors;     // file order
  std::shared_ptr<Storage> storage;

  const KeyValue* find(std::string_view key) const;
  const TensorInfo* find_tensor(std::string_view name) const;

  // Typed metadata access. Each fails with format_error naming the file, key and offset when
  // the key is missing, has another type, or its value is out of the result's range.
  Expected<int64_t> get_int(std::string_view key) const;     // any integer type
  Expected<uint64_t> get_uint(std::string_view key) const;   // any integer type, value >= 0
  Expected<double> get_float(std::string_view key) const;    // f32 or f64
  Expected<bool> get_bool(std::string_view key) const;
  Expected<std::string> get_string(std::string_view key) const;
  // An array whose elements convert to T: std::string for string arrays; bool for bool arrays;
  // float for f32 arrays; double for f32 or f64 arrays; an integer type for integer arrays whose
  // every element fits in T.
  template <class T>
  Expected<std::vector<T>> get_array(std::string_view key) const;

  // The tensor as an rlx tensor (a view; see the shape rules above).
  Expected<Tensor> tensor(const TensorInfo& info) const;
  Expected<Tensor> tensor(std::string_view name) const;
  // Any tensor as raw u8 rows [rows..., row_bytes] (for f16 that is [N, 2K]): the input that
  // rlx's dequantize / qmatmul ops take, with format ggml_type_info(type)->name.
  Expected<Tensor> tensor_blocks(const TensorInfo& info) const;
};

// Maps `path` and parses it (zero-copy).
Expected<File> load(const std::string& path);
// Parses GGUF bytes held by `bytes`; `name` is used in messages.
Expected<File> parse(std::shared_ptr<Storage> bytes, const std::string& name);

// A tensor to write: its data is `data`'s bytes, which must be exactly the size the type and
// ne imply (e.g. from quantizing, or a typed tensor of the matching dtype).
struct TensorToWrite {
  std::string name;
  GgmlType type = GgmlType::f32;
  std::vector<int64_t> ne;  // GGUF order
  Tensor data;
};

struct WriteOptions {
  uint32_t version = 3;  // 2 or 3 (identical layouts)
  // Data alignment; also written as general.alignment (u32) when it is not 32 or when the
  // metadata already holds that key (which must then agree).
  uint32_t alignment = kDefaultAlignment;
};

// The bytes of a GGUF file holding `metadata` (in order) and `tensors` (in order, each at the
// next aligned offset). invalid_argument for an empty or duplicate key or name, more than 4
// dims, a dim < 1, a row length that is not a multiple of the type's block, data whose size
// does not match, or an alignment that is not a power of two.
Expected<std::vector<uint8_t>> serialize(const std::vector<KeyValue>& metadata,
                                         const std::vector<TensorToWrite>& tensors, const WriteOptions& options = {});
// Writes the same to `path`, streaming tensor data (nothing is copied into one buffer).
Status save(const std::string& path, const std::vector<KeyValue>& metadata, const std::vector<TensorToWrite>& tensors,
            const WriteOptions& options = {});

// Template definitions.
template <class T>
Value Value::scalar(ValueType t, T v) {
  Value r;
  r.type_ = t;
  r.count_ = 1;
  r.raw_.resize(sizeof(T));
  std::memcpy(r.raw_.data(), &v, sizeof(T));
  return r;
}

namespace detail {
template <class T>
constexpr ValueType value_type_of() {
  if constexpr (std::is_same_v<T, bool>) return ValueType::boolean;
  else if constexpr (std::is_same_v<T, uint8_t>) return ValueType::u8;
  else if constexpr (std::is_same_v<T, int8_t>) return ValueType::i8;
  else if constexpr (std::is_same_v<T, uint16_t>) return ValueType::u16;
  else if constexpr (std::is_same_v<T, int16_t>) return ValueType::i16;
  else if constexpr (std::is_same_v<T, uint32_t>) return ValueType::u32;
  else if constexpr (std::is_same_v<T, int32_t>) return ValueType::i32;
  else if constexpr (std::is_same_v<T, uint64_t>) return ValueType::u64;
  else if constexpr (std::is_same_v<T, int64_t>) return ValueType::i64;
  else if constexpr (std::is_same_v<T, float>) return ValueType::f32;
  else if constexpr (std::is_same_v<T, double>) return ValueType::f64;
  else static_assert(sizeof(T) == 0, "not a GGUF array element type");
}
}  // namespace detail

template <class T>
Value Value::array(const std::vector<T>& items) {
  std::vector<uint8_t> raw;
  if constexpr (std::is_same_v<T, bool>) {
    for (bool b : items) raw.push_back(b ? 1 : 0);
  } else {
    raw.resize(items.size() * sizeof(T));
    if (!items.empty()) std::memcpy(raw.data(), items.data(), raw.size());
  }
  return make_array(detail::value_type_of<T>(), items.size(), std::move(raw), {}, {});
}

}  // namespace rlx::gguf
