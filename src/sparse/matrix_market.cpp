// Matrix Market (.mtx) coordinate files: a strict reader (every malformed line is an error
// naming the file and line) and a writer.
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>

#include "rlx/checked.h"
#include "rlx/mapped_file.h"
#include "sparse_internal.h"

namespace rlx::sparse {
namespace {

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

// Splits on spaces and tabs.
std::vector<std::string_view> fields(std::string_view line) {
  std::vector<std::string_view> f;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
    if (j > i) f.push_back(line.substr(i, j - i));
    i = j;
  }
  return f;
}

bool parse_int(std::string_view s, int64_t& v) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

bool parse_real(std::string_view s, double& v) {
  // std::from_chars for double is in GCC 12; it rejects a leading '+', which strtod accepts
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size() && std::isfinite(v);
}

}  // namespace

Expected<Coo<double, int64_t>> parse_matrix_market(std::string_view text, std::string_view name) {
  size_t pos = 0;
  int64_t line_no = 0;
  auto next_line = [&](std::string_view& line) -> bool {
    if (pos >= text.size()) return false;
    size_t e = text.find('\n', pos);
    if (e == std::string_view::npos) e = text.size();
    line = text.substr(pos, e - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    pos = e + 1;
    ++line_no;
    return true;
  };
  auto fail = [&](const auto&... what) { return error(ErrorCode::parse_error, name, ":", line_no, ": ", what...); };
  std::string_view line;
  if (!next_line(line)) return error(ErrorCode::parse_error, name, ": empty file (no %%MatrixMarket header)");
  const auto head = fields(line);
  if (head.size() != 5 || head[0] != "%%MatrixMarket")
    return fail("expected '%%MatrixMarket matrix coordinate <field> <symmetry>', got '", line.substr(0, 80), "'");
  const std::string object = lower(head[1]), format = lower(head[2]), field = lower(head[3]), symmetry = lower(head[4]);
  if (object != "matrix") return fail("object '", head[1], "' is not supported (only 'matrix')");
  if (format != "coordinate") return fail("format '", head[2], "' is not supported (only 'coordinate'; 'array' is dense)");
  if (field != "real" && field != "integer" && field != "pattern" && field != "double")
    return fail("field '", head[3], "' is not supported (real, integer, pattern)");
  if (symmetry != "general" && symmetry != "symmetric" && symmetry != "skew-symmetric")
    return fail("symmetry '", head[4], "' is not supported (general, symmetric, skew-symmetric)");
  const bool pattern = field == "pattern", integer = field == "integer";
  // comments, then the size line
  while (true) {
    if (!next_line(line)) return fail("missing the size line 'rows cols entries'");
    const auto f = fields(line);
    if (f.empty() || line[0] == '%') continue;
    int64_t r = 0, c = 0, nz = 0;
    if (f.size() != 3 || !parse_int(f[0], r) || !parse_int(f[1], c) || !parse_int(f[2], nz))
      return fail("expected the size line 'rows cols entries', got '", line.substr(0, 80), "'");
    if (r < 0 || c < 0 || nz < 0) return fail("negative size in '", line, "'");
    // the CSR made from the file holds rows + 1 row pointers: bound what one file can make us
    // allocate (a legal header could declare 10^12 empty rows)
    const int64_t max_rows = std::max<int64_t>(int64_t{1} << 20, 16 * static_cast<int64_t>(text.size()));
    if (r > max_rows || c > (int64_t{1} << 40))
      return fail("a ", r, " x ", c, " matrix is larger than this reader accepts for a file of ", text.size(),
                  " bytes (at most ", max_rows, " rows)");
    if ((symmetry != "general") && r != c) return fail("a ", symmetry, " matrix must be square, got ", r, " x ", c);
    if (r > 0 && c > 0 && (nz + r - 1) / r > c) return fail(nz, " entries do not fit a ", r, " x ", c, " matrix");
    if (r == 0 || c == 0) {
      if (nz != 0) return fail(nz, " entries in an empty ", r, " x ", c, " matrix");
    }
    // each entry takes at least 4 bytes of text ("1 1\n"): a larger count is a lie, not a reason to allocate
    if (nz > static_cast<int64_t>(text.size() / 4) + 1)
      return fail("the file is too short for ", nz, " entries");
    Coo<double, int64_t> coo;
    coo.rows = r;
    coo.cols = c;
    const size_t reserve = static_cast<size_t>(symmetry == "general" ? nz : 2 * nz);
    coo.row.reserve(reserve);
    coo.col.reserve(reserve);
    coo.val.reserve(reserve);
    int64_t seen = 0;
    while (seen < nz) {
      if (!next_line(line)) {
        ++line_no;
        return fail("the file ends after ", seen, " of ", nz, " entries");
      }
      const auto e = fields(line);
      if (e.empty()) return fail("empty line where entry ", seen + 1, " of ", nz, " is expected");
      if (line[0] == '%') return fail("a comment inside the entries");
      const size_t want = pattern ? 2 : 3;
      if (e.size() != want)
        return fail("expected ", want, " fields ('row col", pattern ? "" : " value", "'), got ", e.size());
      int64_t i = 0, j = 0;
      if (!parse_int(e[0], i) || !parse_int(e[1], j)) return fail("row and column must be integers, got '", line.substr(0, 80), "'");
      if (i < 1 || i > r || j < 1 || j > c) return fail("entry (", i, ", ", j, ") is outside the ", r, " x ", c, " matrix (1-based)");
      double v = 1;
      if (!pattern) {
        if (integer) {
          int64_t iv = 0;
          if (!parse_int(e[2], iv)) return fail("'", e[2], "' is not an integer");
          v = static_cast<double>(iv);
        } else if (!parse_real(e[2], v)) {
          return fail("'", e[2], "' is not a finite real number");
        }
      }
      if (symmetry != "general" && j > i) return fail("entry (", i, ", ", j, ") is above the diagonal of a ", symmetry, " matrix");
      if (symmetry == "skew-symmetric" && i == j) return fail("a skew-symmetric matrix has no diagonal entries, got (", i, ", ", j, ")");
      coo.row.push_back(i - 1);
      coo.col.push_back(j - 1);
      coo.val.push_back(v);
      if (symmetry != "general" && i != j) {
        coo.row.push_back(j - 1);
        coo.col.push_back(i - 1);
        coo.val.push_back(symmetry == "skew-symmetric" ? -v : v);
      }
      ++seen;
    }
    while (next_line(line))
      if (!fields(line).empty()) return fail("unexpected content after the ", nz, " entries");
    return coo;
  }
}

Expected<Coo<double, int64_t>> read_matrix_market(const std::string& path) {
  RLX_TRY(require_regular_file(path));
  std::ifstream in(path, std::ios::binary);
  if (!in) return error(ErrorCode::io_error, path, ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return error(ErrorCode::io_error, path, ": read error");
  return parse_matrix_market(ss.str(), path);
}

template <class V, class I>
Status write_matrix_market(const std::string& path, const Csr<V, I>& a) {
  RLX_TRY(validate(a, path));
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return error(ErrorCode::io_error, path, ": cannot create (", std::strerror(errno), ")");
  std::fprintf(f, "%%%%MatrixMarket matrix coordinate real general\n%% written by rlx\n%lld %lld %lld\n",
               static_cast<long long>(a.rows), static_cast<long long>(a.cols), static_cast<long long>(a.nnz()));
  for (int64_t i = 0; i < a.rows; ++i)
    for (I k = a.row_ptr[i]; k < a.row_ptr[i + 1]; ++k)
      std::fprintf(f, "%lld %lld %.17g\n", static_cast<long long>(i + 1), static_cast<long long>(a.col_idx[k]) + 1,
                   static_cast<double>(a.values[k]));
  const bool ok = std::fflush(f) == 0 && !std::ferror(f);
  std::fclose(f);
  if (!ok) return error(ErrorCode::io_error, path, ": write error");
  return Status::ok();
}

template Status write_matrix_market(const std::string&, const Csr<float, int32_t>&);
template Status write_matrix_market(const std::string&, const Csr<float, int64_t>&);
template Status write_matrix_market(const std::string&, const Csr<double, int32_t>&);
template Status write_matrix_market(const std::string&, const Csr<double, int64_t>&);

}  // namespace rlx::sparse
