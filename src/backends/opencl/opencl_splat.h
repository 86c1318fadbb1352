// The opencl device's native 3D Gaussian splatting kernels (docs/splatting.md): the four splat
// ops run on the device, computing in double as the cpu's kernels do, with the same culling,
// binning, ordering and compositing rules, so an image or a gradient differs from the cpu's
// only by rounding (the order of the gradient sums, the device's exp and log). The kernels
// (projection, prep, bitonic sort, compositing, backward) are described in
// kernels/splat_source.h, whose one text is their OpenCL C and the cuda device's CUDA C++.
//
// The device needs fp64 (every kernel) and cl_khr_int64_base_atomics (the backward); a node
// on a device without them is refused with that reason.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "opencl_runtime.h"
#include "rlx/device.h"

namespace rlx::opencl {

// The device's claim for a splat node: the kernels above, or why not.
Claim claim_splat(const NodeDesc& n, const Runtime& rt);

// The launches of one splat node, bound to the node's input and output buffers, with the
// scratch buffers they need (allocated once, for the node's static sizes).
class SplatLaunches {
 public:
  static Expected<std::unique_ptr<SplatLaunches>> create(Runtime& rt, const NodeDesc& node, const std::vector<cl_mem>& in,
                                                         const std::vector<cl_mem>& out);
  ~SplatLaunches();
  SplatLaunches(const SplatLaunches&) = delete;
  SplatLaunches& operator=(const SplatLaunches&) = delete;

  // Enqueues the node's kernels on `q` (in order; the caller serializes runs).
  Status enqueue(cl_command_queue q);

 private:
  SplatLaunches() = default;
  struct Launch {
    cl_kernel kernel = nullptr;
    cl_uint dims = 1;
    size_t global[2] = {1, 1};
    size_t local[2] = {0, 0};  // 0: the driver chooses
    int sort_j = 0, sort_k = 0;  // the bitonic step's (j, k) arguments, set before the launch (0: none)
  };
  struct Fill {
    cl_mem mem;
    size_t bytes;
  };
  Expected<cl_kernel> kernel(cl_program p, const char* name);
  Expected<cl_mem> scratch(Runtime& rt, size_t bytes, const void* init = nullptr);
  Status prep_and_sort(cl_program p, const std::vector<cl_mem>& in, int n, int tile, int tiles_x, int tiles_y,
                       cl_mem& rect, cl_mem& skip, cl_mem& order);

  std::vector<Launch> launches_;
  std::vector<Fill> zero_;  // filled with zero bytes before the launches
  std::vector<cl_kernel> kernels_;
  std::vector<cl_mem> owned_;
  Runtime* rt_ = nullptr;
  std::string name_;  // the node's, for errors
};

}  // namespace rlx::opencl
