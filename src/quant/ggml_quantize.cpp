// Encoders of llama.cpp's block formats, following its reference (quantize_row_*_ref)
// algorithms: absmax scaling for the 32-value formats, weighted min/scale search
// (make_qkx2_quants) for q4_k / q5_k, and the rmse-searched signed scales (make_qx_quants)
// for q6_k. Float-to-int conversions are clamped first so that NaN or huge inputs cannot
// cause undefined behaviour (their blocks are garbage, as in llama.cpp).
#include <cmath>
#include <cstring>

#include "kernels/ggml_quants.h"
#include "rlx/dtype.h"

namespace rlx::quant {
namespace {

constexpr float kGroupMaxEps = 1e-15f;

// Round to nearest, ties to even (llama.cpp's nearest_int), saturated to +-4194303.
inline int nearest_int(float v) {
  if (!(std::fabs(v) <= 4194303.f)) return v > 0 ? 4194303 : v < 0 ? -4194303 : 0;
  float t = v + 12582912.f;
  int i;
  std::memcpy(&i, &t, 4);
  return (i & 0x007fffff) - 0x00400000;
}

// C's (int8_t)(v) truncation for values in range; clamped instead of undefined outside it.
inline int trunc_i8(float v) {
  if (!(v > -129.f)) return v != v ? 0 : -128;
  if (v >= 128.f) return 127;
  return static_cast<int>(v);
}

inline void put_f16(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}
inline float get_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

inline int imin(int a, int b) { return a < b ? a : b; }
inline int imax(int a, int b) { return a > b ? a : b; }

void q_q4_0(const float* x, uint8_t* y) {
  float amax = 0, max = 0;
  for (int j = 0; j < 32; ++j)
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  const float d = max / -8;
  const float id = d != 0.f ? 1.0f / d : 0.0f;
  put_f16(y, d);
  for (int j = 0; j < 16; ++j) {
    const int a = imin(15, trunc_i8(x[j] * id + 8.5f)), b = imin(15, trunc_i8(x[j + 16] * id + 8.5f));
    y[2 + j] = static_cast<uint8_t>((a & 0xF) | ((b & 0xF) << 4));
  }
}

void q_q4_1(const float* x, uint8_t* y) {
  float mn = x[0], mx = x[0];
  for (int j = 1; j < 32; ++j) {
    if (x[j] < mn) mn = x[j];
    if (x[j] > mx) mx = x[j];
  }
  const float d = (mx - mn) / 15;
  const float id = d != 0.f ? 1.0f / d : 0.0f;
  put_f16(y, d);
  put_f16(y + 2, mn);
  for (int j = 0; j < 16; ++j) {
    const int a = imin(15, trunc_i8((x[j] - mn) * id + 0.5f)), b = imin(15, trunc_i8((x[j + 16] - mn) * id + 0.5f));
    y[4 + j] = static_cast<uint8_t>((a & 0xF) | ((b & 0xF) << 4));
  }
}

// int4_g128 (ggml_quants.h): q4_0's scale choice over 128 values (d = max / -8, max the value
// of largest magnitude), rounding against the stored (f16) d so that the decoded values are as
// close as the format allows; 4 chunks of 32 in q4_0's nibble order.
void q_int4_g128(const float* x, uint8_t* y) {
  float amax = 0, max = 0;
  for (int j = 0; j < 128; ++j)
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  put_f16(y, max / -8);
  const float d = get_f16(y);
  const float id = d != 0.f ? 1.0f / d : 0.0f;
  for (int c = 0; c < 4; ++c)
    for (int j = 0; j < 16; ++j) {
      const int a = imax(0, imin(15, nearest_int(x[32 * c + j] * id) + 8));
      const int b = imax(0, imin(15, nearest_int(x[32 * c + j + 16] * id) + 8));
      y[2 + 16 * c + j] = static_cast<uint8_t>(a | (b << 4));
    }
}

// int4_g128_asym: q4_1's choice (d = (max - min) / 15, m = min), rounding against the stored
// f16 d and m.
void q_int4_g128_asym(const float* x, uint8_t* y) {
  float mn = x[0], mx = x[0];
  for (int j = 1; j < 128; ++j) {
    if (x[j] < mn) mn = x[j];
    if (x[j] > mx) mx = x[j];
  }
  put_f16(y, (mx - mn) / 15);
  put_f16(y + 2, mn);
  const float d = get_f16(y), m = get_f16(y + 2);
  const float id = d != 0.f ? 1.0f / d : 0.0f;
  for (int c = 0; c < 4; ++c)
    for (int j = 0; j < 16; ++j) {
      const int a = imax(0, imin(15, nearest_int((x[32 * c + j] - m) * id)));
      const int b = imax(0, imin(15, nearest_int((x[32 * c + j + 16] - m) * id)));
      y[4 + 16 * c + j] = static_cast<uint8_t>(a | (b << 4));
    }
}

void q_q5_0(const float* x, uint8_t* y) {
  float amax = 0, max = 0;
  for (int j = 0; j < 32; ++j)
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  const float d = max / -16;
  const float id = d != 0.f ? 1.0f / d : 0.0f;
  put_f16(y, d);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const int a = imin(31, trunc_i8(x[j] * id + 16.5f)), b = imin(31, trunc_i8(x[j + 16] * id + 16.5f));
    y[6 + j] = static_cast<uint8_t>((a & 0xF) | ((b & 0xF) << 4));
    qh |= ((static_cast<uint32_t>(a) & 0x10u) >> 4) << j;
    qh |= ((static_cast<uint32_t>(b) & 0x10u) >> 4) << (j + 16);
  }
  std::memcpy(y + 2, &qh, 4);
}

void q_q5_1(const float* x, uint8_t* y) {
  float mn = x[0], mx = x[0];
  for (int j = 1; j < 32; ++j) {
    if (x[j] < mn) mn = x[j];
    if (x[j] > mx) mx = x[j];
  }
  const float d = (mx - mn) / 31;
  const float id = d != 0.f ? 1.0f / d : 0.0f;
  put_f16(y, d);
  put_f16(y + 2, mn);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    // llama.cpp casts to uint8_t here; values are in [0, 31.5] for finite input
    const int a = imin(31, imax(0, trunc_i8((x[j] - mn) * id + 0.5f)));
    const int b = imin(31, imax(0, trunc_i8((x[j + 16] - mn) * id + 0.5f)));
    y[8 + j] = static_cast<uint8_t>((a & 0xF) | ((b & 0xF) << 4));
    qh |= ((static_cast<uint32_t>(a) & 0x10u) >> 4) << j;
    qh |= ((static_cast<uint32_t>(b) & 0x10u) >> 4) << (j + 16);
  }
  std::memcpy(y + 4, &qh, 4);
}

void q_q8_0(const float* x, uint8_t* y) {
  float amax = 0;
  for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  const float d = amax / 127;
  const float id = d != 0.f ? 1.0f / d : 0.0f;
  put_f16(y, d);
  for (int j = 0; j < 32; ++j) {
    // roundf: half away from zero
    const float v = x[j] * id;
    const float r = std::round(v);
    const int q = r != r ? 0 : r > 127.f ? 127 : r < -128.f ? -128 : static_cast<int>(r);
    y[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(q));
  }
}

void q_q8_k(const float* x, uint8_t* y) {
  float amax = 0, max = 0;
  for (int j = 0; j < 256; ++j)
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  std::memset(y, 0, 292);
  if (amax == 0.f) return;
  const float iscale = -127.f / max;
  int8_t* qs = reinterpret_cast<int8_t*>(y + 4);
  for (int j = 0; j < 256; ++j) qs[j] = static_cast<int8_t>(imax(-128, imin(127, nearest_int(iscale * x[j]))));
  for (int g = 0; g < 16; ++g) {
    int16_t s = 0;
    for (int l = 0; l < 16; ++l) s = static_cast<int16_t>(s + qs[16 * g + l]);
    std::memcpy(y + 260 + 2 * g, &s, 2);
  }
  const float d = 1 / iscale;
  std::memcpy(y, &d, 4);
}

// Weighted search for a scale and a (non-positive) min so that x ~ scale * L + min with L in
// [0, nmax]; returns the scale and stores -min. (llama.cpp's make_qkx2_quants.)
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                       uint8_t* Laux, float rmin, float rdelta, int nstep) {
  float mn = x[0], mx = x[0];
  float sum_w = weights[0], sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < mn) mn = x[i];
    if (x[i] > mx) mx = x[i];
    sum_w += weights[i];
    sum_x += weights[i] * x[i];
  }
  if (mn > 0) mn = 0;
  if (mx == mn) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -mn;
    return 0.f;
  }
  float iscale = nmax / (mx - mn);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - mn));
    L[i] = static_cast<uint8_t>(imax(0, imin(nmax, l)));
    const float diff = scale * L[i] + mn - x[i];
    best_error += weights[i] * diff * diff;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (mx - mn);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = imax(0, imin(nmax, nearest_int(iscale * (x[i] - mn))));
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        const float diff = this_scale * Laux[i] + this_min - x[i];
        cur_error += weights[i] * diff * diff;
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        mn = this_min;
      }
    }
  }
  *the_min = -mn;
  return scale;
}

// Signed scale search for symmetric formats, weighting errors by x^2 (llama.cpp's
// make_qx_quants with rmse_type 1); L holds q + nmax in [0, 2 * nmax).
float make_qx_quants(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = imax(-nmax, imin(nmax - 1, nearest_int(iscale * x[i])));
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 != 0.f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = imax(-nmax, imin(nmax - 1, nearest_int(iscale * x[i])));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i)
        L[i] = static_cast<int8_t>(nmax + imax(-nmax, imin(nmax - 1, nearest_int(iscale * x[i]))));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}



// q4_k (nmax 15) and q5_k (nmax 31): 8 sub-blocks of 32 with 6-bit scales and mins. Writes
// d, dmin and the packed scales at y[0..16) and returns the levels in L.
void k_scales_and_levels(const float* x, uint8_t* y, uint8_t* L, int nmax, float rmin, int nstep) {
  uint8_t Laux[32];
  float weights[32], mins[8], scales[8];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  uint8_t* sc = y + 4;
  std::memset(sc, 0, 12);
  for (int j = 0; j < 8; ++j) {
    // llama.cpp stores nearest_int into a uint8_t before the MIN; scales and mins are >= 0
    const int ls = imin(63, nearest_int(inv_scale * scales[j]) & 0xFF);
    const int lm = imin(63, nearest_int(inv_min * mins[j]) & 0xFF);
    if (j < 4) {
      sc[j] = static_cast<uint8_t>(ls);
      sc[j + 4] = static_cast<uint8_t>(lm);
    } else {
      sc[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      sc[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      sc[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  put_f16(y, max_scale / 63.f);
  put_f16(y + 2, max_min / 63.f);
  const float d_all = get_f16(y), dmin_all = get_f16(y + 2);
  for (int j = 0; j < 8; ++j) {
    int s, m;
    scale_min_k4(j, sc, s, m);
    const float d = d_all * s;
    if (d == 0.f) continue;
    const float dm = dmin_all * m;
    for (int ii = 0; ii < 32; ++ii)
      L[32 * j + ii] = static_cast<uint8_t>(imax(0, imin(nmax, nearest_int((x[32 * j + ii] + dm) / d))));
  }
}

void q_q4_k(const float* x, uint8_t* y) {
  uint8_t L[256];
  k_scales_and_levels(x, y, L, 15, -1.f, 20);
  uint8_t* q = y + 16;
  for (int j = 0; j < 256; j += 64) {
    for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
    q += 32;
  }
}

void q_q5_k(const float* x, uint8_t* y) {
  uint8_t L[256];
  k_scales_and_levels(x, y, L, 31, -0.5f, 15);
  uint8_t* qh = y + 16;
  uint8_t* ql = y + 48;
  std::memset(qh, 0, 32);
  uint8_t m1 = 1, m2 = 2;
  for (int n = 0; n < 256; n += 64) {
    for (int j = 0; j < 32; ++j) {
      int l1 = L[n + j];
      if (l1 > 15) {
        l1 -= 16;
        qh[j] |= m1;
      }
      int l2 = L[n + j + 32];
      if (l2 > 15) {
        l2 -= 16;
        qh[j] |= m2;
      }
      ql[j] = static_cast<uint8_t>(l1 | (l2 << 4));
    }
    m1 = static_cast<uint8_t>(m1 << 2);
    m2 = static_cast<uint8_t>(m2 << 2);
    ql += 32;
  }
}

void q_q6_k(const float* x, uint8_t* y) {
  int8_t L[256];
  float scales[16];
  float max_scale = 0, max_abs_scale = 0;
  for (int ib = 0; ib < 16; ++ib) {
    const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
    scales[ib] = scale;
    if (std::fabs(scale) > max_abs_scale) {
      max_abs_scale = std::fabs(scale);
      max_scale = scale;
    }
  }
  std::memset(y, 0, 210);
  if (max_abs_scale < kGroupMaxEps) return;  // all zero: d = 0
  const float iscale = -128.f / max_scale;
  put_f16(y + 208, 1 / iscale);
  int8_t* sc = reinterpret_cast<int8_t*>(y + 192);
  for (int ib = 0; ib < 16; ++ib) sc[ib] = static_cast<int8_t>(imax(-128, imin(127, nearest_int(iscale * scales[ib]))));
  const float d_all = get_f16(y + 208);
  for (int j = 0; j < 16; ++j) {
    const float d = d_all * sc[j];
    if (d == 0.f) continue;
    for (int ii = 0; ii < 16; ++ii) {
      const int l = imax(-32, imin(31, nearest_int(x[16 * j + ii] / d)));
      L[16 * j + ii] = static_cast<int8_t>(l + 32);
    }
  }
  uint8_t* ql = y;
  uint8_t* qh = y + 128;
  for (int j = 0; j < 256; j += 128) {
    for (int l = 0; l < 32; ++l) {
      const int q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF, q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
      ql[l] = static_cast<uint8_t>(q1 | (q3 << 4));
      ql[l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
      qh[l] = static_cast<uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                                   ((L[j + l + 96] >> 4) << 6));
    }
    ql += 64;
    qh += 32;
  }
}

}  // namespace

bool has_quantizer(QType t) {
  switch (t) {
    case QType::q2_k:
    case QType::q3_k:
    case QType::iq4_nl:
    case QType::iq4_xs: return false;
    default: return true;
  }
}

Status quantize_row(QType t, const float* x, uint8_t* y, int64_t n) {
  if (!has_quantizer(t)) return error(ErrorCode::unsupported, "rlx has no ", qtype_name(t), " encoder");
  const QTypeInfo& info = qtype_info(t);
  if (n < 0 || n % info.block_elems != 0)
    return error(ErrorCode::invalid_argument, qtype_name(t), " rows hold multiples of ", info.block_elems,
                 " values, got ", n);
  switch (t) {
    case QType::f32: std::memcpy(y, x, static_cast<size_t>(n) * 4); return Status::ok();
    case QType::f16:
      for (int64_t i = 0; i < n; ++i) put_f16(y + 2 * i, x[i]);
      return Status::ok();
    case QType::bf16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_bf16(x[i]);
        std::memcpy(y + 2 * i, &h, 2);
      }
      return Status::ok();
    default: break;
  }
  void (*fn)(const float*, uint8_t*) = nullptr;
  switch (t) {
    case QType::q4_0: fn = q_q4_0; break;
    case QType::q4_1: fn = q_q4_1; break;
    case QType::q5_0: fn = q_q5_0; break;
    case QType::q5_1: fn = q_q5_1; break;
    case QType::q8_0: fn = q_q8_0; break;
    case QType::q4_k: fn = q_q4_k; break;
    case QType::q5_k: fn = q_q5_k; break;
    case QType::q6_k: fn = q_q6_k; break;
    case QType::q8_k: fn = q_q8_k; break;
    case QType::int4_g128: fn = q_int4_g128; break;
    case QType::int4_g128_asym: fn = q_int4_g128_asym; break;
    default: return error(ErrorCode::internal, "no encoder for ", qtype_name(t));
  }
  const int64_t nb = n / info.block_elems;
  for (int64_t b = 0; b < nb; ++b) fn(x + b * info.block_elems, y + b * info.block_bytes);
  return Status::ok();
}

}  // namespace rlx::quant
