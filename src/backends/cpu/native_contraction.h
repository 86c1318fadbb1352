// The CPU's native kernels: contractions whose operand layouts map onto one (batched, strided)
// call of the f32 GEMM kernel (the mapping: backends/gemm_plan.h), quantized and int8 matrix
// products, attention. A node that does not map is refused with the reason.
#pragma once

#include <string>

#include "backends/gemm_plan.h"
#include "kernels/gemm.h"
#include "rlx/device.h"
#include "rlx/kernel_ir.h"

namespace rlx::cpu {

// GemmPlan and plan_contraction live in backends/gemm_plan.h (every device with a native
// GEMM uses them); the CPU code names them unqualified.
using backends::GemmPlan;
using backends::plan_contraction;

// Whether the CPU claims node `n` natively, with the description: contractions that map onto
// one GEMM call, and dequantize / qmatmul (f32 x) in every format of rlx::quant_format().
Claim claim_cpu_native(const NodeDesc& n);

}  // namespace rlx::cpu
