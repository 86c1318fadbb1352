// Binding symbolic dims, explaining, and compiling graphs into runnable variants.
#include "rlx/compile.h"

#include <algorithm>

#include "passes/graph_passes.h"
#include "runtime/reference_eval.h"
#include "passes/schedule.h"
#include "rlx/verify.h"

namespace rlx {

Expected<Graph> bind_graph(const Graph& g, const DimBindings& dims) {
  Graph out;
  out.name = g.name;
  out.level = g.level;
  out.weights = g.weights;
  std::vector<ValueId> map(g.values.size(), kNoValue);
  for (ValueId in : g.inputs) {
    TensorType t = g.values[in].type;
    t.shape = bind_shape(t.shape, dims);
    map[in] = out.add_input(g.values[in].name, t);
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    std::vector<ValueId> ins;
    for (ValueId v : n.inputs) ins.push_back(map[v]);
    auto outs = out.add_node(n.op, ins, n.attrs, n.name, n.origin >= 0 ? n.origin : static_cast<int32_t>(i));
    if (!outs) return std::move(outs).take_status().with_context(cat("binding ", g.node_label(static_cast<int32_t>(i))));
    out.nodes.back().native = n.native;
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      map[n.outputs[k]] = (*outs)[k];
      out.values[(*outs)[k]].name = g.values[n.outputs[k]].name;
      // a recorded static size must agree with what the bound inputs give
      const Shape& rec = g.values[n.outputs[k]].type.shape;
      const Shape& got = out.values[(*outs)[k]].type.shape;
      for (size_t d = 0; d < rec.size() && d < got.size(); ++d)
        if (rec[d].is_static() && got[d].is_static() && rec[d].size() != got[d].size())
          return error(ErrorCode::shape_error, g.node_label(static_cast<int32_t>(i)), ": output ", k, " is ",
                       shape_to_string(got), " once bound, but the graph says ", shape_to_string(rec));
    }
  }
  for (ValueId v : g.outputs) out.outputs.push_back(map[v]);
  return out;
}

Expected<DimBindings> bindings_from_inputs(const Graph& g, std::span<const Tensor> inputs) {
  if (inputs.size() != g.inputs.size())
    return error(ErrorCode::invalid_argument, "graph '", g.name, "' takes ", g.inputs.size(), " inputs, got ",
                 inputs.size());
  DimBindings b;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value& v = g.values[g.inputs[i]];
    const Tensor& t = inputs[i];
    std::string label = v.name.empty() ? cat("input ", i) : cat("input '", v.name, "'");
    if (t.dtype() != v.type.dtype)
      return error(ErrorCode::invalid_argument, label, " must be ", dtype_name(v.type.dtype), ", got ",
                   dtype_name(t.dtype()));
    if (t.rank() != v.type.rank())
      return error(ErrorCode::invalid_argument, label, " must have shape ", shape_to_string(v.type.shape), ", got ",
                   sizes_to_string(t.sizes()));
    for (int d = 0; d < t.rank(); ++d) {
      const Dim& want = v.type.shape[d];
      int64_t got = t.sizes()[d];
      if (want.is_static() && want.size() != got)
        return error(ErrorCode::invalid_argument, label, " dimension ", d, " must be ", want.size(), ", got ", got,
                     " (shape ", sizes_to_string(t.sizes()), ")");
      if (want.is_symbol()) {
        auto [it, fresh] = b.emplace(want.symbol_name(), got);
        if (!fresh && it->second != got)
          return error(ErrorCode::invalid_argument, label, " dimension ", d, " (", want.symbol_name(), ") is ", got,
                       " but another input binds ", want.symbol_name(), " = ", it->second);
      }
    }
  }
  return b;
}

namespace {

void collect_symbols(const Graph& g, DimBindings& dims) {
  for (ValueId in : g.inputs)
    for (const Dim& d : g.values[in].type.shape)
      if (d.is_symbol() && !dims.count(d.symbol_name())) dims[d.symbol_name()] = 1;
}

void attach_kernels(DispatchReport& r, const std::vector<std::pair<std::string, std::vector<int>>>& origins) {
  for (NodeDecision& d : r.nodes)
    for (const auto& [name, nodes] : origins)
      if (std::find(nodes.begin(), nodes.end(), d.node) != nodes.end()) d.kernels.push_back(name);
}

}  // namespace

Expected<DispatchReport> explain(const Graph& g, const std::string& device, const DispatchPolicy& policy,
                                 const DimBindings& dims) {
  RLX_TRY(verify_graph(g));
  RLX_ASSIGN_OR_RETURN(auto dev, get_device(device));
  DimBindings all = dims;
  collect_symbols(g, all);
  RLX_ASSIGN_OR_RETURN(Graph bound, bind_graph(g, all));
  RLX_TRY(passes::simplify(bound, runtime::evaluate_on_reference));
  RLX_ASSIGN_OR_RETURN(LegalizeResult lr, legalize(bound, *dev, policy));
  lr.report.bindings = all;
  if (lr.report.ok()) {
    // the schedule is device independent: name the kernels each node runs in
    auto prog = sched::schedule(lr.graph);
    if (prog) {
      std::vector<std::pair<std::string, std::vector<int>>> origins;
      for (const kir::Step& s : prog->steps)
        origins.push_back(s.native ? std::make_pair(prog->natives[s.index].name, prog->natives[s.index].origins)
                                   : std::make_pair(prog->generated[s.index].name, prog->generated[s.index].origins));
      attach_kernels(lr.report, origins);
    }
  }
  return lr.report;
}

Expected<std::unique_ptr<Model>> Model::compile(Graph g, CompileOptions options) {
  RLX_TRY(verify_graph(g));
  RLX_ASSIGN_OR_RETURN(auto dev, get_device(options.device));
  return std::unique_ptr<Model>(new Model(std::move(g), std::move(options), std::move(dev)));
}

Expected<CompiledVariant*> Model::prepare(const DimBindings& dims) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = variants_.find(dims);
  if (it != variants_.end()) return it->second.get();
  RLX_ASSIGN_OR_RETURN(Graph bound, bind_graph(graph_, dims));
  for (const Value& v : bound.values) {
    if (!is_static(v.type.shape))
      return error(ErrorCode::shape_error, "value ", v.name.empty() ? "?" : v.name, " is still ", v.type.to_string(),
                   " after binding; give sizes for every symbolic dimension");
    // every value must fit in memory before anything is compiled or allocated for it
    if (Status s = check_allocation(v.type.dtype, *static_sizes(v.type.shape), ""); !s) {
      const Node* p = v.producer >= 0 ? &bound.nodes[v.producer] : nullptr;
      return error(ErrorCode::out_of_range, "value '", v.name, "'",
                   p ? cat(" (output of ", op_name(p->op), p->name.empty() ? "" : cat(" node '", p->name, "'"), ")") : "",
                   s.message());
    }
  }
  RLX_TRY(passes::simplify(bound, runtime::evaluate_on_reference));
  RLX_ASSIGN_OR_RETURN(LegalizeResult lr, legalize(bound, *device_, options_.policy));
  lr.report.bindings = dims;
  if (!lr.report.ok()) return lr.report.illegal_error();
  RLX_TRY(verify_graph(lr.graph).with_context("legalized graph"));
  auto var = std::make_unique<CompiledVariant>();
  var->bindings = dims;
  RLX_ASSIGN_OR_RETURN(var->executable, device_->compile(lr.graph, options_));
  var->primitive_graph = std::move(lr.graph);
  var->report = std::move(lr.report);
  attach_kernels(var->report, var->executable->stats().kernel_origins);
  CompiledVariant* p = var.get();
  variants_[dims] = std::move(var);
  return p;
}

Expected<CompiledVariant*> Model::variant_for(std::span<const Tensor> inputs) {
  RLX_ASSIGN_OR_RETURN(DimBindings b, bindings_from_inputs(graph_, inputs));
  for (const auto& [k, v] : options_.dims) b.emplace(k, v);
  return prepare(b);
}

Expected<std::vector<Tensor>> Model::run(std::span<const Tensor> inputs) {
  RLX_ASSIGN_OR_RETURN(CompiledVariant * v, variant_for(inputs));
  return v->executable->run(inputs);
}

}  // namespace rlx
