// The text form of the kernel level: KernelProgram::to_text() and parse_kernel_program().
// docs/ir.md ("The kernel level") is the syntax reference. The printer writes every field of
// a KernelProgram and never fails or reads out of bounds, even on a program that does not
// verify; the parser reads the printed form back with the graph text's lexer and shared
// reading pieces (types, dense literals, attributes), so both levels spell things alike.
#include <charconv>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "ir/text/lexer.h"
#include "ir/text/text_format.h"
#include "ir/text/text_parse.h"
#include "rlx/kernel_ir.h"

namespace rlx::kir {
namespace {

using text::concat;
using text::format_f64;
using text::quote;

// ---- printing ----

// A reference such as b3, e12, i0: the prefix and the id, or a bare negative number for an
// id that is unset or invalid (only a program that does not verify has those in use).
std::string ref(char prefix, int64_t id) {
  return id >= 0 ? concat(std::string(1, prefix), std::to_string(id)) : std::to_string(id);
}

template <class T, class F>
std::string list(const std::vector<T>& xs, F f, const char* open = "[", const char* close = "]") {
  std::string r = open;
  for (size_t i = 0; i < xs.size(); ++i) r += concat(i ? ", " : "", f(xs[i]));
  return r + close;
}

std::string ints(const std::vector<int>& xs) {
  return list(xs, [](int x) { return std::to_string(x); });
}

std::string format_attrs(const Attrs& attrs) {
  std::string r = "{";
  bool first = true;
  for (const auto& [name, value] : attrs.items()) {
    r += concat(first ? "" : ", ", text::is_identifier(name) ? name : quote(name), " = ",
                text::format_attr_value(value));
    first = false;
  }
  return r + "}";
}

bool is_positive_zero(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits == 0;
}

// The fields an expression kind's own form prints; the rest print in `{...}` when not at
// their defaults, so that every Expr round-trips whatever its kind.
struct FormFields {
  bool op = false, a = false, b = false, c = false, ival = false, ival2 = false, fval = false, fval2 = false,
       buffer = false, loop = false, loops = false;
};

FormFields form_fields(ExprKind k) {
  FormFields f;
  switch (k) {
    case ExprKind::loop_var: f.loop = true; break;
    case ExprKind::iconst: f.ival = true; break;
    case ExprKind::fconst: f.fval = true; break;
    case ExprKind::load: f.buffer = f.a = true; break;
    case ExprKind::unary: f.op = f.a = true; break;
    case ExprKind::binary: f.op = f.a = f.b = true; break;
    case ExprKind::select: f.a = f.b = f.c = true; break;
    case ExprKind::cast: f.a = true; break;
    case ExprKind::idiv:
    case ExprKind::imod: f.a = f.b = true; break;
    case ExprKind::clamp: f.a = f.ival = f.ival2 = true; break;
    case ExprKind::reduce: f.op = f.a = f.loops = true; break;
    case ExprKind::random: f.op = f.a = f.ival = f.fval = f.fval2 = true; break;
  }
  return f;
}

std::string loop_refs(const std::vector<int>& loops) {
  return list(loops, [](int l) { return ref('i', l); });
}

std::string random_dist(Op op) {
  if (op == Op::Add) return "uniform";
  if (op == Op::Mul) return "normal";
  return std::string(op_name(op));
}

std::string expr_text(const Expr& e) {
  std::string r;
  const std::string ea = ref('e', e.a), eb = ref('e', e.b), ec = ref('e', e.c);
  switch (e.kind) {
    case ExprKind::loop_var: r = concat("var ", ref('i', e.loop)); break;
    case ExprKind::iconst: r = concat("iconst ", std::to_string(e.ival)); break;
    case ExprKind::fconst: r = concat("fconst ", format_f64(e.fval)); break;
    case ExprKind::load: r = concat("load ", ref('a', e.buffer), "[", ea, "]"); break;
    case ExprKind::unary: r = concat("unary ", op_name(e.op), "(", ea, ")"); break;
    case ExprKind::binary: r = concat("binary ", op_name(e.op), "(", ea, ", ", eb, ")"); break;
    case ExprKind::select: r = concat("select(", ea, ", ", eb, ", ", ec, ")"); break;
    case ExprKind::cast: r = concat("cast(", ea, ")"); break;
    case ExprKind::idiv: r = concat("idiv(", ea, ", ", eb, ")"); break;
    case ExprKind::imod: r = concat("imod(", ea, ", ", eb, ")"); break;
    case ExprKind::clamp:
      r = concat("clamp(", ea, ", ", std::to_string(e.ival), ", ", std::to_string(e.ival2), ")");
      break;
    case ExprKind::reduce: r = concat("reduce ", op_name(e.op), "(", ea, ") over ", loop_refs(e.loops)); break;
    case ExprKind::random:
      r = concat("random ", random_dist(e.op), "(", ea, ") seed ", std::to_string(e.ival), " params [",
                 format_f64(e.fval), ", ", format_f64(e.fval2), "]");
      break;
    default: r = concat("<bad kind ", std::to_string(static_cast<int>(e.kind)), ">"); break;
  }
  const FormFields f = form_fields(e.kind);
  std::vector<std::string> extra;
  if (!f.op && e.op != Op::Add) extra.push_back(concat("op = ", op_name(e.op)));
  if (!f.a && e.a != -1) extra.push_back(concat("a = ", ea));
  if (!f.b && e.b != -1) extra.push_back(concat("b = ", eb));
  if (!f.c && e.c != -1) extra.push_back(concat("c = ", ec));
  if (!f.ival && e.ival != 0) extra.push_back(concat("ival = ", std::to_string(e.ival)));
  if (!f.ival2 && e.ival2 != 0) extra.push_back(concat("ival2 = ", std::to_string(e.ival2)));
  if (!f.fval && !is_positive_zero(e.fval)) extra.push_back(concat("fval = ", format_f64(e.fval)));
  if (!f.fval2 && !is_positive_zero(e.fval2)) extra.push_back(concat("fval2 = ", format_f64(e.fval2)));
  if (!f.buffer && e.buffer != -1) extra.push_back(concat("buffer = ", ref('a', e.buffer)));
  if (!f.loop && e.loop != -1) extra.push_back(concat("loop = ", ref('i', e.loop)));
  if (!f.loops && !e.loops.empty()) extra.push_back(concat("loops = ", loop_refs(e.loops)));
  if (!extra.empty()) r += concat(" ", list(extra, [](const std::string& s) { return s; }, "{", "}"));
  return concat(r, " : ", dtype_name(e.dtype));
}

std::string type_text(DType dt, const Sizes& sizes) { return concat(dtype_name(dt), sizes_to_string(sizes)); }

class Printer {
 public:
  explicit Printer(const KernelProgram& p, int64_t max_listed = -1) : p_(p), max_listed_(max_listed) {}

  std::string run() {
    r_ = "kernels {\n";
    for (size_t i = 0; i < p_.buffers.size(); ++i) buffer(i);
    r_ += concat("  inputs ", list(p_.inputs, [](int b) { return ref('b', b); }, "(", ")"), "\n");
    r_ += concat("  outputs ", list(p_.outputs, [](int b) { return ref('b', b); }, "(", ")"), "\n");
    // Kernels in the order the steps first run them (a native's epilogue right after it),
    // then any that no step runs.
    native_done_.assign(p_.natives.size(), false);
    generated_done_.assign(p_.generated.size(), false);
    for (const Step& s : p_.steps) {
      if (s.native && s.index >= 0 && static_cast<size_t>(s.index) < p_.natives.size()) native(s.index);
      if (!s.native && s.index >= 0 && static_cast<size_t>(s.index) < p_.generated.size()) generated(s.index);
    }
    for (size_t i = 0; i < p_.natives.size(); ++i) native(i);
    for (size_t i = 0; i < p_.generated.size(); ++i) generated(i);
    for (const Step& s : p_.steps) r_ += concat("  step ", ref(s.native ? 'n' : 'k', s.index), "\n");
    for (const auto& [out, in] : p_.donations)
      r_ += concat("  donate input ", std::to_string(in), " -> output ", std::to_string(out), "\n");
    r_ += concat("  arena ", std::to_string(p_.arena_bytes), " bytes\n}\n");
    return std::move(r_);
  }

 private:
  void buffer(size_t i) {
    const Buffer& b = p_.buffers[i];
    r_ += concat("  buffer ", ref('b', static_cast<int64_t>(i)), " ", buffer_kind_name(b.kind));
    if (b.io_index != -1) r_ += concat(" ", std::to_string(b.io_index));
    r_ += concat(" ", type_text(b.dtype, b.sizes));
    if (!b.name.empty()) r_ += concat(" ", quote(b.name));
    if (b.arena_offset != -1) r_ += concat(" at ", std::to_string(b.arena_offset));
    if (b.alias_of != -1) r_ += concat(" view ", ref('b', b.alias_of));
    if (b.data.defined() && max_listed_ >= 0 && b.data.numel() > max_listed_) {
      r_ += concat(" dense<", std::to_string(b.data.numel()), " values not listed>");
    } else if (b.data.defined()) {
      // the buffer's own type is implied; a tensor of another type says its type
      bool same = b.data.dtype() == b.dtype && b.data.sizes() == b.sizes;
      r_ += concat(" dense<", same ? std::string() : concat(text::format_type(b.data.type()), ", "),
                   text::format_dense_payload(b.data), ">");
    }
    r_ += "\n";
  }

  void name_clause(const std::string& name, const std::string& label) {
    if (name != label) r_ += concat(" name ", quote(name));
  }

  void native(size_t i) {
    if (native_done_[i]) return;
    native_done_[i] = true;
    const NativeKernel& n = p_.natives[i];
    const std::string label = ref('n', static_cast<int64_t>(i));
    r_ += concat("  native ", label);
    name_clause(n.name, label);
    auto bufs = [](const std::vector<int>& xs) { return list(xs, [](int b) { return ref('b', b); }, "(", ")"); };
    auto types = [](const std::vector<TensorType>& ts) { return list(ts, text::format_type, "(", ")"); };
    r_ += concat(" ", op_name(n.op), bufs(n.inputs), " -> ", bufs(n.outputs));
    if (!n.attrs.empty()) r_ += concat(" ", format_attrs(n.attrs));
    r_ += concat(" : ", types(n.input_types), " -> ", types(n.output_types));
    if (!n.how.empty()) r_ += concat(" how ", quote(n.how));
    if (n.epilogue != -1) r_ += concat(" epilogue ", ref('k', n.epilogue));
    if (!n.origins.empty()) r_ += concat(" origins ", ints(n.origins));
    r_ += "\n";
    if (n.epilogue >= 0 && static_cast<size_t>(n.epilogue) < p_.generated.size()) generated(n.epilogue);
  }

  void generated(size_t i) {
    if (generated_done_[i]) return;
    generated_done_[i] = true;
    const GeneratedKernel& k = p_.generated[i];
    const std::string label = ref('k', static_cast<int64_t>(i));
    r_ += concat("  generated ", label);
    name_clause(k.name, label);
    const size_t domain = std::min(static_cast<size_t>(std::max(k.domain_rank, 0)), k.loops.size());
    r_ += " domain [";
    for (size_t l = 0; l < domain; ++l) r_ += concat(l ? ", " : "", std::to_string(k.loops[l].extent));
    r_ += "] args (";
    for (size_t a = 0; a < k.args.size(); ++a)
      r_ += concat(a ? ", " : "", ref('a', static_cast<int64_t>(a)), " = ", ref('b', k.args[a]));
    r_ += ")";
    if (!k.origins.empty()) r_ += concat(" origins ", ints(k.origins));
    if (k.serial) r_ += " serial";
    if (k.skip_if_aliased) r_ += " skip_if_aliased";
    r_ += " {\n";
    for (size_t l = domain; l < k.loops.size(); ++l)
      r_ += concat("    loop ", ref('i', static_cast<int64_t>(l)), " < ", std::to_string(k.loops[l].extent), "\n");
    for (size_t e = 0; e < k.exprs.size(); ++e)
      r_ += concat("    ", ref('e', static_cast<int64_t>(e)), " = ", expr_text(k.exprs[e]), "\n");
    for (const Store& s : k.stores)
      r_ += concat("    ", s.accumulate ? "store_add " : "store ", ref('a', s.buffer), "[", ref('e', s.index), "] = ",
                   ref('e', s.value), "\n");
    r_ += "  }\n";
  }

  const KernelProgram& p_;
  int64_t max_listed_ = -1;  // data of more values is summarised (listing()); -1 prints all
  std::string r_;
  std::vector<bool> native_done_, generated_done_;
};

// ---- parsing ----

using text::Tok;
using text::Token;

std::optional<BufferKind> buffer_kind_from_name(std::string_view s) {
  for (BufferKind k : {BufferKind::input, BufferKind::output, BufferKind::weight, BufferKind::constant,
                       BufferKind::intermediate})
    if (buffer_kind_name(k) == s) return k;
  return std::nullopt;
}

std::optional<ExprKind> expr_kind_from_name(std::string_view s) {
  for (int k = 0; k <= static_cast<int>(ExprKind::random); ++k)
    if (expr_kind_name(static_cast<ExprKind>(k)) == s) return static_cast<ExprKind>(k);
  return std::nullopt;
}

// The id in a label such as `b12` (prefix 'b'): digits without a leading zero, at most
// nine of them (ids are ints).
std::optional<int> label_id(const Token& t, char prefix) {
  if (t.kind != Tok::ident || t.text.size() < 2 || t.text[0] != prefix) return std::nullopt;
  std::string_view digits = std::string_view(t.text).substr(1);
  if (digits.size() > 9 || (digits.size() > 1 && digits[0] == '0')) return std::nullopt;
  int v = 0;
  auto r = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (r.ec != std::errc() || r.ptr != digits.data() + digits.size()) return std::nullopt;
  return v;
}

const char* ref_kind_name(char prefix) {
  switch (prefix) {
    case 'b': return "a buffer such as b0";
    case 'a': return "a kernel argument such as a0";
    case 'e': return "an expression such as e0";
    case 'i': return "a loop such as i0";
    case 'k': return "a generated kernel such as k0";
    case 'n': return "a native kernel such as n0";
  }
  return "a reference";
}

class KernelParser : public text::TokenParser {
 public:
  using TokenParser::TokenParser;

  Expected<KernelProgram> run() {
    if (!at_ident("kernels")) return fail(cur(), "expected 'kernels' but found ", describe(cur()));
    take();
    RLX_TRY(expect(Tok::lbrace, "'{' after 'kernels'"));
    for (;;) {
      if (accept(Tok::rbrace)) break;
      RLX_TRY(statement());
    }
    if (!at(Tok::eof)) return fail(cur(), "unexpected ", describe(cur()), " after the end of the kernel program");
    RLX_TRY(finish());
    return std::move(p_);
  }

 private:
  // Sections in the order they must appear; the statements of one section may repeat
  // (except inputs, outputs and arena, which appear at most once).
  enum Section { s_buffers, s_inputs, s_outputs, s_kernels, s_steps, s_donations, s_arena };

  static const char* section_word(Section s) {
    switch (s) {
      case s_buffers: return "buffer";
      case s_inputs: return "inputs";
      case s_outputs: return "outputs";
      case s_kernels: return "native/generated";
      case s_steps: return "step";
      case s_donations: return "donate";
      case s_arena: return "arena";
    }
    return "?";
  }

  Status enter(const Token& kw, Section s, bool once) {
    if (s < section_) return fail(kw, "'", kw.text, "' must come before '", section_word(section_), "'");
    if (once && s == section_ && seen_once_) return fail(kw, "'", kw.text, "' is given twice");
    if (s != section_) seen_once_ = false;
    section_ = s;
    if (once) seen_once_ = true;
    return Status::ok();
  }

  Status statement() {
    const Token& kw = cur();
    if (kw.kind != Tok::ident)
      return fail(kw, "expected a statement (buffer, inputs, outputs, native, generated, step, donate, arena) but found ",
                  describe(kw));
    if (kw.text == "buffer") {
      RLX_TRY(enter(kw, s_buffers, false));
      return buffer();
    }
    if (kw.text == "inputs") {
      RLX_TRY(enter(kw, s_inputs, true));
      return io_list(p_.inputs);
    }
    if (kw.text == "outputs") {
      RLX_TRY(enter(kw, s_outputs, true));
      return io_list(p_.outputs);
    }
    if (kw.text == "native") {
      RLX_TRY(enter(kw, s_kernels, false));
      return native();
    }
    if (kw.text == "generated") {
      RLX_TRY(enter(kw, s_kernels, false));
      return generated();
    }
    if (kw.text == "step") {
      RLX_TRY(enter(kw, s_steps, false));
      return step();
    }
    if (kw.text == "donate") {
      RLX_TRY(enter(kw, s_donations, false));
      return donate();
    }
    if (kw.text == "arena") {
      RLX_TRY(enter(kw, s_arena, true));
      return arena();
    }
    return fail(kw, "unknown statement '", kw.text,
                "' (expected buffer, inputs, outputs, native, generated, step, donate or arena)");
  }

  // ---- references ----

  // `<prefix><id>` with id < limit, or a negative integer (an unset id).
  Expected<int> parse_ref(char prefix, int64_t limit, const char* undefined_what) {
    const Token& t = cur();
    if (t.kind == Tok::integer && !t.text.empty() && t.text[0] == '-') {
      RLX_ASSIGN_OR_RETURN(int64_t v, int_of(t));
      if (v < std::numeric_limits<int>::min()) return fail(t, "id ", v, " is out of range");
      take();
      return static_cast<int>(v);
    }
    auto id = label_id(t, prefix);
    if (!id) return fail(t, "expected ", ref_kind_name(prefix), " but found ", describe(t));
    if (*id >= limit) return fail(t, "use of undefined ", undefined_what, " ", t.text);
    take();
    return *id;
  }

  Expected<int> buffer_ref() { return parse_ref('b', static_cast<int64_t>(p_.buffers.size()), "buffer"); }

  Expected<std::vector<int>> buffer_list() {
    RLX_TRY(expect(Tok::lparen, "'(' to open a buffer list"));
    std::vector<int> r;
    if (accept(Tok::rparen)) return r;
    for (;;) {
      RLX_ASSIGN_OR_RETURN(int b, buffer_ref());
      r.push_back(b);
      if (accept(Tok::rparen)) return r;
      RLX_TRY(expect(Tok::comma, "',' or ')' in the buffer list"));
    }
  }

  Expected<int> int32_of(const Token& t) {
    RLX_ASSIGN_OR_RETURN(int64_t v, int_of(t));
    if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
      return fail(t, "integer ", v, " is out of range for an int");
    return static_cast<int>(v);
  }

  Expected<int64_t> integer(std::string_view what) {
    if (!at(Tok::integer)) return fail(cur(), "expected ", what, " but found ", describe(cur()));
    RLX_ASSIGN_OR_RETURN(int64_t v, int_of(cur()));
    take();
    return v;
  }

  Expected<std::vector<int>> int_list(std::string_view what) {
    RLX_TRY(expect(Tok::lbracket, "'[' to open the list"));
    std::vector<int> r;
    if (accept(Tok::rbracket)) return r;
    for (;;) {
      if (!at(Tok::integer)) return fail(cur(), "expected ", what, " but found ", describe(cur()));
      RLX_ASSIGN_OR_RETURN(int v, int32_of(cur()));
      take();
      r.push_back(v);
      if (accept(Tok::rbracket)) return r;
      RLX_TRY(expect(Tok::comma, "',' or ']' in the list"));
    }
  }

  // `name "text"` when present, else the label itself.
  Expected<std::string> name_clause(const Token& label) {
    if (!at_ident("name")) return label.text;
    take();
    if (!at(Tok::string)) return fail(cur(), "expected a quoted name after 'name' but found ", describe(cur()));
    return take().text;
  }

  // ---- buffers and program lists ----

  Status buffer() {
    take();  // buffer
    const Token& label = cur();
    auto id = label_id(label, 'b');
    if (!id || *id != static_cast<int>(p_.buffers.size()))
      return fail(label, "expected b", p_.buffers.size(), " (buffers are numbered in order) but found ", describe(label));
    take();
    Buffer b;
    const Token& kind_tok = cur();
    auto kind = kind_tok.kind == Tok::ident ? buffer_kind_from_name(kind_tok.text) : std::nullopt;
    if (!kind)
      return fail(kind_tok, "expected a buffer kind (input, output, weight, constant, temp) but found ",
                  describe(kind_tok));
    take();
    b.kind = *kind;
    if (at(Tok::integer)) {
      RLX_ASSIGN_OR_RETURN(b.io_index, int32_of(cur()));
      take();
    }
    const Token& type_tok = cur();
    RLX_ASSIGN_OR_RETURN(TensorType ty, parse_type());
    auto sizes = static_sizes(ty.shape, "a buffer's type");
    if (!sizes) return fail(type_tok, sizes.status().message());
    auto n = checked_numel(*sizes);
    // bytes() must not overflow: the verifier and the runtime do arithmetic with it
    if (!n || *n > std::numeric_limits<int64_t>::max() / 8)
      return fail(type_tok, "buffer ", label.text, " of type ", text::format_type(ty), " is too large");
    b.dtype = ty.dtype;
    b.sizes = std::move(*sizes);
    if (at(Tok::string)) b.name = take().text;
    if (at_ident("at")) {
      take();
      const Token& off = cur();
      RLX_ASSIGN_OR_RETURN(b.arena_offset, integer("an arena offset"));
      if (b.arena_offset < -1) return fail(off, "negative arena offset ", b.arena_offset);
    }
    if (at_ident("view")) {
      take();
      // a view may name a later buffer: checked once all buffers are defined
      const Token& t = cur();
      RLX_ASSIGN_OR_RETURN(b.alias_of, parse_ref('b', std::numeric_limits<int>::max(), "buffer"));
      if (b.alias_of >= 0) view_refs_.push_back(&t);
    }
    if (at_ident("dense")) {
      RLX_ASSIGN_OR_RETURN(text::DenseLit d, parse_dense());
      TensorType data_type = d.type ? *d.type : TensorType{b.dtype, to_shape(b.sizes)};
      RLX_ASSIGN_OR_RETURN(b.data, build_tensor(d, data_type));
    }
    p_.buffers.push_back(std::move(b));
    return Status::ok();
  }

  Status io_list(std::vector<int>& out) {
    take();
    RLX_ASSIGN_OR_RETURN(out, buffer_list());
    return Status::ok();
  }

  // ---- kernels ----

  // Places a kernel defined under `label` (`n3`, `k0`): any order, each id once.
  template <class K>
  Status place(std::vector<std::optional<K>>& slots, std::vector<const Token*>& toks, const Token& label, int id,
               K kernel) {
    if (static_cast<size_t>(id) >= slots.size()) {
      slots.resize(id + 1);
      toks.resize(id + 1, nullptr);
    }
    if (slots[id]) {
      const Token& first = *toks[id];
      return fail(label, label.text, " is defined twice (first at ", first.line, ":", first.col, ")");
    }
    slots[id] = std::move(kernel);
    toks[id] = &label;
    return Status::ok();
  }

  Expected<int> kernel_label(char prefix) {
    const Token& label = cur();
    auto id = label_id(label, prefix);
    if (!id) return fail(label, "expected ", ref_kind_name(prefix), " but found ", describe(label));
    // every id below this one must be defined too, so a huge id is an error before it costs memory
    if (*id > static_cast<int>(toks_.size()))
      return fail(label, "kernel id ", label.text, " is out of range (this text cannot define that many kernels)");
    take();
    return *id;
  }

  Expected<std::vector<TensorType>> type_list() {
    RLX_TRY(expect(Tok::lparen, "'(' to open a type list"));
    std::vector<TensorType> r;
    if (accept(Tok::rparen)) return r;
    for (;;) {
      RLX_ASSIGN_OR_RETURN(TensorType t, parse_type());
      r.push_back(std::move(t));
      if (accept(Tok::rparen)) return r;
      RLX_TRY(expect(Tok::comma, "',' or ')' in the type list"));
    }
  }

  Status native() {
    take();  // native
    const Token& label = cur();
    RLX_ASSIGN_OR_RETURN(int id, kernel_label('n'));
    NativeKernel n;
    RLX_ASSIGN_OR_RETURN(n.name, name_clause(label));
    const Token& op_tok = cur();
    if (op_tok.kind != Tok::ident) return fail(op_tok, "expected an op name but found ", describe(op_tok));
    auto op = op_from_name(op_tok.text);
    if (!op) return fail(op_tok, "unknown op '", op_tok.text, "'");
    take();
    n.op = *op;
    RLX_ASSIGN_OR_RETURN(n.inputs, buffer_list());
    RLX_TRY(expect(Tok::arrow, "'->' before the output buffers"));
    RLX_ASSIGN_OR_RETURN(n.outputs, buffer_list());
    if (at(Tok::lbrace)) RLX_TRY(parse_attrs(n.op, n.attrs));
    RLX_TRY(expect(Tok::colon, "':' before the native kernel's types"));
    RLX_ASSIGN_OR_RETURN(n.input_types, type_list());
    RLX_TRY(expect(Tok::arrow, "'->' before the output types"));
    RLX_ASSIGN_OR_RETURN(n.output_types, type_list());
    if (at_ident("how")) {
      take();
      if (!at(Tok::string)) return fail(cur(), "expected a quoted description after 'how' but found ", describe(cur()));
      n.how = take().text;
    }
    if (at_ident("epilogue")) {
      take();
      const Token& ep = cur();
      if (ep.kind == Tok::integer) {
        RLX_ASSIGN_OR_RETURN(n.epilogue, parse_ref('k', 0, "generated kernel"));
      } else {
        // checked once every kernel is defined: the epilogue is printed after its native
        RLX_ASSIGN_OR_RETURN(n.epilogue, kernel_label('k'));
        epilogue_refs_.push_back(&ep);
      }
    }
    if (at_ident("origins")) {
      take();
      RLX_ASSIGN_OR_RETURN(n.origins, int_list("a node index"));
    }
    return place(natives_, native_toks_, label, id, std::move(n));
  }

  Status generated() {
    take();  // generated
    const Token& label = cur();
    RLX_ASSIGN_OR_RETURN(int id, kernel_label('k'));
    GeneratedKernel k;
    RLX_ASSIGN_OR_RETURN(k.name, name_clause(label));
    if (!at_ident("domain")) return fail(cur(), "expected 'domain' but found ", describe(cur()));
    take();
    RLX_TRY(expect(Tok::lbracket, "'[' to open the domain"));
    if (!accept(Tok::rbracket)) {
      for (;;) {
        RLX_ASSIGN_OR_RETURN(int64_t extent, integer("a loop extent"));
        k.loops.push_back(Loop{extent});
        if (accept(Tok::rbracket)) break;
        RLX_TRY(expect(Tok::comma, "',' or ']' in the domain"));
      }
    }
    k.domain_rank = static_cast<int>(k.loops.size());
    if (!at_ident("args")) return fail(cur(), "expected 'args' but found ", describe(cur()));
    take();
    RLX_TRY(expect(Tok::lparen, "'(' to open the arguments"));
    if (!accept(Tok::rparen)) {
      for (;;) {
        const Token& arg = cur();
        auto a = label_id(arg, 'a');
        if (!a || *a != static_cast<int>(k.args.size()))
          return fail(arg, "expected a", k.args.size(), " (arguments are numbered in order) but found ", describe(arg));
        take();
        RLX_TRY(expect(Tok::equal, "'=' after the argument"));
        RLX_ASSIGN_OR_RETURN(int b, buffer_ref());
        k.args.push_back(b);
        if (accept(Tok::rparen)) break;
        RLX_TRY(expect(Tok::comma, "',' or ')' in the arguments"));
      }
    }
    if (at_ident("origins")) {
      take();
      RLX_ASSIGN_OR_RETURN(k.origins, int_list("a node index"));
    }
    if (at_ident("serial")) {
      take();
      k.serial = true;
    }
    if (at_ident("skip_if_aliased")) {
      take();
      k.skip_if_aliased = true;
    }
    RLX_TRY(expect(Tok::lbrace, "'{' to open the kernel body"));
    while (!accept(Tok::rbrace)) RLX_TRY(kernel_statement(k));
    return place(generated_, generated_toks_, label, id, std::move(k));
  }

  Status kernel_statement(GeneratedKernel& k) {
    const Token& t = cur();
    if (at_ident("loop")) {
      take();
      const Token& label = cur();
      auto l = label_id(label, 'i');
      if (!l || *l != static_cast<int>(k.loops.size()))
        return fail(label, "expected i", k.loops.size(), " (loops are numbered in order, after the domain) but found ",
                    describe(label));
      take();
      RLX_TRY(expect(Tok::langle, "'<' after the loop"));
      RLX_ASSIGN_OR_RETURN(int64_t extent, integer("a loop extent"));
      k.loops.push_back(Loop{extent});
      return Status::ok();
    }
    if (at_ident("store") || at_ident("store_add")) {
      Store s;
      s.accumulate = take().text == "store_add";
      RLX_ASSIGN_OR_RETURN(s.buffer, arg_ref(k));
      RLX_TRY(expect(Tok::lbracket, "'[' before the store index"));
      RLX_ASSIGN_OR_RETURN(s.index, expr_ref(k));
      RLX_TRY(expect(Tok::rbracket, "']' after the store index"));
      RLX_TRY(expect(Tok::equal, "'=' before the stored value"));
      RLX_ASSIGN_OR_RETURN(s.value, expr_ref(k));
      k.stores.push_back(s);
      return Status::ok();
    }
    if (label_id(t, 'e')) return expr(k);
    return fail(t, "expected a kernel statement (loop, eN = ..., store, store_add or '}') but found ", describe(t));
  }

  Expected<int> expr_ref(const GeneratedKernel& k) {
    return parse_ref('e', static_cast<int64_t>(k.exprs.size()), "expression");
  }
  Expected<int> loop_ref(const GeneratedKernel& k) {
    return parse_ref('i', static_cast<int64_t>(k.loops.size()), "loop");
  }
  Expected<int> arg_ref(const GeneratedKernel& k) {
    return parse_ref('a', static_cast<int64_t>(k.args.size()), "argument");
  }

  Expected<std::vector<int>> loop_list(const GeneratedKernel& k) {
    RLX_TRY(expect(Tok::lbracket, "'[' to open the loop list"));
    std::vector<int> r;
    if (accept(Tok::rbracket)) return r;
    for (;;) {
      RLX_ASSIGN_OR_RETURN(int l, loop_ref(k));
      r.push_back(l);
      if (accept(Tok::rbracket)) return r;
      RLX_TRY(expect(Tok::comma, "',' or ']' in the loop list"));
    }
  }

  Expected<Op> op_word(std::string_view what) {
    const Token& t = cur();
    if (t.kind != Tok::ident) return fail(t, "expected ", what, " but found ", describe(t));
    auto op = op_from_name(t.text);
    if (!op) return fail(t, "unknown op '", t.text, "'");
    take();
    return *op;
  }

  // (eA[, eB[, eC]]) for `count` operands.
  Status operands(const GeneratedKernel& k, std::initializer_list<int*> outs) {
    RLX_TRY(expect(Tok::lparen, "'(' before the operands"));
    bool first = true;
    for (int* o : outs) {
      if (!first) RLX_TRY(expect(Tok::comma, "',' between operands"));
      first = false;
      RLX_ASSIGN_OR_RETURN(*o, expr_ref(k));
    }
    return expect(Tok::rparen, "')' after the operands");
  }

  Expected<double> number(std::string_view what) {
    if (!at_number()) return fail(cur(), "expected ", what, " but found ", describe(cur()));
    RLX_ASSIGN_OR_RETURN(double v, float_of<double>(cur()));
    take();
    return v;
  }

  Status expr(GeneratedKernel& k) {
    const Token& label = cur();
    if (*label_id(label, 'e') != static_cast<int>(k.exprs.size()))
      return fail(label, "expected e", k.exprs.size(), " (expressions are numbered in order) but found ",
                  describe(label));
    take();
    RLX_TRY(expect(Tok::equal, "'=' after the expression name"));
    const Token& kind_tok = cur();
    auto kind = kind_tok.kind == Tok::ident ? expr_kind_from_name(kind_tok.text) : std::nullopt;
    if (!kind)
      return fail(kind_tok,
                  "expected an expression kind (var, iconst, fconst, load, unary, binary, select, cast, idiv, imod, "
                  "clamp, reduce, random) but found ",
                  describe(kind_tok));
    take();
    Expr e{*kind, DType::f32};
    switch (e.kind) {
      case ExprKind::loop_var: {
        RLX_ASSIGN_OR_RETURN(e.loop, loop_ref(k));
        break;
      }
      case ExprKind::iconst: {
        RLX_ASSIGN_OR_RETURN(e.ival, integer("an integer"));
        break;
      }
      case ExprKind::fconst: {
        RLX_ASSIGN_OR_RETURN(e.fval, number("a number"));
        break;
      }
      case ExprKind::load: {
        RLX_ASSIGN_OR_RETURN(e.buffer, arg_ref(k));
        RLX_TRY(expect(Tok::lbracket, "'[' before the load index"));
        RLX_ASSIGN_OR_RETURN(e.a, expr_ref(k));
        RLX_TRY(expect(Tok::rbracket, "']' after the load index"));
        break;
      }
      case ExprKind::unary: {
        RLX_ASSIGN_OR_RETURN(e.op, op_word("an op name"));
        RLX_TRY(operands(k, {&e.a}));
        break;
      }
      case ExprKind::binary: {
        RLX_ASSIGN_OR_RETURN(e.op, op_word("an op name"));
        RLX_TRY(operands(k, {&e.a, &e.b}));
        break;
      }
      case ExprKind::select: RLX_TRY(operands(k, {&e.a, &e.b, &e.c})); break;
      case ExprKind::cast: RLX_TRY(operands(k, {&e.a})); break;
      case ExprKind::idiv:
      case ExprKind::imod: RLX_TRY(operands(k, {&e.a, &e.b})); break;
      case ExprKind::clamp: {
        RLX_TRY(expect(Tok::lparen, "'(' before the operands"));
        RLX_ASSIGN_OR_RETURN(e.a, expr_ref(k));
        RLX_TRY(expect(Tok::comma, "',' before the lower bound"));
        RLX_ASSIGN_OR_RETURN(e.ival, integer("the lower bound"));
        RLX_TRY(expect(Tok::comma, "',' before the upper bound"));
        RLX_ASSIGN_OR_RETURN(e.ival2, integer("the upper bound"));
        RLX_TRY(expect(Tok::rparen, "')' after the bounds"));
        break;
      }
      case ExprKind::reduce: {
        RLX_ASSIGN_OR_RETURN(e.op, op_word("a reduction op"));
        RLX_TRY(operands(k, {&e.a}));
        if (!at_ident("over")) return fail(cur(), "expected 'over' after the reduced value but found ", describe(cur()));
        take();
        RLX_ASSIGN_OR_RETURN(e.loops, loop_list(k));
        break;
      }
      case ExprKind::random: {
        if (at_ident("uniform") || at_ident("normal")) {
          e.op = take().text == "uniform" ? Op::Add : Op::Mul;
        } else {
          RLX_ASSIGN_OR_RETURN(e.op, op_word("a distribution (uniform or normal)"));
        }
        RLX_TRY(operands(k, {&e.a}));
        if (!at_ident("seed")) return fail(cur(), "expected 'seed' but found ", describe(cur()));
        take();
        RLX_ASSIGN_OR_RETURN(e.ival, integer("the seed"));
        if (!at_ident("params")) return fail(cur(), "expected 'params' but found ", describe(cur()));
        take();
        RLX_TRY(expect(Tok::lbracket, "'[' before the distribution parameters"));
        RLX_ASSIGN_OR_RETURN(e.fval, number("a number"));
        RLX_TRY(expect(Tok::comma, "',' between the distribution parameters"));
        RLX_ASSIGN_OR_RETURN(e.fval2, number("a number"));
        RLX_TRY(expect(Tok::rbracket, "']' after the distribution parameters"));
        break;
      }
    }
    if (at(Tok::lbrace)) RLX_TRY(extra_fields(k, e));
    RLX_TRY(expect(Tok::colon, "':' before the expression's dtype"));
    RLX_ASSIGN_OR_RETURN(e.dtype, parse_dtype_token());
    k.exprs.push_back(std::move(e));
    return Status::ok();
  }

  // {field = value, ...}: the fields an expression's form does not print.
  Status extra_fields(const GeneratedKernel& k, Expr& e) {
    take();  // {
    const FormFields form = form_fields(e.kind);
    std::vector<std::string> seen;
    for (;;) {
      const Token& name = cur();
      if (name.kind != Tok::ident) return fail(name, "expected a field name but found ", describe(name));
      const std::string& f = name.text;
      bool in_form = (f == "op" && form.op) || (f == "a" && form.a) || (f == "b" && form.b) || (f == "c" && form.c) ||
                     (f == "ival" && form.ival) || (f == "ival2" && form.ival2) || (f == "fval" && form.fval) ||
                     (f == "fval2" && form.fval2) || (f == "buffer" && form.buffer) || (f == "loop" && form.loop) ||
                     (f == "loops" && form.loops);
      if (in_form) return fail(name, "field '", f, "' is part of the ", expr_kind_name(e.kind), " form");
      for (const std::string& s : seen)
        if (s == f) return fail(name, "field '", f, "' is given twice");
      take();
      RLX_TRY(expect(Tok::equal, "'=' after the field name"));
      if (f == "op") {
        RLX_ASSIGN_OR_RETURN(e.op, op_word("an op name"));
      } else if (f == "a" || f == "b" || f == "c") {
        RLX_ASSIGN_OR_RETURN(int v, expr_ref(k));
        (f == "a" ? e.a : f == "b" ? e.b : e.c) = v;
      } else if (f == "ival" || f == "ival2") {
        RLX_ASSIGN_OR_RETURN(int64_t v, integer("an integer"));
        (f == "ival" ? e.ival : e.ival2) = v;
      } else if (f == "fval" || f == "fval2") {
        RLX_ASSIGN_OR_RETURN(double v, number("a number"));
        (f == "fval" ? e.fval : e.fval2) = v;
      } else if (f == "buffer") {
        RLX_ASSIGN_OR_RETURN(e.buffer, arg_ref(k));
      } else if (f == "loop") {
        RLX_ASSIGN_OR_RETURN(e.loop, loop_ref(k));
      } else if (f == "loops") {
        RLX_ASSIGN_OR_RETURN(e.loops, loop_list(k));
      } else {
        return fail(name, "unknown expression field '", f,
                    "' (fields: op, a, b, c, ival, ival2, fval, fval2, buffer, loop, loops)");
      }
      seen.push_back(f);
      if (accept(Tok::rbrace)) return Status::ok();
      RLX_TRY(expect(Tok::comma, "',' or '}' after a field"));
    }
  }

  // ---- steps, donations, arena ----

  Status step() {
    take();
    const Token& t = cur();
    if (auto n = label_id(t, 'n')) {
      if (static_cast<size_t>(*n) >= natives_.size() || !natives_[*n])
        return fail(t, "use of undefined native kernel ", t.text);
      take();
      p_.steps.push_back(Step{true, *n});
      return Status::ok();
    }
    if (auto g = label_id(t, 'k')) {
      if (static_cast<size_t>(*g) >= generated_.size() || !generated_[*g])
        return fail(t, "use of undefined generated kernel ", t.text);
      take();
      p_.steps.push_back(Step{false, *g});
      return Status::ok();
    }
    return fail(t, "expected a kernel such as n0 or k0 but found ", describe(t));
  }

  Status donate() {
    take();
    if (!at_ident("input")) return fail(cur(), "expected 'input' after 'donate' but found ", describe(cur()));
    take();
    if (!at(Tok::integer)) return fail(cur(), "expected an input index but found ", describe(cur()));
    RLX_ASSIGN_OR_RETURN(int in, int32_of(cur()));
    take();
    RLX_TRY(expect(Tok::arrow, "'->' after the input index"));
    if (!at_ident("output")) return fail(cur(), "expected 'output' after '->' but found ", describe(cur()));
    take();
    if (!at(Tok::integer)) return fail(cur(), "expected an output index but found ", describe(cur()));
    RLX_ASSIGN_OR_RETURN(int out, int32_of(cur()));
    take();
    p_.donations.emplace_back(out, in);
    return Status::ok();
  }

  Status arena() {
    take();
    const Token& t = cur();
    RLX_ASSIGN_OR_RETURN(int64_t bytes, integer("the arena size in bytes"));
    if (bytes < 0) return fail(t, "negative arena size ", bytes);
    p_.arena_bytes = static_cast<size_t>(bytes);
    if (!at_ident("bytes")) return fail(cur(), "expected 'bytes' after the arena size but found ", describe(cur()));
    take();
    return Status::ok();
  }

  // ---- the whole program ----

  template <class K>
  Status collect(std::vector<std::optional<K>>& slots, const std::vector<const Token*>& toks, char prefix,
                 std::vector<K>& out) {
    for (size_t i = 0; i < slots.size(); ++i) {
      if (slots[i]) continue;
      size_t next = i + 1;
      while (!slots[next]) ++next;  // the last slot is always defined
      return fail(*toks[next], "kernel ", std::string(1, prefix), i, " is missing (", prefix == 'n' ? "native" : "generated",
                  " kernels are numbered from ", std::string(1, prefix), "0 without gaps)");
    }
    for (auto& s : slots) out.push_back(std::move(*s));
    return Status::ok();
  }

  Status finish() {
    for (const Token* v : view_refs_)
      if (static_cast<size_t>(*label_id(*v, 'b')) >= p_.buffers.size())
        return fail(*v, "use of undefined buffer ", v->text, " as a view");
    for (const Token* ep : epilogue_refs_) {
      int id = *label_id(*ep, 'k');
      if (static_cast<size_t>(id) >= generated_.size() || !generated_[id])
        return fail(*ep, "use of undefined generated kernel ", ep->text, " as an epilogue");
    }
    RLX_TRY(collect(natives_, native_toks_, 'n', p_.natives));
    RLX_TRY(collect(generated_, generated_toks_, 'k', p_.generated));
    return Status::ok();
  }

  KernelProgram p_;
  Section section_ = s_buffers;
  bool seen_once_ = false;
  std::vector<std::optional<NativeKernel>> natives_;
  std::vector<std::optional<GeneratedKernel>> generated_;
  std::vector<const Token*> native_toks_, generated_toks_, epilogue_refs_, view_refs_;
};

}  // namespace

std::string KernelProgram::to_text() const { return Printer(*this).run(); }

std::string KernelProgram::listing() const { return Printer(*this, 64).run(); }

Expected<KernelProgram> parse_kernel_program(std::string_view text, std::string_view source_name) {
  try {
    auto toks = text::lex(text, source_name);
    if (!toks) return std::move(toks).take_status();
    RLX_ASSIGN_OR_RETURN(KernelProgram p, KernelParser(std::move(toks).value(), source_name).run());
    Status v = verify_program(p);
    if (!v) return error(v.code(), source_name, ": ", v.message());
    return p;
  } catch (const std::bad_alloc&) {
    return error(ErrorCode::internal, source_name, ": out of memory while parsing");
  } catch (const std::exception& e) {
    return error(ErrorCode::internal, source_name, ": unexpected exception while parsing: ", e.what());
  }
}

}  // namespace rlx::kir
