// UTF-8 decoding and the Unicode properties tokenizers need (through ICU): categories,
// case mapping and NFD decomposition.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rlx::text {

// Decodes UTF-8; invalid sequences become U+FFFD (never fails, never reads past the end).
std::vector<char32_t> utf8_decode(std::string_view s);
std::string utf8_encode(const std::vector<char32_t>& cps);
void utf8_append(std::string& out, char32_t cp);

bool is_whitespace(char32_t c);    // \t \n \r space, and Unicode White_Space (U+2028 too)
bool is_control(char32_t c);       // Cc Cf Cs Co except \t \n \r
bool is_punctuation(char32_t c);   // ASCII symbol ranges (as BERT) and Unicode P*
bool is_cjk(char32_t c);           // CJK unified ideograph blocks (as BERT)
bool is_letter(char32_t c);        // \p{L}
bool is_number(char32_t c);        // \p{N}
bool is_mark_nonspacing(char32_t c);  // Mn
char32_t to_lower(char32_t c);
// Canonical decomposition (NFD) of a code point sequence.
std::vector<char32_t> nfd(const std::vector<char32_t>& cps);

}  // namespace rlx::text
