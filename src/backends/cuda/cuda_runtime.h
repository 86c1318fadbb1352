// CUDA runtime pieces shared by the cuda device and its executables: error text for the
// runtime, cuBLAS and NVRTC, and the process-wide GPU state (device 0, one stream, one cuBLAS
// handle, loaded kernel libraries). Only the CUDA runtime API is used (libcudart loads the
// driver itself when the first call needs it), so rlx starts on machines without a driver.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "cuda_codegen.h"
#include "hal/hal.h"
#include "rlx/status.h"

namespace rlx::cuda {

// cuBLAS, loaded with dlopen on first use rather than linked: loading libcublas costs every
// process about 0.2 s at startup (its relocations), also processes that never multiply on a GPU.
struct CublasApi {
  cublasStatus_t (*create)(cublasHandle_t*);
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
  cublasStatus_t (*gemm_strided_batched)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                         const void*, const void*, cudaDataType, int, long long, const void*,
                                         cudaDataType, int, long long, const void*, void*, cudaDataType, int,
                                         long long, int, cublasComputeType_t, cublasGemmAlgo_t);
  const char* (*status_name)(cublasStatus_t);
  const char* (*status_string)(cublasStatus_t);
};
// The loaded API, or why libcublas could not be loaded.
Expected<const CublasApi*> cublas_api();

// An rlx error for a failed CUDA runtime call: "cuda: <what>: cudaErrorX (n): <text>".
Status cuda_check(cudaError_t code, const std::string& what);
// The same for cuBLAS: "cuda: <what>: CUBLAS_STATUS_X (n)".
Status cublas_check(cublasStatus_t code, const std::string& what);

// What cudaGetDeviceProperties says about the GPU, as the device reports it.
struct GpuInfo {
  std::string name;
  ComputeCapability cc = 0;
  int sms = 0;
  int warp_size = 0;
  size_t memory_bytes = 0;
  int max_threads_per_block = 0;
};

// Device 0 (CUDA_VISIBLE_DEVICES selects which GPU that is), created once per process; the
// device runtime layer's runtime (hal.h) for the cuda device: a hal::Buffer is a device
// pointer, a kernel a cudaKernel_t, the queue the runtime's stream.
class Runtime final : public hal::StreamRuntime {
 public:
  // Fails, with the CUDA error text, when there is no driver or no GPU (error 35,
  // cudaErrorInsufficientDriver, and 100, cudaErrorNoDevice, on machines without one).
  static Expected<std::shared_ptr<Runtime>> create();
  ~Runtime();

  const GpuInfo& gpu() const { return gpu_; }
  cudaStream_t stream() const { return stream_; }
  // The cuBLAS handle (on stream()), created on first use: cublasCreate takes a while, and
  // most processes that list devices never multiply on the GPU.
  Expected<cublasHandle_t> cublas();
  // "NVIDIA H200 (sm_90), 132 SMs, ..." for `rlx devices`.
  std::string description() const;
  // The NVRTC target for this GPU: "sm_XY" when NVRTC knows the GPU's architecture, else
  // PTX ("compute_XY") of the newest architecture NVRTC knows that the GPU can run.
  const std::string& nvrtc_arch() const { return arch_; }

  // Compiles `source` (a translation unit) with NVRTC for this GPU, loads it, and returns
  // the kernel called `name`. Libraries are cached per source for the life of the process
  // (NVRTC output also on disk, see cuda_nvrtc.h).
  Expected<cudaKernel_t> kernel(const std::string& source, const std::string& name);

  // hal::Runtime
  RLX_HAL_RUNTIME_METHODS;
  Status check_dispatch(const hal::Dispatch& d) const override;

 protected:
  RLX_HAL_STREAM_METHODS;

 private:
  Runtime() : hal::StreamRuntime("cuda") {}
  GpuInfo gpu_;
  std::string arch_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  std::mutex mu_;
  std::map<std::string, cudaLibrary_t> libraries_;
};

}  // namespace rlx::cuda
