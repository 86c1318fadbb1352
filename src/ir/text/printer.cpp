// The printer of the graph and primitive levels. It never fails and never reads out of
// bounds, even on a graph that does not verify, because it is what people use to look at a
// broken graph.
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "lexer.h"
#include "rlx/ir_text.h"
#include "text_format.h"

namespace rlx::text {
namespace {

template <class T>
T load(const uint8_t* p, int64_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof(T));
  return v;
}

// Whether the tensor's storage holds all its bytes (an undefined or truncated tensor prints
// as an unparsable placeholder instead of being read).
bool readable(const Tensor& t) {
  if (t.numel() < 0) return false;
  if (t.nbytes() == 0) return true;
  const auto& s = t.storage();
  return s && s->data() && t.byte_offset() <= s->size() && s->size() - t.byte_offset() >= t.nbytes();
}

std::string format_element(const Tensor& t, int64_t i) {
  const uint8_t* p = t.bytes();
  switch (t.dtype()) {
    case DType::f32: return format_f32(load<float>(p, i));
    case DType::f16: return format_f32(f16_to_f32(load<uint16_t>(p, i)));
    case DType::bf16: return format_f32(bf16_to_f32(load<uint16_t>(p, i)));
    case DType::f64: return format_f64(load<double>(p, i));
    case DType::c64:
      return concat("(", format_f32(load<float>(p, 2 * i)), ", ", format_f32(load<float>(p, 2 * i + 1)), ")");
    case DType::i8: return std::to_string(load<int8_t>(p, i));
    case DType::u8: return std::to_string(load<uint8_t>(p, i));
    case DType::i16: return std::to_string(load<int16_t>(p, i));
    case DType::u16: return std::to_string(load<uint16_t>(p, i));
    case DType::i32: return std::to_string(load<int32_t>(p, i));
    case DType::u32: return std::to_string(load<uint32_t>(p, i));
    case DType::i64: return std::to_string(load<int64_t>(p, i));
    case DType::u64: return std::to_string(load<uint64_t>(p, i));
    case DType::boolean: return load<uint8_t>(p, i) ? "true" : "false";
    case DType::i4:
    case DType::u4: return std::to_string(static_cast<int>(t.get_f64(i)));
  }
  return "?";
}

bool elements_equal(const Tensor& t, int64_t i, int64_t j) {
  if (is_packed(t.dtype())) return t.get_f64(i) == t.get_f64(j);
  const size_t w = static_cast<size_t>(dtype_bits(t.dtype()) / 8);
  return std::memcmp(t.bytes() + i * w, t.bytes() + j * w, w) == 0;
}

std::string format_dim(const Dim& d) {
  if (d.is_static()) return std::to_string(d.size());
  if (d.is_unknown()) return "?";
  return is_identifier(d.symbol_name()) ? d.symbol_name() : quote(d.symbol_name());
}

template <class T, class F>
std::string format_list(const std::vector<T>& xs, F f) {
  std::string r = "[";
  for (size_t i = 0; i < xs.size(); ++i) {
    if (i) r += ", ";
    r += f(xs[i]);
  }
  return r + "]";
}

std::string format_attr_name(const std::string& name) { return is_identifier(name) ? name : quote(name); }

std::string format_attrs(const Attrs& attrs) {
  std::string r = "{";
  bool first = true;
  for (const auto& [name, value] : attrs.items()) {
    if (!first) r += ", ";
    first = false;
    r += concat(format_attr_name(name), " = ", format_attr_value(value));
  }
  return r + "}";
}

// Names of values as printed (without '%'): Value::name when it is a valid name not taken by
// an earlier value, else the value id, suffixed `_k` when a custom name already took it.
class Namer {
 public:
  explicit Namer(const Graph& g) : g_(g), names_(g.values.size()) {
    const ValueId nv = static_cast<ValueId>(g.values.size());
    std::vector<ValueId> order;
    for (ValueId v : g.inputs) order.push_back(v);
    for (const Node& n : g.nodes)
      for (ValueId v : n.outputs) order.push_back(v);
    for (ValueId v = 0; v < nv; ++v) order.push_back(v);
    std::set<std::string> taken;
    for (ValueId v : order) {
      if (v < 0 || v >= nv || !names_[v].empty()) continue;
      const std::string& n = g.values[v].name;
      if (is_value_name(n) && taken.insert(n).second) names_[v] = n;
    }
    for (ValueId v : order) {
      if (v < 0 || v >= nv || !names_[v].empty()) continue;
      std::string cand = std::to_string(v);
      for (int k = 1; taken.count(cand); ++k) cand = cat(v, "_", k);
      taken.insert(cand);
      names_[v] = cand;
    }
  }

  std::string operator()(ValueId v) const {
    if (v < 0 || v >= static_cast<ValueId>(names_.size())) return cat("%<bad:", v, ">");
    return concat("%", names_[v]);
  }
  std::string type(ValueId v) const {
    if (v < 0 || v >= static_cast<ValueId>(names_.size())) return "<bad>";
    return format_type(g_.values[v].type);
  }

 private:
  const Graph& g_;
  std::vector<std::string> names_;
};

// A param node whose attributes are exactly what Graph::add_param makes for its output type,
// so that `param "name" : type` reproduces it.
bool is_plain_param(const Graph& g, const Node& n) {
  if (n.op != Op::Param || !n.inputs.empty() || n.outputs.size() != 1 || n.attrs.items().size() != 3) return false;
  const AttrValue* name = n.attrs.find("name");
  const AttrValue* dt = n.attrs.find("dtype");
  const AttrValue* shape = n.attrs.find("shape");
  if (!name || !dt || !shape || !std::holds_alternative<std::string>(*name) || !std::holds_alternative<DType>(*dt) ||
      !std::holds_alternative<std::vector<int64_t>>(*shape))
    return false;
  ValueId v = n.outputs[0];
  if (v < 0 || v >= static_cast<ValueId>(g.values.size())) return false;
  const TensorType& t = g.values[v].type;
  const auto& sizes = std::get<std::vector<int64_t>>(*shape);
  if (t.dtype != std::get<DType>(*dt) || sizes.size() != t.shape.size()) return false;
  for (size_t i = 0; i < sizes.size(); ++i)
    if (sizes[i] != (t.shape[i].is_static() ? t.shape[i].size() : 0)) return false;
  return true;
}

// A constant node holding one tensor whose type is its output type.
bool is_plain_constant(const Graph& g, const Node& n) {
  if (n.op != Op::Constant || !n.inputs.empty() || n.outputs.size() != 1 || n.attrs.items().size() != 1) return false;
  const Tensor* t = n.attrs.tensor("value");
  ValueId v = n.outputs[0];
  if (!t || !readable(*t) || v < 0 || v >= static_cast<ValueId>(g.values.size())) return false;
  return g.values[v].type == t->type();
}

}  // namespace

std::string format_type(const TensorType& t) {
  std::string r(dtype_name(t.dtype));
  r += format_list(t.shape, format_dim);
  return r;
}

std::string format_dense_payload(const Tensor& t) {
  if (!readable(t)) return "<undefined>";
  const int64_t n = t.numel();
  if (n == 0) return "[]";
  bool splat = true;
  for (int64_t i = 1; i < n && splat; ++i) splat = elements_equal(t, 0, i);
  if (splat || t.rank() == 0) return format_element(t, 0);
  // Nested by the shape, iteratively: after each element, every index that wraps around
  // closes one bracket and opens one again.
  const int rank = t.rank();
  std::string r(static_cast<size_t>(rank), '[');
  std::vector<int64_t> idx(rank, 0);
  for (int64_t i = 0; i < n; ++i) {
    r += format_element(t, i);
    int carries = 0;
    for (int d = rank - 1; d >= 0; --d) {
      if (++idx[d] < t.sizes()[d]) break;
      idx[d] = 0;
      ++carries;
    }
    if (i + 1 == n) break;
    r.append(static_cast<size_t>(carries), ']');
    r += ", ";
    r.append(static_cast<size_t>(carries), '[');
  }
  r.append(static_cast<size_t>(rank), ']');
  return r;
}

std::string format_attr_value(const AttrValue& v) {
  switch (attr_kind(v)) {
    case AttrKind::i64: return std::to_string(std::get<int64_t>(v));
    case AttrKind::f64: return format_f64(std::get<double>(v));
    case AttrKind::str: return quote(std::get<std::string>(v));
    case AttrKind::i64s:
      return format_list(std::get<std::vector<int64_t>>(v), [](int64_t x) { return std::to_string(x); });
    case AttrKind::f64s: return format_list(std::get<std::vector<double>>(v), format_f64);
    case AttrKind::dtype: return std::string(dtype_name(std::get<DType>(v)));
    case AttrKind::tensor: {
      const Tensor& t = std::get<Tensor>(v);
      return concat("dense<", format_type(t.type()), ", ", format_dense_payload(t), ">");
    }
  }
  return "?";
}

}  // namespace rlx::text

namespace rlx {

std::string print_graph(const Graph& g) {
  using namespace text;
  Namer name(g);
  std::string r = g.level == IrLevel::primitive ? "primitive @" : "graph @";
  r += is_value_name(g.name) ? g.name : quote(g.name);
  r += "(";
  for (size_t k = 0; k < g.inputs.size(); ++k) {
    if (k) r += ", ";
    r += concat(name(g.inputs[k]), ": ", name.type(g.inputs[k]));
  }
  r += ") -> (";
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    if (k) r += ", ";
    r += name.type(g.outputs[k]);
  }
  r += ") {\n";
  for (const Node& n : g.nodes) {
    r += "  ";
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      if (k) r += ", ";
      r += name(n.outputs[k]);
    }
    r += " = ";
    if (n.native) r += "native ";
    r += op_name(n.op);
    if (is_plain_param(g, n)) {
      r += concat(" ", quote(n.attrs.s("name")));
    } else if (is_plain_constant(g, n)) {
      r += concat(" dense<", format_dense_payload(*n.attrs.tensor("value")), ">");
    } else {
      r += "(";
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        if (k) r += ", ";
        r += name(n.inputs[k]);
      }
      r += ")";
      if (!n.attrs.empty()) r += concat(" ", format_attrs(n.attrs));
    }
    if (!n.name.empty()) r += concat(" loc(", quote(n.name), ")");
    r += " :";
    for (size_t k = 0; k < n.outputs.size(); ++k) r += concat(k ? ", " : " ", name.type(n.outputs[k]));
    r += "\n";
  }
  r += "  return";
  for (size_t k = 0; k < g.outputs.size(); ++k) r += concat(k ? ", " : " ", name(g.outputs[k]));
  r += "\n}\n";
  return r;
}

}  // namespace rlx
