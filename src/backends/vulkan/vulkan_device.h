// The Vulkan device: every primitive through GLSL compute shaders rendered from the kernel-level
// IR (the C renderer's glsl_vulkan dialect), compiled to SPIR-V with shaderc, buffers resident
// on the device, one command buffer per run. dot runs as a native tiled f32 matrix product.
// Runs here on Mesa's lavapipe (the CPU as a Vulkan 1.3 device) and on any Vulkan 1.1 driver
// with shaderInt64.
#pragma once

#include <memory>

#include "rlx/device.h"

namespace rlx::vulkan {

// The device; when there is no Vulkan driver or usable device it is listed as unavailable,
// with the reason.
std::shared_ptr<const Device> make_vulkan_device();

}  // namespace rlx::vulkan
