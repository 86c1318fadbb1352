// The CPU's native kernels: contractions whose operand layouts map onto one (batched, strided)
// call of the GEMM kernel (f32, f16 or bf16 operands; the mapping: kernels/gemm_plan.h), quantized and int8 matrix
// products, attention. A node that does not map is refused with the reason.
#pragma once

#include <optional>
#include <span>
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

// The families of the cpu's native kernels, one row each: the ops it takes and its claim of a
// node. The executor plans and runs each kind (cpu_executable.cpp).
enum class CpuNativeKind : uint8_t {
  gemm,         // matmul, dot, gemm mapped onto one GEMM call, with fused epilogues
  quant,        // dequantize, qmatmul (f32 x) in every format of rlx::quant_format()
  int8,         // int8_matmul
  attention,    // attention (native_attention.h)
  host_family,  // linalg, sparse, splat: a library of the kernels layer (kernels/host_families.h)
  collective,   // all_reduce, all_gather, ... over the compiled model's communicator
};
struct CpuFamily {
  CpuNativeKind kind;
  bool (*takes)(Op op);
  Claim (*claim)(const NodeDesc& n);
};
// The cpu's native families, in the order claims consult them.
std::span<const CpuFamily> cpu_families();
// The family that takes `op`; nullptr when the cpu has no native kernel for it.
const CpuFamily* cpu_family(Op op);
// Whether the CPU claims node `n` natively: its family's claim, or a refusal naming the op.
Claim claim_cpu_native(const NodeDesc& n);

}  // namespace rlx::cpu
