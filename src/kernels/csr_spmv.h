// The GPU devices' native CSR kernels: SpMV/SpMM (spmv_csr with transpose=0), one work item per
// output element (row i of A, column j of x) looping over row i's stored entries; and SDDMM
// (sddmm_csr: out[p] = a[i] . b[c] for each stored entry p = (i, c)), one work item per row of
// A; and the transposed SpMV/SpMM (spmv_csr with transpose=1, y = A^T x), one work item per
// row of A and column of x scattering into y with an atomic float add (the target rows
// collide; the summation order, so the last bits, varies between runs), on an output the
// device zeroes first. The add is a compare-and-swap loop in OpenCL C and GLSL (f32 only, as
// 64-bit float atomics are not portable there) and CUDA's atomicAdd (f32, and f64 from sm_60).
// opencl, vulkan, opengl and cuda run them. The kernel IR has no loop with data-dependent
// bounds, so this is a native kernel written once in C-family source, the way the tiled GEMM
// is: one text of kernel bodies that a small macro prelude per language makes OpenCL C or CUDA
// C++ (NVRTC), and the same loops in GLSL. It checks the index data it reads: a row_ptr that is
// not monotone from 0 to nnz, or a column outside x's rows, is never followed (the entry is
// skipped) and sets a flag that the device turns into an error naming the node.
#pragma once

#include <string>
#include <string_view>

#include "rlx/device.h"

namespace rlx::kernels {

struct CsrSpmvPlan {
  // spmv_csr: A is n x m with nnz entries; x [m, k], y [n, k]. sddmm_csr: a [n, k], b [m, k],
  // out [nnz]. Both kernels take (rp, ci, third input, fourth input, output, flags, n, m, k, nnz).
  int64_t n = 0, m = 0, k = 1, nnz = 0;
  DType value = DType::f32, index = DType::i32;
  bool sddmm = false;
  bool transposed = false;               // spmv_csr transpose=1: x [n, k], y [m, k]
  bool zero_output = false;              // the device zeroes the output before the launch
  int64_t work_items = 0;                // the 1-D launch size: n * k (SpMV) or n (SDDMM)
  std::string kernel;                    // the kernel's name in the OpenCL and CUDA sources
};

// Whether `op` is one of the CSR kernels' ops (spmv_csr, sddmm_csr).
inline bool csr_kernel_op(Op op) { return op == Op::SpmvCsr || op == Op::SddmmCsr; }

// The plan of an spmv_csr or sddmm_csr node with static shapes, f32/f64 values (f32 only when
// transposed, unless the device has f64 atomic adds: `f64_scatter`) and i32/i64 indices, or
// the reason it has none.
Expected<CsrSpmvPlan> plan_csr_spmv(const NodeDesc& n, bool f64_scatter = false);
// A device's claim: the CSR kernel for nodes it plans (f64 only where `fp64`; the transposed
// form in f64 only where `f64_scatter`), naming `device`.
Claim claim_csr_spmv(const NodeDesc& n, std::string_view device, bool fp64, bool f64_scatter = false);

// The kernel's name: "rlx_native_spmv_f32_i32", "rlx_native_spmv_t_f32_i64",
// "rlx_native_sddmm_f64_i32", ...
std::string csr_kernel_name(bool sddmm, bool transposed, DType value, DType index);

// OpenCL C source of the ten kernels (SpMV and SDDMM, f32/f64 x i32/i64, the f64 ones when
// `fp64`; transposed SpMV, f32 x i32/i64): kernel(rp, ci, va|a, x|b, y|out, flags, n, m, k,
// nnz), global size work_items.
// flags[0] gets bit 1 for a column out of range and bit 2 for a bad row_ptr.
std::string csr_spmv_opencl_source(bool fp64);
// CUDA C++ (for NVRTC) of the same kernels, `extern "C" __global__`, the 64-bit scalars as
// long long: all ten, and the transposed SpMV in f64 too when `f64_scatter` (atomicAdd on
// double, sm_60 or newer). One thread per work item (blockIdx.x * blockDim.x + threadIdx.x),
// the threads past work_items return at once.
std::string csr_spmv_cuda_source(bool f64_scatter);
// GLSL source of the kernel for one plan: bindings rp, ci, va, x, y, flags; int64 n, m, k, nnz
// as push constants (Vulkan) or uniforms rlx_p0..3 at locations 0..3 (OpenGL, `opengl`); work
// groups of 64 over a 2D grid numbered x + y * groups_x.
std::string csr_spmv_glsl_source(const CsrSpmvPlan& p, bool opengl);
// The error for a nonzero flags word of node `name` (op `op`).
Status csr_spmv_flag_error(int flags, std::string_view name, Op op = Op::SpmvCsr);

}  // namespace rlx::kernels
