// The OpenGL device: every primitive through GLSL compute shaders rendered from the kernel-level
// IR (the C renderer's glsl_gl dialect), compiled by the driver, buffers resident on the device
// as shader storage buffers, one glDispatchCompute per kernel with a storage barrier between
// them. dot runs as the native tiled f32 matrix product shared with the Vulkan device
// (kernels::tiled_gemm_source). Runs headless through EGL (no window system): here on Mesa's
// llvmpipe (the CPU as an OpenGL 4.5 device), and on any OpenGL 4.5 core driver with
// GL_ARB_gpu_shader_int64. OpenGL 4.5 GLSL has no 8/16-bit types: buffers of bool, i8, u8, i16,
// u16, f16 and bf16 are packed in 32-bit words by the renderer (see c_renderer.cpp).
#pragma once

#include <memory>

#include "rlx/device.h"

namespace rlx::opengl {

// The device; when there is no EGL display or usable OpenGL 4.5 context it is listed as
// unavailable, with the reason.
std::shared_ptr<const Device> make_opengl_device();

}  // namespace rlx::opengl
