// Lexing and parsing of Jinja templates (jinja.h) into the syntax tree of jinja_internal.h.
//
// Whitespace follows Jinja with trim_blocks and lstrip_blocks, as transformers configures it:
// newlines are normalized to \n and one trailing newline is dropped; a block tag or comment
// alone on its line after spaces loses those spaces; the first newline after a block tag or
// comment is removed; `{%-` / `-%}` (and the {{ }} and {# #} forms) strip all whitespace on
// their side.
#include <cstring>

#include "models/text/jinja_internal.h"

namespace rlx::text::jinja {
namespace {

enum class Tok : uint8_t { text, var_begin, var_end, block_begin, block_end, name, string, integer, floating, op, end };

struct Token {
  Tok type;
  std::string value;
  int line;
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::string show(std::string_view s) {
  std::string out = "'";
  for (char c : s.substr(0, 40)) {
    if (c == '\n') out += "\\n";
    else out += c;
  }
  if (s.size() > 40) out += "...";
  return out + "'";
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) {
    // newlines normalized, one trailing newline dropped (Jinja's keep_trailing_newline=False)
    src_.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        src_ += '\n';
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        src_ += source[i];
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
  }

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      size_t tag = find_tag(pos_);
      std::string text = src_.substr(pos_, tag - pos_);
      if (tag < src_.size()) {
        const char kind = src_[tag + 1];
        const char mod = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
        if (mod == '-') {
          while (!text.empty() && is_space(text.back())) text.pop_back();
        } else if (kind != '{' && mod != '+') {  // lstrip_blocks
          size_t l = text.rfind('\n');
          l = l == std::string::npos ? 0 : l + 1;
          if (l > 0 || line_starting) {
            bool blank = true;
            for (size_t k = l; k < text.size(); ++k) blank = blank && is_space(text[k]);
            if (blank) text.resize(l);
          }
        }
      }
      if (!text.empty()) push(Tok::text, text);
      advance_to(tag);
      if (tag >= src_.size()) break;
      const char kind = src_[tag + 1];
      advance_to(tag + 2);
      if (pos_ < src_.size() && (src_[pos_] == '-' || src_[pos_] == '+')) advance_to(pos_ + 1);
      if (kind == '#') {
        size_t end = src_.find("#}", pos_);
        if (end == std::string::npos) {
          fail_at(line_, "a comment {# is never closed with #}");
        }
        const bool strip = end > pos_ && src_[end - 1] == '-';
        advance_to(end + 2);
        finish_tag(strip, true);
      } else {
        lex_tag(kind == '{');
      }
      line_starting = pos_ > 0 && src_[pos_ - 1] == '\n';
    }
    push(Tok::end, "");
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail_at(int line, const std::string& what) {
    throw Failure{ErrorCode::parse_error, what, line};
  }

  size_t find_tag(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i)
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    return src_.size();
  }

  void advance_to(size_t p) {
    for (; pos_ < p && pos_ < src_.size(); ++pos_)
      if (src_[pos_] == '\n') ++line_;
    pos_ = p;
  }

  void push(Tok t, std::string v) { tokens_.push_back(Token{t, std::move(v), line_}); }

  // After a closing delimiter: `-` strips all following whitespace; a block tag or comment
  // drops one newline (trim_blocks).
  void finish_tag(bool strip, bool block) {
    if (strip) {
      while (pos_ < src_.size() && is_space(src_[pos_])) advance_to(pos_ + 1);
    } else if (block && pos_ < src_.size() && src_[pos_] == '\n') {
      advance_to(pos_ + 1);
    }
  }

  void lex_tag(bool variable) {
    const int open_line = line_;
    push(variable ? Tok::var_begin : Tok::block_begin, "");
    int braces = 0;
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_])) advance_to(pos_ + 1);
      if (pos_ >= src_.size())
        fail_at(open_line, variable ? "'{{' is never closed with '}}'" : "'{%' is never closed with '%}'");
      const char c = src_[pos_];
      const std::string_view rest(src_.data() + pos_, src_.size() - pos_);
      const std::string_view close = variable ? "}}" : "%}";
      bool strip = false, keep = false;  // `-%}` strips all whitespace after; `+%}` keeps even the newline
      size_t close_at = std::string_view::npos;
      if ((c == '-' || c == '+') && rest.substr(1, 2) == close) {
        strip = c == '-';
        keep = c == '+';
        close_at = 1;
      } else if (rest.substr(0, 2) == close && (!variable || braces == 0)) {
        close_at = 0;
      }
      if (close_at != std::string_view::npos) {
        advance_to(pos_ + close_at + 2);
        push(variable ? Tok::var_end : Tok::block_end, "");
        finish_tag(strip, !variable && !keep);
        return;
      }
      if (is_name_start(c)) {
        size_t e = pos_;
        while (e < src_.size() && is_name_char(src_[e])) ++e;
        push(Tok::name, src_.substr(pos_, e - pos_));
        advance_to(e);
      } else if (is_digit(c)) {
        lex_number();
      } else if (c == '\'' || c == '"') {
        lex_string(c);
      } else {
        static const char* const ops[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                          ">",  "=",  ".",  ",",  ":",  "|",  "(", ")", "[", "]", "{", "}"};
        const char* found = nullptr;
        for (const char* op : ops)
          if (rest.substr(0, std::strlen(op)) == op) {
            found = op;
            break;
          }
        if (!found) fail_at(line_, cat("unexpected character ", show(rest.substr(0, 1)), " in a tag"));
        if (std::strcmp(found, "{") == 0) ++braces;
        if (std::strcmp(found, "}") == 0 && braces > 0) --braces;
        push(Tok::op, found);
        advance_to(pos_ + std::strlen(found));
      }
    }
  }

  void lex_number() {
    size_t e = pos_;
    auto digits = [&] {
      while (e < src_.size() && (is_digit(src_[e]) || (src_[e] == '_' && e + 1 < src_.size() && is_digit(src_[e + 1]))))
        ++e;
    };
    digits();
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' && is_digit(src_[e + 1])) {
      ++e;
      digits();
      is_float = true;
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t k = e + 1;
      if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) ++k;
      if (k < src_.size() && is_digit(src_[k])) {
        e = k;
        digits();
        is_float = true;
      }
    }
    std::string text;
    for (size_t k = pos_; k < e; ++k)
      if (src_[k] != '_') text += src_[k];
    push(is_float ? Tok::floating : Tok::integer, text);
    advance_to(e);
  }

  // Python's string escapes (Jinja decodes literals with unicode-escape); an unknown escape
  // keeps its backslash.
  void lex_string(char quote) {
    const int start_line = line_;
    std::string out;
    size_t p = pos_ + 1;
    auto hex = [&](size_t n) -> uint32_t {
      if (p + n > src_.size()) fail_at(line_, "a string ends inside an escape sequence");
      uint32_t v = 0;
      for (size_t k = 0; k < n; ++k) {
        const char h = src_[p + k];
        int d = is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
        if (d < 0) fail_at(line_, cat("invalid escape \\", src_.substr(p - 1, n + 1), " in a string"));
        v = v * 16 + static_cast<uint32_t>(d);
      }
      p += n;
      return v;
    };
    while (true) {
      if (p >= src_.size()) fail_at(start_line, "a string literal is never closed");
      const char c = src_[p];
      if (c == quote) break;
      if (c != '\\') {
        out += c;
        ++p;
        continue;
      }
      if (++p >= src_.size()) fail_at(start_line, "a string literal is never closed");
      const char e = src_[p++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case 'a': out += '\a'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case '\n': break;
        case 'x': append_utf8(out, hex(2)); break;
        case 'u': append_utf8(out, hex(4)); break;
        case 'U': {
          const uint32_t v = hex(8);
          if (v > 0x10FFFF) fail_at(line_, "a \\U escape beyond U+10FFFF");
          append_utf8(out, v);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t v = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && p < src_.size() && src_[p] >= '0' && src_[p] <= '7'; ++k) v = v * 8 + (src_[p++] - '0');
            append_utf8(out, v);
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    push(Tok::string, std::move(out));
    advance_to(p + 1);
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

// ---------------------------------------------------------------- parser

class Parser {
 public:
  Parser(std::vector<Token> tokens, const Limits& limits) : t_(std::move(tokens)), limits_(limits) {}

  Body program() {
    Body body = parse_body({});
    return body;
  }

 private:
  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  bool at_op(std::string_view op) const { return cur().type == Tok::op && cur().value == op; }
  bool at_name(std::string_view n) const { return cur().type == Tok::name && cur().value == n; }

  std::string describe(const Token& t) const {
    switch (t.type) {
      case Tok::text: return "text";
      case Tok::var_begin: return "'{{'";
      case Tok::var_end: return "'}}'";
      case Tok::block_begin: return "'{%'";
      case Tok::block_end: return "'%}'";
      case Tok::end: return "the end of the template";
      case Tok::string: return "a string " + show(t.value);
      default: return show(t.value);
    }
  }

  [[noreturn]] void error_here(const std::string& what) {
    throw Failure{ErrorCode::parse_error, cat(what, ", found ", describe(cur())), cur().line};
  }

  void expect_op(std::string_view op) {
    if (!at_op(op)) error_here(cat("expected '", op, "'"));
    ++i_;
  }
  std::string expect_name() {
    if (cur().type != Tok::name) error_here("expected a name");
    return t_[i_++].value;
  }
  void expect_block_end(std::string_view what) {
    if (cur().type != Tok::block_end) error_here(cat("expected '%}' to end '", what, "'"));
    ++i_;
  }

  ExprP make(Expr::Kind k, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line;
    return e;
  }
  ExprP finish(ExprP e) {
    int d = 0;
    for (const ExprP& k : e->kids)
      if (k) d = std::max(d, k->depth);
    e->depth = d + 1;
    if (e->depth > limits_.max_expression_depth)
      throw Failure{ErrorCode::out_of_range,
                    cat("an expression nests deeper than ", limits_.max_expression_depth, " levels"), e->line};
    return e;
  }
  ExprP binary(const std::string& op, ExprP a, ExprP b, int line, Expr::Kind kind = Expr::Kind::binary) {
    ExprP e = make(kind, line);
    e->str = op;
    e->kids.push_back(std::move(a));
    e->kids.push_back(std::move(b));
    return finish(std::move(e));
  }

  struct Guard {  // bounds the recursion of the parser itself
    Parser& p;
    explicit Guard(Parser& parser) : p(parser) {
      if (++p.recursion_ > 4 * p.limits_.max_expression_depth + 8)
        throw Failure{ErrorCode::out_of_range,
                      cat("an expression nests deeper than ", p.limits_.max_expression_depth, " levels"), p.cur().line};
    }
    ~Guard() { --p.recursion_; }
  };

  // ------------------------------------------------------------ expressions

  // expr (',' expr)* : a tuple without parentheses where Jinja allows one
  ExprP tuple_or_expr() {
    const int line = cur().line;
    ExprP first = expression();
    if (!at_op(",")) return first;
    ExprP t = make(Expr::Kind::tuple, line);
    t->kids.push_back(std::move(first));
    while (at_op(",")) {
      ++i_;
      if (cur().type == Tok::var_end || cur().type == Tok::block_end) break;
      t->kids.push_back(expression());
    }
    return finish(std::move(t));
  }

  ExprP expression() {
    Guard g(*this);
    const int line = cur().line;
    ExprP e = or_expr();
    while (at_name("if")) {
      ++i_;
      ExprP cond = or_expr();
      ExprP other;
      if (at_name("else")) {
        ++i_;
        other = expression();
      }
      ExprP t = make(Expr::Kind::ternary, line);
      t->kids.push_back(std::move(cond));
      t->kids.push_back(std::move(e));
      t->kids.push_back(std::move(other));
      e = finish(std::move(t));
    }
    return e;
  }

  ExprP or_expr() {
    ExprP e = and_expr();
    while (at_name("or")) {
      const int line = cur().line;
      ++i_;
      e = binary("or", std::move(e), and_expr(), line, Expr::Kind::logic_or);
    }
    return e;
  }
  ExprP and_expr() {
    ExprP e = not_expr();
    while (at_name("and")) {
      const int line = cur().line;
      ++i_;
      e = binary("and", std::move(e), not_expr(), line, Expr::Kind::logic_and);
    }
    return e;
  }
  ExprP not_expr() {
    Guard g(*this);
    if (at_name("not")) {
      const int line = cur().line;
      ++i_;
      ExprP e = make(Expr::Kind::unary, line);
      e->str = "not";
      e->kids.push_back(not_expr());
      return finish(std::move(e));
    }
    return compare();
  }
  ExprP compare() {
    ExprP e = add();
    while (true) {
      const int line = cur().line;
      std::string op;
      if (cur().type == Tok::op &&
          (cur().value == "==" || cur().value == "!=" || cur().value == "<" || cur().value == ">" ||
           cur().value == "<=" || cur().value == ">=")) {
        op = cur().value;
        ++i_;
      } else if (at_name("in")) {
        op = "in";
        ++i_;
      } else if (at_name("not") && peek().type == Tok::name && peek().value == "in") {
        op = "not in";
        i_ += 2;
      } else {
        return e;
      }
      e = binary(op, std::move(e), add(), line);
    }
  }
  ExprP add() {
    ExprP e = concat();
    while (at_op("+") || at_op("-")) {
      const int line = cur().line;
      const std::string op = t_[i_++].value;
      e = binary(op, std::move(e), concat(), line);
    }
    return e;
  }
  ExprP concat() {
    ExprP e = mul();
    while (at_op("~")) {
      const int line = cur().line;
      ++i_;
      e = binary("~", std::move(e), mul(), line);
    }
    return e;
  }
  ExprP mul() {
    ExprP e = pow();
    while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
      const int line = cur().line;
      const std::string op = t_[i_++].value;
      e = binary(op, std::move(e), pow(), line);
    }
    return e;
  }
  ExprP pow() {
    ExprP e = unary();
    while (at_op("**")) {
      const int line = cur().line;
      ++i_;
      e = binary("**", std::move(e), unary(), line);
    }
    return e;
  }
  ExprP unary(bool with_filter = true) {
    Guard g(*this);
    const int line = cur().line;
    ExprP e;
    if (at_op("-") || at_op("+")) {
      const std::string op = t_[i_++].value;
      e = make(Expr::Kind::unary, line);
      e->str = op;
      e->kids.push_back(unary(false));
      e = finish(std::move(e));
    } else {
      e = primary();
    }
    e = postfix(std::move(e));
    if (with_filter) e = filters(std::move(e));
    return e;
  }

  ExprP primary() {
    Guard g(*this);
    const Token& t = cur();
    const int line = t.line;
    ExprP e = make(Expr::Kind::literal, line);
    switch (t.type) {
      case Tok::name: {
        const std::string& n = t.value;
        ++i_;
        if (n == "true" || n == "True") e->value = Value::boolean(true);
        else if (n == "false" || n == "False") e->value = Value::boolean(false);
        else if (n == "none" || n == "None") e->value = Value::none();
        else {
          e->kind = Expr::Kind::name;
          e->str = n;
        }
        return finish(std::move(e));
      }
      case Tok::string: {
        std::string s;
        while (cur().type == Tok::string) s += t_[i_++].value;  // adjacent literals concatenate
        e->value = Value::string(std::move(s));
        return finish(std::move(e));
      }
      case Tok::integer: {
        int64_t v = 0;
        for (char c : t.value) {
          if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, c - '0', &v))
            throw Failure{ErrorCode::unsupported, cat("the integer ", t.value, " does not fit in 64 bits"), line};
        }
        ++i_;
        e->value = Value::integer(v);
        return finish(std::move(e));
      }
      case Tok::floating: {
        e->value = Value::floating(std::strtod(t.value.c_str(), nullptr));
        ++i_;
        return finish(std::move(e));
      }
      case Tok::op:
        if (t.value == "(") {
          ++i_;
          if (at_op(")")) {  // the empty tuple
            ++i_;
            e->kind = Expr::Kind::tuple;
            return finish(std::move(e));
          }
          ExprP inner = expression();
          if (at_op(",")) {
            ExprP tup = make(Expr::Kind::tuple, line);
            tup->kids.push_back(std::move(inner));
            while (at_op(",")) {
              ++i_;
              if (at_op(")")) break;
              tup->kids.push_back(expression());
            }
            inner = finish(std::move(tup));
          }
          expect_op(")");
          return inner;
        }
        if (t.value == "[") {
          ++i_;
          e->kind = Expr::Kind::list;
          while (!at_op("]")) {
            e->kids.push_back(expression());
            if (!at_op(",")) break;
            ++i_;
          }
          expect_op("]");
          return finish(std::move(e));
        }
        if (t.value == "{") {
          ++i_;
          e->kind = Expr::Kind::dict;
          while (!at_op("}")) {
            e->kids.push_back(expression());
            expect_op(":");
            e->kids.push_back(expression());
            if (!at_op(",")) break;
            ++i_;
          }
          expect_op("}");
          return finish(std::move(e));
        }
        break;
      default:
        break;
    }
    error_here("expected an expression");
  }

  // arguments of a call, filter or test: positional, then name=value
  void arguments(Expr& e) {
    expect_op("(");
    while (!at_op(")")) {
      if (cur().type == Tok::name && peek().type == Tok::op && peek().value == "=") {
        e.kw.push_back(t_[i_].value);
        i_ += 2;
      } else {
        if (at_op("*") || at_op("**")) error_here("argument unpacking (* and **) is not supported");
        e.kw.push_back("");
      }
      e.kids.push_back(expression());
      if (!at_op(",")) break;
      ++i_;
    }
    expect_op(")");
  }

  ExprP postfix(ExprP e) {
    while (true) {
      const int line = cur().line;
      if (at_op(".")) {
        ++i_;
        ExprP a = make(Expr::Kind::attr, line);
        if (cur().type == Tok::integer) {  // x.0 is x[0]
          a->kind = Expr::Kind::subscript;
          a->kids.push_back(std::move(e));
          ExprP idx = make(Expr::Kind::literal, line);
          idx->value = Value::integer(std::stoll(t_[i_++].value));
          a->kids.push_back(finish(std::move(idx)));
        } else {
          a->str = expect_name();
          a->kids.push_back(std::move(e));
        }
        e = finish(std::move(a));
      } else if (at_op("[")) {
        ++i_;
        e = subscript(std::move(e), line);
      } else if (at_op("(")) {
        ExprP c = make(Expr::Kind::call, line);
        c->kids.push_back(std::move(e));
        c->kw.push_back("");
        arguments(*c);
        e = finish(std::move(c));
      } else {
        return e;
      }
    }
  }

  ExprP subscript(ExprP target, int line) {
    ExprP parts[3];
    bool is_slice = false;
    for (int k = 0; k < 3; ++k) {
      if (!at_op(":") && !at_op("]")) parts[k] = expression();
      if (k < 2 && at_op(":")) {
        ++i_;
        is_slice = true;
      } else {
        break;
      }
    }
    expect_op("]");
    ExprP s = make(is_slice ? Expr::Kind::slice : Expr::Kind::subscript, line);
    s->kids.push_back(std::move(target));
    if (is_slice) {
      for (ExprP& p : parts) s->kids.push_back(std::move(p));
    } else {
      if (!parts[0]) throw Failure{ErrorCode::parse_error, "an empty subscript []", line};
      s->kids.push_back(std::move(parts[0]));
    }
    return finish(std::move(s));
  }

  ExprP filters(ExprP e) {
    while (true) {
      const int line = cur().line;
      if (at_op("|")) {
        ++i_;
        ExprP f = make(Expr::Kind::filter, line);
        f->str = expect_name();
        while (at_op(".")) {  // dotted filter names exist in Jinja; keep the name whole for the error
          ++i_;
          f->str += "." + expect_name();
        }
        f->kids.push_back(std::move(e));
        f->kw.push_back("");
        if (at_op("(")) arguments(*f);
        e = finish(std::move(f));
      } else if (at_name("is")) {
        ++i_;
        ExprP t = make(Expr::Kind::test, line);
        if (at_name("not")) {
          ++i_;
          t->negate = true;
        }
        if (cur().type == Tok::name) {
          t->str = t_[i_++].value;
        } else if (cur().type == Tok::op && (cur().value == "==" || cur().value == "!=" || cur().value == "<" ||
                                             cur().value == ">" || cur().value == "<=" || cur().value == ">=")) {
          t->str = t_[i_++].value;
        } else {
          error_here("expected the name of a test after 'is'");
        }
        t->kids.push_back(std::move(e));
        t->kw.push_back("");
        if (at_op("(")) {
          arguments(*t);
        } else if ((cur().type == Tok::name && cur().value != "else" && cur().value != "or" && cur().value != "and" &&
                    cur().value != "if" && cur().value != "in" && cur().value != "not" && cur().value != "is") ||
                   cur().type == Tok::string || cur().type == Tok::integer || cur().type == Tok::floating ||
                   at_op("[") || at_op("{") || at_op("-")) {
          // one argument without parentheses: `x is divisibleby 3`, `x is sameas none`
          t->kids.push_back(at_op("-") ? unary(false) : postfix(primary()));
          t->kw.push_back("");
        }
        e = finish(std::move(t));
      } else {
        return e;
      }
    }
  }

  // ------------------------------------------------------------ statements

  // Statements until a block tag whose keyword is one of `ends` (left unconsumed: i_ is at the keyword).
  Body parse_body(const std::vector<std::string_view>& ends) {
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.type == Tok::end) {
        if (!ends.empty()) {
          std::string list;
          for (size_t k = 0; k < ends.size(); ++k) list += (k ? " or '" : "'") + std::string(ends[k]) + "'";
          error_here(cat("expected ", list));
        }
        return body;
      }
      if (t.type == Tok::text) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::s_text;
        s->line = t.line;
        s->text = t.value;
        body.push_back(std::move(s));
        ++i_;
      } else if (t.type == Tok::var_begin) {
        ++i_;
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::s_output;
        s->line = cur().line;
        s->expr = tuple_or_expr();
        if (cur().type != Tok::var_end) error_here("expected '}}'");
        ++i_;
        body.push_back(std::move(s));
      } else if (t.type == Tok::block_begin) {
        const Token& kw = peek();
        if (kw.type == Tok::name)
          for (std::string_view e : ends)
            if (kw.value == e) {
              ++i_;
              return body;
            }
        ++i_;
        body.push_back(statement());
      } else {
        error_here("unexpected token");
      }
    }
  }

  struct Nest {
    Parser& p;
    Nest(Parser& parser, int line) : p(parser) {
      if (++p.nesting_ > p.limits_.max_statement_depth)
        throw Failure{ErrorCode::out_of_range,
                      cat("statements nest deeper than ", p.limits_.max_statement_depth, " levels"), line};
    }
    ~Nest() { --p.nesting_; }
  };

  std::unique_ptr<Stmt> statement() {
    const int line = cur().line;
    if (cur().type != Tok::name) error_here("expected a statement keyword after '{%'");
    const std::string kw = t_[i_++].value;
    auto s = std::make_unique<Stmt>();
    s->line = line;
    if (kw == "if") {
      Nest n(*this, line);
      s->kind = Stmt::s_if;
      ExprP cond = tuple_or_expr();
      expect_block_end("if");
      while (true) {
        Body b = parse_body({"elif", "else", "endif"});
        s->branches.emplace_back(std::move(cond), std::move(b));
        const std::string end = t_[i_++].value;
        if (end == "elif") {
          cond = tuple_or_expr();
          expect_block_end("elif");
          continue;
        }
        expect_block_end(end);
        if (end == "else") {
          s->else_body = parse_body({"endif"});
          ++i_;
          expect_block_end("endif");
        }
        return s;
      }
    }
    if (kw == "for") {
      Nest n(*this, line);
      s->kind = Stmt::s_for;
      s->names.push_back(expect_name());
      while (at_op(",")) {
        ++i_;
        s->names.push_back(expect_name());
      }
      if (!at_name("in")) error_here("expected 'in' in a for loop");
      ++i_;
      // the iterable: no ternary without else here, since `if` starts the loop filter
      s->expr = or_expr_tuple();
      if (at_name("if")) {
        ++i_;
        s->cond = expression();
      }
      if (at_name("recursive")) error_here("recursive loops are not supported");
      expect_block_end("for");
      s->body = parse_body({"else", "endfor"});
      const std::string end = t_[i_++].value;
      expect_block_end(end);
      if (end == "else") {
        s->else_body = parse_body({"endfor"});
        ++i_;
        expect_block_end("endfor");
      }
      return s;
    }
    if (kw == "set") {
      s->kind = Stmt::s_set;
      s->names.push_back(expect_name());
      if (at_op(".")) {
        ++i_;
        s->attr = expect_name();
      } else {
        while (at_op(",")) {
          ++i_;
          s->names.push_back(expect_name());
        }
      }
      if (cur().type == Tok::block_end && s->names.size() == 1 && s->attr.empty()) {  // {% set x %}...{% endset %}
        Nest n(*this, line);
        ++i_;
        s->kind = Stmt::s_set_block;
        s->body = parse_body({"endset"});
        ++i_;
        expect_block_end("endset");
        return s;
      }
      expect_op("=");
      s->expr = tuple_or_expr();
      expect_block_end("set");
      return s;
    }
    if (kw == "macro") {
      Nest n(*this, line);
      s->kind = Stmt::s_macro;
      s->text = expect_name();
      expect_op("(");
      while (!at_op(")")) {
        s->names.push_back(expect_name());
        if (at_op("=")) {
          ++i_;
          s->defaults.push_back(expression());
        } else {
          s->defaults.push_back(nullptr);
        }
        if (!at_op(",")) break;
        ++i_;
      }
      expect_op(")");
      expect_block_end("macro");
      s->body = parse_body({"endmacro"});
      ++i_;
      if (cur().type == Tok::name) ++i_;  // {% endmacro name %}
      expect_block_end("endmacro");
      return s;
    }
    if (kw == "break" || kw == "continue") {
      s->kind = kw == "break" ? Stmt::s_break : Stmt::s_continue;
      expect_block_end(kw);
      return s;
    }
    if (kw == "generation") {  // transformers' {% generation %} marks assistant text; it renders its body
      Nest n(*this, line);
      s->kind = Stmt::s_block;
      expect_block_end(kw);
      s->body = parse_body({"endgeneration"});
      ++i_;
      expect_block_end("endgeneration");
      return s;
    }
    static const char* const known[] = {"call",   "filter", "include", "import", "from",  "extends", "block",
                                        "raw",    "with",   "do",      "autoescape", "trans"};
    for (const char* k : known)
      if (kw == k) throw Failure{ErrorCode::unsupported, cat("the '", kw, "' statement is not supported"), line};
    --i_;
    error_here("unknown statement");
  }

  // or-expressions separated by commas (the iterable of a for loop, where `if` is the filter)
  ExprP or_expr_tuple() {
    const int line = cur().line;
    ExprP first = or_expr();
    if (!at_op(",")) return first;
    ExprP t = make(Expr::Kind::tuple, line);
    t->kids.push_back(std::move(first));
    while (at_op(",")) {
      ++i_;
      t->kids.push_back(or_expr());
    }
    return finish(std::move(t));
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  const Limits& limits_;
  int recursion_ = 0;
  int nesting_ = 0;
};

}  // namespace

Body parse_program(std::string_view source, const Limits& limits) {
  Lexer lexer(source);
  Parser parser(lexer.run(), limits);
  return parser.program();
}

}  // namespace rlx::text::jinja
