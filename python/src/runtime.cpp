// Devices, loading models, compiling graphs and running them with NumPy arrays, and the
// dispatch report as Python objects.
#include <pybind11/stl.h>

#include <mutex>

#include <nlohmann/json.hpp>

#include "bindings.h"
#include "rlx/compile.h"
#include "rlx/model_io.h"
#include "rlx/onnx.h"

namespace rlx::py_bind {

namespace {

// A compiled graph: the Model keeps one variant per binding of symbolic dims.
struct Executable {
  std::shared_ptr<Model> model;
  CompiledVariant* last = nullptr;  // the variant of the latest run
  // Runs release the GIL; a compiled variant's arena is not for two runs at once, so runs of
  // one Executable from several Python threads take turns.
  std::shared_ptr<std::mutex> run_mu = std::make_shared<std::mutex>();
};

std::string join_types(const std::vector<TensorType>& ts) {
  std::string s;
  for (const TensorType& t : ts) s += (s.empty() ? "" : ", ") + t.to_string();
  return s;
}

py::object json_to_py(const nlohmann::json& j) {
  return py::module_::import("json").attr("loads")(j.dump());
}

DispatchPolicy policy_from_py(const std::string& p) { return unwrap(DispatchPolicy::parse(p)); }

DimBindings dims_from_py(const py::object& d) {
  if (d.is_none()) return {};
  return d.cast<DimBindings>();
}

// Inputs in graph order from positional arrays and keyword arrays (by input name).
std::vector<Tensor> gather_inputs(const Graph& g, const py::args& args, const py::kwargs& kw) {
  const size_t n = g.inputs.size();
  if (args.size() > n)
    raise(error(ErrorCode::invalid_argument, "the graph has ", n, " inputs, got ", args.size(), " arrays"));
  std::vector<Tensor> in(n);
  std::vector<bool> given(n, false);
  auto take = [&](size_t i, const py::handle& a) {
    const Value& v = g.values[g.inputs[i]];
    const std::string what = "input '" + (v.name.empty() ? std::to_string(i) : v.name) + "'";
    if (given[i]) raise(error(ErrorCode::invalid_argument, what, " given twice"));
    in[i] = tensor_from_array(a, what, &v.type.dtype);
    given[i] = true;
  };
  for (size_t i = 0; i < args.size(); ++i) take(i, args[i]);
  for (auto [k, a] : kw) {
    const std::string name = k.cast<std::string>();
    size_t i = 0;
    while (i < n && g.values[g.inputs[i]].name != name) ++i;
    if (i == n) raise(error(ErrorCode::invalid_argument, "the graph has no input named '", name, "'"));
    take(i, a);
  }
  std::string missing;
  for (size_t i = 0; i < n; ++i)
    if (!given[i]) missing += (missing.empty() ? "" : ", ") + g.value_label(g.inputs[i]);
  if (!missing.empty()) raise(error(ErrorCode::invalid_argument, "no value for input(s) ", missing));
  return in;
}

py::list run_executable(Executable& e, const py::args& args, const py::kwargs& kw) {
  std::vector<Tensor> inputs = gather_inputs(e.model->graph(), args, kw);
  std::vector<Tensor> outs;
  {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(*e.run_mu);
    auto var = e.model->variant_for(inputs);
    if (var.has_value()) {
      e.last = *var;
      auto r = (*var)->executable->run(inputs);
      if (!r.has_value()) {
        py::gil_scoped_acquire gil;
        raise(std::move(r).take_status());
      }
      outs = std::move(*r);
    } else {
      py::gil_scoped_acquire gil;
      raise(std::move(var).take_status());
    }
  }
  py::list l;
  for (const Tensor& t : outs) l.append(array_from_tensor(t));
  return l;
}

}  // namespace

void bind_runtime(py::module_& m) {
  py::class_<DeviceInfo>(m, "DeviceInfo", "A device rlx was built with, available here or not (with the reason).")
      .def_readonly("name", &DeviceInfo::name)
      .def_readonly("available", &DeviceInfo::available)
      .def_readonly("reason", &DeviceInfo::reason, "Why the device is unavailable; empty when available.")
      .def_readonly("description", &DeviceInfo::description)
      .def_property_readonly("dtypes",
                             [](const DeviceInfo& d) {
                               std::vector<std::string> v;
                               for (DType t : d.dtypes) v.emplace_back(dtype_name(t));
                               return v;
                             })
      .def("__repr__", [](const DeviceInfo& d) {
        return "rlx.DeviceInfo(" + d.name + ", " + (d.available ? "available" : "unavailable: " + d.reason) + ")";
      });
  m.def("devices", &list_devices, "Every device rlx was built with, available or not (and why).");
  m.def("default_device", &default_device_name, "The default device name ('cpu').");

  m.def(
      "load",
      [](const std::string& path, const py::object& dims) {
        auto g = std::make_shared<GraphState>();
        LoadedModel lm;
        const bool onnx = path.size() >= 5 && path.compare(path.size() - 5, 5, ".onnx") == 0;
        if (onnx && !dims.is_none()) {
          py::gil_scoped_release nogil;
          onnx::LoadOptions o;
          o.dims = dims_from_py(dims);
          auto r = onnx::load(path, o);
          py::gil_scoped_acquire gil;
          lm = unwrap(std::move(r));
        } else {
          lm = unwrap(load_model(path));
        }
        g->graph = std::move(lm.graph);
        g->format = lm.format;
        g->metadata = std::move(lm.metadata);
        return g;
      },
      py::arg("path"), py::arg("dims") = py::none(),
      "Loads a model as `rlx run` does: .onnx, .gguf, .safetensors, .rlx text IR, or a Hugging Face folder "
      "(BERT, Qwen3). dims (ONNX only) binds symbolic input dims at import.");

  py::class_<NodeDecision>(m, "NodeDecision", "How one graph-level node runs on the device, and why.")
      .def_readonly("node", &NodeDecision::node)
      .def_readonly("name", &NodeDecision::name)
      .def_property_readonly("op", [](const NodeDecision& d) { return std::string(op_name(d.op)); })
      .def_property_readonly("path", [](const NodeDecision& d) { return std::string(dispatch_path_name(d.path)); },
                             "'native', 'common-ir', 'rewritten' or 'illegal'.")
      .def_readonly("how", &NodeDecision::how)
      .def_property_readonly("inputs", [](const NodeDecision& d) { return join_types(d.inputs); })
      .def_property_readonly("outputs", [](const NodeDecision& d) { return join_types(d.outputs); })
      .def_readonly("children", &NodeDecision::children)
      .def_readonly("native_refused", &NodeDecision::native_refused)
      .def_readonly("common_refused", &NodeDecision::common_refused)
      .def_readonly("rewrite_refused", &NodeDecision::rewrite_refused)
      .def_readonly("hint", &NodeDecision::hint)
      .def_readonly("kernels", &NodeDecision::kernels)
      .def("__repr__", [](const NodeDecision& d) {
        return "rlx.NodeDecision(" + d.name + " " + std::string(op_name(d.op)) + ": " +
               std::string(dispatch_path_name(d.path)) + ")";
      });
  py::class_<DispatchReport>(m, "DispatchReport",
                             "The dispatch report: for every node, native / common-ir / rewritten / illegal.")
      .def_readonly("device", &DispatchReport::device)
      .def_readonly("policy", &DispatchReport::policy)
      .def_readonly("bindings", &DispatchReport::bindings)
      .def_readonly("nodes", &DispatchReport::nodes)
      .def_property_readonly("ok", &DispatchReport::ok, "True when no node is illegal.")
      .def_property_readonly("summary", &DispatchReport::summary)
      .def_property_readonly("counts",
                             [](const DispatchReport& r) {
                               py::dict d;
                               for (DispatchPath p : {DispatchPath::native, DispatchPath::common_ir,
                                                      DispatchPath::rewritten, DispatchPath::illegal})
                                 d[py::str(std::string(dispatch_path_name(p)))] = r.count(p);
                               return d;
                             })
      .def("text", &DispatchReport::to_text, "The table `rlx explain` prints.")
      .def("to_json", [](const DispatchReport& r) { return json_to_py(r.to_json()); },
           "The report as `rlx explain --json` writes it, as Python objects.")
      .def("__str__", &DispatchReport::to_text)
      .def("__repr__", [](const DispatchReport& r) { return "rlx.DispatchReport(" + r.device + ": " + r.summary() + ")"; });

  m.def(
      "explain",
      [](const GraphState& g, const std::string& device, const std::string& policy, const py::object& dims) {
        return unwrap(explain(g.graph, device, policy_from_py(policy), dims_from_py(dims)));
      },
      py::arg("graph"), py::arg("device") = "cpu", py::arg("policy") = "prefer-native", py::arg("dims") = py::none(),
      "The dispatch report of a graph on a device without compiling kernels (symbols not in dims bound to 1). "
      "Illegal nodes do not raise: check report.ok.");

  py::class_<Executable>(m, "Executable",
                         "A compiled graph. Call it (or run) with NumPy arrays, positionally in input order or by "
                         "input name; outputs are NumPy arrays over rlx's output memory (no copy), which export "
                         "DLPack (torch.from_dlpack). Symbolic dims are bound from the inputs, one compiled variant "
                         "per binding.")
      .def("run", &run_executable, "Runs; returns the list of outputs.")
      .def("__call__",
           [](Executable& e, const py::args& args, const py::kwargs& kw) -> py::object {
             py::list l = run_executable(e, args, kw);
             if (l.size() == 1) return l[0];
             return py::tuple(l);
           },
           "Runs; returns one array for one output, else a tuple.")
      .def_property_readonly(
          "report",
          [](Executable& e) {
            if (e.last) return e.last->report;
            // not run yet: compile the variant of the dims given at compile time
            py::gil_scoped_release nogil;
            auto v = e.model->prepare(e.model->options().dims);
            py::gil_scoped_acquire gil;
            e.last = unwrap(std::move(v));
            return e.last->report;
          },
          "The dispatch report of the latest run's variant (before any run: of the dims given to compile).")
      .def_property_readonly("device", [](const Executable& e) { return e.model->device().name(); })
      .def_property_readonly(
          "stats",
          [](const Executable& e) {
            py::dict d;
            if (!e.last) return d;
            const ExecStats& s = e.last->executable->stats();
            d["arena_bytes"] = s.arena_bytes;
            d["weight_bytes"] = s.weight_bytes;
            d["native_kernels"] = s.native_kernels;
            d["generated_kernels"] = s.generated_kernels;
            return d;
          },
          "Kernel counts and memory of the latest run's variant.")
      .def("__repr__", [](const Executable& e) {
        return "rlx.Executable(@" + e.model->graph().name + " on " + e.model->device().name() + ")";
      });

  m.def(
      "compile",
      [](const GraphState& g, const std::string& device, const std::string& policy, const py::object& dims) {
        CompileOptions o;
        o.device = device;
        o.policy = policy_from_py(policy);
        o.dims = dims_from_py(dims);
        Graph copy = g.graph;
        Executable e;
        {
          py::gil_scoped_release nogil;
          auto mdl = Model::compile(std::move(copy), o);
          py::gil_scoped_acquire gil;
          e.model = unwrap(std::move(mdl));
        }
        // a graph without symbolic dims is compiled now, so illegal nodes raise here
        bool is_static_graph = true;
        for (ValueId v : g.graph.inputs) is_static_graph = is_static_graph && is_static(g.graph.values[v].type.shape);
        if (is_static_graph || !o.dims.empty()) {
          py::gil_scoped_release nogil;
          auto v = e.model->prepare(o.dims);
          py::gil_scoped_acquire gil;
          e.last = unwrap(std::move(v));
        }
        return e;
      },
      py::arg("graph"), py::arg("device") = "cpu", py::arg("policy") = "prefer-native", py::arg("dims") = py::none(),
      "Compiles a graph for a device. policy: 'prefer-native', 'force-common', 'force-native', or per op "
      "'softmax=force-common,...'. A graph with static shapes (or all dims given) compiles now and raises "
      "rlx.Error listing every illegal node; others compile per binding on first run.");
}

}  // namespace rlx::py_bind
