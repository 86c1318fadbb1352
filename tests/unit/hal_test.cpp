// The device runtime layer without a GPU: the one program executor (hal/program_executable.h)
// on the null device's skeleton runtime, and on a recording runtime that checks the command
// list it is given (bindings within the runtime's limits, arena ranges, skipped copies).
#include <gtest/gtest.h>

#include <cstring>
#include <algorithm>
#include <map>
#include <set>

#include "backends/null/null_runtime.h"
#include "hal/program_executable.h"
#include "rlx/compile.h"
#include "rlx/ir_text.h"

namespace rlx {
namespace {

// Host memory like the null runtime, but it builds every module (keeping its text and
// entries) and keeps every command it is asked to run instead of running it.
class RecordingRuntime final : public hal::StreamRuntime {
 public:
  explicit RecordingRuntime(hal::Limits limits) : limits_(limits) {}
  std::string_view name() const override { return "recording"; }
  const hal::Limits& limits() const override { return limits_; }
  Expected<hal::Buffer> allocate(uint64_t bytes, const std::string& what) override { return null_.allocate(bytes, what); }
  void release(hal::Buffer b) override { null_.release(b); }
  Status upload(const hal::BufferRange& r, const void* d, uint64_t n) override { return null_.upload(r, d, n); }
  Status download(const hal::BufferRange& r, void* d, uint64_t n) override { return null_.download(r, d, n); }
  Expected<std::vector<hal::Kernel>> build(const hal::KernelModule& m) override {
    modules.push_back(m);
    std::vector<hal::Kernel> k;
    for (size_t i = 0; i < m.entries.size(); ++i) k.push_back({++next_kernel_});
    return k;
  }
  std::vector<hal::KernelModule> modules;
  std::vector<hal::Command> ran;

 protected:
  Status write(const hal::BufferRange& r, const void* d, uint64_t n) override { return null_.upload(r, d, n); }
  Status read(const hal::BufferRange& r, void* d, uint64_t n) override { return null_.download(r, d, n); }
  Status enqueue(const hal::Command& c) override {
    ran.push_back(c);
    return Status::ok();
  }
  Status finish() override { return Status::ok(); }

 private:
  null_device::NullRuntime null_;
  hal::Limits limits_;
  uint64_t next_kernel_ = 0;
};

Graph parse(const char* text) {
  auto g = parse_graph(text);
  EXPECT_TRUE(g.has_value()) << g.status().to_string();
  return g ? *g : Graph{};
}

TEST(NullDevice, RunsAProgramWithoutKernelsThroughTheExecutor) {
  Graph g = parse(R"(graph @id(%x: f32[3], %y: i32[2]) -> (i32[2], f32[3]) {
  return %y, %x
})");
  auto model = Model::compile(g, {.device = "null"});
  ASSERT_TRUE(model.has_value()) << model.status().to_string();
  Tensor x = Tensor::zeros(DType::f32, {3}), y = Tensor::zeros(DType::i32, {2});
  for (int i = 0; i < 3; ++i) x.data<float>()[i] = 0.5f * static_cast<float>(i) - 1.f;
  y.data<int32_t>()[0] = -7;
  y.data<int32_t>()[1] = 1 << 30;
  std::vector<Tensor> in{x, y};
  auto out = (*model)->run(in);
  ASSERT_TRUE(out.has_value()) << out.status().to_string();
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ(std::memcmp((*out)[0].bytes(), y.bytes(), 8), 0);
  EXPECT_EQ(std::memcmp((*out)[1].bytes(), x.bytes(), 12), 0);
}

TEST(NullDevice, RefusesANodeWithTheReason) {
  Graph g = parse(R"(graph @n(%x: f32[3]) -> (f32[3]) {
  %y = neg(%x)
  return %y
})");
  auto model = Model::compile(g, {.device = "null"});
  Status s = model.status();
  if (model) s = (*model)->prepare({}).status();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("null has no code renderer"), std::string::npos) << s.message();
}

// Five constants and an input fused into one kernel: six buffers where the runtime binds three.
constexpr const char* kManyConstants = R"(graph @c(%x: f32[4]) -> (f32[4]) {
  %c1 = constant dense<[1.0, 2.0, 3.0, 4.0]> : f32[4]
  %c2 = constant dense<[5.0, 6.0, 7.0, 8.0]> : f32[4]
  %c3 = constant dense<[9.0, 10.0, 11.0, 12.0]> : f32[4]
  %c4 = constant dense<[13.0, 14.0, 15.0, 16.0]> : f32[4]
  %a = add(%x, %c1)
  %b = mul(%a, %c2)
  %c = sub(%b, %c3)
  %d = add(%c, %c4)
  return %d
})";

TEST(ProgramExecutable, PacksConstantsWhereAKernelHasTooManyBuffers) {
  Graph g = parse(kManyConstants);
  hal::Limits lim;
  lim.max_bindings = 3;
  auto rt = std::make_shared<RecordingRuntime>(lim);
  auto exe = hal::compile_program(rt, {codegen::CTarget::glsl_vulkan, {}}, g, {});
  ASSERT_TRUE(exe.has_value()) << exe.status().to_string();
  ASSERT_EQ(rt->modules.size(), 1u);
  ASSERT_EQ(rt->modules[0].entries.size(), 1u);
  EXPECT_LE(rt->modules[0].entries[0].buffers, 3);
  Tensor x = Tensor::zeros(DType::f32, {4});
  std::vector<Tensor> in{x};
  ASSERT_TRUE((*exe)->run(in).has_value());
  ASSERT_EQ(rt->ran.size(), 1u);
  const hal::Dispatch& d = rt->ran[0].dispatch;
  EXPECT_LE(d.buffers.size(), 3u);
  EXPECT_EQ(d.items, 4);
  ASSERT_EQ(d.scalars.size(), 2u);
  // the packed constants hold the four tensors, one after another
  bool found = false;
  for (const hal::BufferRange& r : d.buffers) {
    if (r.bytes != 64) continue;
    float v[16];
    ASSERT_TRUE(rt->download(r, v, sizeof v).is_ok());
    for (int i = 0; i < 16; ++i) EXPECT_EQ(v[i], static_cast<float>(i + 1)) << i;
    found = true;
  }
  EXPECT_TRUE(found) << "no binding of the four constants packed together";
}

TEST(ProgramExecutable, RefusesTooManyBuffersWhereTheDialectCannotPack) {
  Graph g = parse(kManyConstants);
  hal::Limits lim;
  lim.max_bindings = 3;
  auto exe = hal::compile_program(std::make_shared<RecordingRuntime>(lim), {codegen::CTarget::opencl, {}}, g, {});
  ASSERT_FALSE(exe.has_value());
  EXPECT_NE(exe.status().message().find("more than the 3"), std::string::npos) << exe.status().message();
}

TEST(ProgramExecutable, IntermediatesShareTheArenaAtAlignedOffsets) {
  // a reduction between two elementwise kernels keeps intermediates alive across kernels
  Graph g = parse(R"(graph @r(%x: f32[8, 16]) -> (f32[8, 16]) {
  %e = exp(%x)
  %s = reduce_sum(%e) {axes = [1], keepdims = 1}
  %y = div(%e, %s)
  return %y
})");
  hal::Limits lim;
  lim.arena_align = 64;
  auto rt = std::make_shared<RecordingRuntime>(lim);
  auto exe = hal::compile_program(rt, {codegen::CTarget::glsl_vulkan, {}}, g, {});
  ASSERT_TRUE(exe.has_value()) << exe.status().to_string();
  Tensor x = Tensor::zeros(DType::f32, {8, 16});
  std::vector<Tensor> in{x};
  ASSERT_TRUE((*exe)->run(in).has_value());
  EXPECT_GE(rt->ran.size(), 2u);
  // the intermediates live in one allocation that kernels bind at aligned offsets
  std::map<uint64_t, std::set<uint64_t>> offsets;
  for (const hal::Command& c : rt->ran)
    for (const hal::BufferRange& r : c.dispatch.buffers) {
      EXPECT_EQ(r.offset % 64, 0u);
      offsets[r.buffer.id].insert(r.offset);
    }
  size_t most = 0;
  for (auto& [id, o] : offsets) most = std::max(most, o.size());
  EXPECT_GE(most, 2u) << "no allocation is bound at two offsets";
  EXPECT_GT((*exe)->stats().arena_bytes, 0u);
}

}  // namespace
}  // namespace rlx
