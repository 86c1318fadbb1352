// rlx devices, rlx info, rlx explain.
#include <cstdio>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "precision.h"
#include "rlx/model_io.h"

namespace rlx::cli {

int cmd_devices(int argc, char** argv) {
  auto args = parse_args(argc, argv, 2, {}, {});
  if (!args) return report_error(args.status());
  for (const DeviceInfo& d : list_devices()) {
    if (d.available) {
      std::printf("%-8s available    %s\n", d.name.c_str(), d.description.c_str());
    } else {
      std::printf("%-8s unavailable  %s\n", d.name.c_str(), d.reason.c_str());
    }
  }
  return kOk;
}

int cmd_info(int argc, char** argv) {
  auto args = parse_args(argc, argv, 2, {}, {});
  if (!args) return report_error(args.status());
  if (args->positional.size() != 1) return report_error(error(ErrorCode::invalid_argument, "usage: rlx info MODEL"));
  auto m = load_model(args->positional[0]);
  if (!m) return report_error(m.status());
  const Graph& g = m->graph;
  std::printf("model:   %s\nformat:  %s\ngraph:   @%s, %zu nodes\n", args->positional[0].c_str(), m->format.c_str(),
              g.name.c_str(), g.nodes.size());
  for (const auto& [k, v] : m->metadata) std::printf("meta:    %s = %s\n", k.c_str(), v.c_str());
  for (ValueId v : g.inputs)
    std::printf("input:   %s %s\n", g.value_label(v).c_str(), g.type(v).to_string().c_str());
  for (ValueId v : g.outputs)
    std::printf("output:  %s %s\n", g.value_label(v).c_str(), g.type(v).to_string().c_str());
  std::map<std::string, int> ops;
  int64_t params = 0;
  size_t bytes = 0;
  std::vector<std::string> weights;
  for (const Node& n : g.nodes) {
    ++ops[std::string(op_name(n.op))];
    if (n.op == Op::Param) {
      const TensorType& t = g.type(n.outputs[0]);
      auto s = static_sizes(t.shape);
      int64_t cnt = s ? numel(*s) : 0;
      params += cnt;
      bytes += dtype_bytes(t.dtype, static_cast<size_t>(cnt));
      weights.push_back(n.attrs.s("name") + " " + t.to_string() + (g.weights.count(n.attrs.s("name")) ? "" : " (no data)"));
    }
  }
  // files that hold only weights (safetensors, GGUF) list them from the weight store
  if (g.nodes.empty()) {
    for (const auto& [name, t] : g.weights) {
      params += t.numel();
      bytes += t.nbytes();
      weights.push_back(name + " " + t.type().to_string());
    }
  }
  std::string opline;
  for (const auto& [k, v] : ops) opline += (opline.empty() ? "" : ", ") + k + " x" + std::to_string(v);
  if (!opline.empty()) std::printf("ops:     %s\n", opline.c_str());
  std::printf("params:  %lld (%zu bytes)\n", static_cast<long long>(params), bytes);
  for (const std::string& w : weights) std::printf("tensor:  %s\n", w.c_str());
  return kOk;
}

int cmd_explain(int argc, char** argv) {
  auto args = parse_args(argc, argv, 2, {"kernels"}, {"device", "policy", "dims", "json", "precision"});
  if (!args) return report_error(args.status());
  if (args->positional.size() != 1)
    return report_error(error(ErrorCode::invalid_argument, "usage: rlx explain MODEL [--device D]"));
  auto m = load_model(args->positional[0]);
  if (!m) return report_error(m.status());
  auto policy = policy_from(*args);
  if (!policy) return report_error(policy.status());
  DimBindings dims;
  if (auto d = args->get("dims")) {
    auto p = parse_dims(*d);
    if (!p) return report_error(p.status());
    dims = *p;
  }
  std::string device = args->get("device").value_or(default_device_name());
  if (args->has("precision")) {
    // the graph that run and bench compile under --precision (weights first, so they fold)
    if (auto w = synthesize_missing_weights(m->graph, 7); !w) return report_error(w.status());
    if (auto narrowed = apply_precision(m->graph, args->get("precision"), device); !narrowed)
      return report_error(narrowed.status());
  }
  auto report = explain(m->graph, device, *policy, dims);
  if (!report) return report_error(report.status());
  std::fputs(report->to_text().c_str(), stdout);
  if (auto j = args->get("json")) {
    std::ofstream f(*j);
    f << report->to_json().dump(2) << "\n";
    if (!f) return report_error(error(ErrorCode::io_error, "cannot write ", *j));
  }
  if (args->has("kernels") && report->ok()) {
    if (auto w = synthesize_missing_weights(m->graph, 7); !w) return report_error(w.status());
    auto model = Model::compile(m->graph, {.device = device, .policy = *policy, .dims = report->bindings});
    if (!model) return report_error(model.status());
    auto var = (*model)->prepare(report->bindings);
    if (!var) return report_error(var.status());
    std::fputs((*var)->executable->stats().kernel_listing.c_str(), stdout);
  }
  return report->ok() ? kOk : kFailed;
}

}  // namespace rlx::cli
