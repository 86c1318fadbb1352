// rlx/attrs.h: node attributes (ints, floats, strings, lists, dtypes, small tensors).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "rlx/dtype.h"
#include "rlx/status.h"
#include "rlx/tensor.h"

namespace rlx {

enum class AttrKind : uint8_t { i64, f64, str, i64s, f64s, dtype, tensor };
std::string_view attr_kind_name(AttrKind k);

using AttrValue =
    std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>, DType, Tensor>;
inline AttrKind attr_kind(const AttrValue& v) { return static_cast<AttrKind>(v.index()); }

// An ordered (by name) set of named attribute values.
class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string, AttrValue>> items);

  bool has(std::string_view name) const { return find(name) != nullptr; }
  const AttrValue* find(std::string_view name) const;
  void set(std::string name, AttrValue value);
  void erase(std::string_view name);
  const std::vector<std::pair<std::string, AttrValue>>& items() const { return items_; }
  bool empty() const { return items_.empty(); }

  // Typed getters: the default when absent. An i64 attribute also reads as f64.
  int64_t i(std::string_view name, int64_t def = 0) const;
  double f(std::string_view name, double def = 0.0) const;
  std::string s(std::string_view name, std::string_view def = "") const;
  std::vector<int64_t> ints(std::string_view name, std::vector<int64_t> def = {}) const;
  std::vector<double> floats(std::string_view name, std::vector<double> def = {}) const;
  DType dtype(std::string_view name, DType def = DType::f32) const;
  const Tensor* tensor(std::string_view name) const;

  bool operator==(const Attrs& o) const;

 private:
  std::vector<std::pair<std::string, AttrValue>> items_;
};

}  // namespace rlx
