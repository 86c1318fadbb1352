// --precision f32|f16|bf16 for the verbs that run a model (run, bench, embed): the autocast
// pass (src/passes/autocast.h) applied to the model's graph before it is compiled.
#pragma once

#include <optional>
#include <string>

#include "passes/autocast.h"

namespace rlx::cli {

// Applies the autocast policy for `flag` (nullopt or "f32": nothing) to g. Returns the number
// of products narrowed; errors name the flag's value.
inline Expected<int> apply_precision(Graph& g, const std::optional<std::string>& flag) {
  if (!flag) return 0;
  auto p = passes::parse_precision(*flag);
  if (!p) return p.status().with_context("--precision");
  if (*p == passes::Precision::f32) return 0;
  return passes::autocast(g, {.narrow = passes::precision_dtype(*p)});
}

}  // namespace rlx::cli
