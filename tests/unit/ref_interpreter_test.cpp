// Tests of the reference interpreter (src/backends/ref): every primitive against hand-computed
// values, the integer/float edge cases its contract documents, and its errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "backends/ref/interpreter.h"
#include "backends/ref/random.h"
#include "rlx/graph.h"
#include "rlx/op_builder.h"

namespace rlx {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor T(DType dt, Sizes s, std::vector<double> v) { return Tensor::from_f64(dt, std::move(s), v); }

template <class C>
Tensor raw(DType dt, Sizes s, std::vector<C> v) {
  Tensor t = Tensor::zeros(dt, std::move(s));
  for (size_t i = 0; i < v.size(); ++i) t.data<C>()[i] = v[i];
  return t;
}

using BuildFn = std::function<std::vector<ValueId>(OpBuilder&, const std::vector<ValueId>&)>;

// Builds a graph whose inputs have the types of `ins`, emits nodes with `f`, and runs it.
Expected<std::vector<Tensor>> run(const std::vector<Tensor>& ins, const BuildFn& f, Graph* keep = nullptr) {
  Graph local;
  Graph& g = keep ? *keep : local;
  std::vector<ValueId> ids;
  for (size_t i = 0; i < ins.size(); ++i) ids.push_back(g.add_input(cat("x", i), ins[i].type()));
  GraphBuilder b(g);
  OpBuilder o(b);
  g.outputs = f(o, ids);
  if (!o.ok()) return o.status();
  return ref::interpret(g, ins);
}

// Runs a one-output graph and returns that output (failing the test on error).
Tensor run1(const std::vector<Tensor>& ins, const std::function<ValueId(OpBuilder&, const std::vector<ValueId>&)>& f) {
  auto r = run(ins, [&](OpBuilder& o, const std::vector<ValueId>& x) { return std::vector<ValueId>{f(o, x)}; });
  EXPECT_TRUE(r.has_value()) << r.status().to_string();
  if (!r) return Tensor();
  EXPECT_EQ(r->size(), 1u);
  return (*r)[0];
}

void expect_values(const Tensor& t, const std::vector<double>& want, double tol = 0.0) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size())) << t.to_string();
  for (size_t i = 0; i < want.size(); ++i) {
    const double got = t.get_f64(static_cast<int64_t>(i));
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got)) << "element " << i << " of " << t.to_string();
    } else if (tol == 0.0) {
      EXPECT_EQ(got, want[i]) << "element " << i << " of " << t.to_string();
    } else {
      EXPECT_NEAR(got, want[i], tol * std::max(1.0, std::fabs(want[i]))) << "element " << i << " of " << t.to_string();
    }
  }
}

void expect_sizes(const Tensor& t, Sizes s) { EXPECT_EQ(t.sizes(), s) << t.to_string(); }

// ---------------------------------------------------------------- elementwise

TEST(RefInterpreterElementwise, UnaryFloat) {
  std::vector<double> xs = {0.25, 0.5, 1.0, 2.0, 3.5};
  Tensor x = T(DType::f64, {5}, xs);
  struct Case {
    Op op;
    double (*f)(double);
  };
  const Case cases[] = {
      {Op::Exp, [](double v) { return std::exp(v); }},
      {Op::Log, [](double v) { return std::log(v); }},
      {Op::Sqrt, [](double v) { return std::sqrt(v); }},
      {Op::Rsqrt, [](double v) { return 1.0 / std::sqrt(v); }},
      {Op::Reciprocal, [](double v) { return 1.0 / v; }},
      {Op::Tanh, [](double v) { return std::tanh(v); }},
      {Op::Sigmoid, [](double v) { return 1.0 / (1.0 + std::exp(-v)); }},
      {Op::Erf, [](double v) { return std::erf(v); }},
      {Op::Sin, [](double v) { return std::sin(v); }},
      {Op::Cos, [](double v) { return std::cos(v); }},
      {Op::Neg, [](double v) { return -v; }},
  };
  for (const Case& c : cases) {
    Tensor out = run1({x}, [&](OpBuilder& o, auto& in) { return o.unary(c.op, in[0]); });
    std::vector<double> want;
    for (double v : xs) want.push_back(c.f(v));
    SCOPED_TRACE(std::string(op_name(c.op)));
    expect_values(out, want);
  }
}

TEST(RefInterpreterElementwise, RoundingOps) {
  Tensor x = T(DType::f32, {8}, {0.5, 1.5, 2.5, -0.5, -1.5, 2.4, 2.6, -2.6});
  expect_values(run1({x}, [](OpBuilder& o, auto& in) { return o.unary(Op::Round, in[0]); }),
                {0, 2, 2, -0.0, -2, 2, 3, -3});
  expect_values(run1({x}, [](OpBuilder& o, auto& in) { return o.unary(Op::Floor, in[0]); }),
                {0, 1, 2, -1, -2, 2, 2, -3});
  expect_values(run1({x}, [](OpBuilder& o, auto& in) { return o.unary(Op::Ceil, in[0]); }),
                {1, 2, 3, -0.0, -1, 3, 3, -2});
}

TEST(RefInterpreterElementwise, SignAbsNegIntegersAndNaN) {
  Tensor f = T(DType::f32, {5}, {-2, 0, 3, kNaN, -0.0});
  expect_values(run1({f}, [](OpBuilder& o, auto& in) { return o.unary(Op::Sign, in[0]); }), {-1, 0, 1, kNaN, 0});
  Tensor i = raw<int32_t>(DType::i32, {4}, {-5, 0, 7, std::numeric_limits<int32_t>::min()});
  expect_values(run1({i}, [](OpBuilder& o, auto& in) { return o.unary(Op::Sign, in[0]); }), {-1, 0, 1, -1});
  // abs/neg of INT_MIN wrap to INT_MIN.
  expect_values(run1({i}, [](OpBuilder& o, auto& in) { return o.abs(in[0]); }), {5, 0, 7, -2147483648.0});
  expect_values(run1({i}, [](OpBuilder& o, auto& in) { return o.neg(in[0]); }), {5, 0, -7, -2147483648.0});
  Tensor u = T(DType::u8, {3}, {0, 1, 200});
  expect_values(run1({u}, [](OpBuilder& o, auto& in) { return o.neg(in[0]); }), {0, 255, 56});
  expect_values(run1({u}, [](OpBuilder& o, auto& in) { return o.unary(Op::Sign, in[0]); }), {0, 1, 1});
}

TEST(RefInterpreterElementwise, IsNanIsInf) {
  Tensor x = T(DType::f32, {4}, {1, kNaN, kInf, -kInf});
  Tensor n = run1({x}, [](OpBuilder& o, auto& in) { return o.unary(Op::IsNan, in[0]); });
  EXPECT_EQ(n.dtype(), DType::boolean);
  expect_values(n, {0, 1, 0, 0});
  expect_values(run1({x}, [](OpBuilder& o, auto& in) { return o.unary(Op::IsInf, in[0]); }), {0, 0, 1, 1});
  expect_values(run1({x}, [](OpBuilder& o, auto& in) {
                  return o.op(Op::IsInf, {in[0]}, Attrs{{"detect_negative", int64_t{0}}});
                }),
                {0, 0, 1, 0});
  expect_values(run1({x}, [](OpBuilder& o, auto& in) {
                  return o.op(Op::IsInf, {in[0]}, Attrs{{"detect_positive", int64_t{0}}});
                }),
                {0, 0, 0, 1});
}

TEST(RefInterpreterElementwise, BinaryBroadcasting) {
  Tensor a = T(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = T(DType::f32, {3}, {10, 20, 30});
  expect_values(run1({a, b}, [](OpBuilder& o, auto& in) { return o.add(in[0], in[1]); }),
                {11, 22, 33, 14, 25, 36});
  Tensor c = T(DType::f32, {2, 1}, {1, 2});
  Tensor d = T(DType::f32, {1, 3}, {1, 10, 100});
  Tensor cd = run1({c, d}, [](OpBuilder& o, auto& in) { return o.mul(in[0], in[1]); });
  expect_sizes(cd, {2, 3});
  expect_values(cd, {1, 10, 100, 2, 20, 200});
  Tensor s = T(DType::f32, {}, {2});
  expect_values(run1({a, s}, [](OpBuilder& o, auto& in) { return o.sub(in[1], in[0]); }), {1, 0, -1, -2, -3, -4});
  // Rank-3 against rank-1 and a size-1 middle axis.
  Tensor e = T(DType::f64, {2, 1, 2}, {1, 2, 3, 4});
  Tensor f = T(DType::f64, {3, 1}, {0, 10, 20});
  Tensor ef = run1({e, f}, [](OpBuilder& o, auto& in) { return o.add(in[0], in[1]); });
  expect_sizes(ef, {2, 3, 2});
  expect_values(ef, {1, 2, 11, 12, 21, 22, 3, 4, 13, 14, 23, 24});
}

TEST(RefInterpreterElementwise, IntegerDivModEdgeCases) {
  Tensor a = raw<int32_t>(DType::i32, {6}, {7, -7, 7, -7, 5, std::numeric_limits<int32_t>::min()});
  Tensor b = raw<int32_t>(DType::i32, {6}, {2, 2, -2, -2, 0, -1});
  expect_values(run1({a, b}, [](OpBuilder& o, auto& in) { return o.div(in[0], in[1]); }),
                {3, -3, -3, 3, 0, -2147483648.0});
  // fmod = 0: Python %, sign of the divisor.
  expect_values(run1({a, b}, [](OpBuilder& o, auto& in) { return o.binary(Op::Mod, in[0], in[1]); }),
                {1, 1, -1, -1, 0, 0});
  // fmod = 1: C remainder, sign of the dividend.
  expect_values(run1({a, b}, [](OpBuilder& o, auto& in) {
                  return o.op(Op::Mod, {in[0], in[1]}, Attrs{{"fmod", int64_t{1}}});
                }),
                {1, -1, 1, -1, 0, 0});
  // i64 INT64_MIN / -1 and % -1 must not trap.
  const int64_t mn = std::numeric_limits<int64_t>::min();
  Tensor c = raw<int64_t>(DType::i64, {2}, {mn, mn});
  Tensor d = raw<int64_t>(DType::i64, {2}, {-1, 0});
  Tensor q = run1({c, d}, [](OpBuilder& o, auto& in) { return o.div(in[0], in[1]); });
  EXPECT_EQ(q.data<int64_t>()[0], mn);
  EXPECT_EQ(q.data<int64_t>()[1], 0);
  Tensor r = run1({c, d}, [](OpBuilder& o, auto& in) { return o.binary(Op::Mod, in[0], in[1]); });
  EXPECT_EQ(r.data<int64_t>()[0], 0);
  // Unsigned division.
  Tensor u = T(DType::u8, {3}, {200, 7, 9});
  Tensor v = T(DType::u8, {3}, {7, 0, 4});
  expect_values(run1({u, v}, [](OpBuilder& o, auto& in) { return o.div(in[0], in[1]); }), {28, 0, 2});
  expect_values(run1({u, v}, [](OpBuilder& o, auto& in) { return o.binary(Op::Mod, in[0], in[1]); }), {4, 0, 1});
}

TEST(RefInterpreterElementwise, IntegerOverflowWraps) {
  const int32_t mx = std::numeric_limits<int32_t>::max();
  Tensor a = raw<int32_t>(DType::i32, {2}, {mx, -mx});
  Tensor b = raw<int32_t>(DType::i32, {2}, {1, 3});
  Tensor s = run1({a, b}, [](OpBuilder& o, auto& in) { return o.add(in[0], in[1]); });
  EXPECT_EQ(s.data<int32_t>()[0], std::numeric_limits<int32_t>::min());
  Tensor m = run1({a, b}, [](OpBuilder& o, auto& in) { return o.mul(in[0], in[1]); });
  EXPECT_EQ(m.data<int32_t>()[1], static_cast<int32_t>(static_cast<uint32_t>(-mx) * 3u));
  Tensor u = T(DType::u8, {2}, {250, 3});
  Tensor v = T(DType::u8, {2}, {10, 5});
  expect_values(run1({u, v}, [](OpBuilder& o, auto& in) { return o.add(in[0], in[1]); }), {4, 8});
  expect_values(run1({u, v}, [](OpBuilder& o, auto& in) { return o.sub(in[0], in[1]); }), {240, 254});
  Tensor i8a = T(DType::i8, {1}, {100});
  Tensor i8b = T(DType::i8, {1}, {3});
  expect_values(run1({i8a, i8b}, [](OpBuilder& o, auto& in) { return o.mul(in[0], in[1]); }), {44});
  const int64_t big = std::numeric_limits<int64_t>::max();
  Tensor c = raw<int64_t>(DType::i64, {1}, {big});
  Tensor d = raw<int64_t>(DType::i64, {1}, {1});
  Tensor e = run1({c, d}, [](OpBuilder& o, auto& in) { return o.add(in[0], in[1]); });
  EXPECT_EQ(e.data<int64_t>()[0], std::numeric_limits<int64_t>::min());
}

TEST(RefInterpreterElementwise, IntegerPow) {
  Tensor a = raw<int32_t>(DType::i32, {7}, {2, 3, 2, -1, 1, -1, 2});
  Tensor b = raw<int32_t>(DType::i32, {7}, {10, 0, -1, -3, -5, -2, 31});
  expect_values(run1({a, b}, [](OpBuilder& o, auto& in) { return o.pow(in[0], in[1]); }),
                {1024, 1, 0, -1, 1, 1, -2147483648.0});
  Tensor f = T(DType::f32, {3}, {2, 4, -8});
  Tensor g = T(DType::f32, {3}, {0.5, -1, 3});
  expect_values(run1({f, g}, [](OpBuilder& o, auto& in) { return o.pow(in[0], in[1]); }),
                {std::sqrt(2.0), 0.25, -512}, 1e-6);
}

TEST(RefInterpreterElementwise, FloatDivAndModFollowIEEEAndPython) {
  Tensor a = T(DType::f32, {3}, {1, -1, 0});
  Tensor z = T(DType::f32, {3}, {0, 0, 0});
  expect_values(run1({a, z}, [](OpBuilder& o, auto& in) { return o.div(in[0], in[1]); }), {kInf, -kInf, kNaN});
  Tensor x = T(DType::f64, {5}, {-7, 7, 7.5, -0.0, 6});
  Tensor y = T(DType::f64, {5}, {2, -2, 2, 5, -3});
  Tensor py = run1({x, y}, [](OpBuilder& o, auto& in) { return o.binary(Op::Mod, in[0], in[1]); });
  expect_values(py, {1, -1, 1.5, 0, -0.0});
  EXPECT_TRUE(std::signbit(py.get_f64(4)));  // zero remainder takes the divisor's sign
  EXPECT_FALSE(std::signbit(py.get_f64(3)));
  expect_values(run1({x, y}, [](OpBuilder& o, auto& in) {
                  return o.op(Op::Mod, {in[0], in[1]}, Attrs{{"fmod", int64_t{1}}});
                }),
                {-1, 1, 1.5, -0.0, 0});
}

TEST(RefInterpreterElementwise, MaxMinPropagateNaN) {
  Tensor a = T(DType::f32, {4}, {1, kNaN, 3, kNaN});
  Tensor b = T(DType::f32, {4}, {2, 1, kNaN, kNaN});
  expect_values(run1({a, b}, [](OpBuilder& o, auto& in) { return o.max(in[0], in[1]); }), {2, kNaN, kNaN, kNaN});
  expect_values(run1({a, b}, [](OpBuilder& o, auto& in) { return o.min(in[0], in[1]); }), {1, kNaN, kNaN, kNaN});
  Tensor i = raw<int64_t>(DType::i64, {2}, {-5, 9});
  Tensor j = raw<int64_t>(DType::i64, {2}, {3, -9});
  expect_values(run1({i, j}, [](OpBuilder& o, auto& in) { return o.max(in[0], in[1]); }), {3, 9});
  Tensor u = T(DType::u8, {2}, {200, 3});
  Tensor v = T(DType::u8, {2}, {100, 4});
  expect_values(run1({u, v}, [](OpBuilder& o, auto& in) { return o.min(in[0], in[1]); }), {100, 3});
}

TEST(RefInterpreterElementwise, CompareAndLogical) {
  Tensor a = T(DType::f32, {4}, {1, 2, kNaN, 3});
  Tensor b = T(DType::f32, {4}, {1, 3, kNaN, 2});
  const std::pair<Op, std::vector<double>> cases[] = {
      {Op::Equal, {1, 0, 0, 0}},   {Op::NotEqual, {0, 1, 1, 1}}, {Op::Less, {0, 1, 0, 0}},
      {Op::LessEqual, {1, 1, 0, 0}}, {Op::Greater, {0, 0, 0, 1}}, {Op::GreaterEqual, {1, 0, 0, 1}},
  };
  for (const auto& [op, want] : cases) {
    Tensor r = run1({a, b}, [&](OpBuilder& o, auto& in) { return o.binary(op, in[0], in[1]); });
    EXPECT_EQ(r.dtype(), DType::boolean);
    SCOPED_TRACE(std::string(op_name(op)));
    expect_values(r, want);
  }
  // Unsigned and signed orderings are not confused.
  Tensor u = T(DType::u8, {2}, {200, 1});
  Tensor v = T(DType::u8, {2}, {100, 2});
  expect_values(run1({u, v}, [](OpBuilder& o, auto& in) { return o.binary(Op::Greater, in[0], in[1]); }), {1, 0});
  Tensor i = raw<int64_t>(DType::i64, {2}, {-1, std::numeric_limits<int64_t>::max()});
  Tensor j = raw<int64_t>(DType::i64, {2}, {1, std::numeric_limits<int64_t>::max() - 1});
  expect_values(run1({i, j}, [](OpBuilder& o, auto& in) { return o.binary(Op::Less, in[0], in[1]); }), {1, 0});
  // bool compare and logical ops
  Tensor p = T(DType::boolean, {4}, {0, 0, 1, 1});
  Tensor q = T(DType::boolean, {4}, {0, 1, 0, 1});
  expect_values(run1({p, q}, [](OpBuilder& o, auto& in) { return o.binary(Op::And, in[0], in[1]); }), {0, 0, 0, 1});
  expect_values(run1({p, q}, [](OpBuilder& o, auto& in) { return o.binary(Op::Or, in[0], in[1]); }), {0, 1, 1, 1});
  expect_values(run1({p, q}, [](OpBuilder& o, auto& in) { return o.binary(Op::Xor, in[0], in[1]); }), {0, 1, 1, 0});
  expect_values(run1({p, q}, [](OpBuilder& o, auto& in) { return o.binary(Op::Equal, in[0], in[1]); }), {1, 0, 0, 1});
  expect_values(run1({p}, [](OpBuilder& o, auto& in) { return o.unary(Op::Not, in[0]); }), {1, 1, 0, 0});
}

TEST(RefInterpreterElementwise, WhereBroadcasts) {
  Tensor c = T(DType::boolean, {2, 1}, {1, 0});
  Tensor a = T(DType::f32, {3}, {1, 2, 3});
  Tensor b = T(DType::f32, {}, {-1});
  Tensor r = run1({c, a, b}, [](OpBuilder& o, auto& in) { return o.where(in[0], in[1], in[2]); });
  expect_sizes(r, {2, 3});
  expect_values(r, {1, 2, 3, -1, -1, -1});
  // Bit-exact: NaN payloads and -0.0 pass through.
  Tensor nz = T(DType::f32, {2}, {-0.0, kNaN});
  Tensor one = T(DType::boolean, {2}, {1, 1});
  Tensor w = run1({one, nz, nz}, [](OpBuilder& o, auto& in) { return o.where(in[0], in[1], in[2]); });
  EXPECT_TRUE(std::signbit(w.get_f64(0)));
  EXPECT_TRUE(std::isnan(w.get_f64(1)));
}

TEST(RefInterpreterElementwise, EveryDTypeClassAdds) {
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i32, DType::i64, DType::u8, DType::i8,
                   DType::i16, DType::u16, DType::u32, DType::u64}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Tensor a = T(dt, {3}, {1, 2, 3});
    Tensor b = T(dt, {3}, {4, 5, 6});
    Tensor r = run1({a, b}, [](OpBuilder& o, auto& in) { return o.add(in[0], in[1]); });
    EXPECT_EQ(r.dtype(), dt);
    expect_values(r, {5, 7, 9});
  }
  // f16 and bf16 round the double result when storing.
  Tensor h = T(DType::f16, {1}, {1.0});
  Tensor e = T(DType::f16, {1}, {1.0 / 4096});  // below half an ulp of 1 in f16 (2^-11)
  expect_values(run1({h, e}, [](OpBuilder& o, auto& in) { return o.add(in[0], in[1]); }), {1.0});
  Tensor bh = T(DType::bf16, {1}, {1.0});
  Tensor be = T(DType::bf16, {1}, {1.0 / 512});  // below half a bf16 ulp of 1 (2^-8)
  expect_values(run1({bh, be}, [](OpBuilder& o, auto& in) { return o.add(in[0], in[1]); }), {1.0});
  Tensor bf = T(DType::bf16, {1}, {1.0 / 64});  // representable: 1 + 2^-6 is exact in bf16
  expect_values(run1({bh, bf}, [](OpBuilder& o, auto& in) { return o.add(in[0], in[1]); }), {1.0 + 1.0 / 64});
  // f16 division computed in double and rounded once more on store.
  Tensor one = T(DType::f16, {1}, {1});
  Tensor three = T(DType::f16, {1}, {3});
  expect_values(run1({one, three}, [](OpBuilder& o, auto& in) { return o.div(in[0], in[1]); }),
                {f16_to_f32(f32_to_f16(static_cast<float>(1.0 / 3.0)))});
}

TEST(RefInterpreterElementwise, ComplexArithmetic) {
  Tensor a = Tensor::zeros(DType::c64, {2});
  Tensor b = Tensor::zeros(DType::c64, {2});
  a.set_f64(0, 1), a.set_imag(0, 2), a.set_f64(1, 3), a.set_imag(1, -1);
  b.set_f64(0, 0), b.set_imag(0, 1), b.set_f64(1, 2), b.set_imag(1, 0);
  Tensor m = run1({a, b}, [](OpBuilder& o, auto& in) { return o.mul(in[0], in[1]); });
  EXPECT_EQ(m.get_f64(0), -2);  // (1+2i) i = -2 + i
  EXPECT_EQ(m.get_imag(0), 1);
  EXPECT_EQ(m.get_f64(1), 6);
  EXPECT_EQ(m.get_imag(1), -2);
  Tensor d = run1({a, b}, [](OpBuilder& o, auto& in) { return o.div(in[0], in[1]); });
  EXPECT_NEAR(d.get_f64(0), 2, 1e-6);  // (1+2i)/i = 2 - i
  EXPECT_NEAR(d.get_imag(0), -1, 1e-6);
  Tensor n = run1({a}, [](OpBuilder& o, auto& in) { return o.neg(in[0]); });
  EXPECT_EQ(n.get_imag(0), -2);
  auto r = run({a, b}, [](OpBuilder& o, auto& in) { return std::vector<ValueId>{o.max(in[0], in[1])}; });
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.status().code(), ErrorCode::unsupported);
  EXPECT_NE(r.status().message().find("c64"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("max"), std::string::npos) << r.status().message();
}

TEST(RefInterpreterElementwise, ImplementsAgreesWithTheKernelsOnComplex) {
  const TensorType c{DType::c64, {2}};
  Tensor a = Tensor::zeros(DType::c64, {2});
  for (Op op : {Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Pow, Op::Max, Op::Min, Op::Mod, Op::Equal, Op::Less}) {
    SCOPED_TRACE(std::string(op_name(op)));
    const TensorType ins[] = {c, c};
    auto r = run({a, a}, [&](OpBuilder& o, auto& in) { return std::vector<ValueId>{o.binary(op, in[0], in[1])}; });
    EXPECT_EQ(ref::implements(op, ins), r.has_value()) << r.status().to_string();
    if (!r) EXPECT_EQ(r.status().code(), ErrorCode::unsupported);
  }
  const TensorType f{DType::f32, {2}};
  const TensorType fs[] = {f};
  EXPECT_TRUE(ref::implements(Op::Exp, fs));
  EXPECT_FALSE(ref::implements(Op::Relu, fs));
}

TEST(RefInterpreterElementwise, ComplexDotReduceMoveCast) {
  Tensor a = Tensor::zeros(DType::c64, {2, 2});
  for (int i = 0; i < 4; ++i) a.set_f64(i, i + 1), a.set_imag(i, 1);  // [[1+i, 2+i], [3+i, 4+i]]
  Tensor d = run1({a, a}, [](OpBuilder& o, auto& in) { return o.dot(in[0], in[1], {}, {}, {1}, {0}); });
  // row 0 x col 0: (1+i)(1+i) + (2+i)(3+i) = 2i + (5+5i) = 5 + 7i
  EXPECT_EQ(d.get_f64(0), 5);
  EXPECT_EQ(d.get_imag(0), 7);
  Tensor s = run1({a}, [](OpBuilder& o, auto& in) { return o.reduce_sum(in[0], {0}, false); });
  EXPECT_EQ(s.get_f64(1), 6);
  EXPECT_EQ(s.get_imag(1), 2);
  Tensor t = run1({a}, [](OpBuilder& o, auto& in) { return o.transpose(in[0], {1, 0}); });
  EXPECT_EQ(t.get_f64(1), 3);
  EXPECT_EQ(t.get_imag(1), 1);
  expect_values(run1({a}, [](OpBuilder& o, auto& in) { return o.cast(in[0], DType::f32); }), {1, 2, 3, 4});
  Tensor f = T(DType::f32, {1}, {2.5});
  Tensor c = run1({f}, [](OpBuilder& o, auto& in) { return o.cast(in[0], DType::c64); });
  EXPECT_EQ(c.get_f64(0), 2.5);
  EXPECT_EQ(c.get_imag(0), 0);
  // Graph-level reduce without attributes: all axes, keepdims 1.
  Tensor k = run1({a}, [](OpBuilder& o, auto& in) { return o.op(Op::ReduceSum, {in[0]}, {}); });
  expect_sizes(k, {1, 1});
  EXPECT_EQ(k.get_imag(0), 4);
}

TEST(RefInterpreterElementwise, ComplexPartsModulusArgumentAndConstruction) {
  Tensor z = Tensor::zeros(DType::c64, {3});
  z.set_f64(0, 3), z.set_imag(0, -4), z.set_f64(1, -1), z.set_imag(1, 0), z.set_f64(2, 0), z.set_imag(2, 2.5);
  auto part = [&](Op op) { return run1({z}, [&](OpBuilder& o, auto& in) { return o.unary(op, in[0]); }); };
  Tensor re = part(Op::Real), im = part(Op::Imag), m = part(Op::Abs), a = part(Op::Angle), c = part(Op::Conj);
  for (const Tensor* t : {&re, &im, &m, &a}) EXPECT_EQ(t->dtype(), DType::f32);
  expect_values(re, {3, -1, 0});
  expect_values(im, {-4, 0, 2.5});
  expect_values(m, {5, 1, 2.5});  // hypot(re, im)
  expect_values(a, {static_cast<float>(std::atan2(-4.0, 3.0)), static_cast<float>(M_PI), static_cast<float>(M_PI / 2)});
  ASSERT_EQ(c.dtype(), DType::c64);
  EXPECT_EQ(c.get_f64(0), 3);
  EXPECT_EQ(c.get_imag(0), 4);
  EXPECT_EQ(c.get_imag(2), -2.5);
  // complex(re, im) broadcasts its f32 parts; an infinite imaginary part stays in place
  Tensor r = T(DType::f32, {2, 1}, {1.5, -2});
  Tensor i = T(DType::f32, {3}, {0.5, kInf, -0.0});
  Tensor w = run1({r, i}, [](OpBuilder& o, auto& in) { return o.complex(in[0], in[1]); });
  ASSERT_EQ(w.dtype(), DType::c64);
  expect_sizes(w, {2, 3});
  EXPECT_EQ(w.get_f64(1), 1.5);
  EXPECT_EQ(w.get_imag(1), kInf);
  EXPECT_EQ(w.get_f64(5), -2);
  EXPECT_TRUE(std::signbit(w.get_imag(5)));
}

TEST(RefInterpreterElementwise, ComplexOpsRejectOtherDtypesByName) {
  Tensor f = T(DType::f32, {2}, {1, 2});
  Tensor d = T(DType::f64, {2}, {1, 2});
  for (Op op : {Op::Real, Op::Imag, Op::Conj, Op::Angle}) {
    auto r = run({f}, [&](OpBuilder& o, auto& in) { return std::vector<ValueId>{o.unary(op, in[0])}; });
    ASSERT_FALSE(r.has_value()) << op_name(op);
    EXPECT_EQ(r.status().code(), ErrorCode::dtype_error) << r.status().to_string();
    EXPECT_NE(r.status().message().find("must be c64"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(std::string(op_name(op))), std::string::npos) << r.status().message();
  }
  auto r = run({f, d}, [](OpBuilder& o, auto& in) { return std::vector<ValueId>{o.complex(in[0], in[1])}; });
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.status().code(), ErrorCode::dtype_error);
  EXPECT_NE(r.status().message().find("input 1 must be f32"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("f64"), std::string::npos) << r.status().message();
}

// ---------------------------------------------------------------- cast

TEST(RefInterpreterCast, FloatToIntTruncatesSaturatesAndZeroesNaN) {
  Tensor x = T(DType::f32, {7}, {1.9, -1.9, kNaN, 1e10, -1e10, kInf, -kInf});
  Tensor r = run1({x}, [](OpBuilder& o, auto& in) { return o.cast(in[0], DType::i32); });
  expect_values(r, {1, -1, 0, 2147483647.0, -2147483648.0, 2147483647.0, -2147483648.0});
  Tensor u = run1({x}, [](OpBuilder& o, auto& in) { return o.cast(in[0], DType::u8); });
  expect_values(u, {1, 0, 0, 255, 0, 255, 0});
  Tensor big = T(DType::f64, {3}, {1e19, -1e19, 9.2233720368547758e18});
  Tensor i64 = run1({big}, [](OpBuilder& o, auto& in) { return o.cast(in[0], DType::i64); });
  EXPECT_EQ(i64.data<int64_t>()[0], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(i64.data<int64_t>()[1], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(i64.data<int64_t>()[2], std::numeric_limits<int64_t>::max());  // 2^63 saturates
  Tensor u64 = run1({big}, [](OpBuilder& o, auto& in) { return o.cast(in[0], DType::u64); });
  EXPECT_EQ(u64.data<uint64_t>()[0], 10000000000000000000ull);
  EXPECT_EQ(u64.data<uint64_t>()[1], 0u);
}

TEST(RefInterpreterCast, IntToIntWrapsIntToFloatRounds) {
  Tensor x = raw<int32_t>(DType::i32, {3}, {300, -1, 127});
  expect_values(run1({x}, [](OpBuilder& o, auto& in) { return o.cast(in[0], DType::i8); }), {44, -1, 127});
  expect_values(run1({x}, [](OpBuilder& o, auto& in) { return o.cast(in[0], DType::u8); }), {44, 255, 127});
  Tensor l = raw<int64_t>(DType::i64, {2}, {16777217, (int64_t{1} << 53) + 1});
  Tensor f = run1({l}, [](OpBuilder& o, auto& in) { return o.cast(in[0], DType::f32); });
  expect_values(f, {16777216.0, 9007199254740992.0});
  Tensor d = run1({l}, [](OpBuilder& o, auto& in) { return o.cast(in[0], DType::f64); });
  expect_values(d, {16777217.0, 9007199254740992.0});  // 2^53 + 1 rounds to even
  Tensor u = raw<uint64_t>(DType::u64, {1}, {~uint64_t{0}});
  expect_values(run1({u}, [](OpBuilder& o, auto& in) { return o.cast(in[0], DType::f64); }), {18446744073709551616.0});
  expect_values(run1({u}, [](OpBuilder& o, auto& in) { return o.cast(in[0], DType::i64); }), {-1});
}

TEST(RefInterpreterCast, BoolAndNarrowFloats) {
  Tensor x = T(DType::f32, {4}, {0, -0.0, 0.5, kNaN});
  expect_values(run1({x}, [](OpBuilder& o, auto& in) { return o.cast(in[0], DType::boolean); }), {0, 0, 1, 1});
  Tensor i = raw<int32_t>(DType::i32, {3}, {0, 256, -1});
  expect_values(run1({i}, [](OpBuilder& o, auto& in) { return o.cast(in[0], DType::boolean); }), {0, 1, 1});
  Tensor b = T(DType::boolean, {2}, {1, 0});
  expect_values(run1({b}, [](OpBuilder& o, auto& in) { return o.cast(in[0], DType::f32); }), {1, 0});
  expect_values(run1({b}, [](OpBuilder& o, auto& in) { return o.cast(in[0], DType::i64); }), {1, 0});
  Tensor third = T(DType::f32, {2}, {1.0 / 3.0, 65520.0});
  expect_values(run1({third}, [](OpBuilder& o, auto& in) { return o.cast(in[0], DType::f16); }),
                {f16_to_f32(f32_to_f16(1.0f / 3.0f)), kInf});
  expect_values(run1({third}, [](OpBuilder& o, auto& in) { return o.cast(in[0], DType::bf16); }),
                {bf16_to_f32(f32_to_bf16(1.0f / 3.0f)), bf16_to_f32(f32_to_bf16(65520.0f))});
  Tensor h = T(DType::f16, {2}, {2.5, -3.5});
  expect_values(run1({h}, [](OpBuilder& o, auto& in) { return o.cast(in[0], DType::i32); }), {2, -3});
}

// ---------------------------------------------------------------- reductions

TEST(RefInterpreterReduce, SumProdMaxMinOverAxes) {
  Tensor x = T(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor s1 = run1({x}, [](OpBuilder& o, auto& in) { return o.reduce_sum(in[0], {1}, false); });
  expect_sizes(s1, {2});
  expect_values(s1, {6, 15});
  Tensor s0 = run1({x}, [](OpBuilder& o, auto& in) { return o.reduce_sum(in[0], {-2}, true); });
  expect_sizes(s0, {1, 3});
  expect_values(s0, {5, 7, 9});
  Tensor all = run1({x}, [](OpBuilder& o, auto& in) { return o.reduce_sum(in[0], {}, false); });
  expect_sizes(all, {});
  expect_values(all, {21});
  expect_values(run1({x}, [](OpBuilder& o, auto& in) { return o.reduce(Op::ReduceProd, in[0], {1}, false); }),
                {6, 120});
  expect_values(run1({x}, [](OpBuilder& o, auto& in) { return o.reduce(Op::ReduceMax, in[0], {0}, false); }),
                {4, 5, 6});
  expect_values(run1({x}, [](OpBuilder& o, auto& in) { return o.reduce(Op::ReduceMin, in[0], {-1}, false); }),
                {1, 4});
  Tensor x3 = T(DType::f64, {2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  expect_values(run1({x3}, [](OpBuilder& o, auto& in) { return o.reduce_sum(in[0], {0, 2}, false); }), {14, 22});
}

TEST(RefInterpreterReduce, NaNEmptyAxesAndIntegers) {
  Tensor x = T(DType::f32, {2, 3}, {1, kNaN, 3, 4, 5, 6});
  expect_values(run1({x}, [](OpBuilder& o, auto& in) { return o.reduce(Op::ReduceMax, in[0], {1}, false); }),
                {kNaN, 6});
  expect_values(run1({x}, [](OpBuilder& o, auto& in) { return o.reduce(Op::ReduceMin, in[0], {1}, false); }),
                {kNaN, 4});
  Tensor e = T(DType::f32, {2, 0}, {});
  expect_values(run1({e}, [](OpBuilder& o, auto& in) { return o.reduce_sum(in[0], {1}, false); }), {0, 0});
  expect_values(run1({e}, [](OpBuilder& o, auto& in) { return o.reduce(Op::ReduceProd, in[0], {1}, false); }),
                {1, 1});
  Tensor i = raw<int32_t>(DType::i32, {3}, {std::numeric_limits<int32_t>::max(), 1, 1});
  // 2^31 + 1 wraps to -2^31 + 1.
  expect_values(run1({i}, [](OpBuilder& o, auto& in) { return o.reduce_sum(in[0], {0}, false); }), {-2147483647.0});
  Tensor j = raw<int32_t>(DType::i32, {3}, {4, -5, 2});
  expect_values(run1({j}, [](OpBuilder& o, auto& in) { return o.reduce(Op::ReduceMin, in[0], {0}, false); }), {-5});
  expect_values(run1({j}, [](OpBuilder& o, auto& in) { return o.reduce(Op::ReduceProd, in[0], {0}, false); }), {-40});
  Tensor u = T(DType::u8, {3}, {200, 100, 1});
  expect_values(run1({u}, [](OpBuilder& o, auto& in) { return o.reduce_sum(in[0], {0}, false); }), {45});
  expect_values(run1({u}, [](OpBuilder& o, auto& in) { return o.reduce(Op::ReduceMax, in[0], {0}, false); }), {200});
  // f16 sums accumulate in double: 2048 + 1 + 1 stays exact in the accumulator.
  Tensor h = T(DType::f16, {3}, {2048, 1, 1});
  expect_values(run1({h}, [](OpBuilder& o, auto& in) { return o.reduce_sum(in[0], {0}, false); }), {2050});
}

TEST(RefInterpreterReduce, ArgMaxArgMin) {
  Tensor x = T(DType::f32, {2, 4}, {1, 3, 3, 0, 5, kNaN, 2, kNaN});
  Tensor am = run1({x}, [](OpBuilder& o, auto& in) { return o.argmax(in[0], 1, false); });
  EXPECT_EQ(am.dtype(), DType::i64);
  expect_values(am, {1, 1});
  Tensor last = run1({x}, [](OpBuilder& o, auto& in) {
    return o.op(Op::ArgMax, {in[0]}, Attrs{{"axis", int64_t{-1}}, {"keepdims", int64_t{1}}, {"select_last_index", int64_t{1}}});
  });
  expect_sizes(last, {2, 1});
  expect_values(last, {2, 3});
  Tensor amin = run1({x}, [](OpBuilder& o, auto& in) {
    return o.op(Op::ArgMin, {in[0]}, Attrs{{"axis", int64_t{1}}, {"keepdims", int64_t{0}}});
  });
  expect_values(amin, {3, 1});  // NaN is the extreme for argmin too
  Tensor cols = run1({x}, [](OpBuilder& o, auto& in) { return o.argmax(in[0], 0, false); });
  expect_values(cols, {1, 1, 0, 1});
  Tensor i = raw<int64_t>(DType::i64, {4}, {-3, 7, 7, -9});
  expect_values(run1({i}, [](OpBuilder& o, auto& in) { return o.argmax(in[0], 0, false); }), {1});
  expect_values(run1({i}, [](OpBuilder& o, auto& in) { return o.op(Op::ArgMin, {in[0]}, Attrs{{"axis", int64_t{0}}}); }),
                {3});
}

// ---------------------------------------------------------------- movement

TEST(RefInterpreterMovement, ReshapeTransposeExpand) {
  Tensor x = T(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor r = run1({x}, [](OpBuilder& o, auto& in) { return o.reshape(in[0], {0, -1, 1}); });
  expect_sizes(r, {2, 3, 1});
  expect_values(r, {1, 2, 3, 4, 5, 6});
  Tensor t = run1({x}, [](OpBuilder& o, auto& in) { return o.op(Op::Transpose, {in[0]}, {}); });
  expect_sizes(t, {3, 2});
  expect_values(t, {1, 4, 2, 5, 3, 6});
  Tensor x3 = T(DType::i32, {2, 3, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  Tensor t3 = run1({x3}, [](OpBuilder& o, auto& in) { return o.transpose(in[0], {1, -1, 0}); });
  expect_sizes(t3, {3, 2, 2});
  expect_values(t3, {0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11});
  Tensor v = T(DType::f32, {3, 1}, {1, 2, 3});
  Tensor e = run1({v}, [](OpBuilder& o, auto& in) { return o.expand(in[0], {2, 3, 2}); });
  expect_sizes(e, {2, 3, 2});
  expect_values(e, {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
}

TEST(RefInterpreterMovement, StridedSliceNegativeSteps) {
  Tensor x = T(DType::f32, {10}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  expect_values(run1({x}, [](OpBuilder& o, auto& in) { return o.strided_slice(in[0], {8}, {-3}, {3}); }), {8, 5, 2});
  expect_values(run1({x}, [](OpBuilder& o, auto& in) { return o.strided_slice(in[0], {1}, {4}, {3}); }), {1, 5, 9});
  Tensor m = T(DType::i64, {3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  Tensor s = run1({m}, [](OpBuilder& o, auto& in) { return o.strided_slice(in[0], {2, 3}, {-1, -2}, {2, 2}); });
  expect_sizes(s, {2, 2});
  expect_values(s, {11, 9, 7, 5});
}

TEST(RefInterpreterMovement, PadModes) {
  Tensor x = T(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor c = run1({x}, [](OpBuilder& o, auto& in) { return o.pad(in[0], {0, 1, 1, 0}, 9); });
  expect_sizes(c, {3, 4});
  expect_values(c, {9, 1, 2, 3, 9, 4, 5, 6, 9, 9, 9, 9});
  auto padm = [&](std::string mode, std::vector<int64_t> pads) {
    return run1({x}, [&](OpBuilder& o, auto& in) {
      return o.op(Op::Pad, {in[0]}, Attrs{{"pads", pads}, {"mode", mode}});
    });
  };
  Tensor r = padm("reflect", {1, 2, 0, 2});
  expect_sizes(r, {3, 7});
  expect_values(r, {6, 5, 4, 5, 6, 5, 4,  //
                    3, 2, 1, 2, 3, 2, 1,  //
                    6, 5, 4, 5, 6, 5, 4});
  Tensor e = padm("edge", {1, 1, 0, 1});
  expect_sizes(e, {3, 5});
  expect_values(e, {1, 1, 2, 3, 3, 1, 1, 2, 3, 3, 4, 4, 5, 6, 6});
  // Negative constant pads crop.
  Tensor n = padm("constant", {0, -1, 0, 1});
  expect_sizes(n, {2, 3});
  expect_values(n, {2, 3, 0, 5, 6, 0});
  // Integer fill values saturate like cast.
  Tensor u = T(DType::u8, {2}, {1, 2});
  expect_values(run1({u}, [](OpBuilder& o, auto& in) { return o.pad(in[0], {1, 1}, 300); }), {255, 1, 2, 255});
}

TEST(RefInterpreterMovement, Concat) {
  Tensor a = T(DType::f32, {2, 1}, {1, 2});
  Tensor b = T(DType::f32, {2, 2}, {3, 4, 5, 6});
  Tensor c = T(DType::f32, {2, 0}, {});
  Tensor r = run1({a, b, c}, [](OpBuilder& o, auto& in) { return o.concat({in[0], in[1], in[2]}, -1); });
  expect_sizes(r, {2, 3});
  expect_values(r, {1, 3, 4, 2, 5, 6});
  Tensor r0 = run1({b, b}, [](OpBuilder& o, auto& in) { return o.concat({in[0], in[1]}, 0); });
  expect_values(r0, {3, 4, 5, 6, 3, 4, 5, 6});
}

TEST(RefInterpreterMovement, GatherWrapsOnceAndClamps) {
  Tensor d = T(DType::f32, {5, 2}, {0, 1, 10, 11, 20, 21, 30, 31, 40, 41});
  Tensor idx = raw<int64_t>(DType::i64, {2, 2}, {-1, 7, -9, 2});
  Tensor r = run1({d, idx}, [](OpBuilder& o, auto& in) { return o.gather(in[0], in[1], 0); });
  expect_sizes(r, {2, 2, 2});
  expect_values(r, {40, 41, 40, 41, 0, 1, 20, 21});
  Tensor i2 = raw<int32_t>(DType::i32, {3}, {1, -2, 5});
  Tensor c = run1({d, i2}, [](OpBuilder& o, auto& in) { return o.gather(in[0], in[1], -1); });
  expect_sizes(c, {5, 3});
  expect_values(c, {1, 0, 1, 11, 10, 11, 21, 20, 21, 31, 30, 31, 41, 40, 41});
  Tensor u = T(DType::u8, {2}, {255, 3});
  expect_values(run1({d, u}, [](OpBuilder& o, auto& in) { return o.gather(in[0], in[1], 0); }), {40, 41, 30, 31});
}

TEST(RefInterpreterMovement, ScatterAddAccumulatesRepeatedIndices) {
  Tensor base = T(DType::f32, {4, 2}, {1, 1, 1, 1, 1, 1, 1, 1});
  Tensor idx = raw<int64_t>(DType::i64, {4}, {0, 2, 0, -1});
  Tensor upd = T(DType::f32, {4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  Tensor r = run1({base, idx, upd}, [](OpBuilder& o, auto& in) {
    return o.op(Op::ScatterAdd, {in[0], in[1], in[2]}, Attrs{{"axis", int64_t{0}}});
  });
  expect_values(r, {7, 9, 1, 1, 4, 5, 8, 9});
  // Along axis 1 with integers, clamped out-of-range index.
  Tensor bi = T(DType::i32, {2, 3}, {0, 0, 0, 10, 10, 10});
  Tensor ii = raw<int32_t>(DType::i32, {2}, {9, 1});
  Tensor ui = T(DType::i32, {2, 2}, {1, 2, 3, 4});
  expect_values(run1({bi, ii, ui}, [](OpBuilder& o, auto& in) {
                  return o.op(Op::ScatterAdd, {in[0], in[1], in[2]}, Attrs{{"axis", int64_t{1}}});
                }),
                {0, 2, 1, 10, 14, 13});
}

// batch_dims 1: each sequence writes its own cache slots (base [2, 2, 3, 1]: batch, head, slot)
TEST(RefInterpreterMovement, ScatterWithBatchDimsUsesEachBatchsIndices) {
  Tensor base = T(DType::f32, {2, 2, 3, 1}, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  Tensor idx = raw<int64_t>(DType::i64, {2, 1}, {2, 0});      // sequence 0 -> slot 2, sequence 1 -> slot 0
  Tensor upd = T(DType::f32, {2, 2, 1, 1}, {1, 2, 3, 4});   // [batch, head, seq, 1]
  expect_values(run1({base, idx, upd}, [](OpBuilder& o, auto& in) {
                  return o.op(Op::Scatter, {in[0], in[1], in[2]}, Attrs{{"axis", int64_t{2}}, {"batch_dims", int64_t{1}}});
                }),
                {0, 0, 1, 0, 0, 2, 3, 0, 0, 4, 0, 0});
}

TEST(RefInterpreterMovement, PackedI4WeightsMoveBitExact) {
  Graph g;
  GraphBuilder b(g);
  OpBuilder o(b);
  Tensor w = Tensor::zeros(DType::i4, {4});
  for (int i = 0; i < 4; ++i) w.set_f64(i, i * 3 - 5);  // -5, -2, 1, 4
  ValueId p = o.param("w4", w.type());
  g.weights["w4"] = w;
  ValueId r = o.transpose(o.reshape(p, {2, 2}), {1, 0});
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  g.outputs = {r};
  auto out = ref::interpret(g, {});
  ASSERT_TRUE(out.has_value()) << out.status().to_string();
  expect_values((*out)[0], {-5, 1, -2, 4});
}

// ---------------------------------------------------------------- dot

TEST(RefInterpreterDot, MatmulAndBatch) {
  Tensor a = T(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = T(DType::f32, {3, 2}, {7, 8, 9, 10, 11, 12});
  Tensor r = run1({a, b}, [](OpBuilder& o, auto& in) { return o.dot(in[0], in[1], {}, {}, {1}, {0}); });
  expect_sizes(r, {2, 2});
  expect_values(r, {58, 64, 139, 154});
  // Batch on different positions: lhs [3(k), 2(b)], rhs [2(b), 3(k), 2(n)].
  Tensor l = T(DType::f64, {3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor rr = T(DType::f64, {2, 3, 2}, {1, 0, 0, 1, 1, 1, 2, 0, 0, 2, 1, -1});
  Tensor br = run1({l, rr}, [](OpBuilder& o, auto& in) { return o.dot(in[0], in[1], {1}, {0}, {0}, {1}); });
  expect_sizes(br, {2, 2});
  // batch 0: lhs col [1,3,5] x [[1,0],[0,1],[1,1]] = [6, 8]; batch 1: [2,4,6] x [[2,0],[0,2],[1,-1]] = [10, 2]
  expect_values(br, {6, 8, 10, 2});
}

TEST(RefInterpreterDot, MultipleContractingDimsAgainstNaive) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> dist(-1, 1);
  // lhs [K1=3, B=2, M=4, K2=5], rhs [K2=5, N=3, B=2, K1=3]; contract (0,3)<->(3,0) and (3)<->(0).
  const int K1 = 3, B = 2, M = 4, K2 = 5, N = 3;
  std::vector<double> lv(K1 * B * M * K2), rv(K2 * N * B * K1);
  for (double& v : lv) v = dist(rng);
  for (double& v : rv) v = dist(rng);
  Tensor l = T(DType::f64, {K1, B, M, K2}, lv);
  Tensor r = T(DType::f64, {K2, N, B, K1}, rv);
  Tensor out = run1({l, r}, [](OpBuilder& o, auto& in) { return o.dot(in[0], in[1], {1}, {2}, {0, 3}, {3, 0}); });
  expect_sizes(out, {B, M, N});
  std::vector<double> want;
  for (int b = 0; b < B; ++b)
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        double s = 0;
        for (int k1 = 0; k1 < K1; ++k1)
          for (int k2 = 0; k2 < K2; ++k2)
            s += lv[((k1 * B + b) * M + m) * K2 + k2] * rv[((k2 * N + n) * B + b) * K1 + k1];
        want.push_back(s);
      }
  expect_values(out, want, 1e-12);
}

TEST(RefInterpreterDot, IntegerAndNoContraction) {
  Tensor a = raw<int32_t>(DType::i32, {1, 2}, {65536, 65536});
  Tensor b = raw<int32_t>(DType::i32, {2, 1}, {65536, 1});
  // 2^32 + 2^16 wraps to 2^16 in i32.
  expect_values(run1({a, b}, [](OpBuilder& o, auto& in) { return o.dot(in[0], in[1], {}, {}, {1}, {0}); }), {65536});
  Tensor u = T(DType::f32, {2}, {1, 2});
  Tensor v = T(DType::f32, {3}, {1, 10, 100});
  Tensor outer = run1({u, v}, [](OpBuilder& o, auto& in) { return o.dot(in[0], in[1], {}, {}, {}, {}); });
  expect_sizes(outer, {2, 3});
  expect_values(outer, {1, 10, 100, 2, 20, 200});
}

TEST(RefInterpreterDot, LargeShapesRun) {
  // [64,128] x [128,256] and a 1M-element elementwise op: scalar but cheap.
  std::vector<double> av(64 * 128), bv(128 * 256);
  for (size_t i = 0; i < av.size(); ++i) av[i] = static_cast<double>(i % 7) - 3;
  for (size_t i = 0; i < bv.size(); ++i) bv[i] = static_cast<double>(i % 5) - 2;
  Tensor a = T(DType::f32, {64, 128}, av);
  Tensor b = T(DType::f32, {128, 256}, bv);
  Tensor r = run1({a, b}, [](OpBuilder& o, auto& in) { return o.dot(in[0], in[1], {}, {}, {1}, {0}); });
  double s = 0;
  for (int k = 0; k < 128; ++k) s += av[5 * 128 + k] * bv[k * 256 + 17];
  EXPECT_EQ(r.get_f64(5 * 256 + 17), s);
  Tensor big = Tensor::zeros(DType::f32, {1024, 1024});
  Tensor e = run1({big, big}, [](OpBuilder& o, auto& in) { return o.exp(o.add(in[0], in[1])); });
  EXPECT_EQ(e.get_f64(1024 * 1024 - 1), 1.0);
}

// ---------------------------------------------------------------- sources

TEST(RefInterpreterSources, IotaConstantParam) {
  Tensor it = run1({}, [](OpBuilder& o, auto&) { return o.iota(DType::i32, {2, 3}, 1); });
  expect_values(it, {0, 1, 2, 0, 1, 2});
  Tensor it0 = run1({}, [](OpBuilder& o, auto&) { return o.iota(DType::f32, {2, 3}, -2); });
  expect_values(it0, {0, 0, 0, 1, 1, 1});
  Tensor c = run1({}, [](OpBuilder& o, auto&) { return o.constant(T(DType::f32, {2}, {1.5, 2.5})); });
  expect_values(c, {1.5, 2.5});
  Graph g;
  GraphBuilder b(g);
  OpBuilder o(b);
  ValueId x = g.add_input("x", TensorType{DType::f32, {2}});
  ValueId w = o.param("w", TensorType{DType::f32, {2}});
  g.weights["w"] = T(DType::f32, {2}, {10, 20});
  g.outputs = {o.add(x, w), w, x};
  ASSERT_TRUE(o.ok());
  Tensor xin = T(DType::f32, {2}, {1, 2});
  auto r = ref::interpret(g, std::vector<Tensor>{xin});
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  expect_values((*r)[0], {11, 22});
  expect_values((*r)[1], {10, 20});
  // Outputs are fresh: writing them does not touch the weight or the input.
  EXPECT_NE((*r)[1].storage(), g.weights["w"].storage());
  EXPECT_NE((*r)[2].storage(), xin.storage());
  (*r)[2].set_f64(0, 99);
  EXPECT_EQ(xin.get_f64(0), 1);
}

TEST(RefInterpreterSources, RandomMatchesTheCounterFormula) {
  // Independent restatement of the documented generator.
  auto mix = [](uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  for (uint64_t seed : {0ull, 42ull, 0xFFFFFFFFFFFFFFFFull})
    for (uint64_t i : {0ull, 1ull, 1000ull}) {
      const uint64_t h = mix(seed + (i + 1) * 0x9E3779B97F4A7C15ull);
      EXPECT_EQ(ref::random_uniform01(seed, i), static_cast<double>(h >> 11) / 9007199254740992.0);
    }
  Tensor r = run1({}, [](OpBuilder& o, auto&) {
    return o.op(Op::Random, {}, Attrs{{"dtype", DType::f64}, {"shape", std::vector<int64_t>{2, 2}},
                                      {"dist", std::string("uniform")}, {"seed", int64_t{5}},
                                      {"a", 2.0}, {"b", 4.0}});
  });
  for (int i = 0; i < 4; ++i) EXPECT_EQ(r.get_f64(i), 2.0 + 2.0 * ref::random_uniform01(5, i));
  Tensor n = run1({}, [](OpBuilder& o, auto&) {
    return o.op(Op::Random, {}, Attrs{{"dtype", DType::f64}, {"shape", std::vector<int64_t>{3}},
                                      {"dist", std::string("normal")}, {"seed", int64_t{5}}});
  });
  for (int i = 0; i < 3; ++i) {
    const double u1 = std::max(ref::random_uniform01(5, 2 * i), 1.0 / 9007199254740992.0);
    const double u2 = ref::random_uniform01(5, 2 * i + 1);
    EXPECT_EQ(n.get_f64(i), std::sqrt(-2 * std::log(u1)) * std::cos(2 * 3.14159265358979323846 * u2));
  }
}

TEST(RefInterpreterSources, RandomIsReproducibleAndWellDistributed) {
  auto gen = [](std::string dist, int64_t seed, double a, double b) {
    return run1({}, [&](OpBuilder& o, auto&) {
      return o.op(Op::Random, {}, Attrs{{"dtype", DType::f32}, {"shape", std::vector<int64_t>{100000}},
                                        {"dist", dist}, {"seed", seed}, {"a", a}, {"b", b}});
    });
  };
  Tensor u1 = gen("uniform", 1, 0, 1), u2 = gen("uniform", 1, 0, 1), u3 = gen("uniform", 2, 0, 1);
  ASSERT_EQ(std::memcmp(u1.bytes(), u2.bytes(), u1.nbytes()), 0);
  EXPECT_NE(std::memcmp(u1.bytes(), u3.bytes(), u1.nbytes()), 0);
  auto moments = [](const Tensor& t, double* mean, double* var, double* lo, double* hi) {
    double s = 0, s2 = 0;
    *lo = kInf, *hi = -kInf;
    for (int64_t i = 0; i < t.numel(); ++i) {
      const double v = t.get_f64(i);
      s += v, s2 += v * v;
      *lo = std::min(*lo, v), *hi = std::max(*hi, v);
    }
    *mean = s / t.numel();
    *var = s2 / t.numel() - *mean * *mean;
  };
  double mean, var, lo, hi;
  moments(u1, &mean, &var, &lo, &hi);
  EXPECT_NEAR(mean, 0.5, 0.005);
  EXPECT_NEAR(var, 1.0 / 12, 0.002);
  EXPECT_GE(lo, 0.0);
  EXPECT_LE(hi, 1.0);  // u < 1 in double; rounding to f32 may reach 1
  Tensor ab = gen("uniform", 3, -2, 6);
  moments(ab, &mean, &var, &lo, &hi);
  EXPECT_NEAR(mean, 2.0, 0.05);
  EXPECT_GE(lo, -2.0);
  EXPECT_LE(hi, 6.0);
  Tensor n = gen("normal", 4, 1.5, 2.0);
  moments(n, &mean, &var, &lo, &hi);
  EXPECT_NEAR(mean, 1.5, 0.03);
  EXPECT_NEAR(std::sqrt(var), 2.0, 0.03);
}

// ---------------------------------------------------------------- shapes and errors

TEST(RefInterpreterErrors, MissingWeightNamesIt) {
  Graph g;
  GraphBuilder b(g);
  OpBuilder o(b);
  ValueId w = o.param("layer0.weight", TensorType{DType::f32, {2}});
  g.outputs = {o.neg(w)};
  auto r = ref::interpret(g, {});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.status().code(), ErrorCode::invalid_argument);
  EXPECT_NE(r.status().message().find("layer0.weight"), std::string::npos) << r.status().message();
  g.weights["layer0.weight"] = T(DType::f32, {3}, {1, 2, 3});
  auto s = ref::interpret(g, {});
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.status().code(), ErrorCode::shape_error);
  EXPECT_NE(s.status().message().find("layer0.weight"), std::string::npos) << s.status().message();
}

TEST(RefInterpreterErrors, WrongInputsNameTheInput) {
  Graph g;
  GraphBuilder b(g);
  OpBuilder o(b);
  ValueId x = g.add_input("tokens", TensorType{DType::f32, {2, 3}});
  g.outputs = {o.neg(x)};
  auto shape = ref::interpret(g, std::vector<Tensor>{T(DType::f32, {3, 2}, {})});
  ASSERT_FALSE(shape.has_value());
  EXPECT_EQ(shape.status().code(), ErrorCode::invalid_argument);
  EXPECT_NE(shape.status().message().find("tokens"), std::string::npos) << shape.status().message();
  auto dtype = ref::interpret(g, std::vector<Tensor>{T(DType::f64, {2, 3}, {})});
  ASSERT_FALSE(dtype.has_value());
  EXPECT_EQ(dtype.status().code(), ErrorCode::invalid_argument);
  EXPECT_NE(dtype.status().message().find("tokens"), std::string::npos);
  auto count = ref::interpret(g, {});
  ASSERT_FALSE(count.has_value());
  EXPECT_EQ(count.status().code(), ErrorCode::invalid_argument);
  Tensor no_storage(DType::f32, {2, 3}, nullptr);
  auto empty = ref::interpret(g, std::vector<Tensor>{no_storage});
  ASSERT_FALSE(empty.has_value());
  EXPECT_EQ(empty.status().code(), ErrorCode::invalid_argument);
}

TEST(RefInterpreterErrors, CompositeOpIsUnsupported) {
  Graph g;
  GraphBuilder b(g);
  OpBuilder o(b);
  ValueId x = g.add_input("x", TensorType{DType::f32, {2}});
  b.set_next_name("my_relu");
  g.outputs = {o.relu(x)};
  auto r = ref::interpret(g, std::vector<Tensor>{T(DType::f32, {2}, {1, -1})});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.status().code(), ErrorCode::unsupported);
  EXPECT_NE(r.status().message().find("my_relu"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("relu"), std::string::npos);
}

TEST(RefInterpreterErrors, LyingRecordedTypeIsAVerifyError) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{DType::f32, {2}});
  // Recorded as [3] although neg of [2] is [2]: must not read out of bounds.
  g.outputs = g.add_node_typed(Op::Neg, {x}, {}, {TensorType{DType::f32, {3}}}, "liar");
  auto r = ref::interpret(g, std::vector<Tensor>{T(DType::f32, {2}, {1, 2})});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.status().code(), ErrorCode::verify_error);
  EXPECT_NE(r.status().message().find("liar"), std::string::npos) << r.status().message();
}

TEST(RefInterpreterShapes, SymbolicInputsBind) {
  Graph g;
  GraphBuilder b(g);
  OpBuilder o(b);
  ValueId x = g.add_input("x", TensorType{DType::f32, {Dim::symbol("batch"), 3}});
  ValueId y = g.add_input("y", TensorType{DType::f32, {Dim::symbol("batch"), 1}});
  ValueId s = o.reduce_sum(o.mul(x, y), {-1}, false);
  ValueId r = o.reshape(x, {-1});
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  g.outputs = {s, r};
  auto out = ref::interpret(g, std::vector<Tensor>{T(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6}), T(DType::f32, {2, 1}, {1, 10})});
  ASSERT_TRUE(out.has_value()) << out.status().to_string();
  expect_sizes((*out)[0], {2});
  expect_values((*out)[0], {6, 150});
  expect_sizes((*out)[1], {6});
  auto bad = ref::interpret(g, std::vector<Tensor>{T(DType::f32, {2, 3}, {}), T(DType::f32, {4, 1}, {})});
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.status().code(), ErrorCode::invalid_argument);
  EXPECT_NE(bad.status().message().find("batch"), std::string::npos) << bad.status().message();
}

TEST(RefInterpreterShapes, StrictPrimitiveFormsRun) {
  // The legalizer's strict form: explicit reshape + expand instead of broadcasting, explicit axes.
  Graph g;
  g.level = IrLevel::primitive;
  GraphBuilder b(g);
  OpBuilder o(b);
  ValueId x = g.add_input("x", TensorType{DType::f32, {2, 3}});
  ValueId bias = o.constant(T(DType::f32, {3}, {1, 2, 3}));
  ValueId be = o.expand(o.reshape(bias, {1, 3}), {2, 3});
  ValueId y = o.reduce_sum(o.add(x, be), {1}, true);
  ASSERT_TRUE(o.ok());
  for (const Node& n : g.nodes) {
    std::vector<TensorType> ins;
    for (ValueId v : n.inputs) ins.push_back(g.type(v));
    std::vector<TensorType> outs;
    for (ValueId v : n.outputs) outs.push_back(g.type(v));
    NodeSig sig{ins, n.attrs, n.name};
    EXPECT_TRUE(check_strict_primitive(n.op, sig, outs).is_ok());
  }
  g.outputs = {y};
  auto r = ref::interpret(g, std::vector<Tensor>{T(DType::f32, {2, 3}, {0, 0, 0, 1, 1, 1})});
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  expect_values((*r)[0], {6, 9});
}

}  // namespace
}  // namespace rlx
