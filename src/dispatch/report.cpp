// Dispatch policies and the dispatch report (text, JSON, and the illegal-node error).
#include <array>

#include <nlohmann/json.hpp>

#include "rlx/dispatch.h"

namespace rlx {

std::string_view dispatch_path_name(DispatchPath p) {
  switch (p) {
    case DispatchPath::native: return "native";
    case DispatchPath::common_ir: return "common-ir";
    case DispatchPath::rewritten: return "rewritten";
    case DispatchPath::illegal: return "illegal";
  }
  return "?";
}

namespace {
std::string_view policy_name(PathPolicy p) {
  switch (p) {
    case PathPolicy::prefer_native: return "prefer-native";
    case PathPolicy::force_common: return "force-common";
    case PathPolicy::force_native: return "force-native";
    case PathPolicy::force_rewrite: return "force-rewrite";
  }
  return "?";
}
std::optional<PathPolicy> parse_policy_name(std::string_view s) {
  for (PathPolicy p : {PathPolicy::prefer_native, PathPolicy::force_common, PathPolicy::force_native,
                       PathPolicy::force_rewrite})
    if (policy_name(p) == s) return p;
  return std::nullopt;
}

std::string types_text(const std::vector<TensorType>& ts) {
  std::string r;
  for (size_t i = 0; i < ts.size(); ++i) {
    if (i) r += ", ";
    r += ts[i].to_string();
  }
  return r;
}

void text_rows(const NodeDecision& d, int indent, std::vector<std::array<std::string, 5>>& rows) {
  std::string pad(static_cast<size_t>(indent) * 2, ' ');
  std::string how = d.how;
  if (!d.kernels.empty()) {
    how += how.empty() ? "" : " ";
    how += "[";
    for (size_t i = 0; i < d.kernels.size(); ++i) how += (i ? ", " : "") + d.kernels[i];
    how += "]";
  }
  if (d.path == DispatchPath::illegal) how = "see below";
  rows.push_back({pad + d.name, std::string(op_name(d.op)), types_text(d.inputs),
                  std::string(dispatch_path_name(d.path)), how});
  for (const NodeDecision& c : d.children) text_rows(c, indent + 1, rows);
}

nlohmann::json decision_json(const NodeDecision& d) {
  nlohmann::json j;
  j["node"] = d.node;
  j["name"] = d.name;
  j["op"] = std::string(op_name(d.op));
  j["path"] = std::string(dispatch_path_name(d.path));
  j["how"] = d.how;
  auto types = [](const std::vector<TensorType>& ts) {
    nlohmann::json a = nlohmann::json::array();
    for (const TensorType& t : ts) a.push_back(t.to_string());
    return a;
  };
  j["inputs"] = types(d.inputs);
  j["outputs"] = types(d.outputs);
  if (!d.native_refused.empty()) j["native_refused"] = d.native_refused;
  if (!d.common_refused.empty()) j["common_refused"] = d.common_refused;
  if (!d.rewrite_refused.empty()) j["rewrite_refused"] = d.rewrite_refused;
  if (!d.hint.empty()) j["hint"] = d.hint;
  if (!d.kernels.empty()) j["kernels"] = d.kernels;
  if (!d.children.empty()) {
    nlohmann::json c = nlohmann::json::array();
    for (const NodeDecision& k : d.children) c.push_back(decision_json(k));
    j["children"] = c;
  }
  return j;
}
}  // namespace

PathPolicy DispatchPolicy::for_op(Op op) const {
  auto it = per_op.find(op);
  return it == per_op.end() ? default_policy : it->second;
}

Expected<DispatchPolicy> DispatchPolicy::parse(std::string_view text) {
  DispatchPolicy p;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string_view item = text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    pos = comma == std::string_view::npos ? text.size() + 1 : comma + 1;
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item.empty()) continue;
    size_t eq = item.find('=');
    std::string_view pname = eq == std::string_view::npos ? item : item.substr(eq + 1);
    auto pol = parse_policy_name(pname);
    if (!pol)
      return error(ErrorCode::invalid_argument, "unknown policy '", pname,
                   "' (expected prefer-native, force-common, force-native or force-rewrite)");
    if (eq == std::string_view::npos) {
      p.default_policy = *pol;
    } else {
      auto op = op_from_name(item.substr(0, eq));
      if (!op) return error(ErrorCode::unknown_op, "unknown op '", item.substr(0, eq), "' in policy");
      p.per_op[*op] = *pol;
    }
  }
  return p;
}

std::string DispatchPolicy::to_string() const {
  std::string r(policy_name(default_policy));
  for (const auto& [op, pol] : per_op) r += cat(",", op_name(op), "=", policy_name(pol));
  return r;
}

int DispatchReport::count(DispatchPath p) const {
  int n = 0;
  for (const NodeDecision& d : nodes) n += d.path == p;
  return n;
}

std::string DispatchReport::summary() const {
  return cat("compile-ready: ", ok() ? "yes" : "no", " (", count(DispatchPath::native), " native, ",
             count(DispatchPath::common_ir), " common-ir, ", count(DispatchPath::rewritten), " rewritten, ",
             count(DispatchPath::illegal), " illegal)");
}

std::string DispatchReport::to_text() const {
  std::string out = cat("device: ", device, "   policy: ", policy);
  if (!bindings.empty()) {
    out += "   dims:";
    for (const auto& [k, v] : bindings) out += cat(" ", k, "=", v);
  }
  out += "\n";
  std::vector<std::array<std::string, 5>> rows{{"node", "op", "inputs", "path", "how"}};
  for (const NodeDecision& d : nodes) text_rows(d, 0, rows);
  std::array<size_t, 5> w{};
  for (const auto& r : rows)
    for (size_t i = 0; i < 4; ++i) w[i] = std::max(w[i], std::min<size_t>(r[i].size(), 48));
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < 5; ++i) {
      std::string cell = r[i];
      if (i < 4 && cell.size() < w[i]) cell += std::string(w[i] - cell.size(), ' ');
      line += cell;
      if (i < 4) line += "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  out += summary() + "\n";
  if (!ok()) out += illegal_error().message() + "\n";
  return out;
}

nlohmann::json DispatchReport::to_json() const {
  nlohmann::json j;
  j["device"] = device;
  j["policy"] = policy;
  j["bindings"] = bindings;
  j["compile_ready"] = ok();
  j["counts"] = {{"native", count(DispatchPath::native)},
                 {"common-ir", count(DispatchPath::common_ir)},
                 {"rewritten", count(DispatchPath::rewritten)},
                 {"illegal", count(DispatchPath::illegal)}};
  nlohmann::json arr = nlohmann::json::array();
  for (const NodeDecision& d : nodes) arr.push_back(decision_json(d));
  j["nodes"] = arr;
  return j;
}

Status DispatchReport::illegal_error() const {
  int n = count(DispatchPath::illegal);
  if (n == 0) return Status::ok();
  std::string msg = cat(n, n == 1 ? " node cannot" : " nodes cannot", " run on ", device, "\n");
  for (const NodeDecision& d : nodes) {
    if (d.path != DispatchPath::illegal) continue;
    msg += cat("  node \"", d.name, "\" ", op_name(d.op), " inputs ", types_text(d.inputs), "\n");
    msg += cat("    native:    ", d.native_refused.empty() ? "-" : d.native_refused, "\n");
    msg += cat("    common-ir: ", d.common_refused.empty() ? "-" : d.common_refused, "\n");
    msg += cat("    rewritten: ", d.rewrite_refused.empty() ? "-" : d.rewrite_refused, "\n");
    msg += cat("  hint: ", d.hint, "\n");
  }
  if (!msg.empty() && msg.back() == '\n') msg.pop_back();
  return Status(ErrorCode::illegal, msg);
}

}  // namespace rlx
