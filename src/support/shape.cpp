#include "rlx/shape.h"

#include "rlx/checked.h"

namespace rlx {

std::string Dim::to_string() const {
  if (is_static()) return std::to_string(size_);
  if (is_symbol()) return symbol_;
  return "?";
}

std::string shape_to_string(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ", ";
    r += s[i].to_string();
  }
  return r + "]";
}

std::string sizes_to_string(const Sizes& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ", ";
    r += std::to_string(s[i]);
  }
  return r + "]";
}

bool is_static(const Shape& s) {
  for (const Dim& d : s)
    if (!d.is_static()) return false;
  return true;
}

Shape to_shape(const Sizes& s) { return Shape(s.begin(), s.end()); }

Expected<Sizes> static_sizes(const Shape& s, std::string_view what) {
  Sizes r;
  r.reserve(s.size());
  for (const Dim& d : s) {
    if (!d.is_static())
      return error(ErrorCode::shape_error, what, " ", shape_to_string(s),
                   " has a dimension that is not bound to a size (", d.to_string(), ")");
    r.push_back(d.size());
  }
  return r;
}

Expected<int64_t> checked_numel(const Sizes& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0) return error(ErrorCode::shape_error, "negative dimension in ", sizes_to_string(s));
    auto m = checked_mul_i64(n, d);
    if (!m) return error(ErrorCode::overflow, "element count of ", sizes_to_string(s), " overflows");
    n = *m;
  }
  return n;
}

Sizes contiguous_strides(const Sizes& s) {
  Sizes st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

Shape bind_shape(const Shape& s, const DimBindings& b) {
  Shape r = s;
  for (Dim& d : r) {
    if (d.is_symbol()) {
      auto it = b.find(d.symbol_name());
      if (it != b.end()) d = Dim(it->second);
    }
  }
  return r;
}

std::string TensorType::to_string() const {
  std::string r(dtype_name(dtype));
  return r + shape_to_string(shape);
}

Expected<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape r(n);
  for (size_t i = 0; i < n; ++i) {
    const Dim* da = i < n - a.size() ? nullptr : &a[i - (n - a.size())];
    const Dim* db = i < n - b.size() ? nullptr : &b[i - (n - b.size())];
    if (!da) { r[i] = *db; continue; }
    if (!db) { r[i] = *da; continue; }
    if (*da == *db) { r[i] = *da; continue; }
    if (da->is_static() && da->size() == 1) { r[i] = *db; continue; }
    if (db->is_static() && db->size() == 1) { r[i] = *da; continue; }
    if (da->is_unknown() || db->is_unknown()) {
      // one side unknown: the result takes the known side (checked again once bound)
      r[i] = da->is_unknown() ? *db : *da;
      continue;
    }
    return error(ErrorCode::shape_error, "shapes ", shape_to_string(a), " and ", shape_to_string(b),
                 " do not broadcast (dimension ", i, ": ", da->to_string(), " vs ",
                 db->to_string(), ")");
  }
  return r;
}

Expected<int> normalize_axis(int64_t axis, int rank) {
  if (axis < -std::max(rank, 1) || axis >= std::max(rank, 1))
    return error(ErrorCode::out_of_range, "axis ", axis, " is out of range for rank ", rank);
  if (rank == 0) return 0;
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

}  // namespace rlx
