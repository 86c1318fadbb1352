// Models on the other devices give the CPU's results: a small BERT (the MiniLM builder with a
// reduced configuration, random weights), a small Qwen3 decoding greedily and a few Adam
// steps of the MNIST MLP, one test body instantiated for every registered device
// (tests/device_fixture.h): the GPU-class ones run it, the others and any device not available
// here skip with the reason. The op-by-op
// check against the reference interpreter is the conformance suite; this one checks whole
// graphs end to end.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>

#include "device_fixture.h"
#include "models/bert.h"
#include "models/decoder.h"
#include "train/models.h"
#include "train/trainer.h"
#include "rlx/compile.h"
#include "rlx/device.h"

namespace rlx {
namespace {

double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  double worst = 0;
  for (int64_t i = 0; i < std::min(a.numel(), b.numel()); ++i)
    worst = std::max(worst, std::fabs(a.get_f64(i) - b.get_f64(i)));
  return worst;
}

class DeviceModels : public device_tests::DeviceTest {};

TEST_P(DeviceModels, SmallBertMatchesCpu) {
  const std::string device = GetParam();
  RLX_REQUIRE_DEVICE_KIND(DeviceKind::gpu);
  const std::string dir = std::string(RLX_BINARY_DIR) + "/test-models/bert-small-" + device;
  models::BertConfig c;
  c.vocab_size = 1000;
  c.hidden = 64;
  c.layers = 2;
  c.heads = 4;
  c.intermediate = 128;
  c.max_positions = 64;
  ASSERT_TRUE(models::write_random_bert(dir, c, 5).is_ok());
  auto m = models::load_bert_folder(dir);
  ASSERT_TRUE(m.has_value()) << m.status().to_string();
  auto on_cpu = Model::compile(m->graph, {.device = "cpu"});
  auto on_cl = Model::compile(m->graph, {.device = device});
  ASSERT_TRUE(on_cpu.has_value()) << on_cpu.status().to_string();
  ASSERT_TRUE(on_cl.has_value()) << on_cl.status().to_string();
  text::Encoding e = m->tokenizer.encode_batch({"a short one", "and a somewhat longer sentence to pad the first"}, 32);
  std::vector<Tensor> in{e.ids_tensor(), e.mask_tensor(), e.type_tensor()};
  auto a = (*on_cpu)->run(in);
  auto b = (*on_cl)->run(in);
  ASSERT_TRUE(a.has_value()) << a.status().to_string();
  ASSERT_TRUE(b.has_value()) << b.status().to_string();
  const double d = max_abs_diff((*a)[0], (*b)[0]);
  std::printf("small BERT, %s vs cpu: max abs difference %.3g\n", device.c_str(), d);
  EXPECT_LT(d, 1e-5);
  EXPECT_GT((*b)[0].get_f64(0) * (*b)[0].get_f64(0), 0.0);  // not all zeros
}

// A small Qwen3 (random weights) prefills a random prompt and decodes greedily through the KV
// cache on the device: logits within tolerance of the cpu's at every step, same tokens.
TEST_P(DeviceModels, SmallQwen3GreedyMatchesCpu) {
  const std::string device = GetParam();
  RLX_REQUIRE_DEVICE_KIND(DeviceKind::gpu);
  const std::string dir = std::string(RLX_BINARY_DIR) + "/test-models/qwen3-small-" + device;
  models::DecoderConfig c;
  c.vocab_size = 512;
  c.hidden = 64;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 16;
  c.intermediate = 128;
  c.max_positions = 64;
  ASSERT_TRUE(models::write_random_decoder(dir, c, 7).is_ok());
  auto w = models::load_decoder(dir);
  ASSERT_TRUE(w.has_value()) << w.status().to_string();
  auto on_cpu = models::DecoderSession::create(*w, 1, 32, "cpu");
  auto on_dev = models::DecoderSession::create(*w, 1, 32, device);
  ASSERT_TRUE(on_cpu.has_value()) << on_cpu.status().to_string();
  ASSERT_TRUE(on_dev.has_value()) << on_dev.status().to_string();
  std::mt19937 rng(std::random_device{}());
  std::vector<int64_t> prompt(6);
  for (auto& t : prompt) t = std::uniform_int_distribution<int64_t>(0, c.vocab_size - 1)(rng);
  auto a = (*on_cpu)->prefill({prompt});
  auto b = (*on_dev)->prefill({prompt});
  for (int step = 0; step < 4; ++step) {
    ASSERT_TRUE(a.has_value()) << a.status().to_string();
    ASSERT_TRUE(b.has_value()) << b.status().to_string();
    const double d = max_abs_diff(*a, *b);
    EXPECT_LT(d, 1e-4) << "step " << step;
    const float* ra = a->data<float>();
    const float* rb = b->data<float>();
    const int64_t ta = std::max_element(ra, ra + c.vocab_size) - ra, tb = std::max_element(rb, rb + c.vocab_size) - rb;
    std::printf("small Qwen3, %s vs cpu, step %d: max abs logit difference %.3g, tokens %lld / %lld\n", device.c_str(), step,
                d, static_cast<long long>(ta), static_cast<long long>(tb));
    ASSERT_EQ(ta, tb) << "step " << step;
    a = (*on_cpu)->decode({ta});
    b = (*on_dev)->decode({tb});
  }
}

// Whether some hidden unit of the MNIST MLP has its pre-activation within `margin` of zero, on
// `params` (fc1.weight [784, H], fc1.bias [H]) and some image of `px` ([B, 784]); computed in
// double on the host.
bool near_relu_kink(const std::vector<std::pair<std::string, Tensor>>& params, const std::vector<float>& px,
                    int64_t B, double margin) {
  const Tensor *w = nullptr, *b = nullptr;
  for (const auto& [name, t] : params) {
    if (name == "fc1.weight") w = &t;
    if (name == "fc1.bias") b = &t;
  }
  if (!w || !b || w->sizes().size() != 2 || w->sizes()[0] != 784) {
    ADD_FAILURE() << "the MNIST MLP has no fc1.weight [784, H] and fc1.bias";
    return false;
  }
  const int64_t H = w->sizes()[1];
  for (int64_t s = 0; s < B; ++s)
    for (int64_t j = 0; j < H; ++j) {
      double z = b->get_f64(j);
      for (int64_t i = 0; i < 784; ++i) z += static_cast<double>(px[s * 784 + i]) * w->get_f64(i * H + j);
      if (std::fabs(z) < margin) return true;
    }
  return false;
}

// The MNIST MLP trains with Adam on the device (forward, backward and update in one compiled
// step, parameters updated in place there) as on the cpu: the same losses step by step and the
// same parameters after the last step, within tolerance. A batch that brings some hidden unit's
// pre-activation within 1e-4 of zero is drawn again: such a ReLU may be on for one device and
// off for the other from rounding noise alone (about 1e-6 after a few steps), and Adam's first
// steps move every weight with a nonzero gradient by about lr whatever its size, so the whole
// unit's weights would part by lr per step and the losses after it by about 1e-3. That is the
// function's kink, not a device's error: before the redraw it happened for about 1 seed in 20 on
// webgpu, whose rounding (SwiftShader's) differs most from the cpu's, and the unit that parted
// was always one within 1e-5 of zero.
TEST_P(DeviceModels, MnistMlpTrainingMatchesCpu) {
  const std::string device = GetParam();
  RLX_REQUIRE_DEVICE_KIND(DeviceKind::gpu);
  train::TrainConfig cfg;
  cfg.optimizer.kind = train::OptimizerKind::adam;
  // Adam's step is lr g / (|g| + eps) on the first step (and close to it while the moments are
  // young): its slope at g = 0 is lr / eps. With the default eps of 1e-8 a weight whose gradient
  // cancels to ~1e-7 over the batch (about one of the 100k fc1 weights in 150 runs) moves by a
  // different ~lr on each device from rounding noise alone. An eps of 1e-4 bounds that slope to
  // 10, so noise of 1e-7 stays 1e-6 in the parameters, and still leaves every gradient larger
  // than ~1e-3 in Adam's sign-like regime.
  cfg.optimizer.eps = 1e-4;
  auto m_cpu = train::mnist_model("mlp", 3);
  auto m_dev = train::mnist_model("mlp", 3);
  ASSERT_TRUE(m_cpu.has_value() && m_dev.has_value());
  auto on_cpu = train::Trainer::create(*m_cpu, cfg);
  cfg.device = device;
  auto on_dev = train::Trainer::create(*m_dev, cfg);
  ASSERT_TRUE(on_cpu.has_value()) << on_cpu.status().to_string();
  ASSERT_TRUE(on_dev.has_value()) << on_dev.status().to_string();
  // fresh inputs each run; RLX_TEST_SEED=<seed> replays the run that printed it
  const char* replay = std::getenv("RLX_TEST_SEED");
  const unsigned seed = replay ? static_cast<unsigned>(std::strtoul(replay, nullptr, 10)) : std::random_device{}();
  std::printf("MNIST MLP, %s: seed %u\n", device.c_str(), seed);
  std::mt19937 rng(seed);
  const int64_t B = 32;
  int redrawn = 0;
  for (int step = 0; step < 4; ++step) {
    std::vector<float> px(B * 784);
    std::vector<int32_t> py(B);
    for (int draw = 0;; ++draw) {
      ASSERT_LT(draw, 50) << "every batch drawn puts some unit near the ReLU kink";
      for (float& v : px) v = std::uniform_real_distribution<float>(0.f, 1.f)(rng);
      for (int32_t& v : py) v = std::uniform_int_distribution<int32_t>(0, 9)(rng);
      if (!near_relu_kink((*on_cpu)->named_parameters(), px, B, 1e-4)) break;
      ++redrawn;
    }
    Tensor x = Tensor::from_vector(DType::f32, {B, 784}, px), y = Tensor::from_vector(DType::i32, {B}, py);
    auto la = (*on_cpu)->step(x, y, 1e-3);
    auto lb = (*on_dev)->step(x, y, 1e-3);
    ASSERT_TRUE(la.has_value()) << la.status().to_string();
    ASSERT_TRUE(lb.has_value()) << lb.status().to_string();
    std::printf("MNIST MLP, %s vs cpu, step %d: loss %.6f / %.6f\n", device.c_str(), step, *la, *lb);
    EXPECT_NEAR(*la, *lb, 1e-4 * std::max(1.f, std::fabs(*la))) << "step " << step << ", seed " << seed;
  }
  std::printf("MNIST MLP, %s: %d batch(es) drawn again for a unit near the ReLU kink\n", device.c_str(), redrawn);
  auto pa = (*on_cpu)->named_parameters(), pb = (*on_dev)->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_LT(max_abs_diff(pa[i].second, pb[i].second), 1e-4) << pa[i].first << ", seed " << seed;
}

RLX_INSTANTIATE_FOR_DEVICES(DeviceModels);

}  // namespace
}  // namespace rlx
