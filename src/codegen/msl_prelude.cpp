#include "msl_prelude.h"

#include "shader_math.h"

namespace rlx::codegen {
namespace {

// The f32 helpers are the HLSL prelude's (shader_math.h), every literal a float (MSL has no
// double; a C++ double literal would make the shim compute in double where Metal does not).
// Integers are 64-bit and 8/16-bit types native, as in C.
constexpr const char* kPreludeHead = R"MSL(/* ---- rlx MSL prelude (src/codegen/msl_prelude.h) ---- */
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

)MSL";

constexpr const char* kPreludeTail = R"MSL(/* ---------------------------------------------------------------- saturating casts */
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

std::string_view msl_prelude() {
  static const std::string text = kPreludeHead + shader_f32_math(CTarget::msl) + kPreludeTail;
  return text;
}

Claim msl_supports(const NodeDesc& n) {
  return c_renderer_supports_32_bit(n, "MSL", "MSL has no 64-bit floats",
                                         "rlx's counter-based random numbers are computed in double, which MSL does not have");
}

}  // namespace rlx::codegen
