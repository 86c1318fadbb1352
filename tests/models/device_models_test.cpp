// Models on the other devices give the CPU's results: a small BERT (the MiniLM builder with a
// reduced configuration, random weights), one test body instantiated per device (opencl,
// vulkan, opengl); a device that is not available here skips with its reason. The op-by-op
// check against the reference interpreter is the conformance suite; this one checks whole
// graphs end to end.
#include <gtest/gtest.h>

#include <cmath>

#include "models/bert.h"
#include "rlx/compile.h"
#include "rlx/device.h"

namespace rlx {
namespace {

std::string unavailable(const std::string& device) {
  for (const DeviceInfo& d : list_devices())
    if (d.name == device) return d.available ? "" : d.reason;
  return "rlx was built without the " + device + " device";
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  double worst = 0;
  for (int64_t i = 0; i < std::min(a.numel(), b.numel()); ++i)
    worst = std::max(worst, std::fabs(a.get_f64(i) - b.get_f64(i)));
  return worst;
}

class DeviceModels : public ::testing::TestWithParam<std::string> {};

TEST_P(DeviceModels, SmallBertMatchesCpu) {
  const std::string device = GetParam();
  if (auto why = unavailable(device); !why.empty()) GTEST_SKIP() << device << " is not available: " << why;
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

INSTANTIATE_TEST_SUITE_P(Devices, DeviceModels, ::testing::Values("opencl", "vulkan", "opengl"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace rlx
