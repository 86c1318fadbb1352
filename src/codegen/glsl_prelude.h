// The GLSL prelude that starts every compute shader the vulkan and opengl devices generate
// (the C renderer's glsl_vulkan / glsl_gl dialects render the kernel after it), and the header
// of their native kernels' shaders (src/kernels/).
//
// The prelude defines, in GLSL 4.50, what rendered kernels call (the same names as the C
// prelude, c_prelude.h, and c_runtime_helpers()):
//   f32 math rlx_{exp,log,sqrt,rsqrt,tanh,sigmoid,erf,sin,cos,pow,round,sign}_f32,
//     rlx_fmod_floor_f32, and fmodf/fabsf/floorf/ceilf mapped onto GLSL;
//   f64 rlx_{sqrt,rsqrt,round,sign,exp,expm1,log,sigmoid,tanh,pow}_f64, rlx_fmod_floor_f64
//     (GLSL's transcendental built-ins are float-only: exp, log and the Box-Muller cosine are
//     computed in double arithmetic here; f64 erf, sin and cos are refused);
//   f16/bf16 conversions (exact, round to nearest even), saturating float->int casts, the
//   integer helpers (truncating division and remainder without traps, floor modulo, integer
//   powers) and the counter-based random numbers.
// Special values follow C (exp(-inf) = 0, log(0) = -inf, log(x<0) = NaN, NaN propagates),
// checked explicitly because GLSL leaves them undefined.
//
// Vulkan: GL_EXT_shader_explicit_arithmetic_types plus 8/16-bit storage give int8_t..
// uint64_t. OpenGL 4.5 core has no 8/16-bit types: the gl flavour maps the 64-bit names onto
// GL_ARB_gpu_shader_int64, #defines int8_t/uint8_t/int16_t/uint16_t to int/uint, and the
// renderer keeps 8/16-bit buffers packed in uint words (loaded with bitfieldExtract, stored
// with atomicAnd/atomicOr so neighbouring invocations do not clobber each other's bytes),
// wrapping narrow integer values to their width.
#pragma once

#include <string>

#include "codegen/c_renderer.h"

namespace rlx::codegen {

/// The prelude text for a shader of `target` (glsl_vulkan or glsl_gl), starting with the
/// #version line.
std::string glsl_prelude(CTarget target);

// The start of a native kernel's shader for `target` (glsl_vulkan or glsl_gl): the #version
// line, the int64 extension, and `params` int64 parameters read as P(0)..P(params-1): push
// constants (Vulkan) or uniforms rlx_p0.. at locations 0.. (OpenGL).
std::string glsl_native_header(CTarget target, int params);

// What a GLSL device's driver offers beyond GLSL 4.50 (see glsl_supports).
struct GlslCaps {
  bool fp64 = false;   // double arithmetic (shaderFloat64)
  bool int8 = false;   // 8-bit storage and arithmetic: i8, u8, bool
  bool int16 = false;  // 16-bit storage and arithmetic: f16, bf16 (stored), i16, u16
  std::string why_no_int8, why_no_int16;  // the reason given when refused
};

// Whether generated GLSL computes strict primitive `n` on a device with `caps`: what the C
// renderer handles (c_renderer_supports), dtypes the device stores, and no f64 erf, sin or
// cos (GLSL's transcendental built-ins are float-only; the prelude emulates f64 exp, log,
// tanh, sigmoid and pow in double arithmetic, not these).
Claim glsl_supports(const NodeDesc& n, const GlslCaps& caps);

}  // namespace rlx::codegen
