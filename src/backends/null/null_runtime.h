// The null device's runtime: the skeleton of a hal::Runtime (hal/hal.h) to copy when adding a
// device. Its memory is host memory, so allocation and transfers work (tests/unit/hal_test.cpp
// runs the program executor on it); it has no compiler, so build() refuses with a note of what
// a real device does there. Each method says what a real runtime puts in its place.
#pragma once

#include "hal/hal.h"

namespace rlx::null_device {

class NullRuntime final : public hal::StreamRuntime {
 public:
  // A real runtime opens its device in a static create() (an error saying why it cannot)
  // and sets limits_ from what the driver reports: storage buffers per kernel, bytes per
  // binding, and the offset alignment at which intermediates may share one arena buffer.
  // Its header may declare the methods below with RLX_HAL_RUNTIME_METHODS and
  // RLX_HAL_STREAM_METHODS (hal.h).
  NullRuntime() : hal::StreamRuntime("null") {}
  // Device memory: clCreateBuffer, vkCreateBuffer + vkAllocateMemory, glNamedBufferStorage,
  // cudaMalloc, wgpuDeviceCreateBuffer. The id is whatever names the allocation.
  Expected<hal::Buffer> allocate(uint64_t bytes, const std::string& what) override;
  void release(hal::Buffer b) override;
  // Blocking copies (weights and constants go up once when a program is made).
  Status upload(const hal::BufferRange& range, const void* data, uint64_t bytes) override;
  Status download(const hal::BufferRange& range, void* data, uint64_t bytes) override;
  // A real runtime compiles the module's source for its dialect here (clBuildProgram, shaderc
  // + vkCreateComputePipelines, NVRTC, wgpuDeviceCreateShaderModule), caches it by source, and
  // returns one handle per entry.
  Expected<std::vector<hal::Kernel>> build(const hal::KernelModule& module) override;

 protected:
  // Queue primitives of an immediate-mode API (a runtime with command buffers overrides
  // record() and replay() instead, as the vulkan one does).
  Status write(const hal::BufferRange& range, const void* data, uint64_t bytes) override;
  Status enqueue(const hal::Command& c) override;
  Status read(const hal::BufferRange& range, void* data, uint64_t bytes) override;
  Status finish() override { return Status::ok(); }
};

}  // namespace rlx::null_device
