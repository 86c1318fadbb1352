// Internal helpers of the reference interpreter: typed element access, index iteration and
// the per-family kernel entry points. Not a public header.
#pragma once

#include <array>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string_view>
#include <vector>

#include "rlx/graph.h"
#include "rlx/tensor.h"

namespace rlx::ref::detail {

// The arithmetic domain of a dtype: floats compute in double, signed integers in int64,
// unsigned integers and bool in uint64, c64 in complex<double>. Integer arithmetic is carried
// out on uint64 bit patterns so that it wraps without UB.
enum class Dom : uint8_t { f, i, u, c };

inline Dom domain(DType t) {
  if (is_float(t)) return Dom::f;
  if (is_complex(t)) return Dom::c;
  if (is_signed_int(t)) return Dom::i;
  return Dom::u;  // unsigned ints and bool
}

using cplx = std::complex<double>;

template <class T>
inline T ld(const uint8_t* p, int64_t i) {
  T v;
  std::memcpy(&v, p + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}
template <class T>
inline void st(uint8_t* p, int64_t i, T v) {
  std::memcpy(p + i * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
}

inline uint8_t nibble(const uint8_t* p, int64_t i) {
  uint8_t b = p[i / 2];
  return (i % 2 == 0) ? (b & 0xf) : (b >> 4);
}
inline void set_nibble(uint8_t* p, int64_t i, uint8_t v) {
  uint8_t& b = p[i / 2];
  v &= 0xf;
  b = (i % 2 == 0) ? static_cast<uint8_t>((b & 0xf0) | v) : static_cast<uint8_t>((b & 0x0f) | (v << 4));
}

// The integer value of element i as 64 bits (sign-extended for signed types, zero-extended
// for unsigned ones, 0/1 for bool). Only for integer and bool dtypes.
inline uint64_t load_bits(const uint8_t* p, DType t, int64_t i) {
  switch (t) {
    case DType::i8: return static_cast<uint64_t>(static_cast<int64_t>(ld<int8_t>(p, i)));
    case DType::i16: return static_cast<uint64_t>(static_cast<int64_t>(ld<int16_t>(p, i)));
    case DType::i32: return static_cast<uint64_t>(static_cast<int64_t>(ld<int32_t>(p, i)));
    case DType::i64: return ld<uint64_t>(p, i);
    case DType::u8: return ld<uint8_t>(p, i);
    case DType::u16: return ld<uint16_t>(p, i);
    case DType::u32: return ld<uint32_t>(p, i);
    case DType::u64: return ld<uint64_t>(p, i);
    case DType::boolean: return ld<uint8_t>(p, i) != 0 ? 1 : 0;
    case DType::i4: {
      uint8_t v = nibble(p, i);
      return static_cast<uint64_t>(static_cast<int64_t>(v >= 8 ? static_cast<int>(v) - 16 : v));
    }
    case DType::u4: return nibble(p, i);
    default: return 0;
  }
}

// Stores the low bits of v (two's complement truncation); bool stores v != 0.
inline void store_bits(uint8_t* p, DType t, int64_t i, uint64_t v) {
  switch (t) {
    case DType::i8:
    case DType::u8: st<uint8_t>(p, i, static_cast<uint8_t>(v)); break;
    case DType::i16:
    case DType::u16: st<uint16_t>(p, i, static_cast<uint16_t>(v)); break;
    case DType::i32:
    case DType::u32: st<uint32_t>(p, i, static_cast<uint32_t>(v)); break;
    case DType::i64:
    case DType::u64: st<uint64_t>(p, i, v); break;
    case DType::boolean: st<uint8_t>(p, i, v != 0 ? 1 : 0); break;
    case DType::i4:
    case DType::u4: set_nibble(p, i, static_cast<uint8_t>(v)); break;
    default: break;
  }
}

// Element i as a double: floats exactly, integers rounded to nearest, c64 its real part.
inline double load_f(const uint8_t* p, DType t, int64_t i) {
  switch (t) {
    case DType::f32: return ld<float>(p, i);
    case DType::f64: return ld<double>(p, i);
    case DType::f16: return f16_to_f32(ld<uint16_t>(p, i));
    case DType::bf16: return bf16_to_f32(ld<uint16_t>(p, i));
    case DType::c64: return ld<float>(p, 2 * i);
    default: break;
  }
  if (is_signed_int(t)) return static_cast<double>(static_cast<int64_t>(load_bits(p, t, i)));
  return static_cast<double>(load_bits(p, t, i));
}

inline cplx load_c(const uint8_t* p, DType t, int64_t i) {
  if (t == DType::c64) return {ld<float>(p, 2 * i), ld<float>(p, 2 * i + 1)};
  return {load_f(p, t, i), 0.0};
}

// Stores a double into any dtype: floats round (f16/bf16 through f32), c64 gets (v, 0),
// integers and bool use float_to_int_bits (saturating; bool is v != 0, NaN -> true).
inline void store_f(uint8_t* p, DType t, int64_t i, double v) {
  switch (t) {
    case DType::f32: st<float>(p, i, static_cast<float>(v)); return;
    case DType::f64: st<double>(p, i, v); return;
    case DType::f16: st<uint16_t>(p, i, f32_to_f16(static_cast<float>(v))); return;
    case DType::bf16: st<uint16_t>(p, i, f32_to_bf16(static_cast<float>(v))); return;
    case DType::c64:
      st<float>(p, 2 * i, static_cast<float>(v));
      st<float>(p, 2 * i + 1, 0.0f);
      return;
    case DType::boolean: st<uint8_t>(p, i, v != 0 ? 1 : 0); return;  // NaN != 0
    default: store_bits(p, t, i, float_to_int_bits(v, t)); return;
  }
}

// Stores an integer (signed when `is_signed`) into a float dtype, rounding once to the target
// where possible (f32 and f64 directly from the 64-bit integer; f16/bf16 through f32).
inline void store_int_as_float(uint8_t* p, DType t, int64_t i, uint64_t v, bool is_signed) {
  const float f = is_signed ? static_cast<float>(static_cast<int64_t>(v)) : static_cast<float>(v);
  const double d = is_signed ? static_cast<double>(static_cast<int64_t>(v)) : static_cast<double>(v);
  switch (t) {
    case DType::f32: st<float>(p, i, f); return;
    case DType::f64: st<double>(p, i, d); return;
    case DType::f16: st<uint16_t>(p, i, f32_to_f16(f)); return;
    case DType::bf16: st<uint16_t>(p, i, f32_to_bf16(f)); return;
    case DType::c64:
      st<float>(p, 2 * i, f);
      st<float>(p, 2 * i + 1, 0.0f);
      return;
    default: return;
  }
}

inline void store_c(uint8_t* p, DType t, int64_t i, cplx v) {
  if (t == DType::c64) {
    st<float>(p, 2 * i, static_cast<float>(v.real()));
    st<float>(p, 2 * i + 1, static_cast<float>(v.imag()));
  } else if (t == DType::boolean) {
    st<uint8_t>(p, i, (v.real() != 0 || v.imag() != 0) ? 1 : 0);
  } else {
    store_f(p, t, i, v.real());
  }
}

// Bit-exact element copy for one dtype (packed i4/u4 copy nibbles).
class ElemCopy {
 public:
  explicit ElemCopy(DType t) : packed_(is_packed(t)), bytes_(dtype_bits(t) / 8) {}
  void operator()(uint8_t* dst, int64_t di, const uint8_t* src, int64_t si) const {
    switch (bytes_) {
      case 1: dst[di] = src[si]; return;
      case 2: std::memcpy(dst + di * 2, src + si * 2, 2); return;
      case 4: std::memcpy(dst + di * 4, src + si * 4, 4); return;
      case 8: std::memcpy(dst + di * 8, src + si * 8, 8); return;
      default:
        if (packed_) set_nibble(dst, di, nibble(src, si));
        return;
    }
  }
  // Copies n consecutive elements.
  void run(uint8_t* dst, int64_t di, const uint8_t* src, int64_t si, int64_t n) const {
    if (!packed_) {
      std::memcpy(dst + di * bytes_, src + si * bytes_, static_cast<size_t>(n * bytes_));
    } else {
      for (int64_t k = 0; k < n; ++k) set_nibble(dst, di + k, nibble(src, si + k));
    }
  }

 private:
  bool packed_;
  int bytes_;
};

// Element strides of `in` broadcast (numpy, right-aligned) to `out`: 0 on broadcast dims.
inline Sizes broadcast_strides(const Sizes& in, const Sizes& out) {
  Sizes s(out.size(), 0);
  Sizes cs = contiguous_strides(in);
  const size_t lead = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d)
    s[lead + d] = (in[d] == 1 && out[lead + d] != 1) ? 0 : cs[d];
  return s;
}

// Visits every index of `sizes` in row-major order, calling f(linear, offsets) where
// offsets[k] = base[k] + sum_d coord[d] * strides[k][d]. No allocation per element.
template <size_t N, class F>
void for_each_strided(const Sizes& sizes, const std::array<const int64_t*, N>& strides,
                      std::array<int64_t, N> base, F&& f) {
  const int r = static_cast<int>(sizes.size());
  for (int64_t d : sizes)
    if (d == 0) return;
  if (r == 0) {
    f(int64_t{0}, base);
    return;
  }
  std::vector<int64_t> coord(r, 0);
  std::array<int64_t, N> off = base;
  const int64_t inner = sizes[r - 1];
  std::array<int64_t, N> inner_stride;
  for (size_t k = 0; k < N; ++k) inner_stride[k] = strides[k][r - 1];
  int64_t lin = 0;
  while (true) {
    std::array<int64_t, N> o = off;
    for (int64_t j = 0; j < inner; ++j) {
      f(lin++, o);
      for (size_t k = 0; k < N; ++k) o[k] += inner_stride[k];
    }
    int d = r - 2;
    for (; d >= 0; --d) {
      ++coord[d];
      for (size_t k = 0; k < N; ++k) off[k] += strides[k][d];
      if (coord[d] < sizes[d]) break;
      for (size_t k = 0; k < N; ++k) off[k] -= strides[k][d] * sizes[d];
      coord[d] = 0;
    }
    if (d < 0) break;
  }
}

// What a kernel gets: the node, its label for messages, its inputs and preallocated outputs
// (zero-filled, with the node's output types).
struct KernelArgs {
  const Node& node;
  std::string_view label;
  std::span<const Tensor* const> in;
  std::span<Tensor> out;
};

// An ErrorCode::unsupported error for `op` on dtype `t`.
inline Status unsupported_dtype(const KernelArgs& k, DType t) {
  return error(ErrorCode::unsupported, k.label, ": the reference interpreter does not implement ",
               op_name(k.node.op), " on ", dtype_name(t));
}

Status run_elementwise(const KernelArgs& k);  // unary, binary, compare, logical, where, cast
Status run_reduce(const KernelArgs& k);       // reduce_* and argmax/argmin
Status run_dot(const KernelArgs& k);
Status run_movement(const KernelArgs& k);
Status run_sparse(const KernelArgs& k);       // the CSR ops in plain double loops (interp_sparse.cpp)
Status run_splat(const KernelArgs& k);        // the splatting ops, through src/splat's kernels (interp_splat.cpp)
Status run_linalg(const KernelArgs& k);       // lu, cholesky, qr, svd, eigh, solves, det (interp_linalg.cpp)

}  // namespace rlx::ref::detail
