// The rocm device's code generation, which needs no GPU: which nodes the device claims (none
// natively: Debian 12 has no rocBLAS, so every node is generated code), the HIP C++ of a kernel
// program (the C renderer's HIP dialect, codegen::CTarget::hip), and its translation unit. The
// runtime (rocm_device.cpp) and the offline compile check of every conformance case
// (tests/rocm/) both build their programs through these functions, so the check compiles
// exactly what a GPU would run.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "rlx/compile_options.h"
#include "rlx/device.h"
#include "rlx/kernel_ir.h"

namespace rlx::rocm {

// The device's answers to the legalizer's two questions: no native kernels; every primitive
// the C renderer handles is generated HIP C++ (f64 included; f16/bf16 stored and computed in f32).
Claim claim_native(const NodeDesc& n);
Claim supports_primitive(const NodeDesc& n);

// The HIP C++ of every generated kernel of `prog`, kernel i named `prefix + generated[i].name`
// (`extern "C" __global__`, one thread per domain element).
Expected<std::string> render_kernels(const kir::KernelProgram& prog, const std::string& prefix);

// A complete translation unit for hipRTC or clang: hip/hip_runtime.h, the C prelude (as
// device functions), then `kernels`.
std::string translation_unit(std::string_view kernels);

// A stand-in for the rocm device that answers the legalizer's questions as a GPU would,
// without one: for checking code generation. It is listed as unavailable, and compile()
// refuses with that reason.
std::shared_ptr<const Device> make_codegen_device();

// The threads per block of generated kernels (one thread per element): four wavefronts of
// 64 on CDNA (gfx9), eight of 32 on RDNA (gfx10, gfx11).
constexpr int kThreadsPerBlock = 256;

}  // namespace rlx::rocm
