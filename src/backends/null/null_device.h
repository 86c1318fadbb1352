#pragma once

#include <memory>

#include "rlx/device.h"

namespace rlx::null_device {

std::shared_ptr<const Device> make_null_device();

}  // namespace rlx::null_device
