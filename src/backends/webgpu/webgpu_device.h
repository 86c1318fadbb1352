// The WebGPU device: every primitive through WGSL compute shaders rendered from the kernel-level
// IR (the C renderer's wgsl dialect after the WGSL prelude), run by Dawn (webgpu_runtime.h) with
// buffers resident on the device and one submission per run. WGSL has no 64-bit types, so f64,
// i64 and u64 values are refused with that reason, and sizes are 32-bit. Runs here on
// SwiftShader's Vulkan driver (scripts/install-webgpu.sh installs both).
#pragma once

#include <memory>

#include "rlx/device.h"

namespace rlx::webgpu {

// The device; without Dawn or an adapter it is listed as unavailable, with the reason.
std::shared_ptr<const Device> make_webgpu_device();

}  // namespace rlx::webgpu
