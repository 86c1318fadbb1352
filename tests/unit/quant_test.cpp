// The ggml block codecs (src/quant) and the CPU's native dequantize / qmatmul kernels.
//
// Decoders are checked against expectations computed here independently, element by element
// from the published bit layouts (not by running the decoder's loops), on blocks of random
// bytes with finite scales. Encoders are checked by their round-trip error: llama.cpp's own
// bound on its synthetic data (test-quantize-fns: sqrt(sum err^2) / n < 0.002), and the
// relative RMSE each format typically has on Gaussian weights. The kernels are compared with
// dequantize-then-matmul computed on the reference device, on fresh random inputs.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <random>

#include "backends/cpu/kernels/qgemm.h"
#include "kernels/ggml_quants.h"
#include "rlx/compile.h"
#include "rlx/dtype.h"
#include "rlx/op_builder.h"
#include "rlx/thread_pool.h"

namespace rlx::quant {
namespace {

uint16_t f16_bits(float v) { return f32_to_f16(v); }
float f16_val(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}
void put_f16(uint8_t* p, float v) {
  uint16_t h = f16_bits(v);
  std::memcpy(p, &h, 2);
}

// A block of random bytes whose f16 scale fields hold finite values in [-2, 2].
std::vector<uint8_t> random_block(QType t, std::mt19937& rng) {
  const QTypeInfo& info = qtype_info(t);
  std::vector<uint8_t> b(static_cast<size_t>(info.block_bytes));
  for (uint8_t& x : b) x = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  auto scale_at = [&](size_t off) { put_f16(b.data() + off, u(rng)); };
  switch (t) {
    case QType::f16: scale_at(0); break;
    case QType::bf16: {
      uint16_t h = f32_to_bf16(u(rng));
      std::memcpy(b.data(), &h, 2);
      break;
    }
    case QType::f32: {
      float f = u(rng);
      std::memcpy(b.data(), &f, 4);
      break;
    }
    case QType::q4_0: case QType::q5_0: case QType::q8_0: case QType::iq4_nl: case QType::iq4_xs: scale_at(0); break;
    case QType::q4_1: case QType::q5_1: case QType::q4_k: case QType::q5_k: scale_at(0); scale_at(2); break;
    case QType::int4_g128: scale_at(0); break;
    case QType::int4_g128_asym: scale_at(0); scale_at(2); break;
    case QType::q2_k: scale_at(80); scale_at(82); break;
    case QType::q3_k: scale_at(108); break;
    case QType::q6_k: scale_at(208); break;
    case QType::q8_k: {
      float f = u(rng);
      std::memcpy(b.data(), &f, 4);
      break;
    }
  }
  return b;
}

int bit(const uint8_t* p, int i) { return (p[i / 8] >> (i % 8)) & 1; }
int nib(const uint8_t* p, int i, bool high) { return high ? p[i] >> 4 : p[i] & 0xF; }

// 6-bit scale and min j of the q4_k / q5_k 12-byte packing, bit by bit: scales 0-3 and mins
// 0-3 are the low 6 bits of bytes 0-3 / 4-7; scales 4-7 take their low nibble from bytes 8-11
// and their top 2 bits from the top of bytes 0-3; mins 4-7 take bytes 8-11's high nibble and
// the top bits of bytes 4-7.
void k4_scale_min(const uint8_t* s, int j, int& sc, int& mn) {
  if (j < 4) {
    sc = s[j] % 64;
    mn = s[j + 4] % 64;
  } else {
    sc = s[j + 4] % 16 + 16 * (s[j - 4] / 64);
    mn = s[j + 4] / 16 + 16 * (s[j] / 64);
  }
}

// The expected value of element e of block b, from the layout description.
double expected(QType t, const uint8_t* b, int e) {
  switch (t) {
    case QType::f32: {
      float f;
      std::memcpy(&f, b, 4);
      return f;
    }
    case QType::f16: return f16_val(b);
    case QType::bf16: {
      uint16_t h;
      std::memcpy(&h, b, 2);
      uint32_t u = static_cast<uint32_t>(h) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    }
    case QType::q4_0: return f16_val(b) * (nib(b + 2, e % 16, e >= 16) - 8);
    case QType::q4_1: return f16_val(b) * nib(b + 4, e % 16, e >= 16) + f16_val(b + 2);
    case QType::q5_0: return f16_val(b) * (nib(b + 6, e % 16, e >= 16) + 16 * bit(b + 2, e) - 16);
    case QType::q5_1: return f16_val(b) * (nib(b + 8, e % 16, e >= 16) + 16 * bit(b + 4, e)) + f16_val(b + 2);
    case QType::q8_0: return f16_val(b) * static_cast<int8_t>(b[2 + e]);
    // rlx's groups of 128: 4 chunks of 32, each as q4_0's nibbles
    case QType::int4_g128: return f16_val(b) * (nib(b + 2 + 16 * (e / 32), e % 16, e % 32 >= 16) - 8);
    case QType::int4_g128_asym: return f16_val(b) * nib(b + 4 + 16 * (e / 32), e % 16, e % 32 >= 16) + f16_val(b + 2);
    case QType::iq4_nl: return f16_val(b) * kIq4nlValues[nib(b + 2, e % 16, e >= 16)];
    case QType::q8_k: {
      float d;
      std::memcpy(&d, b, 4);
      return d * static_cast<int8_t>(b[4 + e]);
    }
    case QType::q2_k: {
      // 128-value halves; in each, 4 two-bit planes of 32 values; each 16 values has a scale byte
      const int half = e / 128, plane = (e % 128) / 32, l = e % 32;
      const int q = (b[16 + 32 * half + l] >> (2 * plane)) & 3;
      const int sc = b[8 * half + 2 * plane + l / 16];
      return f16_val(b + 80) * (sc % 16) * q - f16_val(b + 82) * (sc / 16);
    }
    case QType::q3_k: {
      const int half = e / 128, plane = (e % 128) / 32, l = e % 32;
      const int lo = (b[32 + 32 * half + l] >> (2 * plane)) & 3;
      const int high = bit(b, 8 * l + 4 * half + plane);  // hmask byte l, bit 4 * half + plane
      const int is = 8 * half + 2 * plane + l / 16;
      const uint8_t* s = b + 96;
      const int low4 = is < 8 ? s[is] % 16 : s[is - 8] / 16;
      const int top2 = (s[8 + is % 4] >> (2 * (is / 4))) & 3;
      return f16_val(b + 108) * (low4 + 16 * top2 - 32) * (lo - (high ? 0 : 4));
    }
    case QType::q4_k: {
      const int chunk = e / 64, hi = (e % 64) / 32, l = e % 32;
      int sc, mn;
      k4_scale_min(b + 4, 2 * chunk + hi, sc, mn);
      return f16_val(b) * sc * nib(b + 16 + 32 * chunk, l, hi) - f16_val(b + 2) * mn;
    }
    case QType::q5_k: {
      const int chunk = e / 64, hi = (e % 64) / 32, l = e % 32;
      int sc, mn;
      k4_scale_min(b + 4, 2 * chunk + hi, sc, mn);
      const int q = nib(b + 48 + 32 * chunk, l, hi) + 16 * bit(b + 16, 8 * l + 2 * chunk + hi);
      return f16_val(b) * sc * q - f16_val(b + 2) * mn;
    }
    case QType::q6_k: {
      const int half = e / 128, quarter = (e % 128) / 32, l = e % 32;
      const int low = nib(b + 64 * half + 32 * (quarter % 2), l, quarter >= 2);
      const int high = (b[128 + 32 * half + l] >> (2 * quarter)) & 3;
      const int sc = static_cast<int8_t>(b[192 + 8 * half + 2 * quarter + l / 16]);
      return f16_val(b + 208) * sc * (low + 16 * high - 32);
    }
    case QType::iq4_xs: {
      const int ib = e / 32, j = e % 32;
      uint16_t sh;
      std::memcpy(&sh, b + 2, 2);
      const int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 0xF) + 16 * ((sh >> (2 * ib)) & 3);
      return f16_val(b) * (ls - 32) * kIq4nlValues[nib(b + 8 + 16 * ib, j % 16, j >= 16)];
    }
  }
  return 0;
}

constexpr QType kAll[] = {QType::f32,  QType::f16,  QType::bf16, QType::q4_0, QType::q4_1,   QType::q5_0,
                          QType::q5_1, QType::q8_0, QType::q2_k, QType::q3_k, QType::q4_k,   QType::q5_k,
                          QType::q6_k, QType::q8_k, QType::iq4_nl, QType::iq4_xs, QType::int4_g128, QType::int4_g128_asym};

TEST(QuantCodec, TableMatchesOpsFormats) {
  for (QType t : kAll) {
    const QTypeInfo& i = qtype_info(t);
    EXPECT_EQ(qtype_from_name(i.name), t);
    EXPECT_EQ(qtype_from_ggml(i.ggml_type), t);
  }
  EXPECT_EQ(qtype_from_name("Q4_K"), QType::q4_k);
  EXPECT_FALSE(qtype_from_name("q4_2").has_value());
  EXPECT_EQ(row_bytes(QType::q4_k, 4096), 4096 / 256 * 144);
  EXPECT_FALSE(row_bytes(QType::q4_k, 100).has_value());
  EXPECT_FALSE(row_bytes(QType::q8_0, 0).has_value());
}

TEST(QuantCodec, DecodersMatchLayouts) {
  std::mt19937 rng(std::random_device{}());
  for (QType t : kAll) {
    SCOPED_TRACE(std::string(qtype_name(t)));
    const QTypeInfo& info = qtype_info(t);
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<uint8_t> b = random_block(t, rng);
      std::vector<float> y(static_cast<size_t>(info.block_elems));
      dequantize_block(t, b.data(), y.data());
      for (int e = 0; e < info.block_elems; ++e) {
        const double want = expected(t, b.data(), e);
        ASSERT_NEAR(y[e], want, 1e-6 * (1 + std::fabs(want))) << "element " << e;
      }
    }
  }
}

TEST(QuantCodec, HandBuiltBlocks) {
  // q4_0 with d = 0.5 and nibbles j (low) and 15 - j (high): values 0.5 * (j - 8), 0.5 * (7 - j)
  uint8_t q40[18];
  put_f16(q40, 0.5f);
  for (int j = 0; j < 16; ++j) q40[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[256];
  dequantize_block(QType::q4_0, q40, y);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * (j - 8));
    EXPECT_EQ(y[j + 16], 0.5f * (7 - j));
  }
  // q8_0 with d = 2: values 2 * q
  uint8_t q80[34];
  put_f16(q80, 2.f);
  for (int j = 0; j < 32; ++j) q80[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j * 8 - 128));
  dequantize_block(QType::q8_0, q80, y);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 2.f * (j * 8 - 128));
  // iq4_nl with d = 1 and nibble j everywhere: the table itself
  uint8_t nl[18];
  put_f16(nl, 1.f);
  for (int j = 0; j < 16; ++j) nl[2 + j] = static_cast<uint8_t>(j | (j << 4));
  dequantize_block(QType::iq4_nl, nl, y);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(y[j], static_cast<float>(kIq4nlValues[j]));
  // q4_k: d = 1, dmin = 0.5, sub-block j has scale j + 1 and min j (6-bit packing), all
  // nibbles 3: sub-block j holds 3 * (j + 1) - 0.5 * j
  uint8_t q4k[144] = {};
  put_f16(q4k, 1.f);
  put_f16(q4k + 2, 0.5f);
  for (int j = 0; j < 8; ++j) {
    const int sc = j + 1, mn = j;
    if (j < 4) {
      q4k[4 + j] = static_cast<uint8_t>(sc);
      q4k[8 + j] = static_cast<uint8_t>(mn);
    } else {
      q4k[8 + j] = static_cast<uint8_t>((sc & 0xF) | ((mn & 0xF) << 4));
      q4k[4 + j - 4] |= static_cast<uint8_t>((sc >> 4) << 6);
      q4k[4 + j] |= static_cast<uint8_t>((mn >> 4) << 6);
    }
  }
  std::memset(q4k + 16, 0x33, 128);
  dequantize_block(QType::q4_k, q4k, y);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 3.f * (e / 32 + 1) - 0.5f * (e / 32)) << e;
  // q6_k: d = 0.25, all scales 2, every 6-bit quant 33 (low nibble 1, high bits 2): 0.25 * 2 * 1
  uint8_t q6k[210] = {};
  std::memset(q6k, 0x11, 128);
  std::memset(q6k + 128, 0xAA, 64);
  std::memset(q6k + 192, 2, 16);
  put_f16(q6k + 208, 0.25f);
  dequantize_block(QType::q6_k, q6k, y);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 0.5f) << e;
}

// llama.cpp's synthetic test data (tests/test-quantize-fns.cpp).
std::vector<float> llama_test_data(int n, float offset) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[i] = 0.1f + 2 * std::cos(static_cast<float>(i) + offset);
  return v;
}

std::vector<float> round_trip(QType t, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(static_cast<size_t>(*row_bytes(t, n)));
  EXPECT_TRUE(quantize_row(t, x.data(), q.data(), n).is_ok());
  std::vector<float> y(x.size());
  dequantize_row(t, q.data(), y.data(), n);
  return y;
}

TEST(QuantCodec, RoundTripErrorLikeLlamaCpp) {
  // test-quantize-fns: 4096 values of 0.1 + 2 cos(i), error sqrt(sum d^2) / n below 0.002
  const std::vector<float> x = llama_test_data(32 * 128, 0.f);
  for (QType t : {QType::q4_0, QType::q4_1, QType::q5_0, QType::q5_1, QType::q8_0, QType::q4_k, QType::q5_k,
                  QType::q6_k, QType::q8_k, QType::f16, QType::bf16}) {
    std::vector<float> y = round_trip(t, x);
    double sum = 0;
    for (size_t i = 0; i < x.size(); ++i) sum += (x[i] - y[i]) * (x[i] - y[i]);
    const double err = std::sqrt(sum) / x.size();
    EXPECT_LT(err, 0.002) << qtype_name(t);
  }
}

TEST(QuantCodec, RoundTripRelativeRmseOnGaussianWeights) {
  // Relative RMSE (rms error / rms value) on N(0, 1) weights, as measured with these encoders
  // (16384 values): q8_0 0.0053, q8_k 0.0070, q6_k 0.0177, q5_k 0.0360, q5_1 0.0377,
  // q5_0 0.0425, q4_k 0.0709, q4_1 0.0777, q4_0 0.0857 -- the order and sizes llama.cpp's
  // formats are known for (absmax q8_0: step amax/127, rmse step/sqrt(12) ~ 0.005). The bounds
  // allow about 15% either way: a worse encoder fails, and so does one that is suspiciously good.
  struct Bound { QType t; double lo, hi; };
  const Bound bounds[] = {{QType::q8_0, 0.0045, 0.0062}, {QType::q8_k, 0.0060, 0.0081}, {QType::q6_k, 0.0150, 0.0205},
                          {QType::q5_k, 0.0310, 0.0420}, {QType::q5_1, 0.0320, 0.0440}, {QType::q5_0, 0.0360, 0.0490},
                          {QType::q4_k, 0.0610, 0.0820}, {QType::q4_1, 0.0670, 0.0900}, {QType::q4_0, 0.0740, 0.0990}};
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> g(0.f, 1.f);
  std::vector<float> x(256 * 64);
  for (float& v : x) v = g(rng);
  for (const Bound& b : bounds) {
    std::vector<float> y = round_trip(b.t, x);
    double se = 0, sx = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      se += (x[i] - y[i]) * (x[i] - y[i]);
      sx += x[i] * x[i];
    }
    const double rel = std::sqrt(se / sx);
    EXPECT_GT(rel, b.lo) << qtype_name(b.t);
    EXPECT_LT(rel, b.hi) << qtype_name(b.t);
    std::printf("  %-5s relative rmse %.4f\n", std::string(qtype_name(b.t)).c_str(), rel);
  }
}

TEST(QuantCodec, EncodersHandleDegenerateInput) {
  std::vector<float> zeros(256, 0.f), nan(256, std::nanf("")), huge(256, 3e38f);
  huge[7] = -3e38f;
  for (QType t : {QType::q4_0, QType::q4_1, QType::q5_0, QType::q5_1, QType::q8_0, QType::q4_k, QType::q5_k,
                  QType::q6_k, QType::q8_k}) {
    std::vector<float> y = round_trip(t, zeros);
    for (float v : y) EXPECT_EQ(v, 0.f) << qtype_name(t);
    round_trip(t, nan);   // must not crash (UBSan: no undefined conversions)
    round_trip(t, huge);
  }
  std::vector<uint8_t> out(18);
  EXPECT_EQ(quantize_row(QType::q4_0, zeros.data(), out.data(), 31).code(), ErrorCode::invalid_argument);
  EXPECT_EQ(quantize_row(QType::iq4_xs, zeros.data(), out.data(), 256).code(), ErrorCode::unsupported);
  std::vector<float> dst(64);
  EXPECT_FALSE(dequantize(QType::q4_0, std::span<const uint8_t>(out.data(), 18), 32, dst).is_ok());
}

// ---- native kernels ----

// n rows of k values in format t: quantized from Gaussian values where rlx has an encoder,
// otherwise random blocks with finite scales.
std::vector<uint8_t> random_weights(QType t, int64_t n, int64_t k, std::mt19937& rng) {
  const int64_t rb = *row_bytes(t, k);
  std::vector<uint8_t> w(static_cast<size_t>(n * rb));
  if (has_quantizer(t)) {
    std::normal_distribution<float> g(0.f, 1.f);
    std::vector<float> row(static_cast<size_t>(k));
    for (int64_t j = 0; j < n; ++j) {
      for (float& v : row) v = g(rng);
      EXPECT_TRUE(quantize_row(t, row.data(), w.data() + j * rb, k).is_ok());
    }
  } else {
    const QTypeInfo& info = qtype_info(t);
    for (int64_t b = 0; b < n * k / info.block_elems; ++b) {
      std::vector<uint8_t> blk = random_block(t, rng);
      std::memcpy(w.data() + b * info.block_bytes, blk.data(), blk.size());
    }
  }
  return w;
}

std::vector<float> random_floats(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// Checks qgemm against dequantize (scalar codec) + a double-precision product.
void check_qgemm(QType t, int64_t m, int64_t n, int64_t k, std::mt19937& rng) {
  SCOPED_TRACE(cat(qtype_name(t), " m=", m, " n=", n, " k=", k, " kernels ", cpu::qgemm_kernel_name()));
  const std::vector<uint8_t> w = random_weights(t, n, k, rng);
  const std::vector<float> x = random_floats(static_cast<size_t>(m * k), rng);
  std::vector<float> y(static_cast<size_t>(m * n), std::nanf(""));
  cpu::QGemmArgs a;
  a.type = t;
  a.m = m;
  a.n = n;
  a.k = k;
  a.x = x.data();
  a.ldx = k;
  a.w = w.data();
  a.ldw = *row_bytes(t, k);
  a.y = y.data();
  a.ldy = n;
  ASSERT_TRUE(cpu::qgemm(a).is_ok());
  std::vector<float> wf(static_cast<size_t>(k));
  // With the integer path x is rounded to int8 blocks of 32 (step d = amax / 127), as llama.cpp
  // rounds activations to Q8_0 / Q8_K: each x value moves by at most d / 2, so the product moves
  // by at most sum_p |W(j, p)| * d(p) / 2 on top of f32 rounding.
  const bool qx = cpu::qgemm_quantizes_x(t, m);
  std::vector<double> half_step(static_cast<size_t>(m * k), 0.0);
  if (qx)
    for (int64_t i = 0; i < m * k; i += 32) {
      double amax = 0;
      for (int p = 0; p < 32; ++p) amax = std::max(amax, std::fabs(static_cast<double>(x[i + p])));
      for (int p = 0; p < 32; ++p) half_step[i + p] = amax / 127.0 / 2.0;
    }
  // and, tighter, the product with x rounded the same way (d = amax / 127, q = nearbyint(x / d))
  std::vector<float> xr(x);
  if (qx)
    for (int64_t i = 0; i < m * k; i += 32) {
      float amax = 0.f;
      for (int p = 0; p < 32; ++p) amax = std::max(amax, std::fabs(x[i + p]));
      const float d = amax / 127.f, id = d != 0.f ? 1.f / d : 0.f;
      for (int p = 0; p < 32; ++p) xr[i + p] = d * std::nearbyint(x[i + p] * id);
    }
  for (int64_t j = 0; j < n; ++j) {
    dequantize_row(t, w.data() + j * a.ldw, wf.data(), k);
    for (int64_t i = 0; i < m; ++i) {
      double ref = 0, mag = 0, qerr = 0, refr = 0;
      for (int64_t p = 0; p < k; ++p) {
        ref += static_cast<double>(x[i * k + p]) * wf[p];
        refr += static_cast<double>(xr[i * k + p]) * wf[p];
        mag += std::fabs(static_cast<double>(x[i * k + p]) * wf[p]);
        qerr += std::fabs(static_cast<double>(wf[p])) * half_step[i * k + p];
      }
      ASSERT_NEAR(y[i * n + j], ref, 1.0001 * qerr + 1e-5 * mag + 1e-6) << "row " << i << " col " << j;
      if (qx) ASSERT_NEAR(y[i * n + j], refr, 1e-5 * mag + 1e-6) << "rounded x: row " << i << " col " << j;
    }
  }
}

constexpr QType kKernelFormats[] = {QType::q4_0, QType::q4_1, QType::q5_0, QType::q5_1, QType::q8_0,
                                    QType::q2_k, QType::q3_k, QType::q4_k, QType::q5_k, QType::q6_k,
                                    QType::q8_k, QType::iq4_nl, QType::iq4_xs, QType::f16,
                                    QType::int4_g128, QType::int4_g128_asym};

// Each family's own kernels (the AMX tiles off: QGemmAmx below runs them).
class QGemmIsa : public ::testing::TestWithParam<cpu::GemmIsa> {
 protected:
  void SetUp() override {
    cpu::set_qgemm_amx(false);
    if (!cpu::set_qgemm_isa(GetParam())) GTEST_SKIP() << "this CPU cannot run these kernels";
  }
  void TearDown() override {
    // back to the best family, tiles on where the CPU has them
    for (cpu::GemmIsa isa : {cpu::GemmIsa::avx512, cpu::GemmIsa::avx2, cpu::GemmIsa::portable})
      if (cpu::set_qgemm_isa(isa)) break;
    cpu::set_qgemm_amx(true);
  }
};

// q8_0 and q4_0 prefill on the AMX-INT8 tiles: rows off and on the 16-row tile slices and
// 32-row blocks, weight rows off the 16-row groups (a last single group), one block and many.
TEST(QGemmAmx, PrefillMatchesDequantizeThenMatmul) {
  if (!cpu::set_qgemm_isa(cpu::GemmIsa::avx512) || !cpu::set_qgemm_amx(true))
    GTEST_SKIP() << "this CPU lacks AMX-INT8 (cpuid amx-tile and amx-int8, with AVX-512), or Linux did not grant "
                    "the process the tile state";
  std::mt19937 rng(std::random_device{}());
  for (QType t : {QType::q8_0, QType::q4_0}) {
    ASSERT_STREQ(cpu::qgemm_path_name(t, 40), "integer panels on amx-int8 tiles");
    for (int64_t m : {5, 16, 17, 33, 64, 100}) check_qgemm(t, m, 37, 256, rng);
    check_qgemm(t, 40, 130, 2048, rng);
    check_qgemm(t, 31, 16, 32, rng);
    check_qgemm(t, 20, 40, 96, rng);  // an odd number of blocks: pairs, then one
    check_qgemm(t, 48, 50, 4096, rng);
  }
}

TEST_P(QGemmIsa, MatchesDequantizeThenMatmul) {
  std::mt19937 rng(std::random_device{}());
  const bool portable = GetParam() == cpu::GemmIsa::portable;
  for (QType t : kKernelFormats) {
    // decode (1 row), small batches (fused, 2..4 rows and 7 = 4 + 3), prefill (tiles + GEMM)
    for (int64_t m : {1, 2, 3, 4, 7, 40}) check_qgemm(t, m, 37, 256, rng);
    check_qgemm(t, 1, 70, 4096, rng);
    check_qgemm(t, 5, 19, 1280, rng);  // K not a multiple of the 1024-value tile
    // the fused path's groups of 4 rows over spans of weight rows (several spans, a last group of 1)
    check_qgemm(t, 17, 150, 4096, rng);
    if (!portable) check_qgemm(t, 64, 130, 2048, rng);
  }
  // decode over block counts off the zmm q4_0 kernel's groups of 16 blocks and pairs: one
  // block, an odd count below 16, and 37 = 2 x 16 + 5
  for (QType t : {QType::q4_0, QType::q8_0})
    for (int64_t k : {32, 96, 1184}) check_qgemm(t, 1, 21, k, rng);
  // f16 rows whose length is not a multiple of 16 take the scalar path
  check_qgemm(QType::f16, 1, 9, 100, rng);
  check_qgemm(QType::f16, 9, 9, 37, rng);
}

TEST_P(QGemmIsa, DequantizeRowsMatchesCodec) {
  std::mt19937 rng(std::random_device{}());
  for (QType t : kKernelFormats) {
    const int64_t rows = 33, cols = 512;
    const std::vector<uint8_t> w = random_weights(t, rows, cols, rng);
    std::vector<float> got(static_cast<size_t>(rows * cols)), want(got.size());
    ASSERT_TRUE(cpu::dequantize_rows(t, w.data(), rows, cols, got.data()).is_ok());
    ASSERT_TRUE(dequantize(t, w, cols, want).is_ok());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-6 * (1 + std::fabs(want[i]))) << qtype_name(t) << " " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, QGemmIsa,
                         ::testing::Values(cpu::GemmIsa::avx512, cpu::GemmIsa::avx2, cpu::GemmIsa::portable),
                         [](const auto& info) {
                           return std::string(info.param == cpu::GemmIsa::avx512 ? "avx512"
                                              : info.param == cpu::GemmIsa::avx2 ? "avx2" : "portable");
                         });

TEST(QGemm, RejectsBadArguments) {
  std::vector<float> x(256), y(4);
  std::vector<uint8_t> w(34 * 8 * 4);
  cpu::QGemmArgs a{QType::q8_0, 1, 4, 256, x.data(), 256, w.data(), 272, y.data(), 4};
  EXPECT_TRUE(cpu::qgemm(a).is_ok());
  auto bad = a;
  bad.k = 100;
  EXPECT_EQ(cpu::qgemm(bad).code(), ErrorCode::invalid_argument);
  bad = a;
  bad.ldw = 100;
  EXPECT_EQ(cpu::qgemm(bad).code(), ErrorCode::invalid_argument);
  bad = a;
  bad.w = nullptr;
  EXPECT_EQ(cpu::qgemm(bad).code(), ErrorCode::invalid_argument);
  EXPECT_EQ(cpu::dequantize_rows(QType::q4_k, w.data(), 1, 100, y.data()).code(), ErrorCode::invalid_argument);
}

// The graph-level ops on the CPU device (native) against the reference device running
// matmul(x, transpose(W)) with W dequantized by the scalar codec.
void check_qmatmul_graph(QType t, int64_t m, int64_t n, int64_t k, std::mt19937& rng) {
  const std::string fmt(qtype_name(t));
  SCOPED_TRACE(cat(fmt, " m=", m, " n=", n, " k=", k));
  const int64_t rb = *row_bytes(t, k);
  const std::vector<uint8_t> wq = random_weights(t, n, k, rng);
  Tensor wt = Tensor::zeros(DType::u8, {n, rb});
  std::memcpy(wt.bytes(), wq.data(), wq.size());
  Tensor wf = Tensor::zeros(DType::f32, {n, k});
  ASSERT_TRUE(dequantize(t, wq, k, std::span<float>(wf.data<float>(), static_cast<size_t>(n * k))).is_ok());

  Graph gq;
  {
    ValueId x = gq.add_input("x", TensorType{DType::f32, to_shape({m, k})});
    GraphBuilder gb(gq);
    OpBuilder o(gb);
    ValueId w = o.param("w", TensorType{DType::u8, to_shape({n, rb})});
    ValueId y = o.op(Op::QMatMul, {x, w}, Attrs{{"format", fmt}});
    ValueId d = o.op(Op::Dequantize, {w}, Attrs{{"format", fmt}, {"cols", k}});
    ASSERT_TRUE(o.ok()) << o.status().to_string();
    gq.outputs = {y, d};
    gq.weights["w"] = wt;
  }
  Graph gr;
  {
    ValueId x = gr.add_input("x", TensorType{DType::f32, to_shape({m, k})});
    GraphBuilder gb(gr);
    OpBuilder o(gb);
    ValueId w = o.param("w", TensorType{DType::f32, to_shape({n, k})});
    ValueId y = o.matmul(x, o.transpose(w, {1, 0}));
    ASSERT_TRUE(o.ok()) << o.status().to_string();
    gr.outputs = {y};
    gr.weights["w"] = wf;
  }
  auto report = explain(gq, "cpu", DispatchPolicy{});
  ASSERT_TRUE(report.has_value()) << report.status().to_string();
  ASSERT_EQ(report->count(DispatchPath::native), 2) << "qmatmul and dequantize run natively";
  auto cpu = Model::compile(gq, {.device = "cpu"});
  ASSERT_TRUE(cpu.has_value()) << cpu.status().to_string();
  auto ref = Model::compile(gr, {.device = "ref"});
  ASSERT_TRUE(ref.has_value()) << ref.status().to_string();
  std::vector<Tensor> in{Tensor::zeros(DType::f32, {m, k})};
  const std::vector<float> xv = random_floats(static_cast<size_t>(m * k), rng);
  std::memcpy(in[0].bytes(), xv.data(), xv.size() * 4);
  auto a = (*cpu)->run(in);
  ASSERT_TRUE(a.has_value()) << a.status().to_string();
  auto b = (*ref)->run(in);
  ASSERT_TRUE(b.has_value()) << b.status().to_string();
  // the integer path's rounding of x (see check_qgemm)
  const bool qx = cpu::qgemm_quantizes_x(t, m);
  for (int64_t i = 0; i < m * n; ++i) {
    const int64_t r = i / n, c = i % n;
    double mag = 0, qerr = 0;
    for (int64_t p = 0; p < k; ++p) {
      mag += std::fabs(xv[r * k + p] * wf.data<float>()[c * k + p]);
      if (qx) {
        double amax = 0;
        for (int64_t e = p / 32 * 32; e < p / 32 * 32 + 32; ++e) amax = std::max(amax, std::fabs(static_cast<double>(xv[r * k + e])));
        qerr += std::fabs(static_cast<double>(wf.data<float>()[c * k + p])) * amax / 254.0;
      }
    }
    ASSERT_NEAR((*a)[0].data<float>()[i], (*b)[0].get_f64(i), 1.0001 * qerr + 1e-5 * mag + 1e-6) << i;
  }
  for (int64_t i = 0; i < n * k; ++i) ASSERT_EQ((*a)[1].data<float>()[i], wf.data<float>()[i]) << i;
}

TEST(QMatMulGraph, NativeCpuMatchesDequantizeMatmulOnRef) {
  std::mt19937 rng(std::random_device{}());
  for (QType t : {QType::q8_0, QType::q4_0, QType::q4_k, QType::q6_k, QType::f16, QType::iq4_nl, QType::q3_k,
                 QType::int4_g128, QType::int4_g128_asym}) {
    check_qmatmul_graph(t, 1, 48, 256, rng);
    check_qmatmul_graph(t, 6, 20, 1024, rng);
  }
  check_qmatmul_graph(QType::q4_k, 1, 16, 4096, rng);
  check_qmatmul_graph(QType::q8_0, 3, 16, 4096, rng);
}

// Decode speed of the native matrix-vector product versus a plain copy and a plain read of the
// same bytes, measured the same way: same pool, same split, alternating repetitions, best of
// each (not part of the suite: --gtest_also_run_disabled_tests --gtest_filter='*Bandwidth*').
TEST(QGemmBench, DISABLED_MatVecBandwidth) {
  std::mt19937 rng(1);
  const int64_t n = 4096, k = 4096;
  ThreadPool& pool = ThreadPool::global();
  for (QType t : {QType::q4_0, QType::q8_0, QType::q4_k, QType::q6_k, QType::f16, QType::int4_g128, QType::int4_g128_asym}) {
    const std::vector<uint8_t> w = random_weights(t, n, k, rng);
    const std::vector<float> x = random_floats(static_cast<size_t>(k), rng);
    std::vector<float> y(static_cast<size_t>(n));
    std::vector<uint8_t> dst(w.size());
    std::vector<uint64_t> sums(64);
    cpu::QGemmArgs a{t, 1, n, k, x.data(), k, w.data(), *row_bytes(t, k), y.data(), n};
    const int64_t chunks = static_cast<int64_t>(w.size()) / 4096;
    double tq = 1e30, tc = 1e30, tr = 1e30;
    auto secs = [](auto t0) { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    for (int rep = 0; rep < 40; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      ASSERT_TRUE(cpu::qgemm(a).is_ok());
      tq = std::min(tq, secs(t0));
      t0 = std::chrono::steady_clock::now();
      pool.parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
        std::memcpy(dst.data() + b * 4096, w.data() + b * 4096, static_cast<size_t>((e - b) * 4096));
      });
      tc = std::min(tc, secs(t0));
      t0 = std::chrono::steady_clock::now();
      pool.parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
        const uint64_t* p = reinterpret_cast<const uint64_t*>(w.data() + b * 4096);
        uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (int64_t i = 0; i < (e - b) * 512; i += 4) {
          s0 += p[i];
          s1 += p[i + 1];
          s2 += p[i + 2];
          s3 += p[i + 3];
        }
        sums[b % 64] += s0 ^ s1 ^ s2 ^ s3;
      });
      tr = std::min(tr, secs(t0));
    }
    const double gb = static_cast<double>(w.size()) / 1e9;
    std::printf("%-4s %dx%d matvec, %d threads (%s): %5.1f MB, %.3f ms = %5.1f GB/s | memcpy %5.1f GB/s read "
                "(%5.1f r+w) | read loop %5.1f GB/s | qgemm / memcpy %.2f, / read %.2f\n",
                std::string(qtype_name(t)).c_str(), static_cast<int>(n), static_cast<int>(k), pool.size(),
                cpu::qgemm_kernel_name(), gb * 1e3, tq * 1e3, gb / tq, gb / tc, 2 * gb / tc, gb / tr, tc / tq, tr / tq);
  }
}

}  // namespace
}  // namespace rlx::quant
