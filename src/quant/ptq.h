// quant/ptq.h: post-training quantization of model folders, the work behind `rlx quantize`
// (docs/quantization.md).
#pragma once

#include <string>

#include "rlx/status.h"

namespace rlx::quant {

// BERT- or Qwen3-family Hugging Face folder `in` -> folder `out`: every Linear weight (2-D
// "*.weight" whose name does not contain "embed") becomes i8 plus a per-row f32
// "*.weight_scale" (int8_weights.h), the safetensors metadata gets "rlx.quantization" = "int8",
// the other files are copied. The BERT and Qwen3 builders then run those layers as int8_matmul
// with activations quantized per token. A one-line summary goes to *summary when given.
Status quantize_int8_folder(const std::string& in, const std::string& out, std::string* summary = nullptr);

// Qwen3-family folder (or dense GGUF) `in` -> GGUF file `out` with the matrices in the ggml block
// format `scheme` ("q8_0", "q4_0", "q4_k"; rows k-quants cannot tile stay q8_0), norms in f32.
Status quantize_qwen3_gguf(const std::string& in, const std::string& out, const std::string& scheme,
                           std::string* summary = nullptr);

}  // namespace rlx::quant
