#include "rlx/attrs.h"

#include <algorithm>
#include <cstring>

namespace rlx {

std::string_view attr_kind_name(AttrKind k) {
  switch (k) {
    case AttrKind::i64: return "int";
    case AttrKind::f64: return "float";
    case AttrKind::str: return "string";
    case AttrKind::i64s: return "ints";
    case AttrKind::f64s: return "floats";
    case AttrKind::dtype: return "dtype";
    case AttrKind::tensor: return "tensor";
  }
  return "?";
}

Attrs::Attrs(std::initializer_list<std::pair<std::string, AttrValue>> items) {
  for (const auto& kv : items) set(kv.first, kv.second);
}

const AttrValue* Attrs::find(std::string_view name) const {
  for (const auto& kv : items_)
    if (kv.first == name) return &kv.second;
  return nullptr;
}

void Attrs::set(std::string name, AttrValue value) {
  auto it = std::lower_bound(items_.begin(), items_.end(), name,
                             [](const auto& kv, const std::string& n) { return kv.first < n; });
  if (it != items_.end() && it->first == name) {
    it->second = std::move(value);
  } else {
    items_.insert(it, {std::move(name), std::move(value)});
  }
}

void Attrs::erase(std::string_view name) {
  items_.erase(std::remove_if(items_.begin(), items_.end(),
                              [&](const auto& kv) { return kv.first == name; }),
               items_.end());
}

int64_t Attrs::i(std::string_view name, int64_t def) const {
  const AttrValue* v = find(name);
  if (!v) return def;
  if (auto p = std::get_if<int64_t>(v)) return *p;
  if (auto p = std::get_if<double>(v)) return static_cast<int64_t>(*p);
  return def;
}

double Attrs::f(std::string_view name, double def) const {
  const AttrValue* v = find(name);
  if (!v) return def;
  if (auto p = std::get_if<double>(v)) return *p;
  if (auto p = std::get_if<int64_t>(v)) return static_cast<double>(*p);
  return def;
}

std::string Attrs::s(std::string_view name, std::string_view def) const {
  const AttrValue* v = find(name);
  if (v)
    if (auto p = std::get_if<std::string>(v)) return *p;
  return std::string(def);
}

std::vector<int64_t> Attrs::ints(std::string_view name, std::vector<int64_t> def) const {
  const AttrValue* v = find(name);
  if (!v) return def;
  if (auto p = std::get_if<std::vector<int64_t>>(v)) return *p;
  if (auto p = std::get_if<int64_t>(v)) return {*p};
  return def;
}

std::vector<double> Attrs::floats(std::string_view name, std::vector<double> def) const {
  const AttrValue* v = find(name);
  if (!v) return def;
  if (auto p = std::get_if<std::vector<double>>(v)) return *p;
  if (auto p = std::get_if<std::vector<int64_t>>(v)) return std::vector<double>(p->begin(), p->end());
  if (auto p = std::get_if<double>(v)) return {*p};
  return def;
}

DType Attrs::dtype(std::string_view name, DType def) const {
  const AttrValue* v = find(name);
  if (v)
    if (auto p = std::get_if<DType>(v)) return *p;
  return def;
}

const Tensor* Attrs::tensor(std::string_view name) const {
  const AttrValue* v = find(name);
  return v ? std::get_if<Tensor>(v) : nullptr;
}

namespace {
bool tensor_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  if (a.nbytes() == 0) return true;
  return std::memcmp(a.bytes(), b.bytes(), a.nbytes()) == 0;
}
}  // namespace

bool Attrs::operator==(const Attrs& o) const {
  if (items_.size() != o.items_.size()) return false;
  for (size_t k = 0; k < items_.size(); ++k) {
    if (items_[k].first != o.items_[k].first) return false;
    const AttrValue& a = items_[k].second;
    const AttrValue& b = o.items_[k].second;
    if (a.index() != b.index()) return false;
    bool same = std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, Tensor>) {
            return tensor_equal(x, std::get<Tensor>(b));
          } else {
            return x == std::get<T>(b);
          }
        },
        a);
    if (!same) return false;
  }
  return true;
}

}  // namespace rlx
