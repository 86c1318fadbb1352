// The 3DGS scene file: binary little-endian PLY with one element "vertex" of float properties
// (the layout the original 3DGS's save_ply writes). Reading is strict because the file comes
// from outside: bounded header, float properties only, required properties exactly once, the
// data size equal to count x row size, finite values. Errors name the file and the property.
#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include "rlx/checked.h"
#include "rlx/mapped_file.h"
#include "rlx/splat.h"

namespace rlx::splat {
namespace {

constexpr size_t kMaxHeader = 64 * 1024;
constexpr int kMaxProperties = 1024;

Status bad(const std::string& path, const auto&... what) {
  return error(ErrorCode::format_error, path, ": ", what...);
}

std::vector<std::string> words(const std::string& line) {
  std::vector<std::string> w;
  std::istringstream in(line);
  for (std::string s; in >> s;) w.push_back(s);
  return w;
}

}  // namespace

Expected<Scene> load_ply(const std::string& path) {
  RLX_TRY(require_regular_file(path));
  std::ifstream f(path, std::ios::binary);
  if (!f) return error(ErrorCode::io_error, path, ": cannot open the file");
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) return error(ErrorCode::io_error, path, ": reading the file failed");
  return parse_ply(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), path);
}

Expected<Scene> parse_ply(std::span<const uint8_t> bytes, const std::string& path) {
  // header: lines up to "end_header\n", at most kMaxHeader bytes
  size_t header_size = 0;
  std::vector<std::string> lines;
  {
    std::string line;
    while (true) {
      if (header_size >= kMaxHeader) return bad(path, "the header has no end_header within ", kMaxHeader, " bytes");
      if (header_size >= bytes.size()) return bad(path, "the file ends inside the header (no end_header line)");
      const char ch = static_cast<char>(bytes[header_size++]);
      if (ch == '\n') {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        lines.push_back(line);
        if (line == "end_header") break;
        line.clear();
      } else {
        line.push_back(ch);
      }
    }
  }
  if (lines.empty() || lines[0] != "ply") return bad(path, "not a PLY file (the first line is not 'ply')");
  int64_t count = -1;
  std::vector<std::string> props;
  std::map<std::string, int> index;
  bool format_seen = false;
  for (size_t i = 1; i + 1 < lines.size(); ++i) {
    const std::vector<std::string> w = words(lines[i]);
    const std::string where = cat("header line ", i + 1);
    if (w.empty() || w[0] == "comment" || w[0] == "obj_info") continue;
    if (w[0] == "format") {
      if (w.size() != 3 || w[1] != "binary_little_endian" || w[2] != "1.0")
        return bad(path, where, ": format '", lines[i], "' is not supported (only binary_little_endian 1.0)");
      format_seen = true;
    } else if (w[0] == "element") {
      if (w.size() != 3) return bad(path, where, ": malformed element line '", lines[i], "'");
      if (w[1] != "vertex" || count >= 0)
        return bad(path, where, ": element '", w[1], "' is not supported (a 3DGS file has one element, vertex)");
      int64_t n = 0;
      for (char c : w[2]) {
        if (c < '0' || c > '9' || n > (int64_t{1} << 40)) return bad(path, where, ": vertex count '", w[2], "' is not a count");
        n = n * 10 + (c - '0');
      }
      if (w[2].empty()) return bad(path, where, ": empty vertex count");
      count = n;
    } else if (w[0] == "property") {
      if (count < 0) return bad(path, where, ": property before the vertex element");
      if (w.size() == 3 && w[1] == "list") return bad(path, where, ": list property is not supported");
      if (w.size() != 3) return bad(path, where, ": malformed property line '", lines[i], "'");
      if (w[1] != "float" && w[1] != "float32")
        return bad(path, "property '", w[2], "' has type ", w[1], "; a 3DGS file stores every property as float");
      if (index.count(w[2])) return bad(path, "property '", w[2], "' appears twice");
      if (static_cast<int>(props.size()) >= kMaxProperties) return bad(path, "more than ", kMaxProperties, " properties");
      index[w[2]] = static_cast<int>(props.size());
      props.push_back(w[2]);
    } else {
      return bad(path, where, ": unknown header keyword '", w[0], "'");
    }
  }
  if (!format_seen) return bad(path, "the header has no format line");
  if (count < 0) return bad(path, "the header has no vertex element");
  auto need = [&](const std::string& name) -> Expected<int> {
    auto it = index.find(name);
    if (it == index.end()) return bad(path, "required property '", name, "' is missing");
    return it->second;
  };
  int rest = 0;
  while (index.count(cat("f_rest_", rest))) ++rest;
  if (index.count(cat("f_rest_", rest + 1)) || (rest != 0 && rest != 9 && rest != 24 && rest != 45))
    return bad(path, "f_rest_* properties must be f_rest_0..f_rest_{8, 23 or 44} (SH degree 1..3), found ", rest,
                " consecutive ones");
  Scene s;
  s.count = count;
  s.sh_coeffs = 1 + rest / 3;
  std::vector<int> col;  // property index for x y z, f_dc_0..2, opacity, scale_0..2, rot_0..3
  for (const char* name : {"x", "y", "z", "f_dc_0", "f_dc_1", "f_dc_2", "opacity", "scale_0", "scale_1", "scale_2",
                           "rot_0", "rot_1", "rot_2", "rot_3"}) {
    RLX_ASSIGN_OR_RETURN(int c, need(name));
    col.push_back(c);
  }
  const int64_t row = static_cast<int64_t>(props.size()) * 4;
  const std::optional<int64_t> data_size = checked_mul_i64(count, row);
  if (!data_size) return bad(path, "vertex count ", count, " times the row size ", row, " overflows");
  const int64_t data = *data_size;
  const int64_t have = static_cast<int64_t>(bytes.size() - header_size);
  if (have != data)
    return bad(path, "the vertex data has ", have, " bytes after the header; ", count, " vertices of ", props.size(),
               " float properties need ", data);
  std::vector<float> raw(static_cast<size_t>(count) * props.size());
  if (!raw.empty()) std::memcpy(raw.data(), bytes.data() + header_size, static_cast<size_t>(data));
  // little-endian on disk; this host is little-endian (checked at compile time below)
  static_assert(std::endian::native == std::endian::little, "the PLY reader assumes a little-endian host");
  const size_t np = props.size();
  for (size_t i = 0; i < raw.size(); ++i)
    if (!std::isfinite(raw[i]))
      return bad(path, "vertex ", i / np, " property '", props[i % np], "' is not finite (", raw[i], ")");
  const int k = s.sh_coeffs;
  s.means.resize(count * 3);
  s.log_scales.resize(count * 3);
  s.quats.resize(count * 4);
  s.opacity_logits.resize(count);
  s.sh.resize(count * k * 3);
  std::vector<int> rest_col(rest);
  for (int j = 0; j < rest; ++j) rest_col[j] = index[cat("f_rest_", j)];
  for (int64_t v = 0; v < count; ++v) {
    const float* r = &raw[v * np];
    for (int j = 0; j < 3; ++j) {
      s.means[v * 3 + j] = r[col[j]];
      s.sh[(v * k) * 3 + j] = r[col[3 + j]];
      s.log_scales[v * 3 + j] = r[col[7 + j]];
    }
    s.opacity_logits[v] = r[col[6]];
    for (int j = 0; j < 4; ++j) s.quats[v * 4 + j] = r[col[10 + j]];
    // f_rest is channel-major: f_rest[c * (k - 1) + j] is coefficient j + 1 of channel c
    for (int c = 0; c < 3; ++c)
      for (int j = 0; j + 1 < k; ++j) s.sh[(v * k + j + 1) * 3 + c] = r[rest_col[c * (k - 1) + j]];
  }
  return s;
}

Status save_ply(const Scene& s, const std::string& path) {
  const int k = s.sh_coeffs;
  if (k != 1 && k != 4 && k != 9 && k != 16) return error(ErrorCode::invalid_argument, path, ": sh_coeffs must be 1, 4, 9 or 16, got ", k);
  const size_t n = static_cast<size_t>(s.count);
  if (s.means.size() != n * 3 || s.log_scales.size() != n * 3 || s.quats.size() != n * 4 || s.opacity_logits.size() != n ||
      s.sh.size() != n * k * 3)
    return error(ErrorCode::invalid_argument, path, ": the scene's arrays do not match its count ", s.count);
  std::ofstream f(path, std::ios::binary);
  if (!f) return error(ErrorCode::io_error, path, ": cannot create the file");
  f << "ply\nformat binary_little_endian 1.0\nelement vertex " << s.count << "\n";
  for (const char* p : {"x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2"}) f << "property float " << p << "\n";
  for (int j = 0; j < 3 * (k - 1); ++j) f << "property float f_rest_" << j << "\n";
  for (const char* p : {"opacity", "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"})
    f << "property float " << p << "\n";
  f << "end_header\n";
  std::vector<float> row;
  for (size_t v = 0; v < n; ++v) {
    row.clear();
    for (int j = 0; j < 3; ++j) row.push_back(s.means[v * 3 + j]);
    for (int j = 0; j < 3; ++j) row.push_back(0.f);
    for (int j = 0; j < 3; ++j) row.push_back(s.sh[v * k * 3 + j]);
    for (int c = 0; c < 3; ++c)
      for (int j = 0; j + 1 < k; ++j) row.push_back(s.sh[(v * k + j + 1) * 3 + c]);
    row.push_back(s.opacity_logits[v]);
    for (int j = 0; j < 3; ++j) row.push_back(s.log_scales[v * 3 + j]);
    for (int j = 0; j < 4; ++j) row.push_back(s.quats[v * 4 + j]);
    f.write(reinterpret_cast<const char*>(row.data()), static_cast<std::streamsize>(row.size() * 4));
  }
  if (!f) return error(ErrorCode::io_error, path, ": writing failed");
  return Status::ok();
}

}  // namespace rlx::splat
