#include "codegen/glsl_prelude.h"
#include "codegen/shader_math.h"
#include "rlx/unary_math.h"

// Why the GLSL looks the way it does:
//  * GLSL leaves exp/log/sqrt/pow undefined at special values and for negative arguments, so
//    each wrapper sorts those out before calling the built-in.
//  * sqrt and 1/sqrt go through double (which GLSL has for arithmetic and sqrt), so they are
//    rounded once, like the C prelude's.
//  * tanh is a series near 0 (exp(2a) - 1 cancels there) and 1 - 2/(exp(2a)+1) elsewhere.
//  * Identifiers may not contain "__" in GLSL, so internal helpers are rlx_x_*.

namespace rlx::codegen {
namespace {

constexpr const char* kVulkanHeader = R"GLSL(#version 450
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_16bit_storage : require
#define RLX_GLSL_VULKAN 1
)GLSL";

constexpr const char* kGlHeader = R"GLSL(#version 450
#extension GL_ARB_gpu_shader_int64 : require
#define RLX_GLSL_GL 1
#define int32_t int
#define uint32_t uint
/* no 8/16-bit types: the renderer packs them in uint words and computes them in int/uint */
#define int8_t int
#define uint8_t uint
#define int16_t int
#define uint16_t uint
)GLSL";

constexpr const char* kPreludeBody = R"GLSL(
/* ---- rlx GLSL prelude (src/codegen/glsl_prelude.h) ---- */
#define NAN uintBitsToFloat(0x7fc00000u)
#define INFINITY uintBitsToFloat(0x7f800000u)
#define INT32_MAX 2147483647
#define INT64_MAX 9223372036854775807l
#define INT64_MIN (-9223372036854775807l - 1l)
#define UINT64_MAX 18446744073709551615ul
#define fabsf abs
#define fabs abs
#define floorf floor
#define ceilf ceil
#define fmodf rlx_fmod_f32
#define fmod rlx_fmod_f64

/* int32 -> int64 by its bits: lavapipe (Mesa 22.3) miscompiles some sign extensions of
   loaded int32 values (negative gather indices and exponents came out wrong) */
int64_t rlx_i32_to_i64(int32_t x) { return packInt2x32(ivec2(x, x >> 31)); }

/* ---------------------------------------------------------------- f32 math */
float rlx_exp_f32(float x) {
  if (isnan(x)) return x;
  if (x > 88.7228394) return INFINITY;
  if (x < -103.972084) return 0.0;
  return exp(x);
}
float rlx_log_f32(float x) {
  if (isnan(x) || x == INFINITY) return x;
  if (x < 0.0) return NAN;
  if (x == 0.0) return -INFINITY;
  /* llvmpipe's log misreads subnormals: scale them into the normal range first */
  if (x < 1.17549435e-38) return float(double(log(x * 8388608.0)) - 15.942385152878742lf);
  return log(x);
}
float rlx_sqrt_f32(float x) {
  if (x < 0.0) return NAN;
  return float(sqrt(double(x)));
}
float rlx_rsqrt_f32(float x) {
  if (x < 0.0) return NAN;
  if (x == 0.0) return (floatBitsToUint(x) >> 31) != 0u ? -INFINITY : INFINITY;
  if (isinf(x)) return 0.0;
  return float(1.0lf / sqrt(double(x)));
}
float rlx_tanh_f32(float x) {
  if (isnan(x)) return x;
  float a = min(abs(x), 10.0);
  float r;
  if (a < 0.5) {
    /* odd Taylor series in double through a^17 (relative error < 1e-8 for a < 0.5) */
    double d = double(a), s = d * d;
    double p = 6404582.0lf / 10854718875.0lf;
    p = p * s - 929569.0lf / 638512875.0lf;
    p = p * s + 21844.0lf / 6081075.0lf;
    p = p * s - 1382.0lf / 155925.0lf;
    p = p * s + 62.0lf / 2835.0lf;
    p = p * s - 17.0lf / 315.0lf;
    p = p * s + 2.0lf / 15.0lf;
    p = p * s - 1.0lf / 3.0lf;
    r = float(d + d * s * p);
  } else {
    r = float(1.0lf - 2.0lf / (double(exp(2.0 * a)) + 1.0lf));
  }
  return x < 0.0 ? -r : r;
}
float rlx_sigmoid_f32(float x) {
  if (isnan(x)) return x;
  float e = rlx_exp_f32(-abs(x));
  return (x >= 0.0 ? 1.0 : e) / (1.0 + e);
}
/* erf as in the C prelude: a + a*P(a^2) below 0.875, 1 - exp(Q(a)) above (a clamped to 6) */
float rlx_x_erf_small_f32(float a) {
  float s = a * a;
  float p = -6.203255034e-04;
  p = p * s + 5.032181274e-03;
  p = p * s + -2.679146267e-02;
  p = p * s + 1.128245518e-01;
  p = p * s + -3.761255145e-01;
  p = p * s + 1.283791512e-01;
  return a + a * p;
}
float rlx_x_erfc_large_f32(float a) {
  float t = min(a, 6.0);
  float q = 1.142501446e-06;
  q = q * t + -3.635958637e-05;
  q = q * t + 5.175793776e-04;
  q = q * t + -4.408638459e-03;
  q = q * t + 2.550010569e-02;
  q = q * t + -1.086115092e-01;
  q = q * t + -6.332198381e-01;
  q = q * t + -1.129510760e+00;
  q = q * t + 1.627859747e-04;
  return rlx_exp_f32(q);
}
float rlx_erf_f32(float x) {
  if (isnan(x)) return x;
  float a = abs(x);
  float r = a < 0.875 ? rlx_x_erf_small_f32(a) : 1.0 - rlx_x_erfc_large_f32(a);
  return x < 0.0 ? -r : r;
}
/* sin and cos as in the C prelude (llvmpipe's built-ins are wrong for large arguments):
   x = k*pi/2 + r in double with pi/2 in three parts, degree-3 polynomials in r^2, the
   quadrant from k = roundEven(x*2/pi) (lavapipe folds the C prelude's 1.5*2^52 shifter
   away); accurate for |x| <= 2^20*pi/2, and from |x| = 2^20 on the C prelude's Payne-Hanek
   reduction in 32-bit words (umulExtended; GLSL has no 32-bit shift by 32) */
const uint rlx_x_two_over_pi[8] = uint[8](0u, 0xa2f9836eu, 0x4e441529u, 0xfc2757d1u,
                                          0xf534ddc0u, 0xdb629599u, 0x3c439041u, 0xfe5163abu);
uint rlx_x_window(uint hi, uint lo, uint sh) { return sh == 0u ? hi : (hi << sh) | (lo >> (32u - sh)); }
double rlx_x_reduce_large_f32(float x, out uint q) {
  uint ax = floatBitsToUint(x) & 0x7fffffffu;
  uint m = (ax & 0x007fffffu) | 0x00800000u;
  int g = clamp(int(ax >> 23) - 120, 0, 134);
  uint j = uint(g) >> 5, sh = uint(g) & 31u;
  uint a2 = rlx_x_window(rlx_x_two_over_pi[j], rlx_x_two_over_pi[j + 1u], sh);
  uint a1 = rlx_x_window(rlx_x_two_over_pi[j + 1u], rlx_x_two_over_pi[j + 2u], sh);
  uint a0 = rlx_x_window(rlx_x_two_over_pi[j + 2u], rlx_x_two_over_pi[j + 3u], sh);
  uint p0h, p0l, p1h, p1l, carry;
  umulExtended(m, a0, p0h, p0l);
  umulExtended(m, a1, p1h, p1l);
  uint mid = uaddCarry(p1l, p0h, carry);
  uint hi = m * a2 + p1h + carry;
  uint k = (hi + 0x20000000u) >> 30;
  int hs = int(hi - (k << 30));
  double f = double(hs) * 9.313225746154785e-10lf + double(mid) * 2.168404344971009e-19lf +
             double(p0l) * 5.048709793414476e-29lf;
  double r = f * 1.5707963267948966lf;
  q = x < 0.0 ? 0u - k : k;
  return x < 0.0 ? -r : r;
}
float rlx_x_sincos_f32(float x, uint quadrant_offset) {
  double xd = double(x);
  double kd = roundEven(xd * 0.6366197723675814lf);
  uint q = uint(int64_t(clamp(kd, -4.0e18lf, 4.0e18lf))) + quadrant_offset;
  double r = xd - kd * 1.5707963267341256lf;
  r = r - kd * 6.077100506303966e-11lf;
  r = r - kd * 2.0222662487959506e-21lf;
  if (abs(x) >= 1048576.0) {  /* sin/cos of inf and NaN are handled by the callers */
    uint ql;
    r = rlx_x_reduce_large_f32(x, ql);
    q = ql + quadrant_offset;
  }
  r = clamp(r, -0.7854lf, 0.7854lf);
  double r2 = r * r;
  double s = 2.71802592273128e-06lf;
  s = s * r2 - 0.00019839302265347588lf;
  s = s * r2 + 0.008333329273858516lf;
  s = s * r2 - 0.1666666664053088lf;
  s = r + (r * r2) * s;
  double c = -2.7204852126022577e-07lf;
  c = c * r2 + 2.4799449186172105e-05lf;
  c = c * r2 - 0.0013888883458223011lf;
  c = c * r2 + 0.04166666661900075lf;
  c = (1.0lf - 0.5lf * r2) + (r2 * r2) * c;
  double v = (q & 1u) != 0u ? c : s;
  return float((q & 2u) != 0u ? -v : v);
}
float rlx_sin_f32(float x) {
  if (isnan(x) || isinf(x)) return NAN;
  return x == 0.0 ? x : rlx_x_sincos_f32(x, 0u);
}
float rlx_cos_f32(float x) {
  if (isnan(x) || isinf(x)) return NAN;
  return rlx_x_sincos_f32(x, 1u);
}
/* C's powf through the double pow below: llvmpipe's exp2/log2 lose too much near overflow */
double rlx_pow_f64(double x, double y);
float rlx_pow_f32(float x, float y) { return float(rlx_pow_f64(double(x), double(y))); }
float rlx_round_f32(float x) { return roundEven(x); }
float rlx_sign_f32(float x) { return x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : x); }

)GLSL";

constexpr const char* kF64Words = R"GLSL(uint rlx_f64_hi(double x) { return unpackDouble2x32(x).y; }
double rlx_f64_from_words(uint lo, uint hi) { return packDouble2x32(uvec2(lo, hi)); }
)GLSL";

constexpr const char* kPreludeAfterF64 = R"GLSL(float rlx_fmod_f32(float a, float b) { return float(rlx_fmod_f64(double(a), double(b))); }
float rlx_fmod_floor_f32(float a, float b) {
  float r = rlx_fmod_f32(a, b);
  return (r != 0.0 && ((r < 0.0) != (b < 0.0))) ? r + b : r;
}
/* ---------------------------------------------------------------- saturating casts */
int32_t rlx_f32_to_i32_sat(float x) {
  if (isnan(x)) return 0;
  if (x >= 2147483648.0) return INT32_MAX;
  if (x <= -2147483648.0) return -INT32_MAX - 1;
  return int(x);
}
int64_t rlx_f32_to_i64_sat(float x) {
  if (isnan(x)) return 0l;
  if (x >= 9223372036854775808.0) return INT64_MAX;
  if (x <= -9223372036854775808.0) return INT64_MIN;
  return int64_t(x);
}
int32_t rlx_f64_to_i32_sat(double x) {
  if (isnan(x)) return 0;
  return int(trunc(clamp(x, -2147483648.0lf, 2147483647.0lf)));
}
int64_t rlx_f64_to_i64_sat(double x) {
  if (isnan(x)) return 0l;
  if (x >= 9223372036854775808.0lf) return INT64_MAX;
  if (x <= -9223372036854775808.0lf) return INT64_MIN;
  return int64_t(x);
}
double rlx_f64_to_range_sat(double x, double lo, double hi) {
  if (isnan(x)) return 0.0lf;
  if (x < lo) return lo;
  if (x > hi) return hi;
  return trunc(x);
}
uint64_t rlx_f64_to_u64_sat(double x) {
  if (isnan(x) || x <= 0.0lf) return 0ul;
  if (x >= 18446744073709551615.0lf) return UINT64_MAX;
  return uint64_t(x);
}

/* ---------------------------------------------------------------- integer helpers */
int64_t rlx_tdiv_i64(int64_t a, int64_t b) {
  if (b == 0l) return 0l;
  if (b == -1l) return -a;
  return a / b;
}
/* GLSL's % on negative operands is undefined: the remainder comes from the quotient */
int64_t rlx_trem_i64(int64_t a, int64_t b) {
  if (b == 0l || b == -1l) return 0l;
  return a - (a / b) * b;
}
int64_t rlx_mod_i64(int64_t a, int64_t b) {
  if (b == 0l || b == -1l) return 0l;
  int64_t r = a - (a / b) * b;
  return (r != 0l && ((r ^ b) < 0l)) ? r + b : r;
}
int64_t rlx_ipow_i64(int64_t base, int64_t e) {
  if (e < 0l) return base == 1l ? 1l : (base == -1l ? ((e & 1l) != 0l ? -1l : 1l) : 0l);
  uint64_t r = 1ul, b = uint64_t(base);
  while (e != 0l) { if ((e & 1l) != 0l) r *= b; b *= b; e >>= 1; }
  return int64_t(r);
}
uint64_t rlx_ipow_u64(uint64_t b, uint64_t e) {
  uint64_t r = 1ul;
  while (e != 0ul) { if ((e & 1ul) != 0ul) r *= b; b *= b; e >>= 1; }
  return r;
}

/* ---------------------------------------------------------------- random numbers */
uint64_t rlx_splitmix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ul;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBul;
  return x ^ (x >> 31);
}
double rlx_random01(uint64_t seed, uint64_t counter) {
  uint64_t h = rlx_splitmix64(seed + (counter + 1ul) * 0x9E3779B97F4A7C15ul);
  return double(h >> 11) * 1.1102230246251565404e-16lf;
}
double rlx_random_uniform(uint64_t seed, uint64_t i, double a, double b) {
  return a + (b - a) * rlx_random01(seed, i);
}
/* cos(2*pi*u) for u in [0, 1) in double: quadrant from round(4u), then Taylor series of
   sin/cos on |r| <= pi/4 to below 1e-17 */
double rlx_x_cos_2pi_f64(double u) {
  double t = 4.0lf * u;
  double q = floor(t + 0.5lf);
  double r = (t - q) * 1.5707963267948966lf;
  double r2 = r * r, c = 1.0lf, s = 1.0lf;
  for (int n = 9; n >= 1; --n) {
    c = 1.0lf - r2 * c / double((2 * n) * (2 * n - 1));
    s = 1.0lf - r2 * s / double((2 * n + 1) * (2 * n));
  }
  s *= r;
  int k = int(q) & 3;
  return k == 0 ? c : (k == 1 ? -s : (k == 2 ? -c : s));
}
double rlx_random_normal(uint64_t seed, uint64_t i, double mean, double std) {
  double u1 = rlx_random01(seed, 2ul * i), u2 = rlx_random01(seed, 2ul * i + 1ul);
  if (u1 < 1.1102230246251565404e-16lf) u1 = 1.1102230246251565404e-16lf;
  return mean + std * sqrt(-2.0lf * rlx_log_f64(u1)) * rlx_x_cos_2pi_f64(u2);
}
)GLSL";

// The f16/bf16 conversions and narrow saturating casts (on OpenGL over int/uint: see kGlHeader).
constexpr const char* kSmallTypes = R"GLSL(
/* ---------------------------------------------------------------- f16 / bf16 (exact) */
float rlx_f16_to_f32(uint16_t h) {
  uint sign = (uint(h) & 0x8000u) << 16;
  uint em = uint(h) & 0x7fffu;
  uint bits;
  if (em >= 0x7c00u) bits = (em << 13) | 0x7f800000u;
  else if (em < 0x0400u) bits = floatBitsToUint(float(em) * 5.9604644775390625e-8);
  else bits = (em << 13) + 0x38000000u;
  return uintBitsToFloat(bits | sign);
}
uint16_t rlx_f32_to_f16(float f) {
  uint x = floatBitsToUint(f);
  uint sign = (x >> 16) & 0x8000u;
  uint a = x & 0x7fffffffu;
  uint h;
  if (a > 0x7f800000u) h = 0x7e00u | ((a >> 13) & 0x03ffu);
  else if (a >= 0x47800000u) h = 0x7c00u;
  else if (a < 0x38800000u) h = floatBitsToUint(uintBitsToFloat(a) + 0.5) - 0x3f000000u;
  else h = (a - 0x38000000u + 0x0fffu + ((a >> 13) & 1u)) >> 13;
  return uint16_t(h | sign);
}
float rlx_bf16_to_f32(uint16_t h) { return uintBitsToFloat(uint(h) << 16); }
uint16_t rlx_f32_to_bf16(float f) {
  uint x = floatBitsToUint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x0040u);
  return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
int8_t rlx_f32_to_i8_sat(float x) { return isnan(x) ? int8_t(0) : int8_t(int(clamp(x, -128.0, 127.0))); }
uint8_t rlx_f32_to_u8_sat(float x) { return isnan(x) ? uint8_t(0) : uint8_t(int(clamp(x, 0.0, 255.0))); }
int8_t rlx_f64_to_i8_sat(double x) { return isnan(x) ? int8_t(0) : int8_t(int(clamp(x, -128.0lf, 127.0lf))); }
uint8_t rlx_f64_to_u8_sat(double x) { return isnan(x) ? uint8_t(0) : uint8_t(int(clamp(x, 0.0lf, 255.0lf))); }
)GLSL";

}  // namespace

Claim glsl_supports(const NodeDesc& n, const GlslCaps& caps) {
  auto check = [&](const TensorType& t) -> std::string {
    switch (t.dtype) {
      case DType::f64:
        if (!caps.fp64) return "this device has no fp64 (shaderFloat64)";
        if (const UnaryMathOp* row = unary_math(n.op); row && !row->glsl_f64)
          return cat("GLSL has no double-precision ", op_name(n.op),
                     " (its transcendental built-ins are float-only; rlx emulates f64 exp, log, tanh, sigmoid, pow and normal random numbers only)");
        return "";
      case DType::i8: case DType::u8: case DType::boolean: return caps.int8 ? "" : caps.why_no_int8;
      case DType::f16: case DType::bf16: case DType::i16: case DType::u16: return caps.int16 ? "" : caps.why_no_int16;
      default: return "";
    }
  };
  for (const TensorType& t : n.inputs)
    if (auto why = check(t); !why.empty()) return Claim::no(why);
  for (const TensorType& t : n.outputs)
    if (auto why = check(t); !why.empty()) return Claim::no(why);
  Claim c = c_renderer_supports(n);
  if (c.ok) c.text = "generated GLSL";
  return c;
}

std::string glsl_prelude(CTarget target) {
  const std::string body = std::string(kPreludeBody) + kF64Words + shader_f64_math(target) + kPreludeAfterF64 + kSmallTypes;
  return (target == CTarget::glsl_gl ? kGlHeader : kVulkanHeader) + body;
}

std::string glsl_native_header(CTarget target, int params) {
  const bool gl = target == CTarget::glsl_gl;
  std::string s = std::string("#version 450\n") +
                  (gl ? "#extension GL_ARB_gpu_shader_int64 : require\n"
                      : "#extension GL_EXT_shader_explicit_arithmetic_types : require\n");
  if (gl) {
    for (int i = 0; i < params; ++i)
      s += "layout(location = " + std::to_string(i) + ") uniform int64_t rlx_p" + std::to_string(i) + ";\n";
    return s + "#define P(i) rlx_p##i\n";
  }
  if (params > 0) s += "layout(push_constant) uniform RlxParams { int64_t v[" + std::to_string(params) + "]; } rlx_p;\n";
  return s + "#define P(i) rlx_p.v[i]\n";
}

}  // namespace rlx::codegen
