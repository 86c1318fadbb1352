// kernels/ggml_quants.h: llama.cpp's (ggml's) weight formats, block by block: decoders for every
// format rlx reads from GGUF files and encoders for the common ones.
//
// The block layouts, scales and rounding follow ggml-quants.c / ggml-common.h (written anew
// from their published definitions): a row of n values (n a multiple of the block size) is
// n / block_elems blocks of block_bytes bytes each, little-endian, with f16 scales.
//
//   format  block  bytes  layout (in order)
//   f32       1      4    IEEE single
//   f16       1      2    IEEE half
//   bf16      1      2    bfloat16
//   q4_0     32     18    d:f16, qs[16] (elements j and j+16 in the low / high nibble of qs[j]),
//                         x = d * (q - 8)
//   q4_1     32     20    d:f16, m:f16, qs[16]; x = d * q + m
//   q5_0     32     22    d:f16, qh[4] (bit j = 5th bit of element j), qs[16]; x = d * (q - 16)
//   q5_1     32     24    d:f16, m:f16, qh[4], qs[16]; x = d * q + m
//   q8_0     32     34    d:f16, qs[32] int8; x = d * q
//   q2_k    256     84    scales[16] (low nibble scale, high nibble min per 16 values), qs[64],
//                         d:f16, dmin:f16; x = d * sc * q - dmin * m
//   q3_k    256    110    hmask[32], qs[64], scales[12] (16 six-bit scales, offset 32), d:f16;
//                         x = d * (sc - 32) * (q - (hbit ? 0 : 4))
//   q4_k    256    144    d:f16, dmin:f16, scales[12] (8 six-bit scales and mins), qs[128];
//                         x = d * sc * q - dmin * m, in 32-value sub-blocks
//   q5_k    256    176    d, dmin, scales[12], qh[32], qs[128]; like q4_k with a 5th bit
//   q6_k    256    210    ql[128], qh[64], scales[16] int8, d:f16; x = d * sc * (q - 32)
//   q8_k    256    292    d:f32, qs[256] int8, bsums[16] int16 (sums of 16 quants); x = d * q
//   iq4_nl   32     18    d:f16, qs[16]; x = d * kIq4nlValues[nibble]
//   iq4_xs  256    136    d:f16, scales_h:u16, scales_l[4], qs[128]; x = d * (ls - 32) * kIq4nlValues[nibble]
//
// and two rlx formats (not ggml's; `rlx quantize --scheme int4-g128[-asym]`, docs/quantization.md):
//   int4_g128       128   66    d:f16, qs[64]: 4 chunks of 32 values laid out as q4_0's qs (value
//                               32c + j in the low nibble of qs[16c + j], 32c + 16 + j in the high
//                               one); x = d * (q - 8)
//   int4_g128_asym  128   68    d:f16, m:f16, qs[64] as above; x = d * q + m
// In GGUF files they carry the type ids GgmlType::rlx_int4_g128 / rlx_int4_g128_asym (rlx/gguf.h),
// far outside ggml's range, so that other readers reject them as an unknown type.
//
// The encoders are llama.cpp's reference ones (quantize_row_*_ref): the same choices of scale,
// min and rounding, so dequantize(quantize(x)) has the error llama.cpp's formats have. The
// int4_g128 encoders scale as q4_0 / q4_1 do (d = -max/8 with max the value of largest |x|;
// d = (max - min) / 15, m = min) but round against the f16-rounded d and m that are stored, so
// |x - decoded| <= |d| (symmetric; <= |d| / 2 for values on max's side) and
// <= d / 2 + |min| * 2^-11 (asymmetric).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "rlx/status.h"

namespace rlx::quant {

enum class QType : uint8_t {
  f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_k, q3_k, q4_k, q5_k, q6_k, q8_k, iq4_nl, iq4_xs,
  int4_g128, int4_g128_asym,  // rlx's own (see above)
};
inline constexpr int kNumQTypes = 18;

struct QTypeInfo {
  QType type;
  std::string_view name;  // lower case, as rlx's quant_format() and `dequantize {format}` spell it
  int64_t block_elems;
  int64_t block_bytes;
  uint32_t ggml_type;     // GGML_TYPE_* id in GGUF files
};

const QTypeInfo& qtype_info(QType t);
inline std::string_view qtype_name(QType t) { return qtype_info(t).name; }
// "q4_k" or "Q4_K" (any case); nullopt if rlx has no codec of that name.
std::optional<QType> qtype_from_name(std::string_view name);
// The codec for GGML type id `ggml_type`, or nullopt.
std::optional<QType> qtype_from_ggml(uint32_t ggml_type);

// Bytes of a row of n values: nullopt unless n > 0 is a multiple of the block size (and the
// result fits in int64).
std::optional<int64_t> row_bytes(QType t, int64_t n);

// The 16 levels of iq4_nl / iq4_xs.
extern const int8_t kIq4nlValues[16];

// The 6-bit scale `sc` and min `m` of sub-block j (0..7) of a q4_k / q5_k block's 12 scale
// bytes `q` (the packing llama.cpp's get_scale_min_k4 reads).
inline void scale_min_k4(int j, const uint8_t* q, int& sc, int& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Decodes one block (block_elems values) at `blk` into dst.
void dequantize_block(QType t, const uint8_t* blk, float* dst);
// Decodes n values (n a multiple of the block size; the caller checks) from src into dst.
void dequantize_row(QType t, const uint8_t* src, float* dst, int64_t n);
// Checked form: src holds exactly the rows of dst.size() values each of `cols` values.
Status dequantize(QType t, std::span<const uint8_t> src, int64_t cols, std::span<float> dst);

// Whether quantize_row encodes `t` (f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q4_k, q5_k,
// q6_k, q8_k, int4_g128, int4_g128_asym; not q2_k, q3_k, iq4_nl, iq4_xs).
bool has_quantizer(QType t);
// Encodes n values (n a multiple of the block size) of src into dst (row_bytes(t, n) bytes).
// Non-finite inputs do not cause undefined behaviour, but their blocks decode to garbage.
// unsupported if there is no encoder for `t`; invalid_argument for a bad n.
Status quantize_row(QType t, const float* src, uint8_t* dst, int64_t n);

}  // namespace rlx::quant
