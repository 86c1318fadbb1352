// The weight behind a value: passes and lowerings that treat weights with data as constants
// (autocast's rounded copies, int8 lowering, Qwen3's folded casts) look them up the same way.
#pragma once

#include <string>
#include <variant>

#include "rlx/graph.h"

namespace rlx::passes {

// The weight behind value v when a `param` node whose data is in g.weights produces it, else null.
inline const Tensor* weight_of(const Graph& g, ValueId v) {
  const int32_t p = g.values[static_cast<size_t>(v)].producer;
  if (p < 0 || g.nodes[static_cast<size_t>(p)].op != Op::Param) return nullptr;
  const AttrValue* name = g.nodes[static_cast<size_t>(p)].attrs.find("name");
  const std::string* ns = name ? std::get_if<std::string>(name) : nullptr;
  if (!ns) return nullptr;
  auto it = g.weights.find(*ns);
  return it == g.weights.end() ? nullptr : &it->second;
}

}  // namespace rlx::passes
