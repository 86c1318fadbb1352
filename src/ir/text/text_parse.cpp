// The shared reading pieces of the text IR (see text_parse.h), moved out of the graph parser
// so that the kernel-level parser reads types, dense literals and attributes the same way.
#include "text_parse.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include "text_format.h"

namespace rlx::text {

Status TokenParser::expect(Tok k, std::string_view what) {
  if (accept(k)) return Status::ok();
  return fail(cur(), "expected ", what, " but found ", describe(cur()));
}
// ---- numbers ----

Expected<int64_t> TokenParser::int_of(const Token& t) {
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
Expected<T> TokenParser::float_of(const Token& t) {
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

bool TokenParser::at_number() const {
  return at(Tok::integer) || at(Tok::floating) || at_ident("inf") || at_ident("nan");
}

// ---- types ----

Expected<DType> TokenParser::parse_dtype_token() {
  const Token& t = cur();
  if (t.kind != Tok::ident) return fail(t, "expected a dtype but found ", describe(t));
  auto dt = parse_dtype(t.text);
  if (!dt) return fail(t, "unknown dtype '", t.text, "'");
  take();
  return *dt;
}

Expected<TensorType> TokenParser::parse_type() {
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

Status TokenParser::parse_element(DenseLit& d) {
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
Expected<std::vector<int64_t>> TokenParser::parse_list(DenseLit& d, int depth) {
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
Expected<DenseLit> TokenParser::parse_dense() {
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

Status TokenParser::store_element(Tensor& t, int64_t i, const Element& e) {
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

Expected<Tensor> TokenParser::build_tensor(const DenseLit& d, const TensorType& ty) {
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
  auto allocated = Tensor::allocate(ty.dtype, *sizes, "a constant");
  if (!allocated) return fail(*d.start, allocated.status().message());
  Tensor t = std::move(*allocated);
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

bool TokenParser::kind_accepted(AttrKind want, AttrKind got) {
  return want == got || (want == AttrKind::f64 && got == AttrKind::i64) ||
         (want == AttrKind::f64s && got == AttrKind::i64s) || (want == AttrKind::i64s && got == AttrKind::i64);
}

Expected<AttrValue> TokenParser::parse_attr_value(AttrKind want) {
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

Status TokenParser::parse_attrs(Op op, Attrs& attrs) {
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

template Expected<float> TokenParser::float_of<float>(const Token& t);
template Expected<double> TokenParser::float_of<double>(const Token& t);

}  // namespace rlx::text
