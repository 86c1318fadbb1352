// The Metal Shading Language prelude that starts every translation unit the metal device
// generates (the C renderer's msl dialect renders the kernels after it).
//
// MSL is C++14 with address spaces: 64-bit integers and 8/16-bit types are native, so kernels
// compute as the C dialects do; it has no double, so f64 tensors and rlx's random numbers
// (computed in double) are refused, and the renderer's paths through double (saturating casts)
// compute in float (`double` is #defined to float). The f32 helpers compute C's special values
// in f32 arithmetic, as the HLSL and WGSL preludes do, and NaN tests use isnan: the kernels
// assume Metal's safe math mode (MTLCompileOptions.mathMode = MTLMathModeSafe, or
// fastMathEnabled = NO), since fast math may assume no NaN or infinity.
//
// There is no Metal compiler on Linux: rlx checks its MSL by compiling it as C++ against a shim
// of the Metal built-ins it uses (backends/metal/metal_shim_runtime.h) and running the kernels
// on the CPU.
#pragma once

#include <string_view>

#include "codegen/c_renderer.h"

namespace rlx::codegen {

// The prelude text (its first line includes <metal_stdlib>).
std::string_view msl_prelude();

// Whether generated MSL computes strict primitive `n`: what the C renderer handles in the
// device dialects (c_renderer_supports), without f64 values and random numbers.
Claim msl_supports(const NodeDesc& n);

}  // namespace rlx::codegen
