// The parser of the graph and primitive levels: a recursive-descent reader over the token
// list from lexer.cpp. Nodes are type-checked as they are read (the ops table's inference),
// so every error points at the line and column of the token or node at fault.
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "lexer.h"
#include "rlx/ir_text.h"
#include "rlx/verify.h"
#include "text_format.h"

namespace rlx::text {
namespace {

// Lists inside dense<...> nest at most this deep, so hostile input cannot exhaust the stack.
constexpr int kMaxNesting = 64;
// A constant in text IR is small by nature (weights are params); this bounds what a short
// splat such as dense<0.0> : f32[100000, 100000] may allocate.
constexpr int64_t kMaxConstantBytes = int64_t{1} << 30;

// One element of a dense literal: a number token, or for c64 a (re, im) pair.
struct Element {
  const Token* re = nullptr;
  const Token* im = nullptr;
};

// A dense literal before its type is known (the constant form takes the type after ':').
struct DenseLit {
  const Token* start = nullptr;
  std::optional<TensorType> type;
  bool is_list = false;
  std::vector<int64_t> list_shape;
  std::vector<Element> elems;
};

std::string strip_op_prefix(const std::string& msg, Op op) {
  std::string prefix = cat(op_name(op), ": ");
  if (msg.compare(0, prefix.size(), prefix) == 0) return msg.substr(prefix.size());
  return msg;
}

std::string join_types(const std::vector<TensorType>& ts) {
  std::string r;
  for (size_t i = 0; i < ts.size(); ++i) r += concat(i ? ", " : "", format_type(ts[i]));
  return r;
}

class Parser {
 public:
  Parser(std::vector<Token> toks, std::string_view source) : toks_(std::move(toks)), source_(source) {}

  Expected<Graph> run() {
    RLX_TRY(parse_header());
    RLX_TRY(parse_body());
    if (cur().kind != Tok::eof) return fail(cur(), "unexpected ", describe(cur()), " after the end of the graph");
    return std::move(g_);
  }

 private:
  // ---- tokens and errors ----

  const Token& cur() const { return toks_[pos_]; }
  const Token& peek(size_t k = 1) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  const Token& take() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  bool at(Tok k) const { return cur().kind == k; }
  bool at_ident(std::string_view word) const { return cur().kind == Tok::ident && cur().text == word; }
  bool accept(Tok k) {
    if (!at(k)) return false;
    take();
    return true;
  }

  template <class... Args>
  Status fail_code(ErrorCode code, const Token& t, const Args&... args) {
    return error(code, source_, ":", t.line, ":", t.col, ": ", args...);
  }
  template <class... Args>
  Status fail(const Token& t, const Args&... args) {
    return fail_code(ErrorCode::parse_error, t, args...);
  }
  Status expect(Tok k, std::string_view what) {
    if (accept(k)) return Status::ok();
    return fail(cur(), "expected ", what, " but found ", describe(cur()));
  }

  // ---- numbers ----

  Expected<int64_t> int_of(const Token& t) {
    int64_t v = 0;
    const char* b = t.text.data();
    const char* e = b + t.text.size();
    auto r = std::from_chars(b, e, v);
    if (r.ec == std::errc::result_out_of_range) return fail(t, "integer ", t.text, " is out of range for i64");
    if (r.ec != std::errc() || r.ptr != e) return fail(t, "bad integer '", t.text, "'");
    return v;
  }

  // A float from a number token or inf / -inf / nan, read at the precision of T so that the
  // shortest text the printer writes for a float reads back as exactly that float.
  template <class T>
  Expected<T> float_of(const Token& t) {
    if (t.kind == Tok::ident) {
      if (t.text == "inf") return std::numeric_limits<T>::infinity();
      if (t.text == "nan") return std::numeric_limits<T>::quiet_NaN();
      return fail(t, "expected a number but found ", describe(t));
    }
    if (t.kind != Tok::integer && t.kind != Tok::floating)
      return fail(t, "expected a number but found ", describe(t));
    if (t.text == "-inf") return -std::numeric_limits<T>::infinity();
    const char* b = t.text.data();
    const char* e = b + t.text.size();
    T v = 0;
    auto r = std::from_chars(b, e, v);
    if (r.ec == std::errc::result_out_of_range) {
      // Underflow of a hand-written literal rounds to zero or a denormal; overflow is an error.
      double d = 0;
      auto r2 = std::from_chars(b, e, d);
      if (r2.ec == std::errc() && r2.ptr == e && std::fabs(d) <= static_cast<double>(std::numeric_limits<T>::max()))
        return static_cast<T>(d);
      return fail(t, "number ", t.text, " is out of range for ", sizeof(T) == 4 ? "f32" : "f64");
    }
    if (r.ec != std::errc() || r.ptr != e) return fail(t, "bad number '", t.text, "'");
    return v;
  }

  bool at_number() const {
    return at(Tok::integer) || at(Tok::floating) || at_ident("inf") || at_ident("nan");
  }

  // ---- types ----

  Expected<DType> parse_dtype_token() {
    const Token& t = cur();
    if (t.kind != Tok::ident) return fail(t, "expected a dtype but found ", describe(t));
    auto dt = parse_dtype(t.text);
    if (!dt) return fail(t, "unknown dtype '", t.text, "'");
    take();
    return *dt;
  }

  Expected<TensorType> parse_type() {
    TensorType ty;
    RLX_ASSIGN_OR_RETURN(ty.dtype, parse_dtype_token());
    if (!at(Tok::lbracket))
      return fail(cur(), "expected '[' after dtype ", dtype_name(ty.dtype), " but found ", describe(cur()));
    take();
    if (accept(Tok::rbracket)) return ty;
    for (;;) {
      const Token& t = cur();
      if (t.kind == Tok::integer) {
        RLX_ASSIGN_OR_RETURN(int64_t n, int_of(t));
        if (n < 0) return fail(t, "negative dimension ", n);
        ty.shape.push_back(Dim(n));
      } else if (t.kind == Tok::ident) {
        ty.shape.push_back(Dim::symbol(t.text));
      } else if (t.kind == Tok::string) {
        if (t.text.empty()) return fail(t, "empty dimension name");
        ty.shape.push_back(Dim::symbol(t.text));
      } else if (t.kind == Tok::question) {
        ty.shape.push_back(Dim::unknown());
      } else {
        return fail(t, "expected a dimension (a size, a name or '?') but found ", describe(t));
      }
      take();
      if (accept(Tok::rbracket)) return ty;
      RLX_TRY(expect(Tok::comma, "',' or ']' in the shape"));
    }
  }

  // ---- dense literals ----

  Status parse_element(DenseLit& d) {
    if (at(Tok::lparen)) {  // c64 (re, im)
      take();
      Element e;
      if (!at_number()) return fail(cur(), "expected the real part of a complex number but found ", describe(cur()));
      e.re = &take();
      RLX_TRY(expect(Tok::comma, "',' between real and imaginary part"));
      if (!at_number())
        return fail(cur(), "expected the imaginary part of a complex number but found ", describe(cur()));
      e.im = &take();
      RLX_TRY(expect(Tok::rparen, "')' after a complex number"));
      d.elems.push_back(e);
      return Status::ok();
    }
    if (at_number() || at_ident("true") || at_ident("false")) {
      d.elems.push_back(Element{&take(), nullptr});
      return Status::ok();
    }
    return fail(cur(), "expected a tensor element but found ", describe(cur()));
  }

  // A '[' list of elements or lists; returns its nested shape ([] for a scalar element).
  Expected<std::vector<int64_t>> parse_list(DenseLit& d, int depth) {
    if (depth > kMaxNesting) return fail(cur(), "lists nest deeper than ", kMaxNesting, " levels");
    RLX_TRY(expect(Tok::lbracket, "'['"));
    if (accept(Tok::rbracket)) return std::vector<int64_t>{0};
    std::vector<int64_t> child;
    int64_t count = 0;
    for (;;) {
      const Token& first = cur();
      std::vector<int64_t> sub;
      if (at(Tok::lbracket)) {
        RLX_ASSIGN_OR_RETURN(sub, parse_list(d, depth + 1));
      } else {
        RLX_TRY(parse_element(d));
      }
      if (count == 0) {
        child = sub;
      } else if (sub != child) {
        return fail(first, "ragged list: this entry has shape ", sizes_to_string(sub), " but the first has ",
                    sizes_to_string(child));
      }
      ++count;
      if (accept(Tok::rbracket)) break;
      RLX_TRY(expect(Tok::comma, "',' or ']' in the list"));
    }
    std::vector<int64_t> shape{count};
    shape.insert(shape.end(), child.begin(), child.end());
    return shape;
  }

  // dense<[type ,] payload>, with the `dense` keyword current.
  Expected<DenseLit> parse_dense() {
    DenseLit d;
    d.start = &take();
    RLX_TRY(expect(Tok::langle, "'<' after dense"));
    if (at(Tok::ident) && parse_dtype(cur().text) && peek().kind == Tok::lbracket) {
      RLX_ASSIGN_OR_RETURN(TensorType ty, parse_type());
      d.type = ty;
      RLX_TRY(expect(Tok::comma, "',' after the type of a dense literal"));
    }
    if (at(Tok::lbracket)) {
      d.is_list = true;
      RLX_ASSIGN_OR_RETURN(d.list_shape, parse_list(d, 1));
    } else {
      RLX_TRY(parse_element(d));
    }
    RLX_TRY(expect(Tok::rangle, "'>' to close the dense literal"));
    return d;
  }

  Status store_element(Tensor& t, int64_t i, const Element& e) {
    const DType dt = t.dtype();
    const Token& tok = *e.re;
    if (e.im && dt != DType::c64) return fail(tok, "(re, im) pairs are only for c64, not ", dtype_name(dt));
    uint8_t* p = t.bytes();
    auto put = [&](auto v, int64_t index) { std::memcpy(p + index * sizeof(v), &v, sizeof(v)); };
    switch (dt) {
      case DType::f64: {
        RLX_ASSIGN_OR_RETURN(double v, float_of<double>(tok));
        put(v, i);
        return Status::ok();
      }
      case DType::f32:
      case DType::f16:
      case DType::bf16:
      case DType::c64: {
        RLX_ASSIGN_OR_RETURN(float v, float_of<float>(tok));
        if (dt == DType::f32) {
          put(v, i);
        } else if (dt == DType::c64) {
          float im = 0;
          if (e.im) {
            RLX_ASSIGN_OR_RETURN(im, float_of<float>(*e.im));
          }
          put(v, 2 * i);
          put(im, 2 * i + 1);
        } else {
          uint16_t bits = dt == DType::f16 ? f32_to_f16(v) : f32_to_bf16(v);
          float back = dt == DType::f16 ? f16_to_f32(bits) : bf16_to_f32(bits);
          if (std::isfinite(v) && !std::isfinite(back))
            return fail(tok, "number ", tok.text, " is out of range for ", dtype_name(dt));
          put(bits, i);
        }
        return Status::ok();
      }
      case DType::boolean: {
        if (tok.kind == Tok::ident && (tok.text == "true" || tok.text == "false")) {
          put(static_cast<uint8_t>(tok.text == "true"), i);
          return Status::ok();
        }
        if (tok.kind == Tok::integer && (tok.text == "0" || tok.text == "1")) {
          put(static_cast<uint8_t>(tok.text == "1"), i);
          return Status::ok();
        }
        return fail(tok, "expected true or false for a bool element but found ", describe(tok));
      }
      default: break;
    }
    // Integer dtypes: exact, range-checked, never through double.
    if (tok.kind != Tok::integer)
      return fail(tok, "expected an integer for a ", dtype_name(dt), " element but found ", describe(tok));
    if (dt == DType::u64) {
      uint64_t v = 0;
      const char* b = tok.text.data();
      const char* end = b + tok.text.size();
      auto r = std::from_chars(b, end, v);
      if (r.ec != std::errc() || r.ptr != end) return fail(tok, "integer ", tok.text, " is out of range for u64");
      put(v, i);
      return Status::ok();
    }
    RLX_ASSIGN_OR_RETURN(int64_t v, int_of(tok));
    int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
    switch (dt) {
      case DType::i8: lo = -128; hi = 127; break;
      case DType::u8: lo = 0; hi = 255; break;
      case DType::i16: lo = -32768; hi = 32767; break;
      case DType::u16: lo = 0; hi = 65535; break;
      case DType::i32: lo = std::numeric_limits<int32_t>::min(); hi = std::numeric_limits<int32_t>::max(); break;
      case DType::u32: lo = 0; hi = std::numeric_limits<uint32_t>::max(); break;
      case DType::i4: lo = -8; hi = 7; break;
      case DType::u4: lo = 0; hi = 15; break;
      default: break;
    }
    if (v < lo || v > hi) return fail(tok, "integer ", v, " is out of range for ", dtype_name(dt));
    switch (dt) {
      case DType::i8: put(static_cast<int8_t>(v), i); break;
      case DType::u8: put(static_cast<uint8_t>(v), i); break;
      case DType::i16: put(static_cast<int16_t>(v), i); break;
      case DType::u16: put(static_cast<uint16_t>(v), i); break;
      case DType::i32: put(static_cast<int32_t>(v), i); break;
      case DType::u32: put(static_cast<uint32_t>(v), i); break;
      case DType::i64: put(v, i); break;
      default: t.set_f64(i, static_cast<double>(v)); break;  // i4 / u4: packed nibbles
    }
    return Status::ok();
  }

  Expected<Tensor> build_tensor(const DenseLit& d, const TensorType& ty) {
    auto sizes = static_sizes(ty.shape, "the type of a dense literal");
    if (!sizes) return fail(*d.start, sizes.status().message());
    auto n = checked_numel(*sizes);
    if (!n) return fail(*d.start, n.status().message());
    if (*n > kMaxConstantBytes || static_cast<int64_t>(dtype_bytes(ty.dtype, static_cast<size_t>(*n))) > kMaxConstantBytes)
      return fail(*d.start, "a dense literal of type ", format_type(ty), " exceeds the ", kMaxConstantBytes >> 20,
                  " MiB limit of text IR (use a param for large tensors)");
    if (d.is_list) {
      bool nested = d.list_shape == *sizes;
      bool flat = d.list_shape.size() == 1 && d.list_shape[0] == *n;
      if (!nested && !flat)
        return fail(*d.start, "dense literal has shape ", sizes_to_string(d.list_shape), " but its type is ",
                    format_type(ty));
    }
    Tensor t = Tensor::zeros(ty.dtype, *sizes);
    if (t.nbytes() > 0 && !t.bytes()) return fail(*d.start, "cannot allocate ", t.nbytes(), " bytes for a constant");
    if (!d.is_list) {
      if (*n == 0) return t;
      RLX_TRY(store_element(t, 0, d.elems[0]));
      const size_t w = dtype_bits(ty.dtype) / 8;
      if (is_packed(ty.dtype)) {
        for (int64_t i = 1; i < *n; ++i) t.set_f64(i, t.get_f64(0));
      } else {
        for (int64_t i = 1; i < *n; ++i) std::memcpy(t.bytes() + i * w, t.bytes(), w);
      }
      return t;
    }
    for (int64_t i = 0; i < *n; ++i) RLX_TRY(store_element(t, i, d.elems[i]));
    return t;
  }

  // ---- attributes ----

  static bool kind_accepted(AttrKind want, AttrKind got) {
    return want == got || (want == AttrKind::f64 && got == AttrKind::i64) ||
           (want == AttrKind::f64s && got == AttrKind::i64s) || (want == AttrKind::i64s && got == AttrKind::i64);
  }

  Expected<AttrValue> parse_attr_value(AttrKind want) {
    const Token& t = cur();
    switch (t.kind) {
      case Tok::integer: {
        RLX_ASSIGN_OR_RETURN(int64_t v, int_of(t));
        take();
        return AttrValue(v);
      }
      case Tok::floating: {
        RLX_ASSIGN_OR_RETURN(double v, float_of<double>(t));
        take();
        return AttrValue(v);
      }
      case Tok::string: take(); return AttrValue(t.text);
      case Tok::ident: {
        if (t.text == "inf" || t.text == "nan") {
          RLX_ASSIGN_OR_RETURN(double v, float_of<double>(t));
          take();
          return AttrValue(v);
        }
        if (t.text == "dense") {
          RLX_ASSIGN_OR_RETURN(DenseLit d, parse_dense());
          if (!d.type) return fail(*d.start, "a dense attribute needs its type: dense<f32[2], [1.0, 2.0]>");
          RLX_ASSIGN_OR_RETURN(Tensor tensor, build_tensor(d, *d.type));
          return AttrValue(std::move(tensor));
        }
        auto dt = parse_dtype(t.text);
        if (!dt) return fail(t, "unknown dtype '", t.text, "' (strings are quoted)");
        take();
        return AttrValue(*dt);
      }
      case Tok::lbracket: {
        take();
        std::vector<const Token*> items;
        bool any_float = false;
        if (!at(Tok::rbracket)) {
          for (;;) {
            if (at(Tok::lbracket)) return fail(cur(), "attribute lists cannot nest");
            if (!at_number()) return fail(cur(), "expected a number in the list but found ", describe(cur()));
            any_float |= !at(Tok::integer);
            items.push_back(&take());
            if (at(Tok::rbracket)) break;
            RLX_TRY(expect(Tok::comma, "',' or ']' in the list"));
          }
        }
        take();  // ']'
        if (items.empty() && want == AttrKind::f64s) return AttrValue(std::vector<double>{});
        if (!any_float) {
          std::vector<int64_t> v;
          for (const Token* it : items) {
            RLX_ASSIGN_OR_RETURN(int64_t x, int_of(*it));
            v.push_back(x);
          }
          return AttrValue(std::move(v));
        }
        std::vector<double> v;
        for (const Token* it : items) {
          RLX_ASSIGN_OR_RETURN(double x, float_of<double>(*it));
          v.push_back(x);
        }
        return AttrValue(std::move(v));
      }
      default: return fail(t, "expected an attribute value but found ", describe(t));
    }
  }

  Status parse_attrs(Op op, Attrs& attrs) {
    const OpInfo& info = op_info(op);
    RLX_TRY(expect(Tok::lbrace, "'{'"));
    if (!at(Tok::rbrace)) {
      for (;;) {
        const Token& name_tok = cur();
        if (name_tok.kind != Tok::ident && name_tok.kind != Tok::string)
          return fail(name_tok, "expected an attribute name but found ", describe(name_tok));
        take();
        const AttrSpec* spec = nullptr;
        for (const AttrSpec& s : info.attrs)
          if (s.name == name_tok.text) spec = &s;
        if (!spec) {
          std::string known;
          for (const AttrSpec& s : info.attrs) known += cat(known.empty() ? "" : ", ", s.name);
          return fail(name_tok, info.name, " has no attribute '", name_tok.text, "'",
                      known.empty() ? std::string(" (it takes none)") : cat(" (it takes ", known, ")"));
        }
        if (attrs.has(name_tok.text)) return fail(name_tok, "attribute '", name_tok.text, "' is given twice");
        RLX_TRY(expect(Tok::equal, "'=' after the attribute name"));
        const Token& value_tok = cur();
        RLX_ASSIGN_OR_RETURN(AttrValue v, parse_attr_value(spec->kind));
        if (!kind_accepted(spec->kind, attr_kind(v)))
          return fail(value_tok, "attribute '", spec->name, "' of ", info.name, " must be ", attr_kind_name(spec->kind),
                      ", got ", attr_kind_name(attr_kind(v)));
        attrs.set(name_tok.text, std::move(v));
        if (accept(Tok::rbrace)) break;
        RLX_TRY(expect(Tok::comma, "',' or '}' after an attribute"));
      }
    } else {
      take();
    }
    return Status::ok();
  }

  // ---- graph ----

  Status define(const Token& name_tok, ValueId v) {
    auto [it, fresh] = defs_.emplace(name_tok.text, v);
    if (!fresh) {
      const Token& first = *def_tok_[it->second];
      return fail(name_tok, "redefinition of %", name_tok.text, " (first defined at ", first.line, ":", first.col, ")");
    }
    if (def_tok_.size() <= static_cast<size_t>(v)) def_tok_.resize(v + 1, nullptr);
    def_tok_[v] = &name_tok;
    g_.values[v].name = name_tok.text;
    return Status::ok();
  }

  Status parse_header() {
    const Token& kw = cur();
    if (at_ident("graph")) {
      g_.level = IrLevel::graph;
    } else if (at_ident("primitive")) {
      g_.level = IrLevel::primitive;
    } else {
      return fail(kw, "expected 'graph' or 'primitive' but found ", describe(kw));
    }
    take();
    if (!at(Tok::global_name)) return fail(cur(), "expected a graph name such as @main but found ", describe(cur()));
    g_.name = take().text;
    RLX_TRY(expect(Tok::lparen, "'(' to open the graph inputs"));
    if (!accept(Tok::rparen)) {
      for (;;) {
        if (!at(Tok::value_name)) return fail(cur(), "expected an input name such as %x but found ", describe(cur()));
        const Token& name_tok = take();
        RLX_TRY(expect(Tok::colon, "':' after the input name"));
        RLX_ASSIGN_OR_RETURN(TensorType ty, parse_type());
        if (defs_.count(name_tok.text))
          return define(name_tok, 0);  // reports the redefinition
        ValueId v = g_.add_input("", ty);
        RLX_TRY(define(name_tok, v));
        if (accept(Tok::rparen)) break;
        RLX_TRY(expect(Tok::comma, "',' or ')' after a graph input"));
      }
    }
    if (accept(Tok::arrow)) {
      RLX_TRY(expect(Tok::lparen, "'(' to open the result types"));
      std::vector<TensorType> outs;
      if (!accept(Tok::rparen)) {
        for (;;) {
          RLX_ASSIGN_OR_RETURN(TensorType ty, parse_type());
          outs.push_back(std::move(ty));
          if (accept(Tok::rparen)) break;
          RLX_TRY(expect(Tok::comma, "',' or ')' in the result types"));
        }
      }
      declared_outputs_ = std::move(outs);
    }
    return expect(Tok::lbrace, "'{' to open the graph body");
  }

  Status parse_body() {
    for (;;) {
      if (at_ident("return")) return parse_return();
      if (at(Tok::value_name)) {
        RLX_TRY(parse_statement());
        continue;
      }
      if (at(Tok::rbrace)) return fail(cur(), "missing 'return' before '}'");
      return fail(cur(), "expected a statement ('%name = op(...)' or 'return') but found ", describe(cur()));
    }
  }

  Status parse_return() {
    const Token& ret = take();
    std::vector<const Token*> toks;
    if (at(Tok::value_name)) {
      for (;;) {
        if (!at(Tok::value_name)) return fail(cur(), "expected a value name after ',' but found ", describe(cur()));
        const Token& t = take();
        auto it = defs_.find(t.text);
        if (it == defs_.end()) return fail(t, "use of undefined value %", t.text);
        g_.outputs.push_back(it->second);
        toks.push_back(&t);
        if (!accept(Tok::comma)) break;
      }
    }
    if (declared_outputs_) {
      const auto& want = *declared_outputs_;
      if (want.size() != g_.outputs.size())
        return fail(ret, "the graph returns ", g_.outputs.size(), " values but its signature declares ", want.size());
      for (size_t k = 0; k < want.size(); ++k)
        if (g_.type(g_.outputs[k]) != want[k])
          return fail(*toks[k], "returned value %", toks[k]->text, " has type ", format_type(g_.type(g_.outputs[k])),
                      " but the signature declares ", format_type(want[k]));
    }
    return expect(Tok::rbrace, "'}' after the return");
  }

  Status parse_statement() {
    std::vector<const Token*> names;
    for (;;) {
      if (!at(Tok::value_name)) return fail(cur(), "expected a value name but found ", describe(cur()));
      names.push_back(&take());
      if (!accept(Tok::comma)) break;
    }
    RLX_TRY(expect(Tok::equal, "'=' after the value names"));
    const Token* native_tok = nullptr;
    if (at_ident("native") && peek().kind == Tok::ident) native_tok = &take();
    const Token& op_tok = cur();
    if (op_tok.kind != Tok::ident) return fail(op_tok, "expected an op name but found ", describe(op_tok));
    auto op_opt = op_from_name(op_tok.text);
    if (!op_opt) return fail(op_tok, "unknown op '", op_tok.text, "'");
    const Op op = *op_opt;
    const OpInfo& info = op_info(op);
    take();

    std::vector<ValueId> inputs;
    Attrs attrs;
    std::optional<DenseLit> dense;
    std::string param_name;
    bool param_form = false;
    if (op == Op::Param && at(Tok::string)) {
      param_form = true;
      param_name = take().text;
    } else if (op == Op::Constant && at_ident("dense")) {
      RLX_ASSIGN_OR_RETURN(DenseLit d, parse_dense());
      dense = std::move(d);
    } else {
      RLX_TRY(expect(Tok::lparen, "'(' after the op name"));
      if (!accept(Tok::rparen)) {
        for (;;) {
          if (!at(Tok::value_name)) return fail(cur(), "expected an operand such as %x but found ", describe(cur()));
          const Token& t = take();
          auto it = defs_.find(t.text);
          if (it == defs_.end()) return fail(t, "use of undefined value %", t.text);
          inputs.push_back(it->second);
          if (accept(Tok::rparen)) break;
          RLX_TRY(expect(Tok::comma, "',' or ')' after an operand"));
        }
      }
      if (at(Tok::lbrace)) RLX_TRY(parse_attrs(op, attrs));
    }
    std::string loc;
    if (at_ident("loc")) {
      take();
      RLX_TRY(expect(Tok::lparen, "'(' after loc"));
      if (!at(Tok::string)) return fail(cur(), "expected a quoted node name in loc(...) but found ", describe(cur()));
      loc = take().text;
      RLX_TRY(expect(Tok::rparen, "')' to close loc(...)"));
    }
    std::vector<TensorType> declared;
    const Token* colon = nullptr;
    if (at(Tok::colon)) {
      colon = &take();
      for (;;) {
        RLX_ASSIGN_OR_RETURN(TensorType ty, parse_type());
        declared.push_back(std::move(ty));
        if (!accept(Tok::comma)) break;
      }
    }

    const std::string& first_name = names[0]->text;
    // The short forms: `param "name" : type` and `constant dense<...> [: type]`.
    if (param_form) {
      if (!colon) return fail(op_tok, "param \"", param_name, "\" needs its type: param \"name\" : f32[...]");
      if (declared.size() != 1) return fail(*colon, "param has one type, got ", declared.size());
    }
    if (dense) {
      std::optional<TensorType> ty = dense->type;
      if (colon && declared.size() != 1) return fail(*colon, "constant has one type, got ", declared.size());
      if (ty && colon && declared[0] != *ty)
        return fail(*colon, "%", first_name, " is declared ", format_type(declared[0]),
                    " but its dense literal is ", format_type(*ty));
      if (!ty && colon) ty = declared[0];
      if (!ty) return fail(op_tok, "constant needs a type: dense<f32[2], [...]> or constant dense<...> : f32[2]");
      RLX_ASSIGN_OR_RETURN(Tensor t, build_tensor(*dense, *ty));
      attrs.set("value", std::move(t));
    }
    if (!param_form) {
      const int n = static_cast<int>(inputs.size());
      if (n < info.min_inputs || (info.max_inputs >= 0 && n > info.max_inputs)) {
        std::string want = info.max_inputs < 0 ? cat("at least ", info.min_inputs)
                           : info.min_inputs == info.max_inputs ? cat(info.min_inputs)
                                                                : cat(info.min_inputs, " to ", info.max_inputs);
        return fail(op_tok, info.name, " takes ", want, " inputs, got ", n);
      }
      for (const AttrSpec& s : info.attrs)
        if (s.required && !attrs.has(s.name))
          return fail(op_tok, info.name, " needs attribute '", s.name, "'");
    }

    std::vector<TensorType> types;
    if (param_form) {
      types = declared;
    } else {
      std::vector<TensorType> in_types;
      for (ValueId v : inputs) in_types.push_back(g_.type(v));
      NodeSig sig{in_types, attrs, ""};
      auto inferred = infer_types(op, sig);
      if (!inferred)
        return fail_code(inferred.status().code(), op_tok, "cannot infer the type of %", first_name, " (",
                         info.name, "): ", strip_op_prefix(inferred.status().message(), op));
      if (colon) {
        if (declared.size() != inferred->size())
          return fail(*colon, info.name, " gives ", inferred->size(), " value(s) but ", declared.size(),
                      " type(s) are declared");
        if (!output_types_match(op, *inferred, declared))
          return fail(*colon, "%", first_name, " is declared ", join_types(declared), " but ", info.name,
                      " gives ", join_types(*inferred));
        types = declared;
      } else {
        types = std::move(*inferred);
      }
    }
    if (names.size() != types.size())
      return fail(*names[0], info.name, " gives ", types.size(), " value(s) but ", names.size(),
                  " name(s) are bound");
    for (size_t a = 0; a < names.size(); ++a) {
      if (defs_.count(names[a]->text)) return define(*names[a], 0);  // reports the redefinition
      for (size_t b = 0; b < a; ++b)
        if (names[b]->text == names[a]->text)
          return fail(*names[a], "%", names[a]->text, " is bound twice in one statement");
    }

    std::vector<ValueId> outs;
    if (param_form) {
      outs = {g_.add_param(param_name, types[0])};
      g_.nodes.back().name = loc;
    } else {
      outs = g_.add_node_typed(op, std::move(inputs), std::move(attrs), std::move(types), loc);
    }
    g_.nodes.back().native = native_tok != nullptr;
    for (size_t k = 0; k < outs.size(); ++k) RLX_TRY(define(*names[k], outs[k]));
    const int32_t node_index = static_cast<int32_t>(g_.nodes.size()) - 1;
    Status level = verify_node_level(g_, node_index);
    if (!level) {
      std::string msg = level.message();
      std::string label = g_.node_label(node_index) + ": ";
      if (msg.compare(0, label.size(), label) == 0) msg = msg.substr(label.size());
      return fail_code(level.code(), op_tok, "%", first_name, " (", info.name, ") at the primitive level: ", msg);
    }
    return Status::ok();
  }

  std::vector<Token> toks_;
  std::string_view source_;
  size_t pos_ = 0;
  Graph g_;
  std::unordered_map<std::string, ValueId> defs_;
  std::vector<const Token*> def_tok_;
  std::optional<std::vector<TensorType>> declared_outputs_;
};

}  // namespace
}  // namespace rlx::text

namespace rlx {

Expected<Graph> parse_graph(std::string_view text, std::string_view source_name) {
  try {
    auto toks = text::lex(text, source_name);
    if (!toks) return std::move(toks).take_status();
    return text::Parser(std::move(toks).value(), source_name).run();
  } catch (const std::bad_alloc&) {
    return error(ErrorCode::internal, source_name, ": out of memory while parsing");
  } catch (const std::exception& e) {
    return error(ErrorCode::internal, source_name, ": unexpected exception while parsing: ", e.what());
  }
}

Expected<Graph> parse_graph_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return error(ErrorCode::io_error, "cannot open '", path, "': ", std::strerror(errno));
  std::string data;
  char buf[1 << 16];
  for (;;) {
    size_t n = std::fread(buf, 1, sizeof buf, f);
    data.append(buf, n);
    if (n < sizeof buf) break;
  }
  bool failed = std::ferror(f) != 0;
  int err = errno;
  std::fclose(f);
  if (failed) return error(ErrorCode::io_error, "cannot read '", path, "': ", std::strerror(err));
  return parse_graph(data, path);
}

}  // namespace rlx
