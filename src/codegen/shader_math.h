// The f32 math helpers the HLSL and MSL preludes share (hlsl_prelude.h, msl_prelude.h), written
// once: rlx_exp_f32, rlx_log_f32, rlx_sqrt_f32, rlx_rsqrt_f32, rlx_tanh_f32, rlx_sigmoid_f32,
// rlx_erf_f32, rlx_sin_f32, rlx_cos_f32, rlx_pow_f32, rlx_round_f32, rlx_sign_f32, fmodf and
// rlx_fmod_floor_f32, with C's special values in f32 arithmetic. (The GLSL and WGSL preludes
// have their own: GLSL computes some of them in double, and WGSL's syntax differs too much.)
#pragma once

#include <string>

#include "codegen/dialect.h"

namespace rlx::codegen {

// The helpers in `target`'s language (CTarget::hlsl or CTarget::msl); they expect INFINITY and
// NAN, isnan and isinf, and the vector type uint2.
std::string shader_f32_math(CTarget target);

}  // namespace rlx::codegen
