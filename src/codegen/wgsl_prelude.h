// The WGSL prelude that starts every compute shader the webgpu device generates (the C
// renderer's wgsl dialect renders the kernel after it). WGSL has no preprocessor, no
// overloading and no 64-bit types, so the prelude:
// - aliases the type names the renderer writes (int64_t, float, uint8_t, ...) onto i32, u32
//   and f32: index arithmetic is 32-bit here (the runtime refuses sizes past 2^31-1), and
//   8/16-bit values are computed in i32/u32 and kept packed in u32 words, as glsl_gl does;
// - defines the helpers rendered kernels call, under the C prelude's names, once each for the
//   one width WGSL computes in: f32 math with C's special values (rlx_exp_f32, rlx_pow_f32,
//   fmodf exact, sin/cos with a three-part pi/2), saturating casts, the integer helpers,
//   exact f16/bf16 conversions, isnan/isinf by the bits and NaN/infinity as run-time values.
#pragma once

#include <string_view>

#include "codegen/c_renderer.h"

namespace rlx::codegen {

// The prelude text (it needs no version line or extension).
std::string_view wgsl_prelude();

// Whether generated WGSL computes strict primitive `n`: what the C renderer handles in the
// device dialects (c_renderer_supports), without f64, i64 and u64 values (WGSL has no 64-bit
// types) and without random numbers (rlx's generator is 64-bit).
Claim wgsl_supports(const NodeDesc& n);

}  // namespace rlx::codegen
