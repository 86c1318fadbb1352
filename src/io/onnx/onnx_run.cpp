// Import-and-run for ONNX files with concrete inputs (rlx run, the node-test suite): tensor
// inputs are offered to the import as values it may fold, sequence and optional inputs
// specialize the graph to their structure, string inputs are constants of the import, and
// the outputs are reassembled into the ONNX graph's values (sequences from their element
// outputs, empty optionals from the metadata, string tensors from the import).
#include "onnx_internal.h"
#include "rlx/compile.h"

namespace rlx::onnx {

Expected<RunResult> load_and_run(const std::string& path, const std::map<std::string, Value>& inputs,
                                 const std::string& device) {
  LoadOptions opts;
  std::map<std::string, Tensor> feeds_by_name;  // every graph input the import may leave
  for (const auto& [name, v] : inputs) {
    if (v.kind == Value::Kind::tensor) {
      opts.input_values[name] = v.tensor;
      feeds_by_name[name] = v.tensor;
      continue;
    }
    opts.structured_inputs[name] = v;
    for (size_t k = 0; k < v.elements.size(); ++k) feeds_by_name[onnx_import::element_name(name, k)] = v.elements[k];
  }
  RunResult r;
  std::map<std::string, Value> import_outputs;  // string outputs, computed at import
  RLX_ASSIGN_OR_RETURN(r.model, onnx_import::load_model_file(path, opts, &import_outputs));
  const Graph& g = r.model.graph;
  std::vector<Tensor> feeds;
  for (ValueId v : g.inputs) {
    auto it = feeds_by_name.find(g.values[v].name);
    if (it == feeds_by_name.end())
      return error(ErrorCode::invalid_argument, path, ": no value given for graph input '", g.values[v].name, "'");
    if (it->second.dtype() == DType::u16 && g.type(v).dtype == DType::bf16) {
      // NumPy has no bfloat16: ONNX's test data stores bf16 inputs as their u16 bits
      feeds.push_back(Tensor(DType::bf16, it->second.sizes(), it->second.storage(), it->second.byte_offset()));
      continue;
    }
    if (it->second.dtype() != g.type(v).dtype)
      return error(ErrorCode::dtype_error, path, ": input '", g.values[v].name, "' is ", dtype_name(it->second.dtype()),
                   ", the model wants ", g.type(v).to_string());
    feeds.push_back(it->second);
  }
  for (ValueId v : g.outputs) r.output_names.push_back(g.values[v].name);
  if (!g.outputs.empty()) {  // else every output was computed at import
    RLX_ASSIGN_OR_RETURN(auto model, Model::compile(g, {.device = device}));
    RLX_ASSIGN_OR_RETURN(r.outputs, model->run(feeds));
  }

  // the ONNX graph's outputs, in its order
  RLX_ASSIGN_OR_RETURN(Signature sig, read_signature(path));
  auto output = [&](const std::string& name) -> Expected<Tensor> {
    for (size_t i = 0; i < r.output_names.size(); ++i)
      if (r.output_names[i] == name) return r.outputs[i];
    return error(ErrorCode::internal, path, ": the compiled graph has no output '", name, "'");
  };
  for (const std::string& name : sig.outputs) {
    const auto& md = r.model.metadata;
    if (auto io = import_outputs.find(name); io != import_outputs.end()) {
      r.values.push_back(io->second);
    } else if (auto it = md.find(onnx_import::kNoneOutputKey + name); it != md.end()) {
      auto dt = parse_dtype(it->second);
      r.values.push_back(Value::none(dt ? *dt : DType::f32));
    } else if (auto st = md.find(onnx_import::kSequenceOutputKey + name); st != md.end()) {
      const size_t n = std::stoull(st->second);
      std::vector<Tensor> elems;
      for (size_t k = 0; k < n; ++k) {
        RLX_ASSIGN_OR_RETURN(Tensor t, output(onnx_import::element_name(name, k)));
        elems.push_back(std::move(t));
      }
      const DType dt = elems.empty() ? DType::f32 : elems[0].dtype();
      r.values.push_back(Value::sequence(std::move(elems), dt));
    } else {
      RLX_ASSIGN_OR_RETURN(Tensor t, output(name));
      r.values.push_back(Value::of(std::move(t)));
    }
  }
  return r;
}

Expected<RunResult> load_and_run(const std::string& path, const std::map<std::string, Tensor>& inputs,
                                 const std::string& device) {
  std::map<std::string, Value> values;
  for (const auto& [name, t] : inputs) values[name] = Value::of(t);
  return load_and_run(path, values, device);
}

}  // namespace rlx::onnx
