// libFuzzer target: rlx::safetensors::parse on arbitrary bytes. Beyond "no crash, no sanitizer
// report", it checks what an accepted file promises: every tensor lies inside the buffer, and
// tensors that view the buffer do not overlap.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "rlx/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::shared_ptr<rlx::Storage> bytes = rlx::allocate_storage(size);
  if (!bytes) return 0;
  if (size) std::memcpy(bytes->data(), data, size);
  auto file = rlx::safetensors::parse(bytes, "fuzz.safetensors");
  if (!file) {
    if (file.status().message().empty()) __builtin_trap();
    return 0;
  }
  std::vector<std::pair<size_t, size_t>> ranges;
  if (file->names.size() != file->tensors.size()) __builtin_trap();
  for (const auto& [name, t] : file->tensors) {
    if (t.numel() < 0) __builtin_trap();
    if (t.nbytes() && !t.storage()) __builtin_trap();
    if (t.storage() == bytes) {
      if (t.byte_offset() + t.nbytes() > size) __builtin_trap();
      if (t.nbytes()) ranges.emplace_back(t.byte_offset(), t.byte_offset() + t.nbytes());
    }
    // read every element (ASan checks the view's bounds)
    volatile double sink = 0;
    for (int64_t i = 0; i < t.numel(); ++i) sink = sink + t.get_f64(i);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) __builtin_trap();
  return 0;
}
