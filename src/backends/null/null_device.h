#pragma once

#include <memory>
#include <string>

#include "rlx/device.h"

namespace rlx::null_device {

// The skeleton device: available, claims nothing, renders nothing.
std::shared_ptr<const Device> make_null_device();
// A device rlx was built without: listed by `rlx devices` as unavailable with `reason`.
std::shared_ptr<const Device> make_unavailable_device(std::string name, std::string reason);

}  // namespace rlx::null_device
