// Post-training quantization of model folders (quant/ptq.h).
#include "quant/ptq.h"

#include <cmath>
#include <filesystem>
#include <functional>

#include "models/bert.h"
#include "models/decoder.h"
#include "kernels/ggml_quants.h"
#include "quant/int8_weights.h"
#include "rlx/ops.h"
#include "rlx/safetensors.h"

namespace rlx::quant {

namespace fs = std::filesystem;

namespace {

// Loads `in`/model.safetensors and copies every other file of `in` into `out` (created): the
// start of every folder-to-folder scheme, which then writes out/model.safetensors.
Expected<safetensors::File> load_and_copy_folder(const std::string& in, const std::string& out) {
  std::string weights = in + "/model.safetensors";
  if (!fs::exists(weights)) return error(ErrorCode::io_error, in, ": no model.safetensors (sharded checkpoints are not quantized yet)");
  RLX_ASSIGN_OR_RETURN(safetensors::File f, safetensors::load(weights));
  if (f.metadata.count("rlx.quantization"))
    return error(ErrorCode::unsupported, in, ": already quantized (rlx.quantization = ", f.metadata.at("rlx.quantization"), ")");
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) return error(ErrorCode::io_error, out, ": ", ec.message());
  for (const auto& e : fs::directory_iterator(in)) {
    if (!e.is_regular_file() || e.path().filename() == "model.safetensors") continue;
    fs::copy_file(e.path(), fs::path(out) / e.path().filename(), fs::copy_options::overwrite_existing, ec);
    if (ec) return error(ErrorCode::io_error, e.path().string(), ": ", ec.message());
  }
  return f;
}

// A Linear weight: a 2-D float "*.weight" outside the embeddings.
bool is_linear_weight(const std::string& name, const Tensor& t) {
  return t.rank() == 2 && is_float(t.dtype()) && name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0 &&
         name.find("embed") == std::string::npos;
}

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// The folder's tensors with every Linear weight replaced by what `quantize` appends for it;
// the others as they are. Counts the weights and the bytes before and after.
struct Rewritten {
  NamedTensors tensors;
  int64_t quantized = 0, bytes_in = 0, bytes_out = 0;
};
Expected<Rewritten> rewrite_linear_weights(const safetensors::File& f,
                                           const std::function<Status(const std::string&, const Tensor&, NamedTensors&)>& quantize) {
  Rewritten r;
  for (const std::string& name : f.names) {
    const Tensor& t = f.tensors.at(name);
    r.bytes_in += t.nbytes();
    if (!is_linear_weight(name, t)) {
      r.tensors.push_back({name, t});
      continue;
    }
    RLX_TRY(quantize(name, t, r.tensors));
    ++r.quantized;
  }
  for (const auto& nt : r.tensors) r.bytes_out += nt.second.nbytes();
  return r;
}

}  // namespace

Status quantize_int8_folder(const std::string& in, const std::string& out, std::string* summary,
                            const CalibrationResult* calib, bool int8_attention_scores) {
  RLX_ASSIGN_OR_RETURN(safetensors::File f, load_and_copy_folder(in, out));
  std::vector<std::string> uncalibrated;
  RLX_ASSIGN_OR_RETURN(Rewritten rw, rewrite_linear_weights(f, [&](const std::string& name, const Tensor& t, NamedTensors& ts) -> Status {
    RLX_ASSIGN_OR_RETURN(quant::Int8Weight q, quant::quantize_int8_rows(t, name));
    ts.push_back({name, q.q});
    ts.push_back({quant::int8_scale_name(name), q.scale});
    if (!calib) return Status::ok();
    auto it = calib->input_scales.find(name);
    if (it == calib->input_scales.end()) {
      // a layer the calibrated graph does not run (BERT's pooler under sentence embeddings)
      uncalibrated.push_back(name);
      return Status::ok();
    }
    Tensor xs = Tensor::zeros(DType::f32, {});
    xs.data<float>()[0] = it->second;
    ts.push_back({input_scale_name(name), xs});
    return Status::ok();
  }));
  const NamedTensors& ts = rw.tensors;
  const int64_t quantized = rw.quantized, bytes_in = rw.bytes_in, bytes_out = rw.bytes_out;
  std::map<std::string, std::string> md = f.metadata;
  md["rlx.quantization"] = "int8";
  if (calib) md["rlx.activation_scales"] = calib->description;
  if (int8_attention_scores) md[std::string(models::kAttentionScoresKey)] = "int8";
  RLX_TRY(safetensors::save(out + "/model.safetensors", ts, md));
  if (summary)
    *summary = cat("wrote ", out, ": ", quantized, " Linear weights quantized to int8 (per-row scales), ", ts.size(),
                   " tensors, ", bytes_in / 1000000, " MB -> ", bytes_out / 1000000, " MB",
                   calib ? cat("; static activation scales, ", calib->description) : std::string("; activations per token at run time"),
                   int8_attention_scores ? "; attention scores from int8 q and k" : "");
  if (summary && !uncalibrated.empty()) {
    *summary += cat("; ", uncalibrated.size(), " Linear layers the calibration did not reach stay per token:");
    for (const std::string& n : uncalibrated) *summary += " " + n;
  }
  return Status::ok();
}

Status quantize_bert_blocks_folder(const std::string& in, const std::string& out, const std::string& format,
                                   const std::string& scheme, std::string* summary) {
  auto qt = qtype_from_name(format);
  if (!qt || !has_quantizer(*qt) || !quant_format(format))
    return error(ErrorCode::invalid_argument, "no block encoder for format '", format, "'");
  const int64_t block = qtype_info(*qt).block_elems;
  // check every Linear first, so that a scheme the model's K does not fit writes nothing
  {
    RLX_ASSIGN_OR_RETURN(safetensors::File f, safetensors::load(in + "/model.safetensors"));
    for (const std::string& name : f.names)
      if (is_linear_weight(name, f.tensors.at(name)) && !row_bytes(*qt, f.tensors.at(name).sizes()[1]))
        return error(ErrorCode::unsupported, in, ": --scheme ", scheme, " stores ", format, " blocks of ", block,
                     " values along K, but tensor '", name, "' has rows of ", f.tensors.at(name).sizes()[1],
                     " values (not a multiple of ", block, ")", block == 256 ? "; int4-g32 or int4-g128 fit more models" : "");
  }
  RLX_ASSIGN_OR_RETURN(safetensors::File f, load_and_copy_folder(in, out));
  RLX_ASSIGN_OR_RETURN(Rewritten rw, rewrite_linear_weights(f, [&](const std::string& name, const Tensor& t, NamedTensors& ts) -> Status {
    const int64_t rows = t.sizes()[0], cols = t.sizes()[1], rb = *row_bytes(*qt, cols);
    Tensor q = Tensor::zeros(DType::u8, {rows, rb});
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const double v = t.get_f64(r * cols + c);
        // the encoders do not reject non-finite values (their blocks decode to garbage)
        if (!std::isfinite(v))
          return error(ErrorCode::invalid_argument, "tensor '", name, "' has a non-finite value at row ", r, ", column ", c);
        row[static_cast<size_t>(c)] = static_cast<float>(v);
      }
      RLX_TRY(quantize_row(*qt, row.data(), q.data<uint8_t>() + r * rb, cols));
    }
    ts.push_back({name, q});
    return Status::ok();
  }));
  const NamedTensors& ts = rw.tensors;
  const int64_t quantized = rw.quantized, bytes_in = rw.bytes_in, bytes_out = rw.bytes_out;
  std::map<std::string, std::string> md = f.metadata;
  md["rlx.quantization"] = scheme;
  md[std::string(models::kBlockWeightFormatKey)] = format;
  RLX_TRY(safetensors::save(out + "/model.safetensors", ts, md));
  if (summary)
    *summary = cat("wrote ", out, ": ", quantized, " Linear weights as ", format, " blocks of ", block,
                   " (weight-only; qmatmul), ", ts.size(), " tensors, ", bytes_in / 1000000, " MB -> ", bytes_out / 1000000,
                   " MB");
  return Status::ok();
}

Status quantize_decoder_gguf(const std::string& in, const std::string& out, const std::string& scheme, std::string* summary) {
  RLX_ASSIGN_OR_RETURN(models::DecoderWeights w, models::load_decoder(in));
  for (const auto& [name, t] : w.tensors)
    if (!t.format.empty()) return error(ErrorCode::unsupported, in, ": tensor '", name, "' is already quantized (", t.format, ")");
  std::vector<std::string> fallbacks;
  RLX_TRY(models::write_decoder_gguf(out, w, scheme, in + "/tokenizer.json", &fallbacks));
  if (summary) {
    *summary = cat("wrote ", out, ": decoder matrices in ", scheme, " (norms f32)");
    if (!fallbacks.empty()) {
      *summary += cat("; ", fallbacks.size(), " matrices whose rows ", scheme, " blocks do not tile:");
      for (const std::string& f : fallbacks) *summary += " " + f;
    }
  }
  return Status::ok();
}

}  // namespace rlx::quant
