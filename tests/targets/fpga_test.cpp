// The FPGA target: the generated SystemVerilog simulated with Verilator gives logits
// bit-identical to the host int8 reference (rlx_mcu_kernels.h) for every input, with the cycles
// per inference, for the MLP, tinyconv and odd shapes; Yosys synthesizes it and reports cells,
// multipliers and memory bits; unsupported ops are illegal-node errors naming the node; bad
// options are errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "cli/run_rlx.h"
#include "rlx/safetensors.h"
#include "targets/int8/int8.h"
#include "targets/fpga/fpga.h"
#include "train/data.h"
#include "train/models.h"

namespace rlx::targets::fpga {
namespace {

using int8::Int8Program;

struct Rand {
  std::mt19937_64 rng;
  std::uniform_real_distribution<double> u{-1.0, 1.0};
  explicit Rand(uint64_t seed) : rng(seed) {}
  Tensor tensor(Sizes s, double scale) {
    Tensor t = Tensor::zeros(DType::f32, s);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, scale * u(rng));
    return t;
  }
};

std::string dir_for(const std::string& name) {
  const std::string d = std::string(RLX_BINARY_DIR) + "/test-fpga/" + name;
  std::filesystem::remove_all(d);
  return d;
}

// Emits `q` with `inputs` at `lanes`, simulates it, and checks every input's logits against the
// host reference; returns the cycles of the first inference (0 when skipped or failed).
int64_t simulate_and_compare(const Int8Program& q, const std::vector<std::vector<int8_t>>& inputs, int32_t lanes,
                             const std::string& dir) {
  Options o;
  o.lanes = lanes;
  auto lay = layout(q, o);
  EXPECT_TRUE(lay.has_value()) << lay.status().to_string();
  if (!lay) return 0;
  Status s = emit_design(q, o, inputs, dir);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  for (const char* f : {"rlx_fpga_top.sv", "weights.mem", "bias.mem", "mult.mem", "shift.mem", "inputs.mem", "tb.cpp",
                        "Makefile", "report.txt"})
    EXPECT_TRUE(std::filesystem::exists(dir + "/" + f)) << f;
  if (!verilator_missing().empty()) return 0;
  auto r = simulate(dir);
  EXPECT_TRUE(r.has_value()) << r.status().to_string();
  if (!r) return 0;
  EXPECT_EQ(r->logits.size(), inputs.size()) << r->output;
  int same = 0;
  for (size_t i = 0; i < inputs.size() && i < r->logits.size(); ++i) {
    const std::vector<int8_t> want = int8::run_reference(q, inputs[i]);
    EXPECT_EQ(r->logits[i], want) << "input " << i;
    same += r->logits[i] == want;
    // the controller's cycle count is exact: input, chunks + 3 per output channel, output
    EXPECT_EQ(r->cycles[i], lay->cycles_estimate) << "input " << i;
  }
  std::printf("[ info ] %s at P=%d: logits bit-identical on %d of %zu inputs, %lld cycles per inference\n", dir.c_str(),
              lanes, same, inputs.size(), static_cast<long long>(r->cycles.empty() ? 0 : r->cycles[0]));
  return r->cycles.empty() ? 0 : r->cycles[0];
}

// The MNIST MLP (784-128-10) with its seeded weights and random biases, calibrated on the
// trainer's synthetic images; embedded: synthetic test images and one of random int8 noise.
Int8Program mlp_program(std::vector<std::vector<int8_t>>* inputs, int n_images) {
  auto m = train::mnist_model("mlp", 3);
  std::map<std::string, Tensor> w;
  Rand r(11);
  for (const auto& p : m->params)
    w[p.name] = p.name.find("bias") != std::string::npos ? r.tensor(p.init.sizes(), 0.2) : p.init.clone();
  auto g = int8::classifier_graph(*m, w);
  EXPECT_TRUE(g.has_value()) << g.status().to_string();
  auto fp = lower_for_fpga(*g);
  EXPECT_TRUE(fp.has_value()) << fp.status().to_string();
  EXPECT_EQ(fp->report.device, "fpga");
  const train::MnistData data = train::synthetic_mnist(100, n_images, 5);
  Tensor calib = Tensor::zeros(DType::f32, {100, 784});
  std::copy(data.train.images.data<float>(), data.train.images.data<float>() + 100 * 784, calib.data<float>());
  auto q = int8::quantize_program(*g, *fp, calib);
  EXPECT_TRUE(q.has_value()) << q.status().to_string();
  for (int i = 0; i < n_images; ++i)
    inputs->push_back(int8::quantize_input(
        *q, std::span<const float>(data.test.images.data<float>() + static_cast<int64_t>(i) * 784, 784)));
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> b(-128, 127);
  std::vector<int8_t> noise(784);
  for (auto& x : noise) x = static_cast<int8_t>(b(rng));
  inputs->push_back(noise);
  return std::move(*q);
}

TEST(Fpga, MlpIsBitIdenticalInVerilator) {
  std::vector<std::vector<int8_t>> inputs;
  const Int8Program q = mlp_program(&inputs, 3);
  if (std::string why = verilator_missing(); !why.empty()) std::printf("[ info ] not simulating: %s\n", why.c_str());
  const int64_t cycles = simulate_and_compare(q, inputs, 8, dir_for("mlp_p8"));
  if (!verilator_missing().empty()) GTEST_SKIP() << "Verilator missing: " << verilator_missing();
  EXPECT_EQ(cycles, 784 + 128 * (98 + 3) + 10 * (16 + 3) + 20);
}

// Three layers with odd widths (tails of a chunk read stale activations against zero weights),
// a layer without ReLU (signed activations), signed inputs, P = 4: the ping-pong buffers over
// three layers and the rounding of negative accumulators.
TEST(Fpga, ThreeLayerChainIsBitIdenticalInVerilator) {
  Rand r(99);
  train::ModelDef m;
  m.name = "chain";
  m.example_shape = {9};
  m.classes = 5;
  m.params = {{"a.weight", r.tensor({9, 50}, 0.5)}, {"a.bias", r.tensor({50}, 0.3)},
              {"b.weight", r.tensor({50, 37}, 0.2)}, {"b.bias", r.tensor({37}, 0.3)},
              {"c.weight", r.tensor({37, 5}, 0.3)},  {"c.bias", r.tensor({5}, 0.3)}};
  m.forward = [](OpBuilder& o, ValueId x, std::span<const ValueId> p, std::vector<ValueId>*) {
    ValueId h = o.relu(o.add(o.matmul(x, p[0]), p[1]));
    h = o.add(o.matmul(h, p[2]), p[3]);
    return o.add(o.matmul(h, p[4]), p[5]);
  };
  auto g = int8::classifier_graph(m, {}, /*use_init=*/true);
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  auto fp = lower_for_fpga(*g);
  ASSERT_TRUE(fp.has_value()) << fp.status().to_string();
  auto q = int8::quantize_program(*g, *fp, r.tensor({300, 9}, 2.0));
  ASSERT_TRUE(q.has_value()) << q.status().to_string();
  EXPECT_NE(q->in_zp, -128);
  std::vector<std::vector<int8_t>> inputs;
  const Tensor test = r.tensor({12, 9}, 2.5);
  for (int64_t i = 0; i < 12; ++i)
    inputs.push_back(int8::quantize_input(*q, std::span<const float>(test.data<float>() + i * 9, 9)));
  simulate_and_compare(*q, inputs, 4, dir_for("chain_p4"));  // P = 1 and 32: checked with rlx codegen fpga --run
  if (!verilator_missing().empty()) GTEST_SKIP() << "Verilator missing: " << verilator_missing();
}

TEST(Fpga, YosysSynthesizesTheMlp) {
  std::vector<std::vector<int8_t>> inputs;
  const Int8Program q = mlp_program(&inputs, 1);
  Options o;
  o.lanes = 8;
  const std::string dir = dir_for("mlp_synth");
  ASSERT_TRUE(emit_design(q, o, inputs, dir).is_ok());
  if (std::string why = yosys_missing(); !why.empty()) GTEST_SKIP() << "Yosys missing: " << why;
  auto s = synthesize(dir);
  ASSERT_TRUE(s.has_value()) << s.status().to_string();
  std::printf("[ info ] yosys (generic synth, P=8): %lld cells, %lld multipliers, %lld memories, %lld memory bits\n",
              static_cast<long long>(s->cells), static_cast<long long>(s->multipliers),
              static_cast<long long>(s->memories), static_cast<long long>(s->memory_bits));
  for (const auto& [shape, n] : s->multiplier_shapes) std::printf("[ info ]   %lld multipliers %s\n", static_cast<long long>(n), shape.c_str());
  EXPECT_EQ(s->multiplier_shapes["8x8"], 8) << s->stat;  // the MAC lanes
  for (const auto& [mem, shape] : s->memory_shapes) std::printf("[ info ]   memory %s %s\n", mem.c_str(), shape.c_str());
  // weights: 128 x 98 + 10 x 16 words of 64 bits; 8 activation banks of 2 x 98 bytes; the bias,
  // multiplier and shift ROMs (138 entries) lose the data bits that are the same in every entry
  EXPECT_EQ(s->memory_shapes["wmem"], "64x12704") << s->stat;
  EXPECT_EQ(s->memory_shapes["bank[0].mem"], "8x196") << s->stat;
  EXPECT_EQ(s->memories, 12) << s->stat;
  const int64_t weights_and_banks = int64_t{12704} * 64 + 8 * 196 * 8;
  EXPECT_GT(s->memory_bits, weights_and_banks) << s->stat;
  EXPECT_LE(s->memory_bits, weights_and_banks + 138 * (32 + 32 + 8)) << s->stat;
  EXPECT_EQ(s->multipliers, 9) << s->stat;
  EXPECT_EQ(s->multiplier_shapes["32x32"], 1) << s->stat;  // requantization: acc x M
  EXPECT_GT(s->cells, 1000) << s->stat;
}

// tinyconv (conv 3x3 + relu, max pool 2x2, conv 3x3 + relu, max pool 2x2, dense) with its
// seeded weights: the tap walker, the window region and pooling, bit-identical, exact cycles.
TEST(Fpga, TinyconvIsBitIdenticalInVerilator) {
  auto m = train::mnist_model("tinyconv", 2);
  auto g = int8::classifier_graph(*m, {}, /*use_init=*/true);
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  auto fp = lower_for_fpga(*g);
  ASSERT_TRUE(fp.has_value()) << fp.status().to_string();
  EXPECT_EQ(fp->report.device, "fpga");
  const train::MnistData data = train::synthetic_mnist(100, 3, 6);
  Tensor calib = Tensor::zeros(DType::f32, {100, 784});
  std::copy(data.train.images.data<float>(), data.train.images.data<float>() + 100 * 784, calib.data<float>());
  auto q = int8::quantize_program(*g, *fp, calib);
  ASSERT_TRUE(q.has_value()) << q.status().to_string();
  std::vector<std::vector<int8_t>> inputs;
  for (int i = 0; i < 3; ++i)
    inputs.push_back(int8::quantize_input(
        *q, std::span<const float>(data.test.images.data<float>() + static_cast<int64_t>(i) * 784, 784)));
  const int64_t cycles = simulate_and_compare(*q, inputs, 8, dir_for("tinyconv_p8"));
  if (!verilator_missing().empty()) GTEST_SKIP() << "Verilator missing: " << verilator_missing();
  // conv1: 676 pixels x (9 taps + 1 + 8 x (2 + 3)); pool1: 8 x 169 x (4 + 2); conv2: 121 x (72 + 1 +
  // 16 x (9 + 3)); pool2: 16 x 25 x 6; fc: 10 x (50 + 3); one start cycle per layer; in and out
  EXPECT_EQ(cycles, 784 + 676 * 50 + 8 * 169 * 6 + 121 * 265 + 16 * 25 * 6 + 10 * 53 + 5 + 20);
}

// A strided, padded convolution (padding taps read the input zero point, which is not -128 for
// these signed inputs), an overlapping max pool (stride 1) and a dense layer without bias, P = 4.
TEST(Fpga, PaddedStridedConvIsBitIdenticalInVerilator) {
  Rand r(5);
  train::ModelDef m;
  m.name = "padded";
  m.example_shape = {3, 9, 9};
  m.classes = 6;
  m.params = {{"c.weight", r.tensor({4, 3, 3, 3}, 0.4)}, {"c.bias", r.tensor({4}, 0.2)},
              {"f.weight", r.tensor({64, 6}, 0.3)}};
  m.forward = [](OpBuilder& o, ValueId x, std::span<const ValueId> p, std::vector<ValueId>*) {
    const Attrs conv{{"strides", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}};
    ValueId h = o.relu(o.op(Op::Conv2d, {x, p[0], p[1]}, conv));                  // [B, 4, 5, 5]
    h = o.op(Op::MaxPool2d, {h}, Attrs{{"kernel", std::vector<int64_t>{2, 2}}});  // stride 1: [B, 4, 4, 4]
    h = o.reshape(h, {-1, 64});
    return o.matmul(h, p[2]);
  };
  auto g = int8::classifier_graph(m, {}, /*use_init=*/true);
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  auto fp = lower_for_fpga(*g);
  ASSERT_TRUE(fp.has_value()) << fp.status().to_string();
  ASSERT_EQ(fp->layers.size(), 3u);
  EXPECT_EQ(fp->layers[0].geo.pt, 1);
  auto q = int8::quantize_program(*g, *fp, r.tensor({300, 243}, 1.5));
  ASSERT_TRUE(q.has_value()) << q.status().to_string();
  EXPECT_GT(q->in_zp, -100);
  std::vector<std::vector<int8_t>> inputs;
  const Tensor test = r.tensor({6, 243}, 1.5);
  for (int64_t i = 0; i < 6; ++i)
    inputs.push_back(int8::quantize_input(*q, std::span<const float>(test.data<float>() + i * 243, 243)));
  simulate_and_compare(*q, inputs, 4, dir_for("padded_p4"));
  if (!verilator_missing().empty()) GTEST_SKIP() << "Verilator missing: " << verilator_missing();
}

// What neither target runs is an illegal-node error naming each node, for the fpga.
TEST(Fpga, UnsupportedOpsAreCompileErrorsNamingTheNode) {
  train::ModelDef m;
  m.name = "bad";
  m.example_shape = {2, 6, 6};
  m.params = {{"dw.weight", Tensor::from_vector<double>(DType::f32, {2, 1, 3, 3}, std::vector<double>(18, 0.1))},
              {"fc.weight", Tensor::from_vector<double>(DType::f32, {32, 3}, std::vector<double>(96, 0.1))}};
  m.forward = [](OpBuilder& o, ValueId x, std::span<const ValueId> p, std::vector<ValueId>*) {
    ValueId h = o.op(Op::Conv2d, {x, p[0]}, Attrs{{"group", int64_t{2}}});
    h = o.sigmoid(h);
    h = o.reshape(h, {-1, 32});
    return o.matmul(h, p[1]);
  };
  auto g = int8::classifier_graph(m, {}, /*use_init=*/true);
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  auto fp = lower_for_fpga(*g);
  ASSERT_FALSE(fp.has_value());
  EXPECT_EQ(fp.status().code(), ErrorCode::illegal);
  const std::string& msg = fp.status().message();
  EXPECT_NE(msg.find("2 nodes cannot run on fpga"), std::string::npos) << msg;
  EXPECT_NE(msg.find("grouped and depthwise conv2d (group != 1) are not supported yet by the fpga target"),
            std::string::npos) << msg;
  EXPECT_NE(msg.find("sigmoid"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("cortex-m"), std::string::npos) << msg;
}

TEST(Fpga, BadLanesAreAnError) {
  std::vector<std::vector<int8_t>> inputs;
  const Int8Program q = mlp_program(&inputs, 1);
  for (int32_t lanes : {0, 3, 128}) {
    Options o;
    o.lanes = lanes;
    auto lay = layout(q, o);
    ASSERT_FALSE(lay.has_value()) << lanes;
    EXPECT_NE(lay.status().message().find("--lanes must be a power of two"), std::string::npos);
  }
  Options o;
  std::vector<std::vector<int8_t>> bad{std::vector<int8_t>(5, 1)};
  Status s = emit_design(q, o, bad, dir_for("bad"));
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("784"), std::string::npos) << s.to_string();
}

}  // namespace
}  // namespace rlx::targets::fpga

// `rlx codegen fpga` as a user runs it: a checkpoint -> the design, simulated and synthesized
// with --run when the tools are here; tinyconv compiles too.
namespace rlx_fpga_cli {

std::string save_model(const std::string& arch) {
  auto m = rlx::train::mnist_model(arch, 4);
  std::vector<std::pair<std::string, rlx::Tensor>> ts;
  for (const auto& p : m->params) ts.push_back({p.name, p.init});
  const std::string d = std::string(RLX_BINARY_DIR) + "/test-fpga";
  std::filesystem::create_directories(d);
  const std::string path = d + "/cli_" + arch + ".safetensors";
  EXPECT_TRUE(rlx::safetensors::save(path, ts, {{"arch", arch}}).is_ok());
  return path;
}

TEST(FpgaCli, MlpDesignSimulatedAndSynthesized) {
  const std::string model = save_model("mlp");
  const std::string out = std::string(RLX_BINARY_DIR) + "/test-fpga/cli_mlp";
  std::filesystem::remove_all(out);
  const bool tools = rlx::targets::fpga::verilator_missing().empty() && rlx::targets::fpga::yosys_missing().empty();
  if (!tools) std::printf("[ info ] not running --run: %s %s\n", rlx::targets::fpga::verilator_missing().c_str(),
                          rlx::targets::fpga::yosys_missing().c_str());
  rlx_cli_test::Result r = rlx_cli_test::rlx("codegen fpga " + model + " --out " + out +
                                             " --calib 100 --eval 100 --inputs 2 --lanes 16" + (tools ? " --run" : ""));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("compile-ready: yes (5 native"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("16 MAC lanes, " + std::to_string(784 + 128 * (49 + 3) + 10 * (8 + 3) + 20) + " cycles"),
            std::string::npos) << r.out;
  if (tools) {
    EXPECT_NE(r.out.find("bit-identical to the host reference on 2 of 2 inputs"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("17 multipliers (1 of 32x32, 16 of 8x8)"), std::string::npos) << r.out;
  }
  rlx_cli_test::Result tc = rlx_cli_test::rlx("codegen fpga " + save_model("tinyconv") + " --out " + out +
                                              "_tc --calib 50 --eval 0 --inputs 1");
  EXPECT_EQ(tc.code, 0) << tc.out;
  EXPECT_NE(tc.out.find("compile-ready: yes (9 native"), std::string::npos) << tc.out;
  rlx_cli_test::Result lanes = rlx_cli_test::rlx("codegen cortex-m " + model + " --out " + out + "_m --lanes 4");
  EXPECT_NE(lanes.code, 0) << lanes.out;
  EXPECT_NE(lanes.out.find("--lanes is an option of the fpga target"), std::string::npos) << lanes.out;
}

}  // namespace rlx_fpga_cli
