// rlx/dtype.h: element types of tensors, and conversions of the narrow float formats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace rlx {

// Every element type an rlx value can have. i4/u4 are packed two per byte (low nibble first)
// and only appear as weight storage; c64 is a pair of f32 (real, imaginary).
enum class DType : uint8_t {
  f32, f16, bf16, f64, c64,
  i8, u8, i16, u16, i32, u32, i64, u64,
  boolean,
  i4, u4,
};
inline constexpr int kNumDTypes = 16;

// Name as it appears in text IR: "f32", "bool", "i4", ...
std::string_view dtype_name(DType t);
// Inverse of dtype_name; nullopt for an unknown name.
std::optional<DType> parse_dtype(std::string_view name);
// Storage bits per element (4 for i4/u4, 8 for bool).
int dtype_bits(DType t);
// Bytes needed for `count` elements (packed types round up). No overflow check: see checked.h.
inline size_t dtype_bytes(DType t, size_t count) { return (count * dtype_bits(t) + 7) / 8; }

bool is_float(DType t);    // f32 f16 bf16 f64
bool is_complex(DType t);  // c64
bool is_int(DType t);      // signed or unsigned integers, including packed i4/u4
bool is_signed_int(DType t);
bool is_unsigned_int(DType t);
bool is_packed(DType t);   // i4 u4

// The saturating float -> integer conversion of cast (and of scalar constants given as
// doubles): truncate toward zero, NaN -> 0, clamp to the range of `t` (unsigned targets clamp
// negatives to 0; bool is v != 0). Returns the bit pattern, sign-extended for signed types.
uint64_t float_to_int_bits(double v, DType t);

// IEEE half and bfloat16 conversions (round to nearest even, NaN preserved).
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16_to_f32(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace rlx
