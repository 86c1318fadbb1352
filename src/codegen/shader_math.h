// The f32 math helpers the HLSL and MSL preludes share (hlsl_prelude.h, msl_prelude.h), written
// once: rlx_exp_f32, rlx_log_f32, rlx_sqrt_f32, rlx_rsqrt_f32, rlx_tanh_f32, rlx_sigmoid_f32,
// rlx_erf_f32, rlx_sin_f32, rlx_cos_f32, rlx_pow_f32, rlx_round_f32, rlx_sign_f32, fmodf and
// rlx_fmod_floor_f32, with C's special values in f32 arithmetic. (The GLSL and WGSL preludes
// have their own: GLSL computes some of them in double, and WGSL's syntax differs too much.)
// And the f64 helpers the GLSL and HLSL preludes share.
#pragma once

#include <string>

#include "codegen/dialect.h"

namespace rlx::codegen {

// The helpers in `target`'s language (CTarget::hlsl or CTarget::msl); they expect INFINITY and
// NAN, isnan and isinf, and the vector type uint2.
std::string shader_f32_math(CTarget target);

// The f64 helpers in `target`'s language (a GLSL target or CTarget::hlsl), in double arithmetic
// only: rlx_frexp_exp_f64, rlx_pow2_f64, rlx_sqrt_f64, rlx_rsqrt_f64, rlx_round_f64,
// rlx_exp_f64, rlx_expm1_f64, rlx_log_f64, rlx_sigmoid_f64, rlx_tanh_f64, rlx_pow_f64,
// rlx_sign_f64, rlx_fmod_f64 (exact) and rlx_fmod_floor_f64. They expect NAN and INFINITY,
// rlx_f64_hi(double) (the high 32 bits, of which they read the sign and exponent bits only)
// and rlx_f64_from_words(uint lo, uint hi).
std::string shader_f64_math(CTarget target);

}  // namespace rlx::codegen
