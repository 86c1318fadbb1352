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

// Helpers of kernels with 64-bit integer data (range_checked in c_renderer.h), placed
// after their `rlx_check` binding: WGSL has no 64-bit integers, so such values are computed
// in 32 bits, and every load of a value past 32 bits and every operation whose exact result
// does not fit sets the check word (the device's run then fails saying so), never a silent
// wrap: rlx_narrow_i64/u64 (loads), rlx_widen_i64/u64 (stores), checked add, sub, mul, div,
// pow, and the casts into 64-bit types.
std::string_view wgsl_range_check_helpers();

// Whether generated WGSL computes strict primitive `n`: what the C renderer handles in the
// device dialects (c_renderer_supports), without f64 values (WGSL has no 64-bit floats) and
// without random numbers (rlx's generator is 64-bit). i64 and u64 values are computed in 32
// bits with range checks (wgsl_range_check_helpers).
Claim wgsl_supports(const NodeDesc& n);

}  // namespace rlx::codegen
