// rlx quantize IN OUT --scheme int8|q8_0|q4_0|q4_k|int4-g32[-asym]|int4-g128[-asym] [--calib DATA]: post-training weight quantization of a
// Hugging Face folder (docs/quantization.md).
//
//   int8            BERT-family folders: every Linear weight (2-D "*.weight" outside the
//                   embeddings) becomes i8 + a per-row f32 scale (quant/int8_weights.h); OUT is a
//                   folder with the other files copied; `rlx embed OUT` runs it with int8_matmul
//                   (activations quantized per token at run time, so no calibration is needed).
//                   --calib DATA (a text file, one sentence a line) instead stores a static
//                   per-tensor scale for each Linear's input, from the f32 model run on DATA
//                   (--calib-method minmax|percentile, --percentile P, default 99.99;
//                   quant/calibrate.h); int8_matmul then takes it as x_scale.
//                   --attention-scores int8 (BERT folders) also quantizes attention's q and k
//                   per row for the score product (attention's int8_scores); f32, the
//                   default, keeps them f32.
//   q8_0|q4_0|q4_k  decoder folders (docs/generation.md): OUT is a GGUF file with the matrices in llama.cpp's
//                   block format (rows k-quants cannot tile stay q8_0); `rlx generate OUT` runs
//                   it with qmatmul.
//   int4-g32[-asym] = q4_0 / q4_1.
//   BERT-family folders take these block schemes too: OUT is a folder whose Linear weights are
//   U8 block rows (weight-only, quantize_bert_blocks_folder in quant/ptq.h) run with qmatmul; K
//   must be a multiple of the block (32, 128, 256 for q4_k), else nothing is written.
//   int4-g128[-asym] decoder folders (docs/generation.md): a GGUF file with rlx's own 4-bit types in groups of
//                   128 along K (f16 scale, + f16 min for -asym; kernels/ggml_quants.h, type ids
//                   outside ggml's range, rlx/gguf.h); matrices whose K is not a multiple of
//                   128 are written as q4_0 / q4_1 and named in the summary.
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "cli.h"
#include "models/bert.h"
#include "models/decoder.h"
#include "quant/ptq.h"

namespace rlx::cli {

int cmd_quantize(int argc, char** argv) {
  auto args = parse_args(argc, argv, 2, {}, {"scheme", "calib", "calib-method", "percentile", "attention-scores"});
  if (!args) return report_error(args.status());
  const char* usage =
      "usage: rlx quantize IN_DIR OUT --scheme int8|q8_0|q4_0|q4_k|int4-g32|int4-g32-asym|int4-g128|int4-g128-asym "
      "[--calib SENTENCES.txt [--calib-method minmax|percentile] [--percentile 99.99]] [--attention-scores f32|int8]";
  if (args->positional.size() != 2 || !args->get("scheme")) return report_error(error(ErrorCode::invalid_argument, usage));
  const std::string in = args->positional[0], out = args->positional[1], scheme = *args->get("scheme");
  Status st;
  std::string summary;
  const bool calib = args->get("calib").has_value();
  if (!calib && (args->get("calib-method") || args->get("percentile")))
    return report_error(error(ErrorCode::invalid_argument, "--calib-method and --percentile need --calib DATA"));
  if (calib && scheme != "int8")
    return report_error(error(ErrorCode::invalid_argument, "--calib applies to --scheme int8 (static activation scales); ",
                              scheme, " quantizes weights only"));
  const std::string scores = args->get("attention-scores").value_or("f32");
  if (scores != "f32" && scores != "int8")
    return report_error(error(ErrorCode::invalid_argument, "--attention-scores ", scores, ": f32 or int8"));
  if (args->get("attention-scores") && (scheme != "int8" || !models::is_bert_folder(in)))
    return report_error(error(ErrorCode::invalid_argument, "--attention-scores applies to --scheme int8 on BERT-family folders"));
  const bool int8_scores = scores == "int8";
  if (scheme == "int8") {
    if (!models::is_bert_folder(in) && !(models::is_decoder_model(in) && std::filesystem::is_directory(in)))
      return report_error(error(ErrorCode::unsupported, in, ": --scheme int8 quantizes BERT- and decoder folders (docs/generation.md)"));
    if (calib) {
      if (!models::is_bert_folder(in))
        return report_error(error(ErrorCode::unsupported, in, ": --calib calibrates BERT-family folders so far (sentences as samples)"));
      quant::CalibrationOptions co;
      co.method = args->get("calib-method").value_or("minmax");
      if (args->get("percentile")) {
        auto p = args->number("percentile", 0, 0, 100);
        if (!p) return report_error(p.status());
        co.percentile = *p;
        if (co.method != "percentile")
          return report_error(error(ErrorCode::invalid_argument, "--percentile needs --calib-method percentile"));
      }
      auto sentences = quant::read_calibration_sentences(*args->get("calib"));
      if (!sentences) return report_error(sentences.status());
      auto cr = quant::calibrate_bert(in, *sentences, co);
      if (!cr) return report_error(cr.status());
      st = quant::quantize_int8_folder(in, out, &summary, &*cr, int8_scores);
    } else {
      st = quant::quantize_int8_folder(in, out, &summary, nullptr, int8_scores);
    }
  } else if (scheme == "q8_0" || scheme == "q4_0" || scheme == "q4_k" || scheme == "int4-g32" || scheme == "int4-g32-asym" ||
             scheme == "int4-g128" || scheme == "int4-g128-asym") {
    const bool bert = models::is_bert_folder(in);
    if (!bert && !models::is_decoder_model(in))
      return report_error(error(ErrorCode::unsupported, in, ": --scheme ", scheme,
                                " quantizes BERT-family folders (to a folder) and decoder models (to a GGUF file)"));
    // int4 in groups of 32 is ggml's q4_0 (symmetric, f16 scale) or q4_1 (f16 scale and min)
    // int4 in groups of 128 is rlx's int4_g128 / int4_g128_asym
    const std::string fmt = scheme == "int4-g32"         ? "q4_0"
                            : scheme == "int4-g32-asym"  ? "q4_1"
                            : scheme == "int4-g128"      ? "int4_g128"
                            : scheme == "int4-g128-asym" ? "int4_g128_asym"
                                                         : scheme;
    st = bert ? quant::quantize_bert_blocks_folder(in, out, fmt, scheme, &summary) : quant::quantize_decoder_gguf(in, out, fmt, &summary);
  } else {
    return report_error(error(ErrorCode::invalid_argument, "unknown scheme '", scheme, "'; ", usage));
  }
  if (!st.is_ok()) return report_error(st);
  std::printf("%s\n", summary.c_str());
  return kOk;
}

}  // namespace rlx::cli
