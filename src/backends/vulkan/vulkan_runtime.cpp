#include "vulkan_runtime.h"

#include <shaderc/shaderc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "codegen/c_jit.h"
#include "codegen/c_renderer.h"
#include "codegen/hlsl_prelude.h"

namespace rlx::vulkan {

std::string vk_result_name(VkResult r) {
  const char* n = nullptr;
  switch (r) {
    case VK_NOT_READY: n = "VK_NOT_READY"; break;
    case VK_TIMEOUT: n = "VK_TIMEOUT"; break;
    case VK_INCOMPLETE: n = "VK_INCOMPLETE"; break;
    case VK_ERROR_OUT_OF_HOST_MEMORY: n = "VK_ERROR_OUT_OF_HOST_MEMORY"; break;
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: n = "VK_ERROR_OUT_OF_DEVICE_MEMORY"; break;
    case VK_ERROR_INITIALIZATION_FAILED: n = "VK_ERROR_INITIALIZATION_FAILED"; break;
    case VK_ERROR_DEVICE_LOST: n = "VK_ERROR_DEVICE_LOST"; break;
    case VK_ERROR_MEMORY_MAP_FAILED: n = "VK_ERROR_MEMORY_MAP_FAILED"; break;
    case VK_ERROR_LAYER_NOT_PRESENT: n = "VK_ERROR_LAYER_NOT_PRESENT"; break;
    case VK_ERROR_EXTENSION_NOT_PRESENT: n = "VK_ERROR_EXTENSION_NOT_PRESENT"; break;
    case VK_ERROR_FEATURE_NOT_PRESENT: n = "VK_ERROR_FEATURE_NOT_PRESENT"; break;
    case VK_ERROR_INCOMPATIBLE_DRIVER: n = "VK_ERROR_INCOMPATIBLE_DRIVER (no Vulkan driver is installed)"; break;
    case VK_ERROR_TOO_MANY_OBJECTS: n = "VK_ERROR_TOO_MANY_OBJECTS"; break;
    case VK_ERROR_OUT_OF_POOL_MEMORY: n = "VK_ERROR_OUT_OF_POOL_MEMORY"; break;
    default: break;
  }
  return cat(n ? n : "VkResult", " (", static_cast<int>(r), ")");
}

Status vk_check(VkResult r, const std::string& what) {
  if (r == VK_SUCCESS) return Status::ok();
  return error(ErrorCode::runtime_error, "vulkan: ", what, ": ", vk_result_name(r));
}

namespace {

bool has_extension(const std::vector<VkExtensionProperties>& exts, const char* name) {
  for (const auto& e : exts)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

// The numbered source lines around the first "<file>:<line>:" of a shaderc log.
std::string excerpt(const std::string& src, const std::string& log) {
  const size_t at = log.find("rlx.comp");
  if (at == std::string::npos) return "";
  auto p = log.find(":", at);
  if (p == std::string::npos) return "";
  int line = std::atoi(log.c_str() + p + 1);
  std::istringstream in(src);
  std::string s, out;
  for (int n = 1; std::getline(in, s); ++n)
    if (n >= line - 3 && n <= line + 2) out += cat(n, n == line ? " >" : "  ", " ", s, "\n");
  return out;
}

}  // namespace

Expected<std::shared_ptr<Runtime>> Runtime::create(ShaderLanguage language) {
  std::shared_ptr<Runtime> r(new Runtime(language));
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "rlx";
  app.apiVersion = VK_API_VERSION_1_1;
  VkInstanceCreateInfo ici{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ici.pApplicationInfo = &app;
  VkResult rc = vkCreateInstance(&ici, nullptr, &r->instance_);
  if (rc != VK_SUCCESS)
    return error(ErrorCode::unavailable, "no Vulkan instance (", vk_result_name(rc),
                 "); on Debian install mesa-vulkan-drivers for lavapipe (the CPU), or a GPU vendor's driver");
  uint32_t n = 0;
  vkEnumeratePhysicalDevices(r->instance_, &n, nullptr);
  std::vector<VkPhysicalDevice> devs(n);
  if (n) vkEnumeratePhysicalDevices(r->instance_, &n, devs.data());
  // a GPU first, then anything (lavapipe is a CPU device); it must be Vulkan 1.1 with a
  // compute queue
  std::string skipped;
  for (int pass = 0; pass < 2 && !r->physical_; ++pass) {
    for (VkPhysicalDevice d : devs) {
      VkPhysicalDeviceProperties p;
      vkGetPhysicalDeviceProperties(d, &p);
      const bool gpu = p.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU || p.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU;
      if (pass == 0 && !gpu) continue;
      if (p.apiVersion < VK_API_VERSION_1_1) {
        if (pass == 1) skipped += cat(" ", p.deviceName, " is Vulkan 1.0;");
        continue;
      }
      uint32_t nq = 0;
      vkGetPhysicalDeviceQueueFamilyProperties(d, &nq, nullptr);
      std::vector<VkQueueFamilyProperties> qs(nq);
      vkGetPhysicalDeviceQueueFamilyProperties(d, &nq, qs.data());
      for (uint32_t q = 0; q < nq; ++q)
        if (qs[q].queueFlags & VK_QUEUE_COMPUTE_BIT) {
          r->physical_ = d;
          r->family_ = q;
          break;
        }
      if (r->physical_) break;
    }
  }
  if (!r->physical_)
    return error(ErrorCode::unavailable, devs.empty() ? std::string("the Vulkan loader lists no device")
                                                      : "no Vulkan 1.1 device with a compute queue:" + skipped);
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(r->physical_, &props);
  vkGetPhysicalDeviceMemoryProperties(r->physical_, &r->mem_props_);

  // features: core ones plus the 8/16-bit storage and arithmetic structs (core in 1.2,
  // extensions before)
  VkPhysicalDeviceShaderFloat16Int8FeaturesKHR f16i8{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES_KHR};
  VkPhysicalDevice8BitStorageFeaturesKHR s8{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES_KHR};
  VkPhysicalDevice16BitStorageFeatures s16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  uint32_t ne = 0;
  vkEnumerateDeviceExtensionProperties(r->physical_, nullptr, &ne, nullptr);
  std::vector<VkExtensionProperties> exts(ne);
  vkEnumerateDeviceExtensionProperties(r->physical_, nullptr, &ne, exts.data());
  const bool v12 = props.apiVersion >= VK_API_VERSION_1_2;
  const bool has_f16i8 = v12 || has_extension(exts, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
  const bool has_s8 = v12 || has_extension(exts, VK_KHR_8BIT_STORAGE_EXTENSION_NAME);
  void** next = &f2.pNext;
  *next = &s16;
  next = &s16.pNext;
  if (has_s8) {
    *next = &s8;
    next = &s8.pNext;
  }
  if (has_f16i8) *next = &f16i8;
  vkGetPhysicalDeviceFeatures2(r->physical_, &f2);
  Caps& c = r->caps_;
  c.fp64 = f2.features.shaderFloat64;
  c.int64 = f2.features.shaderInt64;
  c.int16 = f2.features.shaderInt16 && s16.storageBuffer16BitAccess;
  c.int8 = has_s8 && has_f16i8 && f16i8.shaderInt8 && s8.storageBuffer8BitAccess;
  c.fp16 = has_f16i8 && f16i8.shaderFloat16;
  c.max_storage_buffers = props.limits.maxPerStageDescriptorStorageBuffers;
  for (int i = 0; i < 3; ++i) c.max_groups[i] = props.limits.maxComputeWorkGroupCount[i];
  VkPhysicalDeviceSubgroupProperties sub{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  p2.pNext = &sub;
  vkGetPhysicalDeviceProperties2(r->physical_, &p2);
  c.subgroup_size = sub.subgroupSize;
  for (uint32_t h = 0; h < r->mem_props_.memoryHeapCount; ++h)
    if (r->mem_props_.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) c.memory_bytes += r->mem_props_.memoryHeaps[h].size;
  if (!c.int64)
    return error(ErrorCode::unavailable, props.deviceName, " has no shaderInt64 (rlx's generated shaders index with 64-bit integers)");

  // enable exactly what is there
  VkPhysicalDeviceFeatures2 en{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  en.features.shaderInt64 = VK_TRUE;
  en.features.shaderFloat64 = c.fp64;
  en.features.shaderInt16 = f2.features.shaderInt16;
  VkPhysicalDevice16BitStorageFeatures en16 = s16;
  VkPhysicalDevice8BitStorageFeaturesKHR en8 = s8;
  VkPhysicalDeviceShaderFloat16Int8FeaturesKHR enf = f16i8;
  en16.pNext = nullptr;
  en8.pNext = nullptr;
  enf.pNext = nullptr;
  next = &en.pNext;
  *next = &en16;
  next = &en16.pNext;
  std::vector<const char*> enable_exts;
  if (has_s8) {
    *next = &en8;
    next = &en8.pNext;
    if (!v12) enable_exts.push_back(VK_KHR_8BIT_STORAGE_EXTENSION_NAME);
  }
  if (has_f16i8) {
    *next = &enf;
    if (!v12) enable_exts.push_back(VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
  }
  const float prio = 1.0f;
  VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueFamilyIndex = r->family_;
  qci.queueCount = 1;
  qci.pQueuePriorities = &prio;
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dci.pNext = &en;
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  dci.enabledExtensionCount = static_cast<uint32_t>(enable_exts.size());
  dci.ppEnabledExtensionNames = enable_exts.data();
  rc = vkCreateDevice(r->physical_, &dci, nullptr, &r->device_);
  if (rc != VK_SUCCESS) return error(ErrorCode::unavailable, "vkCreateDevice on ", props.deviceName, ": ", vk_result_name(rc));
  vkGetDeviceQueue(r->device_, r->family_, 0, &r->queue_);
  VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  RLX_TRY(vk_check(vkCreateFence(r->device_, &fci, nullptr, &r->fence_), "vkCreateFence"));

  // the driver's pipeline cache, one file per device and driver version
  char uuid[2 * VK_UUID_SIZE + 1];
  for (int i = 0; i < VK_UUID_SIZE; ++i) std::snprintf(uuid + 2 * i, 3, "%02x", props.pipelineCacheUUID[i]);
  r->cache_file_ = cat(codegen::kernel_cache_dir(), "/vulkan-", props.vendorID, "-", props.deviceID, "-",
                       props.driverVersion, "-", uuid, ".pipelinecache");
  std::string blob;
  if (std::ifstream f(r->cache_file_, std::ios::binary); f) blob.assign(std::istreambuf_iterator<char>(f), {});
  VkPipelineCacheCreateInfo pci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  pci.initialDataSize = blob.size();
  pci.pInitialData = blob.empty() ? nullptr : blob.data();
  if (vkCreatePipelineCache(r->device_, &pci, nullptr, &r->cache_) != VK_SUCCESS) {
    pci.initialDataSize = 0;  // a stale or damaged file: start empty
    pci.pInitialData = nullptr;
    RLX_TRY(vk_check(vkCreatePipelineCache(r->device_, &pci, nullptr, &r->cache_), "vkCreatePipelineCache"));
  }

  r->description_ = cat(props.deviceName, " (Vulkan ", VK_API_VERSION_MAJOR(props.apiVersion), ".",
                        VK_API_VERSION_MINOR(props.apiVersion), "), ", c.memory_bytes >> 20, " MiB");
  // what GLSL kernels use; HLSL kernels compute as hlsl_prelude.h says, whatever the device has
  if (language == ShaderLanguage::glsl)
    r->description_ += cat(", fp64 ", c.fp64 ? "yes" : "no", ", fp16 ", c.fp16 ? "yes" : "no", " (f16 stored, computed in f32), int8 ",
                           c.int8 ? "yes" : "no", ", 16-bit storage ", c.int16 ? "yes" : "no", ", subgroup ", c.subgroup_size,
                           ", generated GLSL compute");
  return r;
}

Runtime::~Runtime() {
  if (device_) {
    vkDeviceWaitIdle(device_);
    save_pipeline_cache();
    for (auto& [src, p] : pipelines_) {
      vkDestroyPipeline(device_, p->pipeline, nullptr);
      vkDestroyPipelineLayout(device_, p->layout, nullptr);
      vkDestroyDescriptorSetLayout(device_, p->set_layout, nullptr);
    }
    if (cache_) vkDestroyPipelineCache(device_, cache_, nullptr);
    if (fence_) vkDestroyFence(device_, fence_, nullptr);
    vkDestroyDevice(device_, nullptr);
  }
  if (instance_) vkDestroyInstance(instance_, nullptr);
}

void Runtime::save_pipeline_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!cache_dirty_ || !cache_) return;
  size_t n = 0;
  if (vkGetPipelineCacheData(device_, cache_, &n, nullptr) != VK_SUCCESS || n == 0) return;
  std::string data(n, '\0');
  if (vkGetPipelineCacheData(device_, cache_, &n, data.data()) != VK_SUCCESS) return;
  if (!codegen::make_dirs(codegen::kernel_cache_dir())) return;  // a cache that cannot be written is only slower
  const std::string tmp = cat(cache_file_, ".", getpid(), ".tmp");
  {
    std::ofstream f(tmp, std::ios::binary);
    f.write(data.data(), static_cast<std::streamsize>(n));
    if (!f) return;
  }
  std::rename(tmp.c_str(), cache_file_.c_str());  // atomic: readers see the old or the new file
  cache_dirty_ = false;
}

Expected<uint32_t> Runtime::memory_type(uint32_t bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags prefer) const {
  for (VkMemoryPropertyFlags flags : {want | prefer, want})
    for (uint32_t i = 0; i < mem_props_.memoryTypeCount; ++i)
      if ((bits & (1u << i)) && (mem_props_.memoryTypes[i].propertyFlags & flags) == flags) return i;
  return error(ErrorCode::runtime_error, "vulkan: no memory type with the properties a buffer needs");
}

Expected<Buffer> Runtime::create_buffer(VkDeviceSize bytes, bool host, const std::string& what) {
  Buffer b;
  b.bytes = std::max<VkDeviceSize>(bytes, 4);  // Vulkan has no empty buffers
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = b.bytes;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  RLX_TRY(vk_check(vkCreateBuffer(device_, &bci, nullptr, &b.buffer), cat("creating a ", b.bytes, "-byte buffer for ", what)));
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device_, b.buffer, &req);
  auto type = host ? memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, 0)
                   : memory_type(req.memoryTypeBits, 0, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  if (!type) {
    destroy_buffer(b);
    return type.status();
  }
  VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  mai.allocationSize = req.size;
  mai.memoryTypeIndex = *type;
  if (Status s = vk_check(vkAllocateMemory(device_, &mai, nullptr, &b.memory), cat("allocating ", req.size, " bytes for ", what)); !s) {
    destroy_buffer(b);
    return s;
  }
  vkBindBufferMemory(device_, b.buffer, b.memory, 0);
  if (host) {
    if (Status s = vk_check(vkMapMemory(device_, b.memory, 0, VK_WHOLE_SIZE, 0, &b.map), "mapping a staging buffer"); !s) {
      destroy_buffer(b);
      return s;
    }
  }
  return b;
}

void Runtime::destroy_buffer(Buffer& b) {
  if (b.buffer) vkDestroyBuffer(device_, b.buffer, nullptr);
  if (b.memory) vkFreeMemory(device_, b.memory, nullptr);  // unmaps too
  b = Buffer{};
}

Expected<std::vector<uint32_t>> Runtime::spirv(const std::string& glsl) {
  const bool hlsl = language_ == ShaderLanguage::hlsl;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = spirv_.find(glsl); it != spirv_.end()) return it->second;
  }
  unsigned ver = 0, rev = 0;
  shaderc_get_spv_version(&ver, &rev);
  const std::string dir = codegen::kernel_cache_dir();
  const std::string path = dir + "/vk-" + codegen::hex_key(glsl + cat("\n//shaderc spv ", ver, ".", rev, hlsl ? " hlsl" : "")) + ".spv";
  std::vector<uint32_t> words;
  if (std::ifstream f(path, std::ios::binary); f) {
    std::string bytes((std::istreambuf_iterator<char>(f)), {});
    if (bytes.size() >= 20 && bytes.size() % 4 == 0) {
      words.resize(bytes.size() / 4);
      std::memcpy(words.data(), bytes.data(), bytes.size());
      if (words[0] != 0x07230203u) words.clear();  // not SPIR-V: compile again
    }
  }
  if (words.empty()) {
    shaderc_compiler_t compiler = shaderc_compiler_initialize();
    shaderc_compile_options_t opts = shaderc_compile_options_initialize();
    shaderc_compile_options_set_target_env(opts, shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_1);
    shaderc_compile_options_set_optimization_level(opts, shaderc_optimization_level_zero);  // the driver optimizes
    if (hlsl) shaderc_compile_options_set_source_language(opts, shaderc_source_language_hlsl);
    shaderc_compilation_result_t res =
        shaderc_compile_into_spv(compiler, glsl.data(), glsl.size(), shaderc_compute_shader, "rlx.comp", "main", opts);
    const bool ok = shaderc_result_get_compilation_status(res) == shaderc_compilation_status_success;
    std::string log = shaderc_result_get_error_message(res);
    if (ok) {
      const size_t n = shaderc_result_get_length(res);
      words.resize(n / 4);
      std::memcpy(words.data(), shaderc_result_get_bytes(res), n);
    }
    shaderc_result_release(res);
    shaderc_compile_options_release(opts);
    shaderc_compiler_release(compiler);
    if (!ok) {
      if (log.size() > 3000) log = log.substr(0, 3000) + "\n...";
      return error(ErrorCode::runtime_error, name(), ": compiling the generated ", hlsl ? "HLSL" : "GLSL", " failed:\n", log,
                   excerpt(glsl, log));
    }
    if (codegen::make_dirs(dir)) {  // a cache that cannot be written is only slower
      const std::string tmp = cat(path, ".", getpid(), ".tmp");
      std::ofstream f(tmp, std::ios::binary);
      f.write(reinterpret_cast<const char*>(words.data()), static_cast<std::streamsize>(words.size() * 4));
      f.close();
      if (f) std::rename(tmp.c_str(), path.c_str());
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  spirv_.emplace(glsl, words);
  return words;
}

Expected<const Pipeline*> Runtime::pipeline(const std::string& glsl, uint32_t bindings, uint32_t push_bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = pipelines_.find(glsl); it != pipelines_.end()) return it->second.get();
  }
  if (bindings > caps_.max_storage_buffers)
    return error(ErrorCode::unsupported, "vulkan: a kernel needs ", bindings, " storage buffers, this device allows ",
                 caps_.max_storage_buffers, " per shader");
  RLX_ASSIGN_OR_RETURN(std::vector<uint32_t> code, spirv(glsl));
  auto p = std::make_unique<Pipeline>();
  p->bindings = bindings;
  p->push_bytes = push_bytes;
  // on failure the partly built pipeline is released here
  struct Guard {
    VkDevice d;
    Pipeline* p;
    VkShaderModule m = VK_NULL_HANDLE;
    bool keep = false;
    ~Guard() {
      if (m) vkDestroyShaderModule(d, m, nullptr);
      if (keep) return;
      if (p->pipeline) vkDestroyPipeline(d, p->pipeline, nullptr);
      if (p->layout) vkDestroyPipelineLayout(d, p->layout, nullptr);
      if (p->set_layout) vkDestroyDescriptorSetLayout(d, p->set_layout, nullptr);
    }
  } guard{device_, p.get()};
  std::vector<VkDescriptorSetLayoutBinding> b(bindings);
  for (uint32_t i = 0; i < bindings; ++i) {
    b[i].binding = i;
    b[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    b[i].descriptorCount = 1;
    b[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo dl{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  dl.bindingCount = bindings;
  dl.pBindings = b.data();
  RLX_TRY(vk_check(vkCreateDescriptorSetLayout(device_, &dl, nullptr, &p->set_layout), "vkCreateDescriptorSetLayout"));
  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
  VkPipelineLayoutCreateInfo pl{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pl.setLayoutCount = 1;
  pl.pSetLayouts = &p->set_layout;
  pl.pushConstantRangeCount = push_bytes ? 1 : 0;
  pl.pPushConstantRanges = &range;
  RLX_TRY(vk_check(vkCreatePipelineLayout(device_, &pl, nullptr, &p->layout), "vkCreatePipelineLayout"));
  VkShaderModuleCreateInfo sm{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  sm.codeSize = code.size() * 4;
  sm.pCode = code.data();
  RLX_TRY(vk_check(vkCreateShaderModule(device_, &sm, nullptr, &guard.m), "vkCreateShaderModule"));
  VkComputePipelineCreateInfo cp{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  cp.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  cp.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  cp.stage.module = guard.m;
  cp.stage.pName = "main";
  cp.layout = p->layout;
  RLX_TRY(vk_check(vkCreateComputePipelines(device_, cache_, 1, &cp, nullptr, &p->pipeline), "vkCreateComputePipelines"));
  guard.keep = true;
  std::lock_guard<std::mutex> lock(mu_);
  cache_dirty_ = true;
  auto [it, inserted] = pipelines_.try_emplace(glsl, std::move(p));
  if (!inserted) {  // built twice concurrently: keep the first
    Pipeline* dup = p.get();
    vkDestroyPipeline(device_, dup->pipeline, nullptr);
    vkDestroyPipelineLayout(device_, dup->layout, nullptr);
    vkDestroyDescriptorSetLayout(device_, dup->set_layout, nullptr);
  }
  return it->second.get();
}

Status Runtime::submit_and_wait(VkCommandBuffer cb) {
  std::lock_guard<std::mutex> lock(queue_mu_);
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cb;
  RLX_TRY(vk_check(vkResetFences(device_, 1, &fence_), "vkResetFences"));
  RLX_TRY(vk_check(vkQueueSubmit(queue_, 1, &si, fence_), "vkQueueSubmit"));
  return vk_check(vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX), "waiting for the queue");
}

}  // namespace rlx::vulkan

// ---- the device runtime layer (hal.h) ----

namespace rlx::vulkan {
namespace {

Buffer& buf(const hal::BufferRange& r) { return *reinterpret_cast<Buffer*>(r.buffer.id); }

void barrier(VkCommandBuffer cb, VkPipelineStageFlags src, VkAccessFlags src_access, VkPipelineStageFlags dst,
             VkAccessFlags dst_access) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = src_access;
  mb.dstAccessMask = dst_access;
  vkCmdPipelineBarrier(cb, src, dst, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

// A command pool with one primary command buffer.
struct Commands {
  VkDevice device = VK_NULL_HANDLE;
  VkCommandPool pool = VK_NULL_HANDLE;
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  ~Commands() {
    if (pool) vkDestroyCommandPool(device, pool, nullptr);
  }
  Status create(VkDevice d, uint32_t family) {
    device = d;
    VkCommandPoolCreateInfo cpi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    cpi.queueFamilyIndex = family;
    RLX_TRY(vk_check(vkCreateCommandPool(d, &cpi, nullptr, &pool), "vkCreateCommandPool"));
    VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    cai.commandPool = pool;
    cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    cai.commandBufferCount = 1;
    return vk_check(vkAllocateCommandBuffers(d, &cai, &cmd), "vkAllocateCommandBuffers");
  }
};

// A recorded program: its command buffer, descriptor sets and staging buffers.
class VulkanRecording final : public hal::Recording {
 public:
  explicit VulkanRecording(Runtime& rt) : rt(rt) {}
  ~VulkanRecording() override {
    if (desc_pool) vkDestroyDescriptorPool(rt.device(), desc_pool, nullptr);
    for (Buffer& b : stage_in) rt.destroy_buffer(b);
    for (Buffer& b : stage_out) rt.destroy_buffer(b);
  }
  Runtime& rt;
  hal::CommandList list;
  Commands commands;
  VkDescriptorPool desc_pool = VK_NULL_HANDLE;
  std::vector<Buffer> stage_in, stage_out;
};

}  // namespace

Expected<hal::Buffer> Runtime::allocate(uint64_t bytes, const std::string& what) {
  RLX_ASSIGN_OR_RETURN(Buffer b, create_buffer(bytes, false, what));
  return hal::Buffer{reinterpret_cast<uint64_t>(new Buffer(b)), bytes};
}

void Runtime::release(hal::Buffer b) {
  if (!b.id) return;
  Buffer* p = reinterpret_cast<Buffer*>(b.id);
  destroy_buffer(*p);
  delete p;
}

Status Runtime::transfer(const hal::BufferRange& r, void* data, uint64_t bytes, bool to_device) {
  if (bytes == 0) return Status::ok();
  RLX_ASSIGN_OR_RETURN(Buffer staging, create_buffer(bytes, true, to_device ? "an upload" : "a download"));
  Commands c;
  Status s = c.create(device_, family_);
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  if (s) s = vk_check(vkBeginCommandBuffer(c.cmd, &bi), "vkBeginCommandBuffer");
  if (s) {
    if (to_device) std::memcpy(staging.map, data, bytes);
    const VkBufferCopy copy = to_device ? VkBufferCopy{0, r.offset, bytes} : VkBufferCopy{r.offset, 0, bytes};
    vkCmdCopyBuffer(c.cmd, to_device ? staging.buffer : buf(r).buffer, to_device ? buf(r).buffer : staging.buffer, 1, &copy);
    barrier(c.cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
            VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_HOST_READ_BIT | VK_ACCESS_SHADER_READ_BIT);
    s = vk_check(vkEndCommandBuffer(c.cmd), "vkEndCommandBuffer");
  }
  if (s) s = submit_and_wait(c.cmd);
  if (s && !to_device) std::memcpy(data, staging.map, bytes);
  destroy_buffer(staging);
  return s;
}

Status Runtime::upload(const hal::BufferRange& r, const void* data, uint64_t bytes) {
  return transfer(r, const_cast<void*>(data), bytes, true);
}

Status Runtime::download(const hal::BufferRange& r, void* data, uint64_t bytes) { return transfer(r, data, bytes, false); }

Expected<std::vector<hal::Kernel>> Runtime::build(const hal::KernelModule& module) {
  std::vector<hal::Kernel> out;
  for (const hal::KernelEntry& e : module.entries) {
    RLX_ASSIGN_OR_RETURN(const Pipeline* p, pipeline(module.source, static_cast<uint32_t>(e.buffers),
                                                     static_cast<uint32_t>(e.scalars.size() * sizeof(int64_t))));
    out.push_back({reinterpret_cast<uint64_t>(p)});
  }
  return out;
}

Status Runtime::groups(const hal::Dispatch& d, uint32_t out[3]) const {
  if (language_ == ShaderLanguage::glsl) return hal::dispatch_groups(d, codegen::kGlslWorkgroupSize, caps_.max_groups, "vulkan", out);
  // HLSL kernels index in 32 bits and find their element in rows of kHlslMaxGroupsX groups
  if (d.items > INT32_MAX)
    return error(ErrorCode::unsupported, "directx: kernel ", d.name, " runs ", d.items, " work items, more than 2^31-1");
  for (int64_t v : d.scalars)
    if (v < INT32_MIN || v > INT32_MAX)
      return error(ErrorCode::unsupported, "directx: kernel ", d.name, " takes the size ", v, ", past the 32 bits HLSL kernels index in");
  const uint32_t max[3] = {std::min<uint32_t>(caps_.max_groups[0], codegen::kHlslMaxGroupsX), caps_.max_groups[1], caps_.max_groups[2]};
  return hal::dispatch_groups(d, codegen::kGlslWorkgroupSize, max, "directx", out);
}

Status Runtime::check_dispatch(const hal::Dispatch& d) const {
  uint32_t g[3];
  return groups(d, g);
}

Expected<std::unique_ptr<hal::Recording>> Runtime::record(hal::CommandList list) {
  save_pipeline_cache();  // the program's pipelines are built by now
  auto rec = std::make_unique<VulkanRecording>(*this);
  rec->list = std::move(list);
  const hal::CommandList& l = rec->list;
  RLX_TRY(rec->commands.create(device_, family_));
  for (size_t i = 0; i < l.inputs.size(); ++i) {
    RLX_ASSIGN_OR_RETURN(Buffer s, create_buffer(std::max<uint64_t>(l.inputs[i].bytes, 4), true, cat("input ", i)));
    rec->stage_in.push_back(s);
  }
  for (size_t i = 0; i < l.outputs.size(); ++i) {
    RLX_ASSIGN_OR_RETURN(Buffer s, create_buffer(std::max<uint64_t>(l.outputs[i].bytes, 4), true, cat("output ", i)));
    rec->stage_out.push_back(s);
  }
  uint32_t sets = 0, descriptors = 0;
  for (const hal::Command& c : l.commands) {
    if (c.kind == hal::Command::Kind::call)
      return error(ErrorCode::unsupported, "vulkan: ", c.name, " is a library call; vulkan records commands only");
    if (c.kind == hal::Command::Kind::dispatch && !c.dispatch.empty()) {
      ++sets;
      descriptors += static_cast<uint32_t>(c.dispatch.buffers.size());
    }
  }
  if (sets) {
    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, std::max<uint32_t>(descriptors, 1)};
    VkDescriptorPoolCreateInfo dpi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    dpi.maxSets = sets;
    dpi.poolSizeCount = 1;
    dpi.pPoolSizes = &size;
    RLX_TRY(vk_check(vkCreateDescriptorPool(device_, &dpi, nullptr, &rec->desc_pool), "vkCreateDescriptorPool"));
  }
  VkCommandBuffer cb = rec->commands.cmd;
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  RLX_TRY(vk_check(vkBeginCommandBuffer(cb, &bi), "vkBeginCommandBuffer"));
  const VkAccessFlags shader_rw = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  // Inputs are copied in before any kernel runs and outputs copied out after the last, so an
  // output may share host memory with an input (a donated cache) safely.
  for (size_t i = 0; i < l.inputs.size(); ++i) {
    if (l.inputs[i].bytes == 0) continue;
    const VkBufferCopy c{0, l.inputs[i].range.offset, l.inputs[i].bytes};
    vkCmdCopyBuffer(cb, rec->stage_in[i].buffer, buf(l.inputs[i].range).buffer, 1, &c);
  }
  barrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
          shader_rw | VK_ACCESS_TRANSFER_WRITE_BIT);
  for (const hal::Command& c : l.commands) {
    if (c.kind == hal::Command::Kind::zero) {
      vkCmdFillBuffer(cb, buf(c.range).buffer, c.range.offset, c.range.bytes, 0);
      barrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, shader_rw);
      continue;
    }
    const hal::Dispatch& d = c.dispatch;
    if (d.empty()) continue;
    const Pipeline* p = reinterpret_cast<const Pipeline*>(d.kernel.id);
    VkDescriptorSet set = VK_NULL_HANDLE;
    VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    ai.descriptorPool = rec->desc_pool;
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &p->set_layout;
    RLX_TRY(vk_check(vkAllocateDescriptorSets(device_, &ai, &set), "vkAllocateDescriptorSets"));
    std::vector<VkDescriptorBufferInfo> infos(d.buffers.size());
    std::vector<VkWriteDescriptorSet> writes(d.buffers.size());
    for (size_t a = 0; a < d.buffers.size(); ++a) {
      infos[a] = {buf(d.buffers[a]).buffer, d.buffers[a].offset, d.buffers[a].bytes};
      writes[a] = VkWriteDescriptorSet{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
      writes[a].dstSet = set;
      writes[a].dstBinding = static_cast<uint32_t>(a);
      writes[a].descriptorCount = 1;
      writes[a].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[a].pBufferInfo = &infos[a];
    }
    vkUpdateDescriptorSets(device_, static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);
    uint32_t g[3];
    RLX_TRY(groups(d, g));
    vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipeline);
    vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, 1, &set, 0, nullptr);
    if (p->push_bytes)
      vkCmdPushConstants(cb, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, p->push_bytes, d.scalars.data());
    vkCmdDispatch(cb, g[0], g[1], g[2]);
    barrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
            VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, shader_rw | VK_ACCESS_TRANSFER_WRITE_BIT);
  }
  barrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
          VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_READ_BIT);
  for (size_t i = 0; i < l.outputs.size(); ++i) {
    if (l.outputs[i].bytes == 0) continue;
    const VkBufferCopy c{l.outputs[i].range.offset, 0, l.outputs[i].bytes};
    vkCmdCopyBuffer(cb, buf(l.outputs[i].range).buffer, rec->stage_out[i].buffer, 1, &c);
  }
  barrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
          VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
  RLX_TRY(vk_check(vkEndCommandBuffer(cb), "vkEndCommandBuffer"));
  return std::unique_ptr<hal::Recording>(std::move(rec));
}

Status Runtime::replay(hal::Recording& r, std::span<const void* const> inputs, std::span<void* const> outputs) {
  auto& rec = static_cast<VulkanRecording&>(r);
  if (inputs.size() != rec.stage_in.size() || outputs.size() != rec.stage_out.size())
    return error(ErrorCode::internal, "vulkan: replay with ", inputs.size(), " inputs and ", outputs.size(), " outputs");
  for (size_t i = 0; i < inputs.size(); ++i)
    if (rec.list.inputs[i].bytes) std::memcpy(rec.stage_in[i].map, inputs[i], rec.list.inputs[i].bytes);
  RLX_TRY(submit_and_wait(rec.commands.cmd));
  for (size_t i = 0; i < outputs.size(); ++i)
    if (rec.list.outputs[i].bytes) std::memcpy(outputs[i], rec.stage_out[i].map, rec.list.outputs[i].bytes);
  return Status::ok();
}

}  // namespace rlx::vulkan
