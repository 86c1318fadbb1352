// The webgpu device's runtime (hal.h) on Dawn's WebGPU C API, loaded at run time from the pinned
// library scripts/install-webgpu.sh installs (webgpu_api.h says which). On these machines Dawn
// runs on SwiftShader's Vulkan driver (from Debian's chromium-common, installed by the same
// script); elsewhere on whatever adapter Dawn finds.
//
// A hal::Buffer is a storage buffer of the device; a kernel is a compute pipeline with an
// explicit layout (the kernel's storage buffers at bindings 0..n-1, its scalars in a uniform
// buffer at binding n, as i32: WGSL has no 64-bit integers); a recording holds the bind groups,
// scalar buffers and read-back buffers of a program, and a replay writes the inputs, encodes
// the dispatches (WebGPU command buffers are single-use), submits, and maps the outputs.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hal/hal.h"
#include "rlx/status.h"
#include "webgpu_api.h"

namespace rlx::webgpu {

// Where the runtime looks for Dawn and SwiftShader: $RLX_WEBGPU_DIR, else <build>/webgpu of the
// build it was compiled in, else build/webgpu of the source tree (scripts/install-webgpu.sh
// installs into build/webgpu by default).
std::string install_dir();

class Runtime final : public hal::Runtime {
 public:
  // Loads Dawn, picks an adapter and opens a device with the adapter's limits; an error saying
  // why when the library, the driver or an adapter is missing. Once per process.
  static Expected<std::shared_ptr<Runtime>> create();
  ~Runtime() override;
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // "SwiftShader Device (Subzero) (vulkan, Google)": the adapter as Dawn describes it.
  const std::string& description() const { return description_; }
  const api::Limits& device_limits() const { return dev_limits_; }

  RLX_HAL_RUNTIME_METHODS;
  Status check_dispatch(const hal::Dispatch& d) const override;
  Expected<std::unique_ptr<hal::Recording>> record(hal::CommandList list) override;
  Status replay(hal::Recording& r, std::span<const void* const> inputs, std::span<void* const> outputs) override;

  // A compute pipeline with its layout (built by build(), kept until the runtime ends).
  struct Pipeline {
    api::ComputePipeline pipeline = nullptr;
    api::BindGroupLayout layout = nullptr;
    int buffers = 0;
    int scalars = 0;
  };
  // A device buffer (what a hal::Buffer's id points to).
  struct Allocation {
    api::Buffer buffer = nullptr;
    uint64_t bytes = 0;  // as allocated: the request rounded up to whole words
  };

 private:
  Runtime() : hal::Runtime("webgpu") {}
  Status open();
  // Calls Dawn's event loop until `*done` (set by a callback) or the device reports an error.
  Status wait(const bool& done, const std::string& what);
  // The first error Dawn reported since the last call (validation, out of memory, device
  // lost), as an rlx error naming `what`; ok when there was none.
  Status take_error(const std::string& what);
  // Pops the error scope pushed before the calls `what` names: ok, or Dawn's error about them.
  Status pop_error_scope(const std::string& what);
  Expected<api::Buffer> make_buffer(uint64_t bytes, api::Flags usage, const std::string& what);
  // Copies `bytes` from `range` into host memory through a mapped read-back buffer.
  Status read_back(const std::vector<std::pair<hal::BufferRange, uint64_t>>& ranges, std::span<void* const> out,
                   api::CommandEncoder enc);
  Status write(const hal::BufferRange& range, const void* data, uint64_t bytes);
  friend void on_device_error(Runtime* rt, const std::string& message);

  void* lib_ = nullptr;
  api::Functions fn_;
  api::Instance instance_ = nullptr;
  api::Adapter adapter_ = nullptr;
  api::Device device_ = nullptr;
  api::Queue queue_ = nullptr;
  api::Limits dev_limits_{};
  std::string description_;
  std::mutex mu_;      // every call into Dawn, and pipelines_
  std::mutex err_mu_;  // error_, set by Dawn's error callbacks
  std::string error_;
  std::map<std::string, std::vector<std::unique_ptr<Pipeline>>> pipelines_;  // by source
};

}  // namespace rlx::webgpu
