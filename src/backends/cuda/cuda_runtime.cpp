#include "cuda_runtime.h"

#include "cuda_nvrtc.h"

namespace rlx::cuda {

Status cuda_check(cudaError_t code, const std::string& what) {
  if (code == cudaSuccess) return Status::ok();
  return error(ErrorCode::runtime_error, "cuda: ", what, ": ", cudaGetErrorName(code), " (", static_cast<int>(code),
               "): ", cudaGetErrorString(code));
}

Status cublas_check(cublasStatus_t code, const std::string& what) {
  if (code == CUBLAS_STATUS_SUCCESS) return Status::ok();
  return error(ErrorCode::runtime_error, "cuda: ", what, ": ", cublasGetStatusName(code), " (", static_cast<int>(code),
               "): ", cublasGetStatusString(code));
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
  RLX_TRY(cublas_check(cublasCreate(&r->cublas_), "cublasCreate"));
  RLX_TRY(cublas_check(cublasSetStream(r->cublas_, r->stream_), "cublasSetStream"));
  return r;
}

Runtime::~Runtime() {
  for (auto& [src, lib] : libraries_) cudaLibraryUnload(lib);
  if (cublas_) cublasDestroy(cublas_);
  if (stream_) cudaStreamDestroy(stream_);
}

std::string Runtime::description() const {
  return cat(gpu_.name, " (sm_", gpu_.cc, "), ", gpu_.sms, " SMs, ", gpu_.memory_bytes >> 20, " MiB, warp ",
             gpu_.warp_size, ", fp64 yes, fp16 yes, bf16 ", gpu_.cc >= 80 ? "yes" : "stored (computed in f32)",
             "; generated CUDA C++ through NVRTC ", nvrtc_version(), " (", arch_, "), cuBLAS GEMM");
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
