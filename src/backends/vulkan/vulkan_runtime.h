// Vulkan runtime pieces shared by the device and its executables: the instance, the first
// compute-capable physical device with the features rlx enables, buffers, GLSL -> SPIR-V
// through shaderc (cached in memory and on disk), compute pipelines cached by source, and
// submission to the one compute queue.
#pragma once

#include <vulkan/vulkan.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hal/hal.h"
#include "rlx/status.h"

namespace rlx::vulkan {

// "VK_ERROR_OUT_OF_DEVICE_MEMORY (-2)" and so on.
std::string vk_result_name(VkResult r);

// An rlx error for a failed Vulkan call: "vulkan: <what>: <result>".
Status vk_check(VkResult r, const std::string& what);

// What the device can do, as the driver reports it.
struct Caps {
  bool fp64 = false;       // shaderFloat64
  bool int64 = false;      // shaderInt64 (rlx's index math needs it)
  bool int16 = false;      // shaderInt16 and storageBuffer16BitAccess (f16, bf16, i16, u16)
  bool int8 = false;       // shaderInt8 and storageBuffer8BitAccess (i8, u8, bool)
  bool fp16 = false;       // shaderFloat16 (reported; rlx computes f16 in f32)
  uint32_t subgroup_size = 0;
  uint64_t memory_bytes = 0;  // device-local heaps
  uint32_t max_storage_buffers = 0;  // maxPerStageDescriptorStorageBuffers
  uint32_t max_groups[3] = {0, 0, 0};
};

// A buffer with its memory; `map` is set for host-visible buffers (kept mapped).
struct Buffer {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  void* map = nullptr;
  VkDeviceSize bytes = 0;
};

// A compute pipeline with its layouts: `bindings` storage buffers in set 0 and `push_bytes`
// of push constants.
struct Pipeline {
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
  uint32_t bindings = 0;
  uint32_t push_bytes = 0;
};

// The shading language a runtime's kernels are written in: GLSL (the vulkan device), or HLSL
// (the directx device verified on Vulkan: compiled with glslang's HLSL front end, with grids
// laid out as D3D12 lays them out, codegen::kHlslMaxGroupsX groups a row, and no kernel of
// more than 2^31-1 work items, since HLSL kernels index in 32 bits).
enum class ShaderLanguage { glsl, hlsl };

// The device runtime layer's runtime (hal.h) for the vulkan device: a hal::Buffer is a
// Buffer record of this runtime, a kernel a Pipeline, and a recording one command buffer
// (copies in from per-input staging buffers, every command with a compute->compute barrier
// after it, copies out to per-output staging buffers) that a replay submits.
class Runtime final : public hal::Runtime {
 public:
  // The instance and logical device, created once per process; an error saying why when there
  // is no Vulkan driver, no device, or the device lacks what rlx needs (shaderInt64).
  static Expected<std::shared_ptr<Runtime>> create(ShaderLanguage language = ShaderLanguage::glsl);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  VkDevice device() const { return device_; }
  uint32_t queue_family() const { return family_; }
  const Caps& caps() const { return caps_; }
  const std::string& description() const { return description_; }
  ShaderLanguage language() const { return language_; }

  // A storage buffer of `bytes` (at least 4): device-local, or host-visible and coherent
  // (mapped) for staging. The error names `what`.
  Expected<Buffer> create_buffer(VkDeviceSize bytes, bool host, const std::string& what);
  void destroy_buffer(Buffer& b);

  // SPIR-V for a compute shader in the runtime's language: from memory, else from the disk cache
  // ($RLX_CACHE_DIR, see codegen::kernel_cache_dir), else compiled with shaderc. Compile
  // errors carry shaderc's log and the numbered source lines around the first error.
  Expected<std::vector<uint32_t>> spirv(const std::string& source);

  // The pipeline for `glsl`, built once per process and kept until the runtime ends; the
  // driver's pipeline cache is loaded from and saved to the cache folder (one file per device
  // and driver version).
  Expected<const Pipeline*> pipeline(const std::string& glsl, uint32_t bindings, uint32_t push_bytes);

  // Submits `cb` to the compute queue and waits for it to finish.
  Status submit_and_wait(VkCommandBuffer cb);

  // Writes the driver's pipeline cache to disk if pipelines were built since the last save.
  void save_pipeline_cache();

  // hal::Runtime
  RLX_HAL_RUNTIME_METHODS;
  Status check_dispatch(const hal::Dispatch& d) const override;
  Expected<std::unique_ptr<hal::Recording>> record(hal::CommandList list) override;
  Status replay(hal::Recording& r, std::span<const void* const> inputs, std::span<void* const> outputs) override;

 private:
  explicit Runtime(ShaderLanguage language)
      : hal::Runtime(language == ShaderLanguage::hlsl ? "directx" : "vulkan"), language_(language) {}
  // The grid of `d` as this runtime dispatches it (hal::dispatch_groups, HLSL's rows of groups).
  Status groups(const hal::Dispatch& d, uint32_t out[3]) const;
  Expected<uint32_t> memory_type(uint32_t bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags prefer) const;
  // A blocking copy between host memory and a device buffer through a staging buffer.
  Status transfer(const hal::BufferRange& range, void* data, uint64_t bytes, bool to_device);

  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  uint32_t family_ = 0;
  Caps caps_;
  ShaderLanguage language_;
  VkPhysicalDeviceMemoryProperties mem_props_{};
  std::string description_;
  std::string cache_file_;
  bool cache_dirty_ = false;
  std::mutex mu_;        // pipelines_, spirv_, cache_dirty_
  std::mutex queue_mu_;  // queue_ and fence_
  std::map<std::string, std::unique_ptr<Pipeline>> pipelines_;
  std::map<std::string, std::vector<uint32_t>> spirv_;
};

}  // namespace rlx::vulkan
