// The lexer of the text IR and the lexical helpers shared with the printer.
#include "lexer.h"

#include <charconv>
#include <cmath>

namespace rlx::text {
namespace {

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ident_char(char c) { return is_alpha(c) || is_digit(c) || c == '_'; }
bool is_name_char(char c) { return is_ident_char(c) || c == '.' || c == '-'; }

const char* hex = "0123456789abcdef";

// A byte as it appears in a message: printable ASCII as itself, anything else as \xHH.
std::string show_byte(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return std::string(1, c);
  std::string r = "\\x";
  r += hex[u >> 4];
  r += hex[u & 15];
  return r;
}

std::string ensure_float_syntax(std::string s) {
  if (s.find_first_of(".eEni") == std::string::npos) s += ".0";
  return s;
}

class Lexer {
 public:
  Lexer(std::string_view src, std::string_view source) : src_(src), source_(source) {}

  Expected<std::vector<Token>> run() {
    std::vector<Token> out;
    for (;;) {
      skip_space();
      Token t;
      t.line = line_;
      t.col = col_;
      if (pos_ >= src_.size()) {
        t.kind = Tok::eof;
        out.push_back(std::move(t));
        return out;
      }
      Status s = next(t);
      if (!s) return s;
      out.push_back(std::move(t));
    }
  }

 private:
  char peek(size_t ahead = 0) const { return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0'; }
  bool at_end(size_t ahead = 0) const { return pos_ + ahead >= src_.size(); }
  void advance() {
    if (src_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }

  template <class... Args>
  Status fail(int line, int col, const Args&... args) {
    return error(ErrorCode::parse_error, source_, ":", line, ":", col, ": ", args...);
  }

  void skip_space() {
    while (!at_end()) {
      char c = peek();
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        advance();
      } else if (c == '#') {
        while (!at_end() && peek() != '\n') advance();
      } else {
        break;
      }
    }
  }

  Status next(Token& t) {
    char c = peek();
    auto single = [&](Tok k) {
      t.kind = k;
      t.text = std::string(1, c);
      advance();
      return Status::ok();
    };
    switch (c) {
      case '(': return single(Tok::lparen);
      case ')': return single(Tok::rparen);
      case '{': return single(Tok::lbrace);
      case '}': return single(Tok::rbrace);
      case '[': return single(Tok::lbracket);
      case ']': return single(Tok::rbracket);
      case '<': return single(Tok::langle);
      case '>': return single(Tok::rangle);
      case ',': return single(Tok::comma);
      case ':': return single(Tok::colon);
      case '=': return single(Tok::equal);
      case '?': return single(Tok::question);
      case '"': return string(t);
      case '%':
      case '@': return sigil_name(t);
      default: break;
    }
    if (c == '-' && peek(1) == '>') {
      t.kind = Tok::arrow;
      t.text = "->";
      advance();
      advance();
      return Status::ok();
    }
    if (is_digit(c) || (c == '-' && is_digit(peek(1)))) return number(t);
    if (c == '-' && peek(1) == 'i' && peek(2) == 'n' && peek(3) == 'f' && !is_ident_char(peek(4))) {
      t.kind = Tok::floating;
      t.text = "-inf";
      for (int k = 0; k < 4; ++k) advance();
      return Status::ok();
    }
    if (is_alpha(c) || c == '_') {
      t.kind = Tok::ident;
      size_t start = pos_;
      while (!at_end() && is_ident_char(peek())) advance();
      t.text = std::string(src_.substr(start, pos_ - start));
      return Status::ok();
    }
    return fail(t.line, t.col, "unexpected character '", show_byte(c), "'");
  }

  Status number(Token& t) {
    size_t start = pos_;
    bool is_float = false;
    if (peek() == '-') advance();
    while (is_digit(peek())) advance();
    if (peek() == '.') {
      is_float = true;
      advance();
      while (is_digit(peek())) advance();
    }
    bool bad = false;
    if (peek() == 'e' || peek() == 'E') {
      is_float = true;
      advance();
      if (peek() == '+' || peek() == '-') advance();
      if (!is_digit(peek())) bad = true;
      while (is_digit(peek())) advance();
    }
    if (bad || is_name_char(peek())) {
      // Take the rest of the malformed literal so the message shows all of it.
      while (!at_end() && (is_name_char(peek()) || peek() == '+')) advance();
      return fail(t.line, t.col, "bad number '", src_.substr(start, pos_ - start), "'");
    }
    t.kind = is_float ? Tok::floating : Tok::integer;
    t.text = std::string(src_.substr(start, pos_ - start));
    return Status::ok();
  }

  Status string(Token& t) {
    t.kind = Tok::string;
    advance();  // opening quote
    std::string s;
    for (;;) {
      if (at_end() || peek() == '\n') return fail(t.line, t.col, "unterminated string");
      char c = peek();
      if (c == '"') {
        advance();
        break;
      }
      if (c != '\\') {
        s += c;
        advance();
        continue;
      }
      int line = line_, col = col_;
      advance();
      if (at_end()) return fail(t.line, t.col, "unterminated string");
      char e = peek();
      switch (e) {
        case '"': s += '"'; break;
        case '\\': s += '\\'; break;
        case 'n': s += '\n'; break;
        case 't': s += '\t'; break;
        case 'r': s += '\r'; break;
        case 'x': {
          auto hexval = [](char h) -> int {
            if (h >= '0' && h <= '9') return h - '0';
            if (h >= 'a' && h <= 'f') return h - 'a' + 10;
            if (h >= 'A' && h <= 'F') return h - 'A' + 10;
            return -1;
          };
          int hi = hexval(peek(1)), lo = hexval(peek(2));
          if (hi < 0 || lo < 0) return fail(line, col, "\\x in a string needs two hex digits");
          s += static_cast<char>(hi * 16 + lo);
          advance();
          advance();
          break;
        }
        default: return fail(line, col, "unknown escape '\\", show_byte(e), "' in string");
      }
      advance();
    }
    t.text = std::move(s);
    return Status::ok();
  }

  Status sigil_name(Token& t) {
    char sigil = peek();
    t.kind = sigil == '%' ? Tok::value_name : Tok::global_name;
    advance();
    if (sigil == '@' && peek() == '"') {
      Token q;
      q.line = t.line;
      q.col = t.col;
      RLX_TRY(string(q));
      t.text = std::move(q.text);
      return Status::ok();
    }
    size_t start = pos_;
    while (!at_end() && is_name_char(peek())) advance();
    if (pos_ == start)
      return fail(t.line, t.col, "expected a name after '", std::string(1, sigil), "'");
    t.text = std::string(src_.substr(start, pos_ - start));
    return Status::ok();
  }

  std::string_view src_;
  std::string_view source_;
  size_t pos_ = 0;
  int line_ = 1;
  int col_ = 1;
};

}  // namespace

std::string describe(const Token& t) {
  auto clip = [](const std::string& s) { return s.size() > 40 ? concat(s.substr(0, 40), "...") : s; };
  switch (t.kind) {
    case Tok::eof: return "end of input";
    case Tok::value_name: return concat("'%", clip(t.text), "'");
    case Tok::global_name: return concat("'@", clip(t.text), "'");
    case Tok::string: return concat("string ", quote(clip(t.text)));
    default: return concat("'", clip(t.text), "'");
  }
}

Expected<std::vector<Token>> lex(std::string_view src, std::string_view source_name) {
  return Lexer(src, source_name).run();
}

bool is_identifier(std::string_view s) {
  if (s.empty() || !(is_alpha(s[0]) || s[0] == '_')) return false;
  for (char c : s)
    if (!is_ident_char(c)) return false;
  return true;
}

bool is_value_name(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!is_name_char(c)) return false;
  return true;
}

std::string quote(std::string_view s) {
  std::string r = "\"";
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': r += "\\\""; break;
      case '\\': r += "\\\\"; break;
      case '\n': r += "\\n"; break;
      case '\t': r += "\\t"; break;
      case '\r': r += "\\r"; break;
      default:
        if (u < 0x20 || u == 0x7f) {
          r += "\\x";
          r += hex[u >> 4];
          r += hex[u & 15];
        } else {
          r += c;  // printable ASCII and UTF-8 bytes pass through
        }
    }
  }
  return r + "\"";
}

std::string format_f64(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return ensure_float_syntax(std::string(buf, r.ptr));
}

std::string format_f32(float v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return ensure_float_syntax(std::string(buf, r.ptr));
}

}  // namespace rlx::text
