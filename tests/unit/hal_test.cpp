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
#include "rlx/dispatch.h"
#include "rlx/ir_text.h"

namespace rlx {
namespace {

// Host memory like the null runtime, but it builds every module (keeping its text and
// entries) and keeps every command it is asked to run instead of running it.
class RecordingRuntime final : public hal::StreamRuntime {
 public:
  explicit RecordingRuntime(hal::Limits limits) : hal::StreamRuntime("recording") { limits_ = limits; }
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
  uint64_t next_kernel_ = 0;
};

Graph parse(const char* text) {
  auto g = parse_graph(text);
  EXPECT_TRUE(g.has_value()) << g.status().to_string();
  return g ? *g : Graph{};
}

// The legalized primitive graph of `text`, as the ref device (primitives only) legalizes it.
Graph primitive(const char* text) {
  Graph g = parse(text);
  auto ref = get_device("ref");
  EXPECT_TRUE(ref.has_value());
  auto lr = legalize(g, **ref, DispatchPolicy{});
  EXPECT_TRUE(lr.has_value()) << lr.status().to_string();
  return lr ? lr->graph : Graph{};
}

TEST(ProgramExecutable, UploadsWeightsAndMovesInputsAndOutputs) {
  Graph g = primitive(R"(graph @w(%x: f32[4]) -> (f32[4]) {
  %w = param "w" : f32[4]
  %y = add(%x, %w)
  return %y
})");
  Tensor w = Tensor::zeros(DType::f32, {4});
  for (int i = 0; i < 4; ++i) w.data<float>()[i] = 10.f + static_cast<float>(i);
  g.weights["w"] = w;
  auto rt = std::make_shared<RecordingRuntime>(hal::Limits{});
  auto exe = hal::compile_program(rt, {codegen::CTarget::opencl, {}}, g, {});
  ASSERT_TRUE(exe.has_value()) << exe.status().to_string();
  EXPECT_EQ((*exe)->stats().weight_bytes, 16u);
  Tensor x = Tensor::zeros(DType::f32, {4});
  for (int i = 0; i < 4; ++i) x.data<float>()[i] = -static_cast<float>(i);
  std::vector<Tensor> in{x};
  ASSERT_TRUE((*exe)->run(in).has_value());
  ASSERT_EQ(rt->ran.size(), 1u);
  const hal::Dispatch& d = rt->ran[0].dispatch;
  ASSERT_EQ(d.buffers.size(), 3u);
  EXPECT_EQ(d.scalars, (std::vector<int64_t>{1, 4}));
  // the kernel's bindings hold the input (written by the run) and the weight (uploaded once)
  int seen = 0;
  for (const hal::BufferRange& r : d.buffers) {
    float v[4];
    ASSERT_TRUE(rt->download(r, v, sizeof v).is_ok());
    if (std::memcmp(v, x.bytes(), 16) == 0) seen |= 1;
    if (std::memcmp(v, w.bytes(), 16) == 0) seen |= 2;
  }
  EXPECT_EQ(seen, 3);
  // a weight of another type is refused, naming it
  g.weights["w"] = Tensor::zeros(DType::f32, {5});
  auto bad = hal::compile_program(rt, {codegen::CTarget::opencl, {}}, g, {});
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.status().message().find("weight 'w' is f32[5]"), std::string::npos) << bad.status().message();
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
  // three kernels (a softmax's two reductions, then a column reduction of its transpose), the
  // first two kernels' results alive together in the third
  constexpr const char* kThreeKernels = R"(graph @r(%x: f32[8, 16]) -> (f32[8, 16]) {
  %m = reduce_max(%x) {axes = [1], keepdims = 1}
  %t = sub(%x, %m)
  %e = exp(%t)
  %s = reduce_sum(%e) {axes = [1], keepdims = 1}
  %y = div(%e, %s)
  %z = transpose(%y) {perm = [1, 0]}
  %q = reduce_sum(%z) {axes = [1], keepdims = 1}
  %w = mul(%z, %q)
  %v = transpose(%w) {perm = [1, 0]}
  return %v
})";
  for (int64_t align : {0, 4}) {
    SCOPED_TRACE(align);
    hal::Limits lim;
    lim.arena_align = align;
    auto rt = std::make_shared<RecordingRuntime>(lim);
    auto exe = hal::compile_program(rt, {codegen::CTarget::glsl_vulkan, {}}, primitive(kThreeKernels), {});
    ASSERT_TRUE(exe.has_value()) << exe.status().to_string();
    Tensor x = Tensor::zeros(DType::f32, {8, 16});
    std::vector<Tensor> in{x};
    ASSERT_TRUE((*exe)->run(in).has_value());
    EXPECT_GE(rt->ran.size(), 3u);
    std::map<uint64_t, std::set<uint64_t>> offsets;
    for (const hal::Command& c : rt->ran)
      for (const hal::BufferRange& r : c.dispatch.buffers) {
        if (align) {
          EXPECT_EQ(r.offset % align, 0u);
        }
        offsets[r.buffer.id].insert(r.offset);
      }
    size_t most = 0;
    for (auto& [id, o] : offsets) most = std::max(most, o.size());
    // with an arena the two intermediates are one allocation at two offsets; without, each its own
    EXPECT_EQ(most, align ? 2u : 1u);
    EXPECT_GT((*exe)->stats().arena_bytes, 0u);
  }
}

}  // namespace
}  // namespace rlx
