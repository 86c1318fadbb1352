#include "msl_prelude.h"

namespace rlx::codegen {
namespace {

// The f32 helpers follow the HLSL prelude's (hlsl_prelude.cpp): C's special values in f32
// arithmetic, independent of the driver's transcendental built-ins, every literal a float (MSL
// has no double; a C++ double literal would make the shim compute in double where Metal does
// not). Integers are 64-bit and 8/16-bit types native, as in C.
constexpr const char* kPrelude = R"MSL(/* ---- rlx MSL prelude (src/codegen/msl_prelude.h) ---- */
#include <metal_stdlib>
using namespace metal;
/* MSL has no double: the renderer's C paths through double (saturating casts) compute in float */
#define double float
#ifndef INT32_MAX
#define INT32_MAX 2147483647
#endif
#ifndef INT64_MAX
#define INT64_MAX 9223372036854775807L
#endif
#ifndef INT64_MIN
#define INT64_MIN (-INT64_MAX - 1L)
#endif
#ifndef UINT64_MAX
#define UINT64_MAX 18446744073709551615UL
#endif
#define fabsf fabs
#define floorf floor
#define ceilf ceil

/* ---------------------------------------------------------------- f32 math */
/* exp: x = k ln2 + r with ln2 in two parts (k times the first is exact), e^r by its Taylor
   series through r^7, 2^k applied in two exact steps */
static inline float rlx_exp_f32(float x) {
  if (isnan(x)) return x;
  if (x > 88.7228394f) return INFINITY;
  if (x < -103.972084f) return 0.0f;
  float k = rint(x * 1.44269504088896341f);
  float r = (x - k * 0.693145751953125f) - k * 1.428606765330187045e-06f;
  float p = 1.0f + r * (1.0f + r * (0.5f + r * (0.16666666666666666f + r * (0.041666666666666664f +
            r * (0.008333333333333333f + r * (0.001388888888888889f + r * 0.0001984126984126984f))))));
  int k1 = int(k) / 2;
  int k2 = int(k) - k1;
  return p * as_type<float>(uint(k1 + 127) << 23u) * as_type<float>(uint(k2 + 127) << 23u);
}
/* log: x = m 2^e with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh((m-1)/(m+1)) by its series */
static inline float rlx_log_f32(float x) {
  if (isnan(x) || x == INFINITY) return x;
  if (x < 0.0f) return NAN;
  if (x == 0.0f) return -INFINITY;
  float v = x;
  int e = 0;
  if (v < 1.17549435e-38f) {  /* subnormal: scale into the normal range first */
    v = v * 16777216.0f;
    e = -24;
  }
  uint bits = as_type<uint>(v);
  e = e + int((bits >> 23u) & 0xffu) - 127;
  float m = as_type<float>((bits & 0x007fffffu) | 0x3f800000u);
  if (m > 1.41421356f) {
    m = m * 0.5f;
    e = e + 1;
  }
  float s = (m - 1.0f) / (m + 1.0f);
  float s2 = s * s;
  float t = s2 * (0.3333333333333333f + s2 * (0.2f + s2 * (0.14285714285714285f + s2 * (0.1111111111111111f + s2 * 0.09090909090909091f))));
  float lm = 2.0f * s + 2.0f * s * t;
  return float(e) * 0.693145751953125f + (lm + float(e) * 1.428606765330187045e-06f);
}
static inline float rlx_sqrt_f32(float x) {
  if (x < 0.0f) return NAN;
  return sqrt(x);
}
static inline float rlx_rsqrt_f32(float x) {
  if (x < 0.0f) return NAN;
  if (x == 0.0f) return (as_type<uint>(x) >> 31u) != 0u ? -INFINITY : INFINITY;
  if (isinf(x)) return 0.0f;
  return 1.0f / sqrt(x);
}
static inline float rlx_tanh_f32(float x) {
  if (isnan(x)) return x;
  float a = min(abs(x), 10.0f);
  float r;
  if (a < 0.5f) {
    /* odd Taylor series through a^17 */
    float s = a * a;
    float p = 6404582.0f / 10854718875.0f;
    p = p * s - 929569.0f / 638512875.0f;
    p = p * s + 21844.0f / 6081075.0f;
    p = p * s - 1382.0f / 155925.0f;
    p = p * s + 62.0f / 2835.0f;
    p = p * s - 17.0f / 315.0f;
    p = p * s + 2.0f / 15.0f;
    p = p * s - 1.0f / 3.0f;
    r = a + a * s * p;
  } else {
    r = 1.0f - 2.0f / (rlx_exp_f32(2.0f * a) + 1.0f);
  }
  return x < 0.0f ? -r : r;
}
static inline float rlx_sigmoid_f32(float x) {
  if (isnan(x)) return x;
  float e = rlx_exp_f32(-abs(x));
  return (x >= 0.0f ? 1.0f : e) / (1.0f + e);
}
/* erf as in the C prelude: a + a*P(a^2) below 0.875f, 1 - exp(Q(a)) above (a clamped to 6) */
static inline float rlx_erf_f32(float x) {
  if (isnan(x)) return x;
  float a = abs(x);
  float r;
  if (a < 0.875f) {
    float s = a * a;
    float p = -6.203255034e-04f;
    p = p * s + 5.032181274e-03f;
    p = p * s + -2.679146267e-02f;
    p = p * s + 1.128245518e-01f;
    p = p * s + -3.761255145e-01f;
    p = p * s + 1.283791512e-01f;
    r = a + a * p;
  } else {
    float t = min(a, 6.0f);
    float q = 1.142501446e-06f;
    q = q * t + -3.635958637e-05f;
    q = q * t + 5.175793776e-04f;
    q = q * t + -4.408638459e-03f;
    q = q * t + 2.550010569e-02f;
    q = q * t + -1.086115092e-01f;
    q = q * t + -6.332198381e-01f;
    q = q * t + -1.129510760e+00f;
    q = q * t + 1.627859747e-04f;
    r = 1.0f - rlx_exp_f32(q);
  }
  return x < 0.0f ? -r : r;
}
/* sin and cos: x = k*pi/2 + r with pi/2 in three parts (k times the first is exact while
   |k| < 2^16), and from |x| = 2^16 on the C prelude's Payne-Hanek reduction in 32-bit words;
   then the C prelude's polynomials in r^2 */
constant uint rlx_x_two_over_pi[8] = {0u, 0xa2f9836eu, 0x4e441529u, 0xfc2757d1u,
                                          0xf534ddc0u, 0xdb629599u, 0x3c439041u, 0xfe5163abu};
static inline uint rlx_x_window(uint hi, uint lo, uint sh) { return sh == 0u ? hi : (hi << sh) | (lo >> (32u - sh)); }
static inline uint2 rlx_x_mul32(uint a, uint b) {  /* (high, low) words of a * b */
  uint ll = (a & 0xffffu) * (b & 0xffffu);
  uint lh = (a & 0xffffu) * (b >> 16u);
  uint hl = (a >> 16u) * (b & 0xffffu);
  uint hh = (a >> 16u) * (b >> 16u);
  uint mid = (ll >> 16u) + (lh & 0xffffu) + (hl & 0xffffu);
  return uint2(hh + (lh >> 16u) + (hl >> 16u) + (mid >> 16u), (mid << 16u) | (ll & 0xffffu));
}
/* x = (k + f) pi/2 for |x| >= 2^16: returns r = f pi/2, sets the quadrant k */
static inline float rlx_x_reduce_large_f32(float x, thread uint& q) {
  uint ax = as_type<uint>(x) & 0x7fffffffu;
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
  float f = float(hs) * 9.313225746154785e-10f + float(mid) * 2.168404344971009e-19f;
  float r = f * 1.5707963267948966f;
  q = x < 0.0f ? 0u - k : k;
  return x < 0.0f ? -r : r;
}
static inline float rlx_x_sincos_f32(float x, uint quadrant_offset) {
  float k = rint(x * 0.63661977236758134f);
  uint q = uint(int(k)) + quadrant_offset;
  float r = x - k * 1.5703125f;
  r = r - k * 4.837512969970703125e-4f;
  r = r - k * 7.549789954891882e-8f;
  if (abs(x) >= 65536.0f) {  /* inf and NaN are handled by the callers */
    uint ql;
    r = rlx_x_reduce_large_f32(x, ql);
    q = ql + quadrant_offset;
  }
  r = clamp(r, -0.7854f, 0.7854f);
  float r2 = r * r;
  float s = 2.71802592273128e-06f;
  s = s * r2 - 0.00019839302265347588f;
  s = s * r2 + 0.008333329273858516f;
  s = s * r2 - 0.1666666664053088f;
  s = r + (r * r2) * s;
  float c = -2.7204852126022577e-07f;
  c = c * r2 + 2.4799449186172105e-05f;
  c = c * r2 - 0.0013888883458223011f;
  c = c * r2 + 0.04166666661900075f;
  c = (1.0f - 0.5f * r2) + (r2 * r2) * c;
  float v = (q & 1u) != 0u ? c : s;
  return (q & 2u) != 0u ? -v : v;
}
static inline float rlx_sin_f32(float x) {
  if (isnan(x) || isinf(x)) return NAN;
  if (x == 0.0f) return x;
  return rlx_x_sincos_f32(x, 0u);
}
static inline float rlx_cos_f32(float x) {
  if (isnan(x) || isinf(x)) return NAN;
  return rlx_x_sincos_f32(x, 1u);
}
/* C's powf: special cases by the C standard, the rest as exp(y log|x|) through the prelude's
   exp and log (llvmpipe's exp2 and log2 err by up to 7% near 1 and near overflow); the
   relative error is about |y log|x|| * 2^-23, within the 4e-6f conformance bound below
   results of e^32 */
static inline float rlx_pow_f32(float x, float y) {
  if (y == 0.0f || x == 1.0f) return 1.0f;
  if (isnan(x) || isnan(y)) return NAN;
  float ay = abs(y);
  bool integer = floor(y) == y;
  bool odd = integer && ay < 16777216.0f && (int(ay) & 1) == 1;
  if (isinf(y)) {
    if (abs(x) == 1.0f) return 1.0f;
    if ((abs(x) < 1.0f) == (y > 0.0f)) return 0.0f;
    return INFINITY;
  }
  if (x == 0.0f) {
    if (y < 0.0f) return odd && (as_type<uint>(x) >> 31u) != 0u ? -INFINITY : INFINITY;
    return odd ? x : 0.0f;
  }
  if (isinf(x)) {
    float m0 = y > 0.0f ? INFINITY : 0.0f;
    return x < 0.0f && odd ? -m0 : m0;
  }
  if (x < 0.0f && !integer) return NAN;
  float m = rlx_exp_f32(y * rlx_log_f32(abs(x)));
  return x < 0.0f && odd ? -m : m;
}
static inline float rlx_round_f32(float x) { return rint(x); }  /* to nearest even */
static inline float rlx_sign_f32(float x) { return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : x); }
/* C's fmodf, exactly: subtract b 2^k for k from the exponent difference down to 0 (each
   subtraction is exact); the result takes a's sign */
static inline int rlx_frexp_exp_f32(float x) {
  float v = x;
  int bias = 126;
  if (v < 1.17549435e-38f) {
    v = v * 16777216.0f;
    bias = bias + 24;
  }
  return int((as_type<uint>(v) >> 23u) & 0xffu) - bias;
}
static inline float rlx_pow2_f32(int n) { return as_type<float>(uint(n + 127) << 23u); }
static inline float fmodf(float a, float b) {
  if (isnan(a) || isnan(b) || isinf(a) || b == 0.0f) return NAN;
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
      s = s * 0.5f;
    }
  }
  return a < 0.0f || (a == 0.0f && (as_type<uint>(a) >> 31u) != 0u) ? -r : r;
}
static inline float rlx_fmod_floor_f32(float a, float b) {
  float r = fmodf(a, b);
  return r != 0.0f && ((r < 0.0f) != (b < 0.0f)) ? r + b : r;
}


/* ---------------------------------------------------------------- saturating casts */
static inline int32_t rlx_f32_to_i32_sat(float x) {
  if (isnan(x)) return 0;
  if (x >= 2147483648.0f) return INT32_MAX;
  if (x <= -2147483648.0f) return -INT32_MAX - 1;
  return int32_t(x);
}
static inline int64_t rlx_f32_to_i64_sat(float x) {
  if (isnan(x)) return 0;
  if (x >= 9223372036854775808.0f) return INT64_MAX;
  if (x <= -9223372036854775808.0f) return INT64_MIN;
  return int64_t(x);
}
static inline int8_t rlx_f32_to_i8_sat(float x) { return isnan(x) ? int8_t(0) : int8_t(int(clamp(x, -128.0f, 127.0f))); }
static inline uint8_t rlx_f32_to_u8_sat(float x) { return isnan(x) ? uint8_t(0) : uint8_t(int(clamp(x, 0.0f, 255.0f))); }
static inline uint32_t rlx_f32_to_u32_sat(float x) {
  if (isnan(x) || x <= 0.0f) return 0u;
  if (x >= 4294967296.0f) return 4294967295u;
  return uint32_t(x);
}
static inline uint64_t rlx_f64_to_u64_sat(float x) {
  if (isnan(x) || x <= 0.0f) return 0;
  if (x >= 18446744073709551616.0f) return UINT64_MAX;
  return uint64_t(x);
}
static inline float rlx_f64_to_range_sat(float x, float lo, float hi) {
  if (isnan(x)) return 0.0f;
  if (x < lo) return lo;
  if (x > hi) return hi;
  return trunc(x);
}

/* ---------------------------------------------------------------- integer helpers (64-bit) */
static inline int64_t rlx_tdiv_i64(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return int64_t(uint64_t(0) - uint64_t(a));
  return a / b;
}
static inline int64_t rlx_trem_i64(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;
  return a % b;
}
static inline int64_t rlx_mod_i64(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;
  int64_t r = a % b;
  return r != 0 && ((r ^ b) < 0) ? r + b : r;
}
static inline int64_t rlx_ipow_i64(int64_t base, int64_t e) {
  if (e < 0) return base == 1 ? 1 : (base == -1 ? ((e & 1) ? -1 : 1) : 0);
  uint64_t r = 1, b = uint64_t(base);
  while (e) {
    if (e & 1) r *= b;
    b *= b;
    e >>= 1;
  }
  return int64_t(r);
}
static inline uint64_t rlx_ipow_u64(uint64_t b, uint64_t e) {
  uint64_t r = 1;
  while (e) {
    if (e & 1) r *= b;
    b *= b;
    e >>= 1;
  }
  return r;
}

/* ---------------------------------------------------------------- f16 / bf16 (exact, by the bits) */
static inline float rlx_f16_to_f32(uint h) {
  uint sign = (h & 0x8000u) << 16u;
  uint em = h & 0x7fffu;
  uint bits;
  if (em >= 0x7c00u) bits = (em << 13u) | 0x7f800000u;
  else if (em < 0x0400u) bits = as_type<uint>(float(em) * 5.9604644775390625e-8f);
  else bits = (em << 13u) + 0x38000000u;
  return as_type<float>(bits | sign);
}
static inline uint16_t rlx_f32_to_f16(float f) {
  uint x = as_type<uint>(f);
  uint sign = (x >> 16u) & 0x8000u;
  uint a = x & 0x7fffffffu;
  uint h;
  if (a > 0x7f800000u) h = 0x7e00u | ((a >> 13u) & 0x03ffu);
  else if (a >= 0x47800000u) h = 0x7c00u;
  else if (a < 0x38800000u) h = as_type<uint>(as_type<float>(a) + 0.5f) - 0x3f000000u;
  else h = (a - 0x38000000u + 0x0fffu + ((a >> 13u) & 1u)) >> 13u;
  return uint16_t(h | sign);
}
static inline float rlx_bf16_to_f32(uint h) { return as_type<float>(h << 16u); }
static inline uint16_t rlx_f32_to_bf16(float f) {
  uint x = as_type<uint>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16u) | 0x0040u);
  return uint16_t((x + 0x7fffu + ((x >> 16u) & 1u)) >> 16u);
}
static inline float rlx_round_f16(float f) { return rlx_f16_to_f32(rlx_f32_to_f16(f)); }
static inline float rlx_round_bf16(float f) { return rlx_bf16_to_f32(rlx_f32_to_bf16(f)); }
)MSL";

}  // namespace

std::string_view msl_prelude() { return kPrelude; }

Claim msl_supports(const NodeDesc& n) {
  auto f64 = [](const TensorType& t) { return t.dtype == DType::f64; };
  for (const TensorType& t : n.inputs)
    if (f64(t)) return Claim::no("MSL has no 64-bit floats");
  for (const TensorType& t : n.outputs)
    if (f64(t)) return Claim::no("MSL has no 64-bit floats");
  if (n.op == Op::Random)
    return Claim::no("rlx's counter-based random numbers are computed in double, which MSL does not have");
  Claim c = c_renderer_supports(n);
  if (c.ok) c.text = "generated MSL";
  return c;
}

}  // namespace rlx::codegen
