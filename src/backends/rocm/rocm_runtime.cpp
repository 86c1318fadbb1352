#include "rocm_runtime.h"

#include <dlfcn.h>
#include <hip/hip_runtime_api.h>
#include <hip/hiprtc.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "rocm_codegen.h"
#include "support/dynamic_library.h"

namespace rlx::rocm {

// The HIP and hipRTC entry points rlx calls, all from libamdhip64.so.5 (ROCm 5.2 has hipRTC in
// the runtime library).
struct HipApi {
  hipError_t (*get_device_count)(int*);
  hipError_t (*set_device)(int);
  hipError_t (*get_device_properties)(hipDeviceProp_t*, int);
  const char* (*error_name)(hipError_t);
  const char* (*error_string)(hipError_t);
  hipError_t (*stream_create_with_flags)(hipStream_t*, unsigned);
  hipError_t (*stream_synchronize)(hipStream_t);
  hipError_t (*malloc)(void**, size_t);
  hipError_t (*free)(void*);
  hipError_t (*memcpy)(void*, const void*, size_t, hipMemcpyKind);
  hipError_t (*memcpy_async)(void*, const void*, size_t, hipMemcpyKind, hipStream_t);
  hipError_t (*memset_async)(void*, int, size_t, hipStream_t);
  hipError_t (*module_load_data)(hipModule_t*, const void*);
  hipError_t (*module_get_function)(hipFunction_t*, hipModule_t, const char*);
  hipError_t (*module_launch_kernel)(hipFunction_t, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                     hipStream_t, void**, void**);
  hiprtcResult (*rtc_create_program)(hiprtcProgram*, const char*, const char*, int, const char**, const char**);
  hiprtcResult (*rtc_compile_program)(hiprtcProgram, int, const char**);
  hiprtcResult (*rtc_get_program_log_size)(hiprtcProgram, size_t*);
  hiprtcResult (*rtc_get_program_log)(hiprtcProgram, char*);
  hiprtcResult (*rtc_get_code_size)(hiprtcProgram, size_t*);
  hiprtcResult (*rtc_get_code)(hiprtcProgram, char*);
  hiprtcResult (*rtc_destroy_program)(hiprtcProgram*);
  const char* (*rtc_error_string)(hiprtcResult);
};

namespace {

constexpr const char* kLibrary = "libamdhip64.so.5";

Expected<const HipApi*> hip_api() {
  static const Expected<const HipApi*> api = []() -> Expected<const HipApi*> {
    static HipApi a{};
    void* h = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
    if (!h) return error(ErrorCode::unavailable, "no HIP runtime here (", kLibrary, " does not load: ", dlerror(),
                         "; Debian's libamdhip64-5 installs it)");
    auto sym = [&](auto& fn, const char* name) { return load_function(h, fn, name, kLibrary); };
    RLX_TRY(sym(a.get_device_count, "hipGetDeviceCount"));
    RLX_TRY(sym(a.set_device, "hipSetDevice"));
    RLX_TRY(sym(a.get_device_properties, "hipGetDeviceProperties"));
    RLX_TRY(sym(a.error_name, "hipGetErrorName"));
    RLX_TRY(sym(a.error_string, "hipGetErrorString"));
    RLX_TRY(sym(a.stream_create_with_flags, "hipStreamCreateWithFlags"));
    RLX_TRY(sym(a.stream_synchronize, "hipStreamSynchronize"));
    RLX_TRY(sym(a.malloc, "hipMalloc"));
    RLX_TRY(sym(a.free, "hipFree"));
    RLX_TRY(sym(a.memcpy, "hipMemcpy"));
    RLX_TRY(sym(a.memcpy_async, "hipMemcpyAsync"));
    RLX_TRY(sym(a.memset_async, "hipMemsetAsync"));
    RLX_TRY(sym(a.module_load_data, "hipModuleLoadData"));
    RLX_TRY(sym(a.module_get_function, "hipModuleGetFunction"));
    RLX_TRY(sym(a.module_launch_kernel, "hipModuleLaunchKernel"));
    RLX_TRY(sym(a.rtc_create_program, "hiprtcCreateProgram"));
    RLX_TRY(sym(a.rtc_compile_program, "hiprtcCompileProgram"));
    RLX_TRY(sym(a.rtc_get_program_log_size, "hiprtcGetProgramLogSize"));
    RLX_TRY(sym(a.rtc_get_program_log, "hiprtcGetProgramLog"));
    RLX_TRY(sym(a.rtc_get_code_size, "hiprtcGetCodeSize"));
    RLX_TRY(sym(a.rtc_get_code, "hiprtcGetCode"));
    RLX_TRY(sym(a.rtc_destroy_program, "hiprtcDestroyProgram"));
    RLX_TRY(sym(a.rtc_error_string, "hiprtcGetErrorString"));
    return &a;
  }();
  return api;
}

// An rlx error for a failed HIP call: "rocm: <what>: hipErrorX (n): <text>".
Status hip_check(const HipApi& a, hipError_t code, const std::string& what) {
  if (code == hipSuccess) return Status::ok();
  return error(ErrorCode::runtime_error, "rocm: ", what, ": ", a.error_name(code), " (", static_cast<int>(code),
               "): ", a.error_string(code));
}

Status rtc_check(const HipApi& a, hiprtcResult r, const char* what) {
  if (r == HIPRTC_SUCCESS) return Status::ok();
  return error(ErrorCode::runtime_error, "rocm: ", what, " failed: ", a.rtc_error_string(r), " (", static_cast<int>(r), ")");
}

void* ptr(const hal::BufferRange& r) { return hal::device_address(r); }
hipStream_t as_stream(void* s) { return static_cast<hipStream_t>(s); }

}  // namespace

Expected<std::shared_ptr<Runtime>> Runtime::create() {
  RLX_ASSIGN_OR_RETURN(const HipApi* a, hip_api());
  int count = 0;
  const hipError_t rc = a->get_device_count(&count);
  if (rc != hipSuccess || count == 0)
    return error(ErrorCode::unavailable, "no AMD GPU here (hipGetDeviceCount: ", a->error_name(rc), " (",
                 static_cast<int>(rc), "), ", count, " devices)");
  std::shared_ptr<Runtime> r(new Runtime());
  r->api_ = a;
  RLX_TRY(hip_check(*a, a->set_device(0), "hipSetDevice(0)"));
  hipDeviceProp_t prop{};
  RLX_TRY(hip_check(*a, a->get_device_properties(&prop, 0), "hipGetDeviceProperties"));
  r->gpu_.name = prop.name;
  const std::string arch = prop.gcnArchName;  // "gfx90a:sramecc+:xnack-"
  r->gpu_.gfx = arch.substr(0, arch.find(':'));
  r->gpu_.compute_units = prop.multiProcessorCount;
  r->gpu_.warp_size = prop.warpSize;
  r->gpu_.memory_bytes = prop.totalGlobalMem;
  hipStream_t s = nullptr;
  RLX_TRY(hip_check(*a, a->stream_create_with_flags(&s, hipStreamNonBlocking), "hipStreamCreateWithFlags"));
  r->stream_ = s;
  return r;
}

// As the cuda runtime: released with the process (HIP from static destructors is unsafe).
Runtime::~Runtime() = default;

std::string Runtime::description() const {
  return cat(gpu_.name, " (", gpu_.gfx, "), ", gpu_.compute_units, " CUs, ", gpu_.memory_bytes >> 20, " MiB, wavefront ",
             gpu_.warp_size, ", fp64 yes, f16/bf16 stored and computed in f32; generated HIP C++ through hipRTC (never run in "
             "rlx's tests)");
}

Expected<void*> Runtime::module(const std::string& source) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = modules_.find(source); it != modules_.end()) return it->second;
  const HipApi& a = *api_;
  hiprtcProgram prog = nullptr;
  RLX_TRY(rtc_check(a, a.rtc_create_program(&prog, source.c_str(), "rlx_kernels.hip", 0, nullptr, nullptr),
                    "hiprtcCreateProgram"));
  struct Destroy {
    const HipApi& a;
    hiprtcProgram& p;
    ~Destroy() { a.rtc_destroy_program(&p); }
  } destroy{a, prog};
  const std::string arch = "--offload-arch=" + gpu_.gfx;
  const char* opts[] = {arch.c_str(), "-O3", "-std=c++17", "-w"};
  const hiprtcResult rc = a.rtc_compile_program(prog, 4, opts);
  if (rc != HIPRTC_SUCCESS) {
    size_t n = 0;
    std::string log;
    if (a.rtc_get_program_log_size(prog, &n) == HIPRTC_SUCCESS && n > 1) {
      log.resize(n);
      a.rtc_get_program_log(prog, log.data());
      while (!log.empty() && log.back() == '\0') log.pop_back();
    }
    if (log.size() > 4000) log = log.substr(0, 4000) + "\n...";
    return error(ErrorCode::runtime_error, "rocm: hiprtcCompileProgram for ", gpu_.gfx, " failed: ", a.rtc_error_string(rc),
                 "\n", log);
  }
  size_t n = 0;
  RLX_TRY(rtc_check(a, a.rtc_get_code_size(prog, &n), "hiprtcGetCodeSize"));
  std::vector<char> code(n);
  RLX_TRY(rtc_check(a, a.rtc_get_code(prog, code.data()), "hiprtcGetCode"));
  hipModule_t m = nullptr;
  RLX_TRY(hip_check(a, a.module_load_data(&m, code.data()), cat("hipModuleLoadData (", gpu_.gfx, ", ", n, " bytes)")));
  modules_.emplace(source, m);
  return static_cast<void*>(m);
}

// ---- the device runtime layer (hal.h) ----

Expected<hal::Buffer> Runtime::allocate(uint64_t bytes, const std::string& what) {
  void* p = nullptr;
  RLX_TRY(hip_check(*api_, api_->malloc(&p, bytes), cat("hipMalloc of ", bytes, " bytes for ", what)));
  return hal::Buffer{reinterpret_cast<uint64_t>(p), bytes};
}

void Runtime::release(hal::Buffer b) {
  if (b.id) (void)api_->free(reinterpret_cast<void*>(b.id));  // nothing to do on failure
}

Status Runtime::upload(const hal::BufferRange& r, const void* data, uint64_t bytes) {
  return hip_check(*api_, api_->memcpy(ptr(r), data, bytes, hipMemcpyHostToDevice), cat("hipMemcpy uploading ", bytes, " bytes"));
}

Status Runtime::download(const hal::BufferRange& r, void* data, uint64_t bytes) {
  return hip_check(*api_, api_->memcpy(data, ptr(r), bytes, hipMemcpyDeviceToHost), cat("hipMemcpy downloading ", bytes, " bytes"));
}

Expected<std::vector<hal::Kernel>> Runtime::build(const hal::KernelModule& m) {
  RLX_ASSIGN_OR_RETURN(void* mod, module(m.source));
  std::vector<hal::Kernel> out;
  for (const hal::KernelEntry& e : m.entries) {
    hipFunction_t f = nullptr;
    RLX_TRY(hip_check(*api_, api_->module_get_function(&f, static_cast<hipModule_t>(mod), e.name.c_str()),
                      "hipModuleGetFunction " + e.name));
    out.push_back({reinterpret_cast<uint64_t>(f)});
  }
  return out;
}

Status Runtime::check_dispatch(const hal::Dispatch& d) const {
  return hal::check_pointer_launch(d, kThreadsPerBlock, UINT32_MAX, "rocm");
}

Status Runtime::write(const hal::BufferRange& r, const void* data, uint64_t bytes) {
  return hip_check(*api_, api_->memcpy_async(ptr(r), data, bytes, hipMemcpyHostToDevice, as_stream(stream_)),
                   "hipMemcpyAsync writing an input");
}

Status Runtime::read(const hal::BufferRange& r, void* data, uint64_t bytes) {
  return hip_check(*api_, api_->memcpy_async(data, ptr(r), bytes, hipMemcpyDeviceToHost, as_stream(stream_)),
                   "hipMemcpyAsync reading an output");
}

Status Runtime::finish() {
  return hip_check(*api_, api_->stream_synchronize(as_stream(stream_)), "hipStreamSynchronize after running the program");
}

Status Runtime::enqueue(const hal::Command& c) {
  if (c.kind == hal::Command::Kind::zero)
    return hip_check(*api_, api_->memset_async(ptr(c.range), 0, c.range.bytes, as_stream(stream_)), "hipMemsetAsync " + c.name);
  const hal::Dispatch& d = c.dispatch;
  const auto l = hal::pointer_launch(d, kThreadsPerBlock);
  return hip_check(*api_,
                   api_->module_launch_kernel(reinterpret_cast<hipFunction_t>(d.kernel.id), l->grid[0], l->grid[1], l->grid[2],
                                              l->block[0], l->block[1], l->block[2], 0, as_stream(stream_), l->args.data(),
                                              nullptr),
                   "hipModuleLaunchKernel " + d.name);
}

}  // namespace rlx::rocm
