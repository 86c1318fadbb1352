// quant/ptq.h: post-training quantization of model folders, the work behind `rlx quantize`
// (docs/quantization.md).
#pragma once

#include <string>

#include "quant/calibrate.h"
#include "rlx/status.h"

namespace rlx::quant {

// BERT or decoder Hugging Face folder `in` -> folder `out`: every Linear weight (2-D
// "*.weight" whose name does not contain "embed") becomes i8 plus a per-row f32
// "*.weight_scale" (int8_weights.h), the safetensors metadata gets "rlx.quantization" = "int8",
// the other files are copied. The BERT and decoder builders then run those layers as int8_matmul
// with activations quantized per token. A one-line summary goes to *summary when given.
// With `calib` (calibrate_bert's result for `in`), each quantized Linear also gets its static
// input scale as an F32 [] tensor "<name>.input_scale" (calibrate.h) and the metadata
// "rlx.activation_scales" = calib->description; the BERT builder then passes it to
// int8_matmul's x_scale (activations quantized per tensor with that fixed scale). Linear layers
// the calibration did not reach (BERT's pooler, unused by sentence embeddings) stay per token
// and are named in the summary. A folder whose metadata already has "rlx.quantization" is refused
// (unsupported), here and in quantize_bert_blocks_folder.
// With int8_attention_scores the metadata also gets models::kAttentionScoresKey = "int8": the
// BERT builder then quantizes attention's q and k per row for the score product
// (attention's int8_scores).
Status quantize_int8_folder(const std::string& in, const std::string& out, std::string* summary = nullptr,
                            const CalibrationResult* calib = nullptr, bool int8_attention_scores = false);

// BERT-family folder `in` -> folder `out` with every Linear weight (as for int8 above) stored
// weight-only in the block format `format` ("q4_0", "q4_1", "int4_g128", "int4_g128_asym",
// "q8_0", ...; ggml_quants.h), as U8 [out, row_bytes(in)] under the same name; the metadata gets
// "rlx.quantization" = `scheme` (the name `rlx quantize` was given, e.g. "int4-g32") and
// models::kBlockWeightFormatKey = `format`; the other files are copied. The BERT builder runs those
// layers as qmatmul {format} plus the f32 bias. unsupported, naming the tensor, when a Linear's K
// is not a multiple of the format's block (nothing is written then); invalid_argument for a
// format without an encoder or a non-finite weight.
Status quantize_bert_blocks_folder(const std::string& in, const std::string& out, const std::string& format,
                                   const std::string& scheme, std::string* summary = nullptr);

// Decoder folder (or dense GGUF) `in` -> GGUF file `out` with the matrices in the ggml block
// format `scheme` ("q8_0", "q4_0", "q4_1", "q4_k", or rlx's "int4_g128" / "int4_g128_asym";
// rows k-quants cannot tile stay q8_0, rows groups of 128 cannot tile become q4_0 / q4_1, and the
// summary names them), norms in f32.
Status quantize_decoder_gguf(const std::string& in, const std::string& out, const std::string& scheme,
                           std::string* summary = nullptr);

}  // namespace rlx::quant
