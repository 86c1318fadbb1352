// Qwen3 (random weights, a small config) under --precision's autocast policy: the prefill's top-1
// token at every position agrees with f32 for most positions (random weights give nearly flat
// logits, so narrow rounding flips some near-ties; int8 PTQ gets 90-96 % on the same kind of model).
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <random>

#include "models/decoder.h"

namespace rlx {
namespace {

TEST(Qwen3Amp, PrefillTop1AgreesWithF32) {
  const std::string base = std::string(RLX_BINARY_DIR) + "/test-models";
  mkdir(base.c_str(), 0755);
  models::DecoderConfig c;
  c.vocab_size = 4096;
  c.hidden = 256;
  c.layers = 4;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 64;
  c.intermediate = 768;
  const std::string dir = base + "/amp-qwen3";
  ASSERT_TRUE(models::write_random_decoder(dir, c, 11).is_ok());
  auto w = models::load_decoder(dir);
  ASSERT_TRUE(w.has_value()) << w.status().to_string();
  std::mt19937 rng(5);
  std::vector<int64_t> prompt(48);
  for (auto& t : prompt) t = std::uniform_int_distribution<int64_t>(0, c.vocab_size - 1)(rng);
  auto top1 = [&](passes::Precision p) -> std::vector<int64_t> {
    auto s = models::DecoderSession::create(*w, 1, 64, "cpu", true, {}, p);
    EXPECT_TRUE(s.has_value()) << s.status().to_string();
    if (!s) return {};
    auto l = (*s)->prefill({prompt});
    EXPECT_TRUE(l.has_value()) << l.status().to_string();
    if (!l) return {};
    std::vector<int64_t> top;
    const int64_t v = l->sizes()[2];
    for (size_t i = 0; i < prompt.size(); ++i) {
      const float* r = l->data<float>() + i * v;
      top.push_back(std::max_element(r, r + v) - r);
    }
    return top;
  };
  const std::vector<int64_t> ref = top1(passes::Precision::f32);
  ASSERT_EQ(ref.size(), prompt.size());
  for (passes::Precision p : {passes::Precision::bf16, passes::Precision::f16}) {
    const std::vector<int64_t> top = top1(p);
    ASSERT_EQ(top.size(), ref.size());
    int agree = 0;
    for (size_t i = 0; i < ref.size(); ++i) agree += top[i] == ref[i];
    const double frac = static_cast<double>(agree) / static_cast<double>(ref.size());
    std::printf("Qwen3 (random weights, %zu positions) %s: top-1 agreement with f32 %.1f%%\n", ref.size(),
                std::string(passes::precision_name(p)).c_str(), 100 * frac);
    EXPECT_GE(frac, p == passes::Precision::f16 ? 0.9 : 0.75) << passes::precision_name(p);
  }
}

}  // namespace
}  // namespace rlx
