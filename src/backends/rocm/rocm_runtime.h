// The rocm device's runtime: HIP (ROCm 5.2, Debian's libamdhip64) loaded with dlopen, so rlx
// starts on machines without ROCm, and hipRTC (in the same library) compiling the HIP C++ of
// rocm_codegen.h for the GPU's own gfx target at run time. The process-wide GPU state: device
// 0 (HIP_VISIBLE_DEVICES selects which GPU that is), one stream, loaded modules.
//
// Never run: no machine rlx is tested on has an AMD GPU. What is verified here is that it
// builds against Debian's HIP headers, that it loads the library and reports why it cannot
// run, and (tests/rocm/) that the code it would compile compiles for gfx90a, gfx942 and gfx1100.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "hal/hal.h"
#include "rlx/status.h"

namespace rlx::rocm {

struct HipApi;  // the functions loaded from libamdhip64

// What hipGetDeviceProperties says about the GPU, as the device reports it.
struct GpuInfo {
  std::string name, gfx;  // "AMD Instinct MI300X", "gfx942" (gcnArchName without its feature flags)
  int compute_units = 0;
  int warp_size = 0;
  size_t memory_bytes = 0;
};

class Runtime final : public hal::StreamRuntime {
 public:
  // Fails, with HIP's error text, when the library cannot be loaded or finds no GPU
  // (hipErrorNoDevice, 100, on machines without one).
  static Expected<std::shared_ptr<Runtime>> create();
  ~Runtime();

  const GpuInfo& gpu() const { return gpu_; }
  // "AMD Instinct MI300X (gfx942), 304 CUs, ..." for `rlx devices`.
  std::string description() const;

  // hal::Runtime
  RLX_HAL_RUNTIME_METHODS;
  Status check_dispatch(const hal::Dispatch& d) const override;

 protected:
  RLX_HAL_STREAM_METHODS;

 private:
  Runtime() : hal::StreamRuntime("rocm") {}
  // Compiles `source` with hipRTC for this GPU and loads it (cached per source).
  Expected<void*> module(const std::string& source);

  const HipApi* api_ = nullptr;
  GpuInfo gpu_;
  void* stream_ = nullptr;
  std::mutex mu_;
  std::map<std::string, void*> modules_;
};

}  // namespace rlx::rocm
