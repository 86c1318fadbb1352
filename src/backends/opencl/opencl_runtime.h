// OpenCL runtime pieces shared by the device and its executables: the context and in-order
// queue of the first device found, error text for OpenCL status codes, and a program cache.
#pragma once

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "hal/hal.h"
#include "rlx/status.h"

namespace rlx::opencl {

// "CL_OUT_OF_RESOURCES (-5)" and so on.
std::string cl_error_name(cl_int code);

// Returns an rlx error for a failed OpenCL call: "<what>: <CL error>".
Status cl_check(cl_int code, const std::string& what);

// One OpenCL device with its context and in-order queue, created once per process; the
// device runtime layer's runtime (hal.h) for the opencl device.
class Runtime final : public hal::StreamRuntime {
 public:
  // The first GPU, else the first device of any type, on the first platform that has one;
  // an error saying why when there is none (no ICD installed, no platform, no device).
  static Expected<std::shared_ptr<Runtime>> create();
  ~Runtime();

  cl_context context() const { return context_; }
  cl_command_queue queue() const { return queue_; }
  cl_device_id device() const { return device_; }
  bool fp64() const { return fp64_; }
  size_t compute_units() const { return units_; }
  // Whether the device has 64-bit compare-and-swap on global memory (cl_khr_int64_base_atomics).
  bool int64_atomics() const { return int64_atomics_; }
  // The most work items one work-group may have (CL_DEVICE_MAX_WORK_GROUP_SIZE).
  size_t max_work_group() const { return max_group_; }
  const std::string& description() const { return description_; }

  // Builds (or finds already built in this process) the program for `source`. The caller
  // does not release it. Build failures return the compiler's log. PoCL also keeps built
  // kernels on disk ($POCL_CACHE_DIR, by default ~/.cache/pocl), so a later process skips
  // the compiler too.
  Expected<cl_program> program(const std::string& source);

  // hal::Runtime: a buffer is a cl_mem, a kernel a cl_kernel made once per program and entry.
  RLX_HAL_RUNTIME_METHODS;

 protected:
  RLX_HAL_STREAM_METHODS;

 private:
  Runtime() : hal::StreamRuntime("opencl") {}
  cl_device_id device_ = nullptr;
  cl_context context_ = nullptr;
  cl_command_queue queue_ = nullptr;
  bool fp64_ = false;
  bool int64_atomics_ = false;
  size_t units_ = 1;
  size_t max_group_ = 1;
  std::string description_;
  std::mutex mu_;
  std::map<std::string, cl_program> programs_;
  std::map<std::pair<cl_program, std::string>, cl_kernel> kernels_;
  std::mutex launch_mu_;  // a kernel's arguments are set and it is enqueued as one step
};

}  // namespace rlx::opencl
