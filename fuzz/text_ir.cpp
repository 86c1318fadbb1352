// libFuzzer target: the text IR parser (rlx::parse_graph) on arbitrary bytes. Beyond "no crash,
// no sanitizer report", a graph it accepts passes the verifier or is refused by it with a
// message, and prints back (print_graph) to text that parses again.
#include <cstdint>
#include <string_view>

#include "rlx/ir_text.h"
#include "rlx/verify.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto g = rlx::parse_graph(text, "fuzz.rlx");
  if (!g) {
    if (g.status().message().empty()) __builtin_trap();
    return 0;
  }
  if (rlx::Status s = rlx::verify_graph(*g); !s.is_ok()) {
    if (s.message().empty()) __builtin_trap();
    return 0;
  }
  if (!rlx::parse_graph(rlx::print_graph(*g), "printed.rlx")) __builtin_trap();
  return 0;
}
