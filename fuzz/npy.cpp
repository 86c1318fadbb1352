// libFuzzer target: the .npy reader (rlx::parse_npy) on arbitrary bytes. An accepted array holds
// exactly the bytes its header declares, and every element reads back.
#include <cstdint>
#include <string_view>

#include "rlx/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto t = rlx::parse_npy(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.npy");
  if (!t) {
    if (t.status().message().empty()) __builtin_trap();
    return 0;
  }
  if (t->nbytes() > size) __builtin_trap();
  volatile double sink = 0;
  for (int64_t i = 0; i < t->numel(); ++i) sink = sink + t->get_f64(i);
  return 0;
}
