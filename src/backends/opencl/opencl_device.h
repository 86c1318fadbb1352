// The OpenCL device: every primitive through OpenCL C rendered from the kernel-level IR (the
// C renderer's OpenCL dialect), one program per compiled graph, buffers resident on the device.
// Runs here on PoCL (the CPU as an OpenCL device) and on any OpenCL 1.2 driver.
#pragma once

#include <memory>

#include "rlx/device.h"

namespace rlx::opencl {

// The device; when no OpenCL platform or device is present it is listed as unavailable, with
// the reason the OpenCL loader gave.
std::shared_ptr<const Device> make_opencl_device();

}  // namespace rlx::opencl
