// The CPU's native contractions: matmul, gemm and dot nodes whose operand layouts map onto
// one (batched, strided) call of the f32 GEMM kernel. The mapping is decided per node from
// its dtypes, shapes and attributes; a node that does not map is refused with the reason.
#pragma once

#include <string>

#include "kernels/gemm.h"
#include "rlx/device.h"
#include "rlx/kernel_ir.h"

namespace rlx::cpu {

// How one contraction maps onto sgemm: sizes, transposes, strides in elements, and how the
// optional third gemm operand is applied.
struct GemmPlan {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  bool trans_a = false, trans_b = false;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  float alpha = 1.f;
  enum class CMode : uint8_t { none, bias_row, full } c_mode = CMode::none;
  float beta = 0.f;
};

// The plan for a contraction node, or the reason it is not a single GEMM call.
Expected<GemmPlan> plan_contraction(Op op, const Attrs& attrs, std::span<const TensorType> inputs,
                                    std::span<const TensorType> outputs);

// Whether the CPU claims node `n` natively, with the description: contractions that map onto
// one GEMM call, and dequantize / qmatmul (f32 x) in every format of rlx::quant_format().
Claim claim_cpu_native(const NodeDesc& n);

}  // namespace rlx::cpu
