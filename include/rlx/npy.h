// rlx/npy.h: NumPy .npy files (format versions 1-3, little-endian, C order).
#pragma once

#include <string>

#include "rlx/tensor.h"

namespace rlx {

// Reads a .npy file; errors name the file and what is wrong (bad magic, unsupported dtype,
// Fortran order, header or data size that does not match the file).
Expected<Tensor> read_npy(const std::string& path);
// Parses .npy bytes (the whole file in memory).
Expected<Tensor> parse_npy(std::string_view bytes, const std::string& name = "<npy>");
// Writes a tensor as .npy (version 1.0; f16 as '<f2', bf16 as '<u2' since NumPy has no bfloat16).
Status write_npy(const std::string& path, const Tensor& t);

}  // namespace rlx
