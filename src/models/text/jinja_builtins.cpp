// Jinja's filters and tests, and the Python methods of str and dict that chat templates call
// (jinja_internal.h), with Python's semantics. Case mapping is ASCII only.
#include <algorithm>
#include <cmath>

#include "models/text/jinja_internal.h"

namespace rlx::text::jinja {

const Value* Args::get(size_t i, std::string_view name) const {
  for (const auto& [k, v] : kw)
    if (k == name) return &v;
  return i < pos.size() ? &pos[i] : nullptr;
}

void Args::check(std::string_view callee, size_t n, std::initializer_list<std::string_view> names) const {
  if (pos.size() > n) fail(ErrorCode::format_error, callee, "() takes at most ", n, " positional argument(s), got ", pos.size());
  for (const auto& [k, v] : kw)
    if (std::find(names.begin(), names.end(), k) == names.end())
      fail(ErrorCode::format_error, callee, "() got an unexpected keyword argument '", k, "'");
}

namespace {

using K = Value::Kind;

std::string ascii_upper(std::string s) {
  for (char& c : s)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
  return s;
}
std::string ascii_lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  return s;
}
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

const std::string& need_string(const Value& v, std::string_view what) {
  if (v.kind != K::string) fail(ErrorCode::format_error, what, " needs a string, got ", type_name(v));
  return v.s;
}

int64_t need_int(const Value& v, std::string_view what) {
  if (v.kind == K::integer) return v.i;
  if (v.kind == K::boolean) return v.b;
  fail(ErrorCode::format_error, what, " needs an integer, got ", type_name(v));
}

// A string argument, or undefined / None printed as Jinja's soft_str does.
std::string soft_str(const Value& v) { return v.kind == K::string ? v.s : to_str(v); }

int64_t length_of(const Value& v) {
  switch (v.kind) {
    case K::string: return static_cast<int64_t>(code_points(v.s).size());
    case K::list: return static_cast<int64_t>(v.list->items.size());
    case K::dict: return static_cast<int64_t>(v.dict->items.size());
    case K::undefined: return 0;
    default: fail(ErrorCode::format_error, "object of type '", type_name(v), "' has no len()");
  }
}

// obj.attr / obj[key] as filters with attribute= see it (dotted paths, integer parts index lists)
Value attribute_path(const Value& v, const std::string& path) {
  Value cur = v;
  size_t b = 0;
  while (b <= path.size()) {
    size_t e = path.find('.', b);
    if (e == std::string::npos) e = path.size();
    const std::string part = path.substr(b, e - b);
    if (cur.kind == K::dict) {
      const Value* x = cur.dict->find(part);
      cur = x ? *x : Value::undefined(part);
    } else if (cur.kind == K::ns) {
      const Value* x = cur.ns->find(part);
      cur = x ? *x : Value::undefined(part);
    } else if (cur.kind == K::list && !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; }) && part.size() < 10) {
      const size_t i = std::stoul(part);
      cur = i < cur.list->items.size() ? cur.list->items[i] : Value::undefined(part);
    } else {
      return Value::undefined(part);
    }
    b = e + 1;
  }
  return cur;
}

std::string join_str(Runtime& rt, const std::vector<Value>& items, const std::string& sep) {
  std::string out;
  for (size_t k = 0; k < items.size(); ++k) {
    if (k) out += sep;
    out += to_str(items[k]);
    rt.check_size(out.size());
  }
  return out;
}

std::string py_replace(Runtime& rt, const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  std::string out;
  if (from.empty()) {  // Python inserts `to` around every code point
    const auto cps = code_points(s);
    int64_t n = 0;
    for (std::string_view cp : cps) {
      if (count < 0 || n < count) {
        out += to;
        ++n;
      }
      out += cp;
      rt.check_size(out.size());
    }
    if (count < 0 || n < count) out += to;
    return out;
  }
  size_t p = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    const size_t q = s.find(from, p);
    if (q == std::string::npos) break;
    out.append(s, p, q - p);
    out += to;
    rt.check_size(out.size());
    p = q + from.size();
    ++n;
  }
  out.append(s, p, std::string::npos);
  return out;
}

std::vector<Value> py_split(Runtime& rt, const std::string& s, const Value* sep, int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  if (!sep || sep->kind == K::none) {
    const auto cps = code_points(s);
    auto space = [&](size_t k) {
      uint32_t x = static_cast<unsigned char>(cps[k][0]);
      if (cps[k].size() > 1) {
        x &= cps[k].size() == 2 ? 0x1F : cps[k].size() == 3 ? 0x0F : 0x07;
        for (size_t j = 1; j < cps[k].size(); ++j) x = (x << 6) | (static_cast<unsigned char>(cps[k][j]) & 0x3F);
      }
      return is_py_space(x);
    };
    auto text = [&](size_t b, size_t e) {
      if (b >= e) return std::string();
      return std::string(cps[b].data(), static_cast<size_t>(cps[e - 1].data() + cps[e - 1].size() - cps[b].data()));
    };
    if (!from_right) {
      size_t k = 0;
      while (true) {
        while (k < cps.size() && space(k)) ++k;
        if (k >= cps.size()) break;
        if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) >= maxsplit) {
          size_t e = cps.size();
          parts.push_back(text(k, e));
          break;
        }
        size_t b = k;
        while (k < cps.size() && !space(k)) ++k;
        parts.push_back(text(b, k));
      }
    } else {
      size_t k = cps.size();
      while (true) {
        while (k > 0 && space(k - 1)) --k;
        if (k == 0) break;
        if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) >= maxsplit) {
          parts.push_back(text(0, k));
          break;
        }
        size_t e = k;
        while (k > 0 && !space(k - 1)) --k;
        parts.push_back(text(k, e));
      }
      std::reverse(parts.begin(), parts.end());
    }
  } else {
    const std::string& d = need_string(*sep, "split");
    if (d.empty()) fail(ErrorCode::format_error, "empty separator");
    if (!from_right) {
      size_t p = 0;
      while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
        const size_t q = s.find(d, p);
        if (q == std::string::npos) break;
        parts.push_back(s.substr(p, q - p));
        p = q + d.size();
        rt.step();
      }
      parts.push_back(s.substr(p));
    } else {
      size_t e = s.size();
      while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
        if (e < d.size()) break;
        const size_t q = s.rfind(d, e - d.size());
        if (q == std::string::npos) break;
        parts.push_back(s.substr(q + d.size(), e - q - d.size()));
        e = q;
        rt.step();
      }
      parts.push_back(s.substr(0, e));
      std::reverse(parts.begin(), parts.end());
    }
  }
  std::vector<Value> out;
  for (std::string& p : parts) out.push_back(rt.str(std::move(p)));
  return out;
}

std::string title_case(const std::string& s) {  // Jinja's do_title: words begin after -, whitespace and ([{<
  std::string out = s;
  bool begin = true;
  for (char& c : out) {
    if (c == '-' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '(' || c == '{' || c == '[' || c == '<') {
      begin = true;
      continue;
    }
    if (begin) c = ascii_upper(std::string(1, c))[0];
    else c = ascii_lower(std::string(1, c))[0];
    begin = false;
  }
  return out;
}

std::string capitalize(const std::string& s) {
  std::string out = ascii_lower(s);
  if (!out.empty()) out[0] = ascii_upper(out.substr(0, 1))[0];
  return out;
}

bool prefix_test(const std::string& s, const Value& p, bool suffix, std::string_view what) {
  auto one = [&](const Value& x) {
    const std::string& t = need_string(x, what);
    if (t.size() > s.size()) return false;
    return suffix ? s.compare(s.size() - t.size(), t.size(), t) == 0 : s.compare(0, t.size(), t) == 0;
  };
  if (p.kind == K::list) {
    for (const Value& x : p.list->items)
      if (one(x)) return true;
    return false;
  }
  return one(p);
}

Value select_common(Runtime& rt, const Value& v, const Args& a, bool by_attr, bool keep, std::string_view name) {
  std::vector<Value> out;
  size_t k = 0;
  std::string attr;
  if (by_attr) {
    if (a.pos.empty()) fail(ErrorCode::format_error, name, " needs an attribute name");
    attr = need_string(a.pos[0], name);
    k = 1;
  }
  std::string test;
  Args targs;
  if (a.pos.size() > k) {
    test = need_string(a.pos[k], name);
    targs.pos.assign(a.pos.begin() + static_cast<std::ptrdiff_t>(k) + 1, a.pos.end());
  }
  for (const Value& item : iterate(rt, v)) {
    rt.step();
    const Value x = by_attr ? attribute_path(item, attr) : item;
    const bool pass = test.empty() ? truthy(x) : apply_test(rt, test, x, targs);
    if (pass == keep) out.push_back(item);
  }
  return rt.list(std::move(out));
}

}  // namespace

std::vector<Value> iterate(Runtime& rt, const Value& v) {
  switch (v.kind) {
    case K::list: return v.list->items;
    case K::dict: {
      std::vector<Value> keys;
      for (const auto& [k, x] : v.dict->items) keys.push_back(Value::string(k));
      return keys;
    }
    case K::string: {
      std::vector<Value> chars;
      for (std::string_view cp : code_points(v.s)) chars.push_back(Value::string(std::string(cp)));
      rt.step(static_cast<int64_t>(chars.size()));
      return chars;
    }
    case K::undefined: return {};
    default: fail(ErrorCode::format_error, "'", type_name(v), "' object is not iterable");
  }
}

Value apply_filter(Runtime& rt, std::string_view name, const Value& v, const Args& a) {
  rt.step();
  if (name == "safe") return v;
  if (name == "string") return v.kind == K::string ? v : rt.str(to_str(v));
  if (name == "trim") {
    a.check(name, 1, {"chars"});
    return rt.str(py_strip(soft_str(v), true, true, a.get(0, "chars")));
  }
  if (name == "length" || name == "count") return Value::integer(length_of(v));
  if (name == "upper") return rt.str(ascii_upper(soft_str(v)));
  if (name == "lower") return rt.str(ascii_lower(soft_str(v)));
  if (name == "capitalize") return rt.str(capitalize(soft_str(v)));
  if (name == "title") return rt.str(title_case(soft_str(v)));
  if (name == "tojson") {
    a.check(name, 4, {"ensure_ascii", "indent", "separators", "sort_keys"});
    const Value* ea = a.get(0, "ensure_ascii");
    const Value* ind = a.get(1, "indent");
    const Value* sep = a.get(2, "separators");
    const Value* sk = a.get(3, "sort_keys");
    int indent = -1;
    if (ind && ind->kind != K::none) {
      const int64_t n = need_int(*ind, "tojson indent");
      if (n < 0 || n > 64) fail(ErrorCode::format_error, "tojson indent must be in [0, 64], got ", n);
      indent = static_cast<int>(n);
    }
    std::string item_sep = indent >= 0 ? "," : ", ", key_sep = ": ";
    if (sep && sep->kind != K::none) {
      if (sep->kind != K::list || sep->list->items.size() != 2)
        fail(ErrorCode::format_error, "tojson separators must be a pair of strings");
      item_sep = need_string(sep->list->items[0], "tojson separators");
      key_sep = need_string(sep->list->items[1], "tojson separators");
    }
    return rt.str(to_json(v, indent, ea && truthy(*ea), sk && truthy(*sk), item_sep, key_sep));
  }
  if (name == "default" || name == "d") {
    a.check(name, 2, {"default_value", "boolean"});
    const Value* dv = a.get(0, "default_value");
    const Value* boolean = a.get(1, "boolean");
    const bool use = v.is_undefined() || (boolean && truthy(*boolean) && !truthy(v));
    return use ? (dv ? *dv : Value::string("")) : v;
  }
  if (name == "join") {
    a.check(name, 2, {"d", "attribute"});
    const Value* d = a.get(0, "d");
    const Value* attr = a.get(1, "attribute");
    std::vector<Value> items = iterate(rt, v);
    if (attr) {
      const std::string path = to_str(*attr);
      for (Value& x : items) x = attribute_path(x, path);
    }
    return rt.str(join_str(rt, items, d ? soft_str(*d) : ""));
  }
  if (name == "first" || name == "last") {
    if (v.kind == K::undefined) return Value::undefined(std::string(name));
    std::vector<Value> items = iterate(rt, v);
    if (items.empty()) return Value::undefined(cat("the ", name, " item of an empty sequence"));
    return name == "first" ? items.front() : items.back();
  }
  if (name == "items") {
    if (v.kind == K::undefined) return rt.list({});
    if (v.kind != K::dict) fail(ErrorCode::format_error, "items needs a dict, got ", type_name(v));
    std::vector<Value> out;
    for (const auto& [k, x] : v.dict->items) out.push_back(Value::of_list({Value::string(k), x}, true));
    return rt.list(std::move(out));
  }
  if (name == "list") return rt.list(iterate(rt, v));
  if (name == "reverse") {
    if (v.kind == K::string) {
      auto cps = code_points(v.s);
      std::string out;
      for (size_t k = cps.size(); k-- > 0;) out += cps[k];
      return rt.str(std::move(out));
    }
    std::vector<Value> items = iterate(rt, v);
    std::reverse(items.begin(), items.end());
    return rt.list(std::move(items));
  }
  if (name == "sort") {
    a.check(name, 3, {"reverse", "case_sensitive", "attribute"});
    const Value* rev = a.get(0, "reverse");
    const Value* cs = a.get(1, "case_sensitive");
    const Value* attr = a.get(2, "attribute");
    std::vector<Value> items = iterate(rt, v);
    const bool sensitive = cs && truthy(*cs);
    auto key = [&](const Value& x) {
      Value k = attr ? attribute_path(x, to_str(*attr)) : x;
      if (!sensitive && k.kind == K::string) k.s = ascii_lower(k.s);
      return k;
    };
    rt.step(static_cast<int64_t>(items.size()) * 20);
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) { return compare(key(x), key(y), "<") < 0; });
    if (rev && truthy(*rev)) std::reverse(items.begin(), items.end());
    return rt.list(std::move(items));
  }
  if (name == "unique") {
    std::vector<Value> out;
    for (const Value& x : iterate(rt, v)) {
      rt.step(static_cast<int64_t>(out.size()));
      if (std::none_of(out.begin(), out.end(), [&](const Value& y) { return equal(x, y); })) out.push_back(x);
    }
    return rt.list(std::move(out));
  }
  if (name == "map") {
    std::vector<Value> out;
    const Value* attr = a.get(99, "attribute");
    if (attr) {
      const Value* dflt = a.get(99, "default");
      const std::string path = to_str(*attr);
      for (const Value& x : iterate(rt, v)) {
        Value y = attribute_path(x, path);
        out.push_back(y.is_undefined() && dflt ? *dflt : y);
      }
    } else {
      if (a.pos.empty()) fail(ErrorCode::format_error, "map needs a filter name or attribute=");
      const std::string& f = need_string(a.pos[0], "map");
      Args rest;
      rest.pos.assign(a.pos.begin() + 1, a.pos.end());
      rest.kw = a.kw;
      for (const Value& x : iterate(rt, v)) out.push_back(apply_filter(rt, f, x, rest));
    }
    return rt.list(std::move(out));
  }
  if (name == "select") return select_common(rt, v, a, false, true, name);
  if (name == "reject") return select_common(rt, v, a, false, false, name);
  if (name == "selectattr") return select_common(rt, v, a, true, true, name);
  if (name == "rejectattr") return select_common(rt, v, a, true, false, name);
  if (name == "replace") {
    a.check(name, 3, {"old", "new", "count"});
    const Value* from = a.get(0, "old");
    const Value* to = a.get(1, "new");
    const Value* count = a.get(2, "count");
    if (!from || !to) fail(ErrorCode::format_error, "replace needs two arguments");
    return rt.str(py_replace(rt, soft_str(v), soft_str(*from), soft_str(*to),
                             count && count->kind != K::none ? need_int(*count, "replace count") : -1));
  }
  if (name == "int") {
    if (v.kind == K::integer) return v;
    if (v.kind == K::boolean) return Value::integer(v.b);
    if (v.kind == K::floating && std::isfinite(v.f) && std::fabs(v.f) < 9e18) return Value::integer(static_cast<int64_t>(v.f));
    if (v.kind == K::string) {
      const std::string t = py_strip(v.s, true, true, nullptr);
      char* end = nullptr;
      errno = 0;
      const long long x = std::strtoll(t.c_str(), &end, 10);
      if (!t.empty() && end && *end == '\0' && errno == 0) return Value::integer(x);
    }
    const Value* d = a.get(0, "default");
    return d ? *d : Value::integer(0);
  }
  if (name == "float") {
    if (v.kind == K::floating) return v;
    if (v.kind == K::integer) return Value::floating(static_cast<double>(v.i));
    if (v.kind == K::boolean) return Value::floating(v.b);
    if (v.kind == K::string) {
      const std::string t = py_strip(v.s, true, true, nullptr);
      char* end = nullptr;
      const double x = std::strtod(t.c_str(), &end);
      if (!t.empty() && end && *end == '\0') return Value::floating(x);
    }
    const Value* d = a.get(0, "default");
    return d ? *d : Value::floating(0);
  }
  if (name == "abs") {
    if (v.kind == K::integer) {
      if (v.i == INT64_MIN) fail(ErrorCode::out_of_range, "integer overflow in abs");
      return Value::integer(v.i < 0 ? -v.i : v.i);
    }
    if (v.kind == K::floating) return Value::floating(std::fabs(v.f));
    if (v.kind == K::boolean) return Value::integer(v.b);
    fail(ErrorCode::format_error, "bad operand type for abs(): '", type_name(v), "'");
  }
  if (name == "indent") {
    a.check(name, 3, {"width", "first", "blank"});
    const Value* w = a.get(0, "width");
    const Value* first = a.get(1, "first");
    const Value* blank = a.get(2, "blank");
    std::string pad;
    if (w && w->kind == K::string) pad = w->s;
    else {
      const int64_t n = w ? need_int(*w, "indent width") : 4;
      if (n < 0 || n > 256) fail(ErrorCode::format_error, "indent width must be in [0, 256], got ", n);
      pad.assign(static_cast<size_t>(n), ' ');
    }
    const std::string s = soft_str(v);
    std::string out;
    size_t b = 0;
    bool first_line = true;
    while (b <= s.size()) {
      size_t e = s.find('\n', b);
      const bool last = e == std::string::npos;
      if (last) e = s.size();
      const std::string line = s.substr(b, e - b);
      const bool indent_it = first_line ? (first && truthy(*first)) : (!line.empty() || (blank && truthy(*blank)));
      if (indent_it) out += pad;
      out += line;
      rt.check_size(out.size());
      if (last) break;
      out += '\n';
      b = e + 1;
      first_line = false;
    }
    return rt.str(std::move(out));
  }
  if (name == "dictsort") {
    if (v.kind != K::dict) fail(ErrorCode::format_error, "dictsort needs a dict, got ", type_name(v));
    std::vector<std::pair<std::string, Value>> items = v.dict->items;
    std::stable_sort(items.begin(), items.end(), [](const auto& x, const auto& y) { return ascii_lower(x.first) < ascii_lower(y.first); });
    std::vector<Value> out;
    for (auto& [k, x] : items) out.push_back(Value::of_list({Value::string(k), x}, true));
    return rt.list(std::move(out));
  }
  fail(ErrorCode::unsupported, "unknown filter '", name, "'");
}

bool apply_test(Runtime& rt, std::string_view name, const Value& v, const Args& a) {
  rt.step();
  auto arg = [&]() -> const Value& {
    if (a.pos.empty()) fail(ErrorCode::format_error, "the test '", name, "' needs an argument");
    return a.pos[0];
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.kind == K::none;
  if (name == "boolean") return v.kind == K::boolean;
  if (name == "true") return v.kind == K::boolean && v.b;
  if (name == "false") return v.kind == K::boolean && !v.b;
  if (name == "integer") return v.kind == K::integer;
  if (name == "float") return v.kind == K::floating;
  if (name == "number") return v.is_number();
  if (name == "string") return v.kind == K::string;
  if (name == "mapping") return v.kind == K::dict;
  if (name == "iterable") return v.kind == K::string || v.kind == K::list || v.kind == K::dict || v.kind == K::undefined;
  if (name == "sequence") return v.kind == K::string || v.kind == K::list || v.kind == K::dict || v.kind == K::undefined;
  if (name == "callable") return v.kind == K::func;
  if (name == "lower") return v.kind == K::string && ascii_lower(v.s) == v.s;
  if (name == "upper") return v.kind == K::string && ascii_upper(v.s) == v.s;
  if (name == "odd" || name == "even") {  // Python: value % 2 == 1 (floats too)
    if (v.kind == K::floating) {
      const double m = std::fmod(v.f, 2.0);
      const double r = m < 0 ? m + 2.0 : m;
      return name == "odd" ? r == 1.0 : r == 0.0;
    }
    const int64_t x = need_int(v, name);
    return (x % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    const int64_t d = need_int(arg(), name);
    if (d == 0) fail(ErrorCode::format_error, "divisibleby 0");
    return need_int(v, name) % d == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return equal(v, arg());
  if (name == "ne" || name == "!=") return !equal(v, arg());
  if (name == "lt" || name == "lessthan" || name == "<") return compare(v, arg(), "<") < 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return compare(v, arg(), ">") > 0;
  if (name == "le" || name == "<=") return compare(v, arg(), "<=") <= 0;
  if (name == "ge" || name == ">=") return compare(v, arg(), ">=") >= 0;
  if (name == "sameas") {
    const Value& o = arg();
    if (v.kind != o.kind) return false;
    if (v.kind == K::list) return v.list == o.list;
    if (v.kind == K::dict) return v.dict == o.dict;
    return equal(v, o);
  }
  if (name == "in") {
    const Value& c = arg();
    if (c.kind == K::string) return v.kind == K::string && c.s.find(v.s) != std::string::npos;
    if (c.kind == K::dict) return v.kind == K::string && c.dict->find(v.s);
    for (const Value& x : iterate(rt, c))
      if (equal(x, v)) return true;
    return false;
  }
  if (name == "escaped") return false;
  fail(ErrorCode::unsupported, "unknown test '", name, "'");
}

bool has_method(const Value& self, std::string_view name) {
  static const std::string_view str_methods[] = {
      "strip",   "lstrip",  "rstrip", "split", "rsplit",  "startswith", "endswith", "upper",   "lower",
      "title",   "capitalize", "replace", "join", "find", "rfind",    "count",      "isdigit",  "isalpha",
      "isalnum", "isspace", "islower", "isupper", "splitlines"};
  static const std::string_view dict_methods[] = {"items", "keys", "values", "get"};
  if (self.kind == K::string) return std::find(std::begin(str_methods), std::end(str_methods), name) != std::end(str_methods);
  if (self.kind == K::dict) return std::find(std::begin(dict_methods), std::end(dict_methods), name) != std::end(dict_methods);
  return false;
}

Value call_method(Runtime& rt, const Value& self, std::string_view name, const Args& a) {
  rt.step();
  if (self.kind == K::dict) {
    if (name == "get") {
      if (a.pos.empty()) fail(ErrorCode::format_error, "get expected at least 1 argument");
      const Value* x = a.pos[0].kind == K::string ? self.dict->find(a.pos[0].s) : nullptr;
      return x ? *x : a.pos.size() > 1 ? a.pos[1] : Value::none();
    }
    std::vector<Value> out;
    for (const auto& [k, x] : self.dict->items) {
      if (name == "items") out.push_back(Value::of_list({Value::string(k), x}, true));
      else if (name == "keys") out.push_back(Value::string(k));
      else out.push_back(x);
    }
    return rt.list(std::move(out));
  }
  const std::string& s = self.s;
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    a.check(name, 1, {});
    return rt.str(py_strip(s, name != "rstrip", name != "lstrip", a.get(0, "")));
  }
  if (name == "split" || name == "rsplit") {
    a.check(name, 2, {"sep", "maxsplit"});
    const Value* m = a.get(1, "maxsplit");
    return rt.list(py_split(rt, s, a.get(0, "sep"), m ? need_int(*m, "maxsplit") : -1, name == "rsplit"));
  }
  if (name == "splitlines") {
    std::vector<Value> out;
    size_t b = 0;
    while (b < s.size()) {
      size_t e = s.find('\n', b);
      if (e == std::string::npos) e = s.size();
      std::string line = s.substr(b, e - b);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      out.push_back(rt.str(std::move(line)));
      b = e + 1;
    }
    return rt.list(std::move(out));
  }
  if (name == "startswith" || name == "endswith") {
    if (a.pos.size() != 1) fail(ErrorCode::format_error, name, "() takes exactly one argument");
    return Value::boolean(prefix_test(s, a.pos[0], name == "endswith", name));
  }
  if (name == "upper") return rt.str(ascii_upper(s));
  if (name == "lower") return rt.str(ascii_lower(s));
  if (name == "title") return rt.str(title_case(s));
  if (name == "capitalize") return rt.str(capitalize(s));
  if (name == "replace") {
    if (a.pos.size() < 2) fail(ErrorCode::format_error, "replace() takes at least 2 arguments");
    return rt.str(py_replace(rt, s, need_string(a.pos[0], name), need_string(a.pos[1], name),
                             a.pos.size() > 2 ? need_int(a.pos[2], "replace count") : -1));
  }
  if (name == "join") {
    if (a.pos.size() != 1) fail(ErrorCode::format_error, "join() takes exactly one argument");
    std::vector<Value> items = iterate(rt, a.pos[0]);
    for (const Value& x : items)
      if (x.kind != K::string) fail(ErrorCode::format_error, "sequence item: expected str instance, ", type_name(x), " found");
    return rt.str(join_str(rt, items, s));
  }
  if (name == "find" || name == "rfind" || name == "count") {
    if (a.pos.size() != 1) fail(ErrorCode::format_error, name, "() takes exactly one argument");
    const std::string& t = need_string(a.pos[0], name);
    if (name == "count") {
      if (t.empty()) return Value::integer(static_cast<int64_t>(code_points(s).size()) + 1);
      int64_t n = 0;
      for (size_t p = s.find(t); p != std::string::npos; p = s.find(t, p + t.size())) ++n;
      return Value::integer(n);
    }
    const size_t p = name == "find" ? s.find(t) : s.rfind(t);
    if (p == std::string::npos) return Value::integer(-1);
    return Value::integer(static_cast<int64_t>(code_points(std::string_view(s).substr(0, p)).size()));
  }
  auto all = [&](auto pred) {
    if (s.empty()) return Value::boolean(false);
    for (char c : s)
      if (!pred(c)) return Value::boolean(false);
    return Value::boolean(true);
  };
  if (name == "isdigit") return all([](char c) { return c >= '0' && c <= '9'; });
  if (name == "isalpha") return all([](char c) { return is_alpha(c); });
  if (name == "isalnum") return all([](char c) { return is_alpha(c) || (c >= '0' && c <= '9'); });
  if (name == "isspace") return all([](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); });
  if (name == "islower") return Value::boolean(ascii_lower(s) == s && ascii_upper(s) != s);
  if (name == "isupper") return Value::boolean(ascii_upper(s) == s && ascii_lower(s) != s);
  fail(ErrorCode::unsupported, "'", type_name(self), "' has no method '", name, "'");
}

}  // namespace rlx::text::jinja
