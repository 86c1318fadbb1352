// A translation unit for a device and the entry points to take from it: what the device
// dialects' renderers produce (device_modules.h) and what a device runtime builds (hal.h).
#pragma once

#include <string>
#include <vector>

namespace rlx::codegen {

// One entry point of a module: its name in the source (GLSL modules have one entry, `main`,
// and the name only labels errors), how many buffers it binds (bindings 0..n-1, or the first
// n arguments), and its int64 scalar parameters in order, which follow the buffers as arguments
// (OpenCL, CUDA), push constants (Vulkan) or uniforms of these names (OpenGL).
struct KernelEntry {
  std::string name;
  int buffers = 0;
  std::vector<std::string> scalars;
};

// A translation unit (OpenCL C, CUDA C++, one GLSL shader, ...) and the entries to take from it.
struct KernelModule {
  std::string source;
  std::vector<KernelEntry> entries;
};

}  // namespace rlx::codegen
