// The Cortex-M target: requantization against exact arithmetic, lowering and its illegal-node
// errors, PTQ agreement with the float model, and the generated C built with arm-none-eabi-gcc
// and run in qemu-system-arm (M3 and M4), bit-identical to the host int8 reference.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <random>

#include "brief_training.h"
#include "targets/cortex_m/cortex_m.h"
#include "targets/int8/rlx_mcu_kernels.h"
#include "train/data.h"
#include "train/models.h"
#include "train/trainer.h"

namespace rlx::targets::cortex_m {
namespace {

// An MLP with the model's seeded Kaiming weights and random (non-zero) biases.
std::map<std::string, Tensor> random_mlp_weights(uint64_t seed) {
  auto m = train::mnist_model("mlp", seed);
  std::map<std::string, Tensor> w;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-0.2, 0.2);
  for (const auto& p : m->params) {
    Tensor t = p.init.clone();
    if (p.name.find("bias") != std::string::npos)
      for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, u(rng));
    w[p.name] = t;
  }
  return w;
}

struct Built {
  Graph graph;
  FloatProgram fp;
  Int8Program q;
};

Built build(const std::map<std::string, Tensor>& weights, const train::Dataset& calib, int64_t n_calib) {
  Built b;
  auto m = train::mnist_model("mlp", 1);
  auto g = classifier_graph(*m, weights);
  EXPECT_TRUE(g.has_value()) << g.status().to_string();
  b.graph = std::move(*g);
  auto fp = lower_for_cortex_m(b.graph);
  EXPECT_TRUE(fp.has_value()) << fp.status().to_string();
  b.fp = std::move(*fp);
  auto q = quantize_program(b.graph, b.fp, flat_images(calib, n_calib));
  EXPECT_TRUE(q.has_value()) << q.status().to_string();
  b.q = std::move(*q);
  return b;
}

TEST(CortexM, RequantizeMatchesExactRounding) {
  // (acc * M) >> s rounded half up equals floor(acc * M / 2^s + 1/2) computed exactly in 128 bits
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int32_t> acc_d(-(1 << 24), 1 << 24);
  std::uniform_real_distribution<double> real_d(-14.0, -1.0);
  int checked = 0;
  for (int t = 0; t < 20000; ++t) {
    int32_t m = 0, s = 0;
    const double real = std::pow(2.0, real_d(rng));
    ASSERT_TRUE(quantize_multiplier(real, &m, &s).is_ok());
    ASSERT_GE(m, 1 << 30);
    ASSERT_GE(s, 1);
    ASSERT_LE(s, 62);
    ASSERT_NEAR(std::ldexp(static_cast<double>(m), -s) / real, 1.0, 1e-9);
    const int32_t acc = acc_d(rng);
    const __int128 p = static_cast<__int128>(acc) * m;
    const __int128 half = static_cast<__int128>(1) << (s - 1);
    const __int128 num = p + half;
    const __int128 den = static_cast<__int128>(1) << s;
    __int128 fl = num / den;
    if (num % den != 0 && num < 0) fl -= 1;  // floor division
    const int64_t want = std::clamp<int64_t>(static_cast<int64_t>(fl) + 3, -128, 127);
    ASSERT_EQ(rlx_mcu_requantize(acc, m, s, 3, -128, 127), want) << "acc " << acc << " M " << m << " s " << s;
    // the double-precision value agrees to within rounding
    const double exact = acc * real + 3;
    if (exact > -127 && exact < 126) {
      ASSERT_LE(std::fabs(exact - static_cast<double>(want)), 0.5 + 1e-6);
    }
    ++checked;
  }
  EXPECT_EQ(checked, 20000);
  int32_t m = 0, s = 0;
  EXPECT_FALSE(quantize_multiplier(0.0, &m, &s).is_ok());
  EXPECT_FALSE(quantize_multiplier(std::nan(""), &m, &s).is_ok());
  // ReLU clamp: below the zero point clamps to it
  EXPECT_EQ(rlx_mcu_requantize(-1000, 1 << 30, 31, -128, -128, 127), -128);
}

TEST(CortexM, DotProductMatchesPlainSum) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> d(-128, 127);
  for (int n : {1, 3, 4, 7, 64, 784}) {
    std::vector<int8_t> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    int64_t want = 0;
    for (int i = 0; i < n; ++i) {
      a[static_cast<size_t>(i)] = static_cast<int8_t>(d(rng));
      b[static_cast<size_t>(i)] = static_cast<int8_t>(d(rng));
      want += a[static_cast<size_t>(i)] * b[static_cast<size_t>(i)];
    }
    EXPECT_EQ(rlx_mcu_dot_s8(a.data(), b.data(), n), want) << n;
  }
}

TEST(CortexM, LowersTheMlpAndReportsEveryNode) {
  auto m = train::mnist_model("mlp", 1);
  auto g = classifier_graph(*m, random_mlp_weights(5));
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  auto fp = lower_for_cortex_m(*g);
  ASSERT_TRUE(fp.has_value()) << fp.status().to_string();
  ASSERT_EQ(fp->layers.size(), 2u);
  EXPECT_EQ(fp->layers[0].n_in, 784);
  EXPECT_EQ(fp->layers[0].n_out, 128);
  EXPECT_TRUE(fp->layers[0].relu);
  EXPECT_FALSE(fp->layers[1].relu);
  EXPECT_EQ(fp->layers[1].n_out, 10);
  EXPECT_TRUE(fp->report.ok());
  EXPECT_EQ(fp->report.count(DispatchPath::native), 5);  // matmul, add, relu, matmul, add
  EXPECT_NE(fp->report.to_text().find("dense_s8 784x128"), std::string::npos) << fp->report.to_text();
}

TEST(CortexM, LowersTinyconv) {
  auto m = train::mnist_model("tinyconv", 1);
  auto g = classifier_graph(*m, {}, /*use_init=*/true);
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  auto fp = lower_for_cortex_m(*g);
  ASSERT_TRUE(fp.has_value()) << fp.status().to_string();
  ASSERT_EQ(fp->layers.size(), 5u);
  const LayerKind kinds[] = {LayerKind::conv2d, LayerKind::maxpool2d, LayerKind::conv2d, LayerKind::maxpool2d,
                             LayerKind::dense};
  for (size_t k = 0; k < 5; ++k) EXPECT_EQ(fp->layers[k].kind, kinds[k]) << k;
  EXPECT_EQ(fp->layers[0].n_out, 8 * 26 * 26);
  EXPECT_TRUE(fp->layers[0].relu);
  EXPECT_EQ(fp->layers[2].geo.c_in, 8);
  EXPECT_EQ(fp->layers[3].n_out, 400);
  EXPECT_EQ(fp->layers[4].n_in, 400);
  EXPECT_EQ(fp->report.count(DispatchPath::native), 9);
}

// Ops and attributes the target does not run are compile errors that name every such node.
TEST(CortexM, UnsupportedOpsAreCompileErrorsNamingTheNode) {
  train::ModelDef m;
  m.name = "bad";
  m.example_shape = {2, 6, 6};
  m.params = {{"dw.weight", Tensor::from_vector<double>(DType::f32, {2, 1, 3, 3}, std::vector<double>(18, 0.1))},
              {"fc.weight", Tensor::from_vector<double>(DType::f32, {8, 3}, std::vector<double>(24, 0.1))}};
  m.forward = [](OpBuilder& o, ValueId x, std::span<const ValueId> p, std::vector<ValueId>*) {
    // depthwise and dilated: [B, 2, 2, 2]
    ValueId h = o.op(Op::Conv2d, {x, p[0]}, Attrs{{"group", int64_t{2}}, {"dilations", std::vector<int64_t>{2, 2}}});
    h = o.sigmoid(h);
    h = o.reshape(h, {-1, 8});
    return o.matmul(h, p[1]);
  };
  auto g = classifier_graph(m, {}, /*use_init=*/true);
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  auto fp = lower_for_cortex_m(*g);
  ASSERT_FALSE(fp.has_value());
  EXPECT_EQ(fp.status().code(), ErrorCode::illegal);
  const std::string& msg = fp.status().message();
  std::printf("[ info ] the error:\n%s\n", msg.c_str());
  EXPECT_NE(msg.find("2 nodes cannot run on cortex-m"), std::string::npos) << msg;
  EXPECT_NE(msg.find("conv2d inputs f32[batch, 2, 6, 6], f32[2, 1, 3, 3]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("dilated conv2d is not supported yet by the cortex-m target"), std::string::npos) << msg;
  EXPECT_NE(msg.find("sigmoid as used here is not supported yet by the cortex-m target"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("matmul inputs"), std::string::npos) << msg;  // the dense layer itself is fine
}

TEST(CortexM, MissingOrMisshapedWeightIsAnError) {
  auto m = train::mnist_model("mlp", 1);
  auto w = random_mlp_weights(1);
  w.erase("fc2.bias");
  auto g = classifier_graph(*m, w);
  ASSERT_FALSE(g.has_value());
  EXPECT_NE(g.status().message().find("fc2.bias"), std::string::npos);
  w = random_mlp_weights(1);
  w["fc1.weight"] = Tensor::zeros(DType::f32, {128, 784});
  g = classifier_graph(*m, w);
  ASSERT_FALSE(g.has_value());
  EXPECT_NE(g.status().message().find("fc1.weight"), std::string::npos);
}

// A briefly trained MLP: the int8 model must predict what the float model predicts on most
// test images, and about as accurately.
TEST(CortexM, Int8AgreesWithFloatOnTrainedMlp) {
  train::MnistData data = train::synthetic_mnist(3000, 500, 11);
  auto m = train::mnist_model("mlp", 11);
  ASSERT_TRUE(m.has_value());
  const std::map<std::string, Tensor> w = train_one_epoch(*m, data.train, 100, 11);
  Built b = build(w, data.train, 500);
  const Tensor test = flat_images(data.test, 500);
  auto outs = run_float(b.graph, b.fp, test);
  ASSERT_TRUE(outs.has_value()) << outs.status().to_string();
  const Tensor& logits = outs->back();
  int agree = 0, float_ok = 0, int8_ok = 0;
  for (int64_t i = 0; i < 500; ++i) {
    const float* fl = logits.data<float>() + i * 10;
    const int32_t fpred = static_cast<int32_t>(std::max_element(fl, fl + 10) - fl);
    auto q = run_reference(b.q, quantize_input(b.q, std::span<const float>(test.data<float>() + i * 784, 784)));
    const int32_t qpred = rlx_mcu_argmax_s8(q.data(), 10);
    const int32_t label = data.test.labels.data<int32_t>()[i];
    agree += fpred == qpred;
    float_ok += fpred == label;
    int8_ok += qpred == label;
  }
  std::printf("[ info ] int8 vs float on 500 synthetic test images: %d agree (%.1f%%); accuracy float %.1f%%, int8 %.1f%%\n",
              agree, agree / 5.0, float_ok / 5.0, int8_ok / 5.0);
  EXPECT_GE(agree, 480);                 // >= 96% the same prediction
  EXPECT_GE(float_ok, 400);              // training worked (so agreement is not trivial)
  EXPECT_GE(int8_ok, float_ok - 10);     // quantization costs at most 2 points
}

// The generated project, built for M3, M4 and M0 and run in QEMU: the printed int8 logits
// equal the host reference's for every embedded input.
TEST(CortexM, QemuOutputIsBitIdenticalToHostReference) {
  if (std::string why = toolchain_missing(); !why.empty()) GTEST_SKIP() << "Cortex-M toolchain missing: " << why;
  train::MnistData data = train::synthetic_mnist(200, 16, 21);
  Built b = build(random_mlp_weights(21), data.train, 200);
  EmbeddedInputs ins;
  std::vector<std::vector<int8_t>> want;
  for (int64_t i = 0; i < 12; ++i) {
    const float* x = data.test.images.data<float>() + i * 784;
    ins.inputs.push_back(quantize_input(b.q, std::span<const float>(x, 784)));
    ins.labels.push_back(data.test.labels.data<int32_t>()[i]);
    want.push_back(run_reference(b.q, ins.inputs.back()));
  }
  // make the logits differ from one input to the next (a frozen firmware would not pass)
  bool varied = false;
  for (size_t i = 1; i < want.size(); ++i) varied |= want[i] != want[0];
  ASSERT_TRUE(varied);
  const std::string dir = std::string(RLX_BINARY_DIR) + "/test-cortex-m/mlp";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(emit_project(b.q, ins, dir).is_ok());
  for (const char* cpu : {"m3", "m4", "m0"}) {  // m0: ARMv6-M on QEMU's microbit (16K of RAM)
    auto r = build_and_run(dir, cpu);
    ASSERT_TRUE(r.has_value()) << r.status().to_string();
    ASSERT_EQ(r->logits.size(), want.size()) << r->output;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(r->logits[i], want[i]) << cpu << " input " << i;
      EXPECT_EQ(r->preds[i], rlx_mcu_argmax_s8(want[i].data(), 10)) << cpu << " input " << i;
    }
    std::printf("[ info ] %s (%s): flash %lld bytes (text %lld + data %lld), RAM %lld bytes (data + bss, stack 4K "
                "extra), %lld instructions per inference\n",
                cpu, r->machine.c_str(), static_cast<long long>(r->flash_bytes()), static_cast<long long>(r->text),
                static_cast<long long>(r->data), static_cast<long long>(r->ram_bytes()),
                static_cast<long long>(r->instructions.at(0)));
    EXPECT_LT(r->flash_bytes(), 256 * 1024);
    // every inference runs the same instructions (no data-dependent branches but the clamps)
    // and at least one multiply-accumulate per 2 instructions is impossible below ~100k MACs
    ASSERT_EQ(r->instructions.size(), want.size());
    EXPECT_GT(r->instructions[0], 784 * 128 / 2);
    EXPECT_GE(r->ram_bytes(), b.q.arena_bytes());
  }
}

// A deeper chain with odd widths, signed inputs, a layer without ReLU in the middle and
// random biases: the arena plan (the input and layer 1's 37 outputs share bytes, layer 0's 50
// outputs overlap neither) and the zero-point folding, bit-exact in QEMU.
TEST(CortexM, ThreeLayerChainIsBitIdenticalInQemu) {
  std::mt19937_64 rng(99);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  auto rand_tensor = [&](Sizes s, double scale) {
    Tensor t = Tensor::zeros(DType::f32, s);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, scale * u(rng));
    return t;
  };
  train::ModelDef m;
  m.name = "chain";
  m.example_shape = {9};
  m.classes = 5;
  m.params = {{"a.weight", rand_tensor({9, 50}, 0.5)}, {"a.bias", rand_tensor({50}, 0.3)},
              {"b.weight", rand_tensor({50, 37}, 0.2)}, {"b.bias", rand_tensor({37}, 0.3)},
              {"c.weight", rand_tensor({37, 5}, 0.3)},  {"c.bias", rand_tensor({5}, 0.3)}};
  m.forward = [](OpBuilder& o, ValueId x, std::span<const ValueId> p, std::vector<ValueId>*) {
    ValueId h = o.relu(o.add(o.matmul(x, p[0]), p[1]));
    h = o.add(o.matmul(h, p[2]), p[3]);  // no ReLU: signed activations into the last layer
    return o.add(o.matmul(h, p[4]), p[5]);
  };
  auto g = classifier_graph(m, {}, /*use_init=*/true);
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  auto fp = lower_for_cortex_m(*g);
  ASSERT_TRUE(fp.has_value()) << fp.status().to_string();
  ASSERT_EQ(fp->layers.size(), 3u);
  EXPECT_FALSE(fp->layers[1].relu);
  const Tensor calib = rand_tensor({300, 9}, 2.0);
  auto q = quantize_program(*g, *fp, calib);
  ASSERT_TRUE(q.has_value()) << q.status().to_string();
  // values by size: layer 0 (50 -> 52 bytes) at 0, layer 1 (37 -> 40) after it, the input (9)
  // where layer 1 will be (never live together), the logits (5) where layer 0 was
  EXPECT_EQ(q->value_offset(0), 0);
  EXPECT_EQ(q->value_offset(1), 52);
  EXPECT_EQ(q->value_offset(-1), 52);
  EXPECT_EQ(q->value_offset(2), 0);
  EXPECT_EQ(q->activation_bytes, 92);
  EXPECT_NE(q->in_zp, -128);  // signed inputs: an asymmetric zero point inside the range
  // int8 vs float on fresh inputs: the largest logit agrees on most
  const Tensor test = rand_tensor({200, 9}, 2.0);
  auto outs = run_float(*g, *fp, test);
  ASSERT_TRUE(outs.has_value()) << outs.status().to_string();
  int agree = 0;
  EmbeddedInputs ins;
  std::vector<std::vector<int8_t>> want;
  for (int64_t i = 0; i < 200; ++i) {
    const float* fl = outs->back().data<float>() + i * 5;
    auto x = quantize_input(*q, std::span<const float>(test.data<float>() + i * 9, 9));
    auto ql = run_reference(*q, x);
    agree += (std::max_element(fl, fl + 5) - fl) == rlx_mcu_argmax_s8(ql.data(), 5);
    if (i < 10) {
      ins.inputs.push_back(x);
      ins.labels.push_back(-1);
      want.push_back(ql);
    }
  }
  EXPECT_GE(agree, 180) << "of 200";
  if (std::string why = toolchain_missing(); !why.empty()) GTEST_SKIP() << "Cortex-M toolchain missing: " << why;
  const std::string dir = std::string(RLX_BINARY_DIR) + "/test-cortex-m/chain";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(emit_project(*q, ins, dir).is_ok());
  for (const char* cpu : {"m3", "m4"}) {
    auto r = build_and_run(dir, cpu);
    ASSERT_TRUE(r.has_value()) << r.status().to_string();
    ASSERT_EQ(r->logits.size(), want.size()) << r->output;
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(r->logits[i], want[i]) << cpu << " input " << i;
  }
}

// A briefly trained tinyconv: int8 agrees with float, and M3/M4 in QEMU print the host
// reference's logits bit for bit (convolutions, max pooling, flatten, dense).
TEST(CortexM, TrainedTinyconvAgreesAndIsBitIdenticalInQemu) {
  train::MnistData data = train::synthetic_mnist(2000, 300, 13);
  auto m = train::mnist_model("tinyconv", 13);
  ASSERT_TRUE(m.has_value());
  auto g = classifier_graph(*m, train_one_epoch(*m, data.train, 50, 13));
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  auto fp = lower_for_cortex_m(*g);
  ASSERT_TRUE(fp.has_value()) << fp.status().to_string();
  auto q = quantize_program(*g, *fp, flat_images(data.train, 300));
  ASSERT_TRUE(q.has_value()) << q.status().to_string();
  const Tensor test = flat_images(data.test, 300);
  auto outs = run_float(*g, *fp, test);
  ASSERT_TRUE(outs.has_value()) << outs.status().to_string();
  const Int8VsFloat c = int8_vs_float(*q, outs->back(), data.test, 300, 784, 10, 6);
  const int agree = c.agree, float_ok = c.float_ok;
  const EmbeddedInputs& ins = c.ins;
  const std::vector<std::vector<int8_t>>& want = c.want;
  std::printf("[ info ] tinyconv int8 vs float on 300 synthetic test images: %d agree; float accuracy %.1f%%\n", agree,
              float_ok / 3.0);
  EXPECT_GE(agree, 285);     // >= 95%
  EXPECT_GE(float_ok, 150);  // it learned something (10 classes: chance is 30)
  if (std::string why = toolchain_missing(); !why.empty()) GTEST_SKIP() << "Cortex-M toolchain missing: " << why;
  const std::string dir = std::string(RLX_BINARY_DIR) + "/test-cortex-m/tinyconv";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(emit_project(*q, ins, dir).is_ok());
  for (const char* cpu : {"m3", "m4"}) {
    auto r = build_and_run(dir, cpu);
    ASSERT_TRUE(r.has_value()) << r.status().to_string();
    ASSERT_EQ(r->logits.size(), want.size()) << r->output;
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(r->logits[i], want[i]) << cpu << " input " << i;
    std::printf("[ info ] tinyconv %s: flash %lld bytes, RAM %lld bytes + 4K stack, %lld instructions per inference\n", cpu,
                static_cast<long long>(r->flash_bytes()), static_cast<long long>(r->ram_bytes()),
                static_cast<long long>(r->instructions.at(0)));
  }
}

// Strided, padded convolution (padding taps read the zero point: signed inputs make it
// non-trivial), an overlapping max pool, bias-free dense: agreement and bit-exact in QEMU.
TEST(CortexM, PaddedStridedConvIsBitIdenticalInQemu) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  auto rand_tensor = [&](Sizes s, double scale) {
    Tensor t = Tensor::zeros(DType::f32, s);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, scale * u(rng));
    return t;
  };
  train::ModelDef m;
  m.name = "padded";
  m.example_shape = {3, 9, 9};
  m.classes = 6;
  m.params = {{"c.weight", rand_tensor({4, 3, 3, 3}, 0.4)}, {"c.bias", rand_tensor({4}, 0.2)},
              {"f.weight", rand_tensor({64, 6}, 0.3)}};
  m.forward = [](OpBuilder& o, ValueId x, std::span<const ValueId> p, std::vector<ValueId>*) {
    const Attrs conv{{"strides", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}};
    ValueId h = o.relu(o.op(Op::Conv2d, {x, p[0], p[1]}, conv));  // [B, 4, 5, 5]
    h = o.op(Op::MaxPool2d, {h}, Attrs{{"kernel", std::vector<int64_t>{2, 2}}});  // stride 1: [B, 4, 4, 4]
    h = o.reshape(h, {-1, 64});
    return o.matmul(h, p[2]);
  };
  auto g = classifier_graph(m, {}, /*use_init=*/true);
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  auto fp = lower_for_cortex_m(*g);
  ASSERT_TRUE(fp.has_value()) << fp.status().to_string();
  ASSERT_EQ(fp->layers.size(), 3u);
  EXPECT_EQ(fp->layers[0].geo.pt, 1);
  EXPECT_EQ(fp->layers[0].geo.sh, 2);
  EXPECT_EQ(fp->layers[1].geo.sh, 1);
  auto q = quantize_program(*g, *fp, rand_tensor({300, 3 * 9 * 9}, 1.5));
  ASSERT_TRUE(q.has_value()) << q.status().to_string();
  EXPECT_GT(q->in_zp, -100);  // signed inputs: padding (real 0) is not the most negative code
  const Tensor test = rand_tensor({200, 3 * 9 * 9}, 1.5);
  auto outs = run_float(*g, *fp, test);
  ASSERT_TRUE(outs.has_value()) << outs.status().to_string();
  int agree = 0;
  EmbeddedInputs ins;
  std::vector<std::vector<int8_t>> want;
  for (int64_t i = 0; i < 200; ++i) {
    const float* fl = outs->back().data<float>() + i * 6;
    auto xi = quantize_input(*q, std::span<const float>(test.data<float>() + i * 243, 243));
    auto ql = run_reference(*q, xi);
    agree += (std::max_element(fl, fl + 6) - fl) == rlx_mcu_argmax_s8(ql.data(), 6);
    if (i < 8) {
      ins.inputs.push_back(xi);
      ins.labels.push_back(-1);
      want.push_back(ql);
    }
  }
  EXPECT_GE(agree, 180) << "of 200";
  if (std::string why = toolchain_missing(); !why.empty()) GTEST_SKIP() << "Cortex-M toolchain missing: " << why;
  const std::string dir = std::string(RLX_BINARY_DIR) + "/test-cortex-m/padded";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(emit_project(*q, ins, dir).is_ok());
  for (const char* cpu : {"m3", "m4"}) {
    auto r = build_and_run(dir, cpu);
    ASSERT_TRUE(r.has_value()) << r.status().to_string();
    ASSERT_EQ(r->logits.size(), want.size()) << r->output;
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(r->logits[i], want[i]) << cpu << " input " << i;
  }
}

}  // namespace
}  // namespace rlx::targets::cortex_m
