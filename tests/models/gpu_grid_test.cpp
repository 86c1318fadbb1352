// Kernels of more work items than one row of work groups holds: GPU-class runtimes lay such
// grids out in two dimensions (hal::grid_2d), and each dialect's kernel finds its element from
// both (GLSL and WGSL from the dispatch's group count, HLSL from D3D12's fixed 65535 groups a
// row, which the runtime running it must lay out exactly). 4.5 million elements pass the
// 65535 x 64 of one row on every such device; the values are checked against the same formula
// computed here, element by element, so a misplaced row shows. (In the models label, beside
// the other tests that run every GPU-class device.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "device_fixture.h"
#include "rlx/compile.h"
#include "rlx/ir_text.h"

namespace rlx {
namespace {

class GpuGrid : public device_tests::DeviceTest {};

TEST_P(GpuGrid, MoreItemsThanOneRowOfGroups) {
  RLX_REQUIRE_DEVICE_KIND(DeviceKind::gpu);
  constexpr int64_t n = 4500007;  // > 65535 * 64 = 4194240, and no multiple of the group size
  auto g = parse_graph(R"(graph @g(%x: f32[4500007], %y: f32[4500007]) -> (f32[4500007]) {
  %c = constant dense<3.0> : f32[]
  %m = mul(%x, %c) : f32[4500007]
  %z = add(%m, %y) : f32[4500007]
  return %z
})");
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  auto model = Model::compile(*g, {.device = GetParam()});
  ASSERT_TRUE(model.has_value()) << model.status().to_string();
  const uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  std::vector<float> x(n), y(n);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = u(rng);
    y[i] = u(rng);
  }
  std::vector<Tensor> in = {Tensor::zeros(DType::f32, {n}), Tensor::zeros(DType::f32, {n})};
  std::copy(x.begin(), x.end(), in[0].data<float>());
  std::copy(y.begin(), y.end(), in[1].data<float>());
  auto out = (*model)->run(in);
  ASSERT_TRUE(out.has_value()) << out.status().to_string();
  const float* z = (*out)[0].data<float>();
  int64_t wrong = 0, first = -1;
  for (int64_t i = 0; i < n; ++i)
    if (std::fabs(z[i] - (x[i] * 3.0f + y[i])) > 1e-5f * (1.0f + std::fabs(x[i] * 3.0f + y[i]))) {
      if (first < 0) first = i;
      ++wrong;
    }
  EXPECT_EQ(wrong, 0) << GetParam() << ": " << wrong << " of " << n << " elements wrong, the first at " << first
                      << " (seed " << seed << ")";
}

RLX_INSTANTIATE_FOR_DEVICES(GpuGrid);

}  // namespace
}  // namespace rlx
