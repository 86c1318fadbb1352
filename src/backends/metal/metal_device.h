// The Metal device: every primitive through Metal Shading Language kernels rendered from the
// kernel-level IR (the C renderer's msl dialect after the MSL prelude, msl_prelude.h). There is
// no Metal on Linux and no Metal host runtime in rlx (one could not even be compiled here):
// `rlx devices` lists metal as unavailable, saying so, and macOS users run the vulkan device
// through MoltenVK today. With RLX_METAL_SHIM=1 the device runs its MSL on the CPU through a
// C++ shim of the Metal built-ins (metal_shim_runtime.h), which is how the conformance suite
// checks the MSL here (docs/metal.md).
#pragma once

#include <memory>

#include "rlx/device.h"

namespace rlx::metal {

// The device: unavailable with the reason, or the shim-run device under RLX_METAL_SHIM=1.
std::shared_ptr<const Device> make_metal_device();

}  // namespace rlx::metal
