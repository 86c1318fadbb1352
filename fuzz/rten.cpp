// libFuzzer target: rlx::rten::parse (.rten files, versions 1 and 2) on arbitrary bytes. Beyond
// "no crash, no sanitizer report", an accepted model must have outputs and pass the verifier,
// and every error must carry a message. The seed corpus (fuzz/corpus/rten) is
// written by tests/io/rten_test.cpp with RLX_RTEN_WRITE_CORPUS=DIR.
#include <cstdint>
#include <string_view>

#include "rlx/rten.h"
#include "rlx/verify.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto m = rlx::rten::parse(bytes, "fuzz.rten");
  if (!m) {
    if (m.status().message().empty()) __builtin_trap();
  } else {
    if (m->graph.outputs.empty()) __builtin_trap();
    if (!rlx::verify_graph(m->graph).is_ok()) __builtin_trap();
  }
  return 0;
}
