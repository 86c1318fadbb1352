// rlx/shape.h: static and symbolic dimensions, shapes, and value types.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "rlx/dtype.h"
#include "rlx/status.h"

namespace rlx {

// A dimension: a known size, a named symbol bound at compile time (`batch`, `seq`), or
// unknown (`?`, a size that only binding the symbols can tell, e.g. after a data-dependent
// reshape).
class Dim {
 public:
  Dim() = default;
  Dim(int64_t size) : size_(size) {}  // NOLINT: sizes convert implicitly
  static Dim symbol(std::string name) {
    Dim d;
    d.size_ = -1;
    d.symbol_ = std::move(name);
    return d;
  }
  static Dim unknown() {
    Dim d;
    d.size_ = -1;
    return d;
  }

  bool is_static() const { return size_ >= 0; }
  bool is_symbol() const { return size_ < 0 && !symbol_.empty(); }
  bool is_unknown() const { return size_ < 0 && symbol_.empty(); }
  // The size; only meaningful when is_static().
  int64_t size() const { return size_; }
  const std::string& symbol_name() const { return symbol_; }
  // "384", "batch" or "?".
  std::string to_string() const;

  bool operator==(const Dim& o) const { return size_ == o.size_ && symbol_ == o.symbol_; }
  bool operator!=(const Dim& o) const { return !(*this == o); }

 private:
  int64_t size_ = 0;
  std::string symbol_;
};

using Shape = std::vector<Dim>;
// Concrete sizes, as tensors at run time have them.
using Sizes = std::vector<int64_t>;
// Values for symbolic dims.
using DimBindings = std::map<std::string, int64_t>;

std::string shape_to_string(const Shape& s);    // "[batch, 784]"
std::string sizes_to_string(const Sizes& s);    // "[8, 784]"
bool is_static(const Shape& s);
Shape to_shape(const Sizes& s);
// The sizes of a fully static shape; error naming `what` otherwise.
Expected<Sizes> static_sizes(const Shape& s, std::string_view what = "shape");
// Product of sizes; overflow is an error.
Expected<int64_t> checked_numel(const Sizes& s);
inline int64_t numel(const Sizes& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}
// Row-major strides in elements.
Sizes contiguous_strides(const Sizes& s);
// Replaces symbols that `b` binds with their sizes; unknown dims stay unknown.
Shape bind_shape(const Shape& s, const DimBindings& b);

// The type of every IR value: element type and shape.
struct TensorType {
  DType dtype = DType::f32;
  Shape shape;

  int rank() const { return static_cast<int>(shape.size()); }
  bool operator==(const TensorType& o) const { return dtype == o.dtype && shape == o.shape; }
  bool operator!=(const TensorType& o) const { return !(*this == o); }
  std::string to_string() const;  // "f32[batch, 784]"
};

// Numpy-style broadcast of two shapes; symbols broadcast when equal or against 1.
Expected<Shape> broadcast_shapes(const Shape& a, const Shape& b);

// Normalizes a possibly negative axis against `rank`; error if out of range.
Expected<int> normalize_axis(int64_t axis, int rank);

}  // namespace rlx
