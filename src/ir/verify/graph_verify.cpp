// The verifier of the graph and primitive levels: SSA structure, producer bookkeeping,
// recorded types against the ops table, and the primitive level's strict form.
#include <string>
#include <vector>

#include "rlx/verify.h"

namespace rlx {
namespace {

// Type inference and the strict-form check name the op at the start of their messages
// ("matmul: inner dimensions differ"); the verifier names the node instead, so the op prefix
// is dropped to avoid saying it twice.
std::string strip_op_prefix(const std::string& msg, Op op) {
  std::string prefix = cat(op_name(op), ": ");
  if (msg.compare(0, prefix.size(), prefix) == 0) return msg.substr(prefix.size());
  return msg;
}

Status node_error(const Graph& g, int32_t i, const std::string& what) {
  return error(ErrorCode::verify_error, g.node_label(i), ": ", what);
}

std::string value_desc(const Graph& g, ValueId v) {
  if (v >= 0 && v < static_cast<ValueId>(g.values.size()) && !g.values[v].name.empty())
    return cat("value '", g.values[v].name, "' (%", v, ")");
  return cat("value %", v);
}

}  // namespace

bool output_types_match(Op op, std::span<const TensorType> inferred, std::span<const TensorType> recorded) {
  if (inferred.size() != recorded.size()) return false;
  for (size_t k = 0; k < inferred.size(); ++k) {
    const TensorType& a = inferred[k];
    const TensorType& b = recorded[k];
    if (a == b) continue;
    if (op != Op::Param || a.dtype != b.dtype || a.rank() != b.rank()) return false;
    for (int d = 0; d < a.rank(); ++d) {
      const Dim& want = b.shape[d];
      const Dim& got = a.shape[d];
      if (want.is_static() ? got != want : !(got.is_static() && got.size() == 0)) return false;
    }
  }
  return true;
}

Status verify_node_level(const Graph& g, int32_t i) {
  if (g.level != IrLevel::primitive) return Status::ok();
  if (i < 0 || i >= static_cast<int32_t>(g.nodes.size()))
    return error(ErrorCode::verify_error, "node index ", i, " is out of range");
  const Node& n = g.nodes[i];
  const ValueId nv = static_cast<ValueId>(g.values.size());
  std::vector<TensorType> ins, outs;
  for (ValueId v : n.inputs) {
    if (v < 0 || v >= nv) return node_error(g, i, cat("input ", value_desc(g, v), " is out of range"));
    ins.push_back(g.values[v].type);
  }
  for (ValueId v : n.outputs) {
    if (v < 0 || v >= nv) return node_error(g, i, cat("output ", value_desc(g, v), " is out of range"));
    outs.push_back(g.values[v].type);
  }
  if (is_primitive(n.op)) {
    NodeSig sig{ins, n.attrs, ""};
    Status s = check_strict_primitive(n.op, sig, outs);
    if (!s) return node_error(g, i, cat("not in strict primitive form: ", strip_op_prefix(s.message(), n.op)));
    return Status::ok();
  }
  // A composite kept at the primitive level is one the device runs natively; its kernel is
  // chosen for concrete sizes, so its shapes must be static.
  for (size_t k = 0; k < ins.size(); ++k)
    if (!is_static(ins[k].shape))
      return node_error(g, i, cat("composite op at the primitive level needs static shapes, input ", k,
                                  " is ", ins[k].to_string()));
  for (size_t k = 0; k < outs.size(); ++k)
    if (!is_static(outs[k].shape))
      return node_error(g, i, cat("composite op at the primitive level needs static shapes, output ", k,
                                  " is ", outs[k].to_string()));
  return Status::ok();
}

Status verify_graph(const Graph& g) {
  const ValueId nv = static_cast<ValueId>(g.values.size());
  const int32_t nn = static_cast<int32_t>(g.nodes.size());
  auto in_range = [&](ValueId v) { return v >= 0 && v < nv; };

  // Where each value is produced: -2 nowhere, -1 a graph input, else the first node that
  // lists it as an output. Computed up front so that a use before the definition can say
  // which node defines it later.
  std::vector<int32_t> def_node(nv, -2);
  for (int32_t i = 0; i < nn; ++i)
    for (ValueId v : g.nodes[i].outputs)
      if (in_range(v) && def_node[v] == -2) def_node[v] = i;

  std::vector<char> defined(nv, 0);
  for (size_t k = 0; k < g.inputs.size(); ++k) {
    ValueId v = g.inputs[k];
    if (!in_range(v))
      return error(ErrorCode::verify_error, "graph input ", k, " is ", value_desc(g, v), ", out of range (",
                   nv, " values)");
    if (defined[v]) return error(ErrorCode::verify_error, "graph input ", k, ": ", value_desc(g, v),
                                 " is listed as a graph input more than once");
    if (g.values[v].producer != -1)
      return error(ErrorCode::verify_error, "graph input ", k, ": ", value_desc(g, v), " records producer node #",
                   g.values[v].producer, " instead of -1");
    if (def_node[v] >= 0)
      return error(ErrorCode::verify_error, "graph input ", k, ": ", value_desc(g, v),
                   " is also produced by ", g.node_label(def_node[v]));
    defined[v] = 1;
  }

  for (int32_t i = 0; i < nn; ++i) {
    const Node& n = g.nodes[i];
    std::vector<TensorType> in_types;
    for (size_t j = 0; j < n.inputs.size(); ++j) {
      ValueId v = n.inputs[j];
      if (!in_range(v))
        return node_error(g, i, cat("input ", j, " is ", value_desc(g, v), ", out of range (", nv, " values)"));
      if (!defined[v]) {
        if (def_node[v] >= i)
          return node_error(g, i, cat("input ", j, " uses ", value_desc(g, v), " before its definition by ",
                                      g.node_label(def_node[v]), ": nodes are not in topological order"));
        return node_error(g, i, cat("input ", j, " uses ", value_desc(g, v),
                                    ", which no node or graph input defines"));
      }
      in_types.push_back(g.values[v].type);
    }
    std::vector<TensorType> out_types;
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      ValueId v = n.outputs[k];
      if (!in_range(v))
        return node_error(g, i, cat("output ", k, " is ", value_desc(g, v), ", out of range (", nv, " values)"));
      if (defined[v])
        return node_error(g, i, cat("output ", k, " redefines ", value_desc(g, v), ", which is already produced by ",
                                    def_node[v] == i ? std::string("another output of this node")
                                                     : g.node_label(def_node[v])));
      const Value& val = g.values[v];
      if (val.producer != i || val.output_index != static_cast<int32_t>(k))
        return node_error(g, i, cat("output ", k, " is ", value_desc(g, v), ", which records producer ",
                                    val.producer, " output ", val.output_index, " instead of ", i, " output ", k));
      defined[v] = 1;
      out_types.push_back(val.type);
    }
    NodeSig sig{in_types, n.attrs, ""};
    auto inferred = infer_types(n.op, sig);
    if (!inferred)
      return node_error(g, i, cat("type inference fails: ", strip_op_prefix(inferred.status().message(), n.op)));
    if (!output_types_match(n.op, *inferred, out_types)) {
      if (inferred->size() != out_types.size())
        return node_error(g, i, cat("has ", out_types.size(), " outputs, but its op and attributes give ",
                                    inferred->size()));
      for (size_t k = 0; k < out_types.size(); ++k)
        if (!output_types_match(n.op, std::span(inferred->data() + k, 1), std::span(out_types.data() + k, 1)))
          return node_error(g, i, cat("output ", k, " (", value_desc(g, n.outputs[k]), ") is recorded as ",
                                      out_types[k].to_string(), " but type inference gives ",
                                      (*inferred)[k].to_string()));
    }
    RLX_TRY(verify_node_level(g, i));
  }

  for (size_t k = 0; k < g.outputs.size(); ++k) {
    ValueId v = g.outputs[k];
    if (!in_range(v))
      return error(ErrorCode::verify_error, "graph output ", k, " is ", value_desc(g, v), ", out of range (", nv,
                   " values)");
    if (!defined[v])
      return error(ErrorCode::verify_error, "graph output ", k, " is ", value_desc(g, v),
                   ", which no node or graph input defines");
  }
  for (ValueId v = 0; v < nv; ++v)
    if (!defined[v])
      return error(ErrorCode::verify_error, value_desc(g, v), " (", g.values[v].type.to_string(),
                   ") is not produced by any node or graph input");
  return Status::ok();
}

}  // namespace rlx
