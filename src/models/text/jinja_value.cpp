// Jinja values (jinja_internal.h): Python's printing (str, repr, json.dumps), equality, ordering
// and truthiness, and the conversion from JSON.
#include <charconv>
#include <cmath>
#include <cstdio>

#include "models/text/jinja_internal.h"

namespace rlx::text::jinja {

Value Value::of_list(std::vector<Value> items, bool tuple) {
  auto l = std::make_shared<List>();
  int d = 0;
  for (const Value& v : items) {
    d = std::max(d, v.depth());
    l->has_ns = l->has_ns || v.holds_ns();
  }
  l->items = std::move(items);
  l->tuple = tuple;
  l->depth = d + 1;
  Value v;
  v.kind = Kind::list;
  v.list = std::move(l);
  return v;
}

Value Value::of_dict(std::vector<std::pair<std::string, Value>> items) {
  auto m = std::make_shared<Dict>();
  for (auto& [k, x] : items) m->set(k, std::move(x));
  Value v;
  v.kind = Kind::dict;
  v.dict = std::move(m);
  return v;
}

int Value::depth() const {
  switch (kind) {
    case Kind::list: return list->depth;
    case Kind::dict: return dict->depth;
    case Kind::ns: return ns->depth;
    default: return 0;
  }
}

bool Value::holds_ns() const {
  switch (kind) {
    case Kind::ns: return true;
    case Kind::list: return list->has_ns;
    case Kind::dict: return dict->has_ns;
    default: return false;
  }
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void Dict::set(const std::string& key, Value v) {
  depth = std::max(depth, v.depth() + 1);
  has_ns = has_ns || v.holds_ns();
  for (auto& [k, x] : items)
    if (k == key) {
      x = std::move(v);
      return;
    }
  items.emplace_back(key, std::move(v));
}

std::string type_name(const Value& v) {
  switch (v.kind) {
    case Value::Kind::undefined: return "undefined";
    case Value::Kind::none: return "NoneType";
    case Value::Kind::boolean: return "bool";
    case Value::Kind::integer: return "int";
    case Value::Kind::floating: return "float";
    case Value::Kind::string: return "str";
    case Value::Kind::list: return v.list->tuple ? "tuple" : "list";
    case Value::Kind::dict: return "dict";
    case Value::Kind::ns: return "Namespace";
    case Value::Kind::func: return "function";
  }
  return "?";
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Value::Kind::undefined:
    case Value::Kind::none: return false;
    case Value::Kind::boolean: return v.b;
    case Value::Kind::integer: return v.i != 0;
    case Value::Kind::floating: return v.f != 0;
    case Value::Kind::string: return !v.s.empty();
    case Value::Kind::list: return !v.list->items.empty();
    case Value::Kind::dict: return !v.dict->items.empty();
    default: return true;
  }
}

// Python's repr of a float: the shortest digits that read back, fixed notation for exponents
// in [-4, 16), scientific otherwise, ".0" on integral values.
std::string float_repr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  // sci: [-]d[.ddd]e[+-]XX
  const bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  const size_t e = sci.find('e');
  std::string digits;
  for (size_t k = 0; k < e; ++k)
    if (sci[k] != '.') digits += sci[k];
  const int exp = std::stoi(sci.substr(e + 1));
  std::string out;
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out = "0.";
      out.append(static_cast<size_t>(-exp - 1), '0');
      out += digits;
    } else if (static_cast<int>(digits.size()) <= exp + 1) {
      out = digits + std::string(static_cast<size_t>(exp + 1 - static_cast<int>(digits.size())), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(exp + 1)) + "." + digits.substr(static_cast<size_t>(exp + 1));
    }
  }
  if (out.empty()) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
  }
  return neg ? "-" + out : out;
}

namespace {

void repr_string(std::string& out, const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  const char q = has_single && !has_double ? '"' : '\'';
  out += q;
  for (unsigned char c : s) {
    if (c == static_cast<unsigned char>(q) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += q;
}

void repr_into(std::string& out, const Value& v) {
  switch (v.kind) {
    case Value::Kind::string: repr_string(out, v.s); return;
    case Value::Kind::list: {
      out += v.list->tuple ? '(' : '[';
      for (size_t k = 0; k < v.list->items.size(); ++k) {
        if (k) out += ", ";
        repr_into(out, v.list->items[k]);
      }
      if (v.list->tuple && v.list->items.size() == 1) out += ',';
      out += v.list->tuple ? ')' : ']';
      return;
    }
    case Value::Kind::dict: {
      out += '{';
      for (size_t k = 0; k < v.dict->items.size(); ++k) {
        if (k) out += ", ";
        repr_string(out, v.dict->items[k].first);
        out += ": ";
        repr_into(out, v.dict->items[k].second);
      }
      out += '}';
      return;
    }
    case Value::Kind::ns: {
      out += "<Namespace {";
      for (size_t k = 0; k < v.ns->items.size(); ++k) {
        if (k) out += ", ";
        repr_string(out, v.ns->items[k].first);
        out += ": ";
        repr_into(out, v.ns->items[k].second);
      }
      out += "}>";
      return;
    }
    default: out += to_str(v);
  }
}

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  const std::vector<std::string_view> cps = code_points(s);
  for (std::string_view cp : cps) {
    const unsigned char c = static_cast<unsigned char>(cp[0]);
    if (cp.size() == 1) {
      switch (c) {
        case '"': out += "\\\""; continue;
        case '\\': out += "\\\\"; continue;
        case '\n': out += "\\n"; continue;
        case '\r': out += "\\r"; continue;
        case '\t': out += "\\t"; continue;
        case '\b': out += "\\b"; continue;
        case '\f': out += "\\f"; continue;
        default: break;
      }
      if (c < 0x20 || (ensure_ascii && c >= 0x7f)) {
        char b[8];
        std::snprintf(b, sizeof b, "\\u%04x", c);
        out += b;
        continue;
      }
      out += cp;
    } else if (ensure_ascii) {
      uint32_t x = c & (cp.size() == 2 ? 0x1F : cp.size() == 3 ? 0x0F : 0x07);
      for (size_t k = 1; k < cp.size(); ++k) x = (x << 6) | (static_cast<unsigned char>(cp[k]) & 0x3F);
      char b[16];
      if (x >= 0x10000) {
        x -= 0x10000;
        std::snprintf(b, sizeof b, "\\u%04x\\u%04x", 0xD800 + (x >> 10), 0xDC00 + (x & 0x3FF));
      } else {
        std::snprintf(b, sizeof b, "\\u%04x", x);
      }
      out += b;
    } else {
      out += cp;
    }
  }
  out += '"';
}

struct JsonWriter {
  int indent;
  bool ensure_ascii, sort_keys;
  const std::string &item_sep, &key_sep;
  std::string out;

  void newline(int level) {
    out += '\n';
    out.append(static_cast<size_t>(indent) * static_cast<size_t>(level), ' ');
  }

  void entries(const std::vector<std::pair<std::string, Value>>& items, int level) {
    std::vector<const std::pair<std::string, Value>*> order;
    for (const auto& it : items) order.push_back(&it);
    if (sort_keys) std::stable_sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->first < b->first; });
    out += '{';
    if (order.empty()) {
      out += '}';
      return;
    }
    for (size_t k = 0; k < order.size(); ++k) {
      if (k) out += item_sep;
      if (indent >= 0) newline(level + 1);
      json_string(out, order[k]->first, ensure_ascii);
      out += key_sep;
      write(order[k]->second, level + 1);
    }
    if (indent >= 0) newline(level);
    out += '}';
  }

  void write(const Value& v, int level) {
    switch (v.kind) {
      case Value::Kind::none: out += "null"; return;
      case Value::Kind::boolean: out += v.b ? "true" : "false"; return;
      case Value::Kind::integer: out += std::to_string(v.i); return;
      case Value::Kind::floating:
        if (std::isnan(v.f)) out += "NaN";
        else if (std::isinf(v.f)) out += v.f > 0 ? "Infinity" : "-Infinity";
        else out += float_repr(v.f);
        return;
      case Value::Kind::string: json_string(out, v.s, ensure_ascii); return;
      case Value::Kind::list: {
        out += '[';
        if (v.list->items.empty()) {
          out += ']';
          return;
        }
        for (size_t k = 0; k < v.list->items.size(); ++k) {
          if (k) out += item_sep;
          if (indent >= 0) newline(level + 1);
          write(v.list->items[k], level + 1);
        }
        if (indent >= 0) newline(level);
        out += ']';
        return;
      }
      case Value::Kind::dict: entries(v.dict->items, level); return;
      case Value::Kind::ns: entries(v.ns->items, level); return;
      default: fail(ErrorCode::format_error, "Object of type ", type_name(v), " is not JSON serializable");
    }
  }
};

}  // namespace

std::string repr(const Value& v) {
  std::string out;
  repr_into(out, v);
  return out;
}

std::string to_str(const Value& v) {
  switch (v.kind) {
    case Value::Kind::undefined: return "";
    case Value::Kind::none: return "None";
    case Value::Kind::boolean: return v.b ? "True" : "False";
    case Value::Kind::integer: return std::to_string(v.i);
    case Value::Kind::floating: return float_repr(v.f);
    case Value::Kind::string: return v.s;
    case Value::Kind::func: return "<function " + v.fn->name + ">";
    default: return repr(v);
  }
}

std::string to_json(const Value& v, int indent, bool ensure_ascii, bool sort_keys, const std::string& item_sep,
                    const std::string& key_sep) {
  JsonWriter w{indent, ensure_ascii, sort_keys, item_sep, key_sep, {}};
  w.write(v, 0);
  return std::move(w.out);
}

bool equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.kind == K::floating || b.kind == K::floating) {
      const double x = a.kind == K::floating ? a.f : a.kind == K::integer ? static_cast<double>(a.i) : a.b;
      const double y = b.kind == K::floating ? b.f : b.kind == K::integer ? static_cast<double>(b.i) : b.b;
      return x == y;
    }
    const int64_t x = a.kind == K::integer ? a.i : a.b, y = b.kind == K::integer ? b.i : b.b;
    return x == y;
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case K::undefined:
    case K::none: return true;
    case K::string: return a.s == b.s;
    case K::list: {
      if (a.list == b.list) return true;
      if (a.list->items.size() != b.list->items.size()) return false;
      for (size_t k = 0; k < a.list->items.size(); ++k)
        if (!equal(a.list->items[k], b.list->items[k])) return false;
      return true;
    }
    case K::dict: {
      if (a.dict == b.dict) return true;
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [k, v] : a.dict->items) {
        const Value* o = b.dict->find(k);
        if (!o || !equal(v, *o)) return false;
      }
      return true;
    }
    case K::ns: return a.ns == b.ns;
    case K::func: return a.fn == b.fn;
    default: return false;
  }
}

int compare(const Value& a, const Value& b, std::string_view op) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    const double x = a.kind == K::floating ? a.f : a.kind == K::integer ? static_cast<double>(a.i) : a.b;
    const double y = b.kind == K::floating ? b.f : b.kind == K::integer ? static_cast<double>(b.i) : b.b;
    if (a.kind == K::integer && b.kind == K::integer) return a.i < b.i ? -1 : a.i > b.i ? 1 : 0;
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.kind == K::string && b.kind == K::string) return a.s < b.s ? -1 : a.s > b.s ? 1 : 0;  // UTF-8 order is code point order
  if (a.kind == K::list && b.kind == K::list) {
    const auto &x = a.list->items, &y = b.list->items;
    for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
      if (equal(x[k], y[k])) continue;
      return compare(x[k], y[k], op);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  fail(ErrorCode::format_error, "'", op, "' not supported between instances of '", type_name(a), "' and '",
       type_name(b), "'");
}

Value from_json(const nlohmann::ordered_json& j, int depth, int max_depth) {
  using T = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case T::null: return Value::none();
    case T::boolean: return Value::boolean(j.get<bool>());
    case T::number_integer: return Value::integer(j.get<int64_t>());
    case T::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::floating(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case T::number_float: return Value::floating(j.get<double>());
    case T::string: return Value::string(j.get<std::string>());
    case T::array: {
      if (depth >= max_depth) fail(ErrorCode::out_of_range, "a variable nests deeper than ", max_depth, " levels");
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e, depth + 1, max_depth));
      return Value::of_list(std::move(items));
    }
    case T::object: {
      if (depth >= max_depth) fail(ErrorCode::out_of_range, "a variable nests deeper than ", max_depth, " levels");
      auto d = std::make_shared<Dict>();
      for (const auto& [k, e] : j.items()) d->set(k, from_json(e, depth + 1, max_depth));
      Value v;
      v.kind = Value::Kind::dict;
      v.dict = std::move(d);
      return v;
    }
    default: fail(ErrorCode::invalid_argument, "a variable holds a JSON value of an unsupported type");
  }
}

std::vector<std::string_view> code_points(std::string_view s) {
  std::vector<std::string_view> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (i + n > s.size()) n = 1;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) {
        n = 1;
        break;
      }
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

bool is_py_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

namespace {
uint32_t decode(std::string_view cp) {
  const unsigned char c = static_cast<unsigned char>(cp[0]);
  if (cp.size() == 1) return c;
  uint32_t x = c & (cp.size() == 2 ? 0x1F : cp.size() == 3 ? 0x0F : 0x07);
  for (size_t k = 1; k < cp.size(); ++k) x = (x << 6) | (static_cast<unsigned char>(cp[k]) & 0x3F);
  return x;
}
}  // namespace

// str.strip / lstrip / rstrip: whitespace, or the code points of `chars` (a string) when given.
std::string py_strip(std::string_view s, bool left, bool right, const Value* chars) {
  std::vector<std::string_view> set;
  const bool by_set = chars && chars->kind == Value::Kind::string;
  if (chars && !by_set && chars->kind != Value::Kind::none)
    fail(ErrorCode::format_error, "strip arg must be None or str, not ", type_name(*chars));
  if (by_set) set = code_points(chars->s);
  auto strip_it = [&](std::string_view cp) {
    if (!by_set) return is_py_space(decode(cp));
    for (std::string_view x : set)
      if (x == cp) return true;
    return false;
  };
  const std::vector<std::string_view> cps = code_points(s);
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strip_it(cps[b])) ++b;
  if (right)
    while (e > b && strip_it(cps[e - 1])) --e;
  if (b == e) return "";
  const size_t from = static_cast<size_t>(cps[b].data() - s.data());
  const size_t to = static_cast<size_t>(cps[e - 1].data() + cps[e - 1].size() - s.data());
  return std::string(s.substr(from, to - from));
}

}  // namespace rlx::text::jinja
