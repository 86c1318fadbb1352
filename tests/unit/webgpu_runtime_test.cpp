// The webgpu runtime (src/backends/webgpu/webgpu_runtime.h) on its own, below the program
// executor: memory and transfers (including ranges that are not whole words), a hand-written
// WGSL kernel with buffer and scalar bindings, zero fills, record and replay, and errors from
// WGSL that does not compile. Dawn and SwiftShader come from scripts/install-webgpu.sh; where
// they are missing the tests skip saying why, except in CI, which installs them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <numeric>

#include "backends/webgpu/webgpu_runtime.h"

namespace rlx::webgpu {
namespace {

std::shared_ptr<Runtime> open_or_skip() {
  auto rt = Runtime::create();
  if (!rt) {
    if (std::getenv("CI")) ADD_FAILURE() << "CI installs Dawn and SwiftShader, but: " << rt.status().message();
    return nullptr;
  }
  return *rt;
}

#define RLX_WEBGPU_OR_SKIP(rt)                                                      \
  auto rt = open_or_skip();                                                         \
  if (!rt) GTEST_SKIP() << "webgpu unavailable: " << Runtime::create().status().message()

TEST(WebGpuRuntime, TransfersWholeAndPartialWords) {
  RLX_WEBGPU_OR_SKIP(rt);
  auto b = rt->allocate(64, "test buffer");
  ASSERT_TRUE(b) << b.status().message();
  std::vector<uint8_t> bytes(64);
  std::iota(bytes.begin(), bytes.end(), 1);
  ASSERT_TRUE(rt->upload({*b, 0, 64}, bytes.data(), 64));
  // three bytes at offset 5: the words around them keep their other bytes
  const uint8_t patch[3] = {200, 201, 202};
  ASSERT_TRUE(rt->upload({*b, 5, 3}, patch, 3));
  std::vector<uint8_t> back(64);
  ASSERT_TRUE(rt->download({*b, 0, 64}, back.data(), 64));
  std::memcpy(bytes.data() + 5, patch, 3);
  EXPECT_EQ(back, bytes);
  uint8_t odd[5];
  ASSERT_TRUE(rt->download({*b, 3, 5}, odd, 5));
  EXPECT_EQ(0, std::memcmp(odd, bytes.data() + 3, 5));
  rt->release(*b);
}

TEST(WebGpuRuntime, RunsAKernelWithScalarsAndZeroFills) {
  RLX_WEBGPU_OR_SKIP(rt);
  const int n = 1000;
  hal::KernelModule m;
  m.source = R"(
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<storage, read_write> z: array<f32>;
@group(0) @binding(3) var<uniform> s: array<vec4<i32>, 1>;
@compute @workgroup_size(64)
fn scale(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = i32(id.x + id.y * groups.x * 64u);
  if (i >= s[0][0]) { return; }
  y[i] = x[i] * f32(s[0][1]) + z[i];
}
)";
  m.entries.push_back({"scale", 3, {"n", "factor"}});
  auto k = rt->build(m);
  ASSERT_TRUE(k) << k.status().message();
  auto x = rt->allocate(n * 4, "x"), y = rt->allocate(n * 4, "y"), z = rt->allocate(n * 4, "z");
  ASSERT_TRUE(x && y && z);
  std::vector<float> xs(n), zs(n, 7.0f);
  for (int i = 0; i < n; ++i) xs[i] = 0.5f * i;
  ASSERT_TRUE(rt->upload({*z, 0, n * 4}, zs.data(), n * 4));
  hal::CommandList list;
  list.inputs.push_back({{*x, 0, n * 4}, n * 4});
  hal::Command zero;
  zero.kind = hal::Command::Kind::zero;
  zero.range = {*z, 0, n * 4};
  list.commands.push_back(zero);
  hal::Command c;
  c.dispatch.kernel = (*k)[0];
  c.dispatch.name = "scale";
  c.dispatch.buffers = {{*x, 0, n * 4}, {*y, 0, n * 4}, {*z, 0, n * 4}};
  c.dispatch.scalars = {n, 3};
  c.dispatch.items = n;
  ASSERT_TRUE(rt->check_dispatch(c.dispatch));
  list.commands.push_back(c);
  list.outputs.push_back({{*y, 0, n * 4}, n * 4});
  auto rec = rt->record(list);
  ASSERT_TRUE(rec) << rec.status().message();
  std::vector<float> ys(n);
  for (int run = 0; run < 2; ++run) {  // a recording replays more than once
    for (float& v : xs) v += 1.0f;
    const void* in[] = {xs.data()};
    void* out[] = {ys.data()};
    ASSERT_TRUE(rt->replay(**rec, in, out));
    for (int i = 0; i < n; ++i) ASSERT_EQ(ys[i], xs[i] * 3.0f) << i;  // z was zeroed first
  }
  // a scalar past 32 bits is refused before anything runs
  c.dispatch.scalars = {int64_t{1} << 33, 3};
  Status s = rt->check_dispatch(c.dispatch);
  EXPECT_FALSE(s);
  EXPECT_NE(s.message().find("32-bit"), std::string::npos) << s.message();
  for (auto b : {*x, *y, *z}) rt->release(b);
}

TEST(WebGpuRuntime, WgslThatDoesNotCompileNamesTheKernel) {
  RLX_WEBGPU_OR_SKIP(rt);
  hal::KernelModule m;
  m.source = "@compute @workgroup_size(64) fn broken() { let x: f32 = 1u; }\n";
  m.entries.push_back({"broken", 0, {}});
  auto k = rt->build(m);
  ASSERT_FALSE(k);
  EXPECT_NE(k.status().message().find("broken"), std::string::npos) << k.status().message();
  EXPECT_NE(k.status().message().find("does not compile"), std::string::npos) << k.status().message();
}

}  // namespace
}  // namespace rlx::webgpu
