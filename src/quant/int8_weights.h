// quant/int8_weights.h: symmetric per-output-channel int8 weights for the int8_matmul op, and
// the on-disk form `rlx quantize --scheme int8` writes (docs/quantization.md): a Linear weight
// "<name>.weight" [out, in] becomes an I8 tensor of the same name and shape plus an F32
// "<name>.weight_scale" [out], with w ~= q * scale per row; the safetensors metadata holds
// "rlx.quantization" = "int8".
#pragma once

#include "rlx/status.h"
#include "rlx/tensor.h"

namespace rlx::quant {

struct Int8Weight {
  Tensor q;      // i8 [out, in]
  Tensor scale;  // f32 [out]
};

// Row j: scale = max|w[j]| / 127 (1 for an all-zero row), q = round_half_even(w / scale).
// w must be a finite float tensor (f32, f16, bf16, f64) of rank 2; errors name `name`.
Expected<Int8Weight> quantize_int8_rows(const Tensor& w, const std::string& name);

// The name of the scale tensor of a quantized weight "<name>.weight": "<name>.weight_scale".
inline std::string int8_scale_name(const std::string& weight_name) { return weight_name + "_scale"; }

}  // namespace rlx::quant
