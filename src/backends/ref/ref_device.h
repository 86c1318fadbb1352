#pragma once

#include <memory>

#include "rlx/device.h"

namespace rlx::ref {

std::shared_ptr<const Device> make_ref_device();

}  // namespace rlx::ref
