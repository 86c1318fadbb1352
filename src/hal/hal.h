// The device runtime interface (a HAL in IREE's sense, tinygrad's `Compiled`): what a GPU-class
// device's runtime offers the one program executor (program_executable.h), and nothing more.
// A runtime allocates device memory, uploads and downloads it, builds kernels from source, and
// runs a list of commands (dispatches, zero fills, opaque library calls) between writing the
// inputs and reading the outputs. The executor turns a kernel program into such a list once,
// at compile time; a run replays it.
//
// Two ways to implement one:
// - Immediate-mode APIs (OpenCL, CUDA, OpenGL) derive from StreamRuntime and implement the
//   queue primitives (write, enqueue, read, finish); StreamRuntime records by keeping the
//   list and replays it by enqueueing it in order.
// - APIs with command buffers (Vulkan, WebGPU, D3D12, Metal) derive from Runtime and record
//   the list into their own command buffer once (Vulkan), or prepare what a submission needs
//   once and encode per replay where command buffers are single-use (WebGPU); a replay copies
//   inputs in, submits, waits and copies outputs out.
// The null device (src/backends/null/) is the skeleton to start from.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/kernel_module.h"
#include "rlx/status.h"

namespace rlx::hal {

// A block of device memory as the runtime names it (a cl_mem, a device pointer, a GL buffer
// name, a runtime-owned record), opaque to the executor.
struct Buffer {
  uint64_t id = 0;
  uint64_t bytes = 0;
};

// A range of a buffer, what a kernel binds or a transfer touches. `bytes` is the range's
// length (whole 32-bit words where it is bound).
struct BufferRange {
  Buffer buffer;
  uint64_t offset = 0;
  uint64_t bytes = 0;
  bool operator==(const BufferRange& o) const { return buffer.id == o.buffer.id && offset == o.offset; }
};

// A built kernel entry point, as the runtime names it; lives as long as the runtime.
struct Kernel {
  uint64_t id = 0;
};

// What a runtime builds: a translation unit and its entry points (codegen/kernel_module.h).
using codegen::KernelEntry;
using codegen::KernelModule;

// One kernel launch. A launch over `items` work items (> 0) is shaped by the runtime the way
// its dialect's generated kernels expect (work-groups of its choosing, the items past `items`
// returning at once); otherwise `groups` work-groups of `local` items each (a tiled kernel).
struct Dispatch {
  Kernel kernel;
  std::string name;  // for errors and profiles
  std::vector<BufferRange> buffers;
  std::vector<int64_t> scalars;
  int64_t items = 0;
  uint32_t groups[3] = {0, 0, 0};
  uint32_t local[3] = {1, 1, 1};
  // nothing to run: no items and no groups (an empty product, a copy onto itself)
  bool empty() const { return items <= 0 && uint64_t{groups[0]} * groups[1] * groups[2] == 0; }
};

// What a command list holds, in execution order; each command sees the writes of those before.
struct Command {
  enum class Kind : uint8_t { dispatch, zero, call } kind = Kind::dispatch;
  Dispatch dispatch;        // dispatch
  BufferRange range;        // zero: set these bytes to 0
  // call: library work the runtime cannot see into (cuBLAS, a device's own launch sequence),
  // run in queue order with the runtime's native queue or stream; `name` labels it.
  std::function<Status()> call;
  std::string name;
};

// A host transfer of a replay: `bytes` bytes between `range` and host memory.
struct Transfer {
  BufferRange range;
  uint64_t bytes = 0;
};

// The commands of one program with the transfers around them: before the first command the
// host writes `inputs`, after the last it reads `outputs` (the program's outputs, then any
// words the kernels set for checks after the run).
struct CommandList {
  std::vector<Transfer> inputs;
  std::vector<Command> commands;
  std::vector<Transfer> outputs;
};

// A command list prepared for replay (a recorded command buffer, or the list itself).
class Recording {
 public:
  virtual ~Recording() = default;
};

// What the executor must know of a runtime's limits.
struct Limits {
  // Storage buffers one kernel may bind (OpenGL on llvmpipe: 16; WebGPU: 8 by default).
  int max_bindings = 1 << 30;
  // Bytes one binding may cover (OpenGL's GL_MAX_SHADER_STORAGE_BLOCK_SIZE).
  int64_t max_binding_bytes = INT64_MAX;
  // > 0: intermediates may share one arena buffer, each bound as a range at an offset that is a
  // multiple of this; 0: every buffer is its own allocation.
  int64_t arena_align = 0;
};

class Runtime {
 public:
  explicit Runtime(std::string name) : name_(std::move(name)) {}
  virtual ~Runtime() = default;
  // The device's name ("opencl"), for errors.
  std::string_view name() const { return name_; }
  const Limits& limits() const { return limits_; }

  // Device memory of `bytes` (> 0) bytes; the error names `what`.
  virtual Expected<Buffer> allocate(uint64_t bytes, const std::string& what) = 0;
  virtual void release(Buffer b) = 0;
  // Blocking copies between host memory and `range` (compile-time uploads, tests).
  virtual Status upload(const BufferRange& range, const void* data, uint64_t bytes) = 0;
  virtual Status download(const BufferRange& range, void* data, uint64_t bytes) = 0;

  // The module's entry points, built once per process and source (cached by the runtime).
  virtual Expected<std::vector<Kernel>> build(const KernelModule& module) = 0;
  // Whether the runtime can launch `d` (its work-group counts within the device's limits).
  // The executor asks when it makes a program, so that a run never fails on it.
  virtual Status check_dispatch(const Dispatch& d) const { return Status::ok(); }

  // Prepares `list` for replay; the list's buffers and kernels must outlive the recording.
  virtual Expected<std::unique_ptr<Recording>> record(CommandList list) = 0;
  // Runs a recording: host data in (`inputs[i]` for list.inputs[i]), commands, host data out
  // (`outputs[i]` for list.outputs[i]), and waits. Calls on one recording are serialized by
  // the caller.
  virtual Status replay(Recording& r, std::span<const void* const> inputs, std::span<void* const> outputs) = 0;

 protected:
  Limits limits_;  // set by the runtime when it opens its device

 private:
  std::string name_;
};

// A runtime over an immediate-mode queue: recording keeps the list, replay enqueues it.
// RLX_PROFILE=1 waits after each dispatch and prints the slowest kernels of a recording when
// it ends.
class StreamRuntime : public Runtime {
 public:
  using Runtime::Runtime;
  Expected<std::unique_ptr<Recording>> record(CommandList list) override;
  Status replay(Recording& r, std::span<const void* const> inputs, std::span<void* const> outputs) override;

 protected:
  // Queue primitives, in queue order: a host write, one dispatch or zero fill, a host read
  // (its data valid after finish), and waiting for all of it. `call` commands are run by
  // the replay itself.
  virtual Status write(const BufferRange& range, const void* data, uint64_t bytes) = 0;
  virtual Status enqueue(const Command& c) = 0;
  virtual Status read(const BufferRange& range, void* data, uint64_t bytes) = 0;
  virtual Status finish() = 0;
};

// The Runtime methods every runtime defines, for its public section.
#define RLX_HAL_RUNTIME_METHODS                                                                     \
  Expected<::rlx::hal::Buffer> allocate(uint64_t bytes, const std::string& what) override;          \
  void release(::rlx::hal::Buffer b) override;                                                      \
  Status upload(const ::rlx::hal::BufferRange& range, const void* data, uint64_t bytes) override;   \
  Status download(const ::rlx::hal::BufferRange& range, void* data, uint64_t bytes) override;       \
  Expected<std::vector<::rlx::hal::Kernel>> build(const ::rlx::hal::KernelModule& module) override

// The queue primitives every StreamRuntime defines, for its protected section.
#define RLX_HAL_STREAM_METHODS                                                                      \
  Status write(const ::rlx::hal::BufferRange& range, const void* data, uint64_t bytes) override;    \
  Status enqueue(const ::rlx::hal::Command& c) override;                                            \
  Status read(const ::rlx::hal::BufferRange& range, void* data, uint64_t bytes) override;           \
  Status finish() override

// Work-groups of `size` over a 2D grid (x up to `max_x`, numbered x + y * groups_x) covering
// `items`: the shape the GLSL (and WGSL) dialects' generated kernels expect.
void grid_2d(int64_t items, int size, int64_t max_x, uint32_t out[3]);

// A dispatch as CUDA-style launch APIs take it (cudaLaunchKernel, hipModuleLaunchKernel): a
// pointer to each argument (the buffers' device addresses, then the scalars as 64-bit
// integers; device_address), and blocks of `block_size` threads over a 1D grid covering `items`, or the
// dispatch's explicit groups and local size. `args` points into the object: keep it alive
// until the launch call returns.
struct PointerLaunch {
  std::vector<void*> pointers;
  std::vector<long long> scalars;
  std::vector<void*> args;
  uint32_t grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
};
std::unique_ptr<PointerLaunch> pointer_launch(const Dispatch& d, int block_size);
// An error naming `device` and the dispatch when its blocks of `block_size` items would pass
// `max_blocks` (the launch API's grid limit).
Status check_pointer_launch(const Dispatch& d, int block_size, int64_t max_blocks, std::string_view device);

// A range's device address on runtimes whose Buffer id is a device pointer (cuda, rocm).
inline void* device_address(const BufferRange& r) { return reinterpret_cast<char*>(r.buffer.id) + r.offset; }

// The work-group counts of `d` on a device that runs launches over items in groups of
// `group_size` on a 2D grid (grid_2d), and explicit launches as given; an error naming the
// dispatch where a count passes the device's `max_groups`.
Status dispatch_groups(const Dispatch& d, int group_size, const uint32_t max_groups[3], std::string_view device,
                       uint32_t out[3]);

}  // namespace rlx::hal
