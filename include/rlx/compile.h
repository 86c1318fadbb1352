// rlx/compile.h: compiling a graph for a device and running it.
//
//   auto model = rlx::Model::compile(graph, {.device = "cpu"});
//   auto outputs = model->run(inputs);   // binds symbolic dims from the inputs' shapes
//
// A Model keeps one compiled variant per binding of the graph's symbolic dimensions.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "rlx/compile_options.h"
#include "rlx/device.h"
#include "rlx/dispatch.h"
#include "rlx/graph.h"
#include "rlx/tensor.h"

namespace rlx {

// Substitutes bindings for symbolic dims and re-infers every type; the result has static
// shapes wherever the bindings and the inputs determine them. Errors name the node.
Expected<Graph> bind_graph(const Graph& g, const DimBindings& dims);

// Bindings implied by input sizes; errors name the input and dimension that disagree.
Expected<DimBindings> bindings_from_inputs(const Graph& g, std::span<const Tensor> inputs);

// The dispatch report of `g` on `device` (symbols not in `dims` are bound to 1).
Expected<DispatchReport> explain(const Graph& g, const std::string& device, const DispatchPolicy& policy,
                                 const DimBindings& dims = {});

// One compiled variant: the legalized graph, its report, and the device executable.
struct CompiledVariant {
  DimBindings bindings;
  Graph primitive_graph;
  DispatchReport report;
  std::unique_ptr<Executable> executable;
};

class Model {
 public:
  // Verifies `g` and remembers it; variants are compiled on first use (or by prepare).
  static Expected<std::unique_ptr<Model>> compile(Graph g, CompileOptions options = {});

  // Compiles (or finds) the variant for these bindings.
  Expected<CompiledVariant*> prepare(const DimBindings& dims);
  // Runs with symbolic dims bound from the inputs. A graph with data-dependent ops (nonzero,
  // unique, non_max_suppression, range, top_k, loop) runs in stages: the device computes each such node's inputs,
  // the host the node itself, whose output size binds its `count` symbol for what follows;
  // each stage is compiled once per binding (docs/ir.md, "Data-dependent shapes").
  Expected<std::vector<Tensor>> run(std::span<const Tensor> inputs);
  // The variant the inputs select, for running into preallocated outputs. A graph with
  // data-dependent ops has none (an error that says so; run() stages it).
  Expected<CompiledVariant*> variant_for(std::span<const Tensor> inputs);

  const Graph& graph() const { return graph_; }
  // Whether the graph has data-dependent ops (run() stages it; it has no single variant).
  bool staged() const { return data_dependent_; }
  const Device& device() const { return *device_; }
  const CompileOptions& options() const { return options_; }

 private:
  Model(Graph g, CompileOptions o, std::shared_ptr<const Device> d)
      : graph_(std::move(g)), options_(std::move(o)), device_(std::move(d)) {}
  Expected<CompiledVariant*> staged_variant(int key, const Graph& g, const DimBindings& dims);
  Expected<std::vector<Tensor>> run_staged(std::span<const Tensor> inputs);
  // A loop node (src/runtime/loop.cpp): its body, compiled once as a model of its own on this
  // device, run iteration by iteration; `iterations` receives the count it ran.
  Expected<std::vector<Tensor>> run_loop(const Graph& g, const Node& n, std::span<const Tensor> args,
                                         const std::string& label, const DimBindings& dims, int64_t& iterations);
  Graph graph_;
  CompileOptions options_;
  std::shared_ptr<const Device> device_;
  bool data_dependent_ = false;
  std::mutex mu_;
  std::map<DimBindings, std::unique_ptr<CompiledVariant>> variants_;
  // run_staged's variants by stage (2s: the inputs of stage s's host node, 2s + 1: the rest)
  std::map<std::pair<int, DimBindings>, std::unique_ptr<CompiledVariant>> staged_;
  // loop bodies by their text
  std::map<std::string, std::unique_ptr<Model>> loop_bodies_;
};

}  // namespace rlx
