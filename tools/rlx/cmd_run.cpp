// rlx run, rlx bench.
#include <algorithm>
#include <chrono>
#include <sys/stat.h>

#include <filesystem>

#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "precision.h"
#include "models/decoder.h"
#include "rlx/model_io.h"
#include "rlx/npy.h"
#include "rlx/onnx.h"
#include "rlx/rten.h"

namespace rlx::cli {
namespace {

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

struct Loaded {
  LoadedModel model;
  DispatchPolicy policy;
  DimBindings dims;
  std::string device;
};

bool ends_with(const std::string& s, const std::string& suffix);

Expected<Loaded> load_common(const Args& a) {
  if (a.positional.size() != 1) return error(ErrorCode::invalid_argument, "expected one MODEL argument");
  Loaded l;
  const std::string& path = a.positional[0];
  if (!std::filesystem::is_directory(path) && ends_with(path, ".gguf") && models::is_decoder_model(path)) {
    // a decoder GGUF file (llama.cpp's block formats or rlx quantize's int4_g128): the prefill step
    // graph a decoder folder gives (load_model alone would give the weights and no nodes)
    RLX_ASSIGN_OR_RETURN(models::DecoderWeights w, models::load_decoder(path));
    RLX_ASSIGN_OR_RETURN(l.model.graph, models::build_decoder(w, models::standalone_step_options()));
    l.model.format = cat("GGUF (", models::family_name(w.config.family), " decoder, prefill step with a 256-slot KV cache)");
  } else {
    RLX_ASSIGN_OR_RETURN(l.model, load_model(path));
  }
  RLX_ASSIGN_OR_RETURN(l.policy, policy_from(a));
  if (auto d = a.get("dims")) {
    RLX_ASSIGN_OR_RETURN(l.dims, parse_dims(*d));
  }
  l.device = a.get("device").value_or(default_device_name());
  return l;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// rlx run MODEL.onnx with inputs from --inputs DIR (input_N.pb in graph-input order, or
// NAME.npy / NAME.pb by input name) and --input NAME=FILE; outputs to --out DIR as
// output_N.pb (TensorProto, or SequenceProto / OptionalProto for outputs declared so, as in
// ONNX's test_data_set folders) and NAME.npy (a sequence's elements as NAME_K.npy).
int run_onnx(const Args& a) {
  const std::string path = a.positional[0];
  auto sig = onnx::read_signature(path);
  if (!sig) return report_error(sig.status());
  std::map<std::string, onnx::Value> inputs;
  auto kind_of = [&](const std::string& name) {
    for (size_t i = 0; i < sig->inputs.size(); ++i)
      if (sig->inputs[i] == name) return sig->input_kinds[i];
    return onnx::ValueKind::tensor;
  };
  auto read_any = [&](const std::string& name, const std::string& file) -> Expected<onnx::Value> {
    if (ends_with(file, ".npy")) {
      RLX_ASSIGN_OR_RETURN(Tensor t, read_npy(file));
      return onnx::Value::of(std::move(t));
    }
    return onnx::read_value_file(file, kind_of(name));
  };
  auto known = [&](const std::string& name) {
    return std::find(sig->inputs.begin(), sig->inputs.end(), name) != sig->inputs.end();
  };
  if (auto dir = a.get("inputs")) {
    for (size_t i = 0; i < sig->inputs.size(); ++i) {
      std::string base = *dir + "/";
      for (const std::string& file : {base + "input_" + std::to_string(i) + ".pb", base + sig->inputs[i] + ".pb",
                                      base + sig->inputs[i] + ".npy"}) {
        struct stat st;
        if (stat(file.c_str(), &st) != 0) continue;
        auto v = read_any(sig->inputs[i], file);
        if (!v) return report_error(v.status());
        inputs[sig->inputs[i]] = *v;
        break;
      }
    }
  }
  for (const std::string& spec : a.all("input")) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos) return report_error(error(ErrorCode::invalid_argument, "--input expects NAME=FILE"));
    std::string name = spec.substr(0, eq);
    if (!known(name)) return report_error(error(ErrorCode::invalid_argument, "the model has no input named '", name, "'"));
    auto v = read_any(name, spec.substr(eq + 1));
    if (!v) return report_error(v.status());
    inputs[name] = *v;
  }
  std::string missing;
  for (const std::string& n : sig->inputs)
    if (!inputs.count(n)) missing += (missing.empty() ? "" : ", ") + n;
  if (!missing.empty())
    return report_error(error(ErrorCode::invalid_argument, path, ": no value for input(s) ", missing,
                              " (give --inputs DIR with input_N.pb or NAME.npy files, or --input NAME=FILE)"));
  std::string device = a.get("device").value_or(default_device_name());
  double t0 = now_ms();
  auto r = onnx::load_and_run(path, inputs, device);
  if (!r) return report_error(r.status());
  double t1 = now_ms();
  std::printf("model:    %s (%s, opset %s)\ndevice:   %s\n", path.c_str(), r->model.format.c_str(),
              r->model.metadata["opset"].c_str(), device.c_str());
  auto npy_name = [](std::string name) {
    for (char& c : name)
      if (c == '/' || c == ':') c = '_';
    return name;
  };
  for (size_t i = 0; i < r->values.size(); ++i) {
    const onnx::Value& v = r->values[i];
    const std::string& name = sig->outputs[i];
    if (v.kind == onnx::Value::Kind::tensor) std::printf("output %s: %s\n", name.c_str(), v.tensor.to_string(8).c_str());
    else std::printf("output %s: %s\n", name.c_str(), v.to_string().c_str());
    for (size_t k = 0; k < v.strings.size() && k < 8; ++k) std::printf("  [%zu]: '%s'\n", k, v.strings[k].c_str());
    for (size_t k = 0; k < v.elements.size(); ++k)
      std::printf("  [%zu]: %s\n", k, v.elements[k].to_string(8).c_str());
    if (auto dir = a.get("out")) {
      Status s = onnx::write_value_file(*dir + "/output_" + std::to_string(i) + ".pb", v, sig->output_kinds[i], name);
      if (!s.is_ok()) return report_error(s);
      if (v.kind == onnx::Value::Kind::tensor) s = write_npy(*dir + "/" + npy_name(name) + ".npy", v.tensor);  // strings: .pb only
      for (size_t k = 0; k < v.elements.size() && s.is_ok(); ++k)
        s = write_npy(*dir + "/" + npy_name(name) + "_" + std::to_string(k) + ".npy", v.elements[k]);
      if (!s.is_ok()) return report_error(s);
    }
  }
  std::printf("time:     import, compile and run %.1f ms\n", t1 - t0);
  return kOk;
}

// rlx run MODEL.rten --input NAME=FILE (.npy or .pb)...: as run_onnx, the inputs are given to
// the import (an rten file goes through the ONNX importer), so their sizes make shapes static
// (convolutions need that); outputs to --out DIR as NAME.npy.
int run_rten(const Args& a) {
  const std::string path = a.positional[0];
  onnx::LoadOptions opts;
  for (const std::string& spec : a.all("input")) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos) return report_error(error(ErrorCode::invalid_argument, "--input expects NAME=FILE"));
    const std::string file = spec.substr(eq + 1);
    auto t = ends_with(file, ".npy") ? read_npy(file) : onnx::read_tensor_file(file);
    if (!t) return report_error(t.status());
    opts.input_values[spec.substr(0, eq)] = *t;
  }
  std::string device = a.get("device").value_or(default_device_name());
  double t0 = now_ms();
  auto m = rten::load(path, opts);
  if (!m) return report_error(m.status());
  const Graph& g = m->graph;
  std::vector<Tensor> feeds;
  for (ValueId v : g.inputs) {
    auto it = opts.input_values.find(g.values[v].name);
    if (it == opts.input_values.end())
      return report_error(error(ErrorCode::invalid_argument, path, ": no value for input '", g.values[v].name,
                                "' (give --input NAME=FILE for every input)"));
    feeds.push_back(it->second);
  }
  for (const auto& [name, t] : opts.input_values) {
    (void)t;
    bool known = false;
    for (ValueId v : g.inputs) known |= g.values[v].name == name;
    if (!known && !m->metadata.count("folded_input." + name))
      return report_error(error(ErrorCode::invalid_argument, "the model has no input named '", name, "'"));
  }
  auto model = Model::compile(g, {.device = device});
  if (!model) return report_error(model.status());
  auto outs = (*model)->run(feeds);
  if (!outs) return report_error(outs.status());
  double t1 = now_ms();
  std::printf("model:    %s (%s)\ndevice:   %s\n", path.c_str(), m->format.c_str(), device.c_str());
  for (size_t i = 0; i < outs->size(); ++i) {
    std::string name = g.values[g.outputs[i]].name;
    std::printf("output %s: %s\n", name.c_str(), (*outs)[i].to_string(8).c_str());
    if (auto dir = a.get("out")) {
      for (char& c : name)
        if (c == '/' || c == ':') c = '_';
      if (Status s = write_npy(*dir + "/" + name + ".npy", (*outs)[i]); !s) return report_error(s);
    }
  }
  std::printf("time:     import, compile and run %.1f ms\n", t1 - t0);
  return kOk;
}

// A graph with data-dependent ops (nonzero, unique, non_max_suppression) has no single compiled
// variant: Model::run stages it, and the dispatch shown is explain's, with the host nodes.
int run_staged(const Args& a, const Graph& g, Model& model, const std::vector<Tensor>& inputs, const std::string& device,
               const DispatchPolicy& policy) {
  double t0 = now_ms();
  auto outs = model.run(inputs);
  if (!outs) return report_error(outs.status());
  double t1 = now_ms();
  auto again = model.run(inputs);
  if (!again) return report_error(again.status());
  double t2 = now_ms();
  auto rep = explain(g, device, policy, model.options().dims);
  if (!rep) return report_error(rep.status());
  std::printf("model:    %s\ndevice:   %s (staged: data-dependent output sizes run on the host)\n",
              a.positional[0].c_str(), device.c_str());
  std::printf("dispatch: %s\n", rep->summary().c_str());
  for (const NodeDecision& d : rep->nodes)
    std::printf("  %-24s %-12s %-10s %s\n", d.name.c_str(), std::string(op_name(d.op)).c_str(),
                std::string(dispatch_path_name(d.path)).c_str(), d.how.c_str());
  for (size_t i = 0; i < outs->size(); ++i) {
    const Tensor& t = (*outs)[i];
    std::printf("output %s: %s\n", g.value_label(g.outputs[i]).c_str(), t.to_string(8).c_str());
    if (auto dir = a.get("out")) {
      std::string name = g.values[g.outputs[i]].name.empty() ? "output_" + std::to_string(i) : g.values[g.outputs[i]].name;
      for (char& c : name)
        if (c == '/' || c == ':') c = '_';
      if (Status s = write_npy(*dir + "/" + name + ".npy", t); !s) return report_error(s);
    }
  }
  std::printf("time:     compile and first run %.1f ms, steady run %.3f ms\n", t1 - t0, t2 - t1);
  return kOk;
}

}  // namespace

int cmd_run(int argc, char** argv) {
  auto args = parse_args(argc, argv, 2, {}, {"device", "policy", "dims", "input", "inputs", "out", "seed", "tp", "pp", "micro-batches", "precision"});
  if (!args) return report_error(args.status());
  if (auto dir = args->get("out"); dir) {
    if (Status s = make_output_dir(*dir, "--out"); !s) return report_error(s);
  }
  if (args->has("tp") || args->has("pp")) return run_parallel(*args);  // cmd_run_parallel.cpp
  if (args->positional.size() == 1 && ends_with(args->positional[0], ".onnx") &&
      (args->get("inputs") || !args->all("input").empty()))
    return run_onnx(*args);
  if (args->positional.size() == 1 && ends_with(args->positional[0], ".rten") && !args->all("input").empty() &&
      !args->has("precision"))
    return run_rten(*args);
  auto l = load_common(*args);
  if (!l) return report_error(l.status());
  Graph& g = l->model.graph;
  auto synthesized_or = synthesize_missing_weights(g, 7);
  if (!synthesized_or) return report_error(synthesized_or.status());
  const int synthesized = *synthesized_or;
  auto narrowed = apply_precision(g, args->get("precision"), l->device);  // after the weights exist, so they fold
  if (!narrowed) return report_error(narrowed.status());
  // inputs: given by name as .npy, the rest synthesized
  std::map<std::string, Tensor> given;
  for (const std::string& spec : args->all("input")) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos) return report_error(error(ErrorCode::invalid_argument, "--input expects NAME=FILE.npy"));
    auto t = read_npy(spec.substr(eq + 1));
    if (!t) return report_error(t.status());
    given[spec.substr(0, eq)] = *t;
  }
  for (const auto& [name, t] : given) {
    bool found = false;
    for (ValueId v : g.inputs) found |= g.values[v].name == name;
    if (!found) return report_error(error(ErrorCode::invalid_argument, "the model has no input named '", name, "'"));
  }
  // bind symbols from given inputs first, then defaults of 1
  DimBindings dims = l->dims;
  for (ValueId v : g.inputs) {
    auto it = given.find(g.values[v].name);
    if (it == given.end()) continue;
    const Shape& s = g.values[v].type.shape;
    for (size_t d = 0; d < s.size() && d < it->second.sizes().size(); ++d)
      if (s[d].is_symbol()) dims.emplace(s[d].symbol_name(), it->second.sizes()[d]);
  }
  for (ValueId v : g.inputs)
    for (const Dim& d : g.values[v].type.shape)
      if (d.is_symbol()) dims.emplace(d.symbol_name(), 1);
  auto seed = args->seed("seed", 1);
  if (!seed) return report_error(seed.status());
  auto inputs = synthesize_inputs(g, dims, *seed);
  if (!inputs) return report_error(inputs.status());
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    auto it = given.find(g.values[g.inputs[i]].name);
    if (it != given.end()) (*inputs)[i] = it->second;
  }
  auto model = Model::compile(g, {.device = l->device, .policy = l->policy, .dims = dims});
  if (!model) return report_error(model.status());
  if ((*model)->staged()) return run_staged(*args, g, **model, *inputs, l->device, l->policy);
  double t0 = now_ms();
  auto var = (*model)->variant_for(*inputs);
  if (!var) return report_error(var.status());
  double t1 = now_ms();
  auto outs = (*var)->executable->run(*inputs);
  if (!outs) return report_error(outs.status());
  double t2 = now_ms();
  // a second run shows the steady state (kernels compiled, weights packed)
  auto again = (*var)->executable->run(*inputs);
  if (!again) return report_error(again.status());
  double t3 = now_ms();
  const DispatchReport& rep = (*var)->report;
  std::printf("model:    %s (%s)\ndevice:   %s\n", args->positional[0].c_str(), l->model.format.c_str(), l->device.c_str());
  if (synthesized) std::printf("weights:  %d without data in the file, filled with seeded random values\n", synthesized);
  if (*narrowed) std::printf("precision: %s (%d matrix products / convolutions narrowed, the rest f32)\n",
                             args->get("precision")->c_str(), *narrowed);
  std::printf("dispatch: %s\n", rep.summary().c_str());
  for (const NodeDecision& d : rep.nodes)
    std::printf("  %-24s %-12s %-10s %s\n", d.name.c_str(), std::string(op_name(d.op)).c_str(),
                std::string(dispatch_path_name(d.path)).c_str(), d.how.c_str());
  const ExecStats& st = (*var)->executable->stats();
  std::printf("kernels:  %d native, %d generated; arena %zu bytes\n", st.native_kernels, st.generated_kernels,
              st.arena_bytes);
  for (size_t i = 0; i < outs->size(); ++i) {
    const Tensor& t = (*outs)[i];
    std::printf("output %s: %s\n", g.value_label(g.outputs[i]).c_str(), t.to_string(8).c_str());
    if (auto dir = args->get("out")) {
      std::string name = g.values[g.outputs[i]].name.empty() ? "output_" + std::to_string(i) : g.values[g.outputs[i]].name;
      for (char& c : name)
        if (c == '/' || c == ':') c = '_';
      Status s = write_npy(*dir + "/" + name + ".npy", t);
      if (!s.is_ok()) return report_error(s);
    }
  }
  std::printf("time:     compile %.1f ms, first run %.3f ms, steady run %.3f ms\n", t1 - t0, t2 - t1, t3 - t2);
  return kOk;
}

int cmd_bench(int argc, char** argv) {
  auto args = parse_args(argc, argv, 2, {}, {"device", "policy", "dims", "batch", "seq", "runs", "warmup", "format", "precision"});
  if (!args) return report_error(args.status());
  auto l = load_common(*args);
  if (!l) return report_error(l.status());
  auto batches = parse_int_list(args->get("batch").value_or("1"), "--batch");
  if (!batches) return report_error(batches.status());
  auto seqs = parse_int_list(args->get("seq").value_or("128"), "--seq");
  if (!seqs) return report_error(seqs.status());
  auto runs_or = args->integer("runs", 20, 1, 1000000);
  if (!runs_or) return report_error(runs_or.status());
  auto warmup_or = args->integer("warmup", 3, 0, 1000000);
  if (!warmup_or) return report_error(warmup_or.status());
  const int runs = static_cast<int>(*runs_or), warmup = static_cast<int>(*warmup_or);
  std::string format = args->get("format").value_or("md");
  if (format != "md" && format != "json" && format != "csv")
    return report_error(error(ErrorCode::invalid_argument, "--format must be md, json or csv"));
  Graph& g = l->model.graph;
  if (auto w = synthesize_missing_weights(g, 7); !w) return report_error(w.status());
  if (auto narrowed = apply_precision(g, args->get("precision"), l->device); !narrowed)
    return report_error(narrowed.status());
  auto model = Model::compile(g, {.device = l->device, .policy = l->policy, .dims = l->dims});
  if (!model) return report_error(model.status());
  nlohmann::json records = nlohmann::json::array();
  if (format == "md")
    std::printf("| device | batch | seq | p50 ms | p90 ms | items/s | runs |\n|---|---|---|---|---|---|---|\n");
  if (format == "csv") std::printf("device,batch,seq,p50_ms,p90_ms,items_per_s,runs\n");
  for (int64_t b : *batches)
    for (int64_t s : *seqs) {
      DimBindings dims = batch_seq_bindings(g, b, s, l->dims);
      auto inputs = synthesize_inputs(g, dims, 1);
      if (!inputs) return report_error(inputs.status());
      // a staged model (data-dependent output sizes) times whole runs: its stages, with the
      // host's part and each stage's outputs allocated per run
      Executable* ex = nullptr;
      std::vector<Tensor> outs;
      if (!(*model)->staged()) {
        auto var = (*model)->variant_for(*inputs);
        if (!var) return report_error(var.status());
        ex = (*var)->executable.get();
      }
      auto first = ex ? ex->run(*inputs) : (*model)->run(*inputs);
      if (!first) return report_error(first.status());
      outs = std::move(*first);
      std::vector<double> times;
      for (int i = 0; i < warmup + runs; ++i) {
        double t0 = now_ms();
        Status st = ex ? ex->run_into(*inputs, outs) : (*model)->run(*inputs).status();
        double t1 = now_ms();
        if (!st.is_ok()) return report_error(st);
        if (i >= warmup) times.push_back(t1 - t0);
      }
      std::sort(times.begin(), times.end());
      double p50 = times[times.size() / 2], p90 = times[std::min(times.size() - 1, times.size() * 9 / 10)];
      double items = b * 1000.0 / p50;
      if (format == "md") {
        std::printf("| %s | %lld | %lld | %.3f | %.3f | %.1f | %d |\n", l->device.c_str(), static_cast<long long>(b),
                    static_cast<long long>(s), p50, p90, items, runs);
      } else if (format == "csv") {
        std::printf("%s,%lld,%lld,%.4f,%.4f,%.2f,%d\n", l->device.c_str(), static_cast<long long>(b),
                    static_cast<long long>(s), p50, p90, items, runs);
      } else {
        records.push_back({{"device", l->device}, {"batch", b}, {"seq", s}, {"p50_ms", p50}, {"p90_ms", p90},
                           {"items_per_s", items}, {"runs", runs}});
      }
    }
  if (format == "json") std::printf("%s\n", records.dump(2).c_str());
  return kOk;
}

}  // namespace rlx::cli
