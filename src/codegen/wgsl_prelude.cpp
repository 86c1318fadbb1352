#include "wgsl_prelude.h"

namespace rlx::codegen {
namespace {

// WGSL has no preprocessor and no overloading: the C renderer's type names are aliases, its
// constants are consts, and every helper exists once, for the one width WGSL computes in.
constexpr const char* kPrelude = R"WGSL(
alias int = i32;
alias uint = u32;
alias float = f32;
alias int8_t = i32;
alias uint8_t = u32;
alias int16_t = i32;
alias uint16_t = u32;
alias int32_t = i32;
alias uint32_t = u32;
/* index arithmetic: 64-bit in the other dialects, 32-bit here (the runtime refuses sizes past it) */
alias int64_t = i32;
alias uint64_t = u32;
/* only in the saturating casts' helper below (f64 tensors are refused) */
alias double = f32;
const INT64_MIN: i32 = -2147483647 - 1;
const INT64_MAX: i32 = 2147483647;
const UINT64_MAX: u32 = 4294967295u;
const INT32_MAX: i32 = 2147483647;

/* NaN and infinity as run-time values: a const expression may not be either */
fn rlx_nan() -> f32 { var bits = 0x7fc00000u; return bitcast<f32>(bits); }
fn rlx_inf() -> f32 { var bits = 0x7f800000u; return bitcast<f32>(bits); }
/* by the bits: a shader compiler may assume x == x */
fn isnan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn isinf(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u; }
fn fabsf(x: f32) -> f32 { return abs(x); }
fn floorf(x: f32) -> f32 { return floor(x); }
fn ceilf(x: f32) -> f32 { return ceil(x); }
fn rlx_i32_to_i64(x: i32) -> i32 { return x; }
fn rlx_extract_i(v: i32, offset: i32, bits: i32) -> i32 { return extractBits(v, u32(offset), u32(bits)); }
fn rlx_extract_u(v: u32, offset: i32, bits: i32) -> u32 { return extractBits(v, u32(offset), u32(bits)); }

/* ---------------------------------------------------------------- f32 math */
/* exp and log in f32 arithmetic to about 1 ulp: WGSL's built-ins may be far less accurate
   (SwiftShader's exp is off by 1e-6 relative), which Adam's updates of tiny gradients amplify.
   exp: x = k ln2 + r with ln2 in two parts (the first with 16 significant bits, so k times it
   is exact), e^r by its Taylor series through r^7 (|r| <= ln2/2: relative error below 6e-9),
   2^k applied in two exact steps. */
fn rlx_exp_f32(x: f32) -> f32 {
  if (isnan(x)) { return x; }
  if (x > 88.7228394) { return rlx_inf(); }
  if (x < -103.972084) { return 0.0; }
  let k = round(x * 1.44269504088896341);
  let r = (x - k * 0.693145751953125) - k * 1.428606765330187045e-06;
  let p = 1.0 + r * (1.0 + r * (0.5 + r * (0.16666666666666666 + r * (0.041666666666666664 +
          r * (0.008333333333333333 + r * (0.001388888888888889 + r * 0.0001984126984126984))))));
  let k1 = i32(k) / 2;
  let k2 = i32(k) - k1;
  return p * bitcast<f32>(u32(k1 + 127) << 23u) * bitcast<f32>(u32(k2 + 127) << 23u);
}
/* log: x = m 2^e with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(s) with s = (m-1)/(m+1),
   |s| <= 0.1716, by its odd series through s^11 */
fn rlx_log_f32(x: f32) -> f32 {
  if (isnan(x) || x == rlx_inf()) { return x; }
  if (x < 0.0) { return rlx_nan(); }
  if (x == 0.0) { return -rlx_inf(); }
  var v = x;
  var e = 0;
  if (v < 1.17549435e-38) {  /* subnormal: scale into the normal range first */
    v = v * 16777216.0;
    e = -24;
  }
  let bits = bitcast<u32>(v);
  e = e + i32((bits >> 23u) & 0xffu) - 127;
  var m = bitcast<f32>((bits & 0x007fffffu) | 0x3f800000u);
  if (m > 1.41421356) {
    m = m * 0.5;
    e = e + 1;
  }
  let s = (m - 1.0) / (m + 1.0);
  let s2 = s * s;
  let t = s2 * (0.3333333333333333 + s2 * (0.2 + s2 * (0.14285714285714285 + s2 * (0.1111111111111111 + s2 * 0.09090909090909091))));
  let lm = 2.0 * s + 2.0 * s * t;
  return f32(e) * 0.693145751953125 + (lm + f32(e) * 1.428606765330187045e-06);
}
fn rlx_sqrt_f32(x: f32) -> f32 {
  if (x < 0.0) { return rlx_nan(); }
  return sqrt(x);
}
fn rlx_rsqrt_f32(x: f32) -> f32 {
  if (x < 0.0) { return rlx_nan(); }
  if (x == 0.0) { return select(rlx_inf(), -rlx_inf(), (bitcast<u32>(x) >> 31u) != 0u); }
  if (isinf(x)) { return 0.0; }
  return 1.0 / sqrt(x);
}
fn rlx_tanh_f32(x: f32) -> f32 {
  if (isnan(x)) { return x; }
  let a = min(abs(x), 10.0);
  var r: f32;
  if (a < 0.5) {
    /* odd Taylor series through a^17 */
    let s = a * a;
    var p = 6404582.0 / 10854718875.0;
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
  return select(r, -r, x < 0.0);
}
fn rlx_sigmoid_f32(x: f32) -> f32 {
  if (isnan(x)) { return x; }
  let e = rlx_exp_f32(-abs(x));
  return select(e, 1.0, x >= 0.0) / (1.0 + e);
}
/* erf as in the C prelude: a + a*P(a^2) below 0.875, 1 - exp(Q(a)) above (a clamped to 6) */
fn rlx_erf_f32(x: f32) -> f32 {
  if (isnan(x)) { return x; }
  let a = abs(x);
  var r: f32;
  if (a < 0.875) {
    let s = a * a;
    var p = -6.203255034e-04;
    p = p * s + 5.032181274e-03;
    p = p * s + -2.679146267e-02;
    p = p * s + 1.128245518e-01;
    p = p * s + -3.761255145e-01;
    p = p * s + 1.283791512e-01;
    r = a + a * p;
  } else {
    let t = min(a, 6.0);
    var q = 1.142501446e-06;
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
  return select(r, -r, x < 0.0);
}
/* sin and cos: x = k*pi/2 + r with pi/2 in three parts (the first with 8 significant bits, so
   k times it is exact while |k| < 2^16), and from |x| = 2^16 on the C prelude's Payne-Hanek
   reduction in 32-bit words (products in 16-bit halves: WGSL has no umulExtended); then the
   C prelude's polynomials in r^2 */
var<private> rlx_x_two_over_pi: array<u32, 8> = array<u32, 8>(0u, 0xa2f9836eu, 0x4e441529u, 0xfc2757d1u,
                                                              0xf534ddc0u, 0xdb629599u, 0x3c439041u, 0xfe5163abu);
fn rlx_x_window(hi: u32, lo: u32, sh: u32) -> u32 { if (sh == 0u) { return hi; } return (hi << sh) | (lo >> (32u - sh)); }
fn rlx_x_mul32(a: u32, b: u32) -> vec2<u32> {  /* (high, low) words of a * b */
  let ll = (a & 0xffffu) * (b & 0xffffu);
  let lh = (a & 0xffffu) * (b >> 16u);
  let hl = (a >> 16u) * (b & 0xffffu);
  let hh = (a >> 16u) * (b >> 16u);
  let mid = (ll >> 16u) + (lh & 0xffffu) + (hl & 0xffffu);
  return vec2<u32>(hh + (lh >> 16u) + (hl >> 16u) + (mid >> 16u), (mid << 16u) | (ll & 0xffffu));
}
/* x = (k + f) pi/2 for |x| >= 2^16: the reduced r = f pi/2 and the quadrant k */
struct RlxReduced { r: f32, q: u32 }
fn rlx_x_reduce_large_f32(x: f32) -> RlxReduced {
  let ax = bitcast<u32>(x) & 0x7fffffffu;
  let m = (ax & 0x007fffffu) | 0x00800000u;
  let g = clamp(i32(ax >> 23u) - 120, 0, 134);
  let j = u32(g) >> 5u;
  let sh = u32(g) & 31u;
  let a2 = rlx_x_window(rlx_x_two_over_pi[j], rlx_x_two_over_pi[j + 1u], sh);
  let a1 = rlx_x_window(rlx_x_two_over_pi[j + 1u], rlx_x_two_over_pi[j + 2u], sh);
  let a0 = rlx_x_window(rlx_x_two_over_pi[j + 2u], rlx_x_two_over_pi[j + 3u], sh);
  let p0 = rlx_x_mul32(m, a0);
  let p1 = rlx_x_mul32(m, a1);
  let mid = p1.y + p0.x;
  let hi = m * a2 + p1.x + select(0u, 1u, mid < p1.y);
  let k = (hi + 0x20000000u) >> 30u;
  let hs = i32(hi - (k << 30u));
  let f = f32(hs) * 9.313225746154785e-10 + f32(mid) * 2.168404344971009e-19;
  let r = f * 1.5707963267948966;
  let q = select(k, 0u - k, x < 0.0);
  return RlxReduced(select(r, -r, x < 0.0), q);
}
fn rlx_x_sincos_f32(x: f32, quadrant_offset: u32) -> f32 {
  let k = round(x * 0.63661977236758134);
  var q = u32(i32(k)) + quadrant_offset;
  var r = x - k * 1.5703125;
  r = r - k * 4.837512969970703125e-4;
  r = r - k * 7.549789954891882e-8;
  if (abs(x) >= 65536.0) {  /* inf and NaN are handled by the callers */
    let rq = rlx_x_reduce_large_f32(x);
    r = rq.r;
    q = rq.q + quadrant_offset;
  }
  r = clamp(r, -0.7854, 0.7854);
  let r2 = r * r;
  var s = 2.71802592273128e-06;
  s = s * r2 - 0.00019839302265347588;
  s = s * r2 + 0.008333329273858516;
  s = s * r2 - 0.1666666664053088;
  s = r + (r * r2) * s;
  var c = -2.7204852126022577e-07;
  c = c * r2 + 2.4799449186172105e-05;
  c = c * r2 - 0.0013888883458223011;
  c = c * r2 + 0.04166666661900075;
  c = (1.0 - 0.5 * r2) + (r2 * r2) * c;
  let v = select(s, c, (q & 1u) != 0u);
  return select(v, -v, (q & 2u) != 0u);
}
fn rlx_sin_f32(x: f32) -> f32 {
  if (isnan(x) || isinf(x)) { return rlx_nan(); }
  if (x == 0.0) { return x; }
  return rlx_x_sincos_f32(x, 0u);
}
fn rlx_cos_f32(x: f32) -> f32 {
  if (isnan(x) || isinf(x)) { return rlx_nan(); }
  return rlx_x_sincos_f32(x, 1u);
}
/* C's powf: special cases by the C standard, the rest through exp2(y log2 |x|) */
fn rlx_pow_f32(x: f32, y: f32) -> f32 {
  if (y == 0.0 || x == 1.0) { return 1.0; }
  if (isnan(x) || isnan(y)) { return rlx_nan(); }
  let ay = abs(y);
  let integer = floor(y) == y;
  let odd = integer && ay < 16777216.0 && (i32(ay) & 1) == 1;
  if (isinf(y)) {
    if (abs(x) == 1.0) { return 1.0; }
    if ((abs(x) < 1.0) == (y > 0.0)) { return 0.0; }
    return rlx_inf();
  }
  if (x == 0.0) {
    if (y < 0.0) { return select(rlx_inf(), select(rlx_inf(), -rlx_inf(), (bitcast<u32>(x) >> 31u) != 0u), odd); }
    return select(0.0, x, odd);
  }
  if (isinf(x)) {
    let m = select(0.0, rlx_inf(), y > 0.0);
    return select(m, -m, x < 0.0 && odd);
  }
  if (x < 0.0 && !integer) { return rlx_nan(); }
  let m = exp2(y * log2(abs(x)));
  return select(m, -m, x < 0.0 && odd);
}
fn rlx_round_f32(x: f32) -> f32 { return round(x); }
fn rlx_sign_f32(x: f32) -> f32 { return select(select(x, -1.0, x < 0.0), 1.0, x > 0.0); }
/* C's fmodf, exactly: subtract b 2^k for k from the exponent difference down to 0 (each
   subtraction is exact); the result takes a's sign */
fn rlx_frexp_exp_f32(x: f32) -> i32 {
  var v = x;
  var bias = 126;
  if (v < 1.17549435e-38) {
    v = v * 16777216.0;
    bias = bias + 24;
  }
  return i32((bitcast<u32>(v) >> 23u) & 0xffu) - bias;
}
fn rlx_pow2_f32(n: i32) -> f32 { return bitcast<f32>(u32(n + 127) << 23u); }
fn fmodf(a: f32, b: f32) -> f32 {
  if (isnan(a) || isnan(b) || isinf(a) || b == 0.0) { return rlx_nan(); }
  if (isinf(b)) { return a; }
  var r = abs(a);
  let d = abs(b);
  if (r >= d) {
    let ea = rlx_frexp_exp_f32(r);
    let eb = rlx_frexp_exp_f32(d);
    var s = d;
    var k = ea - eb;
    for (; k > 100; k = k - 100) { s = s * rlx_pow2_f32(100); }
    s = s * rlx_pow2_f32(k);
    for (var i = ea - eb; i >= 0; i--) {
      if (r >= s) { r = r - s; }
      s = s * 0.5;
    }
  }
  return select(r, -r, a < 0.0 || (a == 0.0 && (bitcast<u32>(a) >> 31u) != 0u));
}
fn rlx_fmod_floor_f32(a: f32, b: f32) -> f32 {
  let r = fmodf(a, b);
  return select(r, r + b, r != 0.0 && ((r < 0.0) != (b < 0.0)));
}

/* ---------------------------------------------------------------- saturating casts */
fn rlx_f32_to_i32_sat(x: f32) -> i32 {
  if (isnan(x)) { return 0; }
  if (x >= 2147483648.0) { return INT32_MAX; }
  if (x <= -2147483648.0) { return -INT32_MAX - 1; }
  return i32(x);
}
fn rlx_u32_to_f32(x: u32) -> f32 { return f32(x >> 16u) * 65536.0 + f32(x & 0xffffu); }
fn rlx_i32_to_f32(x: i32) -> f32 { return f32(x >> 16u) * 65536.0 + f32(x & 0xffff); }
fn rlx_f32_to_u32_sat(x: f32) -> u32 {
  if (isnan(x) || x <= 0.0) { return 0u; }
  if (x >= 4294967296.0) { return 4294967295u; }
  return u32(x);
}
fn rlx_f64_to_range_sat(x: f32, lo: f32, hi: f32) -> f32 {
  if (isnan(x)) { return 0.0; }
  if (x < lo) { return lo; }
  if (x > hi) { return hi; }
  return trunc(x);
}
fn rlx_f32_to_i8_sat(x: f32) -> i32 { return select(i32(clamp(x, -128.0, 127.0)), 0, isnan(x)); }
fn rlx_f32_to_u8_sat(x: f32) -> u32 { return select(u32(clamp(x, 0.0, 255.0)), 0u, isnan(x)); }

/* ---------------------------------------------------------------- integer helpers (32-bit) */
fn rlx_tdiv_i64(a: i32, b: i32) -> i32 {
  if (b == 0) { return 0; }
  if (b == -1) { return -a; }
  return a / b;
}
fn rlx_trem_i64(a: i32, b: i32) -> i32 {
  if (b == 0 || b == -1) { return 0; }
  return a - (a / b) * b;
}
fn rlx_mod_i64(a: i32, b: i32) -> i32 {
  if (b == 0 || b == -1) { return 0; }
  let r = a - (a / b) * b;
  return select(r, r + b, r != 0 && ((r ^ b) < 0));
}
fn rlx_ipow_i64(base: i32, e_in: i32) -> i32 {
  if (e_in < 0) { return select(select(0, select(1, -1, (e_in & 1) != 0), base == -1), 1, base == 1); }
  var r = 1u;
  var b = u32(base);
  var e = e_in;
  while (e != 0) {
    if ((e & 1) != 0) { r = r * b; }
    b = b * b;
    e = e >> 1u;
  }
  return i32(r);
}
fn rlx_ipow_u64(b_in: u32, e_in: u32) -> u32 {
  var r = 1u;
  var b = b_in;
  var e = e_in;
  while (e != 0u) {
    if ((e & 1u) != 0u) { r = r * b; }
    b = b * b;
    e = e >> 1u;
  }
  return r;
}

/* ---------------------------------------------------------------- f16 / bf16 (exact) */
fn rlx_f16_to_f32(h: u32) -> f32 {
  let sign = (h & 0x8000u) << 16u;
  let em = h & 0x7fffu;
  var bits: u32;
  if (em >= 0x7c00u) { bits = (em << 13u) | 0x7f800000u; }
  else if (em < 0x0400u) { bits = bitcast<u32>(f32(em) * 5.9604644775390625e-8); }
  else { bits = (em << 13u) + 0x38000000u; }
  return bitcast<f32>(bits | sign);
}
fn rlx_f32_to_f16(f: f32) -> u32 {
  let x = bitcast<u32>(f);
  let sign = (x >> 16u) & 0x8000u;
  let a = x & 0x7fffffffu;
  var h: u32;
  if (a > 0x7f800000u) { h = 0x7e00u | ((a >> 13u) & 0x03ffu); }
  else if (a >= 0x47800000u) { h = 0x7c00u; }
  else if (a < 0x38800000u) { h = bitcast<u32>(bitcast<f32>(a) + 0.5) - 0x3f000000u; }
  else { h = (a - 0x38000000u + 0x0fffu + ((a >> 13u) & 1u)) >> 13u; }
  return h | sign;
}
fn rlx_bf16_to_f32(h: u32) -> f32 { return bitcast<f32>(h << 16u); }
fn rlx_f32_to_bf16(f: f32) -> u32 {
  let x = bitcast<u32>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) { return (x >> 16u) | 0x0040u; }
  return (x + 0x7fffu + ((x >> 16u) & 1u)) >> 16u;
}
)WGSL";

// After the kernel's `rlx_check` binding: 64-bit integers as 32-bit values, every narrowing
// and every operation whose exact (64-bit) result does not fit setting the word.
constexpr const char* kRangeChecks = R"WGSL(fn rlx_range_error() { atomicOr(&rlx_check[0], 1u); }
fn rlx_const_out_of_range_i64() -> i32 { rlx_range_error(); return 0; }
fn rlx_const_out_of_range_u64() -> u32 { rlx_range_error(); return 0u; }
fn rlx_narrow_i64(v: vec2<i32>) -> i32 { if (v.y != (v.x >> 31u)) { rlx_range_error(); } return v.x; }
fn rlx_narrow_u64(v: vec2<u32>) -> u32 { if (v.y != 0u) { rlx_range_error(); } return v.x; }
fn rlx_widen_i64(v: i32) -> vec2<i32> { return vec2<i32>(v, v >> 31u); }
fn rlx_widen_u64(v: u32) -> vec2<u32> { return vec2<u32>(v, 0u); }
fn rlx_add_i64(a: i32, b: i32) -> i32 { let r = a + b; if (((a ^ r) & (b ^ r)) < 0) { rlx_range_error(); } return r; }
fn rlx_sub_i64(a: i32, b: i32) -> i32 { let r = a - b; if (((a ^ b) & (a ^ r)) < 0) { rlx_range_error(); } return r; }
fn rlx_mul_i64(a: i32, b: i32) -> i32 {
  let r = a * b;
  if (a != 0 && (r / a != b || (a == -1 && b == INT64_MIN))) { rlx_range_error(); }
  return r;
}
fn rlx_add_u64(a: u32, b: u32) -> u32 { let r = a + b; if (r < a) { rlx_range_error(); } return r; }
fn rlx_sub_u64(a: u32, b: u32) -> u32 { if (b > a) { rlx_range_error(); } return a - b; }
fn rlx_mul_u64(a: u32, b: u32) -> u32 { let r = a * b; if (a != 0u && r / a != b) { rlx_range_error(); } return r; }
fn rlx_div_i64c(a: i32, b: i32) -> i32 { if (a == INT64_MIN && b == -1) { rlx_range_error(); } return rlx_tdiv_i64(a, b); }
/* |base| >= 2 passes 32 bits within 32 steps, which rlx_mul_* flags */
fn rlx_ipow_i64c(base: i32, e: i32) -> i32 {
  if (e < 0 || base == 0 || base == 1) { return rlx_ipow_i64(base, e); }
  if (base == -1) { return select(-1, 1, (e & 1) == 0); }
  var r = 1;
  for (var i = 0; i < min(e, 32); i++) { r = rlx_mul_i64(r, base); }
  return r;
}
fn rlx_ipow_u64c(base: u32, e: u32) -> u32 {
  if (base <= 1u) { return rlx_ipow_u64(base, e); }
  var r = 1u;
  for (var i = 0u; i < min(e, 33u); i++) { r = rlx_mul_u64(r, base); }
  return r;
}
fn rlx_f32_to_i64c(x: f32) -> i32 {
  if (!isnan(x) && (x >= 2147483648.0 || x < -2147483648.0)) { rlx_range_error(); }
  return rlx_f32_to_i32_sat(x);
}
fn rlx_f32_to_u64c(x: f32) -> u32 {
  if (!isnan(x) && x >= 4294967296.0) { rlx_range_error(); }
  return rlx_f32_to_u32_sat(x);
}
fn rlx_u32_to_i64c(x: u32) -> i32 { if (x > 2147483647u) { rlx_range_error(); } return i32(x); }
fn rlx_i32_to_u64c(x: i32) -> u32 { if (x < 0) { rlx_range_error(); } return u32(x); }
)WGSL";

}  // namespace

std::string_view wgsl_prelude() { return kPrelude; }

std::string_view wgsl_range_check_helpers() { return kRangeChecks; }

Claim wgsl_supports(const NodeDesc& n) {
  return c_renderer_supports_32_bit(n, "WGSL", "WGSL has no 64-bit floats",
                                         "rlx's counter-based random numbers need 64-bit integers, which WGSL does not have");
}

}  // namespace rlx::codegen
