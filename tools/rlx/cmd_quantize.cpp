// rlx quantize IN OUT --scheme int8|q8_0|q4_0|q4_k: post-training weight quantization of a
// Hugging Face folder (docs/quantization.md).
//
//   int8            BERT-family folders: every Linear weight (2-D "*.weight" outside the
//                   embeddings) becomes i8 + a per-row f32 scale (quant/int8_weights.h); OUT is a
//                   folder with the other files copied; `rlx embed OUT` runs it with int8_matmul
//                   (activations quantized per token at run time, so no calibration is needed).
//   q8_0|q4_0|q4_k  Qwen3-family folders: OUT is a GGUF file with the matrices in llama.cpp's
//                   block format (rows k-quants cannot tile stay q8_0); `rlx generate OUT` runs
//                   it with qmatmul.
#include <cstdio>
#include <filesystem>

#include "cli.h"
#include "models/bert.h"
#include "models/qwen3.h"
#include "quant/ptq.h"

namespace rlx::cli {

int cmd_quantize(int argc, char** argv) {
  auto args = parse_args(argc, argv, 2, {}, {"scheme"});
  if (!args) return report_error(args.status());
  const char* usage = "usage: rlx quantize IN_DIR OUT --scheme int8|q8_0|q4_0|q4_k|int4-g32|int4-g32-asym";
  if (args->positional.size() != 2 || !args->get("scheme")) return report_error(error(ErrorCode::invalid_argument, usage));
  const std::string in = args->positional[0], out = args->positional[1], scheme = *args->get("scheme");
  Status st;
  std::string summary;
  if (scheme == "int8") {
    if (!models::is_bert_folder(in) && !(models::is_qwen3_model(in) && std::filesystem::is_directory(in)))
      return report_error(error(ErrorCode::unsupported, in, ": --scheme int8 quantizes BERT- and Qwen3-family folders"));
    st = quant::quantize_int8_folder(in, out, &summary);
  } else if (scheme == "q8_0" || scheme == "q4_0" || scheme == "q4_k" || scheme == "int4-g32" || scheme == "int4-g32-asym") {
    if (!models::is_qwen3_model(in))
      return report_error(error(ErrorCode::unsupported, in, ": --scheme ", scheme, " writes Qwen3-family GGUF files so far"));
    // int4 in groups of 32 is ggml's q4_0 (symmetric, f16 scale) or q4_1 (f16 scale and min)
    const std::string fmt = scheme == "int4-g32" ? "q4_0" : scheme == "int4-g32-asym" ? "q4_1" : scheme;
    st = quant::quantize_qwen3_gguf(in, out, fmt, &summary);
  } else {
    return report_error(error(ErrorCode::invalid_argument, "unknown scheme '", scheme, "' (int4-g128 is not implemented yet); ", usage));
  }
  if (!st.is_ok()) return report_error(st);
  std::printf("%s\n", summary.c_str());
  return kOk;
}

}  // namespace rlx::cli
