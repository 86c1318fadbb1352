// rlx's 4-bit weight formats in groups of 128 along K (kernels/ggml_quants.h: int4_g128, symmetric,
// f16 scale; int4_g128_asym, f16 scale and min), as `rlx quantize --scheme int4-g128[-asym]`
// writes them: the encoders' error bounds, the CPU kernels (every kernel family this CPU runs)
// against dequantize-then-matmul in double precision on fresh random inputs and odd shapes, the
// errors for a K that groups of 128 do not tile, and the GGUF file (rlx's own type ids; an id
// of rlx's range this build does not know is refused by name). The kernel comparison across
// all formats also runs in tests/unit/quant_test.cpp; Qwen3 top-1 agreement in ptq_test.cpp.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

#include "backends/cpu/kernels/qgemm.h"
#include "models/decoder.h"
#include "kernels/ggml_quants.h"
#include "quant/ptq.h"
#include "rlx/compile.h"
#include "rlx/dtype.h"
#include "rlx/gguf.h"
#include "rlx/op_builder.h"

namespace rlx {
namespace {

using quant::QType;

float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

std::vector<float> gaussian(size_t n, float mean, float sd, std::mt19937& rng) {
  std::normal_distribution<float> g(mean, sd);
  std::vector<float> v(n);
  for (float& x : v) x = g(rng);
  return v;
}

// Encodes rows of k values, decodes them, and checks every value against the format's bound
// (ggml_quants.h) computed from the stored scale and min of its group. Returns the relative
// RMSE (rms error / rms value).
double check_round_trip(QType t, const std::vector<float>& x, int64_t k) {
  const int64_t rows = static_cast<int64_t>(x.size()) / k, rb = *quant::row_bytes(t, k);
  std::vector<uint8_t> q(static_cast<size_t>(rows * rb));
  std::vector<float> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_TRUE(quant::quantize_row(t, x.data() + r * k, q.data() + r * rb, k).is_ok());
    quant::dequantize_row(t, q.data() + r * rb, y.data() + r * k, k);
  }
  const bool asym = t == QType::int4_g128_asym;
  const int64_t bb = quant::qtype_info(t).block_bytes;
  double se = 0, sx = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < k / 128; ++g) {
      const uint8_t* blk = q.data() + r * rb + g * bb;
      const double d = std::fabs(f16_at(blk));
      float mn = x[r * k + g * 128], amax = 0;
      for (int e = 0; e < 128; ++e) {
        mn = std::min(mn, x[r * k + g * 128 + e]);
        amax = std::max(amax, std::fabs(x[r * k + g * 128 + e]));
      }
      // symmetric: |err| <= d (the side opposite the largest magnitude reaches +8 steps, the
      // format +7), plus f16 rounding of d; asymmetric: d / 2 plus the f16 rounding of d and min
      const double bound = asym ? 0.5 * d + 16 * d * std::ldexp(1.0, -11) + std::fabs(mn) * std::ldexp(1.0, -10) + 1e-6 * amax
                                : d * (1 + std::ldexp(1.0, -7)) + 1e-6 * amax;
      for (int e = 0; e < 128; ++e) {
        const int64_t i = r * k + g * 128 + e;
        const double err = std::fabs(static_cast<double>(x[i]) - y[i]);
        EXPECT_LE(err, bound) << quant::qtype_name(t) << " row " << r << " group " << g << " value " << e << ": " << x[i]
                              << " decoded as " << y[i];
        if (err > bound) return -1;
        se += err * err;
        sx += static_cast<double>(x[i]) * x[i];
      }
    }
  return std::sqrt(se / sx);
}

TEST(Int4G128, QuantizeDequantizeErrorBounds) {
  std::mt19937 rng(std::random_device{}());
  const int64_t k = 1024;
  // weights-like values, an offset distribution (where the min helps), tiny and large scales
  struct Data { const char* what; float mean, sd; };
  for (const Data& dd : {Data{"N(0, 1)", 0.f, 1.f}, Data{"N(0, 0.02)", 0.f, 0.02f}, Data{"N(3, 1)", 3.f, 1.f},
                         Data{"N(0, 300)", 0.f, 300.f}}) {
    const std::vector<float> x = gaussian(static_cast<size_t>(64 * k), dd.mean, dd.sd, rng);
    const double sym = check_round_trip(QType::int4_g128, x, k), asym = check_round_trip(QType::int4_g128_asym, x, k);
    // the same data through ggml's groups of 32, for scale
    std::vector<float> y(x.size());
    auto rel32 = [&](QType t) {
      const int64_t rb = *quant::row_bytes(t, k);
      std::vector<uint8_t> q(static_cast<size_t>(rb));
      double se = 0, sx = 0;
      for (size_t r = 0; r < x.size() / k; ++r) {
        EXPECT_TRUE(quant::quantize_row(t, x.data() + r * k, q.data(), k).is_ok());
        quant::dequantize_row(t, q.data(), y.data() + r * k, k);
      }
      for (size_t i = 0; i < x.size(); ++i) {
        se += (x[i] - y[i]) * (x[i] - y[i]);
        sx += x[i] * x[i];
      }
      return std::sqrt(se / sx);
    };
    std::printf("  %-10s relative rmse: int4_g128 %.4f, int4_g128_asym %.4f (groups of 32: q4_0 %.4f, q4_1 %.4f)\n", dd.what,
                sym, asym, rel32(QType::q4_0), rel32(QType::q4_1));
    ASSERT_GT(sym, 0) << dd.what;
    ASSERT_GT(asym, 0) << dd.what;
    // 16 levels over a group of 128 Gaussian values (about +-2.6 sd): rms step / sqrt(12) is
    // ~0.09-0.11 of the rms value; far above that means a broken encoder
    if (dd.mean == 0.f) {
      EXPECT_LT(sym, 0.14) << dd.what;
      EXPECT_LT(asym, 0.14) << dd.what;
    } else {
      EXPECT_LT(asym, sym) << dd.what << ": the min of the asymmetric format fits an offset distribution better";
    }
  }
  // a constant group decodes to the f16 value of the constant (asymmetric) / within d (symmetric)
  std::vector<float> c(128, 0.3f);
  EXPECT_GT(check_round_trip(QType::int4_g128, c, 128), -1);
  EXPECT_GE(check_round_trip(QType::int4_g128_asym, c, 128), 0);
}

// qgemm against the scalar decoder + a double product. With the integer path (AVX2 / AVX-512,
// m <= 4) x is rounded to int8 blocks of 32, which moves the product by at most
// sum_p |W(j, p)| * amax(block of p) / 254.
void check_qgemm(QType t, int64_t m, int64_t n, int64_t k, std::mt19937& rng) {
  SCOPED_TRACE(cat(quant::qtype_name(t), " m=", m, " n=", n, " k=", k, " kernels ", cpu::qgemm_kernel_name()));
  const int64_t rb = *quant::row_bytes(t, k);
  std::vector<uint8_t> w(static_cast<size_t>(n * rb));
  const std::vector<float> wf = gaussian(static_cast<size_t>(n * k), t == QType::int4_g128_asym ? 0.01f : 0.f, 0.05f, rng);
  for (int64_t j = 0; j < n; ++j) ASSERT_TRUE(quant::quantize_row(t, wf.data() + j * k, w.data() + j * rb, k).is_ok());
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> x(static_cast<size_t>(m * k));
  for (float& v : x) v = u(rng);
  std::vector<float> y(static_cast<size_t>(m * n), std::nanf(""));
  cpu::QGemmArgs a;
  a.type = t;
  a.m = m;
  a.n = n;
  a.k = k;
  a.x = x.data();
  a.ldx = k;
  a.w = w.data();
  a.ldw = rb;
  a.y = y.data();
  a.ldy = n;
  ASSERT_TRUE(cpu::qgemm(a).is_ok());
  const bool qx = cpu::qgemm_quantizes_x(t, m);
  std::vector<float> row(static_cast<size_t>(k));
  for (int64_t j = 0; j < n; ++j) {
    quant::dequantize_row(t, w.data() + j * rb, row.data(), k);
    for (int64_t i = 0; i < m; ++i) {
      double ref = 0, mag = 0, qerr = 0;
      for (int64_t p = 0; p < k; ++p) {
        ref += static_cast<double>(x[i * k + p]) * row[p];
        mag += std::fabs(static_cast<double>(x[i * k + p]) * row[p]);
        if (qx) {
          double amax = 0;
          for (int64_t e = p / 32 * 32; e < p / 32 * 32 + 32; ++e) amax = std::max(amax, std::fabs(static_cast<double>(x[i * k + e])));
          qerr += std::fabs(static_cast<double>(row[p])) * amax / 254.0;
        }
      }
      ASSERT_NEAR(y[i * n + j], ref, 1.0001 * qerr + 1e-5 * mag + 1e-6) << "row " << i << " col " << j;
    }
  }
}

class Int4G128Kernels : public ::testing::TestWithParam<cpu::GemmIsa> {
 protected:
  void SetUp() override {
    if (!cpu::set_qgemm_isa(GetParam())) GTEST_SKIP() << "this CPU cannot run these kernels";
  }
  void TearDown() override {
    for (cpu::GemmIsa isa : {cpu::GemmIsa::avx512, cpu::GemmIsa::avx2, cpu::GemmIsa::portable})
      if (cpu::set_qgemm_isa(isa)) break;
  }
};

TEST_P(Int4G128Kernels, MatchDequantizeThenMatmul) {
  std::mt19937 rng(std::random_device{}());
  for (QType t : {QType::int4_g128, QType::int4_g128_asym}) {
    // one group; odd n (remainders of the 4- and 2-row interleaves); every m of the fused
    // paths, 5 = 4 + 1 and the tile + GEMM path; K across a 1024-value tile boundary
    for (int64_t m : {1, 2, 3, 4, 5, 9, 33}) check_qgemm(t, m, 7, 128, rng);
    check_qgemm(t, 1, 1, 384, rng);
    check_qgemm(t, 3, 13, 1152, rng);
    check_qgemm(t, 1, 67, 3072, rng);
    check_qgemm(t, 40, 19, 1280, rng);
  }
}

TEST_P(Int4G128Kernels, DequantizeRowsMatchesTheCodecExactly) {
  std::mt19937 rng(std::random_device{}());
  for (QType t : {QType::int4_g128, QType::int4_g128_asym}) {
    const int64_t rows = 21, cols = 640, rb = *quant::row_bytes(t, cols);
    std::vector<uint8_t> w(static_cast<size_t>(rows * rb));
    const std::vector<float> src = gaussian(static_cast<size_t>(rows * cols), 0.1f, 1.f, rng);
    for (int64_t r = 0; r < rows; ++r) ASSERT_TRUE(quant::quantize_row(t, src.data() + r * cols, w.data() + r * rb, cols).is_ok());
    std::vector<float> got(static_cast<size_t>(rows * cols)), want(got.size());
    ASSERT_TRUE(cpu::dequantize_rows(t, w.data(), rows, cols, got.data()).is_ok());
    ASSERT_TRUE(quant::dequantize(t, w, cols, want).is_ok());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << quant::qtype_name(t) << " value " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, Int4G128Kernels,
                         ::testing::Values(cpu::GemmIsa::avx512, cpu::GemmIsa::avx2, cpu::GemmIsa::portable),
                         [](const auto& info) {
                           return std::string(info.param == cpu::GemmIsa::avx512 ? "avx512"
                                              : info.param == cpu::GemmIsa::avx2 ? "avx2" : "portable");
                         });

TEST(Int4G128, KNotAMultipleOf128IsAClearError) {
  // the kernel entry point
  std::vector<float> x(200, 0.5f), y(2);
  std::vector<uint8_t> w(2 * 66 * 2);
  cpu::QGemmArgs a;
  a.type = QType::int4_g128;
  a.m = 1;
  a.n = 2;
  a.k = 200;
  a.x = x.data();
  a.ldx = 200;
  a.w = w.data();
  a.ldw = 132;
  a.y = y.data();
  a.ldy = 2;
  Status s = cpu::qgemm(a);
  EXPECT_EQ(s.code(), ErrorCode::invalid_argument);
  EXPECT_NE(s.message().find("int4_g128 block (128)"), std::string::npos) << s.to_string();
  // the op's type rules
  Graph g;
  ValueId xv = g.add_input("x", TensorType{DType::f32, to_shape({1, 200})});
  GraphBuilder gb(g);
  OpBuilder o(gb);
  ValueId wv = o.param("w", TensorType{DType::u8, to_shape({2, 132})});
  o.op(Op::QMatMul, {xv, wv}, Attrs{{"format", std::string("int4_g128_asym")}});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("int4_g128_asym rows hold multiples of 128 values, got 200"), std::string::npos)
      << o.status().to_string();
  // the encoder
  EXPECT_EQ(quant::quantize_row(QType::int4_g128, x.data(), w.data(), 200).code(), ErrorCode::invalid_argument);
}

// A random Qwen3 whose MLP width (320) groups of 128 do not tile: down_proj falls back to groups
// of 32 and the summary names it; the file holds rlx's type ids and key, loads, and generates.
TEST(Int4G128, Qwen3GgufWithFallbackAndUnknownRlxType) {
  const std::string dir = std::string(RLX_BINARY_DIR) + "/test-models";
  mkdir(dir.c_str(), 0755);
  mkdir((dir + "/quant").c_str(), 0755);
  models::DecoderConfig c;
  c.vocab_size = 512;
  c.hidden = 128;
  c.layers = 2;
  c.heads = 2;
  c.kv_heads = 1;
  c.head_dim = 64;
  c.intermediate = 320;
  const std::string src = dir + "/quant/qwen3-g128-odd";
  ASSERT_TRUE(models::write_random_decoder(src, c, 5).is_ok());
  for (const char* scheme : {"int4_g128", "int4_g128_asym"}) {
    SCOPED_TRACE(scheme);
    const std::string out = src + "-" + scheme + ".gguf";
    std::string summary;
    Status st = quant::quantize_decoder_gguf(src, out, scheme, &summary);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    const std::string fb = std::string(scheme) == "int4_g128" ? "q4_0" : "q4_1";
    EXPECT_NE(summary.find("2 matrices whose rows"), std::string::npos) << summary;
    EXPECT_NE(summary.find("model.layers.0.mlp.down_proj.weight (320 columns) as " + fb), std::string::npos) << summary;
    auto f = gguf::load(out);
    ASSERT_TRUE(f.has_value()) << f.status().to_string();
    auto key = f->get_string("rlx.quantization");
    ASSERT_TRUE(key.has_value()) << key.status().to_string();
    EXPECT_EQ(*key, std::string(scheme) == "int4_g128" ? "int4-g128" : "int4-g128-asym");
    const gguf::GgmlType want = std::string(scheme) == "int4_g128" ? gguf::GgmlType::rlx_int4_g128 : gguf::GgmlType::rlx_int4_g128_asym;
    EXPECT_EQ(f->find_tensor("blk.1.ffn_up.weight")->type, want);
    EXPECT_EQ(f->find_tensor("blk.1.ffn_down.weight")->type, gguf::ggml_type_from_name(fb)->type);
    // loads and runs as qmatmul with the format
    auto w = models::load_decoder(out);
    ASSERT_TRUE(w.has_value()) << w.status().to_string();
    EXPECT_EQ(w->tensors.at("model.layers.0.mlp.up_proj.weight").format, scheme);
    auto session = models::DecoderSession::create(*w, 1, 32, "cpu", false);
    ASSERT_TRUE(session.has_value()) << session.status().to_string();
    auto l = (*session)->prefill({{1, 2, 3, 4, 5}});
    ASSERT_TRUE(l.has_value()) << l.status().to_string();
    for (int64_t i = 0; i < l->numel(); ++i) ASSERT_TRUE(std::isfinite(l->data<float>()[i])) << i;

    // an id of rlx's range this build does not know: the reader names it and the tensor
    const gguf::TensorInfo* ti = f->find_tensor("blk.0.ffn_up.weight");
    const uint64_t type_at = ti->info_offset + 8 + ti->name.size() + 4 + 8 * ti->ne.size();
    std::vector<char> bytes;
    {
      std::ifstream in(out, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    uint32_t id;
    std::memcpy(&id, bytes.data() + type_at, 4);
    ASSERT_EQ(id, static_cast<uint32_t>(want)) << "type field located";
    id = 0x524C0077;
    std::memcpy(bytes.data() + type_at, &id, 4);
    const std::string bad = out + ".unknown-type.gguf";
    {
      std::ofstream o(bad, std::ios::binary);
      o.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    auto g = gguf::load(bad);
    ASSERT_FALSE(g.has_value());
    EXPECT_EQ(g.status().code(), ErrorCode::format_error);
    EXPECT_NE(g.status().message().find("blk.0.ffn_up.weight"), std::string::npos) << g.status().to_string();
    EXPECT_NE(g.status().message().find("rlx-specific type"), std::string::npos) << g.status().to_string();
  }
}

}  // namespace
}  // namespace rlx
