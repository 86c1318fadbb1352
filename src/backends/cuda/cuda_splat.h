// The cuda device's native 3D Gaussian splatting kernels (docs/splatting.md): the CUDA C++ of
// kernels/splat_source.h (the same kernel text the opencl device runs as OpenCL C), compiled
// with NVRTC and launched in the OpenCL launches' shapes: one thread per Gaussian (blocks of
// 128) for the projection and the gradients, the sort's padded length for the prep kernel and
// each bitonic step, 16 x 16 blocks over the image for the compositing kernels, one block of 64
// for the background's gradient. The device claims the nodes in cuda::claim_native
// (cuda_codegen.cpp, which needs no GPU).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cuda_runtime.h"
#include "rlx/device.h"

namespace rlx::cuda {

// The launches of one splat node, bound to the node's input and output device buffers, with
// the camera and scratch memory they need (allocated here, once, for the node's static sizes).
class SplatLaunches {
 public:
  static Expected<std::unique_ptr<SplatLaunches>> create(Runtime& rt, const NodeDesc& node, const std::vector<void*>& in,
                                                         const std::vector<void*>& out);
  ~SplatLaunches();
  SplatLaunches(const SplatLaunches&) = delete;
  SplatLaunches& operator=(const SplatLaunches&) = delete;

  // Enqueues the node's work on `s`: the backward's gradient sums zeroed, then the kernels in
  // order.
  Status enqueue(cudaStream_t s);

 private:
  SplatLaunches() = default;
  // One kernel launch: its argument values in order (a device pointer or an int each), and
  // the pointers to them that cudaLaunchKernel reads (set by seal(), after the last value).
  struct Launch {
    cudaKernel_t kernel = nullptr;
    dim3 grid, block;
    struct Arg {
      void* ptr = nullptr;
      int num = 0;
      bool is_ptr = false;
    };
    std::vector<Arg> values;
    std::vector<void*> args;
    Launch& mem(void* p);
    Launch& num(int64_t v);
    void seal();
  };
  Status build(Runtime& rt, const NodeDesc& node, const std::vector<void*>& in, const std::vector<void*>& out);
  Expected<void*> scratch(size_t bytes);
  // A launch of `kernel` over `items` threads in one dimension (blocks of up to 128).
  Launch& add_1d(cudaKernel_t kernel, int64_t items);

  std::vector<std::unique_ptr<Launch>> launches_;
  std::vector<void*> owned_;
  void* zero_ = nullptr;  // the backward's gradient sums, zeroed before each run
  size_t zero_bytes_ = 0;
  std::string name_;  // the node's, for errors
};

}  // namespace rlx::cuda
