#include "hlsl_prelude.h"

#include "rlx/unary_math.h"
#include "shader_math.h"

namespace rlx::codegen {
namespace {

// The helpers follow the WGSL prelude's (wgsl_prelude.cpp), which solve the same problem: one
// 32-bit width, f32 arithmetic with C's special values, no trust in the built-ins' accuracy.
// HLSL has a preprocessor, so the renderer's type names are macros here.
constexpr const char* kPreludeHead = R"HLSL(/* ---- rlx HLSL prelude (src/codegen/hlsl_prelude.h) ---- */
#define int8_t int
#define uint8_t uint
#define int16_t int
#define uint16_t uint
#define int32_t int
#define uint32_t uint
/* index arithmetic: 32-bit (the runtime refuses sizes past it) */
#define int64_t int
#define uint64_t uint
#define INT64_MIN (-2147483647 - 1)
#define INT64_MAX 2147483647
#define UINT64_MAX 4294967295u
#define INT32_MAX 2147483647
#define NAN asfloat(0x7fc00000u)
#define INFINITY asfloat(0x7f800000u)
#define fabsf abs
#define floorf floor
#define ceilf ceil

int rlx_i32_to_i64(int x) { return x; }
/* ---------------------------------------------------------------- double built-ins
   HLSL's intrinsics take doubles in name only: glslang converts a double argument of abs,
   floor, trunc, min, clamp, sqrt or isinf to float. These compute in double arithmetic
   (isnan of the float conversion is right: no finite double converts to NaN). */
#define fabs rlx_abs_f64
#define fmod rlx_fmod_f64
double rlx_abs_f64(double x) { return x <= 0.0L ? 0.0L - x : x; }
bool rlx_isinf_f64(double x) { return x == double(INFINITY) || x == -double(INFINITY); }
double rlx_min_f64(double a, double b) { return a < b ? a : b; }
/* below 2^52 adding 2^52 rounds to an integer, half to even; from there on every double is one
   (`precise`: Mesa would fold (a + c) - c into a) */
double rlx_rint_f64(double x) {
  double a = rlx_abs_f64(x);
  if (!(a < 4503599627370496.0L)) return x;
  precise double r = (a + 4503599627370496.0L) - 4503599627370496.0L;
  return x < 0.0L || (x == 0.0L && 1.0L / x < 0.0L) ? -r : r;
}
double rlx_trunc_f64(double x) {
  double a = rlx_abs_f64(x);
  if (!(a < 4503599627370496.0L) || x == 0.0L) return x;
  precise double r = (a + 4503599627370496.0L) - 4503599627370496.0L;
  if (r > a) r -= 1.0L;
  return x < 0.0L ? -r : r;
}
double rlx_floor_f64(double x) { double t = rlx_trunc_f64(x); return t > x ? t - 1.0L : t; }
double rlx_ceil_f64(double x) { double t = rlx_trunc_f64(x); return t < x ? t + 1.0L : t; }
double rlx_fract_f64(double x) { return x - rlx_floor_f64(x); }
/* sqrt of x >= 0 (and of NaN, inf: themselves): scaled by powers of 4 into float's range, float's
   sqrt as the start, two Newton steps in double (within about 1 ulp) */
double rlx_sqrt_nonneg_f64(double x) {
  if (!(x > 0.0L) || x == double(INFINITY)) return x;
  double s = x, k = 1.0L;
  for (; s >= 18446744073709551616.0L; k *= 4294967296.0L) s *= 5.421010862427522170037264004349708557128906e-20L;
  for (; s < 5.421010862427522170037264004349708557128906e-20L; k *= 2.3283064365386962890625e-10L) s *= 18446744073709551616.0L;
  double y = double(sqrt(float(s)));
  y = 0.5L * (y + s / y);
  y = 0.5L * (y + s / y);
  return y * k;
}
/* The sign and exponent bits of a double's high word (its 20 mantissa bits left 0: the f64
   helpers read only those), computed: glslang's HLSL has asdouble but not asuint of a double. */
uint rlx_f64_hi(double x) {
  uint sign = x < 0.0L || (x == 0.0L && 1.0L / x < 0.0L) ? 0x80000000u : 0u;
  double a = rlx_abs_f64(x);
  if (isnan(x)) return 0x7ff80000u;
  if (rlx_isinf_f64(a)) return sign | 0x7ff00000u;
  if (a == 0.0L) return sign;
  int e = 0;  /* a 2^-e in float's normal range, by exact powers of two */
  for (; a >= 18446744073709551616.0L; e += 64) a *= 5.421010862427522170037264004349708557128906e-20L;
  for (; a < 5.421010862427522170037264004349708557128906e-20L; e -= 64) a *= 18446744073709551616.0L;
  int fe = int((asuint(float(a)) >> 23u) & 0xffu) - 127;
  if (double(asfloat(uint(fe + 127) << 23u)) > a) fe -= 1;  /* float(a) rounded up to a power of two */
  return sign | (uint(max(e + fe + 1023, 0)) << 20u);
}
double rlx_f64_from_words(uint lo, uint hi) { return asdouble(lo, hi); }
int rlx_extract_i(int v, int offset, int bits) { return (v << uint(32 - offset - bits)) >> uint(32 - bits); }
uint rlx_extract_u(uint v, int offset, int bits) { return (v >> uint(offset)) & (bits == 32 ? 0xffffffffu : (1u << uint(bits)) - 1u); }

)HLSL";

constexpr const char* kPreludeTail = R"HLSL(/* ---------------------------------------------------------------- saturating casts */
int rlx_f32_to_i32_sat(float x) {
  if (isnan(x)) return 0;
  if (x >= 2147483648.0) return INT32_MAX;
  if (x <= -2147483648.0) return -INT32_MAX - 1;
  return int(x);
}
float rlx_u32_to_f32(uint x) { return float(x >> 16u) * 65536.0 + float(x & 0xffffu); }
float rlx_i32_to_f32(int x) { return float(x >> 16) * 65536.0 + float(x & 0xffff); }
uint rlx_f32_to_u32_sat(float x) {
  if (isnan(x) || x <= 0.0) return 0u;
  if (x >= 4294967296.0) return 4294967295u;
  return uint(x);
}
double rlx_f64_to_range_sat(double x, double lo, double hi) {
  if (isnan(x)) return 0.0L;
  if (x < lo) return lo;
  if (x > hi) return hi;
  return rlx_trunc_f64(x);
}
int rlx_f32_to_i8_sat(float x) { return isnan(x) ? 0 : int(clamp(x, -128.0, 127.0)); }
uint rlx_f32_to_u8_sat(float x) { return isnan(x) ? 0u : uint(clamp(x, 0.0, 255.0)); }
int rlx_f64_to_i32_sat(double x) { return int(rlx_f64_to_range_sat(x, -2147483648.0L, 2147483647.0L)); }
int rlx_f64_to_i8_sat(double x) { return int(rlx_f64_to_range_sat(x, -128.0L, 127.0L)); }
uint rlx_f64_to_u8_sat(double x) { return uint(rlx_f64_to_range_sat(x, 0.0L, 255.0L)); }

/* ---------------------------------------------------------------- integer helpers (32-bit) */
int rlx_tdiv_i64(int a, int b) {
  if (b == 0) return 0;
  if (b == -1) return int(0u - uint(a));
  return a / b;
}
int rlx_trem_i64(int a, int b) {
  if (b == 0 || b == -1) return 0;
  return a - (a / b) * b;
}
int rlx_mod_i64(int a, int b) {
  if (b == 0 || b == -1) return 0;
  int r = a - (a / b) * b;
  return r != 0 && ((r ^ b) < 0) ? r + b : r;
}
int rlx_ipow_i64(int base, int e_in) {
  if (e_in < 0) return base == 1 ? 1 : (base == -1 ? ((e_in & 1) != 0 ? -1 : 1) : 0);
  uint r = 1u;
  uint b = uint(base);
  int e = e_in;
  while (e != 0) {
    if ((e & 1) != 0) r = r * b;
    b = b * b;
    e = e >> 1u;
  }
  return int(r);
}
uint rlx_ipow_u64(uint b_in, uint e_in) {
  uint r = 1u;
  uint b = b_in;
  uint e = e_in;
  while (e != 0u) {
    if ((e & 1u) != 0u) r = r * b;
    b = b * b;
    e = e >> 1u;
  }
  return r;
}

/* ---------------------------------------------------------------- f16 / bf16 (exact) */
float rlx_f16_to_f32(uint h) {
  uint sign = (h & 0x8000u) << 16u;
  uint em = h & 0x7fffu;
  uint bits;
  if (em >= 0x7c00u) bits = (em << 13u) | 0x7f800000u;
  else if (em < 0x0400u) bits = asuint(float(em) * 5.9604644775390625e-8);
  else bits = (em << 13u) + 0x38000000u;
  return asfloat(bits | sign);
}
uint rlx_f32_to_f16(float f) {
  uint x = asuint(f);
  uint sign = (x >> 16u) & 0x8000u;
  uint a = x & 0x7fffffffu;
  uint h;
  if (a > 0x7f800000u) h = 0x7e00u | ((a >> 13u) & 0x03ffu);
  else if (a >= 0x47800000u) h = 0x7c00u;
  else if (a < 0x38800000u) h = asuint(asfloat(a) + 0.5) - 0x3f000000u;
  else h = (a - 0x38000000u + 0x0fffu + ((a >> 13u) & 1u)) >> 13u;
  return h | sign;
}
float rlx_bf16_to_f32(uint h) { return asfloat(h << 16u); }
uint rlx_f32_to_bf16(float f) {
  uint x = asuint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16u) | 0x0040u;
  return (x + 0x7fffu + ((x >> 16u) & 1u)) >> 16u;
}
)HLSL";

// After the kernel's `rlx_check` buffer: 64-bit integers as 32-bit values, every narrowing and
// every operation whose exact (64-bit) result does not fit setting the word.
constexpr const char* kRangeChecks = R"HLSL(void rlx_range_error() { InterlockedOr(rlx_check[0], 1u); }
int rlx_const_out_of_range_i64() { rlx_range_error(); return 0; }
uint rlx_const_out_of_range_u64() { rlx_range_error(); return 0u; }
int rlx_narrow_i64(int2 v) { if (v.y != (v.x >> 31u)) rlx_range_error(); return v.x; }
uint rlx_narrow_u64(uint2 v) { if (v.y != 0u) rlx_range_error(); return v.x; }
int2 rlx_widen_i64(int v) { return int2(v, v >> 31u); }
uint2 rlx_widen_u64(uint v) { return uint2(v, 0u); }
int rlx_add_i64(int a, int b) { int r = int(uint(a) + uint(b)); if (((a ^ r) & (b ^ r)) < 0) rlx_range_error(); return r; }
int rlx_sub_i64(int a, int b) { int r = int(uint(a) - uint(b)); if (((a ^ b) & (a ^ r)) < 0) rlx_range_error(); return r; }
int rlx_mul_i64(int a, int b) {
  int r = int(uint(a) * uint(b));
  if (a != 0 && ((a == -1 && b == INT64_MIN) || r / a != b)) rlx_range_error();
  return r;
}
uint rlx_add_u64(uint a, uint b) { uint r = a + b; if (r < a) rlx_range_error(); return r; }
uint rlx_sub_u64(uint a, uint b) { if (b > a) rlx_range_error(); return a - b; }
uint rlx_mul_u64(uint a, uint b) { uint r = a * b; if (a != 0u && r / a != b) rlx_range_error(); return r; }
int rlx_div_i64c(int a, int b) { if (a == INT64_MIN && b == -1) rlx_range_error(); return rlx_tdiv_i64(a, b); }
/* |base| >= 2 passes 32 bits within 32 steps, which rlx_mul_* flags */
int rlx_ipow_i64c(int base, int e) {
  if (e < 0 || base == 0 || base == 1) return rlx_ipow_i64(base, e);
  if (base == -1) return (e & 1) == 0 ? 1 : -1;
  int r = 1;
  for (int i = 0; i < min(e, 32); ++i) r = rlx_mul_i64(r, base);
  return r;
}
uint rlx_ipow_u64c(uint base, uint e) {
  if (base <= 1u) return rlx_ipow_u64(base, e);
  uint r = 1u;
  for (uint i = 0u; i < min(e, 33u); ++i) r = rlx_mul_u64(r, base);
  return r;
}
int rlx_f32_to_i64c(float x) {
  if (!isnan(x) && (x >= 2147483648.0 || x < -2147483648.0)) rlx_range_error();
  return rlx_f32_to_i32_sat(x);
}
uint rlx_f32_to_u64c(float x) {
  if (!isnan(x) && x >= 4294967296.0) rlx_range_error();
  return rlx_f32_to_u32_sat(x);
}
int rlx_f64_to_i64c(double x) {
  if (!isnan(x) && (x >= 2147483648.0L || x < -2147483648.0L)) rlx_range_error();
  return rlx_f64_to_i32_sat(x);
}
uint rlx_f64_to_u64c(double x) {
  if (!isnan(x) && x >= 4294967296.0L) rlx_range_error();
  return uint(rlx_f64_to_range_sat(x, 0.0L, 4294967295.0L));
}
int rlx_u32_to_i64c(uint x) { if (x > 2147483647u) rlx_range_error(); return int(x); }
uint rlx_i32_to_u64c(int x) { if (x < 0) rlx_range_error(); return uint(x); }
)HLSL";

}  // namespace

std::string_view hlsl_prelude() {
  static const std::string text = kPreludeHead + shader_f32_math(CTarget::hlsl) + shader_f64_math(CTarget::hlsl) + kPreludeTail;
  return text;
}

std::string_view hlsl_range_check_helpers() { return kRangeChecks; }

std::string hlsl_scalar_block(int count) {
  // int2 members (low, high words) pack 8 bytes apart under both D3D12's constant buffer rules
  // and Vulkan's push constant layout, so one struct serves both
  std::string s = "struct RlxScalars {";
  for (int i = 0; i < count; ++i) s += " int2 p" + std::to_string(i) + ";";
  s += " };\n[[vk::push_constant]] ConstantBuffer<RlxScalars> rlx_scalars;\n";
  return s;
}

Claim hlsl_supports(const NodeDesc& n, bool fp64) {
  // f64 as in GLSL: D3D12's doubles have arithmetic and no transcendentals, so the prelude
  // computes the ones GLSL's does (shader_f64_math) and the others are refused
  const UnaryMathOp* row = unary_math(n.op);
  return c_renderer_supports_32_bit(
      n, "HLSL",
      !fp64 ? std::string("this device has no doubles (Vulkan's shaderFloat64, D3D12's DoublePrecisionFloatShaderOps)")
      : row && !row->glsl_f64 ? cat("HLSL has no double-precision ", op_name(n.op),
                                  " (its transcendental built-ins are float-only; rlx emulates f64 exp, log, tanh, sigmoid and pow)")
                            : std::string(),
      "rlx's counter-based random numbers need 64-bit integers, which rlx's HLSL computes in 32 bits");
}

}  // namespace rlx::codegen
