#include "webgpu_runtime.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "codegen/c_renderer.h"

#ifndef RLX_WEBGPU_DEFAULT_DIR
#define RLX_WEBGPU_DEFAULT_DIR ""
#endif
#ifndef RLX_WEBGPU_SOURCE_DIR
#define RLX_WEBGPU_SOURCE_DIR ""
#endif

namespace rlx::webgpu {
namespace {
constexpr const char* kDawnLib = "npm/node_modules/bun-webgpu-linux-x64/libwebgpu_wrapper.so";
}  // namespace

std::string install_dir() {
  if (const char* d = std::getenv("RLX_WEBGPU_DIR"); d && *d) return d;
  // this build's folder, else build/webgpu of the source tree (where test-all.sh installs it,
  // which a second build folder, such as the sanitized one, shares)
  for (const char* d : {RLX_WEBGPU_DEFAULT_DIR, RLX_WEBGPU_SOURCE_DIR})
    if (*d && std::filesystem::exists(std::filesystem::path(d) / kDawnLib)) return d;
  return RLX_WEBGPU_DEFAULT_DIR;
}

void on_device_error(Runtime* rt, const std::string& message) {
  std::lock_guard<std::mutex> lock(rt->err_mu_);
  if (rt->error_.empty()) rt->error_ = message;
}

namespace {

// Where install-webgpu.sh puts SwiftShader's Vulkan driver (and Dawn: kDawnLib above).
constexpr const char* kSwiftShaderIcd = "swiftshader/usr/lib/chromium/vk_swiftshader_icd.json";

std::string text(api::StringView s) {
  if (!s.data) return "";
  return s.length == SIZE_MAX ? std::string(s.data) : std::string(s.data, s.length);
}

uint64_t round4(uint64_t n) { return (n + 3) / 4 * 4; }
// The smallest allocation and binding: a binding must hold one element of the shader's array,
// up to 16 bytes (vec4), even for an empty tensor (a nonzero with no hits).
constexpr uint64_t kMinBinding = 16;

api::Buffer buf(const hal::BufferRange& r) { return reinterpret_cast<Runtime::Allocation*>(r.buffer.id)->buffer; }

// Sets an environment variable for the lifetime of the object (Dawn's Vulkan loader reads the
// driver list when the instance is made) and restores it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      had_ = true;
      old_ = old;
    }
    if (!value.empty()) setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

// The result of requesting an adapter or a device, filled in by its callback.
template <class Handle>
struct Request {
  bool done = false;
  uint32_t status = 0;
  Handle handle = nullptr;
  std::string message;
  template <class Fn>
  api::CallbackInfo<Fn> info() {
    api::CallbackInfo<Fn> cb;
    cb.callback = [](uint32_t status, Handle h, api::StringView msg, void* u1, void*) {
      auto* r = static_cast<Request*>(u1);
      r->status = status;
      r->handle = h;
      r->message = text(msg);
      r->done = true;
    };
    cb.userdata1 = this;
    return cb;
  }
};

// A recorded program: per dispatch its pipeline and bind group, the uniform buffers holding
// dispatch scalars, and one read-back buffer per output.
class WebGpuRecording final : public hal::Recording {
 public:
  WebGpuRecording(const api::Functions& fn) : fn(fn) {}
  ~WebGpuRecording() override {
    for (api::BindGroup g : groups)
      if (g) fn.BindGroupRelease(g);
    for (api::Buffer b : owned) {
      fn.BufferDestroy(b);
      fn.BufferRelease(b);
    }
  }
  const api::Functions& fn;
  hal::CommandList list;
  std::vector<api::BindGroup> groups;  // per command (null for zero fills and empty dispatches)
  std::vector<uint32_t> counts;        // per command: 3 work-group counts
  std::vector<api::Buffer> owned;
};

}  // namespace

Expected<std::shared_ptr<Runtime>> Runtime::create() {
  // One per process, never destroyed: Dawn's own static state goes away at exit in an order
  // rlx does not control, so releasing its objects then would call into freed memory.
  static std::mutex mu;
  static auto* cached = new std::shared_ptr<Runtime>();
  static std::string failure;
  std::lock_guard<std::mutex> lock(mu);
  if (*cached) return *cached;
  if (!failure.empty()) return error(ErrorCode::unavailable, failure);
  std::shared_ptr<Runtime> rt(new Runtime());
  if (Status s = rt->open(); !s) {
    failure = s.message();
    return s;
  }
  *cached = rt;
  return rt;
}

Status Runtime::open() {
  const std::string dir = install_dir();
  const std::string lib = (std::filesystem::path(dir) / kDawnLib).string();
  if (dir.empty() || !std::filesystem::exists(lib))
    return error(ErrorCode::unavailable, "Dawn (the WebGPU library) is not installed at '", lib,
                 "'; scripts/install-webgpu.sh installs it (or set RLX_WEBGPU_DIR)");
  lib_ = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib_) return error(ErrorCode::unavailable, "cannot load Dawn from '", lib, "': ", dlerror());
#define RLX_WGPU_RESOLVE(name, ret, args)                                                                   \
  fn_.name = reinterpret_cast<decltype(fn_.name)>(dlsym(lib_, "wgpu" #name));                                      \
  if (!fn_.name) return error(ErrorCode::unavailable, "Dawn at '", lib, "' has no wgpu" #name " (not the pinned version?)");
  RLX_WGPU_FUNCTIONS(RLX_WGPU_RESOLVE)
#undef RLX_WGPU_RESOLVE

  // SwiftShader, where installed, is the Vulkan driver Dawn sees (Mesa's lavapipe lacks what
  // Dawn requires); the variable is set only while the instance enumerates drivers, so the
  // vulkan device in the same process keeps the system's drivers.
  const std::string icd = (std::filesystem::path(dir) / kSwiftShaderIcd).string();
  ScopedEnv env("VK_ICD_FILENAMES", std::getenv("VK_ICD_FILENAMES") || !std::filesystem::exists(icd) ? "" : icd);
  // Dawn's window-system probes complain on stderr without a (private) runtime folder
  std::string xdg;
  if (!std::getenv("XDG_RUNTIME_DIR")) {
    std::error_code ec;
    auto d = std::filesystem::temp_directory_path(ec) / ("rlx-xdg-" + std::to_string(getuid()));
    if (!ec && (std::filesystem::create_directories(d, ec) || std::filesystem::is_directory(d))) {
      std::filesystem::permissions(d, std::filesystem::perms::owner_all, ec);
      xdg = d.string();
    }
  }
  ScopedEnv xdg_env("XDG_RUNTIME_DIR", xdg);
  instance_ = fn_.CreateInstance(nullptr);
  if (!instance_) return error(ErrorCode::unavailable, "wgpuCreateInstance failed");

  Request<api::Adapter> ar;
  api::RequestAdapterOptions opts;
  opts.feature_level = api::kFeatureLevelCore;
  fn_.InstanceRequestAdapter(instance_, &opts, ar.info<api::RequestAdapterCallback>());
  RLX_TRY(wait(ar.done, "requesting an adapter"));
  if (ar.status != api::kStatusSuccess || !ar.handle)
    return error(ErrorCode::unavailable, "no WebGPU adapter: ", ar.message.empty() ? "Dawn found none" : ar.message);
  adapter_ = ar.handle;

  api::AdapterInfo info{};
  if (fn_.AdapterGetInfo(adapter_, &info) == api::kStatusSuccess) {
    description_ = text(info.device);
    const char* backends[] = {"", "null", "webgpu", "d3d11", "d3d12", "metal", "vulkan", "opengl", "opengles"};
    std::string backend = info.backend_type < 9 ? backends[info.backend_type] : "";
    std::string vendor = text(info.vendor);
    description_ += " (" + backend + (vendor.empty() ? "" : ", " + vendor) + ")";
    fn_.AdapterInfoFreeMembers(info);
  }
  api::Limits limits{};
  if (fn_.AdapterGetLimits(adapter_, &limits) != api::kStatusSuccess)
    return error(ErrorCode::unavailable, "wgpuAdapterGetLimits failed");

  Request<api::Device> dr;
  api::DeviceDescriptor dd;
  dd.required_limits = &limits;  // all the adapter offers: more storage buffers, bigger buffers
  dd.uncaptured_error.callback = [](const api::Device*, uint32_t type, api::StringView msg, void* u1, void*) {
    on_device_error(static_cast<Runtime*>(u1), text(msg));
  };
  dd.uncaptured_error.userdata1 = this;
  dd.device_lost.callback = [](const api::Device*, uint32_t reason, api::StringView msg, void* u1, void*) {
    if (reason != 2 /* destroyed */ && reason != 3 /* callback cancelled */)
      on_device_error(static_cast<Runtime*>(u1), "device lost: " + text(msg));
  };
  dd.device_lost.userdata1 = this;
  fn_.AdapterRequestDevice(adapter_, &dd, dr.info<api::RequestDeviceCallback>());
  RLX_TRY(wait(dr.done, "requesting a device"));
  if (dr.status != api::kStatusSuccess || !dr.handle)
    return error(ErrorCode::unavailable, "WebGPU adapter '", description_, "' gave no device: ", dr.message);
  device_ = dr.handle;
  queue_ = fn_.DeviceGetQueue(device_);
  dev_limits_ = limits;
  limits_.max_bindings = static_cast<int>(limits.max_storage_buffers_per_shader_stage);
  limits_.max_binding_bytes = static_cast<int64_t>(std::min<uint64_t>(limits.max_storage_buffer_binding_size, INT32_MAX));
  limits_.arena_align = limits.min_storage_buffer_offset_alignment;
  return Status::ok();
}

Runtime::~Runtime() {
  if (!lib_) return;
  for (auto& [src, ps] : pipelines_)
    for (auto& p : ps) {
      if (p->pipeline) fn_.ComputePipelineRelease(p->pipeline);
      if (p->layout) fn_.BindGroupLayoutRelease(p->layout);
    }
  if (queue_) fn_.QueueRelease(queue_);
  if (device_) fn_.DeviceRelease(device_);
  if (adapter_) fn_.AdapterRelease(adapter_);
  if (instance_) fn_.InstanceRelease(instance_);
  // the library stays loaded: Dawn's threads and atexit handlers may still run
}

Status Runtime::wait(const bool& done, const std::string& what) {
  // Dawn runs callbacks from its event loop; SwiftShader does the work on its own threads, so
  // this thread polls with growing sleeps rather than spinning against them.
  auto sleep = std::chrono::microseconds(0);
  while (!done) {
    fn_.InstanceProcessEvents(instance_);
    if (done) break;
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2 + std::chrono::microseconds(5), std::chrono::microseconds(1000));
  }
  return take_error(what);
}

Status Runtime::take_error(const std::string& what) {
  std::lock_guard<std::mutex> lock(err_mu_);
  if (error_.empty()) return Status::ok();
  std::string e = std::move(error_);
  error_.clear();
  return error(ErrorCode::runtime_error, "webgpu: ", what, ": ", e);
}

Status Runtime::pop_error_scope(const std::string& what) {
  struct Pop {
    bool done = false;
    uint32_t type = 0;
    std::string message;
  } pop;
  api::CallbackInfo<api::PopErrorScopeCallback> cb;
  cb.callback = [](uint32_t, uint32_t type, api::StringView msg, void* u1, void*) {
    auto* p = static_cast<Pop*>(u1);
    p->type = type;
    p->message = text(msg);
    p->done = true;
  };
  cb.userdata1 = &pop;
  fn_.DevicePopErrorScope(device_, cb);
  RLX_TRY(wait(pop.done, what));
  if (pop.type != api::kErrorTypeNoError && pop.type != 0) return error(ErrorCode::runtime_error, "webgpu: ", what, ": ", pop.message);
  return Status::ok();
}

Expected<api::Buffer> Runtime::make_buffer(uint64_t bytes, api::Flags usage, const std::string& what) {
  bytes = std::max<uint64_t>(round4(bytes), kMinBinding);
  if (bytes > dev_limits_.max_buffer_size)
    return error(ErrorCode::runtime_error, "webgpu: ", what, " needs ", bytes, " bytes, more than the ",
                 dev_limits_.max_buffer_size, " one buffer may hold on this device (maxBufferSize)");
  api::BufferDescriptor d;
  d.usage = usage;
  d.size = bytes;
  fn_.DevicePushErrorScope(device_, api::kErrorFilterOutOfMemory);
  api::Buffer b = fn_.DeviceCreateBuffer(device_, &d);
  Status s = pop_error_scope(cat("allocating ", bytes, " bytes for ", what));
  if (!s || !b) {
    if (b) fn_.BufferRelease(b);
    return s ? error(ErrorCode::runtime_error, "webgpu: allocating ", bytes, " bytes for ", what, " failed") : s;
  }
  return b;
}

Expected<hal::Buffer> Runtime::allocate(uint64_t bytes, const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  RLX_ASSIGN_OR_RETURN(api::Buffer b, make_buffer(bytes, api::kBufferUsageStorage | api::kBufferUsageCopySrc | api::kBufferUsageCopyDst, what));
  return hal::Buffer{reinterpret_cast<uint64_t>(new Allocation{b, std::max<uint64_t>(round4(bytes), kMinBinding)}), bytes};
}

void Runtime::release(hal::Buffer b) {
  if (!b.id) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto* a = reinterpret_cast<Allocation*>(b.id);
  fn_.BufferDestroy(a->buffer);
  fn_.BufferRelease(a->buffer);
  delete a;
}

// A host write: queue writes need whole words at word offsets, so a range that is not gets
// its partial words read first (a bool tensor of 3 bytes; the bytes past it in its last word
// belong to nothing or to another tensor).
Status Runtime::write(const hal::BufferRange& r, const void* data, uint64_t bytes) {
  if (bytes == 0) return Status::ok();
  const uint64_t lo = r.offset / 4 * 4, hi = round4(r.offset + bytes);
  if (lo == r.offset && hi == r.offset + bytes) {
    fn_.QueueWriteBuffer(queue_, buf(r), r.offset, data, bytes);
    return take_error("writing a buffer");
  }
  std::vector<uint8_t> words(hi - lo);
  const hal::BufferRange whole{r.buffer, lo, hi - lo};
  void* out = words.data();
  RLX_TRY(read_back({{whole, hi - lo}}, std::span<void* const>(&out, 1), nullptr));
  std::memcpy(words.data() + (r.offset - lo), data, bytes);
  fn_.QueueWriteBuffer(queue_, buf(r), lo, words.data(), words.size());
  return take_error("writing a buffer");
}

Status Runtime::read_back(const std::vector<std::pair<hal::BufferRange, uint64_t>>& ranges, std::span<void* const> out,
                          api::CommandEncoder enc) {
  std::vector<api::Buffer> staging;
  auto cleanup = [&] {
    for (api::Buffer b : staging) {
      if (!b) continue;  // a range of no bytes
      fn_.BufferDestroy(b);
      fn_.BufferRelease(b);
    }
  };
  api::CommandEncoderDescriptor ed;
  const bool own = enc == nullptr;
  if (own) enc = fn_.DeviceCreateCommandEncoder(device_, &ed);
  for (auto& [r, bytes] : ranges) {
    if (bytes == 0) {
      staging.push_back(nullptr);
      continue;
    }
    const uint64_t lo = r.offset / 4 * 4, hi = round4(r.offset + bytes);
    auto b = make_buffer(hi - lo, api::kBufferUsageMapRead | api::kBufferUsageCopyDst, "a read-back buffer");
    if (!b) {
      cleanup();
      if (own) fn_.CommandEncoderRelease(enc);
      return b.status();
    }
    staging.push_back(*b);
    fn_.CommandEncoderCopyBufferToBuffer(enc, buf(r), lo, *b, 0, hi - lo);
  }
  api::CommandBufferDescriptor cd;
  api::CommandBuffer cmd = fn_.CommandEncoderFinish(enc, &cd);
  fn_.QueueSubmit(queue_, 1, &cmd);
  fn_.CommandBufferRelease(cmd);
  fn_.CommandEncoderRelease(enc);
  struct Map {
    bool done = false;
    uint32_t status = 0;
    std::string message;
  };
  std::vector<Map> maps(ranges.size());
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (!staging[i]) {
      maps[i].done = true;
      maps[i].status = api::kStatusSuccess;
      continue;
    }
    api::CallbackInfo<api::BufferMapCallback> cb;
    cb.callback = [](uint32_t status, api::StringView msg, void* u1, void*) {
      auto* m = static_cast<Map*>(u1);
      m->status = status;
      m->message = text(msg);
      m->done = true;
    };
    cb.userdata1 = &maps[i];
    fn_.BufferMapAsync(staging[i], api::kMapModeRead, 0, round4(ranges[i].first.offset + ranges[i].second) - ranges[i].first.offset / 4 * 4, cb);
  }
  Status s = Status::ok();
  for (size_t i = 0; i < ranges.size(); ++i) {
    Status w = wait(maps[i].done, "running the program");
    if (s && !w) s = w;
    if (s && maps[i].status != api::kStatusSuccess) s = error(ErrorCode::runtime_error, "webgpu: mapping a read-back buffer: ", maps[i].message);
  }
  for (size_t i = 0; s && i < ranges.size(); ++i) {
    if (!staging[i]) continue;
    const auto& [r, bytes] = ranges[i];
    const uint64_t lo = r.offset / 4 * 4;
    const void* p = fn_.BufferGetConstMappedRange(staging[i], 0, round4(r.offset + bytes) - lo);
    if (!p) s = error(ErrorCode::runtime_error, "webgpu: a mapped read-back buffer has no memory");
    else std::memcpy(out[i], static_cast<const uint8_t*>(p) + (r.offset - lo), bytes);
    fn_.BufferUnmap(staging[i]);
  }
  cleanup();
  return s;
}

Status Runtime::upload(const hal::BufferRange& r, const void* data, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  return write(r, data, bytes);
}

Status Runtime::download(const hal::BufferRange& r, void* data, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  return read_back({{r, bytes}}, std::span<void* const>(&data, 1), nullptr);
}

Expected<std::vector<hal::Kernel>> Runtime::build(const hal::KernelModule& module) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& built = pipelines_[module.source];
  if (built.empty()) {
    api::ShaderSourceWGSL wgsl;
    wgsl.code = {module.source.data(), module.source.size()};
    api::ShaderModuleDescriptor sd;
    sd.next = &wgsl.chain;
    fn_.DevicePushErrorScope(device_, api::kErrorFilterValidation);
    api::ShaderModule sm = fn_.DeviceCreateShaderModule(device_, &sd);
    std::vector<std::unique_ptr<Pipeline>> ps;
    for (const hal::KernelEntry& e : module.entries) {
      auto p = std::make_unique<Pipeline>();
      p->buffers = e.buffers;
      p->scalars = static_cast<int>(e.scalars.size());
      std::vector<api::BindGroupLayoutEntry> entries(e.buffers + (p->scalars ? 1 : 0));
      for (size_t i = 0; i < entries.size(); ++i) {
        entries[i].binding = static_cast<uint32_t>(i);
        entries[i].visibility = api::kShaderStageCompute;
        entries[i].buffer.type = static_cast<int>(i) < e.buffers ? api::kBufferBindingStorage : api::kBufferBindingUniform;
      }
      api::BindGroupLayoutDescriptor ld;
      ld.entry_count = entries.size();
      ld.entries = entries.data();
      p->layout = fn_.DeviceCreateBindGroupLayout(device_, &ld);
      api::PipelineLayoutDescriptor pd;
      pd.bind_group_layout_count = 1;
      pd.bind_group_layouts = &p->layout;
      api::PipelineLayout pl = fn_.DeviceCreatePipelineLayout(device_, &pd);
      api::ComputePipelineDescriptor cd;
      cd.layout = pl;
      cd.compute.module = sm;
      cd.compute.entry_point = {e.name.data(), e.name.size()};
      p->pipeline = fn_.DeviceCreateComputePipeline(device_, &cd);
      fn_.PipelineLayoutRelease(pl);
      ps.push_back(std::move(p));
    }
    fn_.ShaderModuleRelease(sm);
    std::string names;
    for (const hal::KernelEntry& e : module.entries) names += (names.empty() ? "" : ", ") + e.name;
    Status s = pop_error_scope("WGSL of " + names + " does not compile");
    if (!s) {
      for (auto& p : ps) {
        if (p->pipeline) fn_.ComputePipelineRelease(p->pipeline);
        if (p->layout) fn_.BindGroupLayoutRelease(p->layout);
      }
      pipelines_.erase(module.source);
      return s;
    }
    built = std::move(ps);
  }
  std::vector<hal::Kernel> out;
  for (auto& p : built) out.push_back({reinterpret_cast<uint64_t>(p.get())});
  return out;
}

Status Runtime::check_dispatch(const hal::Dispatch& d) const {
  for (int64_t v : d.scalars)
    if (v < INT32_MIN || v > INT32_MAX)
      return error(ErrorCode::unsupported, "webgpu: kernel ", d.name, " has a size or scalar of ", v,
                   ", past the 32-bit integers WGSL computes with");
  if (d.items > INT32_MAX)
    return error(ErrorCode::unsupported, "webgpu: kernel ", d.name, " runs ", d.items, " work items, more than 2^31-1");
  uint32_t g[3];
  const uint32_t max[3] = {dev_limits_.max_compute_workgroups_per_dimension, dev_limits_.max_compute_workgroups_per_dimension,
                           dev_limits_.max_compute_workgroups_per_dimension};
  return hal::dispatch_groups(d, codegen::kGlslWorkgroupSize, max, "webgpu", g);
}

Expected<std::unique_ptr<hal::Recording>> Runtime::record(hal::CommandList list) {
  std::lock_guard<std::mutex> lock(mu_);
  auto rec = std::make_unique<WebGpuRecording>(fn_);
  rec->list = std::move(list);
  const hal::CommandList& l = rec->list;
  const uint32_t max_groups[3] = {dev_limits_.max_compute_workgroups_per_dimension, dev_limits_.max_compute_workgroups_per_dimension,
                                  dev_limits_.max_compute_workgroups_per_dimension};
  for (const hal::Command& c : l.commands) {
    rec->groups.push_back(nullptr);
    rec->counts.insert(rec->counts.end(), {0, 0, 0});
    if (c.kind == hal::Command::Kind::call)
      return error(ErrorCode::unsupported, "webgpu: ", c.name, " is a library call; webgpu records commands only");
    if (c.kind != hal::Command::Kind::dispatch || c.dispatch.empty()) continue;
    const hal::Dispatch& d = c.dispatch;
    const auto* p = reinterpret_cast<const Pipeline*>(d.kernel.id);
    if (static_cast<int>(d.buffers.size()) != p->buffers || static_cast<int>(d.scalars.size()) != p->scalars)
      return error(ErrorCode::internal, "webgpu: dispatch ", d.name, " binds ", d.buffers.size(), " buffers and ",
                   d.scalars.size(), " scalars; its kernel takes ", p->buffers, " and ", p->scalars);
    std::vector<api::BindGroupEntry> entries(d.buffers.size());
    for (size_t a = 0; a < d.buffers.size(); ++a) {
      entries[a].binding = static_cast<uint32_t>(a);
      entries[a].buffer = buf(d.buffers[a]);
      entries[a].offset = d.buffers[a].offset;
      // small ranges widen to kMinBinding where their allocation has the room
      const uint64_t room = reinterpret_cast<const Allocation*>(d.buffers[a].buffer.id)->bytes - d.buffers[a].offset;
      entries[a].size = std::max<uint64_t>(round4(d.buffers[a].bytes), std::min<uint64_t>(kMinBinding, room));
    }
    if (p->scalars) {
      // the scalars as i32, in vec4 slots (a uniform array's stride is 16 bytes)
      std::vector<int32_t> words(static_cast<size_t>((p->scalars + 3) / 4 * 4), 0);
      for (int i = 0; i < p->scalars; ++i) words[i] = static_cast<int32_t>(d.scalars[i]);
      RLX_ASSIGN_OR_RETURN(api::Buffer u, make_buffer(words.size() * 4, api::kBufferUsageUniform | api::kBufferUsageCopyDst,
                                                      "the scalars of " + d.name));
      rec->owned.push_back(u);
      fn_.QueueWriteBuffer(queue_, u, 0, words.data(), words.size() * 4);
      api::BindGroupEntry e;
      e.binding = static_cast<uint32_t>(d.buffers.size());
      e.buffer = u;
      e.size = words.size() * 4;
      entries.push_back(e);
    }
    api::BindGroupDescriptor bd;
    bd.layout = p->layout;
    bd.entry_count = entries.size();
    bd.entries = entries.data();
    rec->groups.back() = fn_.DeviceCreateBindGroup(device_, &bd);
    RLX_TRY(hal::dispatch_groups(d, codegen::kGlslWorkgroupSize, max_groups, "webgpu", &rec->counts[rec->counts.size() - 3]));
  }
  RLX_TRY(take_error("recording the program"));
  return std::unique_ptr<hal::Recording>(std::move(rec));
}

Status Runtime::replay(hal::Recording& r, std::span<const void* const> inputs, std::span<void* const> outputs) {
  auto& rec = static_cast<WebGpuRecording&>(r);
  const hal::CommandList& l = rec.list;
  if (inputs.size() != l.inputs.size() || outputs.size() != l.outputs.size())
    return error(ErrorCode::internal, "webgpu: replay with ", inputs.size(), " inputs and ", outputs.size(), " outputs");
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < inputs.size(); ++i) RLX_TRY(write(l.inputs[i].range, inputs[i], l.inputs[i].bytes));
  api::CommandEncoderDescriptor ed;
  api::CommandEncoder enc = fn_.DeviceCreateCommandEncoder(device_, &ed);
  api::ComputePassEncoder pass = nullptr;
  for (size_t i = 0; i < l.commands.size(); ++i) {
    const hal::Command& c = l.commands[i];
    if (c.kind == hal::Command::Kind::zero) {
      if (pass) {
        fn_.ComputePassEncoderEnd(pass);
        fn_.ComputePassEncoderRelease(pass);
        pass = nullptr;
      }
      if (c.range.offset % 4 || c.range.bytes % 4) {
        fn_.CommandEncoderRelease(enc);
        return error(ErrorCode::internal, "webgpu: a zero fill of ", c.range.bytes, " bytes at offset ", c.range.offset,
                     " is not whole words");
      }
      fn_.CommandEncoderClearBuffer(enc, buf(c.range), c.range.offset, c.range.bytes);
      continue;
    }
    if (!rec.groups[i]) continue;
    if (!pass) {
      api::ComputePassDescriptor pd;
      pass = fn_.CommandEncoderBeginComputePass(enc, &pd);
    }
    const auto* p = reinterpret_cast<const Pipeline*>(c.dispatch.kernel.id);
    fn_.ComputePassEncoderSetPipeline(pass, p->pipeline);
    fn_.ComputePassEncoderSetBindGroup(pass, 0, rec.groups[i], 0, nullptr);
    fn_.ComputePassEncoderDispatchWorkgroups(pass, rec.counts[3 * i], rec.counts[3 * i + 1], rec.counts[3 * i + 2]);
  }
  if (pass) {
    fn_.ComputePassEncoderEnd(pass);
    fn_.ComputePassEncoderRelease(pass);
  }
  std::vector<std::pair<hal::BufferRange, uint64_t>> outs;
  for (const hal::Transfer& t : l.outputs) outs.push_back({t.range, t.bytes});
  return read_back(outs, outputs, enc);
}

}  // namespace rlx::webgpu
