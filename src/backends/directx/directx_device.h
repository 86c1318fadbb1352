// The DirectX device: every primitive through HLSL compute shaders rendered from the kernel-level
// IR (the C renderer's hlsl dialect after the HLSL prelude, hlsl_prelude.h), with the tiled f32
// GEMM as a native kernel. The HLSL is Shader Model 6's, for D3D12. By default the device runs
// its HLSL through the Vulkan runtime: glslang's HLSL front end compiles it to SPIR-V (where
// D3D12 would use DXC), lavapipe or a Vulkan GPU runs it, and the grids, bindings and constants
// are laid out as D3D12 lays them out. RLX_DIRECTX_RUNTIME=d3d12 selects the D3D12 runtime
// (d3d12_runtime.h: WSL2's libd3d12.so and DXC), which no test machine has run. `rlx devices`
// says which.
// HLSL kernels index in 32 bits and compute i64/u64 in 32 bits with range checks; f64 and
// random numbers are refused with the reason (hlsl_supports).
#pragma once

#include <memory>

#include "rlx/device.h"

namespace rlx::directx {

// The device; without a Vulkan driver to verify its HLSL on it is listed as unavailable, with
// the reason.
std::shared_ptr<const Device> make_directx_device();

}  // namespace rlx::directx
