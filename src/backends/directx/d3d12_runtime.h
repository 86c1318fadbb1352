// The Direct3D 12 runtime of the directx device: the device runtime layer's runtime (hal.h)
// over ID3D12Device, for Windows' D3D12 as WSL2 exposes it to Linux (libd3d12.so, with DXC's
// libdxcompiler.so to compile HLSL to DXIL), both loaded with dlopen so that rlx builds and
// runs without them. It is written against Debian's directx-headers-dev and compiled in CI,
// but no machine rlx is tested on has D3D12: it has never run, and the directx device uses it
// only when RLX_DIRECTX_RUNTIME=d3d12 asks for it (docs/directx.md).
//
// How it maps the layer: a buffer is a committed default-heap resource with unordered access,
// kept in the UNORDERED_ACCESS state between commands; a kernel is a compute pipeline whose root
// signature holds the dispatch's 64-bit scalars as 32-bit root constants (register b0, which
// the generated HLSL's constant buffer gets) and one root UAV per buffer (u0..n-1, at the
// range's GPU address, so arena ranges need no descriptors); a replay records one command list
// on the compute queue: copies in from upload-heap staging, each dispatch with a UAV barrier
// after it, zero fills as copies from zeroed staging, copies out to readback-heap staging, one
// fence wait.
#pragma once

#include <memory>

#include "hal/hal.h"
#include "rlx/status.h"

namespace rlx::directx {

// The runtime on the default D3D12 adapter; an error saying why when libd3d12.so or
// libdxcompiler.so cannot be loaded or no device can be created.
Expected<std::shared_ptr<hal::Runtime>> create_d3d12_runtime();

// A one-line description of the adapter the runtime opened (for `rlx devices`).
std::string d3d12_description(const hal::Runtime& rt);

}  // namespace rlx::directx
