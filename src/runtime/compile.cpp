// Binding symbolic dims, explaining, and compiling graphs into runnable variants.
#include "rlx/compile.h"

#include <algorithm>

#include "passes/graph_passes.h"
#include "rlx/ir_text.h"
#include "runtime/data_dependent.h"
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
  // data-dependent nodes run on the host between device programs (Model::run): the device's
  // part is the graph without them, their outputs as inputs, counts bound like other dims
  DimBindings all = dims;
  collect_symbols(g, all);
  RLX_ASSIGN_OR_RETURN(Graph bound, bind_graph(g, all));
  std::vector<int32_t> source(g.nodes.size());
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<int32_t>(i);
  std::vector<NodeDecision> host;
  for (int32_t d; (d = runtime::first_data_dependent(bound)) >= 0;) {
    const Node& n = bound.nodes[d];
    all.emplace(n.attrs.s("count"), 1);
    NodeDecision h;
    h.node = source[d];
    h.name = n.name.empty() ? bound.value_label(n.outputs[0]) : n.name;
    h.op = n.op;
    for (ValueId v : n.inputs) h.inputs.push_back(bound.type(v));
    for (ValueId v : n.outputs) h.outputs.push_back(TensorType{bound.type(v).dtype, bind_shape(bound.type(v).shape, all)});
    h.path = DispatchPath::native;
    h.how = n.op == Op::Loop
                ? cat("host: run between device programs, iteration by iteration, its body a compiled program of its own "
                      "on the device; its iteration count binds ", n.attrs.s("count"))
                : cat("host: run between device programs, its output size binding ", n.attrs.s("count"));
    if (n.op == Op::Loop) {  // the body's own decisions, as a rewrite's children
      RLX_ASSIGN_OR_RETURN(Graph body, parse_graph(n.attrs.s("body", ""), "loop body"));
      RLX_ASSIGN_OR_RETURN(DispatchReport br, explain(body, device, policy, {}));
      h.children = std::move(br.nodes);
    }
    // what computes the node's inputs runs on the device too (a stage of its own in a run)
    for (ValueId v : n.inputs)
      if (bound.values[v].producer >= 0) bound.outputs.push_back(v);
    runtime::CutGraph cut = runtime::cut_node(bound, d, h.outputs);
    host.push_back(std::move(h));
    for (int32_t& s : cut.source_node) s = source[s];
    source = std::move(cut.source_node);
    RLX_ASSIGN_OR_RETURN(bound, bind_graph(cut.graph, all));
  }
  RLX_TRY(passes::simplify(bound, runtime::evaluate_on_reference));
  RLX_ASSIGN_OR_RETURN(LegalizeResult lr, legalize(bound, *dev, policy));
  lr.report.bindings = all;
  // (the device's decisions number the nodes of the simplified graph; host ones g's nodes)
  for (NodeDecision& h : host) lr.report.nodes.push_back(std::move(h));
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
  const bool staged = runtime::has_data_dependent(g);
  auto m = std::unique_ptr<Model>(new Model(std::move(g), std::move(options), std::move(dev)));
  m->data_dependent_ = staged;
  return m;
}

namespace {

// Binds g's symbols, checks every size, simplifies, legalizes and compiles for the device.
Expected<std::unique_ptr<CompiledVariant>> compile_variant(const Graph& g, const DimBindings& dims, const Device& device,
                                                           const CompileOptions& options) {
  RLX_ASSIGN_OR_RETURN(Graph bound, bind_graph(g, dims));
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
  RLX_ASSIGN_OR_RETURN(LegalizeResult lr, legalize(bound, device, options.policy));
  lr.report.bindings = dims;
  if (!lr.report.ok()) return lr.report.illegal_error();
  RLX_TRY(verify_graph(lr.graph).with_context("legalized graph"));
  auto var = std::make_unique<CompiledVariant>();
  var->bindings = dims;
  RLX_ASSIGN_OR_RETURN(var->executable, device.compile(lr.graph, options));
  var->primitive_graph = std::move(lr.graph);
  var->report = std::move(lr.report);
  attach_kernels(var->report, var->executable->stats().kernel_origins);
  return var;
}

}  // namespace

Expected<CompiledVariant*> Model::prepare(const DimBindings& dims) {
  if (int32_t d = runtime::first_data_dependent(graph_); d >= 0)
    return error(ErrorCode::invalid_argument, graph_.node_label(d), " has an output shape that depends on the data, "
                 "so this graph has no single compiled variant: Model::run stages it");
  std::lock_guard<std::mutex> lock(mu_);
  auto it = variants_.find(dims);
  if (it != variants_.end()) return it->second.get();
  RLX_ASSIGN_OR_RETURN(auto var, compile_variant(graph_, dims, *device_, options_));
  CompiledVariant* p = var.get();
  variants_[dims] = std::move(var);
  return p;
}

Expected<CompiledVariant*> Model::staged_variant(int key, const Graph& g, const DimBindings& dims) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = staged_.find({key, dims});
  if (it != staged_.end()) return it->second.get();
  RLX_ASSIGN_OR_RETURN(auto var, compile_variant(g, dims, *device_, options_));
  CompiledVariant* p = var.get();
  staged_[{key, dims}] = std::move(var);
  return p;
}

// Stage s computes the inputs of the graph's first data-dependent node (variant key 2s), the
// host runs the node and binds its count, and the node's outputs become inputs of the rest;
// the last graph, with none left, is variant key 2s + 1. What the stages share is computed
// again by each (a stage's device program ends where the data-dependent node starts).
Expected<std::vector<Tensor>> Model::run_staged(std::span<const Tensor> inputs) {
  RLX_ASSIGN_OR_RETURN(DimBindings dims, bindings_from_inputs(graph_, inputs));
  for (const auto& [k, v] : options_.dims) dims.emplace(k, v);
  Graph cur = graph_;
  std::vector<Tensor> feeds(inputs.begin(), inputs.end());
  int stage = 0;
  for (int32_t d; (d = runtime::first_data_dependent(cur)) >= 0; ++stage) {
    const Node& n = cur.nodes[d];
    std::vector<Tensor> args(n.inputs.size());
    std::vector<ValueId> computed;  // each once, though the node may read one several times
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const ValueId v = n.inputs[k];
      if (cur.values[v].producer < 0) {
        const auto pos = std::find(cur.inputs.begin(), cur.inputs.end(), v) - cur.inputs.begin();
        args[k] = feeds[static_cast<size_t>(pos)];
      } else if (std::find(computed.begin(), computed.end(), v) == computed.end()) {
        computed.push_back(v);
      }
    }
    if (!computed.empty()) {
      RLX_ASSIGN_OR_RETURN(CompiledVariant * pre, staged_variant(2 * stage, runtime::with_outputs(cur, computed), dims));
      RLX_ASSIGN_OR_RETURN(std::vector<Tensor> vals, pre->executable->run(feeds));
      for (size_t k = 0; k < n.inputs.size(); ++k)
        if (cur.values[n.inputs[k]].producer >= 0)
          args[k] = vals[static_cast<size_t>(std::find(computed.begin(), computed.end(), n.inputs[k]) - computed.begin())];
    }
    std::vector<Tensor> outs;
    int64_t count = 0;
    if (n.op == Op::Loop) {
      RLX_ASSIGN_OR_RETURN(outs, run_loop(cur, n, args, cur.node_label(d), dims, count));
    } else {
      RLX_ASSIGN_OR_RETURN(outs, runtime::run_data_dependent(n, args, cur.node_label(d)));
      RLX_ASSIGN_OR_RETURN(count, runtime::data_dependent_count(cur, n, outs));
    }
    dims[n.attrs.s("count")] = count;
    const std::vector<TensorType> types = runtime::computed_types(cur, n, outs);
    cur = runtime::cut_node(cur, d, types).graph;
    for (Tensor& t : outs) feeds.push_back(std::move(t));
  }
  RLX_ASSIGN_OR_RETURN(CompiledVariant * last, staged_variant(2 * stage + 1, cur, dims));
  return last->executable->run(feeds);
}

Expected<CompiledVariant*> Model::variant_for(std::span<const Tensor> inputs) {
  RLX_ASSIGN_OR_RETURN(DimBindings b, bindings_from_inputs(graph_, inputs));
  for (const auto& [k, v] : options_.dims) b.emplace(k, v);
  return prepare(b);
}

Expected<std::vector<Tensor>> Model::run(std::span<const Tensor> inputs) {
  if (data_dependent_) return run_staged(inputs);
  RLX_ASSIGN_OR_RETURN(CompiledVariant * v, variant_for(inputs));
  return v->executable->run(inputs);
}

}  // namespace rlx
