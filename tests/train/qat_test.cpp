// Quantization-aware training (train/qat.h): the sites match what the int8 targets quantize,
// the step graph carries fake_quantize and tracks the ranges (first step: the batch's own
// min/max, then a moving average), the checkpoint tensors round-trip, and bad checkpoints are
// errors naming the tensor. The accuracy on real handwriting (QAT within 0.5 points of f32) and
// the export to the int8 targets are tested in tests/targets/qat_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "train/init.h"
#include "train/qat.h"
#include "train/trainer.h"

namespace rlx::train {
namespace {

int count_ops(const Graph& g, Op op) {
  int n = 0;
  for (const Node& node : g.nodes) n += node.op == op;
  return n;
}

TEST(Qat, SitesAreTheInputsOfDenseAndConvLayersThenTheOutput) {
  auto mlp = mnist_model("mlp", 1);
  ASSERT_TRUE(mlp.has_value());
  auto s = qat_sites(*mlp);
  ASSERT_TRUE(s.has_value()) << s.status().to_string();
  EXPECT_EQ(*s, (std::vector<std::string>{"fc1.input", "fc2.input", "output"}));
  auto conv = mnist_model("tinyconv", 1);
  ASSERT_TRUE(conv.has_value());
  s = qat_sites(*conv);
  ASSERT_TRUE(s.has_value()) << s.status().to_string();
  EXPECT_EQ(*s, (std::vector<std::string>{"conv1.input", "conv2.input", "fc.input", "output"}));
}

TEST(Qat, StepGraphCarriesFakeQuantizeAndDonatesTheRanges) {
  for (const char* arch : {"mlp", "tinyconv"}) {
    SCOPED_TRACE(arch);
    auto m = mnist_model(arch, 1);
    ASSERT_TRUE(m.has_value());
    const int layers = std::string(arch) == "mlp" ? 2 : 3;
    auto sg = build_step_graph(*m, {.kind = OptimizerKind::adam}, 8, {}, {.enabled = true});
    ASSERT_TRUE(sg.has_value()) << sg.status().to_string();
    // every layer's input and weight, and the logits
    EXPECT_EQ(count_ops(sg->graph, Op::FakeQuantize), 2 * layers + 1);
    const StepLayout& L = sg->layout;
    EXPECT_EQ(L.num_qat, 2 * (layers + 1));
    EXPECT_EQ(L.first_qat, L.first_state + L.num_states);
    EXPECT_EQ(L.first_new_qat, L.first_new_state + L.num_states);
    EXPECT_EQ(sg->graph.inputs.size(), static_cast<size_t>(L.first_qat + L.num_qat));
    for (int i = 0; i < L.num_qat; ++i) {
      const auto pair = std::make_pair(L.first_new_qat + i, L.first_qat + i);
      EXPECT_NE(std::find(L.donate.begin(), L.donate.end(), pair), L.donate.end()) << "range " << i << " updated in place";
    }
    auto plain = build_step_graph(*m, {.kind = OptimizerKind::adam}, 8);
    ASSERT_TRUE(plain.has_value());
    EXPECT_EQ(count_ops(plain->graph, Op::FakeQuantize), 0);
    EXPECT_EQ(plain->layout.num_qat, 0);
    auto eval = build_eval_graph(*m, 8, true);
    ASSERT_TRUE(eval.has_value()) << eval.status().to_string();
    EXPECT_EQ(count_ops(*eval, Op::FakeQuantize), 2 * layers + 1);
    EXPECT_EQ(eval->inputs.size(), 2 + m->params.size() + 2 * (layers + 1)) << "images, labels, parameters, scale and zero point per site";
  }
  auto m = mnist_model("mlp", 1);
  // data parallelism: each site's batch min and max are all-reduced (min, max), so the ranks
  // track the global batch's range; plus the gradient buckets' and the loss's sums
  auto dp = build_step_graph(*m, {}, 8, {.ranks = 2}, {.enabled = true});
  ASSERT_TRUE(dp.has_value()) << dp.status().to_string();
  int mins = 0, maxs = 0;
  for (const Node& n : dp->graph.nodes)
    if (n.op == Op::AllReduce) {
      mins += n.attrs.s("reduce") == "min";
      maxs += n.attrs.s("reduce") == "max";
    }
  EXPECT_EQ(mins, 3) << "one per activation site of the MLP (two layer inputs and the logits)";
  EXPECT_EQ(maxs, 3);
  EXPECT_FALSE(build_step_graph(*m, {}, 8, {}, {.enabled = true, .momentum = 0.0}).has_value());
}

TEST(Qat, RangesStartAtTheFirstBatchThenFollowAMovingAverage) {
  auto m = mnist_model("mlp", 3);
  ASSERT_TRUE(m.has_value());
  TrainConfig cfg;
  cfg.qat.enabled = true;
  cfg.qat.momentum = 0.25;
  auto t = Trainer::create(*m, cfg);
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  Trainer& tr = **t;
  ASSERT_EQ(tr.qat_sites().size(), 3u);
  auto batch = [](uint64_t seed, double lo, double hi) {
    Tensor x = uniform(DType::f32, {16, 784}, lo, hi, seed);
    Tensor y = Tensor::zeros(DType::i32, {16});
    for (int i = 0; i < 16; ++i) y.data<int32_t>()[i] = static_cast<int32_t>((seed + static_cast<uint64_t>(i)) % 10);
    return std::pair{x, y};
  };
  auto min_max = [](const Tensor& x) {
    const float* v = x.data<float>();
    return std::pair{*std::min_element(v, v + x.numel()), *std::max_element(v, v + x.numel())};
  };
  Tensor probe = uniform(DType::f32, {4, 784}, 0.0, 1.0, 9);
  Tensor probe_y = Tensor::zeros(DType::i32, {4});
  EXPECT_FALSE(tr.evaluate(probe, probe_y, 4).has_value()) << "no ranges before the first step";
  auto [x1, y1] = batch(1, -0.5, 1.0);
  ASSERT_TRUE(tr.step(x1, y1, 0.01).has_value());
  auto [lo1, hi1] = min_max(x1);
  std::vector<QatRange> r = tr.qat_ranges();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].lo, lo1) << "step 1 takes the batch's own range";
  EXPECT_EQ(r[0].hi, hi1);
  EXPECT_EQ(r[1].lo, 0.0f) << "fc2 reads a ReLU output";
  EXPECT_GT(r[1].hi, 0.0f);
  EXPECT_LT(r[2].lo, r[2].hi);
  auto [x2, y2] = batch(2, -2.0, 3.0);
  ASSERT_TRUE(tr.step(x2, y2, 0.01).has_value());
  auto [lo2, hi2] = min_max(x2);
  r = tr.qat_ranges();
  EXPECT_NEAR(r[0].lo, lo1 + 0.25 * (lo2 - lo1), 1e-6);
  EXPECT_NEAR(r[0].hi, hi1 + 0.25 * (hi2 - hi1), 1e-6);
  // the checkpoint tensors: scale and zero point from act_quant_params, the range itself
  auto tensors = tr.qat_tensors();
  ASSERT_EQ(tensors.size(), 12u);
  std::map<std::string, Tensor> ckpt(tensors.begin(), tensors.end());
  auto params = qat_params_from_checkpoint(ckpt);
  ASSERT_TRUE(params.has_value()) << params.status().to_string();
  ASSERT_EQ(params->size(), 3u);
  const ActQuantParams want = act_quant_params(r[0].lo, r[0].hi);
  EXPECT_EQ(params->at("fc1.input").scale, want.scale);
  EXPECT_EQ(params->at("fc1.input").zero_point, want.zero_point);
  EXPECT_EQ(ckpt.at("qat.fc1.input.min").data<float>()[0], r[0].lo);
  // evaluation runs the fake-quantized model
  auto ev = tr.evaluate(probe, probe_y, 4);
  ASSERT_TRUE(ev.has_value()) << ev.status().to_string();
  EXPECT_EQ(ev->count, 4);
  EXPECT_TRUE(std::isfinite(ev->loss));
}

TEST(Qat, ActQuantParamsMatchTheInt8Convention) {
  ActQuantParams q = act_quant_params(-1.0, 3.0);
  EXPECT_EQ(q.scale, static_cast<float>(4.0 / 255.0));
  EXPECT_EQ(q.zero_point, -64);  // round(-128 + 1 / (4 / 255)) = round(-64.25)
  q = act_quant_params(0.5, 2.0);  // widened to include 0: [0, 2]
  EXPECT_EQ(q.scale, static_cast<float>(2.0 / 255.0));
  EXPECT_EQ(q.zero_point, -128);
  q = act_quant_params(-4.0, -1.0);  // [-4, 0]
  EXPECT_EQ(q.zero_point, 127);
  q = act_quant_params(0.0, 0.0);  // constant: a tiny positive scale
  EXPECT_GT(q.scale, 0.0f);
}

Tensor f32(double v) {
  Tensor t = Tensor::zeros(DType::f32, {});
  t.data<float>()[0] = static_cast<float>(v);
  return t;
}

TEST(Qat, BadCheckpointTensorsAreErrorsNamingThem) {
  std::map<std::string, Tensor> ok{{"qat.fc1.input.scale", f32(0.01)}, {"qat.fc1.input.zero_point", f32(-128)},
                                   {"fc1.weight", Tensor::zeros(DType::f32, {2, 2})}};
  auto p = qat_params_from_checkpoint(ok);
  ASSERT_TRUE(p.has_value()) << p.status().to_string();
  EXPECT_EQ(p->size(), 1u);
  EXPECT_TRUE(qat_params_from_checkpoint({{"fc1.weight", f32(1)}})->empty()) << "an f32 checkpoint has no sites";
  auto expect_error = [](std::map<std::string, Tensor> t, const std::string& names) {
    auto r = qat_params_from_checkpoint(t);
    ASSERT_FALSE(r.has_value());
    EXPECT_NE(r.status().message().find(names), std::string::npos) << r.status().message();
  };
  expect_error({{"qat.fc1.input.scale", f32(0.01)}}, "qat.fc1.input.zero_point");
  expect_error({{"qat.fc1.input.zero_point", f32(3)}}, "qat.fc1.input.scale");
  expect_error({{"qat.x.scale", f32(-1)}, {"qat.x.zero_point", f32(0)}}, "qat.x.scale");
  expect_error({{"qat.x.scale", f32(0.1)}, {"qat.x.zero_point", f32(0.5)}}, "qat.x.zero_point");
  expect_error({{"qat.x.scale", f32(0.1)}, {"qat.x.zero_point", f32(300)}}, "qat.x.zero_point");
  expect_error({{"qat.x.scale", Tensor::zeros(DType::f32, {2})}, {"qat.x.zero_point", f32(0)}}, "qat.x.scale");
}

}  // namespace
}  // namespace rlx::train
