// The tiled GEMM every GPU-class device runs natively (kernels/gpu_natives.h), one text for
// OpenCL C, GLSL and WGSL: products on each such device equal the reference interpreter's on
// fresh random inputs, including a matrix times itself (A and B one buffer, which WebGPU must
// bind once) and shapes that are no multiple of the 16x16 tile. The conformance suite covers
// the dot attributes; this covers the operand sharing it cannot express. (In the models label,
// beside the other tests that run every GPU-class device.)
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "device_fixture.h"
#include "rlx/compile.h"
#include "rlx/ir_text.h"

namespace rlx {
namespace {

class GpuNativeGemm : public device_tests::DeviceTest {};

Tensor random_tensor(Sizes sizes, std::mt19937_64& rng) {
  std::normal_distribution<double> nd;
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = nd(rng);
  return Tensor::from_f64(DType::f32, sizes, v);
}

// Runs `text` on `device` and on ref with the same random inputs; every output within 1e-4
// relative to its largest magnitude, and every dot node native on `device`.
void expect_matches_ref(const std::string& device, const char* text, const std::vector<Sizes>& inputs) {
  // the metal device's MSL is checked through a shim that runs one thread at a time, so it has
  // no kernels with barriers, the tiled GEMM's included (docs/metal.md)
  if (device == "metal") GTEST_SKIP() << "metal has no native tiled GEMM: its dot is generated MSL";
  auto g = parse_graph(text);
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  auto report = explain(*g, device, DispatchPolicy{});
  ASSERT_TRUE(report.has_value()) << report.status().to_string();
  const std::string table = report->to_text();
  // a dot node is native itself ("tiled gemm ..."), a matmul through its primitive dot
  EXPECT_TRUE(table.find("dot (native)") != std::string::npos || table.find("tiled gemm") != std::string::npos)
      << "the product is not native on " << device << ":\n" << table;
  const uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  std::vector<Tensor> in;
  for (const Sizes& s : inputs) in.push_back(random_tensor(s, rng));
  auto on_dev = Model::compile(*g, {.device = device});
  auto on_ref = Model::compile(*g, {.device = "ref"});
  ASSERT_TRUE(on_dev.has_value()) << on_dev.status().to_string();
  ASSERT_TRUE(on_ref.has_value()) << on_ref.status().to_string();
  auto a = (*on_dev)->run(in);
  auto b = (*on_ref)->run(in);
  ASSERT_TRUE(a.has_value()) << a.status().to_string();
  ASSERT_TRUE(b.has_value()) << b.status().to_string();
  ASSERT_EQ(a->size(), b->size());
  for (size_t o = 0; o < a->size(); ++o) {
    const Tensor &x = (*a)[o], &y = (*b)[o];
    ASSERT_EQ(x.sizes(), y.sizes());
    double scale = 1e-30, worst = 0;
    for (int64_t i = 0; i < y.numel(); ++i) scale = std::max(scale, std::fabs(y.get_f64(i)));
    for (int64_t i = 0; i < y.numel(); ++i) worst = std::max(worst, std::fabs(x.get_f64(i) - y.get_f64(i)));
    EXPECT_LT(worst / scale, 1e-4) << "output " << o << " on " << device << ", seed " << seed;
  }
}

TEST_P(GpuNativeGemm, MatrixTimesItself) {
  RLX_REQUIRE_DEVICE_KIND(DeviceKind::gpu);
  expect_matches_ref(GetParam(), R"(graph @g(%x: f32[37, 37]) -> (f32[37, 37]) {
  %z = matmul(%x, %x) : f32[37, 37]
  return %z
})", {{37, 37}});
}

TEST_P(GpuNativeGemm, GramMatrixReadsOneOperandTwice) {
  RLX_REQUIRE_DEVICE_KIND(DeviceKind::gpu);
  expect_matches_ref(GetParam(), R"(graph @g(%x: f32[21, 45]) -> (f32[21, 21]) {
  %z = dot(%x, %x) {lhs_contract = [1], rhs_contract = [1]} : f32[21, 21]
  return %z
})", {{21, 45}});
}

TEST_P(GpuNativeGemm, BatchedAwkwardSizes) {
  RLX_REQUIRE_DEVICE_KIND(DeviceKind::gpu);
  expect_matches_ref(GetParam(), R"(graph @g(%a: f32[3, 33, 17], %b: f32[3, 17, 49]) -> (f32[3, 33, 49]) {
  %z = matmul(%a, %b) : f32[3, 33, 49]
  return %z
})", {{3, 33, 17}, {3, 17, 49}});
}

RLX_INSTANTIATE_FOR_DEVICES(GpuNativeGemm);

}  // namespace
}  // namespace rlx
