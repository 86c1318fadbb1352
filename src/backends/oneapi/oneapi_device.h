// The oneapi device: oneDNN primitives (Intel's deep-learning library, the one its own stacks
// use; Debian's libdnnl) as native kernels for matmul, convolution, pooling, softmax and layer
// normalization (kernels/onednn_families.h), and everything else as on the cpu device: the
// cpu's native kernels for what oneDNN does not take (quantized products, attention, LAPACK,
// collectives), generated C for the rest, on the cpu's executor. It runs on oneDNN's CPU engine
// here; Debian's oneDNN also has an OpenCL GPU engine, which needs an Intel GPU driver and which
// rlx does not use yet. There is no SYCL compiler in Debian, so no SYCL code (docs/oneapi.md).
#pragma once

#include <memory>

#include "rlx/device.h"

namespace rlx::oneapi {

// The device; without oneDNN at build time it is listed as unavailable, with the reason.
std::shared_ptr<const Device> make_oneapi_device();

}  // namespace rlx::oneapi
