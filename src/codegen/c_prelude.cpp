#include "codegen/c_prelude.h"

// The C text lives in adjacent raw string literals (one per section) that the compiler joins
// into one. Design notes for readers of the C:
//  * Every function computes all its candidate results unconditionally and picks one with
//    a bit-mask select (rlx__sel_*), never with a branch or a float ?: (see rlx__sel_f32
//    for why), so the loop has no control flow left for the vectorizer to refuse.
//  * Clamps are `sel(x > hi, hi, x)`, which keeps NaN (the comparison is false), so NaN
//    flows through the arithmetic instead of being clamped to a finite value.
//  * Float-to-int conversions only ever see in-range values (UB otherwise), so integer
//    parts of reductions use the 1.5*2^23 "shifter" trick, which reads k out of the float's
//    low mantissa bits.
//  * Polynomial coefficients are minimax fits (Remez exchange in mpmath, weighted for the
//    relative error of the final result), rounded to float; the unit test measures the
//    accuracy of the rounded coefficients in float arithmetic, with and without FMA.
//  * The generated code is compiled as GNU C, where gcc contracts a*b+c into fma when the
//    target has one; nothing here depends on contraction happening or not happening.

namespace rlx::codegen {
namespace {

constexpr std::string_view kPrelude =
    R"RLXC(/* ---- rlx C prelude: vectorizable math for generated kernels (see c_prelude.h) ---- */
#ifndef RLX_C_PRELUDE_INCLUDED
#define RLX_C_PRELUDE_INCLUDED 1
#if defined(__CUDACC__) || defined(__HIP__)
/* GPU C++: CUDA under NVRTC, HIP under hipRTC or clang (the cuda and rocm devices) */
#define RLX__GPU_CXX 1
#endif
#ifdef __OPENCL_VERSION__
/* OpenCL C (the opencl device renders the same kernels): fixed-width integer names, the C
   library's float names mapped to OpenCL's overloaded built-ins, bit casts through as_type. */
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef char int8_t;
typedef uchar uint8_t;
typedef short int16_t;
typedef ushort uint16_t;
typedef int int32_t;
typedef uint uint32_t;
typedef long int64_t;
typedef ulong uint64_t;
#define INT32_MAX 2147483647
#define INT64_MAX 9223372036854775807L
#define INT64_MIN (-INT64_MAX - 1L)
#define UINT64_MAX 18446744073709551615UL
#define sqrtf sqrt
#define powf pow
#define floorf floor
#define ceilf ceil
#define fabsf fabs
#define fmodf fmod
#define rintf rint
#elif defined(__HIP__)
/* HIP C++ (the rocm device renders the same kernels as cuda): hip_runtime.h, which the HIP
   prelude includes first, has the fixed-width integer names, INFINITY and NAN, and the C
   library's math names as device functions; the HIP prelude makes these static functions
   device functions too (clang's force_cuda_host_device pragma: HIP has no -default-device). */
#ifndef INT32_MAX
#define INT32_MAX 2147483647
#endif
#ifndef INT64_MAX
#define INT64_MAX 9223372036854775807LL
#endif
#ifndef INT64_MIN
#define INT64_MIN (-INT64_MAX - 1LL)
#endif
#ifndef UINT64_MAX
#define UINT64_MAX 18446744073709551615ULL
#endif
#elif defined(__CUDACC__)
/* CUDA C++ under NVRTC (the cuda device renders the same kernels). NVRTC compiles without
   system headers, so the fixed-width integer names and C's INFINITY/NAN are defined here; the
   C library's math names (expf, sqrtf, erfc, ...) are CUDA device functions already. The
   program is compiled with -default-device, so these static functions are device functions. */
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
#define INT32_MAX 2147483647
#define INT64_MAX 9223372036854775807LL
#define INT64_MIN (-INT64_MAX - 1LL)
#define UINT64_MAX 18446744073709551615ULL
#define INFINITY __int_as_float(0x7f800000)
#define NAN __int_as_float(0x7fffffff)
#else
#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__) && defined(__F16C__)
#include <immintrin.h>
#endif
#endif
#if defined(__clang__)
/* clang warns about unused static functions of the main file; most kernels use a few. */
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wunused-function"
#endif

/* ---------------------------------------------------------------- bit casts */
#ifdef __OPENCL_VERSION__
static inline uint32_t rlx_f32_bits(float x) { return as_uint(x); }
static inline float rlx_f32_from_bits(uint32_t u) { return as_float(u); }
static inline uint64_t rlx_f64_bits(double x) { return as_ulong(x); }
static inline double rlx_f64_from_bits(uint64_t u) { return as_double(u); }
#elif defined(RLX__GPU_CXX)
static inline uint32_t rlx_f32_bits(float x) { return __float_as_uint(x); }
static inline float rlx_f32_from_bits(uint32_t u) { return __uint_as_float(u); }
static inline uint64_t rlx_f64_bits(double x) { return (uint64_t)__double_as_longlong(x); }
static inline double rlx_f64_from_bits(uint64_t u) { return __longlong_as_double((long long)u); }
#else
static inline uint32_t rlx_f32_bits(float x) { uint32_t u; memcpy(&u, &x, sizeof u); return u; }
static inline float rlx_f32_from_bits(uint32_t u) { float x; memcpy(&x, &u, sizeof x); return x; }
static inline uint64_t rlx_f64_bits(double x) { uint64_t u; memcpy(&u, &x, sizeof u); return u; }
static inline double rlx_f64_from_bits(uint64_t u) { double x; memcpy(&x, &u, sizeof x); return x; }
#endif

/* Selects on values, done on the bit patterns: c ? a : b for c in {0, 1}. Written as ?:,
   gcc may sink the computation of an arm into a branch and then, under the default
   -ftrapping-math, refuse to if-convert the loop on targets without masked vector arithmetic
   (SSE, AVX2), or thread the branch on a clamp. The mask form keeps both arms unconditional. */
static inline float rlx__sel_f32(int c, float a, float b) {
  uint32_t m = 0u - (uint32_t)c;
  return rlx_f32_from_bits((rlx_f32_bits(a) & m) | (rlx_f32_bits(b) & ~m));
}
static inline double rlx__sel_f64(int c, double a, double b) {
  uint64_t m = (uint64_t)0 - (uint64_t)c;
  return rlx_f64_from_bits((rlx_f64_bits(a) & m) | (rlx_f64_bits(b) & ~m));
}
static inline uint32_t rlx__sel_u32(int c, uint32_t a, uint32_t b) {
  uint32_t m = 0u - (uint32_t)c;
  return (a & m) | (b & ~m);
}
static inline uint64_t rlx__sel_u64(int c, uint64_t a, uint64_t b) {
  uint64_t m = (uint64_t)0 - (uint64_t)c;
  return (a & m) | (b & ~m);
}
/* min(x, hi) and max(x, lo) that keep NaN. */
static inline float rlx__min_f32(float x, float hi) { return rlx__sel_f32(x > hi, hi, x); }
static inline float rlx__max_f32(float x, float lo) { return rlx__sel_f32(x < lo, lo, x); }
static inline double rlx__min_f64(double x, double hi) { return rlx__sel_f64(x > hi, hi, x); }
static inline double rlx__max_f64(double x, double lo) { return rlx__sel_f64(x < lo, lo, x); }

static inline float rlx__abs_f32(float x) { return rlx_f32_from_bits(rlx_f32_bits(x) & 0x7fffffffu); }
/* |mag| with the sign bit of sgn. */
static inline float rlx__copysign_f32(float mag, float sgn) {
  return rlx_f32_from_bits((rlx_f32_bits(mag) & 0x7fffffffu) | (rlx_f32_bits(sgn) & 0x80000000u));
}

/* ---------------------------------------------------------------- exp family */
/* expm1(r) for |r| <= ln2/2 (+ slack for a misrounded k): r + r^2*Q(r), Q a degree-5
   minimax fit with relative error 2.8e-9. */
static inline float rlx__expm1_kernel_f32(float r) {
  float q = 0x1.a073c6p-13f;
  q = q * r + 0x1.6d4644p-10f;
  q = q * r + 0x1.11114ep-7f;
  q = q * r + 0x1.5554e6p-5f;
  q = q * r + 0x1.555556p-3f;
  q = q * r + 0x1p-1f;
  return r + (r * r) * q;
}

/* x = k*ln2 + r with |r| <= ln2/2. x must be clamped so |k| < 2^22 (or be NaN: then r is
   NaN and k is garbage). k comes from the low mantissa bits of x*log2(e) + 1.5*2^23. ln2 is
   split so that kf*ln2_hi is exact for |k| < 2^9. */
static inline float rlx__reduce_ln2_f32(float x, int32_t* k) {
  float t = x * 0x1.715476p+0f + 0x1.8p23f;
  float kf = t - 0x1.8p23f;
  *k = (int32_t)(rlx_f32_bits(t) - 0x4b400000u);
  return (x - kf * 0x1.62e4p-1f) - kf * 0x1.7f7d1cp-20f;
}

/* exp(x) = e * s1 * s2 with e in [0.7, 1.42] and s1*s2 = 2^k split in two normal powers of
   two so that k in [-159, 128] needs no special cases: overflow gives inf and underflow
   rounds once into the subnormal range (or to 0). Returns e; s1 and s2 through the pointers.
   The low clamp sits below exp's own underflow point (-103.97) so that silu can still scale
   x*e by 2^k there. */
static inline float rlx__exp_parts_f32(float x, float* s1, float* s2) {
  float xc = rlx__min_f32(x, 89.0f);        /* exp(89) overflows, exp(-110) rounds to 0 */
  xc = rlx__max_f32(xc, -110.0f);
  int32_t k;
  float r = rlx__reduce_ln2_f32(xc, &k);
  int32_t k1 = k >> 1;
  int32_t k2 = k - k1;
  *s1 = rlx_f32_from_bits(((uint32_t)k1 + 127u) << 23);
  *s2 = rlx_f32_from_bits(((uint32_t)k2 + 127u) << 23);
  return 1.0f + rlx__expm1_kernel_f32(r);
}

static inline float rlx_exp_f32(float x) {
  float s1, s2;
  float e = rlx__exp_parts_f32(x, &s1, &s2);
  return (e * s1) * s2;
}

/* expm1(x) = 2^k*(1 + p) - 1 = 2*(2^(k-1)*p + (2^(k-1) - 0.5)); the halved scale keeps k = 128
   (x near the overflow threshold) representable. */
static inline float rlx_expm1_f32(float x) {
  float xc = rlx__min_f32(x, 89.0f);
  xc = rlx__max_f32(xc, -30.0f);           /* expm1(-30) rounds to -1 */
  int32_t k;
  float r = rlx__reduce_ln2_f32(xc, &k);
  float p = rlx__expm1_kernel_f32(r);
  float sh = rlx_f32_from_bits(((uint32_t)k + 126u) << 23);
  float big = 2.0f * (sh * p + (sh - 0.5f));
  float res = rlx__sel_f32(k == 0, p, big);
  return rlx__sel_f32(x == 0.0f, x, res);  /* keeps -0 */
}

/* ---------------------------------------------------------------- log */
/* log(x) for positive, normal, finite x (no special cases). x = 2^k * m with m in
   [sqrt(1/2), sqrt(2)); log(m) = f - f^2/2 + f^3*P(f), f = m - 1 (exact), P degree 8. */
static inline float rlx__log_core_f32(float x, int32_t kbias) {
  uint32_t ix = rlx_f32_bits(x) + (0x3f800000u - 0x3f3504f3u);
  float kf = (float)((int32_t)(ix >> 23) - 127 - kbias);
  float m = rlx_f32_from_bits((ix & 0x007fffffu) + 0x3f3504f3u);
  float f = m - 1.0f;
  float z = f * f;
  float p = 0x1.204372p-4f;
  p = p * f - 0x1.d7a36ap-4f;
  p = p * f + 0x1.de4a34p-4f;
  p = p * f - 0x1.fcba9ep-4f;
  p = p * f + 0x1.23d37ep-3f;
  p = p * f - 0x1.555cap-3f;
  p = p * f + 0x1.999d58p-3f;
  p = p * f - 0x1.fffff8p-3f;
  p = p * f + 0x1.555554p-2f;
  float y = f * z * p;
  y = y + kf * -2.12194440e-4f;            /* ln2 = 0.693359375 - 2.12194440e-4 */
  y = y - 0.5f * z;
  float res = f + y;
  return res + kf * 0.693359375f;
}

static inline float rlx_log_f32(float x) {
  int32_t sub = x < 0x1p-126f;             /* subnormals: scale into the normal range */
  float xs = rlx__sel_f32(sub, x * 0x1p23f, x);
  float res = rlx__log_core_f32(xs, sub * 23);
  res = rlx__sel_f32(x == INFINITY, x, res);
  res = rlx__sel_f32(x == 0.0f, -INFINITY, res);
  res = rlx__sel_f32(x < 0.0f, NAN, res);
  return rlx__sel_f32(x != x, x, res);
}

/* ---------------------------------------------------------------- logistic family */
/* Uses e = exp(-|x|) in (0, 1]: 1/(1+e) for x >= 0 and e/(1+e) for x < 0, so neither side
   cancels or overflows, and tiny results stay accurate down into the subnormals. */
static inline float rlx_sigmoid_f32(float x) {
  float e = rlx_exp_f32(-rlx__abs_f32(x));
  float num = rlx__sel_f32(x >= 0.0f, 1.0f, e);  /* NaN: e is NaN */
  return num / (1.0f + e);
}

/* x*sigmoid(x). For x < 0 the product x*e is formed before the 2^k scaling so results in
   the subnormal range are rounded once. silu(-inf) = -0. */
static inline float rlx_silu_f32(float x) {
  float s1, s2;
  float em = rlx__exp_parts_f32(-rlx__abs_f32(x), &s1, &s2);
  float e = (em * s1) * s2;
  float d = 1.0f + e;
  float neg = ((x * em / d) * s1) * s2;
  float res = rlx__sel_f32(x >= 0.0f, x / d, neg);
  return rlx__sel_f32(x < -110.0f, -0.0f, res);  /* |silu| < 2^-150 there */
}

/* tanh(a) = expm1(2a)/(expm1(2a) + 2) for a = |x|: accurate for tiny and large a alike.
   tanh(10) rounds to 1 in float, so a is clamped there (which also maps inf to 1). */
static inline float rlx_tanh_f32(float x) {
  float a = rlx__abs_f32(x);
  a = rlx__min_f32(a, 10.0f);
  float em = rlx_expm1_f32(2.0f * a);
  return rlx__copysign_f32(em / (em + 2.0f), x);
}

/* softplus(x) = log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)). log1p(e) is log(u) with
   u = 1 + e, corrected by the exactly representable rounding error e - (u - 1). */
static inline float rlx_softplus_f32(float x) {
  float e = rlx_exp_f32(-rlx__abs_f32(x));
  float u = 1.0f + e;
  float c = e - (u - 1.0f);
  float l = rlx__log_core_f32(u, 0) + c / u;
  float m = rlx__sel_f32(x > 0.0f, x, 0.0f);
  return m + l;
}
)RLXC"
    R"RLXC(
/* ---------------------------------------------------------------- erf and gelu */
/* erf(a) for 0 <= a < 0.875: a + a*P(a^2), P degree 5 (relative error 8.5e-9). */
static inline float rlx__erf_small_f32(float a) {
  float s = a * a;
  float p = -0x1.453aaep-11f;
  p = p * s + 0x1.49c9fep-8f;
  p = p * s - 0x1.b6f38ap-6f;
  p = p * s + 0x1.ce211ep-4f;
  p = p * s - 0x1.81270cp-2f;
  p = p * s + 0x1.06eba6p-3f;
  return a + a * p;
}

/* erfc(a) for 0.875 <= a <= 6 as exp(Q(a)), Q a degree-8 fit of log(erfc(a)) (erfc absolute
   error <= 1.3e-9 near 0.875, relative error <= 1.3e-5 in the far tail). a is clamped to 6
   (NaN stays NaN) so the polynomial never sees inf. Q stays within [-39, 0.001] for every
   a in [0, 6] (erf evaluates this branch for small a too, then discards it), so exp needs
   no clamps and a single scale 2^k: without rlx_exp_f32's range handling erf is about 25%
   faster (the GELU epilogue of MiniLM's FFN was 4.4% of its time), with the same result. */
static inline float rlx__erfc_large_f32(float a) {
  float t = rlx__min_f32(a, 6.0f);
  float q = 0x1.32b01ap-20f;
  q = q * t - 0x1.31019ep-15f;
  q = q * t + 0x1.0f5c54p-11f;
  q = q * t - 0x1.20ecaep-8f;
  q = q * t + 0x1.a1cb32p-6f;
  q = q * t - 0x1.bcdf6cp-4f;
  q = q * t - 0x1.443564p-1f;
  q = q * t - 0x1.21279ep+0f;
  q = q * t + 0x1.55630ep-13f;
  int32_t k;
  float r = rlx__reduce_ln2_f32(q, &k);
  float scale = rlx_f32_from_bits(((uint32_t)k + 127u) << 23);
  return scale + scale * rlx__expm1_kernel_f32(r);
}

static inline float rlx_erf_f32(float x) {
  float a = rlx__abs_f32(x);
  float small = rlx__erf_small_f32(a);
  float large = 1.0f - rlx__erfc_large_f32(a);
  return rlx__copysign_f32(rlx__sel_f32(a < 0.875f, small, large), x);
}

/* gelu(x) = x*Phi(x), Phi(x) = (1 + erf(x/sqrt2))/2. For x/sqrt2 <= -0.875, Phi = erfc(|z|)/2
   is used directly (no cancellation); below z = -6 Phi is taken as 0 (|gelu| < 1e-16). */
static inline float rlx_gelu_erf_f32(float x) {
  float z = x * 0x1.6a09e6p-1f;
  float a = rlx__abs_f32(z);
  float es = rlx__erf_small_f32(a);
  float ec = rlx__erfc_large_f32(a);
  ec = rlx__sel_f32(a > 6.0f, 0.0f, ec);
  int small = a < 0.875f;
  float phi_pos = rlx__sel_f32(small, 0.5f + 0.5f * es, 1.0f - 0.5f * ec);
  float phi_neg = rlx__sel_f32(small, 0.5f - 0.5f * es, 0.5f * ec);
  float phi = rlx__sel_f32(x < 0.0f, phi_neg, phi_pos);
  float xc = rlx__max_f32(x, -10.0f);      /* Phi is 0 there; avoids -inf * 0 */
  return xc * phi;
}

/* 0.5x(1 + tanh(u)) == x*sigmoid(2u), u = sqrt(2/pi)*(x + 0.044715x^3): the sigmoid form
   does not cancel for negative x. */
static inline float rlx_gelu_tanh_f32(float x) {
  float u2 = x * (0x1.988454p+0f + 0x1.2444f2p-4f * (x * x));
  float res = x * rlx_sigmoid_f32(u2);
  return rlx__sel_f32(x < -20.0f, -0.0f, res);  /* underflows there anyway; avoids -inf * 0 */
}

/* ---------------------------------------------------------------- sin, cos */
/* Reduction and polynomials run in double: x = k*pi/2 + r with pi/2 split in three parts
   (33 + 33 + 53 bits) so k*part is exact for |k| < 2^20; sin/cos of r use degree-3
   polynomials in r^2 (relative error < 6e-12). The result is rounded to float once.
   k is read from the low bits of x*2/pi + 1.5*2^52. That is accurate for |x| < 2^20*pi/2;
   from |x| = 2^20 on (finite) the reduction is Payne-Hanek's instead (below). Both are
   computed and one selected, so the loop stays branch-free and vectorizes. */
#if !defined(__OPENCL_VERSION__) && !defined(RLX__GPU_CXX)
/* 2/pi: a zero word, then bits 1..224 of its binary expansion. */
static const uint32_t rlx__two_over_pi[8] = {0u, 0xa2f9836eu, 0x4e441529u, 0xfc2757d1u,
                                             0xf534ddc0u, 0xdb629599u, 0x3c439041u, 0xfe5163abu};
/* Payne-Hanek reduction of a finite |x| = m*2^e >= 2^20 (m < 2^24, so e >= -3): only the 96
   bits of 2/pi from 2^(-e+1) down matter, those above give multiples of 4 times m and those
   below add < 2^-70. m times that window, mod 2^96, is x*2/pi mod 4 in units of 2^-94: the
   quadrant is its rounded top two bits and the rest, signed, is r/(pi/2). Returns r, sets *q. */
static inline double rlx__reduce_large_f32(float x, uint64_t* q) {
  uint32_t ax = rlx_f32_bits(x) & 0x7fffffffu;
  uint32_t m = (ax & 0x007fffffu) | 0x00800000u;
  int32_t g = (int32_t)(ax >> 23) - 150 + 30;  /* window start, counted from T[0]'s top bit */
  g = g < 0 ? 0 : g > 134 ? 134 : g;           /* in range for every x this result is used for */
  uint32_t j = (uint32_t)g >> 5, sh = (uint32_t)g & 31u;
  /* words j..j+3 of the table (j <= 4) by selects: table loads would be scalarized gathers */
  uint32_t t0 = rlx__two_over_pi[0], t1 = rlx__two_over_pi[1], t2 = rlx__two_over_pi[2],
           t3 = rlx__two_over_pi[3];
  for (uint32_t i = 1; i <= 4; ++i) {
    int at = j >= i;
    t0 = rlx__sel_u32(at, rlx__two_over_pi[i], t0);
    t1 = rlx__sel_u32(at, rlx__two_over_pi[i + 1], t1);
    t2 = rlx__sel_u32(at, rlx__two_over_pi[i + 2], t2);
    t3 = rlx__sel_u32(at, rlx__two_over_pi[i + 3], t3);
  }
  uint64_t w0 = t0, w1 = t1, w2 = t2, w3 = t3;
  uint32_t a2 = (uint32_t)((w0 << sh) | (w1 >> (32u - sh)));
  uint32_t a1 = (uint32_t)((w1 << sh) | (w2 >> (32u - sh)));
  uint32_t a0 = (uint32_t)((w2 << sh) | (w3 >> (32u - sh)));
  uint64_t p0 = (uint64_t)m * a0;
  uint64_t p1 = (uint64_t)m * a1 + (p0 >> 32);
  uint32_t hi = (uint32_t)((uint64_t)m * a2 + (p1 >> 32));
  uint32_t k = (hi + 0x20000000u) >> 30;  /* nearest quadrant */
  int32_t hs = (int32_t)(hi - (k << 30));  /* fraction in [-1/2, 1/2) of a quadrant, top part */
  /* u32 -> double as 2^52 + u, built in the bits (AVX2 has no unsigned conversion) */
  double f_hi = rlx_f64_from_bits(0x4330000000000000ull | (uint32_t)(hs + 0x40000000)) - 0x1.00000400p52;
  double f_mid = rlx_f64_from_bits(0x4330000000000000ull | (uint32_t)p1) - 0x1p52;
  double f_lo = rlx_f64_from_bits(0x4330000000000000ull | (uint32_t)p0) - 0x1p52;
  double f = f_hi * 0x1p-30 + f_mid * 0x1p-62 + f_lo * 0x1p-94;
  double r = f * 0x1.921fb54442d18p+0;
  int neg = x < 0.0f;
  *q = rlx__sel_u64(neg, (uint64_t)0 - k, (uint64_t)k);
  return rlx__sel_f64(neg, -r, r);
}
#endif
static inline float rlx__sincos_f32(float x, uint64_t quadrant_offset) {
  double xd = (double)x;
  double t = xd * 0x1.45f306dc9c883p-1 + 0x1.8p52;
  double kd = t - 0x1.8p52;
  uint64_t q = rlx_f64_bits(t);
  double r = xd - kd * 0x1.921fb544p+0;
  r = r - kd * 0x1.0b4611a6p-34;
  r = r - kd * 0x1.3198a2e037073p-69;
#if !defined(__OPENCL_VERSION__) && !defined(RLX__GPU_CXX)
  uint64_t q_large;
  double r_large = rlx__reduce_large_f32(x, &q_large);
  uint32_t ax = rlx_f32_bits(x) & 0x7fffffffu;
  int large = ax >= 0x49800000u && ax < 0x7f800000u;  /* 2^20 <= |x| < inf */
  q = rlx__sel_u64(large, q_large, q);
  r = rlx__sel_f64(large, r_large, r);
#endif
  q += quadrant_offset;
  r = rlx__min_f64(r, 0.7854);
  r = rlx__max_f64(r, -0.7854);
  double r2 = r * r;
  double s = 0x1.6ccea8da65e16p-19;
  s = s * r2 - 0x1.a00f7168de336p-13;
  s = s * r2 + 0x1.1111085958c6ep-7;
  s = s * r2 - 0x1.5555554c5a67cp-3;
  s = r + (r * r2) * s;
  double c = -0x1.241c20cbe5a11p-22;
  c = c * r2 + 0x1.a010d2be1d697p-16;
  c = c * r2 - 0x1.6c16b817a8229p-10;
  c = c * r2 + 0x1.5555554ec83cfp-5;
  c = (1.0 - 0.5 * r2) + (r2 * r2) * c;
  uint64_t odd = (uint64_t)0 - (q & 1u);  /* odd quadrant: cos(r), else sin(r) */
  uint64_t v = (rlx_f64_bits(c) & odd) | (rlx_f64_bits(s) & ~odd);
  v ^= (q & 2u) << 62;                     /* quadrants 2 and 3: negate */
  return (float)rlx_f64_from_bits(v);
}
#ifdef __OPENCL_VERSION__
/* OpenCL's built-ins reduce large arguments exactly (4 ulp); there is no vectorizer to please */
static inline float rlx_sin_f32(float x) { return sin(x); }
static inline float rlx_cos_f32(float x) { return cos(x); }
#elif defined(RLX__GPU_CXX)
/* CUDA's sinf/cosf reduce large arguments exactly (2 ulp) without -use_fast_math */
static inline float rlx_sin_f32(float x) { return sinf(x); }
static inline float rlx_cos_f32(float x) { return cosf(x); }
#else
static inline float rlx_sin_f32(float x) {
  return rlx__sel_f32(x == 0.0f, x, rlx__sincos_f32(x, 0u));  /* sin(-0) = -0 */
}
static inline float rlx_cos_f32(float x) { return rlx__sincos_f32(x, 1u); }
#endif

/* ---------------------------------------------------------------- sqrt, rsqrt, rounding */
#if defined(__NO_MATH_ERRNO__) || defined(RLX__GPU_CXX)
/* CUDA's sqrtf is correctly rounded (NVRTC's default -prec-sqrt=true) and sets no errno.
   With -fno-math-errno, sqrt is one vector instruction (and correctly rounded). rsqrt goes
   through double so that it is rounded once (1.0f / sqrtf(x) is off by up to 1.5 ulp). */
static inline float rlx_sqrt_f32(float x) { return sqrtf(x); }
static inline float rlx_rsqrt_f32(float x) { return (float)(1.0 / sqrt((double)x)); }
#else
/* sqrtf keeps a libm call for errno (negative x) unless -fno-math-errno, and that call stops
   the loop from vectorizing, so without the flag sqrt is computed here.
   1/sqrt(x) for positive finite double x to ~3e-11 relative: bit-trick seed (3.4% error)
   and three Newton steps. */
static inline double rlx__rsqrt_approx_f64(double xd) {
  double y = rlx_f64_from_bits(0x5fe6eb50c7b537a9ull - (rlx_f64_bits(xd) >> 1));
  double h = 0.5 * xd;
  y = y * (1.5 - h * y * y);
  y = y * (1.5 - h * y * y);
  y = y * (1.5 - h * y * y);
  return y;
}

/* Correctly rounded: the estimate is within 3e-11, and the candidate is fixed up against the
   squares of the midpoints to its neighbours (exact in double: 25-bit midpoints). */
static inline float rlx_sqrt_f32(float x) {
  double xd = (double)x;
  float s = (float)(xd * rlx__rsqrt_approx_f64(xd));
  uint32_t sb = rlx_f32_bits(s);
  float up = rlx_f32_from_bits(sb + 1u);
  float dn = rlx_f32_from_bits(sb - 1u);
  double mid_hi = 0.5 * ((double)s + (double)up);
  double mid_lo = 0.5 * ((double)s + (double)dn);
  s = rlx__sel_f32(mid_hi * mid_hi < xd, up, s);
  s = rlx__sel_f32(mid_lo * mid_lo > xd, dn, s);
  s = rlx__sel_f32(x == INFINITY, x, s);
  s = rlx__sel_f32(x == 0.0f, x, s);       /* keeps -0 */
  s = rlx__sel_f32(x < 0.0f, NAN, s);
  return rlx__sel_f32(x != x, x, s);
}

/* Within 0.5 ulp + 3e-11 relative (one rounding of the Newton estimate). */
static inline float rlx_rsqrt_f32(float x) {
  float r = (float)rlx__rsqrt_approx_f64((double)x);
  r = rlx__sel_f32(x == INFINITY, 0.0f, r);
  r = rlx__sel_f32(x == 0.0f, rlx__copysign_f32(INFINITY, x), r);
  r = rlx__sel_f32(x < 0.0f, NAN, r);
  return rlx__sel_f32(x != x, x, r);
}
#endif

/* Round half to even (default rounding mode). rintf is one instruction where the target has
   a vector round; otherwise adding and removing 2^23 rounds |x| < 2^23 the same way. */
static inline float rlx_round_f32(float x) {
#if defined(__SSE4_1__) || defined(__aarch64__) || defined(__ARM_NEON) || defined(RLX__GPU_CXX)
  return rintf(x);
#else
  float a = rlx__abs_f32(x);
  float r = (a + 0x1p23f) - 0x1p23f;
  r = rlx__sel_f32(a < 0x1p23f, r, a);     /* large values and NaN are returned as they are */
  return rlx__copysign_f32(r, x);
#endif
}

static inline float rlx_sign_f32(float x) {
  return rlx__sel_f32(x > 0.0f, 1.0f, rlx__sel_f32(x < 0.0f, -1.0f, x));
}

/* Correct but scalar: a loop calling powf does not vectorize. */
static inline float rlx_pow_f32(float x, float y) { return powf(x, y); }
)RLXC"
    R"RLXC(
/* ---------------------------------------------------------------- double (libm) */
static inline double rlx_exp_f64(double x) { return exp(x); }
static inline double rlx_expm1_f64(double x) { return expm1(x); }
static inline double rlx_log_f64(double x) { return log(x); }
static inline double rlx_tanh_f64(double x) { return tanh(x); }
static inline double rlx_erf_f64(double x) { return erf(x); }
static inline double rlx_sin_f64(double x) { return sin(x); }
static inline double rlx_cos_f64(double x) { return cos(x); }
static inline double rlx_sqrt_f64(double x) { return sqrt(x); }
static inline double rlx_rsqrt_f64(double x) { return 1.0 / sqrt(x); }
static inline double rlx_pow_f64(double x, double y) { return pow(x, y); }
static inline double rlx_round_f64(double x) { return rint(x); }
static inline double rlx_sign_f64(double x) { return x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : x); }
static inline double rlx_sigmoid_f64(double x) {
  double e = exp(-fabs(x));
  return (x >= 0.0 ? 1.0 : e) / (1.0 + e);
}
static inline double rlx_silu_f64(double x) {
  double r = x * rlx_sigmoid_f64(x);
  return x < -1000.0 ? -0.0 : r;
}
static inline double rlx_softplus_f64(double x) {
  return (x > 0.0 ? x : 0.0) + log1p(exp(-fabs(x)));
}
static inline double rlx_gelu_erf_f64(double x) {
  double r = 0.5 * x * erfc(-x * 0.70710678118654752440);
  return x < -40.0 ? -0.0 : r;
}
static inline double rlx_gelu_tanh_f64(double x) {
  double u2 = x * (1.5957691216057307117 + 0.071354816272600246 * (x * x));
  double r = x * rlx_sigmoid_f64(u2);
  return x < -40.0 ? -0.0 : r;
}

/* ---------------------------------------------------------------- f16 / bf16 */
static inline float rlx_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t em = h & 0x7fffu;
  uint32_t normal = (em << 13) + 0x38000000u;      /* rebias the exponent: 15 -> 127 */
  uint32_t infnan = (em << 13) | 0x7f800000u;
  float sub = (float)(int32_t)em * 0x1p-24f;       /* zero and subnormals, exact */
  uint32_t bits = rlx__sel_u32(em >= 0x7c00u, infnan, normal);
  bits = rlx__sel_u32(em < 0x0400u, rlx_f32_bits(sub), bits);
  return rlx_f32_from_bits(bits | sign);
}

/* Round to nearest even. Normal results round on mantissa bit 13 (a carry correctly bumps
   the exponent, up to inf); subnormal results let a float addition of 0.5 do the rounding
   (its ulp is the f16 subnormal spacing 2^-24); NaN keeps its top payload bits and is quieted. */
static inline uint16_t rlx_f32_to_f16(float f) {
  uint32_t x = rlx_f32_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t a = x & 0x7fffffffu;
  uint32_t normal = (a - 0x38000000u + 0x0fffu + ((a >> 13) & 1u)) >> 13;
  uint32_t sub = rlx_f32_bits(rlx_f32_from_bits(a) + 0.5f) - 0x3f000000u;
  uint32_t infnan = rlx__sel_u32(a > 0x7f800000u, 0x7e00u | ((a >> 13) & 0x03ffu), 0x7c00u);
  uint32_t h = rlx__sel_u32(a < 0x38800000u, sub, normal);  /* below 2^-14: subnormal f16 */
  h = rlx__sel_u32(a >= 0x47800000u, infnan, h);            /* 65536 and up: inf (or NaN) */
  return (uint16_t)(h | sign);
}

#if !defined(__OPENCL_VERSION__) && !defined(RLX__GPU_CXX)
/* dst[0..n) = src[0..n) as f16 (the host's staged f16 stores, see c_renderer.cpp). The CPU's
   vcvtps2ph where it has one: round to nearest even, overflow to inf, subnormals kept, NaN
   quieted with its top payload bits, which is rlx_f32_to_f16 bit for bit (rlx leaves MXCSR's
   DAZ off, and f32 denormals round to a signed f16 zero either way). */
static inline void rlx_store_f16_n(uint16_t* restrict dst, const float* restrict src, int64_t n) {
  int64_t i = 0;
#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256((__m256i*)(dst + i), _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  if (i < n) {
    const __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
    _mm256_mask_storeu_epi16(dst + i, m, _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  return;
#elif defined(__x86_64__) && defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i*)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
  for (; i < n; ++i) dst[i] = rlx_f32_to_f16(src[i]);
}

/* dst[0..n) = src[0..n) widened from f16 (the host's staged f16 loads): vcvtph2ps where the
   CPU has it, which is exact but quiets a signalling NaN; the quiet bit is cleared again on
   those lanes, so the bits are rlx_f16_to_f32's (and the reference's) for every input. */
static inline void rlx_load_f16_n(float* restrict dst, const uint16_t* restrict src, int64_t n) {
  int64_t i = 0;
#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? (__mmask16)0xffffu : (__mmask16)((1u << (n - i)) - 1u);
    const __m256i h = _mm256_maskz_loadu_epi16(m, src + i);
    const __m512i w = _mm512_cvtepu16_epi32(h);
    const __mmask16 snan = _mm512_cmpeq_epi32_mask(_mm512_and_si512(w, _mm512_set1_epi32(0x7e00)), _mm512_set1_epi32(0x7c00)) &
                           _mm512_test_epi32_mask(w, _mm512_set1_epi32(0x01ff));
    __m512i f = _mm512_castps_si512(_mm512_cvtph_ps(h));
    f = _mm512_mask_andnot_epi32(f, snan, _mm512_set1_epi32(0x00400000), f);
    _mm512_mask_storeu_ps(dst + i, m, _mm512_castsi512_ps(f));
  }
  return;
#elif defined(__x86_64__) && defined(__F16C__) && defined(__AVX2__)
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128((const __m128i*)(src + i));
    const __m256i w = _mm256_cvtepu16_epi32(h);
    const __m256i nan_exp = _mm256_cmpeq_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x7e00)), _mm256_set1_epi32(0x7c00));
    const __m256i payload = _mm256_andnot_si256(_mm256_cmpeq_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x01ff)), _mm256_setzero_si256()),
                                                _mm256_set1_epi32(-1));
    const __m256i quiet_bit = _mm256_and_si256(_mm256_and_si256(nan_exp, payload), _mm256_set1_epi32(0x00400000));
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_andnot_si256(quiet_bit, _mm256_castps_si256(_mm256_cvtph_ps(h)))));
  }
#endif
  for (; i < n; ++i) dst[i] = rlx_f16_to_f32(src[i]);
}
#endif

static inline float rlx_bf16_to_f32(uint16_t h) { return rlx_f32_from_bits((uint32_t)h << 16); }

static inline uint16_t rlx_f32_to_bf16(float f) {
  uint32_t x = rlx_f32_bits(f);
  uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  uint32_t nan = (x >> 16) | 0x0040u;              /* quiet; the high payload bits stay */
  return (uint16_t)rlx__sel_u32((x & 0x7fffffffu) > 0x7f800000u, nan, r);
}

#if !defined(__OPENCL_VERSION__) && !defined(RLX__GPU_CXX)
/* The bf16 twins of rlx_store_f16_n / rlx_load_f16_n: the prelude's conversions in loops of
   their own (vcvtneps2bf16 would flush denormals). With AVX-512 the store is rlx_f32_to_bf16
   in 16 lanes and a narrowing masked store, the tail included (a row of 121: 14 against 16 ns
   for GCC's vectorization of the scalar loop, whose tail was scalar). */
static inline void rlx_store_bf16_n(uint16_t* restrict dst, const float* restrict src, int64_t n) {
  int64_t i = 0;
#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__)
  const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff), quiet = _mm512_set1_epi32(0x40),
                magnitude = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1u);
    const __m512i x = _mm512_castps_si512(_mm512_maskz_loadu_ps(m, src + i));
    const __m512i hi = _mm512_srli_epi32(x, 16);
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(x, _mm512_add_epi32(bias, _mm512_and_si512(hi, one))), 16);
    r = _mm512_mask_mov_epi32(r, _mm512_cmpgt_epu32_mask(_mm512_and_si512(x, magnitude), inf), _mm512_or_si512(hi, quiet));
    _mm512_mask_cvtepi32_storeu_epi16(dst + i, m, r);
  }
#endif
  for (; i < n; ++i) dst[i] = rlx_f32_to_bf16(src[i]);
}
static inline void rlx_load_bf16_n(float* restrict dst, const uint16_t* restrict src, int64_t n) {
  int64_t i;
  for (i = 0; i < n; ++i) dst[i] = rlx_bf16_to_f32(src[i]);
}
#endif

/* x rounded to the nearest f16 / bf16 value (ties to even) and kept in a float: what
   rlx_f16_to_f32(rlx_f32_to_f16(x)) gives, bit for bit over all 2^32 inputs, but computed in
   32-bit lanes only. The round trip through uint16_t made GCC pack and unpack 16-bit vectors
   (1.05 ns per value here); this form vectorizes to ~0.3 ns. Normal results clear the 13
   mantissa bits f16 lacks (a carry bumps the exponent, 65536 and up become inf); below 2^-14
   adding and removing 0.5 rounds to the subnormal spacing 2^-24; NaN is quieted and keeps
   its top 9 payload bits. */
static inline float rlx_round_f16(float f) {
  uint32_t x = rlx_f32_bits(f);
  uint32_t a = x & 0x7fffffffu;
  uint32_t r = (a + 0x0fffu + ((a >> 13) & 1u)) & 0xffffe000u;
  r = rlx__sel_u32(r >= 0x47800000u, 0x7f800000u, r);
  uint32_t sub = rlx_f32_bits((rlx_f32_from_bits(a) + 0.5f) - 0.5f);
  r = rlx__sel_u32(a < 0x38800000u, sub, r);
  r = rlx__sel_u32(a > 0x7f800000u, 0x7fc00000u | (a & 0x007fe000u), r);
  return rlx_f32_from_bits(r | (x & 0x80000000u));
}
#if !defined(__OPENCL_VERSION__) && !defined(RLX__GPU_CXX)
/* dst[0..n) = src[0..n) rounded to f16 and kept in floats, as rlx_round_f16 (the host's staged
   rounding rows, see c_renderer.cpp): the CPU's vcvtps2ph then vcvtph2ps where it has them,
   whose bits are rlx_round_f16's (the f16 in between is never a signalling NaN). The integer
   form costs ~11 vector operations a value; this pair runs at the speed of a copy (100k values:
   19 against 8 us on one Zen 4 core). */
static inline void rlx_round_f16_n(float* restrict dst, const float* restrict src, int64_t n) {
  int64_t i = 0;
#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
  if (i < n) {
    const __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(dst + i, m, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
  }
  return;
#elif defined(__x86_64__) && defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
#endif
  for (; i < n; ++i) dst[i] = rlx_round_f16(src[i]);
}
#endif
static inline float rlx_round_bf16(float f) {
  uint32_t x = rlx_f32_bits(f);
  uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) & 0xffff0000u;
  uint32_t nan = (x & 0xffff0000u) | 0x00400000u;
  return rlx_f32_from_bits(rlx__sel_u32((x & 0x7fffffffu) > 0x7f800000u, nan, r));
}

/* ---------------------------------------------------------------- saturating casts */
/* Clamp first so that the conversion itself only sees in-range values. */
static inline int32_t rlx_f32_to_i32_sat(float x) {
  float c = rlx__sel_f32(x != x, 0.0f, x);
  c = rlx__min_f32(rlx__max_f32(c, -0x1p31f), 0x1.fffffep30f);
  int32_t v = (int32_t)c;
  return (int32_t)rlx__sel_u32(x >= 0x1p31f, (uint32_t)INT32_MAX, (uint32_t)v);
}
static inline int64_t rlx_f32_to_i64_sat(float x) {
  float c = rlx__sel_f32(x != x, 0.0f, x);
  c = rlx__min_f32(rlx__max_f32(c, -0x1p63f), 0x1.fffffep62f);
  int64_t v = (int64_t)c;
  return (int64_t)rlx__sel_u64(x >= 0x1p63f, (uint64_t)INT64_MAX, (uint64_t)v);
}
static inline int8_t rlx_f32_to_i8_sat(float x) {
  float c = rlx__sel_f32(x != x, 0.0f, x);
  return (int8_t)(int32_t)rlx__min_f32(rlx__max_f32(c, -128.0f), 127.0f);
}
static inline uint8_t rlx_f32_to_u8_sat(float x) {
  float c = rlx__sel_f32(x != x, 0.0f, x);
  return (uint8_t)(int32_t)rlx__min_f32(rlx__max_f32(c, 0.0f), 255.0f);
}
static inline int32_t rlx_f64_to_i32_sat(double x) {
  double c = rlx__sel_f64(x != x, 0.0, x);
  return (int32_t)rlx__min_f64(rlx__max_f64(c, -2147483648.0), 2147483647.0);
}
static inline int64_t rlx_f64_to_i64_sat(double x) {
  double c = rlx__sel_f64(x != x, 0.0, x);
  c = rlx__min_f64(rlx__max_f64(c, -0x1p63), 0x1.fffffffffffffp62);
  int64_t v = (int64_t)c;
  return (int64_t)rlx__sel_u64(x >= 0x1p63, (uint64_t)INT64_MAX, (uint64_t)v);
}
static inline int8_t rlx_f64_to_i8_sat(double x) {
  double c = rlx__sel_f64(x != x, 0.0, x);
  return (int8_t)(int32_t)rlx__min_f64(rlx__max_f64(c, -128.0), 127.0);
}
static inline uint8_t rlx_f64_to_u8_sat(double x) {
  double c = rlx__sel_f64(x != x, 0.0, x);
  return (uint8_t)(int32_t)rlx__min_f64(rlx__max_f64(c, 0.0), 255.0);
}

/* ---------------------------------------------------------------- integer helpers */
/* Python semantics: floor division, remainder with the divisor's sign. The divisor is
   replaced before dividing, so neither b == 0 nor INT_MIN / -1 can trap. */
static inline int64_t rlx_floordiv_i64(int64_t a, int64_t b) {
  int64_t d = (b == 0 || b == -1) ? 1 : b;
  int64_t q = a / d;
  int64_t r = a % d;
  q = (r != 0 && ((r ^ d) < 0)) ? q - 1 : q;
  q = b == -1 ? (int64_t)(0u - (uint64_t)a) : q;  /* wraps for INT64_MIN */
  return b == 0 ? 0 : q;
}
static inline int64_t rlx_mod_i64(int64_t a, int64_t b) {
  int64_t d = (b == 0 || b == -1) ? 1 : b;
  int64_t r = a % d;
  r = (r != 0 && ((r ^ d) < 0)) ? r + d : r;
  return b == 0 ? 0 : r;
}
static inline int32_t rlx_floordiv_i32(int32_t a, int32_t b) {
  int32_t d = (b == 0 || b == -1) ? 1 : b;
  int32_t q = a / d;
  int32_t r = a % d;
  q = (r != 0 && ((r ^ d) < 0)) ? q - 1 : q;
  q = b == -1 ? (int32_t)(0u - (uint32_t)a) : q;
  return b == 0 ? 0 : q;
}
static inline int32_t rlx_mod_i32(int32_t a, int32_t b) {
  int32_t d = (b == 0 || b == -1) ? 1 : b;
  int32_t r = a % d;
  r = (r != 0 && ((r ^ d) < 0)) ? r + d : r;
  return b == 0 ? 0 : r;
}

/* Index into an axis of length n: a negative index wraps once (i + n), then the result is
   clamped into [0, n-1]; n <= 0 gives 0. */
static inline int64_t rlx_clamp_index(int64_t i, int64_t n) {
  int64_t nn = n > 0 ? n : 0;
  int64_t j = i < 0 ? i + nn : i;
  j = j < 0 ? 0 : j;
  j = j > nn - 1 ? nn - 1 : j;
  return n > 0 ? j : 0;
}
static inline int32_t rlx_clamp_index_i32(int32_t i, int32_t n) {
  int32_t nn = n > 0 ? n : 0;
  int32_t j = i < 0 ? i + nn : i;
  j = j < 0 ? 0 : j;
  j = j > nn - 1 ? nn - 1 : j;
  return n > 0 ? j : 0;
}

/* ---------------------------------------------------------------- complex (host C only)
   c64 tensors hold (re, im) f32 pairs: exactly a C99 float _Complex. Kernels load them into
   double _Complex and compute there, as the reference interpreter does (std::complex<double>),
   so each result rounds once, when stored. OpenCL C, CUDA and GLSL kernels never see c64.
   No <complex.h>: its macro I would clash with kernel and test code; the parts go through a
   union, and modulus and argument are glibc's own definitions of cabs and carg. */
#if !defined(__OPENCL_VERSION__) && !defined(RLX__GPU_CXX)
typedef union { double _Complex z; double p[2]; } rlx__c64_parts;
/* re + i im without arithmetic (re + im * I would turn an infinite im into a NaN real part) */
static inline double _Complex rlx_cplx(double re, double im) {
  rlx__c64_parts u;
  u.p[0] = re;
  u.p[1] = im;
  return u.z;
}
static inline double rlx_creal(double _Complex z) { rlx__c64_parts u; u.z = z; return u.p[0]; }
static inline double rlx_cimag(double _Complex z) { rlx__c64_parts u; u.z = z; return u.p[1]; }
static inline double _Complex rlx_conj(double _Complex z) { return rlx_cplx(rlx_creal(z), -rlx_cimag(z)); }
static inline double rlx_cabs(double _Complex z) { return hypot(rlx_creal(z), rlx_cimag(z)); }
static inline double rlx_carg(double _Complex z) { return atan2(rlx_cimag(z), rlx_creal(z)); }
#endif

#if defined(__clang__)
#pragma clang diagnostic pop
#endif
#endif /* RLX_C_PRELUDE_INCLUDED */
/* ---- end of rlx C prelude ---- */
)RLXC";

}  // namespace

std::string_view c_prelude() { return kPrelude; }

}  // namespace rlx::codegen
