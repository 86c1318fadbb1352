// The native kernel families every GPU-class device can run on the device runtime layer
// (hal/program_executable.h), each written once and rendered for the device's dialect:
// - the tiled f32 matrix product (dot): 16x16 output tiles staged through local (shared)
//   memory a 16-wide slice of K at a time, one text for OpenCL C, GLSL, WGSL and HLSL;
// - the CSR kernels of csr_spmv.h (spmv_csr, sddmm_csr), in OpenCL C, GLSL and CUDA C++, with
//   their index-check word read after every run.
// A device lists the families it runs in its hal::NativeTable, with its own families (cuBLAS,
// the splatting launches) beside these.
#pragma once

#include <string_view>

#include "codegen/c_renderer.h"
#include "hal/program_executable.h"

namespace rlx::kernels {

// What a device offers these families.
struct GpuTarget {
  std::string device;  // "opencl": named in claims and errors
  codegen::CTarget dialect = codegen::CTarget::opencl;
  bool fp64 = false;         // double arithmetic in kernels
  bool f64_scatter = false;  // atomic add on double (the transposed SpMV in f64)
};

// The tiled f32 GEMM for `dot` (OpenCL C, GLSL, WGSL, HLSL): claims dot nodes that plan_tiled_gemm maps,
// and answers for ops no other family takes ("has no native X kernel").
hal::NativeFamily tiled_gemm_family(const GpuTarget& t);
// The CSR kernels (OpenCL C, GLSL, CUDA C++) for spmv_csr and sddmm_csr.
hal::NativeFamily csr_family(const GpuTarget& t);

// A device's target with the common families only: its dialect, the tiled GEMM and the CSR kernels.
hal::Target common_target(const GpuTarget& t);

// The tiled GEMM's source in `dialect`, one text with its words filled in per dialect: OpenCL C,
// kernel rlx_native_gemm_f32(A, B, C, M, N, K, sab, sam, sak, sbb, sbk, sbn, scb); GLSL, bindings
// A, B, C and the ten parameters as push constants (Vulkan) or uniforms (OpenGL); WGSL, bindings
// A, B, C and the parameters as i32 in a uniform buffer at binding 3; HLSL, registers u0..u2 and
// the parameters in a constant buffer (push constants on Vulkan). With `shared_ab` A and B
// are one buffer, bound once (A, C; parameters unchanged). Launched as ceil(N/16) x ceil(M/16) x
// batch work groups of 16x16.
std::string tiled_gemm_source(codegen::CTarget dialect, bool shared_ab = false);

}  // namespace rlx::kernels
