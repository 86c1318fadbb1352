// Optimizer updates (emitted as graph ops) against a scalar double implementation of
// PyTorch's torch.optim formulas, over several steps with changing gradients and learning
// rates; and the learning-rate schedules.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "rlx/compile.h"
#include "train/optim.h"

namespace rlx::train {
namespace {

// torch.optim.SGD / Adam / AdamW for one scalar parameter; `t` is the 1-based step.
struct Reference {
  OptimizerConfig c;
  double p, m = 0.0, v = 0.0;
  bool first = true;
  void step(double g, double lr, int t) {
    if (c.kind == OptimizerKind::sgd) {
      double d = g + c.weight_decay * p;
      if (c.momentum != 0.0) {
        // PyTorch's first step sets the buffer to d (no dampening); zero-initialized state
        // with momentum * 0 + d is the same
        m = first ? d : c.momentum * m + d;
        d = c.nesterov ? d + c.momentum * m : m;
      }
      p -= lr * d;
    } else {
      double d = g;
      if (c.kind == OptimizerKind::adamw) {
        p *= 1.0 - lr * c.weight_decay;
      } else {
        d += c.weight_decay * p;
      }
      m = c.beta1 * m + (1.0 - c.beta1) * d;
      v = c.beta2 * v + (1.0 - c.beta2) * d * d;
      const double mhat = m / (1.0 - std::pow(c.beta1, t)), vhat = v / (1.0 - std::pow(c.beta2, t));
      p -= lr * mhat / (std::sqrt(vhat) + c.eps);
    }
    first = false;
  }
};

struct OptCase {
  std::string name;
  OptimizerConfig c;
};

std::vector<OptCase> opt_cases() {
  std::vector<OptCase> r;
  r.push_back({"sgd", {.kind = OptimizerKind::sgd}});
  r.push_back({"sgd_weight_decay", {.kind = OptimizerKind::sgd, .weight_decay = 0.1}});
  r.push_back({"sgd_momentum_weight_decay", {.kind = OptimizerKind::sgd, .momentum = 0.9, .weight_decay = 0.05}});
  r.push_back({"sgd_nesterov", {.kind = OptimizerKind::sgd, .momentum = 0.8, .nesterov = true}});
  r.push_back({"adam", {.kind = OptimizerKind::adam}});
  r.push_back({"adam_weight_decay", {.kind = OptimizerKind::adam, .beta1 = 0.8, .beta2 = 0.99, .weight_decay = 0.1}});
  r.push_back({"adamw", {.kind = OptimizerKind::adamw, .weight_decay = 0.1}});
  return r;
}

class Optimizers : public ::testing::TestWithParam<std::tuple<OptCase, std::string>> {};

TEST_P(Optimizers, MatchTorchFormulasOverSteps) {
  const auto& [oc, device] = GetParam();
  const OptimizerConfig& c = oc.c;
  const DType dt = device == "ref" ? DType::f64 : DType::f32;
  const int64_t n = 37;  // not a multiple of a vector width
  const int slots = state_slots(c);
  ASSERT_EQ(static_cast<int>(state_slot_names(c).size()), slots);
  Graph g;
  const TensorType pt{dt, {Dim(n)}};
  ValueId p = g.add_input("p", pt);
  ValueId grad = g.add_input("g", pt);
  std::vector<ValueId> state;
  for (int s = 0; s < slots; ++s) state.push_back(g.add_input("s" + std::to_string(s), pt));
  ValueId lr = g.add_input("lr", TensorType{DType::f32, {}});
  ValueId step = g.add_input("step", TensorType{DType::f32, {}});
  GraphBuilder gb(g);
  OpBuilder o(gb);
  ParamUpdate u = apply_optimizer(o, c, p, grad, state, lr, step);
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  ASSERT_EQ(static_cast<int>(u.state.size()), slots);
  g.outputs = {u.param};
  g.outputs.insert(g.outputs.end(), u.state.begin(), u.state.end());
  // parameter and state updated in place, as the training step does
  CompileOptions opts{.device = device};
  opts.donate.push_back({0, 0});
  for (int s = 0; s < slots; ++s) opts.donate.push_back({1 + s, 2 + s});
  auto model = Model::compile(std::move(g), opts);
  ASSERT_TRUE(model.has_value()) << model.status().to_string();
  auto var = (*model)->prepare({});
  ASSERT_TRUE(var.has_value()) << var.status().to_string();

  std::mt19937 rng(1234);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  std::vector<Reference> ref;
  std::vector<double> p0(n);
  for (int64_t i = 0; i < n; ++i) {
    p0[i] = uni(rng);
    ref.push_back(Reference{c, p0[i]});
  }
  Tensor param = Tensor::from_f64(dt, {n}, p0);
  Tensor gt = Tensor::zeros(dt, {n});
  std::vector<Tensor> st;
  for (int s = 0; s < slots; ++s) st.push_back(Tensor::zeros(dt, {n}));
  Tensor lrt = Tensor::zeros(DType::f32, {}), stept = Tensor::zeros(DType::f32, {});
  const uint8_t* param_bytes = param.bytes();
  for (int t = 1; t <= 6; ++t) {
    const double lr_t = 0.05 / t;  // changes every step without recompiling
    lrt.set_f64(0, lr_t);
    stept.set_f64(0, t);
    for (int64_t i = 0; i < n; ++i) {
      const double gv = uni(rng) * (i % 5 == 0 ? 1e-3 : 1.0);
      gt.set_f64(i, gv);
      ref[i].step(dt == DType::f32 ? static_cast<double>(static_cast<float>(gv)) : gv,
                  static_cast<double>(static_cast<float>(lr_t)), t);
    }
    std::vector<Tensor> in{param, gt};
    in.insert(in.end(), st.begin(), st.end());
    in.push_back(lrt);
    in.push_back(stept);
    std::vector<Tensor> out{param};
    out.insert(out.end(), st.begin(), st.end());
    Status s = (*var)->executable->run_into(in, out);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
  }
  ASSERT_EQ(param.bytes(), param_bytes);
  const double tol = dt == DType::f64 ? 1e-12 : 2e-6;
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_NEAR(param.get_f64(i), ref[i].p, tol * std::max(1.0, std::abs(ref[i].p))) << oc.name << " element " << i;
    EXPECT_NE(param.get_f64(i), p0[i]);
    if (slots >= 1) EXPECT_NEAR(st[0].get_f64(i), ref[i].m, tol * std::max(1.0, std::abs(ref[i].m)));
    if (slots >= 2) EXPECT_NEAR(st[1].get_f64(i), ref[i].v, tol * std::max(1.0, std::abs(ref[i].v)));
  }
}

INSTANTIATE_TEST_SUITE_P(All, Optimizers, ::testing::Combine(::testing::ValuesIn(opt_cases()), ::testing::Values("ref", "cpu")),
                         [](const auto& info) { return std::get<0>(info.param).name + "_" + std::get<1>(info.param); });

TEST(Optimizers, StateSlotsAndNames) {
  EXPECT_EQ(state_slots({.kind = OptimizerKind::sgd}), 0);
  EXPECT_EQ(state_slots({.kind = OptimizerKind::sgd, .momentum = 0.9}), 1);
  EXPECT_EQ(state_slot_names({.kind = OptimizerKind::sgd, .momentum = 0.9})[0], "momentum");
  EXPECT_EQ(state_slots({.kind = OptimizerKind::adam}), 2);
  EXPECT_EQ(state_slot_names({.kind = OptimizerKind::adamw})[1], "exp_avg_sq");
  EXPECT_EQ(*parse_optimizer("adamw"), OptimizerKind::adamw);
  EXPECT_FALSE(parse_optimizer("rmsprop").has_value());
}

TEST(Optimizers, WrongStateCountIsAnError) {
  Graph g;
  ValueId p = g.add_input("p", TensorType{DType::f32, {Dim(3)}});
  ValueId lr = g.add_input("lr", TensorType{DType::f32, {}});
  GraphBuilder gb(g);
  OpBuilder o(gb);
  apply_optimizer(o, {.kind = OptimizerKind::adam}, p, p, std::vector<ValueId>{p}, lr, lr);
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("state"), std::string::npos) << o.status().to_string();
}

TEST(LrSchedule, Constant) {
  LrSchedule s{.kind = LrSchedule::Kind::constant, .base = 0.1};
  EXPECT_DOUBLE_EQ(s.at(0), 0.1);
  EXPECT_DOUBLE_EQ(s.at(1000), 0.1);
}

TEST(LrSchedule, StepDecaysEveryStepSize) {
  LrSchedule s{.kind = LrSchedule::Kind::step, .base = 0.1, .step_size = 10, .gamma = 0.5};
  EXPECT_DOUBLE_EQ(s.at(0), 0.1);
  EXPECT_DOUBLE_EQ(s.at(9), 0.1);
  EXPECT_DOUBLE_EQ(s.at(10), 0.05);
  EXPECT_DOUBLE_EQ(s.at(29), 0.025);
  EXPECT_DOUBLE_EQ(s.at(30), 0.0125);
}

TEST(LrSchedule, CosineFromBaseToMin) {
  LrSchedule s{.kind = LrSchedule::Kind::cosine, .base = 0.2, .total_steps = 100, .min_lr = 0.01};
  EXPECT_DOUBLE_EQ(s.at(0), 0.2);
  EXPECT_NEAR(s.at(50), 0.01 + 0.19 * 0.5, 1e-15);
  EXPECT_NEAR(s.at(25), 0.01 + 0.19 * 0.5 * (1.0 + std::cos(M_PI * 0.25)), 1e-15);
  EXPECT_NEAR(s.at(100), 0.01, 1e-15);
  EXPECT_NEAR(s.at(500), 0.01, 1e-15);  // stays at the minimum past the end
  for (int64_t t = 1; t <= 100; ++t) EXPECT_LE(s.at(t), s.at(t - 1)) << t;  // monotone
}

TEST(LrSchedule, LinearWarmup) {
  LrSchedule s{.kind = LrSchedule::Kind::step, .base = 0.1, .step_size = 100, .gamma = 0.1, .warmup_steps = 4};
  EXPECT_NEAR(s.at(0), 0.025, 1e-15);
  EXPECT_NEAR(s.at(3), 0.1, 1e-15);
  EXPECT_NEAR(s.at(4), 0.1, 1e-15);
  EXPECT_EQ(*parse_schedule("cosine"), LrSchedule::Kind::cosine);
  EXPECT_FALSE(parse_schedule("linear").has_value());
}

}  // namespace
}  // namespace rlx::train
