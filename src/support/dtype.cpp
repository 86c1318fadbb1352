#include "rlx/dtype.h"

#include <array>
#include <cmath>
#include <limits>

namespace rlx {
namespace {
struct DTypeRow {
  DType type;
  std::string_view name;
  int bits;
};
constexpr std::array<DTypeRow, kNumDTypes> kRows = {{
    {DType::f32, "f32", 32},   {DType::f16, "f16", 16},   {DType::bf16, "bf16", 16},
    {DType::f64, "f64", 64},   {DType::c64, "c64", 64},   {DType::i8, "i8", 8},
    {DType::u8, "u8", 8},      {DType::i16, "i16", 16},   {DType::u16, "u16", 16},
    {DType::i32, "i32", 32},   {DType::u32, "u32", 32},   {DType::i64, "i64", 64},
    {DType::u64, "u64", 64},   {DType::boolean, "bool", 8}, {DType::i4, "i4", 4},
    {DType::u4, "u4", 4},
}};
static_assert(static_cast<int>(DType::u4) + 1 == kNumDTypes, "dtype table out of date");
}  // namespace

std::string_view dtype_name(DType t) { return kRows[static_cast<int>(t)].name; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& r : kRows)
    if (r.name == name) return r.type;
  return std::nullopt;
}

int dtype_bits(DType t) { return kRows[static_cast<int>(t)].bits; }

bool is_float(DType t) {
  return t == DType::f32 || t == DType::f16 || t == DType::bf16 || t == DType::f64;
}
bool is_complex(DType t) { return t == DType::c64; }
bool is_signed_int(DType t) {
  return t == DType::i8 || t == DType::i16 || t == DType::i32 || t == DType::i64 || t == DType::i4;
}
bool is_unsigned_int(DType t) {
  return t == DType::u8 || t == DType::u16 || t == DType::u32 || t == DType::u64 || t == DType::u4;
}
bool is_int(DType t) { return is_signed_int(t) || is_unsigned_int(t); }
bool is_packed(DType t) { return t == DType::i4 || t == DType::u4; }

uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {  // subnormal half (or zero): value = abs * 2^24 rounded
    float af;
    std::memcpy(&af, &abs, 4);
    float scaled = af * 16777216.0f;  // 2^24; exact, then round to nearest even integer
    uint32_t r = static_cast<uint32_t>(std::nearbyint(scaled));
    return static_cast<uint16_t>(sign | r);
  }
  // normal: rebias exponent, round mantissa to 10 bits (nearest even)
  uint32_t mant_round = abs + 0xfffu + ((abs >> 13) & 1u);
  uint32_t h = (mant_round >> 13) - ((127u - 15u) << 10);
  return static_cast<uint16_t>(sign | h);
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {  // subnormal
      float v = std::ldexp(static_cast<float>(mant), -24);
      std::memcpy(&x, &v, 4);
      x |= sign;
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

uint64_t float_to_int_bits(double v, DType t) {
  if (std::isnan(v)) return 0;
  v = std::trunc(v);
  if (t == DType::boolean) return v != 0 ? 1 : 0;
  const int bits = dtype_bits(t);
  if (is_unsigned_int(t)) {
    if (v <= 0) return 0;
    const double lim = std::ldexp(1.0, bits);  // 2^bits, exact
    if (v >= lim) return bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
    return static_cast<uint64_t>(v);
  }
  const double lim = std::ldexp(1.0, bits - 1);  // 2^(bits-1), exact
  if (v >= lim) return static_cast<uint64_t>((bits == 64 ? std::numeric_limits<int64_t>::max()
                                                         : (int64_t{1} << (bits - 1)) - 1));
  if (v < -lim) return static_cast<uint64_t>(bits == 64 ? std::numeric_limits<int64_t>::min()
                                                        : -(int64_t{1} << (bits - 1)));
  return static_cast<uint64_t>(static_cast<int64_t>(v));
}


}  // namespace rlx
