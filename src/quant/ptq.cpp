// Post-training quantization of model folders (quant/ptq.h).
#include "quant/ptq.h"

#include <filesystem>

#include "models/qwen3.h"
#include "quant/int8_weights.h"
#include "rlx/safetensors.h"

namespace rlx::quant {

namespace fs = std::filesystem;

Status quantize_int8_folder(const std::string& in, const std::string& out, std::string* summary,
                            const CalibrationResult* calib) {
  std::string weights = in + "/model.safetensors";
  if (!fs::exists(weights)) return error(ErrorCode::io_error, in, ": no model.safetensors (sharded checkpoints are not quantized yet)");
  RLX_ASSIGN_OR_RETURN(safetensors::File f, safetensors::load(weights));
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) return error(ErrorCode::io_error, out, ": ", ec.message());
  for (const auto& e : fs::directory_iterator(in)) {
    if (!e.is_regular_file() || e.path().filename() == "model.safetensors") continue;
    fs::copy_file(e.path(), fs::path(out) / e.path().filename(), fs::copy_options::overwrite_existing, ec);
    if (ec) return error(ErrorCode::io_error, e.path().string(), ": ", ec.message());
  }
  std::vector<std::pair<std::string, Tensor>> ts;
  int64_t quantized = 0, bytes_in = 0, bytes_out = 0;
  std::vector<std::string> uncalibrated;
  for (const std::string& name : f.names) {
    const Tensor& t = f.tensors.at(name);
    bytes_in += t.nbytes();
    const bool linear = t.rank() == 2 && is_float(t.dtype()) && name.size() > 7 &&
                        name.compare(name.size() - 7, 7, ".weight") == 0 && name.find("embed") == std::string::npos;
    if (!linear) {
      ts.push_back({name, t});
      bytes_out += t.nbytes();
      continue;
    }
    RLX_ASSIGN_OR_RETURN(quant::Int8Weight q, quant::quantize_int8_rows(t, name));
    bytes_out += q.q.nbytes() + q.scale.nbytes();
    ts.push_back({name, q.q});
    ts.push_back({quant::int8_scale_name(name), q.scale});
    if (calib) {
      auto it = calib->input_scales.find(name);
      if (it == calib->input_scales.end()) {
        // a layer the calibrated graph does not run (BERT's pooler under sentence embeddings)
        uncalibrated.push_back(name);
        ++quantized;
        continue;
      }
      Tensor xs = Tensor::zeros(DType::f32, {});
      xs.data<float>()[0] = it->second;
      ts.push_back({input_scale_name(name), xs});
      bytes_out += xs.nbytes();
    }
    ++quantized;
  }
  std::map<std::string, std::string> md = f.metadata;
  md["rlx.quantization"] = "int8";
  if (calib) md["rlx.activation_scales"] = calib->description;
  RLX_TRY(safetensors::save(out + "/model.safetensors", ts, md));
  if (summary)
    *summary = cat("wrote ", out, ": ", quantized, " Linear weights quantized to int8 (per-row scales), ", ts.size(),
                   " tensors, ", bytes_in / 1000000, " MB -> ", bytes_out / 1000000, " MB",
                   calib ? cat("; static activation scales, ", calib->description) : std::string("; activations per token at run time"));
  if (summary && !uncalibrated.empty()) {
    *summary += cat("; ", uncalibrated.size(), " Linear layers the calibration did not reach stay per token:");
    for (const std::string& n : uncalibrated) *summary += " " + n;
  }
  return Status::ok();
}

Status quantize_qwen3_gguf(const std::string& in, const std::string& out, const std::string& scheme, std::string* summary) {
  RLX_ASSIGN_OR_RETURN(models::Qwen3Weights w, models::load_qwen3(in));
  for (const auto& [name, t] : w.tensors)
    if (!t.format.empty()) return error(ErrorCode::unsupported, in, ": tensor '", name, "' is already quantized (", t.format, ")");
  std::vector<std::string> fallbacks;
  RLX_TRY(models::write_qwen3_gguf(out, w, scheme, in + "/tokenizer.json", &fallbacks));
  if (summary) {
    *summary = cat("wrote ", out, ": Qwen3 matrices in ", scheme, " (norms f32)");
    if (!fallbacks.empty()) {
      *summary += cat("; ", fallbacks.size(), " matrices whose rows ", scheme, " blocks do not tile:");
      for (const std::string& f : fallbacks) *summary += " " + f;
    }
  }
  return Status::ok();
}

}  // namespace rlx::quant
