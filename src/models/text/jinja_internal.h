// The inside of the Jinja engine (jinja.h): values, the syntax tree and the helpers the parser,
// the evaluator and the filters share. Errors inside travel as a thrown jinja::Failure, which
// the two entry points (Template::parse and Template::render) turn into a Status; no exception
// leaves them.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/text/jinja.h"
#include "rlx/status.h"

namespace rlx::text::jinja {

struct Failure {
  ErrorCode code;
  std::string message;  // without the "<name>:<line>: " prefix
  int line = 0;         // 0: not known where it was raised; the evaluator fills it in
};

template <class... Args>
[[noreturn]] void fail(ErrorCode code, const Args&... args) {
  throw Failure{code, cat(args...), 0};
}

struct Value;
struct List;
struct Dict;
struct Func;

// A Jinja (Python) value. Lists and dicts are immutable and shared (the sandbox forbids
// mutating them); a namespace is shared and mutable through {% set ns.attr = ... %}.
struct Value {
  enum class Kind : uint8_t { undefined, none, boolean, integer, floating, string, list, dict, ns, func };
  Kind kind = Kind::undefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;  // a string; for undefined, what was undefined (for messages)
  std::shared_ptr<const List> list;
  std::shared_ptr<const Dict> dict;
  std::shared_ptr<Dict> ns;
  std::shared_ptr<const Func> fn;

  static Value undefined(std::string what = "") { Value v; v.s = std::move(what); return v; }
  static Value none() { Value v; v.kind = Kind::none; return v; }
  static Value boolean(bool x) { Value v; v.kind = Kind::boolean; v.b = x; return v; }
  static Value integer(int64_t x) { Value v; v.kind = Kind::integer; v.i = x; return v; }
  static Value floating(double x) { Value v; v.kind = Kind::floating; v.f = x; return v; }
  static Value string(std::string x) { Value v; v.kind = Kind::string; v.s = std::move(x); return v; }
  static Value of_list(std::vector<Value> items, bool tuple = false);
  static Value of_dict(std::vector<std::pair<std::string, Value>> items);

  bool is(Kind k) const { return kind == k; }
  bool is_undefined() const { return kind == Kind::undefined; }
  bool is_number() const { return kind == Kind::integer || kind == Kind::floating || kind == Kind::boolean; }
  int depth() const;  // 0 for scalars, 1 + the deepest element for lists and dicts
  bool holds_ns() const;  // is a namespace, or a list or dict holding one
};

struct List {
  std::vector<Value> items;
  bool tuple = false;
  int depth = 1;
  bool has_ns = false;  // some element is or holds a namespace
};

struct Dict {
  std::vector<std::pair<std::string, Value>> items;  // insertion order, unique keys
  int depth = 1;
  bool has_ns = false;  // some value is or holds a namespace
  const Value* find(std::string_view key) const;
  void set(const std::string& key, Value v);
};

struct Stmt;
struct Func {
  enum class Kind : uint8_t { builtin, method, macro };
  Kind kind = Kind::builtin;
  std::string name;      // the builtin or method name
  Value self;            // the receiver of a method
  const Stmt* macro = nullptr;
};

// Python's names for types, as error messages say them ("str", "list", "dict", ...).
std::string type_name(const Value& v);
bool truthy(const Value& v);
// str(v) as Jinja prints it ({{ v }}): undefined is "", None "None", True "True", lists and dicts
// in Python's repr.
std::string to_str(const Value& v);
std::string repr(const Value& v);
std::string float_repr(double x);
// json.dumps(v, ensure_ascii, indent, separators, sort_keys) as Python writes it. indent < 0: none.
std::string to_json(const Value& v, int indent, bool ensure_ascii, bool sort_keys, const std::string& item_sep,
                    const std::string& key_sep);
bool equal(const Value& a, const Value& b);
int compare(const Value& a, const Value& b, std::string_view op);  // <0, 0, >0; fails when not ordered
Value from_json(const nlohmann::ordered_json& j, int depth, int max_depth);

// UTF-8 helpers: code points of a string (a byte that starts no valid sequence counts as one).
std::vector<std::string_view> code_points(std::string_view s);
bool is_py_space(uint32_t cp);
std::string py_strip(std::string_view s, bool left, bool right, const Value* chars);

// ---------------------------------------------------------------- syntax tree

struct Expr;
using ExprP = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind : uint8_t {
    literal, name, list, tuple, dict, attr, subscript, slice, call, filter, test, unary, binary, logic_and,
    logic_or, ternary
  };
  Kind kind = Kind::literal;
  int line = 0;
  int depth = 1;
  std::string str;                // name, attribute, operator, filter or test name
  bool negate = false;            // `is not`
  Value value;                    // literal
  std::vector<ExprP> kids;        // operands; for call/filter/test: [callee/operand, args...]
  std::vector<std::string> kw;    // for call/filter/test args: the keyword of kids[1 + k], "" positional
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum Kind : uint8_t { s_text, s_output, s_if, s_for, s_set, s_set_block, s_macro, s_break, s_continue, s_block };
  Kind kind = s_text;
  int line = 0;
  std::string text;                         // text; the macro's name
  std::vector<std::string> names;           // for targets; set targets; macro parameters
  std::string attr;                         // set ns.attr: the attribute (names[0] is the namespace)
  ExprP expr;                               // output; for iterable; set value
  ExprP cond;                               // for ... if cond
  std::vector<std::pair<ExprP, Body>> branches;  // if / elif
  Body body, else_body;                     // for body / else; set_block body; macro body; if's else
  std::vector<ExprP> defaults;              // macro parameter defaults (null: none)
};

struct Program {
  std::string name;
  Limits limits;
  Body body;
};

Body parse_program(std::string_view source, const Limits& limits);  // throws Failure

}  // namespace rlx::text::jinja

namespace rlx::text::jinja {

// The arguments of a call, filter, test or method: positional, then keyword.
struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  // The argument at position `i` or named `name`; null when neither was given.
  const Value* get(size_t i, std::string_view name) const;
  // Fails when more than `n` positional arguments or a keyword not in `names` was given.
  void check(std::string_view callee, size_t n, std::initializer_list<std::string_view> names) const;
};

// The budgets of one render, shared by the evaluator and the builtins.
struct Runtime {
  const Limits& limits;
  int64_t steps = 0;
  int64_t string_bytes = 0;

  void step(int64_t n = 1) {
    steps += n;
    if (steps > limits.max_steps)
      fail(ErrorCode::out_of_range, "the template ran more than ", limits.max_steps, " evaluation steps");
  }
  // A string value made by the template: counts against the string budgets.
  Value str(std::string s) {
    check_size(s.size());
    string_bytes += static_cast<int64_t>(s.size());
    if (string_bytes > limits.max_string_bytes)
      fail(ErrorCode::out_of_range, "the template made more than ", limits.max_string_bytes, " bytes of strings");
    return Value::string(std::move(s));
  }
  void check_size(size_t bytes) const {
    if (bytes > static_cast<uint64_t>(limits.max_output_bytes))
      fail(ErrorCode::out_of_range, "the template made a string of more than ", limits.max_output_bytes, " bytes");
  }
  Value list(std::vector<Value> items, bool tuple = false) {
    step(static_cast<int64_t>(items.size()));
    Value v = Value::of_list(std::move(items), tuple);
    check_depth(v);
    return v;
  }
  void check_depth(const Value& v) const {
    if (v.depth() > limits.max_value_depth)
      fail(ErrorCode::out_of_range, "the template built a value nested deeper than ", limits.max_value_depth, " levels");
  }
};

Value apply_filter(Runtime& rt, std::string_view name, const Value& v, const Args& a);
bool apply_test(Runtime& rt, std::string_view name, const Value& v, const Args& a);
bool has_method(const Value& self, std::string_view name);
Value call_method(Runtime& rt, const Value& self, std::string_view name, const Args& a);
// The elements a for loop visits: a list's items, a dict's keys, a string's characters;
// nothing for undefined. Fails for what is not iterable.
std::vector<Value> iterate(Runtime& rt, const Value& v);

}  // namespace rlx::text::jinja
