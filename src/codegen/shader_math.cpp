#include "shader_math.h"

#include "text_words.h"

namespace rlx::codegen {
namespace {

// C's special values in f32 arithmetic, independent of the driver's transcendental built-ins
// (llvmpipe's exp2 and log2 err by up to 7%): exp and log to about 1 ulp, tanh, sigmoid, erf,
// sin and cos with a three-part pi/2 (Payne-Hanek past 2^16), powf as exp(y log x), exact fmodf.
// Every literal is a float (MSL has no double; HLSL takes the f suffix too). The RLX_ words
// are each language's spelling (shader_f32_math).
constexpr const char* kF32Math = R"MATH(/* ---------------------------------------------------------------- f32 math */
/* exp: x = k ln2 + r with ln2 in two parts (k times the first is exact), e^r by its Taylor
   series through r^7, 2^k applied in two exact steps */
RLX_FN float rlx_exp_f32(float x) {
  if (isnan(x)) return x;
  if (x > 88.7228394f) return INFINITY;
  if (x < -103.972084f) return 0.0f;
  float k = RLX_RINT(x * 1.44269504088896341f);
  float r = (x - k * 0.693145751953125f) - k * 1.428606765330187045e-06f;
  float p = 1.0f + r * (1.0f + r * (0.5f + r * (0.16666666666666666f + r * (0.041666666666666664f +
            r * (0.008333333333333333f + r * (0.001388888888888889f + r * 0.0001984126984126984f))))));
  int k1 = int(k) / 2;
  int k2 = int(k) - k1;
  return p * RLX_AS_FLOAT(uint(k1 + 127) << 23u) * RLX_AS_FLOAT(uint(k2 + 127) << 23u);
}
/* log: x = m 2^e with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh((m-1)/(m+1)) by its series */
RLX_FN float rlx_log_f32(float x) {
  if (isnan(x) || x == INFINITY) return x;
  if (x < 0.0f) return NAN;
  if (x == 0.0f) return -INFINITY;
  float v = x;
  int e = 0;
  if (v < 1.17549435e-38f) {  /* subnormal: scale into the normal range first */
    v = v * 16777216.0f;
    e = -24;
  }
  uint bits = RLX_AS_UINT(v);
  e = e + int((bits >> 23u) & 0xffu) - 127;
  float m = RLX_AS_FLOAT((bits & 0x007fffffu) | 0x3f800000u);
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
RLX_FN float rlx_sqrt_f32(float x) {
  if (x < 0.0f) return NAN;
  return sqrt(x);
}
RLX_FN float rlx_rsqrt_f32(float x) {
  if (x < 0.0f) return NAN;
  if (x == 0.0f) return (RLX_AS_UINT(x) >> 31u) != 0u ? -INFINITY : INFINITY;
  if (isinf(x)) return 0.0f;
  return 1.0f / sqrt(x);
}
RLX_FN float rlx_tanh_f32(float x) {
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
RLX_FN float rlx_sigmoid_f32(float x) {
  if (isnan(x)) return x;
  float e = rlx_exp_f32(-abs(x));
  return (x >= 0.0f ? 1.0f : e) / (1.0f + e);
}
/* erf as in the C prelude: a + a*P(a^2) below 0.875f, 1 - exp(Q(a)) above (a clamped to 6) */
RLX_FN float rlx_erf_f32(float x) {
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
RLX_TABLE uint rlx_x_two_over_pi[8] = {0u, 0xa2f9836eu, 0x4e441529u, 0xfc2757d1u,
                                          0xf534ddc0u, 0xdb629599u, 0x3c439041u, 0xfe5163abu};
RLX_FN uint rlx_x_window(uint hi, uint lo, uint sh) { return sh == 0u ? hi : (hi << sh) | (lo >> (32u - sh)); }
RLX_FN uint2 rlx_x_mul32(uint a, uint b) {  /* (high, low) words of a * b */
  uint ll = (a & 0xffffu) * (b & 0xffffu);
  uint lh = (a & 0xffffu) * (b >> 16u);
  uint hl = (a >> 16u) * (b & 0xffffu);
  uint hh = (a >> 16u) * (b >> 16u);
  uint mid = (ll >> 16u) + (lh & 0xffffu) + (hl & 0xffffu);
  return uint2(hh + (lh >> 16u) + (hl >> 16u) + (mid >> 16u), (mid << 16u) | (ll & 0xffffu));
}
/* x = (k + f) pi/2 for |x| >= 2^16: returns r = f pi/2, sets the quadrant k */
RLX_FN float rlx_x_reduce_large_f32(float x, RLX_OUT_UINT q) {
  uint ax = RLX_AS_UINT(x) & 0x7fffffffu;
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
RLX_FN float rlx_x_sincos_f32(float x, uint quadrant_offset) {
  float k = RLX_RINT(x * 0.63661977236758134f);
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
RLX_FN float rlx_sin_f32(float x) {
  if (isnan(x) || isinf(x)) return NAN;
  if (x == 0.0f) return x;
  return rlx_x_sincos_f32(x, 0u);
}
RLX_FN float rlx_cos_f32(float x) {
  if (isnan(x) || isinf(x)) return NAN;
  return rlx_x_sincos_f32(x, 1u);
}
/* C's powf: special cases by the C standard, the rest as exp(y log|x|) through the prelude's
   exp and log (llvmpipe's exp2 and log2 err by up to 7% near 1 and near overflow); the
   relative error is about |y log|x|| * 2^-24 plus exp's, within 4e-6 below results of e^32
   and 7.3e-6 up to FLT_MAX (the conformance bounds, tests/conformance/tolerance.cpp) */
RLX_FN float rlx_pow_f32(float x, float y) {
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
    if (y < 0.0f) return odd && (RLX_AS_UINT(x) >> 31u) != 0u ? -INFINITY : INFINITY;
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
RLX_FN float rlx_round_f32(float x) { return RLX_RINT(x); }  /* to nearest even */
RLX_FN float rlx_sign_f32(float x) { return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : x); }
/* C's fmodf, exactly: subtract b 2^k for k from the exponent difference down to 0 (each
   subtraction is exact); the result takes a's sign */
RLX_FN int rlx_frexp_exp_f32(float x) {
  float v = x;
  int bias = 126;
  if (v < 1.17549435e-38f) {
    v = v * 16777216.0f;
    bias = bias + 24;
  }
  return int((RLX_AS_UINT(v) >> 23u) & 0xffu) - bias;
}
RLX_FN float rlx_pow2_f32(int n) { return RLX_AS_FLOAT(uint(n + 127) << 23u); }
RLX_FN float fmodf(float a, float b) {
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
  return a < 0.0f || (a == 0.0f && (RLX_AS_UINT(a) >> 31u) != 0u) ? -r : r;
}
RLX_FN float rlx_fmod_floor_f32(float a, float b) {
  float r = fmodf(a, b);
  return r != 0.0f && ((r < 0.0f) != (b < 0.0f)) ? r + b : r;
}

)MATH";

// The f64 helpers of the shading languages with doubles but float-only transcendentals (GLSL,
// HLSL), in double arithmetic: the RLX_ words and the `lf` literal suffix are each language's
// spelling (shader_f64_math); each prelude defines rlx_f64_hi and rlx_f64_from_words first.
constexpr const char* kF64Math = R"MATH(/* ---------------------------------------------------------------- f64 math */
/* In double arithmetic only (GLSL's and HLSL's transcendental built-ins are float-only), with
   the exponent read and 2^n built from the bits (lavapipe's frexp and ldexp mishandle f64
   subnormals; HLSL's frexp returns its exponent as a double). */
/* frexp's exponent of a positive finite x (x = m 2^e, m in [0.5, 1)), and 2^n for n in
   [-1022, 1023] */
int rlx_frexp_exp_f64(double x) {
  int bias = 1022;
  if (x < 2.2250738585072014e-308lf) {  /* subnormal: scale by 2^54 into the normal range */
    x *= 18014398509481984.0lf;
    bias += 54;
  }
  return int((rlx_f64_hi(x) >> 20) & 0x7ffu) - bias;
}
double rlx_pow2_f64(int n) { return rlx_f64_from_words(0u, uint(n + 1023) << 20); }
double rlx_sqrt_f64(double x) { return x < 0.0lf ? double(NAN) : RLX_SQRT(x); }
double rlx_rsqrt_f64(double x) {
  if (x < 0.0lf) return double(NAN);
  if (x == 0.0lf) return (rlx_f64_hi(x) >> 31) != 0u ? -double(INFINITY) : double(INFINITY);
  if (RLX_ISINF(x)) return 0.0lf;
  return 1.0lf / RLX_SQRT(x);
}
/* half to even by hand: lavapipe's (Mesa 22.3) double roundEven rounds halves toward zero
   (1.5 -> 1, -3.5 -> -3); every double from 2^52 up (and inf, NaN) is already integral */
double rlx_round_f64(double x) {
  if (!(RLX_ABS(x) < 4503599627370496.0lf)) return x;
  double f = RLX_FLOOR(x), d = x - f;
  double r = d > 0.5lf ? f + 1.0lf : d < 0.5lf ? f : (RLX_FRACT(f * 0.5lf) == 0.0lf ? f : f + 1.0lf);
  return r == 0.0lf && x < 0.0lf ? -0.0lf : r;
}
/* exp, log, expm1: argument reduction by ln2 with a two-part ln2 and Taylor/atanh series to
   below 1e-17 relative; within a few ulp for normal results */
double rlx_x_exp_taylor(double r, int terms) {  /* e^r = 1 + r(1 + r/2(1 + r/3(...))) */
  double p = 1.0lf;
  for (int n = terms; n >= 1; --n) p = 1.0lf + r * p / double(n);
  return p;
}
double rlx_exp_f64(double x) {
  if (isnan(x)) return x;
  if (x > 709.782712893384lf) return double(INFINITY);
  if (x < -745.1332191019412lf) return 0.0lf;
  double k = RLX_RINT(x * 1.4426950408889634lf);
  double r = (x - k * 0.6931471803691238lf) - k * 1.9082149292705877e-10lf;  /* |r| <= 0.35 */
  double p = rlx_x_exp_taylor(r, 14);
  int ki = int(k);  /* in two steps, each 2^k normal; the second rounds a subnormal result once */
  int k1 = ki / 2;
  return p * rlx_pow2_f64(k1) * rlx_pow2_f64(ki - k1);
}
double rlx_expm1_f64(double x) {
  if (RLX_ABS(x) >= 0.5lf) return rlx_exp_f64(x) - 1.0lf;
  double p = 1.0lf;  /* expm1(r) = r(1 + r/2(1 + r/3(...))) without the leading 1 */
  for (int n = 18; n >= 2; --n) p = 1.0lf + x * p / double(n);
  return x * p;
}
double rlx_log_f64(double x) {
  if (isnan(x) || x == double(INFINITY)) return x;
  if (x < 0.0lf) return double(NAN);
  if (x == 0.0lf) return -double(INFINITY);
  int e = rlx_frexp_exp_f64(x);
  int e1 = e / 2;  /* m = x 2^-e in [0.5, 1), scaled in two exact steps */
  double m = x * rlx_pow2_f64(-e1) * rlx_pow2_f64(e1 - e);
  if (m < 0.7071067811865476lf) {
    m *= 2.0lf;
    e -= 1;
  }
  double f = (m - 1.0lf) / (m + 1.0lf), s = f * f;  /* log(m) = 2 atanh(f), |f| <= 0.172 */
  double p = 1.0lf / 25.0lf;
  for (int n = 11; n >= 0; --n) p = p * s + 1.0lf / double(2 * n + 1);
  double de = double(e);
  return de * 0.6931471803691238lf + (de * 1.9082149292705877e-10lf + 2.0lf * f * p);
}
double rlx_sigmoid_f64(double x) {
  if (isnan(x)) return x;
  double e = rlx_exp_f64(-RLX_ABS(x));
  return (x >= 0.0lf ? 1.0lf : e) / (1.0lf + e);
}
double rlx_tanh_f64(double x) {
  if (isnan(x)) return x;
  double a = RLX_MIN(RLX_ABS(x), 20.0lf);
  double em = rlx_expm1_f64(2.0lf * a);
  double r = em / (em + 2.0lf);
  return x < 0.0lf ? -r : r;
}
/* C's pow: integral exponents below 2^32 by repeated squaring (exact where the result is, as
   BitShift and integer Pow need), others through exp(y*log|x|) */
double rlx_pow_f64(double x, double y) {
  if (y == 0.0lf || x == 1.0lf) return 1.0lf;
  if (isnan(x) || isnan(y)) return double(NAN);
  double ax = RLX_ABS(x), ay = RLX_ABS(y);
  /* an infinite y counts as an even integer, as in C; RLX_FLOOR(inf) is NaN on llvmpipe's OpenGL
     (its double floor is x - fract(x)), so it is tested first */
  bool yint = RLX_ISINF(y) || RLX_FLOOR(y) == y;
  bool yodd = yint && ay < 9007199254740992.0lf && RLX_FRACT(ay * 0.5lf) != 0.0lf;
  bool neg = (rlx_f64_hi(x) >> 31) != 0u;
  if (neg && ax != 0.0lf && !RLX_ISINF(x) && !yint) return double(NAN);
  double r;
  if (ax == 0.0lf) r = y < 0.0lf ? double(INFINITY) : 0.0lf;
  else if (RLX_ISINF(ax)) r = y < 0.0lf ? 0.0lf : double(INFINITY);
  else if (RLX_ISINF(y)) r = ax == 1.0lf ? 1.0lf : ((ax > 1.0lf) == (y > 0.0lf) ? double(INFINITY) : 0.0lf);
  else if (yint && ay < 4294967296.0lf) {
    uint n = uint(ay);
    double b = ax;
    r = 1.0lf;
    while (n != 0u) {
      if ((n & 1u) != 0u) r *= b;
      b *= b;
      n >>= 1;
    }
    if (y < 0.0lf) r = 1.0lf / r;
  } else {
    r = rlx_exp_f64(y * rlx_log_f64(ax));
  }
  return neg && yodd ? -r : r;
}
double rlx_sign_f64(double x) { return x > 0.0lf ? 1.0lf : (x < 0.0lf ? -1.0lf : x); }
/* C's fmod, exact: |b| scaled by powers of two is subtracted from |a| from the top bit down
   (each subtraction is exact), the result takes a's sign */
double rlx_fmod_f64(double a, double b) {
  if (isnan(a) || isnan(b) || RLX_ISINF(a) || b == 0.0lf) return double(NAN);
  if (RLX_ISINF(b)) return a;
  double r = RLX_ABS(a), d = RLX_ABS(b);
  if (r >= d) {
    int ea = rlx_frexp_exp_f64(r), eb = rlx_frexp_exp_f64(d);
    /* s = d 2^(ea - eb), exact (s <= 2r), in steps that stay inside rlx_pow2_f64's range */
    double s = d;
    int k = ea - eb;
    for (; k > 1000; k -= 1000) s *= rlx_pow2_f64(1000);
    s *= rlx_pow2_f64(k);
    for (int i = ea - eb; i >= 0; --i) {
      if (r >= s) r -= s;
      s *= 0.5lf;
    }
  }
  return a < 0.0lf || (a == 0.0lf && (rlx_f64_hi(a) >> 31) != 0u) ? -r : r;
}
double rlx_fmod_floor_f64(double a, double b) {
  double r = rlx_fmod_f64(a, b);
  return (r != 0.0lf && ((r < 0.0lf) != (b < 0.0lf))) ? r + b : r;
}
)MATH";

}  // namespace

std::string shader_f64_math(CTarget target) {
  // HLSL's intrinsics take doubles in name only (glslang converts them to float), so the HLSL
  // prelude computes these in double arithmetic (hlsl_prelude.cpp)
  if (target == CTarget::hlsl)
    return expand_words(kF64Math, {{"RLX_RINT", "rlx_rint_f64"}, {"RLX_FRACT", "rlx_fract_f64"}, {"RLX_ABS", "rlx_abs_f64"},
                                   {"RLX_FLOOR", "rlx_floor_f64"}, {"RLX_MIN", "rlx_min_f64"}, {"RLX_ISINF", "rlx_isinf_f64"},
                                   {"RLX_SQRT", "rlx_sqrt_nonneg_f64"}, {"lf", "L"}});
  return expand_words(kF64Math, {{"RLX_RINT", "roundEven"}, {"RLX_FRACT", "fract"}, {"RLX_ABS", "abs"}, {"RLX_FLOOR", "floor"},
                                 {"RLX_MIN", "min"}, {"RLX_ISINF", "isinf"}, {"RLX_SQRT", "sqrt"}});
}

std::string shader_f32_math(CTarget target) {
  Words w;
  if (target == CTarget::msl) {
    w = {{"RLX_FN", "static inline"}, {"RLX_AS_FLOAT", "as_type<float>"}, {"RLX_AS_UINT", "as_type<uint>"},
         {"RLX_OUT_UINT", "thread uint&"}, {"RLX_TABLE", "constant"}, {"RLX_RINT", "rint"}};
  } else {  // HLSL: round is to nearest even
    w = {{"RLX_FN", ""}, {"RLX_AS_FLOAT", "asfloat"}, {"RLX_AS_UINT", "asuint"},
         {"RLX_OUT_UINT", "out uint"}, {"RLX_TABLE", "static const"}, {"RLX_RINT", "round"}};
  }
  return expand_words(kF32Math, w);
}

}  // namespace rlx::codegen
