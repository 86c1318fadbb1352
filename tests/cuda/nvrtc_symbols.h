// What an NVRTC compile produced, read back for the tests that check the kernels of a source
// are all there under their unmangled names.
#pragma once

#include <algorithm>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace rlx::nvrtc_test {

// The kernel entry points of PTX text: ".entry name(".
inline std::set<std::string> ptx_entries(const std::vector<char>& ptx) {
  static const std::regex entry(R"(\.entry\s+([A-Za-z_][A-Za-z0-9_$]*)\s*\()");
  const std::string text(ptx.begin(), ptx.end());
  std::set<std::string> names;
  for (std::sregex_iterator it(text.begin(), text.end(), entry), end; it != end; ++it) names.insert((*it)[1].str());
  return names;
}

// Whether a CUBIN's symbol names include `name` (a NUL-terminated string in its ELF string table).
inline bool cubin_has_symbol(const std::vector<char>& cubin, const std::string& name) {
  const std::string needle = name + '\0';
  return std::search(cubin.begin(), cubin.end(), needle.begin(), needle.end()) != cubin.end();
}

}  // namespace rlx::nvrtc_test
