// Tokens of the text IR and the lexical helpers the printer and the parser share, so that
// what one writes the other reads (identifier rules, string escapes, number formats).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/status.h"

namespace rlx::text {

enum class Tok : uint8_t {
  eof,
  ident,        // [A-Za-z_][A-Za-z0-9_]*: ops, attribute names, dtypes, dims, keywords
  value_name,   // %name, name from [A-Za-z0-9_.-]+; text holds the name without '%'
  global_name,  // @name or @"quoted"; text holds the name without '@'
  string,       // "..." ; text holds the decoded bytes
  integer,      // -?[0-9]+ ; text holds the literal
  floating,     // a literal with '.' or an exponent, or -inf; text holds the literal
  lparen, rparen, lbrace, rbrace, lbracket, rbracket, langle, rangle,
  comma, colon, equal, arrow, question,
};

struct Token {
  Tok kind = Tok::eof;
  std::string text;
  int line = 1;
  int col = 1;
};

// A short description of a token for messages: "'%x'", "string \"abc\"", "end of input".
std::string describe(const Token& t);

// Splits `src` into tokens (ending with one eof token). Comments run from '#' to the end of
// the line. The first malformed token (bad character, bad number, unterminated string) is a
// parse_error whose message starts with "<source>:<line>:<col>: ".
Expected<std::vector<Token>> lex(std::string_view src, std::string_view source_name);

// Concatenates strings and string literals. (GCC 12 warns falsely, -Wrestrict, on
// `"literal" + std::string` chains, so the text code joins with this instead.)
template <class... Parts>
std::string concat(const Parts&... parts) {
  std::string r;
  (r.append(std::string_view(parts)), ...);
  return r;
}

// [A-Za-z_][A-Za-z0-9_]*
bool is_identifier(std::string_view s);
// A name a value can print as after '%': non-empty, [A-Za-z0-9_.-]+.
bool is_value_name(std::string_view s);
// "..." with \" \\ \n \t \r escaped and other control bytes as \xHH.
std::string quote(std::string_view s);
// Shortest text that reads back as exactly `v`, always with '.' or 'e' (or inf, -inf, nan).
std::string format_f64(double v);
std::string format_f32(float v);

}  // namespace rlx::text
