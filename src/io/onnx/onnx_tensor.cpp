// TensorProto decoding (raw, typed fields, external data confined to the model's folder) and
// TensorProto files (test_data_set input_N.pb / output_N.pb).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include <google/protobuf/io/coded_stream.h>

#include "rlx/mapped_file.h"
#include "onnx_internal.h"
#include "rlx/checked.h"

namespace rlx::onnx_import {

using ::onnx::TensorProto;

// Data types of IR version 10 that Debian's onnx 1.12 protobuf does not name: packed two per
// byte, the first element in the low nibble (as rlx's i4/u4).
constexpr int32_t kOnnxUint4 = 21;
constexpr int32_t kOnnxInt4 = 22;

std::optional<DType> dtype_from_onnx(int32_t t) {
  switch (t) {
    case TensorProto::FLOAT: return DType::f32;
    case TensorProto::UINT8: return DType::u8;
    case TensorProto::INT8: return DType::i8;
    case TensorProto::UINT16: return DType::u16;
    case TensorProto::INT16: return DType::i16;
    case TensorProto::INT32: return DType::i32;
    case TensorProto::INT64: return DType::i64;
    case TensorProto::BOOL: return DType::boolean;
    case TensorProto::FLOAT16: return DType::f16;
    case TensorProto::DOUBLE: return DType::f64;
    case TensorProto::UINT32: return DType::u32;
    case TensorProto::UINT64: return DType::u64;
    case TensorProto::COMPLEX64: return DType::c64;
    case TensorProto::BFLOAT16: return DType::bf16;
    case kOnnxUint4: return DType::u4;
    case kOnnxInt4: return DType::i4;
    default: return std::nullopt;
  }
}

int32_t dtype_to_onnx(DType t) {
  switch (t) {
    case DType::f32: return TensorProto::FLOAT;
    case DType::u8: return TensorProto::UINT8;
    case DType::i8: return TensorProto::INT8;
    case DType::u16: return TensorProto::UINT16;
    case DType::i16: return TensorProto::INT16;
    case DType::i32: return TensorProto::INT32;
    case DType::i64: return TensorProto::INT64;
    case DType::boolean: return TensorProto::BOOL;
    case DType::f16: return TensorProto::FLOAT16;
    case DType::f64: return TensorProto::DOUBLE;
    case DType::u32: return TensorProto::UINT32;
    case DType::u64: return TensorProto::UINT64;
    case DType::c64: return TensorProto::COMPLEX64;
    case DType::bf16: return TensorProto::BFLOAT16;
    case DType::u4: return kOnnxUint4;
    case DType::i4: return kOnnxInt4;
    default: return TensorProto::UNDEFINED;
  }
}

std::string onnx_dtype_name(int32_t t) {
  if (t == kOnnxUint4) return "UINT4";
  if (t == kOnnxInt4) return "INT4";
  if (TensorProto::DataType_IsValid(t)) return TensorProto::DataType_Name(static_cast<TensorProto::DataType>(t));
  return cat("unknown data type ", t);
}

namespace {

constexpr int64_t kMaxElements = int64_t{1} << 40;
constexpr int kMaxRank = 64;

// External data: a relative path inside `folder`, read with bounds checks.
Expected<Tensor> read_external(const TensorProto& t, DType dt, const Sizes& sizes, size_t nbytes,
                               const std::string& folder, const std::string& what) {
  std::string location;
  uint64_t offset = 0, length = 0;
  bool has_length = false;
  for (const auto& kv : t.external_data()) {
    auto num = [&](uint64_t& out) -> Status {
      const std::string& v = kv.value();
      if (v.empty() || v.size() > 20 || v.find_first_not_of("0123456789") != std::string::npos)
        return error(ErrorCode::format_error, what, ": external data ", kv.key(), " '", v, "' is not a number");
      errno = 0;
      unsigned long long x = std::strtoull(v.c_str(), nullptr, 10);
      if (errno == ERANGE) return error(ErrorCode::format_error, what, ": external data ", kv.key(), " overflows");
      out = x;
      return Status::ok();
    };
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") RLX_TRY(num(offset));
    else if (kv.key() == "length") { RLX_TRY(num(length)); has_length = true; }
  }
  if (folder.empty())
    return error(ErrorCode::format_error, what, ": external data is not allowed for a model read from memory");
  if (location.empty()) return error(ErrorCode::format_error, what, ": external data has no location");
  if (location.find('\0') != std::string::npos)
    return error(ErrorCode::format_error, what, ": external data location contains a NUL byte");
  if (location[0] == '/' || location[0] == '\\')
    return error(ErrorCode::format_error, what, ": external data location '", location,
                 "' is an absolute path (must be relative to the model's folder)");
  {
    size_t pos = 0;
    while (pos <= location.size()) {
      size_t e = location.find_first_of("/\\", pos);
      if (e == std::string::npos) e = location.size();
      if (location.compare(pos, e - pos, "..") == 0)
        return error(ErrorCode::format_error, what, ": external data location '", location,
                     "' has a '..' component (must stay inside the model's folder)");
      pos = e + 1;
    }
  }
  char real_folder[PATH_MAX], real_file[PATH_MAX];
  if (!realpath(folder.c_str(), real_folder))
    return error(ErrorCode::io_error, what, ": cannot resolve the model's folder ", folder, ": ", std::strerror(errno));
  const std::string full = folder + "/" + location;
  if (!realpath(full.c_str(), real_file))
    return error(ErrorCode::io_error, what, ": external data file '", location, "' not found: ", std::strerror(errno));
  std::string rf = real_folder, rp = real_file;
  if (rf != "/") rf += "/";
  if (rp.compare(0, rf.size(), rf) != 0)
    return error(ErrorCode::format_error, what, ": external data location '", location,
                 "' resolves outside the model's folder (", rp, ")");
  int fd = ::open(real_file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO must not block the open
  if (fd < 0) return error(ErrorCode::io_error, what, ": cannot open external data ", rp, ": ", std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return error(ErrorCode::format_error, what, ": external data ", rp, " is not a regular file");
  }
  const uint64_t fsize = static_cast<uint64_t>(st.st_size);
  if (!has_length) length = nbytes;
  auto end = checked_add(offset, length);
  if (!end || *end > fsize) {
    ::close(fd);
    return error(ErrorCode::format_error, what, ": external data range [", offset, ", +", length,
                 ") lies outside ", rp, " (", fsize, " bytes)");
  }
  if (length != nbytes) {
    ::close(fd);
    return error(ErrorCode::format_error, what, ": external data length ", length, " does not match ",
                 dtype_name(dt), sizes_to_string(sizes), " (", nbytes, " bytes)");
  }
  Tensor out(dt, sizes, allocate_storage(nbytes));
  size_t done = 0;
  while (done < nbytes) {
    ssize_t r = ::pread(fd, out.bytes() + done, nbytes - done, static_cast<off_t>(offset + done));
    if (r <= 0) {
      ::close(fd);
      return error(ErrorCode::io_error, what, ": reading external data ", rp, " failed");
    }
    done += static_cast<size_t>(r);
  }
  ::close(fd);
  return out;
}

template <class Field, class Store>
Status fill_typed(const Field& f, int64_t n, const std::string& what, const char* field_name, Store store) {
  if (static_cast<int64_t>(f.size()) != n)
    return error(ErrorCode::format_error, what, ": ", field_name, " holds ", f.size(), " values for ", n, " elements");
  for (int64_t i = 0; i < n; ++i) store(i, f[static_cast<int>(i)]);
  return Status::ok();
}

}  // namespace

Expected<Tensor> tensor_from_proto(const TensorProto& t, const std::string& folder, const std::string& what_in) {
  const std::string what = t.name().empty() ? what_in : cat(what_in, " tensor '", t.name(), "'");
  if (t.has_segment()) return error(ErrorCode::unsupported, what, ": segmented tensors are not supported");
  auto dt = dtype_from_onnx(t.data_type());
  if (!dt) return error(ErrorCode::unsupported, what, ": data type ", onnx_dtype_name(t.data_type()), " is not supported");
  if (t.dims_size() > kMaxRank) return error(ErrorCode::format_error, what, ": rank ", t.dims_size(), " exceeds ", kMaxRank);
  Sizes sizes;
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0) return error(ErrorCode::format_error, what, ": negative dimension ", d);
    auto m = checked_mul_i64(n, d);
    if (!m || *m > kMaxElements)
      return error(ErrorCode::overflow, what, ": element count of dims ", sizes_to_string(Sizes(t.dims().begin(), t.dims().end())),
                   " overflows (limit 2^40)");
    n = *m;
    sizes.push_back(d);
  }
  const size_t nbytes = dtype_bytes(*dt, static_cast<size_t>(n));
  if (t.data_location() == TensorProto::EXTERNAL) return read_external(t, *dt, sizes, nbytes, folder, what);
  if (t.has_raw_data()) {
    if (t.raw_data().size() != nbytes)
      return error(ErrorCode::format_error, what, ": raw_data has ", t.raw_data().size(), " bytes, but ",
                   dtype_name(*dt), sizes_to_string(sizes), " needs ", nbytes);
    Tensor out(*dt, sizes, allocate_storage(nbytes));
    if (nbytes) std::memcpy(out.bytes(), t.raw_data().data(), nbytes);
    if (*dt == DType::boolean)
      for (size_t i = 0; i < nbytes; ++i) out.bytes()[i] = out.bytes()[i] != 0;
    return out;
  }
  // typed fields: check the value count before allocating anything
  if (is_packed(*dt))
    return error(ErrorCode::unsupported, what, ": ", dtype_name(*dt), " values in int32_data (rlx reads them from raw_data)");
  int64_t have = 0;
  const char* field = "int32_data";
  switch (t.data_type()) {
    case TensorProto::FLOAT: have = t.float_data_size(); field = "float_data"; break;
    case TensorProto::COMPLEX64: have = t.float_data_size() / 2; field = "float_data"; break;
    case TensorProto::DOUBLE: have = t.double_data_size(); field = "double_data"; break;
    case TensorProto::INT64: have = t.int64_data_size(); field = "int64_data"; break;
    case TensorProto::UINT32:
    case TensorProto::UINT64: have = t.uint64_data_size(); field = "uint64_data"; break;
    default: have = t.int32_data_size(); break;
  }
  if (have != n && n != 0)
    return error(ErrorCode::format_error, what, ": ", field, " holds ", have, " values for ", n, " elements of ",
                 dtype_name(*dt), sizes_to_string(sizes), " (and there is no raw_data)");
  Tensor out(*dt, sizes, allocate_storage(nbytes));
  if (n == 0) return out;
  Status s;
  switch (t.data_type()) {
    case TensorProto::FLOAT:
      s = fill_typed(t.float_data(), n, what, "float_data", [&](int64_t i, float v) { out.data<float>()[i] = v; });
      break;
    case TensorProto::COMPLEX64:
      s = fill_typed(t.float_data(), 2 * n, what, "float_data", [&](int64_t i, float v) { out.data<float>()[i] = v; });
      break;
    case TensorProto::DOUBLE:
      s = fill_typed(t.double_data(), n, what, "double_data", [&](int64_t i, double v) { out.data<double>()[i] = v; });
      break;
    case TensorProto::INT64:
      s = fill_typed(t.int64_data(), n, what, "int64_data", [&](int64_t i, int64_t v) { out.data<int64_t>()[i] = v; });
      break;
    case TensorProto::UINT32:
    case TensorProto::UINT64:
      s = fill_typed(t.uint64_data(), n, what, "uint64_data", [&](int64_t i, uint64_t v) {
        if (*dt == DType::u32) out.data<uint32_t>()[i] = static_cast<uint32_t>(v);
        else out.data<uint64_t>()[i] = v;
      });
      break;
    case TensorProto::FLOAT16:
    case TensorProto::BFLOAT16:
      s = fill_typed(t.int32_data(), n, what, "int32_data",
                     [&](int64_t i, int32_t v) { out.data<uint16_t>()[i] = static_cast<uint16_t>(v); });
      break;
    case TensorProto::BOOL:
      s = fill_typed(t.int32_data(), n, what, "int32_data", [&](int64_t i, int32_t v) { out.data<uint8_t>()[i] = v != 0; });
      break;
    default:  // int8, uint8, int16, uint16, int32 in int32_data
      s = fill_typed(t.int32_data(), n, what, "int32_data", [&](int64_t i, int32_t v) { out.set_f64(i, v); });
      break;
  }
  RLX_TRY(s);
  return out;
}

}  // namespace rlx::onnx_import

namespace rlx::onnx {

Expected<Tensor> parse_tensor(std::string_view bytes, const std::string& what, std::string* name_out) {
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    return error(ErrorCode::format_error, what, ": larger than protobuf's 2 GiB limit");
  ::onnx::TensorProto t;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()), static_cast<int>(bytes.size()));
  in.SetRecursionLimit(64);
  if (!t.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage())
    return error(ErrorCode::format_error, what, ": not a valid TensorProto (truncated or malformed protobuf)");
  if (name_out) *name_out = t.name();
  return onnx_import::tensor_from_proto(t, "", what);
}

Expected<Tensor> read_tensor_file(const std::string& path, std::string* name_out) {
  RLX_ASSIGN_OR_RETURN(std::string bytes, read_regular_file(path, static_cast<uint64_t>(INT_MAX)));
  return parse_tensor(bytes, path, name_out);
}

Status write_tensor_file(const std::string& path, const Tensor& t, const std::string& name) {
  ::onnx::TensorProto p;
  int32_t dt = onnx_import::dtype_to_onnx(t.dtype());
  if (dt == ::onnx::TensorProto::UNDEFINED)
    return error(ErrorCode::unsupported, path, ": ONNX has no data type for ", dtype_name(t.dtype()));
  p.set_data_type(dt);
  p.set_name(name);
  for (int64_t d : t.sizes()) p.add_dims(d);
  p.set_raw_data(std::string(reinterpret_cast<const char*>(t.bytes()), t.nbytes()));
  std::ofstream f(path, std::ios::binary);
  if (!f || !p.SerializeToOstream(&f)) return error(ErrorCode::io_error, "cannot write ", path);
  return Status::ok();
}

}  // namespace rlx::onnx
