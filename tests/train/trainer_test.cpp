// The training step as one compiled graph: parameters and optimizer state updated in place,
// the fused CPU step equal to the same step graph on the reference interpreter (f64
// accumulation, no fusion, no donation), loss going down, evaluation, partial batches; and the
// MLP trained on real handwriting (scikit-learn's digits, converted by
// scripts/digits-to-idx.py) to at least 95% test accuracy.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "train/data.h"
#include "train/init.h"
#include "train/trainer.h"

namespace rlx::train {
namespace {

struct Batch {
  Tensor x, y;
};

Batch random_batch(const ModelDef& m, int64_t b, uint64_t seed) {
  Sizes s{b};
  s.insert(s.end(), m.example_shape.begin(), m.example_shape.end());
  Batch r{uniform(DType::f32, s, 0.0, 1.0, seed), Tensor::zeros(DType::i32, {b})};
  Rng rng(seed + 100);
  for (int64_t i = 0; i < b; ++i) r.y.data<int32_t>()[i] = static_cast<int32_t>(rng.below(10));
  return r;
}

TEST(StepGraph, LayoutAndDonation) {
  auto m = mnist_model("mlp", 1);
  ASSERT_TRUE(m.has_value());
  auto sg = build_step_graph(*m, {.kind = OptimizerKind::adam}, 16);
  ASSERT_TRUE(sg.has_value()) << sg.status().to_string();
  const StepLayout& L = sg->layout;
  EXPECT_EQ(L.num_params, 4);
  EXPECT_EQ(L.num_states, 8);
  EXPECT_EQ(sg->graph.inputs.size(), static_cast<size_t>(4 + 4 + 8));
  EXPECT_EQ(L.donate.size(), 12u);
  EXPECT_EQ(sg->graph.values[sg->graph.inputs[static_cast<size_t>(L.first_state)]].name, "fc1.weight.exp_avg");
  EXPECT_EQ(sg->graph.values[sg->graph.inputs[static_cast<size_t>(L.first_state + 4)]].name, "fc1.weight.exp_avg_sq");
  for (auto [out, in] : L.donate)
    EXPECT_EQ(sg->graph.type(sg->graph.outputs[static_cast<size_t>(out)]), sg->graph.type(sg->graph.inputs[static_cast<size_t>(in)]));
}

TEST(Trainer, OneProgramUpdatesParametersInPlace) {
  auto m = mnist_model("mlp", 1);
  ASSERT_TRUE(m.has_value());
  auto t = Trainer::create(*m, {.optimizer = {.kind = OptimizerKind::sgd, .momentum = 0.9}});
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  auto v = (*t)->step_variant(32);
  ASSERT_TRUE(v.has_value()) << v.status().to_string();
  const std::string& listing = (*v)->executable->stats().kernel_listing;
  // forward, backward and update are one kernel program; every parameter and momentum is
  // written over its input
  for (int i = 0; i < 8; ++i) EXPECT_NE(listing.find(cat("donate input ", 4 + i, " -> output ", 1 + i)), std::string::npos) << i;
  std::vector<const uint8_t*> before;
  std::vector<std::vector<double>> values;
  for (auto& [name, p] : (*t)->named_parameters()) {
    before.push_back(p.bytes());
    values.push_back(p.to_f64());
  }
  Batch b = random_batch(*m, 32, 5);
  auto loss = (*t)->step(b.x, b.y, 0.1);
  ASSERT_TRUE(loss.has_value()) << loss.status().to_string();
  EXPECT_TRUE(std::isfinite(*loss));
  EXPECT_NEAR(*loss, std::log(10.0), 1.0);  // about log(classes) at initialization
  auto after = (*t)->named_parameters();
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].second.bytes(), before[i]) << after[i].first << " moved";
    EXPECT_NE(after[i].second.to_f64(), values[i]) << after[i].first << " was not updated";
  }
  EXPECT_EQ((*t)->steps_done(), 1);
}

// The fused, donated CPU step against the reference interpreter running the same graph.
// rel_tol bounds |cpu - ref| / |ref - initial| in the 2-norm over each parameter: Adam's
// m / sqrt(v) amplifies rounding where a gradient is near 0 (its sign decides a full lr step),
// so it is compared by norms, not element by element.
void compare_with_reference(const std::string& arch, OptimizerConfig opt, int64_t batch, int steps, double rel_tol) {
  auto m = mnist_model(arch, 3);
  ASSERT_TRUE(m.has_value());
  auto t = Trainer::create(*m, {.optimizer = opt});
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  auto sg = build_step_graph(*m, opt, batch);
  ASSERT_TRUE(sg.has_value()) << sg.status().to_string();
  const StepLayout L = sg->layout;
  auto ref = Model::compile(std::move(sg->graph), {.device = "ref"});
  ASSERT_TRUE(ref.has_value()) << ref.status().to_string();
  std::vector<Tensor> params, state;
  for (const ParamSpec& p : m->params) params.push_back(p.init.clone());
  for (int s = 0; s < L.num_states; ++s) state.push_back(Tensor::zeros(DType::f32, m->params[static_cast<size_t>(s % L.num_params)].init.sizes()));
  for (int k = 1; k <= steps; ++k) {
    Batch b = random_batch(*m, batch, 10 + static_cast<uint64_t>(k));
    const double lr = 0.05 / k;
    auto loss = (*t)->step(b.x, b.y, lr);
    ASSERT_TRUE(loss.has_value()) << loss.status().to_string();
    std::vector<Tensor> in{b.x, b.y, Tensor::from_f64(DType::f32, {}, std::vector<double>{lr}),
                           Tensor::from_f64(DType::f32, {}, std::vector<double>{static_cast<double>(k)})};
    in.insert(in.end(), params.begin(), params.end());
    in.insert(in.end(), state.begin(), state.end());
    auto out = (*ref)->run(in);
    ASSERT_TRUE(out.has_value()) << out.status().to_string();
    EXPECT_NEAR(*loss, (*out)[0].get_f64(0), 1e-4 * std::max(1.0, std::abs(static_cast<double>(*loss)))) << arch << " step " << k;
    for (int i = 0; i < L.num_params; ++i) params[static_cast<size_t>(i)] = (*out)[static_cast<size_t>(L.first_new_param + i)];
    for (int i = 0; i < L.num_states; ++i) state[static_cast<size_t>(i)] = (*out)[static_cast<size_t>(L.first_new_state + i)];
  }
  auto got = (*t)->named_parameters();
  for (size_t i = 0; i < got.size(); ++i) {
    const auto a = got[i].second.to_f64(), r = params[i].to_f64();
    const auto init = m->params[i].init.to_f64();
    double err = 0.0, change = 0.0;
    for (size_t j = 0; j < a.size(); ++j) {
      err += (a[j] - r[j]) * (a[j] - r[j]);
      change += (r[j] - init[j]) * (r[j] - init[j]);
    }
    err = std::sqrt(err);
    change = std::sqrt(change);
    EXPECT_GT(change, 0.0) << got[i].first;
    EXPECT_LT(err, rel_tol * change + 1e-6) << arch << " " << got[i].first << " (update norm " << change << ")";
  }
}

TEST(Trainer, MlpSgdMomentumMatchesReference) {
  compare_with_reference("mlp", {.kind = OptimizerKind::sgd, .momentum = 0.9, .weight_decay = 1e-3}, 16, 3, 1e-4);
}
TEST(Trainer, MlpAdamWMatchesReference) {
  compare_with_reference("mlp", {.kind = OptimizerKind::adamw, .weight_decay = 0.01}, 16, 3, 1e-2);
}
TEST(Trainer, TinyconvAdamMatchesReference) { compare_with_reference("tinyconv", {.kind = OptimizerKind::adam}, 4, 2, 1e-2); }

TEST(Trainer, LossFallsAndPartialBatchesWork) {
  MnistData d = synthetic_mnist(1000, 300, 2);
  auto m = mnist_model("mlp", 1);
  ASSERT_TRUE(m.has_value());
  auto t = Trainer::create(*m, {.optimizer = {.kind = OptimizerKind::sgd, .momentum = 0.9}});
  ASSERT_TRUE(t.has_value());
  Tensor test_x = *d.test.images.reshaped({300, 784});
  auto before = (*t)->evaluate(test_x, d.test.labels, 128);  // 128, 128, 44
  ASSERT_TRUE(before.has_value()) << before.status().to_string();
  EXPECT_EQ(before->count, 300);
  BatchLoader loader(d.train, 96, {784}, 1);  // 10 batches of 96 and one of 40
  double first = 0.0, last = 0.0;
  int64_t steps = 0;
  for (int epoch = 0; epoch < 3; ++epoch) {
    loader.start_epoch(epoch);
    Tensor x, y;
    double sum = 0.0;
    while (loader.next(x, y)) {
      auto l = (*t)->step(x, y, 0.05);
      ASSERT_TRUE(l.has_value()) << l.status().to_string();
      sum += *l;
      ++steps;
    }
    if (epoch == 0) first = sum;
    last = sum;
  }
  EXPECT_EQ(steps, 33);
  EXPECT_LT(last, 0.5 * first);
  auto after = (*t)->evaluate(test_x, d.test.labels, 128);
  ASSERT_TRUE(after.has_value());
  EXPECT_GT(after->accuracy(), before->accuracy() + 0.3);
  EXPECT_LT(after->loss, before->loss);
}

TEST(Trainer, BadBatchesAreRefused) {
  auto m = mnist_model("mlp", 1);
  auto t = Trainer::create(*m, {});
  ASSERT_TRUE(t.has_value());
  auto wrong_shape = (*t)->step(Tensor::zeros(DType::f32, {4, 783}), Tensor::zeros(DType::i32, {4}), 0.1);
  ASSERT_FALSE(wrong_shape.has_value());
  EXPECT_EQ(wrong_shape.status().code(), ErrorCode::invalid_argument);
  auto wrong_labels = (*t)->step(Tensor::zeros(DType::f32, {4, 784}), Tensor::zeros(DType::i64, {4}), 0.1);
  ASSERT_FALSE(wrong_labels.has_value());
  EXPECT_FALSE(mnist_model("resnet", 1).has_value());
}

// Real handwriting: 1797 8x8 digits from scikit-learn, enlarged to 28x28 by the script.
TEST(Digits, MlpReaches95PercentOnRealHandwriting) {
  const char* csv = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz";
  if (!std::filesystem::exists("/usr/bin/python3") || !std::filesystem::exists(csv))
    GTEST_SKIP() << csv << " or /usr/bin/python3 is missing: install python3-sklearn (scripts/install-deps.sh)";
  const std::string dir = std::string(RLX_BINARY_DIR) + "/train_digits_test";
  std::filesystem::remove_all(dir);
  const std::string cmd = cat("/usr/bin/python3 ", RLX_SOURCE_DIR, "/scripts/digits-to-idx.py ", dir, " --gzip > /dev/null");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto data = load_mnist(dir);
  ASSERT_TRUE(data.has_value()) << data.status().to_string();
  EXPECT_EQ(data->train.size() + data->test.size(), 1797);
  auto m = mnist_model("mlp", 1);
  ASSERT_TRUE(m.has_value());
  auto t = Trainer::create(*m, {.optimizer = {.kind = OptimizerKind::sgd, .momentum = 0.9}});
  ASSERT_TRUE(t.has_value());
  const int64_t epochs = 10, batch = 32;
  BatchLoader loader(data->train, batch, {784}, 1);
  LrSchedule sched{.kind = LrSchedule::Kind::cosine, .base = 0.05, .total_steps = epochs * loader.batches_per_epoch()};
  Tensor test_x = *data->test.images.reshaped({data->test.size(), 784});
  double acc = 0.0;
  for (int64_t e = 1; e <= epochs; ++e) {
    loader.start_epoch(e);
    Tensor x, y;
    while (loader.next(x, y)) {
      auto l = (*t)->step(x, y, sched.at((*t)->steps_done()));
      ASSERT_TRUE(l.has_value()) << l.status().to_string();
    }
    auto ev = (*t)->evaluate(test_x, data->test.labels, 1000);
    ASSERT_TRUE(ev.has_value());
    acc = ev->accuracy();
  }
  RecordProperty("test_accuracy", std::to_string(acc));
  EXPECT_GE(acc, 0.95) << "test accuracy after " << epochs << " epochs";
}

}  // namespace
}  // namespace rlx::train
