// Decoders of llama.cpp's block formats (see ggml_quants.h for the layouts). Plain scalar
// code: these are the ground truth the CPU kernels are tested against, and what the GGUF
// converter and loader use.
#include "ggml_quants.h"

#include <array>
#include <cctype>
#include <cmath>
#include <cstring>

#include "rlx/checked.h"
#include "rlx/dtype.h"

namespace rlx::quant {
namespace {

constexpr std::array<QTypeInfo, kNumQTypes> kInfo = {{
    {QType::f32, "f32", 1, 4, 0},        {QType::f16, "f16", 1, 2, 1},
    {QType::bf16, "bf16", 1, 2, 30},     {QType::q4_0, "q4_0", 32, 18, 2},
    {QType::q4_1, "q4_1", 32, 20, 3},    {QType::q5_0, "q5_0", 32, 22, 6},
    {QType::q5_1, "q5_1", 32, 24, 7},    {QType::q8_0, "q8_0", 32, 34, 8},
    {QType::q2_k, "q2_k", 256, 84, 10},  {QType::q3_k, "q3_k", 256, 110, 11},
    {QType::q4_k, "q4_k", 256, 144, 12}, {QType::q5_k, "q5_k", 256, 176, 13},
    {QType::q6_k, "q6_k", 256, 210, 14}, {QType::q8_k, "q8_k", 256, 292, 15},
    {QType::iq4_nl, "iq4_nl", 32, 18, 20}, {QType::iq4_xs, "iq4_xs", 256, 136, 23},
    // rlx's own: GGUF type ids GgmlType::rlx_int4_g128 / rlx_int4_g128_asym (rlx/gguf.h)
    {QType::int4_g128, "int4_g128", 128, 66, 0x524C0001}, {QType::int4_g128_asym, "int4_g128_asym", 128, 68, 0x524C0002},
}};

inline float h2f(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}


void dq_q4_0(const uint8_t* b, float* y) {
  const float d = h2f(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>((qs[j] & 0xF) - 8);
    y[j + 16] = d * static_cast<float>((qs[j] >> 4) - 8);
  }
}

// int4_g128[_asym]: 4 chunks of 32 values, each laid out as q4_0's 16 bytes.
void dq_int4_g128(const uint8_t* b, float* y, bool asym) {
  const float d = h2f(b), m = asym ? h2f(b + 2) : 0.f;
  const uint8_t* qs = b + (asym ? 4 : 2);
  // symmetric: d * (q - 8), one rounding; asymmetric: fma(d, q, m), one rounding, as the vector
  // kernels compute it, so every path decodes to the same floats
  for (int c = 0; c < 4; ++c)
    for (int j = 0; j < 16; ++j) {
      const int lo = qs[16 * c + j] & 0xF, hi = qs[16 * c + j] >> 4;
      y[32 * c + j] = asym ? std::fma(d, static_cast<float>(lo), m) : d * static_cast<float>(lo - 8);
      y[32 * c + j + 16] = asym ? std::fma(d, static_cast<float>(hi), m) : d * static_cast<float>(hi - 8);
    }
}

void dq_q4_1(const uint8_t* b, float* y) {
  const float d = h2f(b), m = h2f(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(qs[j] & 0xF) + m;
    y[j + 16] = d * static_cast<float>(qs[j] >> 4) + m;
  }
}

void dq_q5_0(const uint8_t* b, float* y) {
  const float d = h2f(b);
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  const uint8_t* qs = b + 6;
  for (int j = 0; j < 16; ++j) {
    const int h0 = ((qh >> j) & 1) << 4, h1 = ((qh >> (j + 16)) & 1) << 4;
    y[j] = d * static_cast<float>(((qs[j] & 0xF) | h0) - 16);
    y[j + 16] = d * static_cast<float>(((qs[j] >> 4) | h1) - 16);
  }
}

void dq_q5_1(const uint8_t* b, float* y) {
  const float d = h2f(b), m = h2f(b + 2);
  uint32_t qh;
  std::memcpy(&qh, b + 4, 4);
  const uint8_t* qs = b + 8;
  for (int j = 0; j < 16; ++j) {
    const int h0 = ((qh >> j) & 1) << 4, h1 = ((qh >> (j + 16)) & 1) << 4;
    y[j] = d * static_cast<float>((qs[j] & 0xF) | h0) + m;
    y[j + 16] = d * static_cast<float>((qs[j] >> 4) | h1) + m;
  }
}

void dq_q8_0(const uint8_t* b, float* y) {
  const float d = h2f(b);
  const int8_t* qs = reinterpret_cast<const int8_t*>(b + 2);
  for (int j = 0; j < 32; ++j) y[j] = d * static_cast<float>(qs[j]);
}

void dq_q2_k(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const uint8_t* q = b + 16;
  const float d = h2f(b + 80), dmin = h2f(b + 82);
  int is = 0;
  for (int half = 0; half < 2; ++half) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int part = 0; part < 2; ++part) {
        const uint8_t sc = scales[is++];
        const float dl = d * static_cast<float>(sc & 0xF), ml = dmin * static_cast<float>(sc >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * static_cast<float>((q[l + 16 * part] >> shift) & 3) - ml;
      }
    }
    q += 32;
  }
}

// The 16 six-bit scales of a q3_k block (12 packed bytes), minus 32.
void q3_k_scales(const uint8_t* s, int* out) {
  for (int j = 0; j < 4; ++j) {
    out[j] = ((s[j] & 0xF) | (((s[8 + j] >> 0) & 3) << 4)) - 32;
    out[j + 4] = ((s[4 + j] & 0xF) | (((s[8 + j] >> 2) & 3) << 4)) - 32;
    out[j + 8] = ((s[j] >> 4) | (((s[8 + j] >> 4) & 3) << 4)) - 32;
    out[j + 12] = ((s[4 + j] >> 4) | (((s[8 + j] >> 6) & 3) << 4)) - 32;
  }
}

void dq_q3_k(const uint8_t* b, float* y) {
  const uint8_t* hm = b;
  const uint8_t* q = b + 32;
  int sc[16];
  q3_k_scales(b + 96, sc);
  const float d = h2f(b + 108);
  int is = 0;
  uint8_t m = 1;
  for (int half = 0; half < 2; ++half) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int part = 0; part < 2; ++part) {
        const float dl = d * static_cast<float>(sc[is++]);
        for (int l = 0; l < 16; ++l) {
          const int idx = l + 16 * part;
          const int v = ((q[idx] >> shift) & 3) - ((hm[idx] & m) ? 0 : 4);
          *y++ = dl * static_cast<float>(v);
        }
      }
      m <<= 1;
    }
    q += 32;
  }
}

void dq_q4_k(const uint8_t* b, float* y) {
  const float d = h2f(b), dmin = h2f(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* q = b + 16;
  for (int j = 0; j < 4; ++j) {
    int sc, m;
    scale_min_k4(2 * j, scales, sc, m);
    const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
    scale_min_k4(2 * j + 1, scales, sc, m);
    const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    q += 32;
  }
}

void dq_q5_k(const uint8_t* b, float* y) {
  const float d = h2f(b), dmin = h2f(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* ql = b + 48;
  uint8_t u1 = 1, u2 = 2;
  for (int j = 0; j < 4; ++j) {
    int sc, m;
    scale_min_k4(2 * j, scales, sc, m);
    const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
    scale_min_k4(2 * j + 1, scales, sc, m);
    const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>((ql[l] & 0xF) + ((qh[l] & u1) ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
    ql += 32;
    u1 <<= 2;
    u2 <<= 2;
  }
}

void dq_q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = h2f(b + 208);
  for (int half = 0; half < 2; ++half) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
      y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
      y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
      y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

void dq_q8_k(const uint8_t* b, float* y) {
  float d;
  std::memcpy(&d, b, 4);
  const int8_t* qs = reinterpret_cast<const int8_t*>(b + 4);
  for (int j = 0; j < 256; ++j) y[j] = d * static_cast<float>(qs[j]);
}

void dq_iq4_nl(const uint8_t* b, float* y) {
  const float d = h2f(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(kIq4nlValues[qs[j] & 0xF]);
    y[j + 16] = d * static_cast<float>(kIq4nlValues[qs[j] >> 4]);
  }
}

void dq_iq4_xs(const uint8_t* b, float* y) {
  const float d = h2f(b);
  uint16_t scales_h;
  std::memcpy(&scales_h, b + 2, 2);
  const uint8_t* scales_l = b + 4;
  const uint8_t* qs = b + 8;
  for (int ib = 0; ib < 8; ++ib) {
    const int ls = ((scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((scales_h >> (2 * ib)) & 3) << 4);
    const float dl = d * static_cast<float>(ls - 32);
    for (int j = 0; j < 16; ++j) {
      y[j] = dl * static_cast<float>(kIq4nlValues[qs[j] & 0xF]);
      y[j + 16] = dl * static_cast<float>(kIq4nlValues[qs[j] >> 4]);
    }
    y += 32;
    qs += 16;
  }
}

}  // namespace

const int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

const QTypeInfo& qtype_info(QType t) { return kInfo[static_cast<size_t>(t)]; }

std::optional<QType> qtype_from_name(std::string_view name) {
  for (const QTypeInfo& i : kInfo) {
    if (i.name.size() != name.size()) continue;
    bool eq = true;
    for (size_t k = 0; k < name.size() && eq; ++k)
      eq = std::tolower(static_cast<unsigned char>(name[k])) == i.name[k];
    if (eq) return i.type;
  }
  return std::nullopt;
}

std::optional<QType> qtype_from_ggml(uint32_t ggml_type) {
  for (const QTypeInfo& i : kInfo)
    if (i.ggml_type == ggml_type) return i.type;
  return std::nullopt;
}

std::optional<int64_t> row_bytes(QType t, int64_t n) {
  const QTypeInfo& i = qtype_info(t);
  if (n <= 0 || n % i.block_elems != 0) return std::nullopt;
  auto r = checked_mul_i64(n / i.block_elems, i.block_bytes);
  if (!r) return std::nullopt;
  return *r;
}

void dequantize_block(QType t, const uint8_t* b, float* y) {
  switch (t) {
    case QType::f32: std::memcpy(y, b, 4); return;
    case QType::f16: *y = h2f(b); return;
    case QType::bf16: {
      uint16_t h;
      std::memcpy(&h, b, 2);
      *y = bf16_to_f32(h);
      return;
    }
    case QType::q4_0: return dq_q4_0(b, y);
    case QType::q4_1: return dq_q4_1(b, y);
    case QType::q5_0: return dq_q5_0(b, y);
    case QType::q5_1: return dq_q5_1(b, y);
    case QType::q8_0: return dq_q8_0(b, y);
    case QType::q2_k: return dq_q2_k(b, y);
    case QType::q3_k: return dq_q3_k(b, y);
    case QType::q4_k: return dq_q4_k(b, y);
    case QType::q5_k: return dq_q5_k(b, y);
    case QType::q6_k: return dq_q6_k(b, y);
    case QType::q8_k: return dq_q8_k(b, y);
    case QType::iq4_nl: return dq_iq4_nl(b, y);
    case QType::iq4_xs: return dq_iq4_xs(b, y);
    case QType::int4_g128: return dq_int4_g128(b, y, false);
    case QType::int4_g128_asym: return dq_int4_g128(b, y, true);
  }
}

void dequantize_row(QType t, const uint8_t* src, float* dst, int64_t n) {
  const QTypeInfo& i = qtype_info(t);
  switch (t) {
    case QType::f32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return;
    case QType::f16:
      for (int64_t k = 0; k < n; ++k) dst[k] = h2f(src + 2 * k);
      return;
    default: break;
  }
  const int64_t nb = n / i.block_elems;
  for (int64_t b = 0; b < nb; ++b) dequantize_block(t, src + b * i.block_bytes, dst + b * i.block_elems);
}

Status dequantize(QType t, std::span<const uint8_t> src, int64_t cols, std::span<float> dst) {
  auto rb = row_bytes(t, cols);
  if (!rb) return error(ErrorCode::invalid_argument, qtype_name(t), " rows hold multiples of ",
                        qtype_info(t).block_elems, " values, got ", cols);
  if (dst.size() % static_cast<size_t>(cols) != 0)
    return error(ErrorCode::invalid_argument, "dequantize: ", dst.size(), " outputs are not rows of ", cols);
  const size_t rows = dst.size() / static_cast<size_t>(cols);
  auto need = checked_mul(rows, static_cast<uint64_t>(*rb));
  if (!need || *need != src.size())
    return error(ErrorCode::invalid_argument, "dequantize: ", rows, " rows of ", cols, " ", qtype_name(t),
                 " values take ", need ? *need : 0, " bytes, got ", src.size());
  for (size_t r = 0; r < rows; ++r)
    dequantize_row(t, src.data() + r * static_cast<size_t>(*rb), dst.data() + r * static_cast<size_t>(cols), cols);
  return Status::ok();
}

}  // namespace rlx::quant
