// The C prelude that starts every C kernel file the CPU device generates.
//
// Generated kernels are compiled at run time with the system C compiler
// (`cc -O3 -march=native -fPIC -shared -fopenmp-simd`, without -ffast-math). Without
// -ffast-math gcc does not vectorize loops that call libm's expf/logf/tanhf/erff (nor
// sqrtf, whose errno path stays a call unless -fno-math-errno), so a fused chain such as
// `gelu(x*a+b)` would run one element at a time. The prelude supplies branch-free
// `static inline` replacements that gcc and clang auto-vectorize (all of them with AVX2 or
// AVX-512; with plain SSE2 all but sin/cos and the Newton sqrt), with
// explicit NaN/inf handling because the code may not assume -ffinite-math-only. Selects are
// done on bit masks rather than with ?: on floats: under the default -ftrapping-math gcc
// will not if-convert a float ?: whose arm it has sunk into a branch, except with AVX-512
// masking. -fno-math-errno is safe to add to the kernel flags (it changes no result) and
// lets rlx_sqrt_f32/rlx_rsqrt_f32 use the sqrt instruction.
//
// Everything is C99, `static inline`, without global state. Names:
//
//   float math (vectorizable; max error measured against double-precision libm over ~70M
//   inputs spread over all floats, with and without FMA; see tests/unit/c_prelude_test.cpp,
//   which asserts the bounds in brackets; "ulp" is the float spacing at the exact result):
//     rlx_exp_f32 0.97 [2], rlx_expm1_f32 1.42 [2], rlx_log_f32 0.82 [2]
//     rlx_tanh_f32 2.42 [4], rlx_sigmoid_f32 2.31 [4], rlx_erf_f32 1.33 [4]
//     rlx_silu_f32 2.92 [4], rlx_softplus_f32 1.94 [4]
//     rlx_sin_f32, rlx_cos_f32 0.5 [2] for |x| <= 2^20*pi/2 (~1.6e6); beyond that the result
//       is finite and in [-1, 1] but not accurate (with FMA it stays accurate much further)
//     rlx_gelu_erf_f32   0.5*x*(1+erf(x/sqrt(2)))                    2.7 ulp for x >= -1;
//     rlx_gelu_tanh_f32  0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715x^3)))  3.0 ulp for x >= -1;
//       both within 1e-6 abs + 4 ulp everywhere (for x < -1 the value is a small tail whose
//       relative error grows with x^2, as x/sqrt2 and the exp argument are float)
//     rlx_sqrt_f32 correctly rounded, rlx_rsqrt_f32 0.5 [1] (sqrtf/1/sqrt in double when
//       compiled with -fno-math-errno, Newton iterations in double otherwise)
//     rlx_round_f32 (half to even), rlx_sign_f32 (sign(+-0)=+-0, NaN stays NaN): exact
//     rlx_pow_f32 (calls powf: correct, but a loop using it does not vectorize)
//   double math: the same names with _f64, built on libm (not required to vectorize).
//   conversions (integer bit manipulation, vectorizable, round to nearest even,
//   NaN stays NaN, inf/subnormals exact): rlx_f16_to_f32, rlx_f32_to_f16,
//     rlx_bf16_to_f32, rlx_f32_to_bf16.
//   Host C only: rlx_store_f16_n(dst, src, n), n floats to f16 as rlx_f32_to_f16 rounds them,
//     and rlx_load_f16_n(dst, src, n), n f16 widened as rlx_f16_to_f32 does, with the CPU's
//     vcvtps2ph / vcvtph2ps where the target has F16C or AVX-512; rlx_store_bf16_n and
//     rlx_load_bf16_n, the same for bf16 with the prelude's conversions (staged 16-bit rows);
//     rlx_round_f16_n(dst, src, n), n floats rounded to f16 and kept in floats as
//     rlx_round_f16 rounds them, with vcvtps2ph + vcvtph2ps where the target has them.
//   saturating float->int casts without UB (NaN -> 0, clamp, else truncate toward zero):
//     rlx_f32_to_{i8,u8,i32,i64}_sat, rlx_f64_to_{i8,u8,i32,i64}_sat.
//   integer helpers: rlx_floordiv_i64/_i32 and rlx_mod_i64/_i32 (Python semantics: the
//     remainder takes the divisor's sign; divisor 0 gives 0; INT_MIN / -1 wraps to INT_MIN
//     and its remainder is 0), rlx_clamp_index(i, n) / rlx_clamp_index_i32 (i < 0 wraps once
//     to i + n, then clamps into [0, n-1]; n <= 0 gives 0), so gathers never read out of
//     bounds.
//   bit casts: rlx_f32_bits, rlx_f32_from_bits, rlx_f64_bits, rlx_f64_from_bits.
// Helpers named rlx__* are internal.
//
// Special values follow C99 Annex F: exp(+-inf) = inf/0, log(0) = -inf, log(x<0) = NaN,
// tanh/erf(+-inf) = +-1, sigmoid(+-inf) = 1/0, gelu/silu(-inf) = -0, NaN propagates.
// Results assume the default floating-point environment (round to nearest even).
#pragma once

#include <string_view>

namespace rlx::codegen {

/// Returns the prelude's C source text (static storage; it contains its own include guard
/// and includes <math.h>, <stdint.h> and <string.h>). Prepend it to each generated C file.
std::string_view c_prelude();

}  // namespace rlx::codegen
