// Multi-output fusion in the scheduler: a value computed elementwise from a materialized value
// (a rounding copy of an updated weight, an optimizer's new parameter from its new moment) is
// stored by the kernel that stores the value it reads, not by a kernel of its own that reads it
// again; when its expression reads other elements of that value, or a value the program has not
// computed yet, it keeps its own kernel. Every case is also run on the CPU against the
// reference interpreter on fresh random inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "passes/schedule.h"
#include "rlx/compile.h"
#include "rlx/ir_text.h"

namespace rlx {
namespace {

kir::KernelProgram schedule_text(const std::string& text) {
  auto g = parse_graph(text);
  EXPECT_TRUE(g.has_value()) << g.status().to_string();
  auto bound = bind_graph(*g, {});
  EXPECT_TRUE(bound.has_value()) << bound.status().to_string();
  auto d = get_device("cpu");
  auto lr = legalize(*bound, **d, DispatchPolicy{});
  EXPECT_TRUE(lr.has_value() && lr->report.ok());
  auto p = sched::schedule(lr->graph);
  EXPECT_TRUE(p.has_value()) << p.status().to_string();
  EXPECT_TRUE(kir::verify_program(*p).is_ok());
  return p.has_value() ? *p : kir::KernelProgram{};
}

// The CPU's outputs on random inputs, checked against the reference interpreter's: equal to
// within a unit of the last place of each output's type and a small absolute error (the CPU's
// generated C may fuse a multiply and an add that the reference rounds twice, its GEMM sums in
// another order, and a narrow rounding of such a value may then land one step apart).
std::vector<Tensor> run_cpu_checked_against_ref(const std::string& text, uint32_t seed) {
  auto g = parse_graph(text);
  EXPECT_TRUE(g.has_value()) << g.status().to_string();
  if (!g.has_value()) return {};
  auto cpu = Model::compile(*g, {.device = "cpu"});
  auto ref = Model::compile(*g, {.device = "ref"});
  EXPECT_TRUE(cpu.has_value()) << cpu.status().to_string();
  EXPECT_TRUE(ref.has_value()) << ref.status().to_string();
  if (!cpu.has_value() || !ref.has_value()) return {};
  std::mt19937 rng(seed);
  std::normal_distribution<double> dist(0.0, 3.0);
  std::vector<Tensor> in;
  for (ValueId v : g->inputs) {
    const TensorType& t = g->type(v);
    const Sizes sizes = *static_sizes(t.shape);
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    std::vector<double> values(static_cast<size_t>(n));
    for (double& x : values) x = dist(rng);
    in.push_back(Tensor::from_f64(t.dtype, sizes, values));
  }
  auto a = (*cpu)->run(in);
  auto b = (*ref)->run(in);
  EXPECT_TRUE(a.has_value()) << a.status().to_string();
  EXPECT_TRUE(b.has_value()) << b.status().to_string();
  if (!a.has_value() || !b.has_value()) return {};
  EXPECT_EQ(a->size(), b->size());
  for (size_t i = 0; i < a->size() && i < b->size(); ++i) {
    const DType dt = (*a)[i].dtype();
    // inputs are N(0, 3): sums of 64 products reach ~100, so f32's absolute error ~1e-5
    const double rel = dt == DType::bf16 ? 0x1p-7 : dt == DType::f16 ? 0x1p-10 : 0x1p-21;
    for (int64_t e = 0; e < (*a)[i].numel(); ++e) {
      const double x = (*a)[i].get_f64(e), y = (*b)[i].get_f64(e);
      if (std::isnan(x) || std::isnan(y)) {
        EXPECT_EQ(std::isnan(x), std::isnan(y)) << "output " << i << " element " << e;
        continue;
      }
      if (std::isinf(y)) {
        EXPECT_EQ(x, y) << "output " << i << " element " << e;
        continue;
      }
      EXPECT_LE(std::fabs(x - y), 1e-4 + rel * std::fabs(y)) << "output " << i << " element " << e;
    }
  }
  return std::move(*a);
}

size_t stores_of_kernel_writing(const kir::KernelProgram& p, int output) {
  const int b = p.outputs[static_cast<size_t>(output)];
  for (const auto& k : p.generated)
    for (const kir::Store& st : k.stores)
      if (k.args[st.buffer] == b) return k.stores.size();
  return 0;
}

TEST(MultiOutputFusion, RoundingCopiesOfAnUpdateAreStoredByTheUpdateKernel) {
  const std::string text = R"(
graph @g(%w: f32[24, 40], %d: f32[24, 40], %lr: f32[]) -> (f32[24, 40], bf16[24, 40], f32[24, 40]) {
  %s = mul(%d, %lr)
  %n = sub(%w, %s)
  %c = cast(%n) {to = bf16}
  %h = cast(%n) {to = f16}
  %r = cast(%h) {to = f32}
  return %n, %c, %r
})";
  auto p = schedule_text(text);
  ASSERT_EQ(p.generated.size(), 1u) << p.to_text();
  EXPECT_EQ(p.generated[0].stores.size(), 3u);
  // the copies are the roundings of the stored update, bit for bit
  const std::vector<Tensor> out = run_cpu_checked_against_ref(text, 1);
  ASSERT_EQ(out.size(), 3u);
  const float* n = out[0].data<float>();
  for (int64_t e = 0; e < out[0].numel(); ++e) {
    EXPECT_EQ(out[1].data<uint16_t>()[e], f32_to_bf16(n[e])) << e;
    const float r = f16_to_f32(f32_to_f16(n[e]));
    EXPECT_EQ(std::memcmp(&out[2].data<float>()[e], &r, 4), 0) << e;
  }
}

// Adam's shape: the new moment is stored, and the new parameter computed from it by the same
// kernel (the bias correction is a scalar computed before it).
TEST(MultiOutputFusion, NewParameterIsStoredWithTheMomentItReads) {
  const std::string text = R"(
graph @g(%w: f32[16, 33], %m: f32[16, 33], %d: f32[16, 33], %lr: f32[]) -> (f32[16, 33], f32[16, 33]) {
  %b = constant dense<0.9> : f32[]
  %k = constant dense<0.1> : f32[]
  %a = mul(%m, %b)
  %e = mul(%d, %k)
  %mn = add(%a, %e)
  %u = mul(%mn, %lr)
  %wn = sub(%w, %u)
  return %mn, %wn
})";
  auto p = schedule_text(text);
  ASSERT_EQ(p.generated.size(), 1u) << p.to_text();
  EXPECT_EQ(stores_of_kernel_writing(p, 1), 2u);
  run_cpu_checked_against_ref(text, 2);
}

// Adam's update: the new moments are read by the new parameter together with bias corrections
// computed after them (pow of the step: scalars of their own), so the moments' kernels wait for
// the parameter's, which stores all three.
TEST(MultiOutputFusion, MomentsWaitForTheParameterThatReadsThem) {
  const std::string text = R"(
graph @g(%w: f32[16, 40], %m: f32[16, 40], %v: f32[16, 40], %d: f32[16, 40], %lr: f32[], %t: f32[]) -> (f32[16, 40], f32[16, 40], f32[16, 40]) {
  %b1 = constant dense<0.9> : f32[]
  %c1 = constant dense<0.1> : f32[]
  %b2 = constant dense<0.999> : f32[]
  %c2 = constant dense<0.001> : f32[]
  %one = constant dense<1.0> : f32[]
  %eps = constant dense<1e-8> : f32[]
  %ma = mul(%m, %b1)
  %mb = mul(%d, %c1)
  %mn = add(%ma, %mb)
  %va = mul(%v, %b2)
  %dd = mul(%d, %d)
  %vb = mul(%dd, %c2)
  %vn = add(%va, %vb)
  %p1 = pow(%b1, %t)
  %k1 = sub(%one, %p1)
  %p2 = pow(%b2, %t)
  %k2 = sub(%one, %p2)
  %st = div(%lr, %k1)
  %vh = div(%vn, %k2)
  %sq = sqrt(%vh)
  %de = add(%sq, %eps)
  %q = div(%mn, %de)
  %u = mul(%st, %q)
  %wn = sub(%w, %u)
  return %wn, %mn, %vn
})";
  auto p = schedule_text(text);
  EXPECT_EQ(stores_of_kernel_writing(p, 0), 3u) << p.to_text();
  for (const auto& k : p.generated) EXPECT_TRUE(k.stores.size() == 3u || k.cols() == 1) << p.to_text();
  run_cpu_checked_against_ref(text, 6);
}

// A reader of other elements (a transpose) would need elements the kernel has not stored yet:
// it keeps its own kernel.
TEST(MultiOutputFusion, ReaderOfOtherElementsKeepsItsKernel) {
  const std::string text = R"(
graph @g(%x: f32[16, 16], %y: f32[16, 16]) -> (f32[16, 16], bf16[16, 16]) {
  %n = add(%x, %y)
  %t = transpose(%n) {perm = [1, 0]}
  %c = cast(%t) {to = bf16}
  return %n, %c
})";
  auto p = schedule_text(text);
  ASSERT_EQ(p.generated.size(), 2u) << p.to_text();
  for (const auto& k : p.generated) EXPECT_EQ(k.stores.size(), 1u);
  run_cpu_checked_against_ref(text, 3);
}

// A reader that also needs a value computed after the first (here a reduction the program
// materializes in between): the first value's kernel waits for the reader's, which stores both;
// when a step reads the first value before that (a GEMM here), its kernel is built right before
// that step (and stores the reader's value too, the reduction being computed by then).
TEST(MultiOutputFusion, ValueReadWithALaterOneWaitsForItsReader) {
  const std::string waits = R"(
graph @g(%x: f32[8, 32], %y: f32[8, 32]) -> (f32[8, 32], f32[8, 1], f32[8, 32]) {
  %n = exp(%x)
  %s = reduce_max(%y) {axes = [1], keepdims = 1}
  %u = mul(%n, %s)
  return %n, %s, %u
})";
  auto p = schedule_text(waits);
  EXPECT_EQ(stores_of_kernel_writing(p, 0), 2u) << p.to_text();
  EXPECT_EQ(p.generated.size(), 2u) << p.to_text();
  run_cpu_checked_against_ref(waits, 4);
  const std::string read_first = R"(
graph @g(%x: f32[8, 32], %y: f32[8, 32], %w: f32[32, 16]) -> (f32[8, 1], f32[8, 16], f32[8, 32]) {
  %n = exp(%x)
  %s = reduce_max(%y) {axes = [1], keepdims = 1}
  %h = matmul(%n, %w)
  %u = mul(%n, %s)
  return %s, %h, %u
})";
  auto q = schedule_text(read_first);
  ASSERT_EQ(q.natives.size(), 1u);
  EXPECT_EQ(stores_of_kernel_writing(q, 2), 2u) << q.to_text();
  // the GEMM's input is written by a step before it
  const int in = q.natives[0].inputs[0];
  bool written_before = false;
  for (const kir::Step& st : q.steps) {
    if (st.native) break;
    const auto& k = q.generated[static_cast<size_t>(st.index)];
    for (const kir::Store& store : k.stores) written_before |= k.args[store.buffer] == in;
  }
  EXPECT_TRUE(written_before) << q.to_text();
  run_cpu_checked_against_ref(read_first, 7);
}

// A GEMM's epilogue that stores two outputs (the biased result and its bf16 copy for the next
// product) runs on the GEMM's tiles, and the CPU agrees with the reference.
TEST(MultiOutputFusion, GemmEpilogueStoresBothOutputs) {
  const std::string text = R"(
graph @g(%x: f32[30, 64], %w: f32[64, 40], %b: f32[40]) -> (f32[30, 40], bf16[30, 40]) {
  %h = matmul(%x, %w)
  %a = add(%h, %b)
  %c = cast(%a) {to = bf16}
  return %a, %c
})";
  auto p = schedule_text(text);
  ASSERT_EQ(p.natives.size(), 1u);
  ASSERT_EQ(p.generated.size(), 1u) << p.to_text();
  EXPECT_EQ(p.generated[0].stores.size(), 2u);
  sched::fuse_native_epilogues(p, [](const kir::NativeKernel&) { return true; });
  EXPECT_EQ(p.steps.size(), 1u);
  EXPECT_EQ(p.natives[0].epilogue, 0);
  EXPECT_TRUE(kir::verify_program(p).is_ok());
  const std::vector<Tensor> out = run_cpu_checked_against_ref(text, 5);
  ASSERT_EQ(out.size(), 2u);
  for (int64_t e = 0; e < out[0].numel(); ++e) EXPECT_EQ(out[1].data<uint16_t>()[e], f32_to_bf16(out[0].data<float>()[e])) << e;
}

}  // namespace
}  // namespace rlx
