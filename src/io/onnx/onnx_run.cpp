// Import-and-run for ONNX files with concrete inputs (rlx run, the node-test suite).
#include "rlx/compile.h"
#include "rlx/onnx.h"

namespace rlx::onnx {

Expected<RunResult> load_and_run(const std::string& path, const std::map<std::string, Tensor>& inputs,
                                 const std::string& device) {
  LoadOptions opts;
  opts.input_values = inputs;
  RunResult r;
  RLX_ASSIGN_OR_RETURN(r.model, load(path, opts));
  const Graph& g = r.model.graph;
  std::vector<Tensor> feeds;
  for (ValueId v : g.inputs) {
    auto it = inputs.find(g.values[v].name);
    if (it == inputs.end())
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
  RLX_ASSIGN_OR_RETURN(auto model, Model::compile(g, {.device = device}));
  RLX_ASSIGN_OR_RETURN(r.outputs, model->run(feeds));
  return r;
}

}  // namespace rlx::onnx
