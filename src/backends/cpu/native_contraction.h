// The CPU's native kernels: contractions whose operand layouts map onto one (batched, strided)
// call of the GEMM kernel (f32, f16 or bf16 operands; the mapping: kernels/gemm_plan.h), quantized and int8 matrix
// products, attention. A node that does not map is refused with the reason.
#pragma once

#include <optional>
#include <string>

#include "kernels/gemm_plan.h"
#include "kernels/gemm.h"
#include "rlx/device.h"
#include "rlx/kernel_ir.h"

namespace rlx::cpu {

// GemmPlan and plan_contraction live in kernels/gemm_plan.h (every device with a native
// GEMM uses them); the CPU code names them unqualified.
using kernels::GemmPlan;
using kernels::plan_contraction;

// The GEMM element type of a dtype: f32, f16 or bf16; nothing for the others.
std::optional<GemmType> gemm_type_of(DType t);

// Whether the CPU claims node `n` natively, with the description: contractions that map onto
// one GEMM call, and dequantize / qmatmul (f32 x) in every format of rlx::quant_format().
Claim claim_cpu_native(const NodeDesc& n);

}  // namespace rlx::cpu
