#include "cuda_runtime.h"

#include <dlfcn.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "cuda_nvrtc.h"
#include "support/dynamic_library.h"

namespace rlx::cuda {

Status cuda_check(cudaError_t code, const std::string& what) {
  if (code == cudaSuccess) return Status::ok();
  return error(ErrorCode::runtime_error, "cuda: ", what, ": ", cudaGetErrorName(code), " (", static_cast<int>(code),
               "): ", cudaGetErrorString(code));
}

Expected<const CublasApi*> cublas_api() {
  static const Expected<const CublasApi*> api = []() -> Expected<const CublasApi*> {
    static CublasApi a{};
    // the soname first (found through the program's run path, next to libcudart), then the
    // toolkit's folder that CMake found
    const std::string so = cat("libcublas.so.", CUBLAS_VER_MAJOR);
    void* h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
#ifdef RLX_CUDA_LIB_DIR
    if (!h) h = dlopen((std::string(RLX_CUDA_LIB_DIR) + "/" + so).c_str(), RTLD_NOW | RTLD_LOCAL);
#endif
    if (!h) return error(ErrorCode::unavailable, "cuda: cannot load cuBLAS (", so, "): ", dlerror());
    auto sym = [&](auto& fn, const char* name) { return load_function(h, fn, name, "cuda: " + so); };
    RLX_TRY(sym(a.create, "cublasCreate_v2"));
    RLX_TRY(sym(a.set_stream, "cublasSetStream_v2"));
    RLX_TRY(sym(a.gemm_strided_batched, "cublasGemmStridedBatchedEx"));
    RLX_TRY(sym(a.status_name, "cublasGetStatusName"));
    RLX_TRY(sym(a.status_string, "cublasGetStatusString"));
    return &a;
  }();
  return api;
}

Status cublas_check(cublasStatus_t code, const std::string& what) {
  if (code == CUBLAS_STATUS_SUCCESS) return Status::ok();
  auto api = cublas_api();
  return error(ErrorCode::runtime_error, "cuda: ", what, ": ", api ? (*api)->status_name(code) : "cuBLAS status", " (",
               static_cast<int>(code), ")", api ? cat(": ", (*api)->status_string(code)) : std::string());
}

Expected<std::shared_ptr<Runtime>> Runtime::create() {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    // 35 and 100 are what a machine without an NVIDIA driver or GPU answers
    const bool no_gpu = rc == cudaErrorInsufficientDriver || rc == cudaErrorNoDevice;
    return error(ErrorCode::unavailable, no_gpu ? "no usable NVIDIA GPU here (" : "CUDA cannot start (",
                 "cudaGetDeviceCount: ", cudaGetErrorName(rc), " (", static_cast<int>(rc), "): ", cudaGetErrorString(rc),
                 ")");
  }
  if (count == 0) return error(ErrorCode::unavailable, "no NVIDIA GPU here (cudaGetDeviceCount found 0 devices)");
  std::shared_ptr<Runtime> r(new Runtime());
  RLX_TRY(cuda_check(cudaSetDevice(0), "cudaSetDevice(0)"));
  cudaDeviceProp prop{};
  RLX_TRY(cuda_check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties"));
  r->gpu_.name = prop.name;
  r->gpu_.cc = prop.major * 10 + prop.minor;
  r->gpu_.sms = prop.multiProcessorCount;
  r->gpu_.warp_size = prop.warpSize;
  r->gpu_.memory_bytes = prop.totalGlobalMem;
  r->gpu_.max_threads_per_block = prop.maxThreadsPerBlock;
  const std::vector<int> archs = nvrtc_supported_archs();
  int best = 0;
  bool exact = false;
  for (int a : archs) {
    if (a == r->gpu_.cc) exact = true;
    if (a <= r->gpu_.cc) best = a;
  }
  if (!exact && best == 0)
    return error(ErrorCode::unavailable, "NVRTC ", nvrtc_version(), " cannot target this GPU (", r->gpu_.name, ", sm_",
                 r->gpu_.cc, ")");
  r->arch_ = exact ? cat("sm_", r->gpu_.cc) : cat("compute_", best);
  RLX_TRY(cuda_check(cudaStreamCreateWithFlags(&r->stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"));
  return r;
}

// The runtime lives in the device registry until the process exits. Calling CUDA from static
// destructors, after libcudart may have torn itself down, is unsafe, and process exit
// releases the context with everything in it, so nothing is released here.
Runtime::~Runtime() = default;

Expected<cublasHandle_t> Runtime::cublas() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!cublas_) {
    RLX_ASSIGN_OR_RETURN(const CublasApi* api, cublas_api());
    cublasHandle_t h = nullptr;
    RLX_TRY(cublas_check(api->create(&h), "cublasCreate"));
    RLX_TRY(cublas_check(api->set_stream(h, stream_), "cublasSetStream"));
    cublas_ = h;
  }
  return cublas_;
}

std::string Runtime::description() const {
  return cat(gpu_.name, " (sm_", gpu_.cc, "), ", gpu_.sms, " SMs, ", gpu_.memory_bytes >> 20, " MiB, warp ",
             gpu_.warp_size, ", fp64 yes, f16/bf16 stored and computed in f32 (cuBLAS GEMM f16",
             gpu_.cc >= 80 ? "/bf16" : "", " with f32 accumulation); generated CUDA C++ through NVRTC ", nvrtc_version(),
             " (", arch_, ")");
}

Expected<cudaKernel_t> Runtime::kernel(const std::string& source, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = libraries_.find(source);
  if (it == libraries_.end()) {
    RLX_ASSIGN_OR_RETURN(auto img, nvrtc_compile(source, arch_));
    cudaLibrary_t lib = nullptr;
    RLX_TRY(cuda_check(cudaLibraryLoadData(&lib, img->bytes.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
                       cat("cudaLibraryLoadData (", arch_, img->ptx ? " PTX" : " CUBIN", ", ", img->bytes.size(), " bytes)")));
    it = libraries_.emplace(source, lib).first;
  }
  cudaKernel_t k = nullptr;
  RLX_TRY(cuda_check(cudaLibraryGetKernel(&k, it->second, name.c_str()), "cudaLibraryGetKernel " + name));
  return k;
}

}  // namespace rlx::cuda

// ---- the device runtime layer (hal.h) ----

namespace rlx::cuda {
namespace {
void* ptr(const hal::BufferRange& r) { return hal::device_address(r); }
}  // namespace

Expected<hal::Buffer> Runtime::allocate(uint64_t bytes, const std::string& what) {
  void* p = nullptr;
  RLX_TRY(cuda_check(cudaMalloc(&p, bytes), cat("cudaMalloc of ", bytes, " bytes for ", what)));
  return hal::Buffer{reinterpret_cast<uint64_t>(p), bytes};
}

void Runtime::release(hal::Buffer b) {
  if (b.id) cudaFree(reinterpret_cast<void*>(b.id));
}

Status Runtime::upload(const hal::BufferRange& r, const void* data, uint64_t bytes) {
  return cuda_check(cudaMemcpy(ptr(r), data, bytes, cudaMemcpyHostToDevice), cat("cudaMemcpy uploading ", bytes, " bytes"));
}

Status Runtime::download(const hal::BufferRange& r, void* data, uint64_t bytes) {
  return cuda_check(cudaMemcpy(data, ptr(r), bytes, cudaMemcpyDeviceToHost), cat("cudaMemcpy downloading ", bytes, " bytes"));
}

Expected<std::vector<hal::Kernel>> Runtime::build(const hal::KernelModule& module) {
  std::vector<hal::Kernel> out;
  for (const hal::KernelEntry& e : module.entries) {
    RLX_ASSIGN_OR_RETURN(cudaKernel_t k, kernel(module.source, e.name));
    out.push_back({reinterpret_cast<uint64_t>(k)});
  }
  return out;
}

Status Runtime::check_dispatch(const hal::Dispatch& d) const {
  return hal::check_pointer_launch(d, kThreadsPerBlock, INT32_MAX, "cuda");
}

Status Runtime::write(const hal::BufferRange& r, const void* data, uint64_t bytes) {
  return cuda_check(cudaMemcpyAsync(ptr(r), data, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync writing an input");
}

Status Runtime::read(const hal::BufferRange& r, void* data, uint64_t bytes) {
  return cuda_check(cudaMemcpyAsync(data, ptr(r), bytes, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync reading an output");
}

Status Runtime::finish() {
  // a fault in any kernel surfaces here, named by the CUDA error
  return cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize after running the program");
}

Status Runtime::enqueue(const hal::Command& c) {
  if (c.kind == hal::Command::Kind::zero)
    return cuda_check(cudaMemsetAsync(ptr(c.range), 0, c.range.bytes, stream_), "cudaMemsetAsync " + c.name);
  const hal::Dispatch& d = c.dispatch;
  const auto l = hal::pointer_launch(d, kThreadsPerBlock);
  return cuda_check(cudaLaunchKernel(reinterpret_cast<const void*>(reinterpret_cast<cudaKernel_t>(d.kernel.id)),
                                     dim3(l->grid[0], l->grid[1], l->grid[2]), dim3(l->block[0], l->block[1], l->block[2]),
                                     l->args.data(), 0, stream_),
                    "cudaLaunchKernel " + d.name);
}

}  // namespace rlx::cuda
