#include "rlx/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "rlx/mapped_file.h"
#include "rlx/checked.h"

namespace rlx {
namespace {

struct NpyType {
  const char* descr;
  DType dtype;
};
constexpr NpyType kTypes[] = {
    {"<f4", DType::f32}, {"<f8", DType::f64}, {"<f2", DType::f16}, {"<i1", DType::i8},  {"|i1", DType::i8},
    {"<u1", DType::u8},  {"|u1", DType::u8},  {"<i2", DType::i16}, {"<u2", DType::u16}, {"<i4", DType::i32},
    {"<u4", DType::u32}, {"<i8", DType::i64}, {"<u8", DType::u64}, {"|b1", DType::boolean}, {"<c8", DType::c64},
};

// Value of `key` in the header dict: the text after "'key':" up to the matching end.
std::string_view dict_value(std::string_view h, std::string_view key) {
  std::string pat = "'" + std::string(key) + "'";
  size_t p = h.find(pat);
  if (p == std::string_view::npos) return {};
  p = h.find(':', p + pat.size());
  if (p == std::string_view::npos) return {};
  ++p;
  while (p < h.size() && h[p] == ' ') ++p;
  size_t e = p;
  if (p < h.size() && h[p] == '(') {
    e = h.find(')', p);
    if (e == std::string_view::npos) return {};
    return h.substr(p, e - p + 1);
  }
  if (p < h.size() && h[p] == '\'') {
    e = h.find('\'', p + 1);
    if (e == std::string_view::npos) return {};
    return h.substr(p + 1, e - p - 1);
  }
  while (e < h.size() && h[e] != ',' && h[e] != '}') ++e;
  return h.substr(p, e - p);
}

}  // namespace

Expected<Tensor> parse_npy(std::string_view b, const std::string& name) {
  auto bad = [&](auto... parts) { return error(ErrorCode::format_error, name, ": ", parts...); };
  if (b.size() < 10 || std::memcmp(b.data(), "\x93NUMPY", 6) != 0) return bad("not a .npy file (bad magic)");
  const int major = static_cast<unsigned char>(b[6]);
  size_t header_len, offset;
  if (major == 1) {
    header_len = static_cast<unsigned char>(b[8]) | (static_cast<size_t>(static_cast<unsigned char>(b[9])) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (b.size() < 12) return bad("truncated header");
    header_len = 0;
    for (int i = 0; i < 4; ++i) header_len |= static_cast<size_t>(static_cast<unsigned char>(b[8 + i])) << (8 * i);
    offset = 12;
  } else {
    return bad("unsupported .npy version ", major);
  }
  if (header_len > b.size() - offset) return bad("header length ", header_len, " runs past the end of the file");
  std::string_view h = b.substr(offset, header_len);
  std::string_view descr = dict_value(h, "descr");
  std::string_view fortran = dict_value(h, "fortran_order");
  std::string_view shape = dict_value(h, "shape");
  if (descr.empty() || shape.empty()) return bad("header lacks descr or shape");
  if (fortran.substr(0, 4) == "True") return bad("Fortran-order arrays are not supported");
  const NpyType* t = nullptr;
  for (const NpyType& k : kTypes)
    if (descr == k.descr) t = &k;
  if (!t) return bad("unsupported dtype '", descr, "'");
  Sizes sizes;
  std::string sh(shape.substr(1, shape.size() - 2));
  std::stringstream ss(sh);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t s = item.find_first_not_of(' ');
    if (s == std::string::npos) continue;
    char* end = nullptr;
    long long v = std::strtoll(item.c_str() + s, &end, 10);
    if (end == item.c_str() + s || v < 0) return bad("bad dimension '", item, "' in shape");
    sizes.push_back(v);
  }
  auto n = checked_numel(sizes);
  if (!n) return bad(n.status().message());
  auto bytes = checked_mul(static_cast<uint64_t>(*n), static_cast<uint64_t>(dtype_bits(t->dtype) / 8));
  const size_t data_at = offset + header_len;
  if (!bytes || *bytes > b.size() - data_at)
    return bad("data holds ", b.size() - data_at, " bytes, the header needs ", bytes ? *bytes : 0);
  Tensor out = Tensor::zeros(t->dtype, sizes);
  if (*bytes) std::memcpy(out.bytes(), b.data() + data_at, *bytes);
  return out;
}

Expected<Tensor> read_npy(const std::string& path) {
  RLX_ASSIGN_OR_RETURN(std::string data, read_regular_file(path, uint64_t{1} << 40));
  return parse_npy(data, path);
}

Status write_npy(const std::string& path, const Tensor& t) {
  const char* descr = nullptr;
  for (const NpyType& k : kTypes)
    if (k.dtype == t.dtype()) {
      descr = k.descr;
      break;
    }
  if (t.dtype() == DType::bf16) descr = "<u2";
  if (!descr) return error(ErrorCode::unsupported, "cannot write ", dtype_name(t.dtype()), " as .npy");
  std::string shape = "(";
  for (size_t i = 0; i < t.sizes().size(); ++i) shape += std::to_string(t.sizes()[i]) + (t.sizes().size() == 1 ? "," : i + 1 < t.sizes().size() ? ", " : "");
  shape += ")";
  std::string h = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + h.size() + 1;
  h += std::string((64 - total % 64) % 64, ' ') + "\n";
  std::ofstream f(path, std::ios::binary);
  if (!f) return error(ErrorCode::io_error, "cannot write ", path);
  f.write("\x93NUMPY\x01\x00", 8);
  const uint16_t hl = static_cast<uint16_t>(h.size());
  const char len[2] = {static_cast<char>(hl & 0xff), static_cast<char>(hl >> 8)};
  f.write(len, 2);
  f.write(h.data(), static_cast<std::streamsize>(h.size()));
  f.write(reinterpret_cast<const char*>(t.bytes()), static_cast<std::streamsize>(t.nbytes()));
  if (!f) return error(ErrorCode::io_error, "write failed: ", path);
  return Status::ok();
}

}  // namespace rlx
