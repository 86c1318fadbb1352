// The Jinja evaluator (jinja.h): walks the syntax tree of jinja_parse.cpp with Python's
// semantics (Jinja's Undefined, scoping of loops and macros, getattr falling back to items).
#include <cmath>
#include <ctime>
#include <new>

#include "models/text/jinja_internal.h"

namespace rlx::text::jinja {
namespace {

using K = Value::Kind;

struct Scope {
  Scope* parent = nullptr;
  std::vector<std::pair<std::string, Value>> vars;

  const Value* find(std::string_view name) const {
    for (const Scope* s = this; s; s = s->parent)
      for (const auto& [k, v] : s->vars)
        if (k == name) return &v;
    return nullptr;
  }
  void set(const std::string& name, Value v) {
    for (auto& [k, x] : vars)
      if (k == name) {
        x = std::move(v);
        return;
      }
    vars.emplace_back(name, std::move(v));
  }
};

enum class Flow { normal, break_, continue_ };

Value builtin(const std::string& name) {
  auto f = std::make_shared<Func>();
  f->kind = Func::Kind::builtin;
  f->name = name;
  Value v;
  v.kind = K::func;
  v.fn = std::move(f);
  return v;
}

class Renderer {
 public:
  Renderer(const Program& p, std::optional<int64_t> now) : prog_(p), rt_{p.limits}, now_(now) {}

  std::string run(const nlohmann::ordered_json& context) {
    for (const char* b : {"namespace", "range", "raise_exception", "strftime_now", "dict"}) root_.set(b, builtin(b));
    if (!context.is_object() && !context.is_null()) fail(ErrorCode::invalid_argument, "the context must be a JSON object");
    if (context.is_object())
      for (const auto& [k, v] : context.items()) root_.set(k, from_json(v, 0, prog_.limits.max_value_depth));
    std::string out;
    exec(prog_.body, root_, out);
    return out;
  }

  int line() const { return line_; }

 private:
  // ---------------------------------------------------------------- statements

  void emit(std::string& out, std::string_view s) {
    if (out.size() + s.size() > static_cast<uint64_t>(prog_.limits.max_output_bytes))
      fail(ErrorCode::out_of_range, "the output is longer than ", prog_.limits.max_output_bytes, " bytes");
    out += s;
  }

  Flow exec(const Body& body, Scope& scope, std::string& out) {
    Depth d(*this);
    for (const auto& sp : body) {
      const Stmt& s = *sp;
      line_ = s.line;
      rt_.step();
      Flow f = Flow::normal;
      switch (s.kind) {
        case Stmt::s_text: emit(out, s.text); break;
        case Stmt::s_output: exec_output(s, scope, out); break;
        case Stmt::s_if: f = exec_if(s, scope, out); break;
        case Stmt::s_for: exec_for(s, scope, out); break;
        case Stmt::s_set: exec_set(s, scope); break;
        case Stmt::s_set_block: exec_set_block(s, scope); break;
        case Stmt::s_macro: define_macro(s, scope); break;
        case Stmt::s_break: return Flow::break_;
        case Stmt::s_continue: return Flow::continue_;
        case Stmt::s_block: f = exec(s.body, scope, out); break;
      }
      if (f != Flow::normal) return f;
    }
    return Flow::normal;
  }

  [[gnu::noinline]] void exec_output(const Stmt& s, Scope& scope, std::string& out) {
    const Value v = eval(*s.expr, scope);
    if (v.kind == K::string) emit(out, v.s);
    else emit(out, to_str(v));
  }

  [[gnu::noinline]] Flow exec_if(const Stmt& s, Scope& scope, std::string& out) {
    for (const auto& [cond, b] : s.branches)
      if (truthy(eval(*cond, scope))) return exec(b, scope, out);
    return exec(s.else_body, scope, out);
  }

  [[gnu::noinline]] void exec_set_block(const Stmt& s, Scope& scope) {
    std::string text;
    Scope inner{&scope, {}};
    exec(s.body, inner, text);
    scope.set(s.names[0], rt_.str(std::move(text)));
  }

  [[gnu::noinline]] void define_macro(const Stmt& s, Scope& scope) {
    auto f = std::make_shared<Func>();
    f->kind = Func::Kind::macro;
    f->name = s.text;
    f->macro = &s;
    Value v;
    v.kind = K::func;
    v.fn = std::move(f);
    scope.set(s.text, std::move(v));
  }

  void assign_targets(const std::vector<std::string>& names, const Value& v, Scope& scope) {
    if (names.size() == 1) {
      scope.set(names[0], v);
      return;
    }
    std::vector<Value> items = iterate(rt_, v);
    if (items.size() != names.size())
      fail(ErrorCode::format_error, items.size() < names.size() ? "not enough" : "too many", " values to unpack (expected ",
           names.size(), ", got ", items.size(), ")");
    for (size_t k = 0; k < names.size(); ++k) scope.set(names[k], items[k]);
  }

  [[gnu::noinline]] static Value make_loop(const std::vector<Value>& items, int64_t k) {
    const int64_t n = static_cast<int64_t>(items.size());
    auto loop = std::make_shared<Dict>();
    loop->items = {{"index", Value::integer(k + 1)},
                   {"index0", Value::integer(k)},
                   {"revindex", Value::integer(n - k)},
                   {"revindex0", Value::integer(n - k - 1)},
                   {"first", Value::boolean(k == 0)},
                   {"last", Value::boolean(k == n - 1)},
                   {"length", Value::integer(n)},
                   {"depth", Value::integer(1)},
                   {"depth0", Value::integer(0)},
                   {"previtem", k > 0 ? items[static_cast<size_t>(k - 1)] : Value::undefined("loop.previtem")},
                   {"nextitem", k + 1 < n ? items[static_cast<size_t>(k + 1)] : Value::undefined("loop.nextitem")}};
    loop->depth = 1;
    for (const auto& [key, v] : loop->items) {
      loop->depth = std::max(loop->depth, v.depth() + 1);
      loop->has_ns = loop->has_ns || v.holds_ns();
    }
    Value lv;
    lv.kind = K::dict;
    lv.dict = std::move(loop);
    return lv;
  }

  [[gnu::noinline]] void exec_for(const Stmt& s, Scope& scope, std::string& out) {
    const Value seq = eval(*s.expr, scope);
    if (seq.kind == K::none || seq.kind == K::integer || seq.kind == K::floating || seq.kind == K::boolean ||
        seq.kind == K::ns || seq.kind == K::func)
      fail(ErrorCode::format_error, "'", type_name(seq), "' object is not iterable");
    std::vector<Value> items = iterate(rt_, seq);
    Scope inner{&scope, {}};
    if (s.cond) {  // the loop filter runs before loop.length is known
      std::vector<Value> kept;
      for (const Value& item : items) {
        rt_.step();
        assign_targets(s.names, item, inner);
        if (truthy(eval(*s.cond, inner))) kept.push_back(item);
      }
      items = std::move(kept);
    }
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t k = 0; k < n; ++k) {
      rt_.step();
      line_ = s.line;
      const Value& item = items[static_cast<size_t>(k)];
      assign_targets(s.names, item, inner);
      Value lv = make_loop(items, k);
      inner.set("loop", std::move(lv));
      const Flow f = exec(s.body, inner, out);
      if (f == Flow::break_) break;
    }
    if (n == 0) {
      Scope other{&scope, {}};
      exec(s.else_body, other, out);
    }
  }

  // Whether `v` holds the namespace `target`. Values are acyclic until a set makes them cyclic
  // (which exec_set refuses), and nest at most max_value_depth deep, so this ends.
  bool reaches(const Value& v, const Dict* target) {
    rt_.step();
    if (v.kind == K::ns) {
      if (v.ns.get() == target) return true;
      for (const auto& [k, x] : v.ns->items)
        if (x.holds_ns() && reaches(x, target)) return true;
    } else if (v.kind == K::list && v.list->has_ns) {
      for (const Value& x : v.list->items)
        if (x.holds_ns() && reaches(x, target)) return true;
    } else if (v.kind == K::dict && v.dict->has_ns) {
      for (const auto& [k, x] : v.dict->items)
        if (x.holds_ns() && reaches(x, target)) return true;
    }
    return false;
  }

  [[gnu::noinline]] void exec_set(const Stmt& s, Scope& scope) {
    Value v = eval(*s.expr, scope);
    if (!s.attr.empty()) {
      const Value* target = scope.find(s.names[0]);
      if (!target || target->kind != K::ns)
        fail(ErrorCode::format_error, "cannot assign attribute on non-namespace object '", s.names[0], "'");
      // the one way to make a cycle (which printing would follow forever): a namespace holding itself
      if (v.holds_ns() && reaches(v, target->ns.get()))
        fail(ErrorCode::unsupported, "a namespace cannot hold itself ('", s.names[0], ".", s.attr, "')");
      target->ns->set(s.attr, std::move(v));
      if (target->ns->depth > prog_.limits.max_value_depth)
        fail(ErrorCode::out_of_range, "the template built a value nested deeper than ", prog_.limits.max_value_depth, " levels");
      return;
    }
    assign_targets(s.names, v, scope);
  }

  // ---------------------------------------------------------------- expressions

  Args eval_args(const Expr& e, Scope& scope) {
    Args a;
    for (size_t k = 1; k < e.kids.size(); ++k) {
      Value v = eval(*e.kids[k], scope);
      if (e.kw[k].empty()) {
        if (!a.kw.empty()) fail(ErrorCode::format_error, "a positional argument follows a keyword argument");
        a.pos.push_back(std::move(v));
      } else {
        a.kw.emplace_back(e.kw[k], std::move(v));
      }
    }
    return a;
  }

  static std::string undefined_name(const Value& v) { return v.s.empty() ? "a value" : "'" + v.s + "'"; }

  Value get_attr(const Value& obj, const std::string& name) {
    switch (obj.kind) {
      case K::undefined: fail(ErrorCode::format_error, undefined_name(obj), " is undefined (reading its attribute '", name, "')");
      case K::dict: {
        if (has_method(obj, name)) return method(obj, name);
        const Value* x = obj.dict->find(name);
        return x ? *x : Value::undefined(name);
      }
      case K::ns: {
        const Value* x = obj.ns->find(name);
        return x ? *x : Value::undefined(name);
      }
      case K::string:
        if (has_method(obj, name)) return method(obj, name);
        return Value::undefined(name);
      default: return Value::undefined(name);
    }
  }

  Value method(const Value& obj, const std::string& name) {
    auto f = std::make_shared<Func>();
    f->kind = Func::Kind::method;
    f->name = name;
    f->self = obj;
    Value v;
    v.kind = K::func;
    v.fn = std::move(f);
    return v;
  }

  static int64_t normalize_index(int64_t i, int64_t n) { return i < 0 ? i + n : i; }

  Value get_item(const Value& obj, const Value& key) {
    switch (obj.kind) {
      case K::undefined: fail(ErrorCode::format_error, undefined_name(obj), " is undefined (reading an item of it)");
      case K::list:
        if (key.kind == K::integer || key.kind == K::boolean) {
          const int64_t n = static_cast<int64_t>(obj.list->items.size());
          const int64_t i = normalize_index(key.kind == K::integer ? key.i : key.b, n);
          if (i < 0 || i >= n) return Value::undefined("an index out of range");
          return obj.list->items[static_cast<size_t>(i)];
        }
        return Value::undefined(to_str(key));
      case K::string:
        if (key.kind == K::integer) {
          const auto cps = code_points(obj.s);
          const int64_t n = static_cast<int64_t>(cps.size());
          const int64_t i = normalize_index(key.i, n);
          if (i < 0 || i >= n) return Value::undefined("an index out of range");
          return Value::string(std::string(cps[static_cast<size_t>(i)]));
        }
        if (key.kind == K::string && has_method(obj, key.s)) return method(obj, key.s);
        return Value::undefined(to_str(key));
      case K::dict:
        if (key.kind == K::string) {
          const Value* x = obj.dict->find(key.s);
          if (x) return *x;
          if (has_method(obj, key.s)) return method(obj, key.s);
        }
        return Value::undefined(to_str(key));
      case K::ns:
        if (key.kind == K::string) {
          const Value* x = obj.ns->find(key.s);
          if (x) return *x;
        }
        return Value::undefined(to_str(key));
      default: return Value::undefined(to_str(key));
    }
  }

  [[gnu::noinline]] Value slice(const Value& obj, const Expr& e, Scope& scope) {
    auto part = [&](size_t k) -> std::optional<int64_t> {
      if (!e.kids[k]) return std::nullopt;
      const Value v = eval(*e.kids[k], scope);
      if (v.kind == K::none || v.kind == K::undefined) return std::nullopt;
      if (v.kind != K::integer) fail(ErrorCode::format_error, "slice indices must be integers or None, got ", type_name(v));
      return v.i;
    };
    const std::optional<int64_t> start = part(1), stop = part(2), step_opt = part(3);
    const int64_t step = step_opt.value_or(1);
    if (step == 0) fail(ErrorCode::format_error, "slice step cannot be zero");
    if (step == INT64_MIN) fail(ErrorCode::out_of_range, "slice step out of range");
    std::vector<std::string_view> cps;
    int64_t n;
    if (obj.kind == K::list) n = static_cast<int64_t>(obj.list->items.size());
    else if (obj.kind == K::string) {
      cps = code_points(obj.s);
      n = static_cast<int64_t>(cps.size());
    } else {
      if (obj.kind == K::undefined) fail(ErrorCode::format_error, undefined_name(obj), " is undefined (slicing it)");
      return Value::undefined("a slice of a " + type_name(obj));  // Jinja's getitem: undefined, not an error
    }
    // Python's PySlice_AdjustIndices
    auto adjust = [&](std::optional<int64_t> x, int64_t dflt) {
      if (!x) return dflt;
      int64_t v = *x;
      if (v < 0) {
        v += n;
        if (v < 0) v = step < 0 ? -1 : 0;
      } else if (v >= n) {
        v = step < 0 ? n - 1 : n;
      }
      return v;
    };
    const int64_t b = adjust(start, step < 0 ? n - 1 : 0);
    const int64_t e2 = adjust(stop, step < 0 ? -1 : n);
    std::vector<size_t> idx;
    for (int64_t i = b; step > 0 ? i < e2 : i > e2;) {  // b and e2 are within [-1, n]
      idx.push_back(static_cast<size_t>(i));
      if (__builtin_add_overflow(i, step, &i)) break;
    }
    rt_.step(static_cast<int64_t>(idx.size()));
    if (obj.kind == K::list) {
      std::vector<Value> out;
      out.reserve(idx.size());
      for (size_t i : idx) out.push_back(obj.list->items[i]);
      return rt_.list(std::move(out), obj.list->tuple);
    }
    std::string out;
    for (size_t i : idx) out += cps[i];
    return rt_.str(std::move(out));
  }

  // Bounds the recursion of exec and eval together (statements, expressions and macro calls
  // nested in each other), so that no composition of the parse limits exhausts the stack.
  struct Depth {
    Renderer& r;
    explicit Depth(Renderer& renderer) : r(renderer) {
      if (++r.depth_ > kMaxEvalDepth)
        fail(ErrorCode::out_of_range, "the template nests statements, expressions and macro calls deeper than ",
             kMaxEvalDepth, " levels");
    }
    ~Depth() { --r.depth_; }
  };
  static constexpr int kMaxEvalDepth = 384;

  // eval dispatches only; each kind is its own function so that the recursion's frames stay small.
  Value eval(const Expr& e, Scope& scope) {
    Depth d(*this);
    line_ = e.line;
    rt_.step();
    switch (e.kind) {
      case Expr::Kind::literal: return e.value;
      case Expr::Kind::name: return eval_name(e, scope);
      case Expr::Kind::list:
      case Expr::Kind::tuple: return eval_sequence(e, scope);
      case Expr::Kind::dict: return eval_dict(e, scope);
      case Expr::Kind::attr: return eval_attr(e, scope);
      case Expr::Kind::subscript: return eval_subscript(e, scope);
      case Expr::Kind::slice: return eval_slice(e, scope);
      case Expr::Kind::call: return eval_call(e, scope);
      case Expr::Kind::filter: return eval_filter(e, scope);
      case Expr::Kind::test: return eval_test(e, scope);
      case Expr::Kind::unary: return eval_unary(e, scope);
      case Expr::Kind::logic_and:
      case Expr::Kind::logic_or: return eval_logic(e, scope);
      case Expr::Kind::ternary: return eval_ternary(e, scope);
      case Expr::Kind::binary: return eval_binary(e, scope);
    }
    fail(ErrorCode::internal, "unknown expression");
  }

  [[gnu::noinline]] Value eval_name(const Expr& e, Scope& scope) {
    const Value* v = scope.find(e.str);
    return v ? *v : Value::undefined(e.str);
  }
  [[gnu::noinline]] Value eval_sequence(const Expr& e, Scope& scope) {
    std::vector<Value> items;
    for (const ExprP& k : e.kids) items.push_back(eval(*k, scope));
    return rt_.list(std::move(items), e.kind == Expr::Kind::tuple);
  }
  [[gnu::noinline]] Value eval_dict(const Expr& e, Scope& scope) {
    auto d = std::make_shared<Dict>();
    for (size_t k = 0; k + 1 < e.kids.size(); k += 2) {
      const Value key = eval(*e.kids[k], scope);
      if (key.kind != K::string) fail(ErrorCode::unsupported, "dict keys other than strings are not supported, got ", type_name(key));
      d->set(key.s, eval(*e.kids[k + 1], scope));
    }
    Value v;
    v.kind = K::dict;
    v.dict = std::move(d);
    rt_.check_depth(v);
    return v;
  }
  [[gnu::noinline]] Value eval_attr(const Expr& e, Scope& scope) {
    const Value obj = eval(*e.kids[0], scope);
    line_ = e.line;
    return get_attr(obj, e.str);
  }
  [[gnu::noinline]] Value eval_subscript(const Expr& e, Scope& scope) {
    const Value obj = eval(*e.kids[0], scope);
    const Value key = eval(*e.kids[1], scope);
    line_ = e.line;
    return get_item(obj, key);
  }
  [[gnu::noinline]] Value eval_slice(const Expr& e, Scope& scope) {
    const Value obj = eval(*e.kids[0], scope);
    return slice(obj, e, scope);
  }
  [[gnu::noinline]] Value eval_call(const Expr& e, Scope& scope) {
    const Value fn = eval(*e.kids[0], scope);
    Args a = eval_args(e, scope);
    line_ = e.line;
    return call(fn, a, e);
  }
  [[gnu::noinline]] Value eval_filter(const Expr& e, Scope& scope) {
    const Value v = eval(*e.kids[0], scope);
    Args a = eval_args(e, scope);
    line_ = e.line;
    return apply_filter(rt_, e.str, v, a);
  }
  [[gnu::noinline]] Value eval_test(const Expr& e, Scope& scope) {
    const Value v = eval(*e.kids[0], scope);
    Args a = eval_args(e, scope);
    line_ = e.line;
    return Value::boolean(apply_test(rt_, e.str, v, a) != e.negate);
  }
  [[gnu::noinline]] Value eval_unary(const Expr& e, Scope& scope) {
    const Value v = eval(*e.kids[0], scope);
    if (e.str == "not") return Value::boolean(!truthy(v));
    if (v.kind == K::integer) {
      if (e.str == "+") return v;
      if (v.i == INT64_MIN) fail(ErrorCode::out_of_range, "integer overflow");
      return Value::integer(-v.i);
    }
    if (v.kind == K::boolean) return Value::integer(e.str == "-" ? -int64_t{v.b} : int64_t{v.b});
    if (v.kind == K::floating) return Value::floating(e.str == "-" ? -v.f : v.f);
    fail(ErrorCode::format_error, "bad operand type for unary ", e.str, ": '", type_name(v), "'");
  }
  [[gnu::noinline]] Value eval_logic(const Expr& e, Scope& scope) {
    Value a = eval(*e.kids[0], scope);
    if (truthy(a) == (e.kind == Expr::Kind::logic_or)) return a;
    return eval(*e.kids[1], scope);
  }
  [[gnu::noinline]] Value eval_ternary(const Expr& e, Scope& scope) {
    if (truthy(eval(*e.kids[0], scope))) return eval(*e.kids[1], scope);
    return e.kids[2] ? eval(*e.kids[2], scope) : Value::undefined("the else branch of an if expression");
  }
  [[gnu::noinline]] Value eval_binary(const Expr& e, Scope& scope) {
    const Value a = eval(*e.kids[0], scope);
    const Value b = eval(*e.kids[1], scope);
    line_ = e.line;
    return binary(e.str, a, b);
  }

  static double as_double(const Value& v) { return v.kind == K::floating ? v.f : v.kind == K::integer ? static_cast<double>(v.i) : v.b; }
  static int64_t as_int(const Value& v) { return v.kind == K::integer ? v.i : v.b; }

  [[gnu::noinline]] Value binary(const std::string& op, const Value& a, const Value& b) {
    if (op == "==") return Value::boolean(equal(a, b));
    if (op == "!=") return Value::boolean(!equal(a, b));
    if (op == "<") return Value::boolean(compare(a, b, op) < 0);
    if (op == ">") return Value::boolean(compare(a, b, op) > 0);
    if (op == "<=") return Value::boolean(compare(a, b, op) <= 0);
    if (op == ">=") return Value::boolean(compare(a, b, op) >= 0);
    if (op == "in" || op == "not in") {
      Args args;
      args.pos.push_back(b);
      if (b.kind != K::string && b.kind != K::list && b.kind != K::dict && b.kind != K::undefined)
        fail(ErrorCode::format_error, "argument of type '", type_name(b), "' is not iterable");
      if (b.kind == K::string && a.kind != K::string)
        fail(ErrorCode::format_error, "'in <string>' requires string as left operand, not ", type_name(a));
      return Value::boolean(apply_test(rt_, "in", a, args) == (op == "in"));
    }
    if (op == "~") return rt_.str(to_str(a) + to_str(b));
    if (a.kind == K::undefined || b.kind == K::undefined)
      fail(ErrorCode::format_error, undefined_name(a.kind == K::undefined ? a : b), " is undefined (in '", op, "')");
    const bool ints = (a.kind == K::integer || a.kind == K::boolean) && (b.kind == K::integer || b.kind == K::boolean);
    if (a.is_number() && b.is_number()) {
      if (ints && op != "/" && op != "**") {
        const int64_t x = as_int(a), y = as_int(b);
        int64_t r = 0;
        bool over = false;
        if (op == "+") over = __builtin_add_overflow(x, y, &r);
        else if (op == "-") over = __builtin_sub_overflow(x, y, &r);
        else if (op == "*") over = __builtin_mul_overflow(x, y, &r);
        else if (op == "//" || op == "%") {
          if (y == 0) fail(ErrorCode::format_error, "integer division or modulo by zero");
          if (x == INT64_MIN && y == -1) fail(ErrorCode::out_of_range, "integer overflow");
          int64_t q = x / y, m = x % y;
          if (m != 0 && ((m < 0) != (y < 0))) {
            --q;
            m += y;
          }
          r = op == "//" ? q : m;
        }
        if (over) fail(ErrorCode::out_of_range, "integer overflow in '", op, "'");
        return Value::integer(r);
      }
      const double x = as_double(a), y = as_double(b);
      if (op == "+") return Value::floating(x + y);
      if (op == "-") return Value::floating(x - y);
      if (op == "*") return Value::floating(x * y);
      if (op == "/") {
        if (y == 0) fail(ErrorCode::format_error, "division by zero");
        return Value::floating(x / y);
      }
      if (op == "//" || op == "%") {
        if (y == 0) fail(ErrorCode::format_error, "float division or modulo by zero");
        const double m = std::fmod(x, y);
        const double mm = (m != 0 && ((m < 0) != (y < 0))) ? m + y : m;
        return Value::floating(op == "%" ? mm : std::floor(x / y));
      }
      if (op == "**") {
        if (ints && as_int(b) >= 0) {
          int64_t r = 1, base = as_int(a), ex = as_int(b);
          while (ex > 0) {
            if (ex & 1)
              if (__builtin_mul_overflow(r, base, &r)) fail(ErrorCode::out_of_range, "integer overflow in '**'");
            ex >>= 1;
            if (ex > 0 && __builtin_mul_overflow(base, base, &base)) fail(ErrorCode::out_of_range, "integer overflow in '**'");
          }
          return Value::integer(r);
        }
        if (x == 0 && y < 0) fail(ErrorCode::format_error, "0.0 cannot be raised to a negative power");
        return Value::floating(std::pow(x, y));
      }
    }
    if (op == "+") {
      if (a.kind == K::string && b.kind == K::string) {
        rt_.check_size(a.s.size() + b.s.size());
        return rt_.str(a.s + b.s);
      }
      if (a.kind == K::list && b.kind == K::list) {
        std::vector<Value> items = a.list->items;
        items.insert(items.end(), b.list->items.begin(), b.list->items.end());
        return rt_.list(std::move(items), a.list->tuple);
      }
    }
    if (op == "*") {
      const Value* seq = (a.kind == K::string || a.kind == K::list) ? &a : (b.kind == K::string || b.kind == K::list) ? &b : nullptr;
      const Value* count = seq == &a ? &b : &a;
      if (seq && (count->kind == K::integer || count->kind == K::boolean)) {
        const int64_t n = std::max<int64_t>(0, as_int(*count));
        const uint64_t unit = seq->kind == K::string ? seq->s.size() : seq->list->items.size();
        uint64_t total = 0;
        if (__builtin_mul_overflow(unit, static_cast<uint64_t>(n), &total)) total = UINT64_MAX;
        if (seq->kind == K::string) {
          rt_.check_size(total);
          std::string out;
          out.reserve(total);
          for (int64_t k = 0; k < n; ++k) out += seq->s;
          return rt_.str(std::move(out));
        }
        rt_.step(static_cast<int64_t>(std::min<uint64_t>(total, static_cast<uint64_t>(prog_.limits.max_steps) + 1)));
        std::vector<Value> items;
        for (int64_t k = 0; k < n; ++k) items.insert(items.end(), seq->list->items.begin(), seq->list->items.end());
        return rt_.list(std::move(items));
      }
    }
    fail(ErrorCode::format_error, "unsupported operand type(s) for ", op, ": '", type_name(a), "' and '", type_name(b), "'");
  }

  // ---------------------------------------------------------------- calls

  [[gnu::noinline]] Value call(const Value& fn, const Args& a, const Expr& e) {
    if (fn.kind != K::func) {
      if (fn.kind == K::undefined) fail(ErrorCode::format_error, undefined_name(fn), " is undefined (calling it)");
      fail(ErrorCode::format_error, "'", type_name(fn), "' object is not callable");
    }
    const Func& f = *fn.fn;
    if (f.kind == Func::Kind::method) return call_method(rt_, f.self, f.name, a);
    if (f.kind == Func::Kind::macro) return call_macro(f, a);
    return call_builtin(f, a, e);
  }

  // The globals: none of them evaluates template code, so their large frame is never in a recursion.
  [[gnu::noinline]] Value call_builtin(const Func& f, const Args& a, const Expr& e) {
    if (f.name == "raise_exception") {
      const std::string msg = a.pos.empty() ? "" : to_str(a.pos[0]);
      throw Failure{ErrorCode::invalid_argument, "raise_exception: " + msg, e.line};
    }
    if (f.name == "namespace") {
      auto d = std::make_shared<Dict>();
      if (a.pos.size() > 1) fail(ErrorCode::format_error, "namespace() takes at most 1 positional argument");
      if (!a.pos.empty()) {
        if (a.pos[0].kind != K::dict) fail(ErrorCode::format_error, "namespace() needs a dict, got ", type_name(a.pos[0]));
        for (const auto& [k, v] : a.pos[0].dict->items) d->set(k, v);
      }
      for (const auto& [k, v] : a.kw) d->set(k, v);
      Value v;
      v.kind = K::ns;
      v.ns = std::move(d);
      rt_.check_depth(v);
      return v;
    }
    if (f.name == "dict") {
      std::vector<std::pair<std::string, Value>> items(a.kw.begin(), a.kw.end());
      Value v = Value::of_dict(std::move(items));
      rt_.check_depth(v);
      return v;
    }
    if (f.name == "range") {
      if (a.pos.empty() || a.pos.size() > 3 || !a.kw.empty()) fail(ErrorCode::format_error, "range() takes 1 to 3 integer arguments");
      int64_t p[3] = {0, 0, 1};
      for (size_t k = 0; k < a.pos.size(); ++k) {
        if (a.pos[k].kind != K::integer && a.pos[k].kind != K::boolean)
          fail(ErrorCode::format_error, "range() needs integers, got ", type_name(a.pos[k]));
      }
      if (a.pos.size() == 1) p[1] = as_int(a.pos[0]);
      else {
        p[0] = as_int(a.pos[0]);
        p[1] = as_int(a.pos[1]);
        if (a.pos.size() == 3) p[2] = as_int(a.pos[2]);
      }
      if (p[2] == 0) fail(ErrorCode::format_error, "range() arg 3 must not be zero");
      const double count = std::ceil((static_cast<double>(p[1]) - static_cast<double>(p[0])) / static_cast<double>(p[2]));
      if (count > static_cast<double>(prog_.limits.max_steps)) rt_.step(prog_.limits.max_steps + 1);
      std::vector<Value> out;
      for (int64_t i = p[0]; p[2] > 0 ? i < p[1] : i > p[1]; ) {
        rt_.step();
        out.push_back(Value::integer(i));
        if (__builtin_add_overflow(i, p[2], &i)) break;
      }
      return rt_.list(std::move(out));
    }
    if (f.name == "strftime_now") {
      if (a.pos.size() != 1 || a.pos[0].kind != K::string) fail(ErrorCode::format_error, "strftime_now() takes one format string");
      const std::time_t t = now_ ? static_cast<std::time_t>(*now_) : std::time(nullptr);
      std::tm tm{};
      localtime_r(&t, &tm);
      if (a.pos[0].s.size() > 256) fail(ErrorCode::format_error, "strftime_now() format longer than 256 bytes");
      char buf[4096];
      const size_t n = std::strftime(buf, sizeof buf, a.pos[0].s.c_str(), &tm);
      return rt_.str(std::string(buf, n));
    }
    fail(ErrorCode::internal, "unknown builtin ", f.name);
  }

  [[gnu::noinline]] Value call_macro(const Func& f, const Args& a) {
    const Stmt& m = *f.macro;
    if (call_depth_ >= prog_.limits.max_call_depth)
      fail(ErrorCode::out_of_range, "macro calls nest deeper than ", prog_.limits.max_call_depth, " levels");
    if (a.pos.size() > m.names.size())
      fail(ErrorCode::format_error, "macro '", m.text, "' takes not more than ", m.names.size(), " argument(s)");
    Scope scope{&root_, {}};
    for (const auto& [k, v] : a.kw)
      if (std::find(m.names.begin(), m.names.end(), k) == m.names.end())
        fail(ErrorCode::format_error, "macro '", m.text, "' takes no keyword argument '", k, "'");
    ++call_depth_;
    struct Down {
      int& d;
      ~Down() { --d; }
    } down{call_depth_};
    for (size_t k = 0; k < m.names.size(); ++k) {
      const Value* v = a.get(k, m.names[k]);
      if (v) scope.set(m.names[k], *v);
      else if (m.defaults[k]) scope.set(m.names[k], eval(*m.defaults[k], scope));
      else scope.set(m.names[k], Value::undefined(m.names[k]));
    }
    std::string out;
    exec(m.body, scope, out);
    return rt_.str(std::move(out));
  }

  const Program& prog_;
  Runtime rt_;
  std::optional<int64_t> now_;
  Scope root_;
  int line_ = 0;
  int call_depth_ = 0;
  int depth_ = 0;
};

Status to_status(const Failure& f, const std::string& name, int fallback_line) {
  const int line = f.line > 0 ? f.line : fallback_line;
  if (line <= 0) return Status(f.code, cat(name, ": ", f.message));  // before any line ran (the variables)
  return Status(f.code, cat(name, ":", line, ": ", f.message));
}

}  // namespace

Expected<Template> Template::parse(std::string_view source, const std::string& name, const Limits& limits) {
  auto p = std::make_shared<Program>();
  p->name = name;
  p->limits = limits;
  try {
    p->body = parse_program(source, p->limits);
  } catch (const Failure& f) {
    return to_status(f, name, 0);
  } catch (const std::bad_alloc&) {
    return Status(ErrorCode::out_of_range, cat(name, ": out of memory while parsing the template"));
  }
  Template t;
  t.program_ = std::move(p);
  return t;
}

Expected<std::string> Template::render(const nlohmann::ordered_json& context, std::optional<int64_t> now_seconds) const {
  if (!program_) return Status(ErrorCode::invalid_argument, "rendering an empty template");
  Renderer r(*program_, now_seconds);
  try {
    return r.run(context);
  } catch (const Failure& f) {
    return to_status(f, program_->name, r.line());
  } catch (const std::bad_alloc&) {
    return Status(ErrorCode::out_of_range, cat(program_->name, ": out of memory while rendering"));
  } catch (const std::exception& e) {
    return Status(ErrorCode::internal, cat(program_->name, ":", r.line(), ": ", e.what()));
  }
}

const std::string& Template::name() const {
  static const std::string empty;
  return program_ ? program_->name : empty;
}

}  // namespace rlx::text::jinja
