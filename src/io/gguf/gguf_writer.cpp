// The GGUF writer: validates what it is given as strictly as the reader checks files (so
// whatever it writes reads back), builds the header in memory and streams tensor data.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <unordered_set>

#include "rlx/mapped_file.h"
#include "gguf_internal.h"
#include "rlx/checked.h"

namespace rlx::gguf {
namespace {

struct Out {
  std::vector<uint8_t> b;
  template <class T>
  void put(T v) {
    const size_t n = b.size();
    b.resize(n + sizeof(T));
    std::memcpy(b.data() + n, &v, sizeof(T));
  }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
  }
};

Status check_value(const Value& v, const std::string& key, int depth) {
  if (v.type() != ValueType::array) {
    if (v.type() == ValueType::string) {
      if (v.strings().size() != 1) return error(ErrorCode::invalid_argument, "gguf: key '", key, "': malformed string value");
    } else if (v.raw().size() != scalar_bytes(v.type())) {
      return error(ErrorCode::invalid_argument, "gguf: key '", key, "': malformed ", value_type_name(v.type()), " value");
    }
    return Status::ok();
  }
  if (depth >= kMaxArrayDepth)
    return error(ErrorCode::invalid_argument, "gguf: key '", key, "': arrays nest more than ", kMaxArrayDepth, " levels");
  switch (v.elem_type()) {
    case ValueType::string:
      if (v.strings().size() != v.size()) return error(ErrorCode::invalid_argument, "gguf: key '", key, "': malformed string array");
      return Status::ok();
    case ValueType::array:
      if (v.arrays().size() != v.size()) return error(ErrorCode::invalid_argument, "gguf: key '", key, "': malformed array of arrays");
      for (const Value& e : v.arrays()) {
        if (e.type() != ValueType::array)
          return error(ErrorCode::invalid_argument, "gguf: key '", key, "': an array of arrays holds a ", value_type_name(e.type()));
        RLX_TRY(check_value(e, key, depth + 1));
      }
      return Status::ok();
    default: {
      const size_t w = scalar_bytes(v.elem_type());
      if (w == 0 || v.raw().size() != v.size() * w)
        return error(ErrorCode::invalid_argument, "gguf: key '", key, "': malformed ", value_type_name(v.elem_type()), " array");
      return Status::ok();
    }
  }
}

// The value's encoding after its type tag.
void put_value(Out& o, const Value& v) {
  if (v.type() == ValueType::string) return o.str(v.strings()[0]);
  if (v.type() != ValueType::array) {
    o.b.insert(o.b.end(), v.raw().begin(), v.raw().end());
    return;
  }
  o.put<uint32_t>(static_cast<uint32_t>(v.elem_type()));
  o.put<uint64_t>(v.size());
  if (v.elem_type() == ValueType::string) {
    for (const std::string& s : v.strings()) o.str(s);
  } else if (v.elem_type() == ValueType::array) {
    for (const Value& e : v.arrays()) put_value(o, e);
  } else {
    o.b.insert(o.b.end(), v.raw().begin(), v.raw().end());
  }
}

struct Plan {
  std::vector<uint8_t> header;  // through the padding before the data section
  std::vector<uint64_t> offsets;
  std::vector<uint64_t> sizes;
  uint32_t alignment = kDefaultAlignment;
};

uint64_t pad_to(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

Expected<Plan> plan(const std::vector<KeyValue>& metadata, const std::vector<TensorToWrite>& tensors,
                    const WriteOptions& opt) {
  if (opt.version != 2 && opt.version != 3)
    return error(ErrorCode::invalid_argument, "gguf: can write versions 2 and 3, not ", opt.version);
  Plan p;
  p.alignment = opt.alignment;
  bool has_alignment_key = false;
  std::unordered_set<std::string> keys;
  for (const KeyValue& kv : metadata) {
    if (kv.key.empty()) return error(ErrorCode::invalid_argument, "gguf: empty metadata key");
    if (kv.key.size() > kMaxKeyBytes) return error(ErrorCode::invalid_argument, "gguf: key of ", kv.key.size(), " bytes is too long");
    if (!keys.insert(kv.key).second) return error(ErrorCode::invalid_argument, "gguf: duplicate key '", kv.key, "'");
    RLX_TRY(check_value(kv.value, kv.key, 0));
    if (kv.key == "general.alignment") {
      if (kv.value.type() != ValueType::u32)
        return error(ErrorCode::invalid_argument, "gguf: general.alignment must be u32, got ", value_type_name(kv.value.type()));
      p.alignment = static_cast<uint32_t>(*kv.value.as_uint());
      has_alignment_key = true;
    }
  }
  if (p.alignment == 0 || (p.alignment & (p.alignment - 1)) != 0)
    return error(ErrorCode::invalid_argument, "gguf: alignment ", p.alignment, " is not a power of two");
  std::vector<const KeyValue*> kvs;
  for (const KeyValue& kv : metadata) kvs.push_back(&kv);
  KeyValue extra{"general.alignment", Value::u32(p.alignment), 0};
  if (!has_alignment_key && p.alignment != kDefaultAlignment) kvs.push_back(&extra);

  Out o;
  o.b.insert(o.b.end(), {'G', 'G', 'U', 'F'});
  o.put<uint32_t>(opt.version);
  o.put<uint64_t>(tensors.size());
  o.put<uint64_t>(kvs.size());
  for (const KeyValue* kv : kvs) {
    o.str(kv->key);
    o.put<uint32_t>(static_cast<uint32_t>(kv->value.type()));
    put_value(o, kv->value);
  }
  std::unordered_set<std::string> names;
  uint64_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    const std::string what = cat("gguf: tensor '", t.name, "'");
    if (t.name.empty()) return error(ErrorCode::invalid_argument, "gguf: empty tensor name");
    if (t.name.size() > kMaxNameBytes) return error(ErrorCode::invalid_argument, what, ": name too long");
    if (!names.insert(t.name).second) return error(ErrorCode::invalid_argument, "gguf: duplicate tensor name '", t.name, "'");
    if (t.ne.size() > static_cast<size_t>(kMaxDims))
      return error(ErrorCode::invalid_argument, what, " has ", t.ne.size(), " dims, at most ", kMaxDims);
    auto info = ggml_type_info(static_cast<uint32_t>(t.type));
    if (!info) return error(ErrorCode::invalid_argument, what, ": unknown ggml type ", static_cast<uint32_t>(t.type));
    int64_t numel = 1;
    for (int64_t d : t.ne) {
      if (d < 1) return error(ErrorCode::invalid_argument, what, ": dim ", d, " < 1");
      auto m = checked_mul_i64(numel, d);
      if (!m) return error(ErrorCode::invalid_argument, what, ": element count overflows");
      numel = *m;
    }
    const int64_t row = t.ne.empty() ? 1 : t.ne[0];
    if (row % info->block_elems != 0)
      return error(ErrorCode::invalid_argument, what, ": rows of ", row, " values are not a multiple of the ", info->name,
                   " block (", info->block_elems, ")");
    const uint64_t nbytes = static_cast<uint64_t>(numel / info->block_elems) * static_cast<uint64_t>(info->block_bytes);
    if (t.data.dtype() != DType::u8 && (!info->dtype || t.data.dtype() != *info->dtype))
      return error(ErrorCode::invalid_argument, what, ": data of dtype ", dtype_name(t.data.dtype()), " cannot be stored as ",
                   info->name, " (give u8 blocks or the matching dtype)");
    if (t.data.nbytes() != nbytes || (nbytes > 0 && !t.data.bytes()))
      return error(ErrorCode::invalid_argument, what, ": ", info->name, " with ne ", sizes_to_string(Sizes(t.ne)), " takes ",
                   nbytes, " bytes, the data has ", t.data.nbytes());
    o.str(t.name);
    o.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) o.put<uint64_t>(static_cast<uint64_t>(d));
    o.put<uint32_t>(static_cast<uint32_t>(t.type));
    o.put<uint64_t>(offset);
    p.offsets.push_back(offset);
    p.sizes.push_back(nbytes);
    offset = pad_to(offset + nbytes, p.alignment);
  }
  o.b.resize(pad_to(o.b.size(), p.alignment), 0);
  p.header = std::move(o.b);
  return p;
}

}  // namespace

Expected<std::vector<uint8_t>> serialize(const std::vector<KeyValue>& metadata, const std::vector<TensorToWrite>& tensors,
                                         const WriteOptions& options) {
  RLX_ASSIGN_OR_RETURN(Plan p, plan(metadata, tensors, options));
  std::vector<uint8_t> out = std::move(p.header);
  const size_t base = out.size();
  for (size_t i = 0; i < tensors.size(); ++i) {
    out.resize(base + p.offsets[i], 0);
    const uint8_t* d = tensors[i].data.bytes();
    out.insert(out.end(), d, d + p.sizes[i]);
  }
  if (!tensors.empty()) out.resize(base + pad_to(out.size() - base, p.alignment), 0);
  return out;
}

Status save(const std::string& path, const std::vector<KeyValue>& metadata, const std::vector<TensorToWrite>& tensors,
            const WriteOptions& options) {
  RLX_ASSIGN_OR_RETURN(Plan p, plan(metadata, tensors, options));
  return write_file_via_rename(path, [&](std::FILE* f, const std::string& tmp) -> Status {
    auto put = [&](const void* d, size_t n) -> Status {
      if (n && std::fwrite(d, 1, n, f) != n) return error(ErrorCode::io_error, "cannot write ", tmp, ": ", std::strerror(errno));
      return Status::ok();
    };
    RLX_TRY(put(p.header.data(), p.header.size()));
    static const uint8_t zeros[256] = {};
    uint64_t at = 0;
    auto pad = [&](uint64_t to) -> Status {
      while (at < to) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(to - at, sizeof(zeros)));
        RLX_TRY(put(zeros, n));
        at += n;
      }
      return Status::ok();
    };
    for (size_t i = 0; i < tensors.size(); ++i) {
      RLX_TRY(pad(p.offsets[i]));
      RLX_TRY(put(tensors[i].data.bytes(), static_cast<size_t>(p.sizes[i])));
      at += p.sizes[i];
    }
    if (!tensors.empty()) RLX_TRY(pad(pad_to(at, p.alignment)));
    return Status::ok();
  });
}

}  // namespace rlx::gguf
