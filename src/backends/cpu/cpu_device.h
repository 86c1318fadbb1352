// The CPU device: native f32 GEMMs (and later attention), everything else through C code
// generated from the kernel IR, compiled at run time and cached on disk.
#pragma once

#include <memory>

#include "rlx/device.h"

namespace rlx::cpu {

std::shared_ptr<const Device> make_cpu_device();

}  // namespace rlx::cpu
