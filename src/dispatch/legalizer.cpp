// The legalizer: for each graph-level node, native / common-IR / rewritten / illegal, decided
// on the node's op, attributes, dtypes and shapes for one device. It builds the
// primitive-level graph as it goes and records every decision in the dispatch report.
#include <algorithm>
#include <set>

#include "passes/graph_passes.h"
#include "rlx/dispatch.h"
#include "rules/rules.h"

namespace rlx {
namespace {

using dispatch::RuleNode;
using dispatch::rules_for;

constexpr int kMaxDepth = 48;

// Snapshot of the destination graph, to undo a path that failed halfway.
struct Checkpoint {
  size_t nodes, values;
};

class Legalizer {
 public:
  Legalizer(const Device& dev, const DispatchPolicy& policy, Graph& out) : dev_(dev), policy_(policy), out_(out) {}

  Expected<std::vector<ValueId>> legalize_node(Op op, std::vector<ValueId> inputs, const Attrs& attrs,
                                               const std::string& name, int depth, NodeDecision& d);
  int32_t origin = -1;

 private:
  friend class PrimitiveEmitter;
  friend class LegalizingEmitter;
  Checkpoint checkpoint() const { return {out_.nodes.size(), out_.values.size()}; }
  void rollback(const Checkpoint& c) {
    out_.nodes.resize(c.nodes);
    out_.values.resize(c.values);
  }
  Expected<std::vector<ValueId>> try_common(Op op, const std::vector<ValueId>& inputs, const Attrs& attrs,
                                            const std::string& name, int depth, std::string& how);
  Expected<std::vector<ValueId>> try_rewrite(Op op, const std::vector<ValueId>& inputs, const Attrs& attrs,
                                             const std::string& name, int depth, NodeDecision& d);

  const Device& dev_;
  const DispatchPolicy& policy_;
  Graph& out_;
};

std::vector<TensorType> types_of(const Graph& g, const std::vector<ValueId>& vs) {
  std::vector<TensorType> t;
  for (ValueId v : vs) t.push_back(g.type(v));
  return t;
}

bool allows(PathPolicy p, DispatchPath path);

// Emits strict primitives: each emitted op is checked for strict form and device support;
// non-strict primitives are canonicalized by their rule, composites expanded by theirs.
class PrimitiveEmitter final : public Builder {
 public:
  PrimitiveEmitter(Legalizer& L, int depth) : L_(L), depth_(depth) {}
  Expected<std::vector<ValueId>> emit(Op op, std::vector<ValueId> inputs, Attrs attrs) override {
    if (depth_ > kMaxDepth)
      return error(ErrorCode::internal, "lowering of ", op_name(op), " does not terminate");
    std::vector<TensorType> in_types = types_of(L_.out_, inputs);
    NodeSig sig{in_types, attrs, ""};
    RLX_ASSIGN_OR_RETURN(std::vector<TensorType> out_types, infer_types(op, sig));
    if (is_primitive(op) && check_strict_primitive(op, sig, out_types).is_ok()) {
      NodeDesc desc{op, attrs, in_types, out_types, ""};
      // A primitive the device runs natively (a dot as a GEMM) stays native inside a
      // decomposition too, unless the policy for that op kind forbids it.
      if (op_info(op).family != OpFamily::source && allows(L_.policy_.for_op(op), DispatchPath::native)) {
        Claim nc = L_.dev_.claim_native(desc);
        if (nc.ok) {
          ops_used.insert(cat(op_name(op), " (native)"));
          auto outs = L_.out_.add_node_typed(op, std::move(inputs), std::move(attrs), std::move(out_types), "", L_.origin);
          L_.out_.nodes.back().native = true;
          return outs;
        }
      }
      Claim c = L_.dev_.supports_primitive(desc);
      if (!c.ok)
        return error(ErrorCode::illegal, op_name(op), " on ", in_types.empty() ? std::string("()") : in_types[0].to_string(),
                     ": ", c.text);
      ops_used.insert(std::string(op_name(op)));
      return L_.out_.add_node_typed(op, std::move(inputs), std::move(attrs), std::move(out_types), "", L_.origin);
    }
    const dispatch::OpRules& r = rules_for(op);
    dispatch::RuleFn fn = r.decompose ? r.decompose : r.rewrite;
    if (!fn) return error(ErrorCode::illegal, op_name(op), " has no decomposition into primitives");
    PrimitiveEmitter inner(L_, depth_ + 1);
    OpBuilder ob(inner);
    RuleNode rn{op, attrs, inputs, in_types, out_types, ""};
    std::vector<ValueId> outs;
    RLX_TRY(fn(ob, rn, outs));
    RLX_TRY(ob.status());
    ops_used.insert(inner.ops_used.begin(), inner.ops_used.end());
    return check_outputs(op, outs, out_types);
  }
  const TensorType& type(ValueId v) const override { return L_.out_.type(v); }
  Expected<ValueId> param(const std::string& weight_name, TensorType type) override {
    return GraphBuilder(L_.out_, L_.origin).param(weight_name, std::move(type));
  }
  Expected<std::vector<ValueId>> check_outputs(Op op, std::vector<ValueId>& outs,
                                               const std::vector<TensorType>& want) {
    if (outs.size() != want.size()) return error(ErrorCode::internal, "lowering of ", op_name(op), " gave ", outs.size(), " outputs");
    for (size_t i = 0; i < outs.size(); ++i)
      if (L_.out_.type(outs[i]) != want[i])
        return error(ErrorCode::internal, "lowering of ", op_name(op), " produced ", L_.out_.type(outs[i]).to_string(),
                     " instead of ", want[i].to_string());
    return outs;
  }
  std::set<std::string> ops_used;

 private:
  Legalizer& L_;
  int depth_;
};

// Emits graph-level ops, each legalized in turn (the rewritten path).
class LegalizingEmitter final : public Builder {
 public:
  LegalizingEmitter(Legalizer& L, int depth, std::vector<NodeDecision>& children)
      : L_(L), depth_(depth), children_(children) {}
  Expected<std::vector<ValueId>> emit(Op op, std::vector<ValueId> inputs, Attrs attrs) override {
    if (op == Op::Constant || op == Op::Param) {
      std::vector<TensorType> in_types;
      NodeSig sig{in_types, attrs, ""};
      RLX_ASSIGN_OR_RETURN(auto out_types, infer_types(op, sig));
      return L_.out_.add_node_typed(op, {}, std::move(attrs), std::move(out_types), "", L_.origin);
    }
    NodeDecision d;
    auto r = L_.legalize_node(op, std::move(inputs), attrs, "", depth_, d);
    children_.push_back(std::move(d));
    return r;
  }
  const TensorType& type(ValueId v) const override { return L_.out_.type(v); }
  Expected<ValueId> param(const std::string& weight_name, TensorType type) override {
    return GraphBuilder(L_.out_, L_.origin).param(weight_name, std::move(type));
  }

 private:
  Legalizer& L_;
  int depth_;
  std::vector<NodeDecision>& children_;
};

bool allows(PathPolicy p, DispatchPath path) {
  switch (p) {
    case PathPolicy::prefer_native: return true;
    case PathPolicy::force_common: return path == DispatchPath::common_ir;
    case PathPolicy::force_native: return path == DispatchPath::native;
    case PathPolicy::force_rewrite: return path == DispatchPath::rewritten;
  }
  return false;
}

std::string policy_refusal(PathPolicy p) {
  switch (p) {
    case PathPolicy::force_common: return "not tried: policy force-common";
    case PathPolicy::force_native: return "not tried: policy force-native";
    case PathPolicy::force_rewrite: return "not tried: policy force-rewrite";
    default: return "";
  }
}

std::string make_hint(const NodeDecision& d, const Device& dev) {
  for (const TensorType& t : d.inputs)
    if (std::find(dev.info().dtypes.begin(), dev.info().dtypes.end(), t.dtype) == dev.info().dtypes.end())
      return cat("this device does not compute in ", dtype_name(t.dtype),
                 "; cast the inputs to a supported type before the node, or run on a device that has it (see `rlx devices`)");
  return "run on another device (see `rlx devices`), or use a policy that allows another path";
}

}  // namespace

Expected<std::vector<ValueId>> Legalizer::try_common(Op op, const std::vector<ValueId>& inputs, const Attrs& attrs,
                                                     const std::string& name, int depth, std::string& how) {
  PrimitiveEmitter pe(*this, depth + 1);
  std::vector<ValueId> outs;
  const dispatch::OpRules& r = rules_for(op);
  if (is_primitive(op)) {
    RLX_ASSIGN_OR_RETURN(outs, pe.emit(op, inputs, attrs));
  } else {
    if (!r.decompose) return error(ErrorCode::illegal, op_name(op), " has no decomposition into primitives");
    std::vector<TensorType> in_types = types_of(out_, inputs);
    RLX_ASSIGN_OR_RETURN(auto out_types, infer_types(op, NodeSig{in_types, attrs, name}));
    OpBuilder ob(pe);
    RuleNode rn{op, attrs, inputs, in_types, out_types, name};
    RLX_TRY(r.decompose(ob, rn, outs));
    RLX_TRY(ob.status());
    RLX_ASSIGN_OR_RETURN(outs, pe.check_outputs(op, outs, out_types));
  }
  if (pe.ops_used.empty()) {
    // No primitive was emitted (the node is a view of its input, e.g. an identity expand), but
    // the device still has to hold the values and copy them when they are graph outputs.
    for (ValueId v : outs) {
      const TensorType t = out_.type(v);
      Claim c = dev_.supports_primitive(NodeDesc{Op::Reshape, Attrs{}, std::span(&t, 1), std::span(&t, 1), ""});
      if (!c.ok) return error(ErrorCode::illegal, op_name(op), " (a view) of ", t.to_string(), ": ", c.text);
    }
  }
  std::string list;
  for (const std::string& s : pe.ops_used) list += (list.empty() ? "" : ", ") + s;
  how = list.empty() ? "view" : list;
  return outs;
}

Expected<std::vector<ValueId>> Legalizer::try_rewrite(Op op, const std::vector<ValueId>& inputs, const Attrs& attrs,
                                                      const std::string& name, int depth, NodeDecision& d) {
  const dispatch::OpRules& r = rules_for(op);
  if (!r.rewrite) return error(ErrorCode::illegal, "no rewrite rule for ", op_name(op));
  std::vector<TensorType> in_types = types_of(out_, inputs);
  RLX_ASSIGN_OR_RETURN(auto out_types, infer_types(op, NodeSig{in_types, attrs, name}));
  LegalizingEmitter le(*this, depth + 1, d.children);
  OpBuilder ob(le);
  RuleNode rn{op, attrs, inputs, in_types, out_types, name};
  std::vector<ValueId> outs;
  Status s = r.rewrite(ob, rn, outs);
  if (s.is_ok()) s = ob.status();
  if (!s.is_ok()) {
    // name the child that failed
    for (const NodeDecision& c : d.children)
      if (c.path == DispatchPath::illegal)
        return error(ErrorCode::illegal, "the rewrite needs ", op_name(c.op), " on ",
                     c.inputs.empty() ? std::string("()") : c.inputs[0].to_string(), ", which is illegal here (",
                     c.common_refused.empty() ? c.native_refused : c.common_refused, ")");
    return s;
  }
  if (outs.size() != out_types.size()) return error(ErrorCode::internal, "rewrite of ", op_name(op), " gave wrong outputs");
  return outs;
}

Expected<std::vector<ValueId>> Legalizer::legalize_node(Op op, std::vector<ValueId> inputs, const Attrs& attrs,
                                                        const std::string& name, int depth, NodeDecision& d) {
  if (depth > kMaxDepth) return error(ErrorCode::internal, "rewrites of ", op_name(op), " do not terminate");
  d.op = op;
  d.name = name;
  d.inputs = types_of(out_, inputs);
  auto inferred = infer_types(op, NodeSig{d.inputs, attrs, name});
  if (!inferred) return std::move(inferred).take_status();
  d.outputs = *inferred;
  const PathPolicy pol = policy_.for_op(op);

  if (allows(pol, DispatchPath::native)) {
    NodeDesc desc{op, attrs, d.inputs, d.outputs, name};
    Claim c = dev_.claim_native(desc);
    if (c.ok) {
      d.path = DispatchPath::native;
      d.how = c.text;
      auto outs = out_.add_node_typed(op, std::move(inputs), attrs, d.outputs, name, origin);
      out_.nodes.back().native = true;
      return outs;
    }
    d.native_refused = c.text;
  } else {
    d.native_refused = policy_refusal(pol);
  }

  if (allows(pol, DispatchPath::common_ir)) {
    Checkpoint cp = checkpoint();
    std::string how;
    auto r = try_common(op, inputs, attrs, name, depth, how);
    if (r) {
      d.path = DispatchPath::common_ir;
      d.how = how;
      return r;
    }
    rollback(cp);
    d.common_refused = r.status().message();
  } else {
    d.common_refused = policy_refusal(pol);
  }

  if (allows(pol, DispatchPath::rewritten)) {
    Checkpoint cp = checkpoint();
    auto r = try_rewrite(op, inputs, attrs, name, depth, d);
    if (r) {
      d.path = DispatchPath::rewritten;
      std::string list;
      for (const NodeDecision& c : d.children) list += (list.empty() ? "-> " : ", ") + std::string(op_name(c.op));
      d.how = list;
      return r;
    }
    rollback(cp);
    d.children.clear();
    d.rewrite_refused = r.status().message();
  } else {
    d.rewrite_refused = policy_refusal(pol);
  }

  d.path = DispatchPath::illegal;
  d.hint = make_hint(d, dev_);
  return error(ErrorCode::illegal, op_name(op), " is illegal on ", dev_.name());
}

Expected<LegalizeResult> legalize(const Graph& g, const Device& device, const DispatchPolicy& policy) {
  LegalizeResult res;
  Graph& out = res.graph;
  out.name = g.name;
  out.level = IrLevel::primitive;
  out.weights = g.weights;
  res.report.device = device.name();
  res.report.policy = policy.to_string();
  for (const Value& v : g.values)
    if (!is_static(v.type.shape))
      return error(ErrorCode::shape_error, "legalization needs static shapes; value ", v.name.empty() ? "?" : v.name,
                   " has ", v.type.to_string(), " (bind the symbolic dimensions first)");
  std::vector<ValueId> map(g.values.size(), kNoValue);
  for (ValueId in : g.inputs) map[in] = out.add_input(g.values[in].name, g.values[in].type);
  Legalizer L(device, policy, out);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    std::vector<ValueId> ins;
    for (ValueId v : n.inputs) ins.push_back(map[v]);
    L.origin = static_cast<int32_t>(i);
    if (n.op == Op::Constant || n.op == Op::Param) {
      auto outs = out.add_node_typed(n.op, ins, n.attrs, {g.type(n.outputs[0])}, n.name, L.origin);
      map[n.outputs[0]] = outs[0];
      continue;
    }
    NodeDecision d;
    d.node = static_cast<int32_t>(i);
    std::string label = n.name.empty() ? cat("%", n.outputs.empty() ? -1 : n.outputs[0]) : n.name;
    if (n.name.empty() && !n.outputs.empty() && !g.values[n.outputs[0]].name.empty())
      label = "%" + g.values[n.outputs[0]].name;
    auto r = L.legalize_node(n.op, ins, n.attrs, n.name, 0, d);
    d.node = static_cast<int32_t>(i);
    d.name = label;
    std::vector<ValueId> outs;
    if (r) {
      outs = std::move(r).value();
    } else if (d.path == DispatchPath::illegal) {
      // keep going so that every illegal node is reported: stand the node in as is
      outs = out.add_node_typed(n.op, ins, n.attrs, types_of(g, n.outputs), n.name, L.origin);
    } else {
      return std::move(r).take_status().with_context(g.node_label(static_cast<int32_t>(i)));
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      map[n.outputs[k]] = outs[k];
      if (!g.values[n.outputs[k]].name.empty() && out.values[outs[k]].name.empty())
        out.values[outs[k]].name = g.values[n.outputs[k]].name;
    }
    res.report.nodes.push_back(std::move(d));
  }
  for (ValueId v : g.outputs) out.outputs.push_back(map[v]);
  // Rewrites of different nodes can build equal subgraphs: conv2d's rule and its weight
  // gradient build the same im2col (dispatch::im2col), which one training step then fills once.
  passes::eliminate_common_subexpressions(out);
  return res;
}

}  // namespace rlx
