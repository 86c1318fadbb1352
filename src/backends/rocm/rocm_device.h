// The rocm device: every primitive through HIP C++ rendered from the kernel-level IR (the C
// renderer's HIP dialect) and compiled with hipRTC for the GPU's gfx target, buffers resident
// on the GPU. Built wherever Debian's HIP headers are found (libamdhip64-dev); without an AMD
// GPU it is listed as unavailable with HIP's error. docs/rocm.md says what is verified.
#pragma once

#include <memory>

#include "rlx/device.h"

namespace rlx::rocm {

// The device; unavailable, with the reason HIP gave, when there is no usable GPU.
std::shared_ptr<const Device> make_rocm_device();

}  // namespace rlx::rocm
