// The kernel level's text form: print(parse(print(p))) == print(p) and structural equality on
// programs the real pipeline makes (bind, legalize for cpu, schedule, epilogue fusion,
// donations), a parsed program that runs on the CPU executable, and malformed inputs that
// fail with the position and a phrase naming what is wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include "backends/cpu/cpu_executable.h"
#include "passes/schedule.h"
#include "rlx/compile.h"
#include "rlx/device.h"
#include "rlx/dispatch.h"
#include "rlx/ir_text.h"
#include "rlx/kernel_ir.h"

namespace rlx {
namespace {

using kir::KernelProgram;

// ---- structural equality ----

bool same_bits(double x, double y) { return std::memcmp(&x, &y, sizeof x) == 0 || (x != x && y != y); }

void expect_same_tensor(const Tensor& a, const Tensor& b, const std::string& where) {
  ASSERT_EQ(a.defined(), b.defined()) << where;
  if (!a.defined()) return;
  ASSERT_EQ(a.dtype(), b.dtype()) << where;
  ASSERT_EQ(a.sizes(), b.sizes()) << where;
  ASSERT_EQ(a.nbytes(), b.nbytes()) << where;
  if (a.nbytes() > 0) {
    EXPECT_EQ(std::memcmp(a.bytes(), b.bytes(), a.nbytes()), 0) << where;
  }
}

void expect_same_expr(const kir::Expr& x, const kir::Expr& y, const std::string& where) {
  EXPECT_EQ(x.kind, y.kind) << where;
  EXPECT_EQ(x.dtype, y.dtype) << where;
  EXPECT_EQ(x.op, y.op) << where;
  EXPECT_EQ(x.a, y.a) << where;
  EXPECT_EQ(x.b, y.b) << where;
  EXPECT_EQ(x.c, y.c) << where;
  EXPECT_EQ(x.ival, y.ival) << where;
  EXPECT_EQ(x.ival2, y.ival2) << where;
  EXPECT_TRUE(same_bits(x.fval, y.fval)) << where << ": " << x.fval << " vs " << y.fval;
  EXPECT_TRUE(same_bits(x.fval2, y.fval2)) << where << ": " << x.fval2 << " vs " << y.fval2;
  EXPECT_EQ(x.buffer, y.buffer) << where;
  EXPECT_EQ(x.loop, y.loop) << where;
  EXPECT_EQ(x.loops, y.loops) << where;
  EXPECT_TRUE(x == y) << where;
}

void expect_same_generated(const kir::GeneratedKernel& x, const kir::GeneratedKernel& y, const std::string& where) {
  EXPECT_EQ(x.name, y.name) << where;
  ASSERT_EQ(x.loops.size(), y.loops.size()) << where;
  for (size_t l = 0; l < x.loops.size(); ++l) EXPECT_EQ(x.loops[l].extent, y.loops[l].extent) << where;
  EXPECT_EQ(x.domain_rank, y.domain_rank) << where;
  ASSERT_EQ(x.exprs.size(), y.exprs.size()) << where;
  for (size_t e = 0; e < x.exprs.size(); ++e) expect_same_expr(x.exprs[e], y.exprs[e], where + " e" + std::to_string(e));
  ASSERT_EQ(x.stores.size(), y.stores.size()) << where;
  for (size_t s = 0; s < x.stores.size(); ++s) {
    EXPECT_EQ(x.stores[s].buffer, y.stores[s].buffer) << where;
    EXPECT_EQ(x.stores[s].index, y.stores[s].index) << where;
    EXPECT_EQ(x.stores[s].value, y.stores[s].value) << where;
    EXPECT_EQ(x.stores[s].accumulate, y.stores[s].accumulate) << where;
  }
  EXPECT_EQ(x.args, y.args) << where;
  EXPECT_EQ(x.origins, y.origins) << where;
  EXPECT_EQ(x.serial, y.serial) << where;
}

void expect_same_program(const KernelProgram& x, const KernelProgram& y) {
  ASSERT_EQ(x.buffers.size(), y.buffers.size());
  for (size_t i = 0; i < x.buffers.size(); ++i) {
    const kir::Buffer& a = x.buffers[i];
    const kir::Buffer& b = y.buffers[i];
    const std::string where = "buffer b" + std::to_string(i);
    EXPECT_EQ(a.dtype, b.dtype) << where;
    EXPECT_EQ(a.sizes, b.sizes) << where;
    EXPECT_EQ(a.kind, b.kind) << where;
    EXPECT_EQ(a.name, b.name) << where;
    EXPECT_EQ(a.io_index, b.io_index) << where;
    EXPECT_EQ(a.arena_offset, b.arena_offset) << where;
    EXPECT_EQ(a.alias_of, b.alias_of) << where;
    expect_same_tensor(a.data, b.data, where);
  }
  ASSERT_EQ(x.generated.size(), y.generated.size());
  for (size_t k = 0; k < x.generated.size(); ++k)
    expect_same_generated(x.generated[k], y.generated[k], "generated k" + std::to_string(k));
  ASSERT_EQ(x.natives.size(), y.natives.size());
  for (size_t k = 0; k < x.natives.size(); ++k) {
    const kir::NativeKernel& a = x.natives[k];
    const kir::NativeKernel& b = y.natives[k];
    const std::string where = "native n" + std::to_string(k);
    EXPECT_EQ(a.name, b.name) << where;
    EXPECT_EQ(a.op, b.op) << where;
    EXPECT_TRUE(a.attrs == b.attrs) << where;
    EXPECT_EQ(a.inputs, b.inputs) << where;
    EXPECT_EQ(a.outputs, b.outputs) << where;
    EXPECT_EQ(a.input_types, b.input_types) << where;
    EXPECT_EQ(a.output_types, b.output_types) << where;
    EXPECT_EQ(a.how, b.how) << where;
    EXPECT_EQ(a.epilogue, b.epilogue) << where;
    EXPECT_EQ(a.origins, b.origins) << where;
  }
  ASSERT_EQ(x.steps.size(), y.steps.size());
  for (size_t s = 0; s < x.steps.size(); ++s) {
    EXPECT_EQ(x.steps[s].native, y.steps[s].native) << "step " << s;
    EXPECT_EQ(x.steps[s].index, y.steps[s].index) << "step " << s;
  }
  EXPECT_EQ(x.inputs, y.inputs);
  EXPECT_EQ(x.outputs, y.outputs);
  EXPECT_EQ(x.donations, y.donations);
  EXPECT_EQ(x.arena_bytes, y.arena_bytes);
}

// print -> parse -> print gives the same text, and the parsed program equals the original.
void expect_round_trip(const KernelProgram& p) {
  ASSERT_TRUE(kir::verify_program(p).is_ok()) << kir::verify_program(p).to_string();
  const std::string text = p.to_text();
  auto q = kir::parse_kernel_program(text, "roundtrip.kir");
  ASSERT_TRUE(q.has_value()) << q.status().to_string() << "\n" << text;
  EXPECT_EQ(q->to_text(), text);
  expect_same_program(p, *q);
}

// ---- the real pipeline ----

struct Pipeline {
  Graph graph;  // the legalized (primitive-level) graph
  KernelProgram program;
};

// parse -> bind -> legalize for cpu -> schedule -> fuse epilogues -> donations, as the CPU
// device compiles.
Pipeline compile_text(const std::string& text, const DimBindings& dims = {},
                      const std::vector<std::pair<int, int>>& donate = {}) {
  Pipeline r;
  auto g = parse_graph(text);
  EXPECT_TRUE(g.has_value()) << g.status().to_string();
  if (!g) return r;
  auto bound = bind_graph(*g, dims);
  EXPECT_TRUE(bound.has_value()) << bound.status().to_string();
  if (!bound) return r;
  auto d = get_device("cpu");
  EXPECT_TRUE(d.has_value());
  auto lr = legalize(*bound, **d, DispatchPolicy{});
  EXPECT_TRUE(lr.has_value() && lr->report.ok()) << (lr ? lr->report.to_text() : lr.status().to_string());
  if (!lr) return r;
  auto p = sched::schedule(lr->graph);
  EXPECT_TRUE(p.has_value()) << p.status().to_string();
  if (!p) return r;
  sched::fuse_native_epilogues(*p, [](const kir::NativeKernel& n) {
    return (n.op == Op::MatMul || n.op == Op::Dot || n.op == Op::Gemm) && n.output_types[0].dtype == DType::f32;
  });
  Status s = sched::apply_donations(*p, donate);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  r.graph = std::move(lr->graph);
  r.program = std::move(*p);
  return r;
}

struct Case {
  const char* name;
  const char* text;
  DimBindings dims;
};

const Case kCases[] = {
    {"elementwise_chain", R"(
graph @g(%x: f32[8, 16, 32], %b: f32[32]) -> (f32[8, 16, 32]) {
  %y = add(%x, %b)
  %z = tanh(%y)
  %w = mul(%z, %z)
  %s = constant dense<0.1> : f32[]
  %v = sub(%w, %s)
  return %v
})",
     {}},
    {"softmax_layer_norm", R"(
graph @g(%x: f32[batch, 12, 64], %s: f32[64], %b: f32[64]) -> (f32[batch, 12, 64]) {
  %n = layer_norm(%x, %s, %b) {axis = -1, epsilon = 1e-5}
  %p = softmax(%n) {axis = -1}
  return %p
})",
     {{"batch", 3}}},
    {"matmul_bias_gelu_epilogue", R"(
graph @g(%x: f32[5, 64]) -> (f32[5, 48]) {
  %w = param "fc.weight" : f32[64, 48]
  %b = param "fc.bias" : f32[48]
  %h = matmul(%x, %w)
  %hb = add(%h, %b)
  %a = gelu(%hb) {approximate = "tanh"}
  return %a
})",
     {}},
    {"gather_concat_pad", R"(
graph @g(%t: f32[10, 4], %i: i64[6], %y: f32[6, 3]) -> (f32[8, 8]) {
  %e = gather(%t, %i) {axis = 0}
  %c = concat(%e, %y) {axis = 1}
  %p = pad(%c) {pads = [1, 0, 1, 1], value = -0.5}
  return %p
})",
     {}},
    {"scatter_add_serial", R"(
graph @g(%base: f32[7, 3], %idx: i64[5], %upd: f32[5, 3]) -> (f32[7, 3]) {
  %s = scatter_add(%base, %idx, %upd) {axis = 0}
  return %s
})",
     {}},
    {"reductions_argmax", R"(
graph @g(%x: f32[6, 20]) -> (i64[6], f32[6], f32[20]) {
  %a = argmax(%x) {axis = 1, keepdims = 0}
  %m = reduce_max(%x) {axes = [1], keepdims = 0}
  %s = reduce_sum(%x) {axes = [0], keepdims = 0}
  %e = exp(%s)
  return %a, %m, %e
})",
     {}},
    {"random_iota", R"(
graph @g(%x: f32[4, 16]) -> (f32[4, 16], f32[4, 16], i64[4, 16]) {
  %r = random() {dtype = f32, shape = [4, 16], dist = "normal", seed = 1234, a = 0.25, b = 0.1}
  %u = random() {dtype = f32, shape = [4, 16], dist = "uniform", seed = 7, a = -1.0, b = 3.0}
  %y = add(%x, %r)
  %z = mul(%y, %u)
  %i = iota() {dtype = i64, shape = [4, 16], axis = 1}
  return %y, %z, %i
})",
     {}},
    {"dtypes_f16_bf16_bool_i64", R"(
graph @g(%h: f16[3, 8], %b: bf16[3, 8], %k: i64[3, 8], %m: bool[3, 8]) -> (f16[3, 8], bf16[3, 8], i64[3, 8], bool[3, 8]) {
  %hh = mul(%h, %h)
  %bc = cast(%h) {to = bf16}
  %bb = add(%b, %bc)
  %kc = constant dense<[1, -2, 3, -4, 5, -6, 7, -8]> : i64[8]
  %kk = mod(%k, %kc)
  %kf = mod(%k, %kc) {fmod = 1}
  %ks = add(%kk, %kf)
  %zero = constant dense<0> : i64[]
  %pos = greater(%k, %zero)
  %mm = and(%m, %pos)
  %sel = where(%mm, %h, %hh)
  return %sel, %bb, %ks, %mm
})",
     {}},
    {"gemm_attrs_batched_matmul", R"(
graph @g(%x: f32[6, 32], %q: f32[2, 3, 4, 8], %k: f32[2, 3, 8, 5]) -> (f32[6, 16], f32[2, 3, 4, 5]) {
  %w = param "w" : f32[16, 32]
  %c = param "c" : f32[16]
  %y = gemm(%x, %w, %c) {alpha = 0.5, beta = 1, trans_b = 1}
  %s = matmul(%q, %k)
  return %y, %s
})",
     {}},
    {"constants_and_reshape", R"(
graph @g(%x: f32[4, 6]) -> (f32[24], f32[4, 6]) {
  %c = constant dense<[[0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [-1.0, -2.0, -3.0, -4.0, -5.0, -6.0], [1e-30, 1e+30, 3.14159265, 0.0, -0.0, 7.0]]> : f32[4, 6]
  %y = add(%x, %c)
  %e = exp(%y)
  %r = reshape(%e) {shape = [24]}
  %s = reduce_sum(%e) {axes = [1], keepdims = 1}
  %d = div(%e, %s)
  return %r, %d
})",
     {}},
    // c64 values through loads, a complex constant (re in fval, im in fval2), f32 parts built
    // into c64, a c64 reduction and f32 results of c64 inputs
    {"complex_c64", R"(
graph @g(%re: f32[4, 6], %im: f32[6], %z: c64[4, 6]) -> (c64[4], f32[4, 6], f32[4, 6]) {
  %c = complex(%re, %im)
  %k = constant dense<(1.5, -0.25)> : c64[]
  %p = mul(%c, %k)
  %q = mul(%p, %z)
  %s = reduce_sum(%q) {axes = [1], keepdims = 0}
  %a = abs(%q)
  %g = angle(%q)
  return %s, %a, %g
})",
     {}},
    // a pad of a view of an input: loads guarded by the bounds test (the load's guard field)
    {"pad_of_a_view_guarded_loads", R"(
graph @g(%x: f32[6, 12]) -> (f32[14, 6]) {
  %r = reshape(%x) {shape = [12, 6]}
  %p = pad(%r) {pads = [1, 0, 1, 0], value = 0.25}
  return %p
})",
     {}},
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class KernelTextPipeline : public ::testing::TestWithParam<Case> {};

TEST_P(KernelTextPipeline, RoundTrips) {
  const Case& c = GetParam();
  Pipeline pl = compile_text(c.text, c.dims);
  ASSERT_FALSE(pl.program.steps.empty());
  expect_round_trip(pl.program);
}

INSTANTIATE_TEST_SUITE_P(Cases, KernelTextPipeline, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

TEST(KernelText, PipelineFeaturesAppearInTheText) {
  Pipeline mm = compile_text(kCases[2].text);
  const std::string t = mm.program.to_text();
  EXPECT_NE(t.find("native n0 matmul(b0, b1) -> (b3)"), std::string::npos) << t;
  EXPECT_NE(t.find(" epilogue k"), std::string::npos) << t;
  EXPECT_NE(t.find("buffer b1 weight f32[64, 48] \"fc.weight\""), std::string::npos) << t;

  Pipeline gm = compile_text(kCases[8].text);
  const std::string g = gm.program.to_text();
  EXPECT_NE(g.find("gemm(b"), std::string::npos) << g;
  EXPECT_NE(g.find("{alpha = 0.5, beta = 1, trans_b = 1}"), std::string::npos) << g;

  Pipeline sc = compile_text(kCases[4].text);
  const std::string s = sc.program.to_text();
  EXPECT_NE(s.find(" serial {"), std::string::npos) << s;
  EXPECT_NE(s.find("store_add a"), std::string::npos) << s;

  Pipeline rnd = compile_text(kCases[6].text);
  const std::string r = rnd.program.to_text();
  EXPECT_NE(r.find("random normal("), std::string::npos) << r;
  EXPECT_NE(r.find("seed 1234 params [0.25, 0.1]"), std::string::npos) << r;
  EXPECT_NE(r.find("random uniform("), std::string::npos) << r;

  Pipeline cx = compile_text(kCases[10].text);
  const std::string c = cx.program.to_text();
  EXPECT_NE(c.find("fconst 1.5 {fval2 = -0.25} : c64"), std::string::npos) << c;
  EXPECT_NE(c.find("binary complex("), std::string::npos) << c;
  EXPECT_NE(c.find("unary angle("), std::string::npos) << c;
  EXPECT_NE(c.find("reduce_sum"), std::string::npos) << c;

  Pipeline dt = compile_text(kCases[7].text);
  const std::string d = dt.program.to_text();
  EXPECT_NE(d.find("binary mod("), std::string::npos) << d;
  EXPECT_NE(d.find("{ival = 1}"), std::string::npos) << d;  // floored (Python) mod
  EXPECT_NE(d.find(": bf16"), std::string::npos) << d;
  EXPECT_NE(d.find(": bool"), std::string::npos) << d;
}

TEST(KernelText, DonationsRoundTrip) {
  Pipeline pl = compile_text(R"(
graph @step(%p: f32[16, 8], %g: f32[16, 8]) -> (f32[16, 8]) {
  %lr = constant dense<0.01> : f32[]
  %d = mul(%g, %lr)
  %n = sub(%p, %d)
  return %n
})",
                             {}, {{0, 0}});
  ASSERT_EQ(pl.program.donations.size(), 1u);
  EXPECT_NE(pl.program.to_text().find("donate input 0 -> output 0"), std::string::npos);
  expect_round_trip(pl.program);
}

TEST(KernelText, ArenaAndViewsRoundTrip) {
  Pipeline pl = compile_text(R"(
graph @g(%x: f32[64, 64, 8]) -> (f32[64], f32[8, 64]) {
  %a = reduce_sum(%x) {axes = [1], keepdims = 0}
  %b = exp(%a)
  %r = reshape(%b) {shape = [8, 64]}
  %c = reduce_max(%b) {axes = [1], keepdims = 0}
  %d = transpose(%r) {perm = [0, 1]}
  %m = mul(%d, %d)
  return %c, %m
})");
  EXPECT_GT(pl.program.arena_bytes, 0u);
  expect_round_trip(pl.program);
}

// Every Expr field, whatever the kind, and floats that need all 17 digits.
TEST(KernelText, HandBuiltProgramWithEveryFieldRoundTrips) {
  KernelProgram p;
  kir::Buffer in;
  in.dtype = DType::f32;
  in.sizes = {4, 3};
  in.kind = kir::BufferKind::input;
  in.io_index = 0;
  in.name = "x \"quoted\"\n";
  kir::Buffer c;
  c.dtype = DType::f64;
  c.sizes = {3};
  c.kind = kir::BufferKind::constant;
  c.data = Tensor::from_vector<double>(DType::f64, {3}, std::vector<double>{0.1, 1.0 / 3.0, -5e-324});
  kir::Buffer out;
  out.dtype = DType::f32;
  out.sizes = {4, 3};
  out.kind = kir::BufferKind::output;
  out.io_index = 0;
  kir::Buffer tmp;
  tmp.dtype = DType::f32;
  tmp.sizes = {4, 3};
  tmp.kind = kir::BufferKind::intermediate;
  tmp.arena_offset = 64;
  tmp.name = "t";
  kir::Buffer view = tmp;
  view.sizes = {12};
  view.arena_offset = -1;
  view.alias_of = 3;
  view.name.clear();
  p.buffers = {in, c, out, tmp, view};
  p.inputs = {0};
  p.outputs = {2};
  p.arena_bytes = 128;

  kir::GeneratedKernel k;
  k.name = "weird name";
  k.loops = {{4}, {3}, {5}};
  k.domain_rank = 2;
  k.args = {0, 1, 2};
  k.origins = {3, 1};
  auto add = [&](kir::Expr e) {
    k.exprs.push_back(e);
    return static_cast<int>(k.exprs.size()) - 1;
  };
  kir::Expr e{kir::ExprKind::loop_var, DType::i64};
  e.loop = 0;
  int i0 = add(e);
  e.loop = 1;
  int i1 = add(e);
  kir::Expr three{kir::ExprKind::iconst, DType::i64};
  three.ival = 3;
  int c3 = add(three);
  kir::Expr mul{kir::ExprKind::binary, DType::i64};
  mul.op = Op::Mul;
  mul.a = i0;
  mul.b = c3;
  int m = add(mul);
  kir::Expr sum = mul;
  sum.op = Op::Add;
  sum.a = m;
  sum.b = i1;
  int idx = add(sum);
  kir::Expr ld{kir::ExprKind::load, DType::f32};
  ld.buffer = 0;
  ld.a = idx;
  int x = add(ld);
  kir::Expr fc{kir::ExprKind::fconst, DType::f32};
  fc.fval = 0.1 + 0.2;  // 0.30000000000000004
  fc.fval2 = -0.0;      // not part of fconst's form: printed as an extra field
  int f = add(fc);
  kir::Expr un{kir::ExprKind::unary, DType::f32};
  un.op = Op::Exp;
  un.a = x;
  un.ival2 = -9223372036854775807 - 1;
  int ex = add(un);
  kir::Expr r{kir::ExprKind::random, DType::f32};
  r.op = Op::Mul;
  r.a = idx;
  r.ival = -42;
  r.fval = std::numeric_limits<double>::infinity();
  r.fval2 = 1e-300;
  int rn = add(r);
  kir::Expr red{kir::ExprKind::reduce, DType::f32};
  red.op = Op::ArgMax;
  red.a = ex;
  red.loops = {2};
  red.loop = 2;
  int rd = add(red);
  kir::Expr cast{kir::ExprKind::cast, DType::f16};
  cast.a = rd;
  cast.b = rn;
  int cs = add(cast);
  kir::Expr sel{kir::ExprKind::select, DType::f32};
  sel.a = cs;
  sel.b = f;
  sel.c = ex;
  sel.buffer = 1;
  int sl = add(sel);
  kir::Expr dv{kir::ExprKind::idiv, DType::i64};
  dv.a = idx;
  dv.b = c3;
  dv.fval = std::nan("");
  int d = add(dv);
  kir::Expr md = dv;
  md.kind = kir::ExprKind::imod;
  md.fval = 0;
  md.op = Op::Where;
  int mo = add(md);
  kir::Expr cl{kir::ExprKind::clamp, DType::i64};
  cl.a = mo;
  cl.ival = -1;
  cl.ival2 = 2;
  cl.c = d;
  int cc = add(cl);
  k.stores.push_back({2, idx, sl, false});
  k.stores.push_back({2, cc, x, true});
  k.serial = true;
  p.generated.push_back(k);

  kir::GeneratedKernel unused;  // a kernel no step runs still prints and parses
  unused.name = "k1";
  unused.loops = {{12}};
  unused.domain_rank = 1;
  unused.args = {4};
  kir::Expr v{kir::ExprKind::loop_var, DType::i64};
  v.loop = 0;
  unused.exprs.push_back(v);
  kir::Expr z{kir::ExprKind::fconst, DType::f32};
  unused.exprs.push_back(z);
  unused.stores.push_back({0, 0, 1, false});
  p.generated.push_back(unused);

  kir::NativeKernel n;
  n.name = "n0";
  n.op = Op::Softmax;
  n.attrs.set("axis", int64_t{-1});
  n.inputs = {0};
  n.outputs = {3};
  n.input_types = {TensorType{DType::f32, {Dim(4), Dim(3)}}};
  n.output_types = {TensorType{DType::f32, {Dim(4), Dim::symbol("rows")}}};
  n.how = "hand\twritten";
  n.origins = {0};
  p.natives.push_back(n);
  p.steps = {{true, 0}, {false, 0}};
  p.donations = {{0, 0}};
  expect_round_trip(p);
  const std::string t = p.to_text();
  EXPECT_NE(t.find("fconst 0.30000000000000004 {fval2 = -0.0} : f32"), std::string::npos) << t;
  EXPECT_NE(t.find("generated k0 name \"weird name\""), std::string::npos) << t;
  EXPECT_NE(t.find("dense<[0.1, 0.3333333333333333, -5e-324]>"), std::string::npos) << t;
  EXPECT_NE(t.find("buffer b4 temp f32[12] view b3"), std::string::npos) << t;
}

// The example in docs/ir.md's kernel-level section is exactly what the printer writes.
TEST(KernelText, DocsExampleRoundTrips) {
  std::ifstream f(std::string(RLX_SOURCE_DIR) + "/docs/ir.md");
  ASSERT_TRUE(f.good());
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string doc = ss.str();
  size_t section = doc.find("## The kernel level");
  ASSERT_NE(section, std::string::npos);
  size_t open = doc.find("```\nkernels {", section);
  ASSERT_NE(open, std::string::npos);
  size_t close = doc.find("```", open + 3);
  ASSERT_NE(close, std::string::npos);
  const std::string example = doc.substr(open + 4, close - open - 4);
  auto p = kir::parse_kernel_program(example, "docs/ir.md");
  ASSERT_TRUE(p.has_value()) << p.status().to_string();
  EXPECT_EQ(p->to_text(), example);
}

// ---- a parsed program runs ----

TEST(KernelText, ParsedProgramRunsOnTheCpu) {
  Pipeline pl = compile_text(R"(
graph @g(%x: f32[5, 64]) -> (f32[5, 48], f32[5, 48]) {
  %w = param "fc.weight" : f32[64, 48]
  %b = param "fc.bias" : f32[48]
  %h = matmul(%x, %w)
  %hb = add(%h, %b)
  %a = gelu(%hb) {approximate = "tanh"}
  %p = softmax(%a) {axis = -1}
  %c = constant dense<[0.5, -0.25, 2.0]> : f32[3]
  %cs = reduce_sum(%c) {axes = [0], keepdims = 0}
  %q = mul(%p, %cs)
  return %a, %q
})");
  ASSERT_FALSE(pl.program.steps.empty());
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-1, 1);
  auto random_tensor = [&](Sizes s) {
    std::vector<double> v(static_cast<size_t>(numel(s)));
    for (double& x : v) x = u(rng);
    return Tensor::from_f64(DType::f32, s, v);
  };
  pl.graph.weights["fc.weight"] = random_tensor({64, 48});
  pl.graph.weights["fc.bias"] = random_tensor({48});
  Tensor x = random_tensor({5, 64});

  auto parsed = kir::parse_kernel_program(pl.program.to_text());
  ASSERT_TRUE(parsed.has_value()) << parsed.status().to_string();
  auto original = cpu::make_cpu_executable(pl.program, pl.graph);
  ASSERT_TRUE(original.has_value()) << original.status().to_string();
  auto from_text = cpu::make_cpu_executable(*parsed, pl.graph);
  ASSERT_TRUE(from_text.has_value()) << from_text.status().to_string();
  std::vector<Tensor> in{x};
  auto want = (*original)->run(in);
  auto got = (*from_text)->run(in);
  ASSERT_TRUE(want.has_value()) << want.status().to_string();
  ASSERT_TRUE(got.has_value()) << got.status().to_string();
  ASSERT_EQ(want->size(), 2u);
  ASSERT_EQ(got->size(), 2u);
  for (size_t i = 0; i < want->size(); ++i) {
    ASSERT_EQ((*want)[i].nbytes(), (*got)[i].nbytes());
    // the same program compiled the same way: bitwise the same results
    EXPECT_EQ(std::memcmp((*want)[i].bytes(), (*got)[i].bytes(), (*want)[i].nbytes()), 0) << "output " << i;
  }
  // and the results are not trivially zero
  double norm = 0;
  for (double v : (*got)[0].to_f64()) norm += std::fabs(v);
  EXPECT_GT(norm, 0.0);
}

// ---- malformed inputs ----

// A small valid program, edited by each error case.
const char* kValid = R"(kernels {
  buffer b0 input 0 f32[4] "x"
  buffer b1 output 0 f32[4]
  inputs (b0)
  outputs (b1)
  generated k0 domain [4] args (a0 = b0, a1 = b1) origins [0] {
    e0 = var i0 : i64
    e1 = load a0[e0] : f32
    e2 = unary exp(e1) : f32
    store a1[e0] = e2
  }
  step k0
  arena 0 bytes
}
)";

TEST(KernelText, ValidSmallProgramParses) {
  auto p = kir::parse_kernel_program(kValid);
  ASSERT_TRUE(p.has_value()) << p.status().to_string();
  EXPECT_EQ(p->to_text(), kValid);
}

struct BadCase {
  const char* text;
  const char* position;  // "<line>:<col>: "
  const char* phrase;
};

std::string replace_once(std::string s, const std::string& from, const std::string& to) {
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

TEST(KernelText, MalformedInputsFailWithPositionAndPhrase) {
  const std::string v = kValid;
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"", "1:1: ", "expected 'kernels' but found end of input"},
      {"graph {", "1:1: ", "expected 'kernels' but found 'graph'"},
      {replace_once(v, "buffer b1 output", "buffer b2 output"), "3:10: ", "expected b1 (buffers are numbered in order)"},
      {replace_once(v, "b1 output 0", "b1 outpt 0"), "3:13: ", "expected a buffer kind"},
      {replace_once(v, "f32[4] \"x\"", "f33[4] \"x\""), "2:21: ", "unknown dtype 'f33'"},
      {replace_once(v, "f32[4] \"x\"", "f32[n] \"x\""), "2:21: ", "is not bound to a size"},
      {replace_once(v, "outputs (b1)", "outputs (b7)"), "5:12: ", "use of undefined buffer b7"},
      {replace_once(v, "e2 = unary exp(e1)", "e2 = unary expo(e1)"), "9:16: ", "unknown op 'expo'"},
      {replace_once(v, "e2 = unary exp(e1)", "e2 = unary exp(e5)"), "9:20: ", "use of undefined expression e5"},
      {replace_once(v, "e1 = load a0[e0]", "e1 = load a3[e0]"), "8:15: ", "use of undefined argument a3"},
      {replace_once(v, "e0 = var i0", "e0 = var i1"), "7:14: ", "use of undefined loop i1"},
      {replace_once(v, "e2 = unary", "e3 = unary"), "9:5: ", "expected e2 (expressions are numbered in order)"},
      {replace_once(v, "e2 = unary", "e2 = urnary"), "9:10: ", "expected an expression kind"},
      {replace_once(v, " : f32\n    store", " f32\n    store"), "9:24: ", "expected ':' before the expression's dtype"},
      {replace_once(v, "step k0", "step k4"), "12:8: ", "use of undefined generated kernel k4"},
      {replace_once(v, "step k0", "step x0"), "12:8: ", "expected a kernel such as n0 or k0"},
      {replace_once(v, "arena 0 bytes", "arena 0 bites"), "13:11: ", "expected 'bytes' after the arena size"},
      {replace_once(v, "arena 0 bytes", "arena -8 bytes"), "13:9: ", "negative arena size -8"},
      {replace_once(v, "  inputs (b0)\n", "  step k0\n  inputs (b0)\n"), "4:8: ", "use of undefined generated kernel k0"},
      {replace_once(v, "  arena 0 bytes\n", "  arena 0 bytes\n  arena 0 bytes\n"), "14:3: ", "'arena' is given twice"},
      {replace_once(v, "  outputs (b1)\n", "  outputs (b1)\n  buffer b2 temp f32[1]\n"), "6:3: ",
       "'buffer' must come before 'outputs'"},
      {replace_once(v, "e2 = unary exp(e1) : f32", "e2 = unary exp(e1) {op = add} : f32"), "9:25: ",
       "field 'op' is part of the unary form"},
      {replace_once(v, "e2 = unary exp(e1) : f32", "e2 = unary exp(e1) {ival = 1, ival = 2} : f32"), "9:35: ",
       "field 'ival' is given twice"},
      {replace_once(v, "e2 = unary exp(e1) : f32", "e2 = unary exp(e1) {colour = 1} : f32"), "9:25: ",
       "unknown expression field 'colour'"},
      {replace_once(replace_once(v, "generated k0", "generated k1"), "step k0", "step k1"), "6:13: ",
       "kernel k0 is missing"},
      {replace_once(v, "  step k0\n", "  42\n"), "12:3: ", "expected a statement"},
      {replace_once(v, "step k0\n", "step k0\n}\n"), "14:3: ", "unexpected 'arena' after the end of the kernel program"},
      {replace_once(v, "arena 0 bytes\n}\n", "arena 0 bytes\n}\nkernels {}\n"), "15:1: ",
       "after the end of the kernel program"},
      {replace_once(v, "\"x\"", "\"x"), "2:28: ", "unterminated string"},
      {replace_once(v, "buffer b0 input 0 f32[4] \"x\"", "buffer b0 input 0 f32[4] \"x\" dense<[1.0, 2.0]>"), "2:32: ",
       "dense literal has shape [2] but its type is f32[4]"},
      {replace_once(v, "f32[4] \"x\"", "f32[4611686018427387904, 4] \"x\""), "2:21: ", "is too large"},
      {replace_once(v, "generated k0 domain", "generated k999999999 domain"), "6:13: ", "is out of range"},
      {replace_once(v, "  arena 0 bytes\n", "  donate input 0 output 0\n  arena 0 bytes\n"), "13:18: ",
       "expected '->' after the input index"},
      {replace_once(v, "generated k0 domain [4] args", "native n0 matmul(b0) -> (b1) {axis = 1} : () -> ()\n  generated k0 domain [4] args"),
       "6:33: ", "matmul has no attribute 'axis'"},
  };
  int n = 0;
  for (const auto& [text, position, phrase] : cases) {
    auto p = kir::parse_kernel_program(text, "bad.kir");
    ++n;
    ASSERT_FALSE(p.has_value()) << "case " << n << " parsed:\n" << text;
    const std::string msg = p.status().message();
    EXPECT_EQ(p.status().code(), ErrorCode::parse_error) << "case " << n << ": " << msg;
    EXPECT_EQ(msg.rfind("bad.kir:" + position, 0), 0u) << "case " << n << ": " << msg;
    EXPECT_NE(msg.find(phrase), std::string::npos) << "case " << n << ": " << msg;
  }
  EXPECT_GE(n, 15);
}

TEST(KernelText, VerifierErrorsAreReported) {
  // parses, but the arena is too small for the temp buffer
  auto p = kir::parse_kernel_program(R"(kernels {
  buffer b0 input 0 f32[4]
  buffer b1 temp f32[4] at 0
  buffer b2 output 0 f32[4]
  generated k0 domain [4] args (a0 = b0, a1 = b1) {
    e0 = var i0 : i64
    e1 = load a0[e0] : f32
    store a1[e0] = e1
  }
  step k0
  arena 8 bytes
})",
                                     "small.kir");
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.status().code(), ErrorCode::verify_error);
  EXPECT_NE(p.status().message().find("small.kir: "), std::string::npos) << p.status().message();
  EXPECT_NE(p.status().message().find("outside the arena"), std::string::npos) << p.status().message();

  // a load's guard is a boolean expression
  auto guard = kir::parse_kernel_program(R"(kernels {
  buffer b0 input 0 f32[4]
  buffer b1 output 0 f32[4]
  generated k0 domain [4] args (a0 = b0, a1 = b1) {
    e0 = var i0 : i64
    e1 = load a0[e0] {c = e0} : f32
    store a1[e0] = e1
  }
  step k0
  arena 0 bytes
})");
  ASSERT_FALSE(guard.has_value());
  EXPECT_NE(guard.status().message().find("non-boolean guard"), std::string::npos) << guard.status().message();

  // a view may name a later buffer, so views can form a cycle: a verifier error, not a hang
  auto cyc = kir::parse_kernel_program(R"(kernels {
  buffer b0 temp f32[4] view b1
  buffer b1 temp f32[4] view b0
  arena 0 bytes
})");
  ASSERT_FALSE(cyc.has_value());
  EXPECT_EQ(cyc.status().code(), ErrorCode::verify_error);
  EXPECT_NE(cyc.status().message().find("cycle of views"), std::string::npos) << cyc.status().message();
  auto far = kir::parse_kernel_program(R"(kernels {
  buffer b0 temp f32[4] view b5
})");
  ASSERT_FALSE(far.has_value());
  EXPECT_EQ(far.status().message(), "<text>:2:30: use of undefined buffer b5 as a view");
}

// Truncations and byte flips of a real program's text never crash the parser.
TEST(KernelText, MutatedTextNeverCrashes) {
  Pipeline pl = compile_text(kCases[2].text);
  const std::string text = pl.program.to_text();
  for (size_t cut = 0; cut < text.size(); cut += 7) {
    auto p = kir::parse_kernel_program(std::string_view(text).substr(0, cut));
    EXPECT_FALSE(p.has_value());
  }
  std::mt19937 rng(11);
  const std::string alphabet = "()[]{}<>,:=-0123456789abeikn \"\n#.";
  for (int round = 0; round < 400; ++round) {
    std::string t = text;
    for (int k = 0; k < 3; ++k) t[rng() % t.size()] = alphabet[rng() % alphabet.size()];
    auto p = kir::parse_kernel_program(t);
    if (p) (void)p->to_text();
  }
}

}  // namespace
}  // namespace rlx
