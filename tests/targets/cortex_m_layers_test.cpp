// The Cortex-M target beyond a chain of dense and convolution layers: grouped and depthwise
// convolution, padded max pooling, average pooling (padded, count_include_pad, global as
// reduce_mean), residual adds and the arena plan they need. The new integer kernels against
// exact arithmetic, int8 against float, and the generated C in QEMU (M3, M4, M0) bit-identical
// to the host reference; the trained dsconv model end to end.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "brief_training.h"
#include "targets/cortex_m/cortex_m.h"
#include "targets/int8/rlx_mcu_kernels.h"
#include "train/data.h"
#include "train/models.h"
#include "train/qat.h"
#include "train/trainer.h"

namespace rlx::targets::cortex_m {
namespace {

// Average pooling on int8 is the mean of the taps' offsets from the zero point, rounded half away
// from zero: checked against doubles for padded windows with and without count_include_pad.
TEST(CortexMLayers, AvgPoolIsTheRoundedMean) {
  std::mt19937 rng(4);
  std::uniform_int_distribution<int> d(-128, 127);
  const int32_t c = 3, h = 7, w = 6, kh = 3, kw = 2, sh = 2, sw = 2, pt = 1, pl = 0, pb = 1, pr = 1, zp = -17;
  const int32_t ho = (h + pt + pb - kh) / sh + 1, wo = (w + pl + pr - kw) / sw + 1;
  std::vector<int8_t> in(static_cast<size_t>(c * h * w)), out(static_cast<size_t>(c * ho * wo));
  for (int8_t& v : in) v = static_cast<int8_t>(d(rng));
  for (int include_pad : {0, 1}) {
    rlx_mcu_avgpool2d_s8(in.data(), c, h, w, zp, kh, kw, sh, sw, pt, pl, pb, pr, include_pad, ho, wo, out.data());
    for (int32_t ch = 0; ch < c; ++ch)
      for (int32_t y = 0; y < ho; ++y)
        for (int32_t x = 0; x < wo; ++x) {
          double sum = 0;
          int count = 0;
          for (int32_t ky = 0; ky < kh; ++ky)
            for (int32_t kx = 0; kx < kw; ++kx) {
              const int32_t iy = y * sh - pt + ky, ix = x * sw - pl + kx;
              if (iy >= 0 && iy < h && ix >= 0 && ix < w) {
                sum += in[static_cast<size_t>((ch * h + iy) * w + ix)] - zp;
                ++count;
              } else if (include_pad) {
                ++count;  // every overhang here is explicit padding (no ceil_mode)
              }
            }
          const double mean = sum / count;
          const double want = std::clamp(zp + (mean >= 0 ? std::floor(mean + 0.5) : -std::floor(-mean + 0.5)), -128.0, 127.0);
          ASSERT_EQ(out[static_cast<size_t>((ch * ho + y) * wo + x)], want)
              << "include_pad " << include_pad << " at " << ch << "," << y << "," << x << " mean " << mean;
        }
  }
}

// The quantized add against real arithmetic: within one unit of round((sa (a - za) + sb (b - zb))
// / so) + zo for random scales (the 2^-20 common scale loses less than a unit).
TEST(CortexMLayers, AddMatchesRealArithmetic) {
  std::mt19937_64 rng(8);
  std::uniform_int_distribution<int> d(-128, 127);
  std::uniform_real_distribution<double> e(-9.0, -2.0);
  int exact = 0, total = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const double sa = std::exp2(e(rng)), sb = std::exp2(e(rng)), so = std::exp2(e(rng) + 1.0);
    const int32_t za = d(rng) / 2, zb = d(rng) / 2, zo = d(rng) / 2;
    const double twice_max = 2.0 * std::max(sa, sb);
    int32_t ma, sha, mb, shb, mo, sho;
    ASSERT_TRUE(quantize_multiplier(sa / twice_max, &ma, &sha).is_ok());
    ASSERT_TRUE(quantize_multiplier(sb / twice_max, &mb, &shb).is_ok());
    ASSERT_TRUE(quantize_multiplier(twice_max / (1048576.0 * so), &mo, &sho).is_ok());
    std::vector<int8_t> a(64), b(64), out(64);
    for (size_t i = 0; i < 64; ++i) a[i] = static_cast<int8_t>(d(rng)), b[i] = static_cast<int8_t>(d(rng));
    rlx_mcu_add_s8(a.data(), za, ma, sha, b.data(), zb, mb, shb, 64, mo, sho, zo, -128, 127, out.data());
    for (size_t i = 0; i < 64; ++i) {
      const double real = sa * (a[i] - za) + sb * (b[i] - zb);
      const double want = std::clamp(std::round(real / so) + zo, -128.0, 127.0);
      ASSERT_LE(std::fabs(out[i] - want), 1.0) << "trial " << trial << " i " << i;
      exact += out[i] == want;
      ++total;
    }
  }
  std::printf("[ info ] quantized add: %d of %d equal to the rounded real sum, the rest within 1\n", exact, total);
  EXPECT_GE(exact, total * 95 / 100);
}

Tensor random_tensor(std::mt19937_64& rng, Sizes s, double scale) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Tensor t = Tensor::zeros(DType::f32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, scale * u(rng));
  return t;
}

// Two values share arena bytes only when no layer needs both.
void expect_plan_is_sound(const Int8Program& q) {
  const int32_t n = static_cast<int32_t>(q.layers.size());
  auto first = [&](int32_t v) { return v; };
  auto last = [&](int32_t v) {
    int32_t l = v == n - 1 ? n : v;
    for (int32_t k = 0; k < n; ++k) {
      const Int8Layer& L = q.layers[static_cast<size_t>(k)];
      if (L.input == v || (L.kind == LayerKind::add && L.input2 == v)) l = std::max(l, k);
    }
    return l;
  };
  for (int32_t a = -1; a < n; ++a) {
    EXPECT_LE(q.value_offset(a) + q.value_size(a), q.activation_bytes);
    EXPECT_EQ(q.value_offset(a) % 4, 0);
    for (int32_t b = a + 1; b < n; ++b) {
      if (first(a) > last(b) || first(b) > last(a)) continue;  // never live together
      const bool apart = q.value_offset(a) + q.value_size(a) <= q.value_offset(b) ||
                         q.value_offset(b) + q.value_size(b) <= q.value_offset(a);
      EXPECT_TRUE(apart) << "values " << a << " and " << b << " overlap while both are live";
    }
  }
}

// Builds, runs in QEMU (M3, M4 and M0) and compares with the host reference, input by input.
void expect_bit_identical_in_qemu(const Int8Program& q, const EmbeddedInputs& ins,
                                  const std::vector<std::vector<int8_t>>& want, const std::string& name) {
  if (std::string why = toolchain_missing(); !why.empty()) GTEST_SKIP() << "Cortex-M toolchain missing: " << why;
  const std::string dir = std::string(RLX_BINARY_DIR) + "/test-cortex-m/" + name;
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(emit_project(q, ins, dir).is_ok());
  for (const char* cpu : {"m3", "m4", "m0"}) {
    auto r = build_and_run(dir, cpu);
    ASSERT_TRUE(r.has_value()) << r.status().to_string();
    ASSERT_EQ(r->logits.size(), want.size()) << r->output;
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(r->logits[i], want[i]) << cpu << " input " << i;
    std::printf("[ info ] %s %s: flash %lld bytes, RAM %lld bytes + 4K stack (arena %lld), %lld instructions per inference\n",
                name.c_str(), cpu, static_cast<long long>(r->flash_bytes()), static_cast<long long>(r->ram_bytes()),
                static_cast<long long>(q.arena_bytes()), static_cast<long long>(r->instructions.at(0)));
  }
}

// Every new layer kind in one random-weight network with signed inputs: a grouped convolution
// (2 groups), a depthwise one, a residual add of operands with different scales (+ ReLU), a
// max pool with padding and ceil_mode, an average pool with count_include_pad, a global average
// pool written as reduce_mean, and a second add whose operand is read again later (so three
// values are live at once and the arena plan cannot be ping-pong).
TEST(CortexMLayers, MobileBlockIsBitIdenticalInQemu) {
  std::mt19937_64 rng(17);
  train::ModelDef m;
  m.name = "mobile";
  m.example_shape = {4, 9, 9};
  m.classes = 7;
  m.params = {{"g.weight", random_tensor(rng, {6, 2, 3, 3}, 0.4)}, {"g.bias", random_tensor(rng, {6}, 0.2)},
              {"dw.weight", random_tensor(rng, {6, 1, 3, 3}, 0.5)}, {"dw.bias", random_tensor(rng, {6}, 0.2)},
              {"pw.weight", random_tensor(rng, {6, 6, 1, 1}, 0.5)},
              {"fc.weight", random_tensor(rng, {6, 7}, 0.6)},       {"fc.bias", random_tensor(rng, {7}, 0.2)}};
  m.forward = [](OpBuilder& o, ValueId x, std::span<const ValueId> p, std::vector<ValueId>*) {
    const Attrs same{{"pads", std::vector<int64_t>{1, 1, 1, 1}}};
    ValueId s = o.op(Op::Conv2d, {x, p[0], p[1]}, Attrs{{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"group", int64_t{2}}});
    ValueId h = o.relu(o.op(Op::Conv2d, {s, p[2], p[3]}, Attrs{{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"group", int64_t{6}}}));
    h = o.relu(o.add(h, s));                                    // residual, no ReLU on s: signed operand
    ValueId r = o.op(Op::Conv2d, {h, p[4]});                    // pointwise, bias-free
    h = o.add(r, h);                                            // h is read twice
    h = o.op(Op::MaxPool2d, {h}, Attrs{{"kernel", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}},
                                       {"pads", std::vector<int64_t>{1, 1, 0, 0}}, {"ceil_mode", int64_t{1}}});  // [B, 6, 6, 6]
    h = o.op(Op::AvgPool2d, {h}, Attrs{{"kernel", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}},
                                       {"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"count_include_pad", int64_t{1}}});
    h = o.op(Op::ReduceMean, {h}, Attrs{{"axes", std::vector<int64_t>{-2, -1}}, {"keepdims", int64_t{0}}});  // [B, 6]
    return o.add(o.matmul(h, p[5]), p[6]);
  };
  auto g = classifier_graph(m, {}, /*use_init=*/true);
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  auto fp = lower_for_cortex_m(*g);
  ASSERT_TRUE(fp.has_value()) << fp.status().to_string();
  const std::string report = fp->report.to_text();
  std::printf("%s\n", report.c_str());
  const LayerKind kinds[] = {LayerKind::conv2d,    LayerKind::conv2d,    LayerKind::add,       LayerKind::conv2d,
                             LayerKind::add,       LayerKind::maxpool2d, LayerKind::avgpool2d, LayerKind::avgpool2d,
                             LayerKind::dense};
  ASSERT_EQ(fp->layers.size(), std::size(kinds));
  for (size_t k = 0; k < std::size(kinds); ++k) EXPECT_EQ(fp->layers[k].kind, kinds[k]) << k;
  EXPECT_EQ(fp->layers[0].geo.groups, 2);
  EXPECT_EQ(fp->layers[1].geo.groups, 6);
  EXPECT_TRUE(fp->layers[1].relu);
  EXPECT_TRUE(fp->layers[2].relu);    // the add's ReLU
  EXPECT_EQ(fp->layers[2].input2, 0);  // s
  EXPECT_EQ(fp->layers[4].input, 3);
  EXPECT_EQ(fp->layers[4].input2, 2);  // h, read by the pointwise conv too
  EXPECT_EQ(fp->layers[7].n_out, 6);   // global average pool
  EXPECT_NE(report.find("depthwise"), std::string::npos);
  EXPECT_NE(report.find("add_s8 of 486 values"), std::string::npos);
  const Tensor calib = random_tensor(rng, {300, 4 * 9 * 9}, 1.5);
  auto q = quantize_program(*g, *fp, calib);
  ASSERT_TRUE(q.has_value()) << q.status().to_string();
  expect_plan_is_sound(*q);
  int64_t all_values = q->n_in;
  for (const Int8Layer& L : q->layers) all_values += L.n_out;
  EXPECT_LT(q->activation_bytes, all_values);  // bytes are shared
  // int8 against float on fresh inputs
  const Tensor test = random_tensor(rng, {200, 4 * 9 * 9}, 1.5);
  auto outs = run_float(*g, *fp, test);
  ASSERT_TRUE(outs.has_value()) << outs.status().to_string();
  int agree = 0;
  double worst = 0;
  EmbeddedInputs ins;
  std::vector<std::vector<int8_t>> want;
  const Int8Layer& last = q->layers.back();
  for (int64_t i = 0; i < 200; ++i) {
    const float* fl = outs->back().data<float>() + i * 7;
    auto x = quantize_input(*q, std::span<const float>(test.data<float>() + i * 324, 324));
    auto ql = run_reference(*q, x);
    agree += (std::max_element(fl, fl + 7) - fl) == rlx_mcu_argmax_s8(ql.data(), 7);
    for (int j = 0; j < 7; ++j) worst = std::max(worst, std::fabs(double(last.out_scale) * (ql[j] - last.out_zp) - fl[j]));
    if (i < 8) {
      ins.inputs.push_back(x);
      ins.labels.push_back(-1);
      want.push_back(ql);
    }
  }
  double range = 0;
  for (int64_t i = 0; i < outs->back().numel(); ++i) range = std::max(range, std::fabs(double(outs->back().data<float>()[i])));
  std::printf("[ info ] mobile block: int8 and float argmax agree on %d of 200; worst logit error %.4f (logits up to %.3f)\n",
              agree, worst, range);
  EXPECT_GE(agree, 180);
  EXPECT_LT(worst, 0.1 * range);
  bool varied = false;
  for (size_t i = 1; i < want.size(); ++i) varied |= want[i] != want[0];
  ASSERT_TRUE(varied);
  expect_bit_identical_in_qemu(*q, ins, want, "mobile");
}

// The trained dsconv model (rlx train mnist --arch dsconv): int8 agrees with float and M3/M4/M0 in
// QEMU print the host reference's logits bit for bit.
TEST(CortexMLayers, TrainedDsconvAgreesAndIsBitIdenticalInQemu) {
  train::MnistData data = train::synthetic_mnist(2000, 300, 19);
  auto m = train::mnist_model("dsconv", 19);
  ASSERT_TRUE(m.has_value()) << m.status().to_string();
  auto g = classifier_graph(*m, train_one_epoch(*m, data.train, 50, 19));
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  auto fp = lower_for_cortex_m(*g);
  ASSERT_TRUE(fp.has_value()) << fp.status().to_string();
  ASSERT_EQ(fp->layers.size(), 7u);  // stem, dw, pw, add, max pool, average pool, fc
  auto q = quantize_program(*g, *fp, flat_images(data.train, 300));
  ASSERT_TRUE(q.has_value()) << q.status().to_string();
  expect_plan_is_sound(*q);
  const Tensor test = flat_images(data.test, 300);
  auto outs = run_float(*g, *fp, test);
  ASSERT_TRUE(outs.has_value()) << outs.status().to_string();
  const Int8VsFloat c = int8_vs_float(*q, outs->back(), data.test, 300, 784, 10, 6);
  const int agree = c.agree, float_ok = c.float_ok, int8_ok = c.int8_ok;
  std::printf("[ info ] dsconv int8 vs float on 300 synthetic test images: %d agree; accuracy float %.1f%%, int8 %.1f%%\n",
              agree, float_ok / 3.0, int8_ok / 3.0);
  EXPECT_GE(agree, 285);     // >= 95%
  EXPECT_GE(float_ok, 150);  // it learned something (chance is 30)
  EXPECT_GE(int8_ok, float_ok - 9);
  expect_bit_identical_in_qemu(*q, c.ins, c.want, "dsconv");
}

// Quantization-aware training tracks the inputs of dense and conv2d layers: the pointwise
// convolution's output, which only the residual add reads, has no site, and the error says so
// and what to do instead.
TEST(CortexMLayers, QatScalesOfAResidualModelNameTheValueWithoutASite) {
  auto m = train::mnist_model("dsconv", 1);
  ASSERT_TRUE(m.has_value());
  auto g = classifier_graph(*m, {}, /*use_init=*/true);
  ASSERT_TRUE(g.has_value());
  auto fp = lower_for_cortex_m(*g);
  ASSERT_TRUE(fp.has_value()) << fp.status().to_string();
  auto sites = train::qat_sites(*m);
  ASSERT_TRUE(sites.has_value()) << sites.status().to_string();
  std::map<std::string, train::ActQuantParams> acts;
  for (const std::string& s : *sites) acts[s] = train::act_quant_params(-1.0, 2.0);
  auto q = quantize_program_qat(*fp, acts);
  ASSERT_FALSE(q.has_value());
  EXPECT_NE(q.status().message().find("the output of layer pw"), std::string::npos) << q.status().message();
  EXPECT_NE(q.status().message().find("--ptq"), std::string::npos) << q.status().message();
}

// The fpga target keeps its chain: the same model is one illegal-node error naming the
// depthwise convolution, the add and the pools it cannot run.
TEST(CortexMLayers, FpgaRefusesTheLayersOnlyCortexMRuns) {
  auto m = train::mnist_model("dsconv", 1);
  ASSERT_TRUE(m.has_value());
  auto g = classifier_graph(*m, {}, /*use_init=*/true);
  ASSERT_TRUE(g.has_value());
  auto fp = int8::lower_to_int8(*g, "fpga");
  ASSERT_FALSE(fp.has_value());
  const std::string& msg = fp.status().message();
  EXPECT_NE(msg.find("grouped and depthwise conv2d (group != 1) are not supported yet by the fpga target"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("avg_pool2d is not supported yet by the fpga target"), std::string::npos) << msg;
  EXPECT_NE(msg.find("max_pool2d with padding"), std::string::npos) << msg;
}

}  // namespace
}  // namespace rlx::targets::cortex_m
