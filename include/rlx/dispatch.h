// rlx/dispatch.h: the dispatch contract. For each graph-level node and target device, the
// legalizer decides exactly one of native / common-IR / rewritten / illegal, records why,
// and produces the primitive-level graph. There is no fallback to another device.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "rlx/device.h"
#include "rlx/graph.h"

namespace rlx {

enum class DispatchPath : uint8_t { native, common_ir, rewritten, illegal };
std::string_view dispatch_path_name(DispatchPath p);  // "native", "common-ir", ...

// How the legalizer may treat one op kind.
enum class PathPolicy : uint8_t {
  prefer_native,  // native, else common-IR, else rewrite (the default)
  force_common,   // only the common-IR path
  force_native,   // only the native path
  force_rewrite,  // only the rewrite path
};

struct DispatchPolicy {
  PathPolicy default_policy = PathPolicy::prefer_native;
  std::map<Op, PathPolicy> per_op;
  PathPolicy for_op(Op op) const;
  // Parses "prefer-native", "force-common", or a list "softmax=force-common,matmul=force-native"
  // (a bare policy in the list sets the default).
  static Expected<DispatchPolicy> parse(std::string_view text);
  std::string to_string() const;
};

struct NodeDecision {
  int32_t node = -1;             // index in the source graph (-1 for nodes made by a rewrite)
  std::string name;              // source node name, or "%<value>" of its first output
  Op op;
  std::vector<TensorType> inputs;
  std::vector<TensorType> outputs;
  DispatchPath path = DispatchPath::illegal;
  std::string how;               // native: kernel; common-ir: primitives; rewritten: "-> a, b"
  std::vector<NodeDecision> children;  // decisions for the nodes a rewrite produced
  // Why each path was refused (empty if not tried or not refused).
  std::string native_refused, common_refused, rewrite_refused;
  std::string hint;
  std::vector<std::string> kernels;  // kernels that run this node (filled in after scheduling)
};

struct DispatchReport {
  std::string device;
  std::string policy;
  DimBindings bindings;
  std::vector<NodeDecision> nodes;

  int count(DispatchPath p) const;  // top-level decisions with path p
  bool ok() const { return count(DispatchPath::illegal) == 0; }
  // The table printed by `rlx explain`, with a summary line.
  std::string to_text() const;
  // One line: "compile-ready: yes (3 native, 5 common-ir, 1 rewritten, 0 illegal)".
  std::string summary() const;
  nlohmann::json to_json() const;
  // The error the compiler returns when some node is illegal: lists every illegal node with
  // op, name, input types, device, the reason each path was refused, and a hint.
  Status illegal_error() const;
};

struct LegalizeResult {
  Graph graph;  // primitive level
  DispatchReport report;
};

// Legalizes a graph-level graph with static shapes for `device`. On illegal nodes the
// returned report lists them and `graph` is not usable; callers use report.illegal_error().
Expected<LegalizeResult> legalize(const Graph& g, const Device& device, const DispatchPolicy& policy);

}  // namespace rlx
