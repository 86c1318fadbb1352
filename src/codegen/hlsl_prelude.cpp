#include "hlsl_prelude.h"

namespace rlx::codegen {
namespace {

// The helpers follow the WGSL prelude's (wgsl_prelude.cpp), which solve the same problem: one
// 32-bit width, f32 arithmetic with C's special values, no trust in the built-ins' accuracy.
// HLSL has a preprocessor, so the renderer's type names are macros here.
constexpr const char* kPrelude = R"HLSL(/* ---- rlx HLSL prelude (src/codegen/hlsl_prelude.h) ---- */
#define int8_t int
#define uint8_t uint
#define int16_t int
#define uint16_t uint
#define int32_t int
#define uint32_t uint
/* index arithmetic: 32-bit (the runtime refuses sizes past it) */
#define int64_t int
#define uint64_t uint
/* only in the saturating casts' helper below (f64 tensors are refused) */
#define double float
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
int rlx_extract_i(int v, int offset, int bits) { return (v << uint(32 - offset - bits)) >> uint(32 - bits); }
uint rlx_extract_u(uint v, int offset, int bits) { return (v >> uint(offset)) & (bits == 32 ? 0xffffffffu : (1u << uint(bits)) - 1u); }

/* ---------------------------------------------------------------- f32 math */
/* exp: x = k ln2 + r with ln2 in two parts (k times the first is exact), e^r by its Taylor
   series through r^7, 2^k applied in two exact steps */
float rlx_exp_f32(float x) {
  if (isnan(x)) return x;
  if (x > 88.7228394) return INFINITY;
  if (x < -103.972084) return 0.0;
  float k = round(x * 1.44269504088896341);
  float r = (x - k * 0.693145751953125) - k * 1.428606765330187045e-06;
  float p = 1.0 + r * (1.0 + r * (0.5 + r * (0.16666666666666666 + r * (0.041666666666666664 +
            r * (0.008333333333333333 + r * (0.001388888888888889 + r * 0.0001984126984126984))))));
  int k1 = int(k) / 2;
  int k2 = int(k) - k1;
  return p * asfloat(uint(k1 + 127) << 23u) * asfloat(uint(k2 + 127) << 23u);
}
/* log: x = m 2^e with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh((m-1)/(m+1)) by its series */
float rlx_log_f32(float x) {
  if (isnan(x) || x == INFINITY) return x;
  if (x < 0.0) return NAN;
  if (x == 0.0) return -INFINITY;
  float v = x;
  int e = 0;
  if (v < 1.17549435e-38) {  /* subnormal: scale into the normal range first */
    v = v * 16777216.0;
    e = -24;
  }
  uint bits = asuint(v);
  e = e + int((bits >> 23u) & 0xffu) - 127;
  float m = asfloat((bits & 0x007fffffu) | 0x3f800000u);
  if (m > 1.41421356) {
    m = m * 0.5;
    e = e + 1;
  }
  float s = (m - 1.0) / (m + 1.0);
  float s2 = s * s;
  float t = s2 * (0.3333333333333333 + s2 * (0.2 + s2 * (0.14285714285714285 + s2 * (0.1111111111111111 + s2 * 0.09090909090909091))));
  float lm = 2.0 * s + 2.0 * s * t;
  return float(e) * 0.693145751953125 + (lm + float(e) * 1.428606765330187045e-06);
}
float rlx_sqrt_f32(float x) {
  if (x < 0.0) return NAN;
  return sqrt(x);
}
float rlx_rsqrt_f32(float x) {
  if (x < 0.0) return NAN;
  if (x == 0.0) return (asuint(x) >> 31u) != 0u ? -INFINITY : INFINITY;
  if (isinf(x)) return 0.0;
  return 1.0 / sqrt(x);
}
float rlx_tanh_f32(float x) {
  if (isnan(x)) return x;
  float a = min(abs(x), 10.0);
  float r;
  if (a < 0.5) {
    /* odd Taylor series through a^17 */
    float s = a * a;
    float p = 6404582.0 / 10854718875.0;
    p = p * s - 929569.0 / 638512875.0;
    p = p * s + 21844.0 / 6081075.0;
    p = p * s - 1382.0 / 155925.0;
    p = p * s + 62.0 / 2835.0;
    p = p * s - 17.0 / 315.0;
    p = p * s + 2.0 / 15.0;
    p = p * s - 1.0 / 3.0;
    r = a + a * s * p;
  } else {
    r = 1.0 - 2.0 / (rlx_exp_f32(2.0 * a) + 1.0);
  }
  return x < 0.0 ? -r : r;
}
float rlx_sigmoid_f32(float x) {
  if (isnan(x)) return x;
  float e = rlx_exp_f32(-abs(x));
  return (x >= 0.0 ? 1.0 : e) / (1.0 + e);
}
/* erf as in the C prelude: a + a*P(a^2) below 0.875, 1 - exp(Q(a)) above (a clamped to 6) */
float rlx_erf_f32(float x) {
  if (isnan(x)) return x;
  float a = abs(x);
  float r;
  if (a < 0.875) {
    float s = a * a;
    float p = -6.203255034e-04;
    p = p * s + 5.032181274e-03;
    p = p * s + -2.679146267e-02;
    p = p * s + 1.128245518e-01;
    p = p * s + -3.761255145e-01;
    p = p * s + 1.283791512e-01;
    r = a + a * p;
  } else {
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
    r = 1.0 - rlx_exp_f32(q);
  }
  return x < 0.0 ? -r : r;
}
/* sin and cos: x = k*pi/2 + r with pi/2 in three parts (k times the first is exact while
   |k| < 2^16), and from |x| = 2^16 on the C prelude's Payne-Hanek reduction in 32-bit words;
   then the C prelude's polynomials in r^2 */
static const uint rlx_x_two_over_pi[8] = {0u, 0xa2f9836eu, 0x4e441529u, 0xfc2757d1u,
                                          0xf534ddc0u, 0xdb629599u, 0x3c439041u, 0xfe5163abu};
uint rlx_x_window(uint hi, uint lo, uint sh) { return sh == 0u ? hi : (hi << sh) | (lo >> (32u - sh)); }
uint2 rlx_x_mul32(uint a, uint b) {  /* (high, low) words of a * b */
  uint ll = (a & 0xffffu) * (b & 0xffffu);
  uint lh = (a & 0xffffu) * (b >> 16u);
  uint hl = (a >> 16u) * (b & 0xffffu);
  uint hh = (a >> 16u) * (b >> 16u);
  uint mid = (ll >> 16u) + (lh & 0xffffu) + (hl & 0xffffu);
  return uint2(hh + (lh >> 16u) + (hl >> 16u) + (mid >> 16u), (mid << 16u) | (ll & 0xffffu));
}
/* x = (k + f) pi/2 for |x| >= 2^16: returns r = f pi/2, sets the quadrant k */
float rlx_x_reduce_large_f32(float x, out uint q) {
  uint ax = asuint(x) & 0x7fffffffu;
  uint m = (ax & 0x007fffffu) | 0x00800000u;
  int g = clamp(int(ax >> 23u) - 120, 0, 134);
  uint j = uint(g) >> 5u;
  uint sh = uint(g) & 31u;
  uint a2 = rlx_x_window(rlx_x_two_over_pi[j], rlx_x_two_over_pi[j + 1u], sh);
  uint a1 = rlx_x_window(rlx_x_two_over_pi[j + 1u], rlx_x_two_over_pi[j + 2u], sh);
  uint a0 = rlx_x_window(rlx_x_two_over_pi[j + 2u], rlx_x_two_over_pi[j + 3u], sh);
  uint2 p0 = rlx_x_mul32(m, a0);
  uint2 p1 = rlx_x_mul32(m, a1);
  uint mid = p1.y + p0.x;
  uint hi = m * a2 + p1.x + (mid < p1.y ? 1u : 0u);
  uint k = (hi + 0x20000000u) >> 30u;
  int hs = int(hi - (k << 30u));
  float f = float(hs) * 9.313225746154785e-10 + float(mid) * 2.168404344971009e-19;
  float r = f * 1.5707963267948966;
  q = x < 0.0 ? 0u - k : k;
  return x < 0.0 ? -r : r;
}
float rlx_x_sincos_f32(float x, uint quadrant_offset) {
  float k = round(x * 0.63661977236758134);
  uint q = uint(int(k)) + quadrant_offset;
  float r = x - k * 1.5703125;
  r = r - k * 4.837512969970703125e-4;
  r = r - k * 7.549789954891882e-8;
  if (abs(x) >= 65536.0) {  /* inf and NaN are handled by the callers */
    uint ql;
    r = rlx_x_reduce_large_f32(x, ql);
    q = ql + quadrant_offset;
  }
  r = clamp(r, -0.7854, 0.7854);
  float r2 = r * r;
  float s = 2.71802592273128e-06;
  s = s * r2 - 0.00019839302265347588;
  s = s * r2 + 0.008333329273858516;
  s = s * r2 - 0.1666666664053088;
  s = r + (r * r2) * s;
  float c = -2.7204852126022577e-07;
  c = c * r2 + 2.4799449186172105e-05;
  c = c * r2 - 0.0013888883458223011;
  c = c * r2 + 0.04166666661900075;
  c = (1.0 - 0.5 * r2) + (r2 * r2) * c;
  float v = (q & 1u) != 0u ? c : s;
  return (q & 2u) != 0u ? -v : v;
}
float rlx_sin_f32(float x) {
  if (isnan(x) || isinf(x)) return NAN;
  if (x == 0.0) return x;
  return rlx_x_sincos_f32(x, 0u);
}
float rlx_cos_f32(float x) {
  if (isnan(x) || isinf(x)) return NAN;
  return rlx_x_sincos_f32(x, 1u);
}
/* C's powf: special cases by the C standard, the rest as exp(y log|x|) through the prelude's
   exp and log (llvmpipe's exp2 and log2 err by up to 7% near 1 and near overflow); the
   relative error is about |y log|x|| * 2^-23, within the 4e-6 conformance bound below
   results of e^32 */
float rlx_pow_f32(float x, float y) {
  if (y == 0.0 || x == 1.0) return 1.0;
  if (isnan(x) || isnan(y)) return NAN;
  float ay = abs(y);
  bool integer = floor(y) == y;
  bool odd = integer && ay < 16777216.0 && (int(ay) & 1) == 1;
  if (isinf(y)) {
    if (abs(x) == 1.0) return 1.0;
    if ((abs(x) < 1.0) == (y > 0.0)) return 0.0;
    return INFINITY;
  }
  if (x == 0.0) {
    if (y < 0.0) return odd && (asuint(x) >> 31u) != 0u ? -INFINITY : INFINITY;
    return odd ? x : 0.0;
  }
  if (isinf(x)) {
    float m0 = y > 0.0 ? INFINITY : 0.0;
    return x < 0.0 && odd ? -m0 : m0;
  }
  if (x < 0.0 && !integer) return NAN;
  float m = rlx_exp_f32(y * rlx_log_f32(abs(x)));
  return x < 0.0 && odd ? -m : m;
}
float rlx_round_f32(float x) { return round(x); }  /* HLSL's round is to nearest even */
float rlx_sign_f32(float x) { return x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : x); }
/* C's fmodf, exactly: subtract b 2^k for k from the exponent difference down to 0 (each
   subtraction is exact); the result takes a's sign */
int rlx_frexp_exp_f32(float x) {
  float v = x;
  int bias = 126;
  if (v < 1.17549435e-38) {
    v = v * 16777216.0;
    bias = bias + 24;
  }
  return int((asuint(v) >> 23u) & 0xffu) - bias;
}
float rlx_pow2_f32(int n) { return asfloat(uint(n + 127) << 23u); }
float fmodf(float a, float b) {
  if (isnan(a) || isnan(b) || isinf(a) || b == 0.0) return NAN;
  if (isinf(b)) return a;
  float r = abs(a);
  float d = abs(b);
  if (r >= d) {
    int ea = rlx_frexp_exp_f32(r);
    int eb = rlx_frexp_exp_f32(d);
    float s = d;
    int k = ea - eb;
    for (; k > 100; k = k - 100) s = s * rlx_pow2_f32(100);
    s = s * rlx_pow2_f32(k);
    for (int i = ea - eb; i >= 0; --i) {
      if (r >= s) r = r - s;
      s = s * 0.5;
    }
  }
  return a < 0.0 || (a == 0.0 && (asuint(a) >> 31u) != 0u) ? -r : r;
}
float rlx_fmod_floor_f32(float a, float b) {
  float r = fmodf(a, b);
  return r != 0.0 && ((r < 0.0) != (b < 0.0)) ? r + b : r;
}

/* ---------------------------------------------------------------- saturating casts */
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
float rlx_f64_to_range_sat(float x, float lo, float hi) {
  if (isnan(x)) return 0.0;
  if (x < lo) return lo;
  if (x > hi) return hi;
  return trunc(x);
}
int rlx_f32_to_i8_sat(float x) { return isnan(x) ? 0 : int(clamp(x, -128.0, 127.0)); }
uint rlx_f32_to_u8_sat(float x) { return isnan(x) ? 0u : uint(clamp(x, 0.0, 255.0)); }

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
int rlx_u32_to_i64c(uint x) { if (x > 2147483647u) rlx_range_error(); return int(x); }
uint rlx_i32_to_u64c(int x) { if (x < 0) rlx_range_error(); return uint(x); }
)HLSL";

}  // namespace

std::string_view hlsl_prelude() { return kPrelude; }

std::string_view hlsl_range_check_helpers() { return kRangeChecks; }

std::string hlsl_scalar_block(int count) {
  // int2 members (low, high words) pack 8 bytes apart under both D3D12's constant buffer rules
  // and Vulkan's push constant layout, so one struct serves both
  std::string s = "struct RlxScalars {";
  for (int i = 0; i < count; ++i) s += " int2 p" + std::to_string(i) + ";";
  s += " };\n[[vk::push_constant]] ConstantBuffer<RlxScalars> rlx_scalars;\n";
  return s;
}

Claim hlsl_supports(const NodeDesc& n) {
  auto f64 = [](const TensorType& t) { return t.dtype == DType::f64; };
  for (const TensorType& t : n.inputs)
    if (f64(t)) return Claim::no("rlx's HLSL has no 64-bit floats (D3D12's doubles are optional and have no transcendentals)");
  for (const TensorType& t : n.outputs)
    if (f64(t)) return Claim::no("rlx's HLSL has no 64-bit floats (D3D12's doubles are optional and have no transcendentals)");
  if (n.op == Op::Random)
    return Claim::no("rlx's counter-based random numbers need 64-bit integers, which rlx's HLSL computes in 32 bits");
  Claim c = c_renderer_supports(n);
  if (c.ok) c.text = "generated HLSL";
  return c;
}

}  // namespace rlx::codegen
