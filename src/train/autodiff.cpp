// Reverse-mode autodiff: walks the nodes between the wanted values and the loss in reverse
// topological order, asks each node's vector-Jacobian rule for its inputs' gradients, and
// sums the contributions of every use.
#include "autodiff.h"

#include "vjp_internal.h"

namespace rlx::train {
namespace {

// Appends to the graph, naming every node after the forward node it differentiates.
class NamingBuilder final : public Builder {
 public:
  NamingBuilder(Graph& g, std::string name) : g_(g), name_(std::move(name)) {}
  Expected<std::vector<ValueId>> emit(Op op, std::vector<ValueId> inputs, Attrs attrs) override {
    return g_.add_node(op, std::move(inputs), std::move(attrs), name_);
  }
  const TensorType& type(ValueId v) const override { return g_.type(v); }
  Expected<ValueId> param(const std::string& weight_name, TensorType type) override {
    return GraphBuilder(g_).param(weight_name, std::move(type));
  }

 private:
  Graph& g_;
  std::string name_;
};

bool one_element(const TensorType& t) {
  for (const Dim& d : t.shape)
    if (!d.is_static() || d.size() != 1) return false;
  return true;
}

Status require_static(const Graph& g, int32_t node, const TensorType& t) {
  if (is_static(t.shape)) return Status::ok();
  return error(ErrorCode::shape_error, "autodiff needs static shapes, but ", g.node_label(node), " has ",
               t.to_string(), "; bind the symbolic dimensions first (rlx::bind_graph)");
}

}  // namespace

namespace vjp {

const std::vector<Rule>& rule_table() {
  static const std::vector<Rule> t = [] {
    std::vector<Rule> r(kNumOps, nullptr);
    register_elementwise_vjps(r);
    register_reduce_vjps(r);
    register_movement_vjps(r);
    register_contraction_vjps(r);
    register_conv_vjps(r);
    register_attention_vjps(r);
    register_linalg_vjps(r);
    register_splat_vjps(r);
    register_sparse_vjps(r);
    register_collective_vjps(r);
    register_quant_vjps(r);
    return r;
  }();
  return t;
}

}  // namespace vjp

Differentiability differentiability(Op op) {
  switch (op) {
    case Op::Constant:
    case Op::Param:
    case Op::Random: return Differentiability::source;
    // the splatting backward ops are themselves the adjoints (gradients of gradients unsupported)
    case Op::SplatProjectBackward:
    case Op::SplatRasterizeBackward:
    case Op::SparseSolveBackward:  // likewise the adjoint of sparse_solve
    case Op::Iota:
    case Op::Not:
    case Op::IsNan:
    case Op::IsInf:
    case Op::ArgMax:
    case Op::ArgMin:
    case Op::Dequantize:
    // distributes a value (e.g. initial weights) from one rank; its adjoint would be a reduce
    // to the root, which no graph op expresses
    case Op::Broadcast:
    // an inference kernel: its activation rounding has zero gradient almost everywhere
    // (training through quantization uses fake_quantize's straight-through rule instead)
    case Op::Int8MatMul:
    // reads a paged KV cache at inference (training runs attention on whole sequences)
    case Op::PagedAttention:
    // complex values: autodiff has no complex (Wirtinger) gradients yet
    case Op::Real:
    case Op::Imag:
    case Op::Conj:
    case Op::Angle:
    case Op::Complex: return Differentiability::not_differentiable;
    default: break;
  }
  switch (op_info(op).family) {
    case OpFamily::compare:
    case OpFamily::logical:
    case OpFamily::argreduce:
    // indices and counts; top_k's and unique's values would have a scatter as their adjoint,
    // but these ops run on the host between device programs, which training graphs do not stage
    case OpFamily::data_dependent: return Differentiability::not_differentiable;
    case OpFamily::source: return Differentiability::source;
    default: return Differentiability::differentiable;
  }
}

bool input_is_differentiable(Op op, int i, std::span<const TensorType> inputs) {
  switch (op) {
    case Op::Where: return i != 0;
    // depths only order the Gaussians and radii only bin them: piecewise constant
    case Op::SplatRasterize: return i != 4 && i != 5;
    // the CSR ops: row_ptr and col_idx (coo_to_csr: rows and cols) are integer structure
    case Op::CooToCsr:
    case Op::SpmvCsr:
    case Op::SddmmCsr:
    case Op::SparseSolve: return i >= 2;
    case Op::Gather:
    case Op::Embedding:
    case Op::Rope:
    case Op::QMatMul:
    // fake_quantize: scale and zero point are tracked by the trainer, not learned
    case Op::FakeQuantize: return i == 0;
    case Op::ScatterAdd:
    case Op::Scatter: return i != 1;
    case Op::Attention: return i < 3 || (i == 3 && i < static_cast<int>(inputs.size()) && is_float(inputs[3].dtype));
    default: return differentiability(op) == Differentiability::differentiable;
  }
}

bool has_vjp_rule(Op op) { return vjp::rule_table()[static_cast<size_t>(op)] != nullptr; }

Expected<std::vector<ValueId>> gradients(Graph& g, ValueId loss, std::span<const ValueId> wrt,
                                         const GradientOptions& options) {
  RLX_ASSIGN_OR_RETURN(Gradients r, differentiate(g, loss, wrt, options));
  return std::move(r.grads);
}

Expected<Gradients> differentiate(Graph& g, ValueId loss, std::span<const ValueId> wrt,
                                  const GradientOptions& options) {
  if (g.level != IrLevel::graph)
    return error(ErrorCode::invalid_argument, "autodiff works on graph-level graphs (before legalization)");
  const ValueId nv = static_cast<ValueId>(g.values.size());
  if (loss < 0 || loss >= nv) return error(ErrorCode::invalid_argument, "the loss %", loss, " is not a value of the graph");
  const TensorType loss_type = g.type(loss);
  if (!is_float(loss_type.dtype) || !one_element(loss_type))
    return error(ErrorCode::invalid_argument, "the loss ", g.value_label(loss), " must be a float value with one element, got ",
                 loss_type.to_string());
  for (ValueId v : wrt)
    if (v < 0 || v >= nv) return error(ErrorCode::invalid_argument, "gradient requested for %", v, ", which is not a value of the graph");
  const size_t num_nodes = g.nodes.size();

  // active: depends on some wrt value; relevant: the loss depends on it
  std::vector<char> active(nv, 0), relevant(nv, 0);
  for (ValueId v : wrt) active[v] = 1;
  for (size_t i = 0; i < num_nodes; ++i) {
    bool any = false;
    for (ValueId v : g.nodes[i].inputs) any |= active[v] != 0;
    if (any)
      for (ValueId v : g.nodes[i].outputs) active[v] = 1;
  }
  relevant[loss] = 1;
  for (size_t i = num_nodes; i-- > 0;) {
    bool any = false;
    for (ValueId v : g.nodes[i].outputs) any |= relevant[v] != 0;
    if (any)
      for (ValueId v : g.nodes[i].inputs) relevant[v] = 1;
  }

  std::vector<ValueId> grad(nv, kNoValue);
  std::vector<ValueId> reuse;
  {
    NamingBuilder nb(g, options.name_prefix + "/seed");
    OpBuilder o(nb);
    RLX_ASSIGN_OR_RETURN(Sizes ls, static_sizes(loss_type.shape, "loss shape"));
    // 1 + 0 * iota rather than a constant: constant folding would otherwise fold the whole
    // chain of seed-only gradient ops (mean, broadcast, ...) into materialized constants
    ValueId one = o.add(vjp::zeros(o, loss_type.dtype, {1}), o.scalar(1.0, loss_type.dtype));
    grad[loss] = o.reshape(one, std::vector<int64_t>(ls));
    RLX_TRY(o.status());
  }
  grad.resize(g.values.size(), kNoValue);
  const auto& rules = vjp::rule_table();

  for (size_t idx = num_nodes; idx-- > 0;) {
    const int32_t ni = static_cast<int32_t>(idx);
    Node n = g.nodes[idx];
    std::vector<ValueId> out_grads;
    bool any_grad = false;
    for (ValueId v : n.outputs) {
      out_grads.push_back(static_cast<size_t>(v) < grad.size() ? grad[v] : kNoValue);
      any_grad |= out_grads.back() != kNoValue;
    }
    if (!any_grad) continue;
    std::vector<TensorType> in_types, out_types;
    for (ValueId v : n.inputs) in_types.push_back(g.type(v));
    for (ValueId v : n.outputs) out_types.push_back(g.type(v));
    std::vector<char> needs(n.inputs.size(), 0);
    bool any_need = false;
    for (size_t j = 0; j < n.inputs.size(); ++j) {
      needs[j] = active[n.inputs[j]] && relevant[n.inputs[j]];
      any_need |= needs[j] != 0;
    }
    if (!any_need) continue;
    const Differentiability d = differentiability(n.op);
    if (d != Differentiability::differentiable)
      return error(ErrorCode::invalid_argument, "cannot differentiate through ", g.node_label(ni),
                   ": ", op_name(n.op), " is not differentiable, yet the loss ", g.value_label(loss),
                   " depends on a value the gradient is requested for only through it");
    any_need = false;
    for (size_t j = 0; j < n.inputs.size(); ++j) {
      if (!needs[j]) continue;
      if (!input_is_differentiable(n.op, static_cast<int>(j), in_types)) {
        needs[j] = 0;
        continue;
      }
      if (!is_float(in_types[j].dtype)) {
        const ValueId v = n.inputs[j];
        const int32_t p = g.values[v].producer;
        std::string from = p >= 0 ? cat(", produced by ", g.node_label(p)) : std::string();
        return error(ErrorCode::invalid_argument, "cannot differentiate through ", g.node_label(ni), ": its input ", j, " (",
                     g.value_label(v), ") is ", in_types[j].to_string(), from,
                     is_complex(in_types[j].dtype) ? "; autodiff has no complex (c64) gradients"
                                                   : "; integer and bool values carry no gradient");
      }
      any_need = true;
    }
    if (!any_need) continue;
    for (const TensorType& t : in_types) RLX_TRY(require_static(g, ni, t));
    for (const TensorType& t : out_types) RLX_TRY(require_static(g, ni, t));
    const vjp::Rule rule = rules[static_cast<size_t>(n.op)];
    if (!rule)
      return error(ErrorCode::unsupported, "autodiff has no rule for ", g.node_label(ni));
    const std::string label = n.name.empty() ? cat("%", n.outputs[0]) : n.name;
    NamingBuilder nb(g, cat(options.name_prefix, "/", label));
    OpBuilder o(nb);
    vjp::Ctx c{o, n, in_types, out_types, out_grads, needs, &reuse};
    std::vector<ValueId> in_grads(n.inputs.size(), kNoValue);
    Status s = rule(c, in_grads);
    if (s.is_ok()) s = o.status();
    if (!s.is_ok()) return s.with_context(cat("gradient of ", g.node_label(ni)));
    grad.resize(g.values.size(), kNoValue);
    for (size_t j = 0; j < n.inputs.size(); ++j) {
      if (!needs[j] || in_grads[j] == kNoValue) continue;
      const ValueId gi = in_grads[j];
      if (g.type(gi) != in_types[j])
        return error(ErrorCode::internal, "the gradient rule of ", g.node_label(ni), " gave ", g.type(gi).to_string(),
                     " for input ", j, " of type ", in_types[j].to_string());
      const ValueId v = n.inputs[j];
      if (grad[v] == kNoValue) {
        grad[v] = gi;
      } else {
        grad[v] = o.add(grad[v], gi);
        RLX_TRY(o.status());
        grad.resize(g.values.size(), kNoValue);
      }
    }
  }

  Gradients result;
  result.reuse = std::move(reuse);
  NamingBuilder nb(g, options.name_prefix + "/zeros");
  OpBuilder o(nb);
  for (ValueId v : wrt) {
    if (static_cast<size_t>(v) < grad.size() && grad[v] != kNoValue) {
      result.grads.push_back(grad[v]);
      continue;
    }
    const TensorType& t = g.type(v);
    if (!is_float(t.dtype))
      return error(ErrorCode::invalid_argument, "gradient requested for ", g.value_label(v), ", which is ",
                   t.to_string(), "; only float values have gradients");
    RLX_ASSIGN_OR_RETURN(Sizes s, static_sizes(t.shape, "gradient shape"));
    result.grads.push_back(vjp::zeros(o, t.dtype, s));
  }
  RLX_TRY(o.status());
  return result;
}

}  // namespace rlx::train
