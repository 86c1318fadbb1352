// The scheduler and memory planner on text IR: what fuses into one kernel, what stays
// native, epilogue fusion, arena reuse, and a kernel program that verifies.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>

#include "backends/cpu/kernels/gemm.h"
#include "passes/schedule.h"
#include "rlx/compile.h"
#include "rlx/ir_text.h"

namespace rlx {
namespace {

kir::KernelProgram schedule_text(const std::string& text, const DimBindings& dims, const char* device = "cpu",
                                 const sched::ScheduleOptions& options = {}) {
  auto g = parse_graph(text);
  EXPECT_TRUE(g.has_value()) << g.status().to_string();
  auto bound = bind_graph(*g, dims);
  EXPECT_TRUE(bound.has_value()) << bound.status().to_string();
  auto d = get_device(device);
  auto lr = legalize(*bound, **d, DispatchPolicy{});
  EXPECT_TRUE(lr.has_value() && lr->report.ok());
  auto p = sched::schedule(lr->graph, options);
  EXPECT_TRUE(p.has_value()) << p.status().to_string();
  EXPECT_TRUE(kir::verify_program(*p).is_ok());
  return p.has_value() ? *p : kir::KernelProgram{};
}

int count_exprs(const kir::GeneratedKernel& k, kir::ExprKind kind) {
  int n = 0;
  for (const auto& e : k.exprs) n += e.kind == kind;
  return n;
}

TEST(Schedule, ElementwiseChainIsOneLoop) {
  auto p = schedule_text(R"(
graph @g(%x: f32[8, 16, 32], %b: f32[32]) -> (f32[8, 16, 32]) {
  %y = add(%x, %b)
  %z = tanh(%y)
  %w = mul(%z, %z)
  return %w
})", {});
  ASSERT_EQ(p.steps.size(), 1u);
  const auto& k = p.generated[0];
  // dims merge into long loops; the broadcast of %b keeps its own loop level
  EXPECT_EQ(count_exprs(k, kir::ExprKind::idiv) + count_exprs(k, kir::ExprKind::imod), 0);
  EXPECT_EQ(k.cols(), 32);
  EXPECT_EQ(p.arena_bytes, 0u);
}

TEST(Schedule, PureElementwiseMergesEveryDim) {
  auto p = schedule_text(R"(
graph @g(%x: f32[8, 16, 32]) -> (f32[8, 16, 32]) {
  %y = exp(%x)
  return %y
})", {});
  ASSERT_EQ(p.generated.size(), 1u);
  EXPECT_EQ(p.generated[0].domain_rank, 1);
  EXPECT_EQ(p.generated[0].cols(), 8 * 16 * 32);
}

// An output that is a graph input is copied into its own buffer; an empty one has nothing to
// copy (a one-element copy read and wrote past both buffers, which the 32-bit dialects' range
// checks reported as an i64 out of range on data-dependent graphs with empty results).
TEST(Schedule, EmptyOutputCopiedFromAnInputHasNoKernel) {
  auto p = schedule_text(R"(
graph @g(%x: i64[0], %y: f32[3]) -> (i64[0], f32[3]) {
  return %x, %y
})", {});
  ASSERT_EQ(p.generated.size(), 1u) << p.to_text();
  EXPECT_EQ(p.generated[0].cols(), 3);
}

TEST(Schedule, SoftmaxAndLayerNormAreOneKernelEach) {
  auto p = schedule_text(R"(
graph @g(%x: f32[4, 12, 64], %s: f32[64], %b: f32[64]) -> (f32[4, 12, 64]) {
  %n = layer_norm(%x, %s, %b) {axis = -1, epsilon = 1e-5}
  %p = softmax(%n) {axis = -1}
  return %p
})", {});
  // layer norm's two reductions and softmax's two all hoist per row; the layer-norm output
  // is read by softmax's reductions inside their loops, so it is materialized once
  EXPECT_LE(p.generated.size(), 2u);
  for (const auto& k : p.generated) EXPECT_EQ(k.cols(), 64);
}

TEST(Schedule, MiddleAxisReductionHoistsItsRow) {
  auto p = schedule_text(R"(
graph @g(%x: f32[3, 50, 7]) -> (f32[3, 50, 7]) {
  %p = softmax(%x) {axis = 1}
  return %p
})", {});
  ASSERT_EQ(p.generated.size(), 1u);
  const auto& k = p.generated[0];
  // the loops the reductions depend on (3 and 7) go outside, the reduced axis is the column
  EXPECT_EQ(k.cols(), 50);
  EXPECT_EQ(k.rows(), 21);
}

int count_unary(const kir::GeneratedKernel& k, Op op) {
  int n = 0;
  for (const auto& e : k.exprs) n += e.kind == kir::ExprKind::unary && e.op == op;
  return n;
}

TEST(Schedule, BroadcastTranscendentalIsComputedOncePerElement) {
  // RoPE's cos and sin depend on the position and the frequency only; the rotation reads them
  // for all 8 heads and both halves of each row. They get kernels of their own (16 x 32
  // elements) instead of being recomputed for each of the 8 x 16 x 64 outputs.
  auto p = schedule_text(R"(
graph @g(%x: f32[1, 8, 16, 64], %pos: i64[16]) -> (f32[1, 8, 16, 64]) {
  %y = rope(%x, %pos) {theta = 10000.0}
  return %y
})", {});
  int cos_kernels = 0, sin_kernels = 0;
  for (const auto& k : p.generated) {
    const int c = count_unary(k, Op::Cos), s = count_unary(k, Op::Sin);
    if (c + s == 0) continue;
    EXPECT_EQ(numel(p.buffers[k.args[k.stores[0].buffer]].sizes), 16 * 32);
    cos_kernels += c > 0;
    sin_kernels += s > 0;
  }
  EXPECT_EQ(cos_kernels, 1);
  EXPECT_EQ(sin_kernels, 1);
  // an elementwise exp of the same shape as the kernel stays fused
  auto q = schedule_text(R"(
graph @g(%x: f32[8, 64], %b: f32[64]) -> (f32[8, 64]) {
  %y = add(%x, %b)
  %z = exp(%y)
  return %z
})", {});
  EXPECT_EQ(q.generated.size(), 1u);
}

// Whether expression `e` of `k`, or one it is computed from, satisfies `pred`.
bool reaches(const kir::GeneratedKernel& k, int e, const std::function<bool(const kir::Expr&)>& pred) {
  std::vector<int> todo{e};
  std::vector<bool> seen(k.exprs.size());
  while (!todo.empty()) {
    const int i = todo.back();
    todo.pop_back();
    if (i < 0 || seen[i]) continue;
    seen[i] = true;
    const kir::Expr& x = k.exprs[i];
    if (pred(x)) return true;
    todo.insert(todo.end(), {x.a, x.b, x.c});
  }
  return false;
}

// Whether expression `e` of `k` reads loop variable `loop` (directly or through its operands).
bool reads_loop(const kir::GeneratedKernel& k, int e, int loop) {
  return reaches(k, e, [&](const kir::Expr& x) { return x.kind == kir::ExprKind::loop_var && x.loop == loop; });
}

// A convolution's im2col: the gathered taps [9, 121] of 8 channels viewed as 72 rows of 121.
// The channel of row r and column c is (121 r + c) / 1089 = r / 9 because c < 121: the index
// math divides once per row, not once per element in the vector loop over columns.
TEST(Schedule, CommonFactorOfIndexAndDivisorLeavesNoDivisionInTheInnerLoop) {
  auto p = schedule_text(R"(
graph @g(%x: f32[2, 8, 169], %i: i32[9, 121]) -> (f32[2, 72, 121]) {
  %g = gather(%x, %i) {axis = 2}
  %y = reshape(%g) {shape = [2, 72, 121]}
  return %y
})", {});
  ASSERT_EQ(p.generated.size(), 1u);
  const auto& k = p.generated[0];
  const int inner = k.domain_rank - 1;
  EXPECT_EQ(k.loops[inner].extent, 121);
  int divisions = 0;
  for (int e = 0; e < static_cast<int>(k.exprs.size()); ++e) {
    const bool division = k.exprs[e].kind == kir::ExprKind::idiv || k.exprs[e].kind == kir::ExprKind::imod;
    divisions += division && reads_loop(k, e, inner);
  }
  EXPECT_EQ(divisions, 0);
}

// x * 0 for x an f32 value rounded to f16 and back (the loss scaler's finite test over f16
// gradients) compares |x| with f16's overflow threshold instead of rounding: no cast to f16 is
// left in the kernel, and the bits (signed zeros, NaN) agree with the reference's rounding
// over the values around the threshold, infinities, NaN and signed zeros.
TEST(Schedule, ZeroTimesAnF16RoundTripTestsTheRangeWithoutRounding) {
  const std::string text = R"(
graph @g(%x: f32[12]) -> (f32[12], f32[]) {
  %h = cast(%x) {to = f16}
  %r = cast(%h) {to = f32}
  %z = constant dense<0.0> : f32[]
  %p = mul(%r, %z)
  %s = reduce_sum(%p) {axes = [0], keepdims = 0}
  return %p, %s
})";
  auto p = schedule_text(text, {});
  for (const auto& k : p.generated)  // no f16 cast among what the stores compute
    for (const kir::Store& st : k.stores)
      EXPECT_FALSE(reaches(k, st.value, [](const kir::Expr& x) { return x.kind == kir::ExprKind::cast && x.dtype == DType::f16; }));
  auto g = parse_graph(text);
  ASSERT_TRUE(g.has_value());
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<double> xs = {1.5, -2.25, 65504, 65519.99, 65520, -65520, -0.0, 1e-30, -1e-30, inf, -inf, std::nan("")};
  auto cpu = Model::compile(*g, {.device = "cpu"});
  auto ref = Model::compile(*g, {.device = "ref"});
  ASSERT_TRUE(cpu.has_value() && ref.has_value());
  for (int only_finite = 0; only_finite < 2; ++only_finite) {
    // the finite case drops 65520 and beyond (f16 rounds them to infinity) and NaN
    std::vector<double> in_values;
    for (double x : xs)
      if (!only_finite || std::fabs(x) < 65520) in_values.push_back(x);
    in_values.resize(12, 3.0);
    const std::vector<Tensor> in = {Tensor::from_f64(DType::f32, {12}, in_values)};
    auto a = (*cpu)->run(in);
    auto b = (*ref)->run(in);
    ASSERT_TRUE(a.has_value() && b.has_value());
    for (int64_t e = 0; e < 12; ++e) {
      const float u = static_cast<float>((*a)[0].get_f64(e)), v = static_cast<float>((*b)[0].get_f64(e));
      EXPECT_EQ(std::isnan(u), std::isnan(v)) << in_values[e];
      if (!std::isnan(v)) EXPECT_EQ(std::signbit(u), std::signbit(v)) << in_values[e];
    }
    EXPECT_EQ(std::isnan((*a)[1].get_f64(0)), !only_finite);
    EXPECT_EQ(std::isnan((*b)[1].get_f64(0)), !only_finite);
  }
}

// A gather whose indices are a constant table inside the axis (im2col's, pooling's) loads
// each index as it is; a table with a negative entry keeps the wrap, and the values agree
// with the reference either way.
TEST(Schedule, GatherOfAConstantInRangeTableNeitherWrapsNorClamps) {
  for (const char* table : {"[3, 0, 2, 1, 3, 3]", "[3, 0, -2, 1, 3, -1]"}) {
    SCOPED_TRACE(table);
    const std::string text = cat(R"(
graph @g(%x: f32[5, 4]) -> (f32[5, 6]) {
  %i = constant dense<)", table, R"(> : i32[6]
  %y = gather(%x, %i) {axis = 1}
  return %y
})");
    auto p = schedule_text(text, {});
    ASSERT_EQ(p.generated.size(), 1u);
    const auto& k = p.generated[0];
    const bool negative = std::strchr(table, '-') != nullptr;
    EXPECT_EQ(count_exprs(k, kir::ExprKind::clamp) + count_exprs(k, kir::ExprKind::select) > 0, negative);
    auto g = parse_graph(text);
    ASSERT_TRUE(g.has_value());
    std::vector<double> xs(20);
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = 0.5 * static_cast<double>(i) - 3;
    const std::vector<Tensor> in = {Tensor::from_f64(DType::f32, {5, 4}, xs)};
    auto cpu = Model::compile(*g, {.device = "cpu"});
    auto ref = Model::compile(*g, {.device = "ref"});
    ASSERT_TRUE(cpu.has_value() && ref.has_value());
    auto a = (*cpu)->run(in);
    auto b = (*ref)->run(in);
    ASSERT_TRUE(a.has_value() && b.has_value());
    for (int64_t e = 0; e < 30; ++e) EXPECT_EQ((*a)[0].get_f64(e), (*b)[0].get_f64(e)) << e;
  }
}

// A pad of a buffer, or of a view of one (conv2d's col2im pads slices of its GEMM's output),
// reads at the shifted index itself through a load guarded by the bounds test, no clamp, so
// that a shifted row stays contiguous (a masked load once vectorized); a pad of a computed
// value clamps its index instead (the computation must stay in bounds). Both give the
// reference interpreter's bits, at every edge and for NaN.
TEST(Schedule, PadOfABufferReadsThroughGuardedLoads) {
  struct Form {
    const char* name;
    const char* body;
    bool guarded;
  };
  const Form forms[] = {
      {"buffer", "  %p = pad(%x) {pads = [1, 3, 2, 0], value = -0.5}\n  %y = add(%p, %p)\n", true},
      {"view", "  %r = reshape(%x) {shape = [14, 6]}\n  %t = strided_slice(%r) {starts = [1, 0], steps = [2, 1], sizes = [7, 6]}\n"
               "  %v = reshape(%t) {shape = [7, 6]}\n  %p = pad(%v) {pads = [1, 3, 2, 0], value = -0.5}\n  %y = add(%p, %p)\n",
       true},
      {"computed", "  %e = mul(%x, %x)\n  %p = pad(%e) {pads = [1, 3, 2, 0], value = -0.5}\n  %y = add(%p, %p)\n", false},
  };
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-4.f, 4.f);
  for (const Form& f : forms) {
    SCOPED_TRACE(f.name);
    const bool view = std::string(f.name) == "view";
    const std::string text = cat("graph @g(%x: f32[", view ? "12, 7" : "7, 6", "]) -> (f32[10, 9]) {\n", f.body, "  return %y\n}");
    auto p = schedule_text(text, {});
    ASSERT_EQ(p.generated.size(), 1u);
    const auto& k = p.generated[0];
    int guarded = 0;
    for (const auto& e : k.exprs) guarded += e.kind == kir::ExprKind::load && e.c >= 0;
    EXPECT_EQ(guarded > 0, f.guarded);
    EXPECT_EQ(count_exprs(k, kir::ExprKind::clamp) > 0, !f.guarded);
    Tensor x = Tensor::zeros(DType::f32, view ? Sizes{12, 7} : Sizes{7, 6});
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = dist(rng);
    x.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
    x.data<float>()[x.numel() - 1] = -std::numeric_limits<float>::infinity();
    auto g = parse_graph(text);
    ASSERT_TRUE(g.has_value());
    auto cpu = Model::compile(*g, {.device = "cpu"});
    auto ref = Model::compile(*g, {.device = "ref"});
    ASSERT_TRUE(cpu.has_value() && ref.has_value());
    const std::vector<Tensor> in = {x};
    auto a = (*cpu)->run(in);
    auto b = (*ref)->run(in);
    ASSERT_TRUE(a.has_value() && b.has_value());
    const Tensor& ya = (*a)[0];
    const Tensor& yb = (*b)[0];
    EXPECT_EQ(std::memcmp(ya.data<float>(), yb.data<float>(), ya.nbytes()), 0);
  }
}

// An f32 value rounded through `narrow` (cast there and back) and read by a gather
// of 512 (each of the 64 values 8 times) or, not `gathered`, an add of 64 (once each).
kir::KernelProgram rounded_and_read(const char* narrow, bool gathered) {
  std::string t = gathered ? "graph @g(%x: f32[64], %i: i64[512]) -> (f32[512]) {\n"
                           : "graph @g(%x: f32[64], %b: f32[64]) -> (f32[64]) {\n";
  t += cat("  %r = cast(%x) {to = ", narrow, "}\n  %w = cast(%r) {to = f32}\n");
  t += gathered ? "  %y = gather(%w, %i) {axis = 0}\n" : "  %y = add(%w, %b)\n";
  return schedule_text(t + "  return %y\n}", {});
}

// An f32 value rounded through f16 or bf16 (autocast's widened form) that a gather reads many
// times per element (a convolution's im2col under --precision) is materialized as an f32
// buffer of the rounded values, rounded once per element: the gather then loads floats and
// converts nothing. Read once per element (the same shape as the kernel) it stays fused.
TEST(Schedule, RoundTripReadManyTimesByAGatherIsMaterializedInF32) {
  for (const char* narrow : {"f16", "bf16"}) {
    SCOPED_TRACE(narrow);
    auto p = rounded_and_read(narrow, true);
    ASSERT_EQ(p.generated.size(), 2u) << "the rounded values get a buffer of their own";
    const auto& first = p.generated[static_cast<size_t>(p.steps[0].index)];
    const auto& rounded = p.buffers[static_cast<size_t>(first.args[first.stores[0].buffer])];
    EXPECT_EQ(rounded.dtype, DType::f32);
    EXPECT_EQ(numel(rounded.sizes), 64);
    for (const auto& b : p.buffers)
      EXPECT_TRUE(b.dtype != DType::f16 && b.dtype != DType::bf16) << "no 16-bit storage between the two kernels";
    EXPECT_EQ(rounded_and_read(narrow, false).generated.size(), 1u) << "read once per element: fused";
  }
}

TEST(Schedule, MatmulKeepsNativeAndFusesEpilogue) {
  auto p = schedule_text(R"(
graph @g(%x: f32[6, 64]) -> (f32[6, 48]) {
  %w = param "w" : f32[64, 48]
  %b = param "b" : f32[48]
  %h = matmul(%x, %w)
  %hb = add(%h, %b)
  %a = relu(%hb)
  return %a
})", {});
  ASSERT_EQ(p.natives.size(), 1u);
  ASSERT_EQ(p.steps.size(), 2u);
  sched::fuse_native_epilogues(p, [](const kir::NativeKernel&) { return true; });
  EXPECT_EQ(p.steps.size(), 1u);
  EXPECT_EQ(p.natives[0].epilogue, 0);
  EXPECT_EQ(p.arena_bytes, 0u);  // the GEMM writes into the output, the epilogue works in place
  EXPECT_TRUE(kir::verify_program(p).is_ok());
}

// An elementwise reader built after other steps (autocast rounds q, k and v for attention after
// all three projections) still becomes its GEMM's epilogue when no step in between touches what
// it reads or writes; a reader that needs a later GEMM's output stays where it is.
TEST(Schedule, EpilogueBuiltAfterOtherStepsMovesUpToItsGemm) {
  const char* both = R"(
graph @g(%x: f32[6, 64]) -> (bf16[6, 48], bf16[6, 48]) {
  %w1 = param "w1" : f32[64, 48]
  %w2 = param "w2" : f32[64, 48]
  %b = param "b" : f32[48]
  %h1 = matmul(%x, %w1)
  %h2 = matmul(%x, %w2)
  %s1 = add(%h1, %b)
  %s2 = add(%h2, %b)
  %a1 = cast(%s1) {to = bf16}
  %a2 = cast(%s2) {to = bf16}
  return %a1, %a2
})";
  auto p = schedule_text(both, {});
  ASSERT_EQ(p.natives.size(), 2u);
  ASSERT_EQ(p.steps.size(), 4u);
  sched::fuse_native_epilogues(p, [](const kir::NativeKernel&) { return true; });
  EXPECT_EQ(p.steps.size(), 2u);
  EXPECT_GE(p.natives[0].epilogue, 0);
  EXPECT_GE(p.natives[1].epilogue, 0);
  EXPECT_TRUE(kir::verify_program(p).is_ok());
  // h1's reader also reads h2, which the second GEMM writes in between: only that GEMM takes it
  auto q = schedule_text(R"(
graph @g(%x: f32[6, 64]) -> (f32[6, 48]) {
  %w1 = param "w1" : f32[64, 48]
  %w2 = param "w2" : f32[64, 48]
  %h1 = matmul(%x, %w1)
  %h2 = matmul(%x, %w2)
  %a = add(%h1, %h2)
  return %a
})", {});
  ASSERT_EQ(q.steps.size(), 3u);
  sched::fuse_native_epilogues(q, [](const kir::NativeKernel&) { return true; });
  EXPECT_EQ(q.steps.size(), 2u);
  EXPECT_LT(q.natives[0].epilogue, 0);
  EXPECT_GE(q.natives[1].epilogue, 0);
  EXPECT_TRUE(kir::verify_program(q).is_ok());
}

// An f16 cast that feeds a product (autocast's narrow form: the batch and the weights each
// training step) is not materialized for it when the product can round as it reads (the
// product reads the f32 source, as f16); one the product refuses stays a kernel, and one that
// is a program output too is materialized for the output only.
const char* kCastsIntoDot = R"(
graph @g(%x: f32[40, 64], %w: f32[64, 48]) -> (f32[40, 48]%s) {
  %xh = cast(%x) {to = f16}
  %wh = cast(%w) {to = f16}
  %y = dot(%xh, %wh) {lhs_contract = [1], rhs_contract = [0], out_type = f32}
  return %y%s
})";

std::string casts_into_dot(bool cast_is_output) {
  std::string t = kCastsIntoDot;
  for (const char* part : {cast_is_output ? ", f16[40, 64]" : "", cast_is_output ? ", %xh" : ""})
    t.replace(t.find("%s"), 2, part);
  return t;
}

// Options whose products round the inputs `reads` lets them (and record what was asked).
sched::ScheduleOptions rounding_products(std::function<bool(int)> reads, std::vector<int>* asked = nullptr) {
  sched::ScheduleOptions o;
  o.native_reads_f32_as_f16 = [reads, asked](const kir::NativeKernel&, int input) {
    if (asked) asked->push_back(input);
    return reads(input);
  };
  return o;
}

TEST(Schedule, F16CastsThatFeedProductsAreReadByThem) {
  ASSERT_EQ(schedule_text(casts_into_dot(false), {}).steps.size(), 3u);  // without the option
  std::vector<int> asked;  // the inputs offered
  auto p = schedule_text(casts_into_dot(false), {}, "cpu", rounding_products([](int) { return true; }, &asked));
  EXPECT_EQ(asked, (std::vector<int>{0, 1}));
  ASSERT_EQ(p.natives.size(), 1u);
  ASSERT_EQ(p.steps.size(), 1u);
  const kir::NativeKernel& n = p.natives[0];
  EXPECT_EQ(n.inputs[0], p.inputs[0]);  // the product reads x and w themselves
  EXPECT_EQ(n.inputs[1], p.inputs[1]);
  EXPECT_EQ(n.input_types[0].dtype, DType::f16);  // as f16
  EXPECT_EQ(n.input_types[1].dtype, DType::f16);
  // refused by the native: x's cast stays
  auto q = schedule_text(casts_into_dot(false), {}, "cpu", rounding_products([](int input) { return input == 1; }));
  EXPECT_EQ(q.steps.size(), 2u);
  EXPECT_EQ(q.natives[0].input_types[0].dtype, DType::f16);
  EXPECT_EQ(q.buffers[q.natives[0].inputs[0]].dtype, DType::f16);
  // the cast is an output too: its kernel stays for the output, the product reads x
  auto r = schedule_text(casts_into_dot(true), {}, "cpu", rounding_products([](int) { return true; }));
  EXPECT_EQ(r.steps.size(), 2u);
  EXPECT_EQ(r.natives[0].inputs[0], r.inputs[0]);
}

// Autocast's widened form rounds an operand to f16 and back in an f32 buffer: the product
// reads the source as f16 the same way when it is an input (a generated kernel that reads the
// round trip too computes it inline); the round trip of a value the program computes stays in
// the kernel that computes it.
const char* kRoundTripIntoDot = R"(
graph @g(%x: f32[40, 64], %w: f32[64, 48]) -> (f32[40, 48]%s) {
  %xh = cast(%x) {to = f16}
  %xr = cast(%xh) {to = f32}
  %y = dot(%xr, %w) {lhs_contract = [1], rhs_contract = [0]}
  return %y%s
})";

std::string round_trip_into_dot(bool also_read) {
  std::string t = kRoundTripIntoDot;
  for (const char* part : {also_read ? ", f32[40, 64]" : "", also_read ? ", %t" : ""})
    t.replace(t.find("%s"), 2, part);
  if (also_read) t.replace(t.find("  return"), 0, "  %t = tanh(%xr)\n");
  return t;
}

TEST(Schedule, F16RoundTripsThatFeedProductsAreReadByThem) {
  ASSERT_EQ(schedule_text(round_trip_into_dot(false), {}).steps.size(), 2u);  // without the option
  for (bool also_read : {false, true}) {
    SCOPED_TRACE(also_read ? "the round trip read by tanh too" : "read by the product only");
    auto p = schedule_text(round_trip_into_dot(also_read), {}, "cpu", rounding_products([](int) { return true; }));
    ASSERT_EQ(p.natives.size(), 1u);
    EXPECT_EQ(p.steps.size(), also_read ? 2u : 1u);
    const kir::NativeKernel& n = p.natives[0];
    EXPECT_EQ(n.inputs[0], p.inputs[0]);
    EXPECT_EQ(n.input_types[0].dtype, DType::f16);
    EXPECT_EQ(n.input_types[1].dtype, DType::f32);  // w was not rounded
  }
  std::string computed = round_trip_into_dot(false);
  computed.replace(computed.find("%xh = cast(%x)"), 14, "%e = tanh(%x)\n  %xh = cast(%e)");
  auto q = schedule_text(computed, {}, "cpu", rounding_products([](int) { return true; }));
  ASSERT_EQ(q.steps.size(), 2u);
  EXPECT_EQ(q.natives[0].input_types[0].dtype, DType::f32);
  EXPECT_NE(q.natives[0].inputs[0], q.inputs[0]);
}

// On the cpu a product whose operands are f16 casts or round trips of f32 values gives the
// bits of the same product on operands converted beforehand: f16 tensors for the casts (the
// f16 kernels' product), f32 tensors holding the rounded values for the round trips (the f32
// kernels' product). The casts' graphs say so in their listing.
TEST(Schedule, CpuProductReadingF32AsF16EqualsTheConvertedOperands) {
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> dist(0.f, 2.f);
  Tensor x = Tensor::zeros(DType::f32, {40, 64}), w = Tensor::zeros(DType::f32, {64, 48});
  for (Tensor* t : {&x, &w})
    for (int64_t i = 0; i < t->numel(); ++i) t->data<float>()[i] = dist(rng);
  x.data<float>()[3] = 1e5f;  // beyond f16: infinity
  x.data<float>()[5] = 3e-6f;  // an f16 subnormal
  auto run = [](const std::string& text, const std::vector<Tensor>& in, std::string* listing) {
    auto g = parse_graph(text);
    EXPECT_TRUE(g.has_value()) << g.status().to_string();
    auto m = Model::compile(std::move(*g), {.device = "cpu"});
    EXPECT_TRUE(m.has_value()) << m.status().to_string();
    auto var = (*m)->prepare({});
    EXPECT_TRUE(var.has_value()) << var.status().to_string();
    if (listing) *listing = (*var)->executable->stats().kernel_listing;
    auto r = (*var)->executable->run(in);
    EXPECT_TRUE(r.has_value()) << r.status().to_string();
    return (*r)[0];
  };
  Tensor x16 = Tensor::zeros(DType::f16, {40, 64}), w16 = Tensor::zeros(DType::f16, {64, 48});
  Tensor xr = Tensor::zeros(DType::f32, {40, 64});
  for (int64_t i = 0; i < x.numel(); ++i) {
    x16.data<uint16_t>()[i] = f32_to_f16(x.data<float>()[i]);
    xr.data<float>()[i] = f16_to_f32(x16.data<uint16_t>()[i]);
  }
  for (int64_t i = 0; i < w.numel(); ++i) w16.data<uint16_t>()[i] = f32_to_f16(w.data<float>()[i]);
  std::string listing;
  for (bool output : {false, true}) {  // the cast also a program output, or not
    const Tensor got = run(casts_into_dot(output), {x, w}, &listing);
    EXPECT_NE(listing.find("cast from f32 while packing"), std::string::npos) << listing;
    const Tensor want = run(R"(
graph @g(%x: f16[40, 64], %w: f16[64, 48]) -> (f32[40, 48]) {
  %y = dot(%x, %w) {lhs_contract = [1], rhs_contract = [0], out_type = f32}
  return %y
})", {x16, w16}, nullptr);
    EXPECT_EQ(std::memcmp(got.data<float>(), want.data<float>(), got.nbytes()), 0) << (output ? "cast also an output" : "");
  }
  for (bool also_read : {false, true}) {
    const Tensor got = run(round_trip_into_dot(also_read), {x, w}, &listing);
    EXPECT_NE(listing.find("cast from f32 while packing"), std::string::npos) << listing;
    const Tensor want = run(R"(
graph @g(%x: f32[40, 64], %w: f32[64, 48]) -> (f32[40, 48]) {
  %y = dot(%x, %w) {lhs_contract = [1], rhs_contract = [0]}
  return %y
})", {xr, w}, nullptr);
    EXPECT_EQ(std::memcmp(got.data<float>(), want.data<float>(), got.nbytes()), 0) << (also_read ? "round trip read by tanh too" : "");
  }
}

// A long elementwise chain read by two kernels (reductions over different axes) is
// materialized once instead of being recomputed by each; a short one stays fused. (Under
// --precision, MiniLM's residual stream was recomputed from the first layer in every later
// kernel, the pooling kernel reading 82 buffers.)
std::string chain_read_twice(int steps) {
  std::string t = "graph @g(%x: f32[64, 48]) -> (f32[64], f32[48]) {\n  %c0 = tanh(%x)\n";
  for (int i = 1; i < steps; ++i)
    t += "  %c" + std::to_string(i) + (i % 2 ? " = add(%c" : " = tanh(%c") + std::to_string(i - 1) + (i % 2 ? ", %x)\n" : ")\n");
  const std::string last = "%c" + std::to_string(steps - 1);
  t += "  %r = reduce_sum(" + last + ") {axes = [1], keepdims = 0}\n";
  t += "  %s = reduce_sum(" + last + ") {axes = [0], keepdims = 0}\n";
  return t + "  return %r, %s\n}";
}

// A layer norm whose output two generated kernels read (under --precision: the rounding for the
// next products and the residual add) is one kernel with its reductions inline; materializing
// the mean instead split it into five passes over the activations.
TEST(Schedule, NormReadByTwoKernelsStaysOneKernel) {
  auto p = schedule_text(R"(
graph @g(%x: f32[64, 48], %r: f32[64, 48], %s: f32[48], %b: f32[48]) -> (bf16[64, 48], f32[64]) {
  %n = layer_norm(%x, %s, %b) {axis = -1, epsilon = 1e-5}
  %c = cast(%n) {to = bf16}
  %z = add(%n, %r)
  %t = reduce_sum(%z) {axes = [1], keepdims = 0}
  return %c, %t
})", {});
  // the norm (two inline reductions) storing its cast too, the sum of the residual
  ASSERT_EQ(p.generated.size(), 2u);
  std::vector<int> reductions;
  for (const auto& k : p.generated) reductions.push_back(count_exprs(k, kir::ExprKind::reduce));
  EXPECT_EQ(reductions, (std::vector<int>{2, 1}));
  EXPECT_EQ(p.generated[0].stores.size(), 2u);
}

TEST(Schedule, ExpensiveChainReadByTwoKernelsIsMaterialized) {
  auto cheap = schedule_text(chain_read_twice(4), {});
  EXPECT_EQ(cheap.generated.size(), 2u) << "a 4-op chain is recomputed by both reductions";
  auto p = schedule_text(chain_read_twice(60), {});
  ASSERT_EQ(p.generated.size(), 3u) << "the 60-op chain gets its own kernel";
  int long_kernels = 0;
  for (const auto& k : p.generated) long_kernels += count_exprs(k, kir::ExprKind::unary) > 16;
  EXPECT_EQ(long_kernels, 1) << "only the materializing kernel computes the chain";
}

TEST(Schedule, ArenaReusesDeadIntermediates) {
  // four reductions in a row: each intermediate dies after the next kernel reads it
  auto p = schedule_text(R"(
graph @g(%x: f32[64, 64, 64]) -> (f32[64]) {
  %a = reduce_sum(%x) {axes = [2], keepdims = 0}
  %b = exp(%a)
  %c = reduce_max(%b) {axes = [1], keepdims = 0}
  return %c
})", {});
  EXPECT_TRUE(kir::verify_program(p).is_ok());
  size_t total = 0;
  for (const auto& b : p.buffers)
    if (b.kind == kir::BufferKind::intermediate && b.alias_of < 0) total += (b.bytes() + 63) / 64 * 64;
  EXPECT_LE(p.arena_bytes, total);
}

TEST(Schedule, ReshapeOfBufferIsAView) {
  auto p = schedule_text(R"(
graph @g(%x: f32[4, 6]) -> (f32[24]) {
  %y = reshape(%x) {shape = [24]}
  return %y
})", {});
  // an output must own its memory: one copy kernel, no division in its index
  ASSERT_EQ(p.generated.size(), 1u);
  EXPECT_EQ(count_exprs(p.generated[0], kir::ExprKind::idiv), 0);
}

TEST(Schedule, VerifierCatchesArenaOverlap) {
  auto p = schedule_text(R"(
graph @g(%x: f32[64, 64]) -> (f32[64]) {
  %a = reduce_sum(%x) {axes = [1], keepdims = 0}
  %b = exp(%a)
  %c = reduce_max(%b) {axes = [0], keepdims = 1}
  %d = add(%b, %c)
  return %d
})", {});
  int temps = 0;
  for (auto& b : p.buffers)
    if (b.kind == kir::BufferKind::intermediate && b.alias_of < 0) ++temps;
  if (temps >= 2) {
    for (auto& b : p.buffers)
      if (b.kind == kir::BufferKind::intermediate && b.alias_of < 0) b.arena_offset = 0;
    EXPECT_FALSE(kir::verify_program(p).is_ok());
  }
}

}  // namespace
}  // namespace rlx
