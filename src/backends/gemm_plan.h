// How a contraction node (matmul, dot, gemm) maps onto one (batched, strided) f32 GEMM call:
// sizes, transposes, leading dimensions and batch strides in elements, decided from the node's
// dtypes, shapes and attributes. Shared by every device with a native GEMM.
#pragma once

#include <span>

#include "rlx/graph.h"

namespace rlx::backends {

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

}  // namespace rlx::backends
