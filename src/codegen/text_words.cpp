#include "text_words.h"

#include <cctype>

namespace rlx::codegen {

std::string expand_words(std::string_view text, const Words& words) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    if (std::isalpha(static_cast<unsigned char>(text[i])) || text[i] == '_') {
      size_t j = i;
      while (j < text.size() && (std::isalnum(static_cast<unsigned char>(text[j])) || text[j] == '_')) ++j;
      const auto it = words.find(text.substr(i, j - i));
      out += it == words.end() ? text.substr(i, j - i) : std::string_view(it->second);
      i = j;
    } else {
      out += text[i++];
    }
  }
  return out;
}

}  // namespace rlx::codegen
