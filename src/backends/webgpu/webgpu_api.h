// The part of the standard WebGPU C API (webgpu.h, as Dawn implements it) the webgpu device
// uses, declared here because no header ships with the library rlx loads: Dawn built as the
// shared library of npm's bun-webgpu-linux-x64 0.1.7 (scripts/install-webgpu.sh pins it). The
// layouts are those of that Dawn (the webgpu-headers of 2025: WGPUStringView, futures, callback
// infos with two userdata pointers, WGPULimits with maxImmediateSize); a different Dawn may
// differ, so the library is pinned and found by path (webgpu_runtime.cpp), not by soname.
// Only what is used is declared; every struct is zero-initialised before use, which gives the
// API's defaults.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rlx::webgpu::api {

using Bool = uint32_t;
using Flags = uint64_t;
using Instance = struct InstanceImpl*;
using Adapter = struct AdapterImpl*;
using Device = struct DeviceImpl*;
using Queue = struct QueueImpl*;
using Buffer = struct BufferImpl*;
using ShaderModule = struct ShaderModuleImpl*;
using BindGroupLayout = struct BindGroupLayoutImpl*;
using BindGroup = struct BindGroupImpl*;
using PipelineLayout = struct PipelineLayoutImpl*;
using ComputePipeline = struct ComputePipelineImpl*;
using CommandEncoder = struct CommandEncoderImpl*;
using ComputePassEncoder = struct ComputePassEncoderImpl*;
using CommandBuffer = struct CommandBufferImpl*;

struct StringView {
  const char* data = nullptr;
  size_t length = SIZE_MAX;  // WGPU_STRLEN: null-terminated (or null)
};
struct ChainedStruct {
  const ChainedStruct* next = nullptr;
  uint32_t stype = 0;
};
struct Future {
  uint64_t id = 0;
};

// enum values
inline constexpr uint32_t kSTypeShaderSourceWGSL = 2;
inline constexpr uint32_t kCallbackModeAllowProcessEvents = 2;
inline constexpr uint32_t kStatusSuccess = 1;  // every *Status enum: Success = 1
inline constexpr uint32_t kBackendVulkan = 6;
inline constexpr uint32_t kFeatureLevelCore = 2;
inline constexpr uint32_t kErrorFilterValidation = 1;
inline constexpr uint32_t kErrorFilterOutOfMemory = 2;
inline constexpr uint32_t kErrorTypeNoError = 1;
inline constexpr uint32_t kBufferBindingStorage = 3;
inline constexpr uint32_t kBufferBindingUniform = 2;
inline constexpr Flags kBufferUsageMapRead = 0x1;
inline constexpr Flags kBufferUsageMapWrite = 0x2;
inline constexpr Flags kBufferUsageCopySrc = 0x4;
inline constexpr Flags kBufferUsageCopyDst = 0x8;
inline constexpr Flags kBufferUsageUniform = 0x40;
inline constexpr Flags kBufferUsageStorage = 0x80;
inline constexpr Flags kMapModeRead = 0x1;
inline constexpr Flags kShaderStageCompute = 0x4;

using RequestAdapterCallback = void (*)(uint32_t status, Adapter adapter, StringView message, void* u1, void* u2);
using RequestDeviceCallback = void (*)(uint32_t status, Device device, StringView message, void* u1, void* u2);
using DeviceLostCallback = void (*)(const Device* device, uint32_t reason, StringView message, void* u1, void* u2);
using UncapturedErrorCallback = void (*)(const Device* device, uint32_t type, StringView message, void* u1, void* u2);
using BufferMapCallback = void (*)(uint32_t status, StringView message, void* u1, void* u2);
using PopErrorScopeCallback = void (*)(uint32_t status, uint32_t type, StringView message, void* u1, void* u2);
using QueueWorkDoneCallback = void (*)(uint32_t status, void* u1, void* u2);

// A callback info: every async call takes one of these by value.
template <class Fn>
struct CallbackInfo {
  const ChainedStruct* next = nullptr;
  uint32_t mode = kCallbackModeAllowProcessEvents;
  Fn callback = nullptr;
  void* userdata1 = nullptr;
  void* userdata2 = nullptr;
};

struct RequestAdapterOptions {
  const ChainedStruct* next = nullptr;
  uint32_t feature_level = 0;
  uint32_t power_preference = 0;
  Bool force_fallback_adapter = 0;
  uint32_t backend_type = 0;
  void* compatible_surface = nullptr;
};

struct Limits {
  ChainedStruct* next = nullptr;
  uint32_t max_texture_dimension_1d, max_texture_dimension_2d, max_texture_dimension_3d, max_texture_array_layers;
  uint32_t max_bind_groups, max_bind_groups_plus_vertex_buffers, max_bindings_per_bind_group;
  uint32_t max_dynamic_uniform_buffers_per_pipeline_layout, max_dynamic_storage_buffers_per_pipeline_layout;
  uint32_t max_sampled_textures_per_shader_stage, max_samplers_per_shader_stage;
  uint32_t max_storage_buffers_per_shader_stage, max_storage_textures_per_shader_stage;
  uint32_t max_uniform_buffers_per_shader_stage;
  uint64_t max_uniform_buffer_binding_size, max_storage_buffer_binding_size;
  uint32_t min_uniform_buffer_offset_alignment, min_storage_buffer_offset_alignment;
  uint32_t max_vertex_buffers;
  uint64_t max_buffer_size;
  uint32_t max_vertex_attributes, max_vertex_buffer_array_stride, max_inter_stage_shader_variables;
  uint32_t max_color_attachments, max_color_attachment_bytes_per_sample;
  uint32_t max_compute_workgroup_storage_size, max_compute_invocations_per_workgroup;
  uint32_t max_compute_workgroup_size_x, max_compute_workgroup_size_y, max_compute_workgroup_size_z;
  uint32_t max_compute_workgroups_per_dimension;
  uint32_t max_immediate_size;
  uint32_t max_storage_buffers_in_vertex_stage, max_storage_textures_in_vertex_stage;
  uint32_t max_storage_buffers_in_fragment_stage, max_storage_textures_in_fragment_stage;
  // room for fields a newer library may append: GetLimits writes the whole struct it knows
  uint32_t reserved[64];
};

struct AdapterInfo {
  ChainedStruct* next = nullptr;
  StringView vendor, architecture, device, description;
  uint32_t backend_type, adapter_type, vendor_id, device_id, subgroup_min_size, subgroup_max_size;
  uint32_t reserved[16];
};

struct QueueDescriptor {
  const ChainedStruct* next = nullptr;
  StringView label;
};

struct UncapturedErrorCallbackInfo {
  const ChainedStruct* next = nullptr;
  UncapturedErrorCallback callback = nullptr;
  void* userdata1 = nullptr;
  void* userdata2 = nullptr;
};

struct DeviceDescriptor {
  const ChainedStruct* next = nullptr;
  StringView label;
  size_t required_feature_count = 0;
  const uint32_t* required_features = nullptr;
  const Limits* required_limits = nullptr;
  QueueDescriptor default_queue;
  CallbackInfo<DeviceLostCallback> device_lost;
  UncapturedErrorCallbackInfo uncaptured_error;
};

struct BufferDescriptor {
  const ChainedStruct* next = nullptr;
  StringView label;
  Flags usage = 0;
  uint64_t size = 0;
  Bool mapped_at_creation = 0;
};

struct ShaderSourceWGSL {
  ChainedStruct chain{nullptr, kSTypeShaderSourceWGSL};
  StringView code;
};
struct ShaderModuleDescriptor {
  const ChainedStruct* next = nullptr;
  StringView label;
};

struct BufferBindingLayout {
  const ChainedStruct* next = nullptr;
  uint32_t type = 0;  // 0: binding not used
  Bool has_dynamic_offset = 0;
  uint64_t min_binding_size = 0;
};
struct SamplerBindingLayout {
  const ChainedStruct* next = nullptr;
  uint32_t type = 0;
};
struct TextureBindingLayout {
  const ChainedStruct* next = nullptr;
  uint32_t sample_type = 0, view_dimension = 0;
  Bool multisampled = 0;
};
struct StorageTextureBindingLayout {
  const ChainedStruct* next = nullptr;
  uint32_t access = 0, format = 0, view_dimension = 0;
};
struct BindGroupLayoutEntry {
  const ChainedStruct* next = nullptr;
  uint32_t binding = 0;
  Flags visibility = 0;
  uint32_t binding_array_size = 0;
  BufferBindingLayout buffer;
  SamplerBindingLayout sampler;
  TextureBindingLayout texture;
  StorageTextureBindingLayout storage_texture;
};
struct BindGroupLayoutDescriptor {
  const ChainedStruct* next = nullptr;
  StringView label;
  size_t entry_count = 0;
  const BindGroupLayoutEntry* entries = nullptr;
};
struct BindGroupEntry {
  const ChainedStruct* next = nullptr;
  uint32_t binding = 0;
  Buffer buffer = nullptr;
  uint64_t offset = 0;
  uint64_t size = 0;
  void* sampler = nullptr;
  void* texture_view = nullptr;
};
struct BindGroupDescriptor {
  const ChainedStruct* next = nullptr;
  StringView label;
  BindGroupLayout layout = nullptr;
  size_t entry_count = 0;
  const BindGroupEntry* entries = nullptr;
};
struct PipelineLayoutDescriptor {
  const ChainedStruct* next = nullptr;
  StringView label;
  size_t bind_group_layout_count = 0;
  const BindGroupLayout* bind_group_layouts = nullptr;
  uint32_t immediate_size = 0;
};
struct ComputeState {
  const ChainedStruct* next = nullptr;
  ShaderModule module = nullptr;
  StringView entry_point;
  size_t constant_count = 0;
  const void* constants = nullptr;
};
struct ComputePipelineDescriptor {
  const ChainedStruct* next = nullptr;
  StringView label;
  PipelineLayout layout = nullptr;
  ComputeState compute;
};
struct CommandEncoderDescriptor {
  const ChainedStruct* next = nullptr;
  StringView label;
};
struct ComputePassDescriptor {
  const ChainedStruct* next = nullptr;
  StringView label;
  const void* timestamp_writes = nullptr;
};
struct CommandBufferDescriptor {
  const ChainedStruct* next = nullptr;
  StringView label;
};

// The entry points, resolved from the library by name (webgpu_runtime.cpp).
#define RLX_WGPU_FUNCTIONS(X)                                                                                        \
  X(CreateInstance, Instance, (const void* descriptor))                                                             \
  X(InstanceRequestAdapter, Future, (Instance, const RequestAdapterOptions*, CallbackInfo<RequestAdapterCallback>)) \
  X(InstanceProcessEvents, void, (Instance))                                                                         \
  X(InstanceRelease, void, (Instance))                                                                               \
  X(AdapterGetLimits, uint32_t, (Adapter, Limits*))                                                                  \
  X(AdapterGetInfo, uint32_t, (Adapter, AdapterInfo*))                                                               \
  X(AdapterInfoFreeMembers, void, (AdapterInfo))                                                                     \
  X(AdapterRequestDevice, Future, (Adapter, const DeviceDescriptor*, CallbackInfo<RequestDeviceCallback>))           \
  X(AdapterRelease, void, (Adapter))                                                                                 \
  X(DeviceGetQueue, Queue, (Device))                                                                                 \
  X(DeviceCreateBuffer, Buffer, (Device, const BufferDescriptor*))                                                   \
  X(DeviceCreateShaderModule, ShaderModule, (Device, const ShaderModuleDescriptor*))                                 \
  X(DeviceCreateBindGroupLayout, BindGroupLayout, (Device, const BindGroupLayoutDescriptor*))                        \
  X(DeviceCreatePipelineLayout, PipelineLayout, (Device, const PipelineLayoutDescriptor*))                           \
  X(DeviceCreateComputePipeline, ComputePipeline, (Device, const ComputePipelineDescriptor*))                        \
  X(DeviceCreateBindGroup, BindGroup, (Device, const BindGroupDescriptor*))                                          \
  X(DeviceCreateCommandEncoder, CommandEncoder, (Device, const CommandEncoderDescriptor*))                           \
  X(DevicePushErrorScope, void, (Device, uint32_t filter))                                                           \
  X(DevicePopErrorScope, Future, (Device, CallbackInfo<PopErrorScopeCallback>))                                      \
  X(DeviceRelease, void, (Device))                                                                                   \
  X(BufferMapAsync, Future, (Buffer, Flags mode, size_t offset, size_t size, CallbackInfo<BufferMapCallback>))       \
  X(BufferGetConstMappedRange, const void*, (Buffer, size_t offset, size_t size))                                    \
  X(BufferGetMappedRange, void*, (Buffer, size_t offset, size_t size))                                               \
  X(BufferUnmap, void, (Buffer))                                                                                     \
  X(BufferDestroy, void, (Buffer))                                                                                   \
  X(BufferRelease, void, (Buffer))                                                                                   \
  X(ShaderModuleRelease, void, (ShaderModule))                                                                       \
  X(BindGroupLayoutRelease, void, (BindGroupLayout))                                                                 \
  X(BindGroupRelease, void, (BindGroup))                                                                             \
  X(PipelineLayoutRelease, void, (PipelineLayout))                                                                   \
  X(ComputePipelineRelease, void, (ComputePipeline))                                                                 \
  X(CommandEncoderBeginComputePass, ComputePassEncoder, (CommandEncoder, const ComputePassDescriptor*))              \
  X(CommandEncoderCopyBufferToBuffer, void, (CommandEncoder, Buffer, uint64_t, Buffer, uint64_t, uint64_t))          \
  X(CommandEncoderClearBuffer, void, (CommandEncoder, Buffer, uint64_t offset, uint64_t size))                       \
  X(CommandEncoderFinish, CommandBuffer, (CommandEncoder, const CommandBufferDescriptor*))                           \
  X(CommandEncoderRelease, void, (CommandEncoder))                                                                   \
  X(ComputePassEncoderSetPipeline, void, (ComputePassEncoder, ComputePipeline))                                      \
  X(ComputePassEncoderSetBindGroup, void, (ComputePassEncoder, uint32_t, BindGroup, size_t, const uint32_t*))        \
  X(ComputePassEncoderDispatchWorkgroups, void, (ComputePassEncoder, uint32_t, uint32_t, uint32_t))                  \
  X(ComputePassEncoderEnd, void, (ComputePassEncoder))                                                               \
  X(ComputePassEncoderRelease, void, (ComputePassEncoder))                                                           \
  X(CommandBufferRelease, void, (CommandBuffer))                                                                     \
  X(QueueWriteBuffer, void, (Queue, Buffer, uint64_t offset, const void* data, size_t size))                         \
  X(QueueSubmit, void, (Queue, size_t count, const CommandBuffer* buffers))                                          \
  X(QueueOnSubmittedWorkDone, Future, (Queue, CallbackInfo<QueueWorkDoneCallback>))                                  \
  X(QueueRelease, void, (Queue))

// The resolved entry points: fn.CreateInstance(...) calls wgpuCreateInstance.
struct Functions {
#define RLX_WGPU_MEMBER(name, ret, args) ret(*name) args = nullptr;
  RLX_WGPU_FUNCTIONS(RLX_WGPU_MEMBER)
#undef RLX_WGPU_MEMBER
};

}  // namespace rlx::webgpu::api
