// The null device's runtime: the skeleton of a hal::Runtime (hal/hal.h) to copy when adding a
// device. Its memory is host memory, so allocation and transfers work (tests/unit/hal_test.cpp
// runs the program executor on it); it has no compiler, so build() refuses with a note of what
// a real device does there. Each method says what a real runtime puts in its place.
#pragma once

#include "hal/hal.h"

namespace rlx::null_device {

class NullRuntime final : public hal::StreamRuntime {
 public:
  std::string_view name() const override { return "null"; }
  // A real runtime reports its device's limits here: storage buffers per kernel, bytes per
  // binding, and the offset alignment at which intermediates may share one arena buffer.
  const hal::Limits& limits() const override { return limits_; }
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

 private:
  hal::Limits limits_;
};

}  // namespace rlx::null_device
