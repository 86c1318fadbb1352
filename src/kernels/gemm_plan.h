// How a contraction node (matmul, dot, gemm) maps onto one (batched, strided) f32 GEMM call:
// sizes, transposes, leading dimensions and batch strides in elements, decided from the node's
// dtypes, shapes and attributes. Shared by every device with a native GEMM.
#pragma once

#include <span>
#include <string_view>

#include "rlx/device.h"
#include "rlx/graph.h"

namespace rlx::kernels {

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

// The plan of the 16x16-tiled f32 GEMM kernel that opencl, vulkan and opengl generate: dot
// nodes with f32 operands only.
Expected<GemmPlan> plan_tiled_gemm(const NodeDesc& n);
// Those devices' claim: the tiled GEMM for dot nodes it plans, else the reason, naming `device`.
Claim claim_tiled_gemm(const NodeDesc& n, std::string_view device);

}  // namespace rlx::kernels
