// The HLSL prelude that starts every compute shader the directx device generates (the C
// renderer's hlsl dialect renders the kernel after it), and the header of its native kernels.
//
// The HLSL rlx writes is what both of its compilers take: Shader Model 6's HLSL as DXC
// compiles it for D3D12, and the HLSL front end of glslang, through which rlx verifies it on
// Vulkan (lavapipe here). glslang's HLSL has no signed 64-bit type and 8/16-bit types need
// extensions D3D12 makes optional, so the dialect is shaped like WGSL's:
// - index arithmetic is 32-bit (`int64_t` is #defined to int; the runtime refuses sizes past
//   2^31-1), 8/16-bit values are computed in int/uint and kept packed in uint words, stored
//   with InterlockedAnd/InterlockedOr;
// - i64/u64 tensors are (low, high) int2/uint2 words, computed in 32 bits with range checks
//   that set a check word the executor reads (hlsl_range_check_helpers);
// - f64 tensors in doubles (optional in D3D12 and Vulkan: the device says whether it has them),
//   whose transcendentals D3D12 lacks: the prelude computes exp, log, expm1, tanh, sigmoid,
//   pow and exact fmod in double arithmetic (shader_f64_math, shared with GLSL) and
//   hlsl_supports refuses the others; no random numbers (rlx's generator is 64-bit);
// - f32 math with C's special values in f32 arithmetic (the helpers the C prelude names:
//   rlx_exp_f32, rlx_pow_f32, exact fmodf, sin/cos with a three-part pi/2), saturating casts,
//   the integer helpers, exact f16/bf16 conversions.
// Buffers are RWStructuredBuffers at registers u0..un-1 (bindings 0..n-1 under glslang), the
// domain size a constant buffer that D3D12 fills with root constants and Vulkan with push
// constants ([[vk::push_constant]], which DXC ignores when it writes DXIL).
#pragma once

#include <string>
#include <string_view>

#include "codegen/c_renderer.h"

namespace rlx::codegen {

// Work groups a D3D12 dispatch may have along x (D3D12_CS_DISPATCH_MAX_THREAD_GROUPS_PER_DIMENSION):
// HLSL has no built-in for the dispatch's group count, so a generated kernel finds its element
// as x + y * kHlslMaxGroupsX * kGlslWorkgroupSize, and a runtime running HLSL lays out a grid
// of more groups as rows of exactly this many.
inline constexpr int kHlslMaxGroupsX = 65535;

// The prelude text.
std::string_view hlsl_prelude();

// Helpers of kernels with 64-bit integer data (range_checked in c_renderer.h), placed after
// their `rlx_check` buffer: the load of a value past 32 bits and every operation whose exact
// result does not fit sets the check word (the run then fails saying so), never a silent wrap.
std::string_view hlsl_range_check_helpers();

// The constant buffer of a kernel's `count` 64-bit scalars, read as the int (low word) P(i):
// root constants on D3D12, push constants on Vulkan.
std::string hlsl_scalar_block(int count);

// Whether generated HLSL computes strict primitive `n`: what the C renderer handles in the
// device dialects (c_renderer_supports), without random numbers, and with f64 values only
// where `fp64` (the device has doubles) and the prelude computes the op in double.
Claim hlsl_supports(const NodeDesc& n, bool fp64);

}  // namespace rlx::codegen
