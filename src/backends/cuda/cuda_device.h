// The CUDA device: every primitive through CUDA C++ rendered from the kernel-level IR (the C
// renderer's CUDA dialect) and compiled with NVRTC, one library per compiled graph, buffers
// resident on the GPU, weights uploaded once, and cuBLAS for the products that are one GEMM.
// Built wherever the CUDA toolkit is found; without a GPU (or driver) it is listed as
// unavailable with the CUDA error.
#pragma once

#include <memory>

#include "rlx/device.h"

namespace rlx::cuda {

// The device; unavailable, with the reason CUDA gave, when there is no usable GPU.
std::shared_ptr<const Device> make_cuda_device();

// Loads cuBLAS (with dlopen, as the first GEMM does); an error says why it cannot be loaded.
// Needs no GPU.
Status load_cublas();

}  // namespace rlx::cuda
