// --precision f32|f16|bf16 for the verbs that run a model (run, bench, embed): the autocast
// pass (src/passes/autocast.h) applied to the model's graph before it is compiled.
#pragma once

#include <optional>
#include <string>

#include "passes/autocast.h"

namespace rlx::cli {

// Applies the autocast policy for `flag` (nullopt or "f32": nothing) to g, in the form that is
// fastest on `device` (passes::inference_compute: the native narrow products where the device
// has fast ones, else widened onto f32). Returns the number of products narrowed; errors name
// the flag's value or the device.
inline Expected<int> apply_precision(Graph& g, const std::optional<std::string>& flag, const std::string& device) {
  if (!flag) return 0;
  auto p = passes::parse_precision(*flag);
  if (!p) return p.status().with_context("--precision");
  if (*p == passes::Precision::f32) return 0;
  RLX_ASSIGN_OR_RETURN(auto dev, get_device(device));
  const DType narrow = passes::precision_dtype(*p);
  return passes::autocast(g, {.narrow = narrow, .compute = passes::inference_compute(dev->info(), narrow)});
}

}  // namespace rlx::cli
