// The cuda device's code generation, which needs no GPU and no CUDA headers: which nodes the
// device claims (cuBLAS GEMMs, the CSR kernels of kernels/csr_spmv.h, the splatting kernels of
// kernels/splat_source.h) or renders, the scheduled kernel program, and the CUDA C++
// translation unit that NVRTC compiles. The runtime (cuda_device.cpp) and the NVRTC check of
// every conformance case (tests/cuda/) both build their programs through these functions, so
// the test compiles exactly what a GPU would run.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "kernels/gemm_plan.h"
#include "rlx/compile_options.h"
#include "rlx/device.h"
#include "rlx/kernel_ir.h"

namespace rlx::cuda {

// Compute capability as major * 10 + minor (sm_90 is 90).
using ComputeCapability = int;

// The cuBLAS plan for a `dot` node: the CPU's contraction planner decides the GEMM layout
// (its plan is device-independent); cuBLAS computes f32, f64 and f16 (f32 accumulation), and
// bf16 (f32 accumulation) from sm_80 on. An error says why the node is not one cuBLAS call.
Expected<kernels::GemmPlan> gemm_plan(const NodeDesc& n, ComputeCapability cc);

// One column-major GEMM call (cuBLAS's convention) computing a row-major plan: row-major
// C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, so B is the first operand and A the
// second, with the plan's leading dimensions and batch strides unchanged.
struct ColumnMajorGemm {
  bool trans_first = false, trans_second = false;  // CUBLAS_OP_T for the first / second operand
  int64_t m = 0, n = 0, k = 0;                     // column-major C is m x n
  int64_t ld_first = 0, ld_second = 0, ldc = 0;
  int64_t stride_first = 0, stride_second = 0, stride_c = 0, batch = 1;
};
ColumnMajorGemm column_major_gemm(const kernels::GemmPlan& p);

// Whether a GPU of capability `cc` has atomicAdd on double (sm_60 on): the CSR kernels'
// transposed SpMV in f64 (a scatter) needs it.
inline bool has_f64_atomic_add(ComputeCapability cc) { return cc >= 60; }

// The device's answer to the legalizer's two questions for a GPU of capability `cc`: native
// are the cuBLAS GEMM (dot), the CSR kernels (spmv_csr, sddmm_csr; f32 and f64) and the
// splatting kernels of kernels/splat_source.h (the four splat ops, f32 and f64 tensors
// computed in double; splat_rasterize_backward from sm_60, for atomicAdd on double).
Claim claim_native(const NodeDesc& n, ComputeCapability cc);
Claim supports_primitive(const NodeDesc& n);

// Schedules a legalized primitive graph into the kernel program the device runs (the same
// device-independent scheduler as every device, plus the requested donations), verified.
Expected<kir::KernelProgram> schedule_program(const Graph& primitive_graph, const CompileOptions& options);

// The CUDA C++ of every generated kernel of `prog`, kernel i named `prefix + generated[i].name`
// (`extern "C" __global__`, one thread per domain element; see codegen::CTarget::cuda).
Expected<std::string> render_kernels(const kir::KernelProgram& prog, const std::string& prefix);

// A complete NVRTC translation unit: the C prelude, the runtime helpers, then `kernels`.
std::string translation_unit(std::string_view kernels);

// A stand-in for the cuda device that answers the legalizer's questions as a GPU of
// capability `cc` would, without a GPU: for checking code generation (tests/cuda/ renders
// every conformance case through it and compiles the result with NVRTC). It is listed as
// unavailable, and compile() refuses with that reason.
std::shared_ptr<const Device> make_codegen_device(ComputeCapability cc);

// The threads per block of generated kernels (one thread per element).
constexpr int kThreadsPerBlock = 256;

}  // namespace rlx::cuda
