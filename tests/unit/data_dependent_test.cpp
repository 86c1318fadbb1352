// Data-dependent output shapes (nonzero, unique, non_max_suppression; loop): Model::run stages a
// graph around them on every device, with fresh random inputs whose counts differ run to run,
// against the same computation written out in the test; explain reports the host nodes, and
// the ways to misuse them are errors that name the node.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include "device_fixture.h"
#include "rlx/compile.h"
#include "rlx/ir_text.h"
#include "rlx/op_builder.h"

namespace rlx {
namespace {

// y = 2 * x[nonzero(x > t)], s = sum(y), and the unique values of floor(4 * y) with counts:
// a device stage before nonzero, one between nonzero and unique, one after.
Graph two_stage_graph() {
  Graph g;
  ValueId x = g.add_input("x", TensorType{DType::f32, {Dim::symbol("n")}});
  GraphBuilder gb(g);
  OpBuilder o(gb);
  ValueId keep = o.binary(Op::Greater, o.relu(x), o.scalar(0.25, DType::f32));
  ValueId idx = o.reshape(o.op(Op::NonZero, {keep}, Attrs{{"count", std::string("k")}}), {-1});
  ValueId y = o.mul(o.gather(x, idx, 0), o.scalar(2, DType::f32));
  ValueId s = o.reduce_sum(y, {0}, false);
  ValueId q = o.unary(Op::Floor, o.mul(y, o.scalar(4, DType::f32)));
  std::vector<ValueId> u = o.op_multi(Op::Unique, {q}, Attrs{{"count", std::string("u")}});
  EXPECT_TRUE(o.ok()) << o.status().to_string();
  g.outputs = {y, s, u[0], u[3], idx};
  return g;
}

class DataDependent : public device_tests::DeviceTest {};

// Why this test does not run on `device` ("" if it does).
std::string why_not_run(const std::string& device) {
#if defined(__SANITIZE_ADDRESS__)
  // A GPU device is not even made here: making one loads its driver, and Mesa's lavapipe
  // orphans an allocation when it is unloaded at exit, which LeakSanitizer reports whatever
  // the test did (seen for the vulkan and directx cases alone, and for cpu, ref and oneapi when
  // list_devices() had made every device; PoCL's LLVM keeps allocations past exit too). The
  // release suite runs every device.
  if (device != "cpu" && device != "ref" && device != "oneapi")
    return device + ": under AddressSanitizer only the host and reference devices (cpu, ref, oneapi) run this test";
#endif
  // only this device is made (list_devices() would make every one, loading the GPU drivers)
  auto made = get_device(device);
  if (!made.has_value()) return made.status().message();  // "device X is not available: why"
  if ((*made)->info().kind == DeviceKind::skeleton) return device + " is a skeleton device: it runs no kernels";
  return "";
}

TEST_P(DataDependent, StagedRunsMatchTheHostComputation) {
  const std::string device = GetParam();
  if (const std::string why = why_not_run(device); !why.empty()) GTEST_SKIP() << why;
  auto m = Model::compile(two_stage_graph(), {.device = device});
  ASSERT_TRUE(m.has_value()) << m.status().to_string();
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> val(-1.f, 1.f);
  std::set<int64_t> counts;
  for (int64_t n : {7, 40, 40, 1, 129, 5}) {
    Tensor x = Tensor::zeros(DType::f32, {n});
    // (the last input has no value above the threshold: empty tensors from nonzero on)
    for (int64_t i = 0; i < n; ++i) x.data<float>()[i] = n == 5 ? -std::fabs(val(rng)) : val(rng);
    auto out = (*m)->run(std::vector<Tensor>{x});
    ASSERT_TRUE(out.has_value()) << device << ": " << out.status().to_string();
    // the same computation by hand
    std::vector<float> y;
    std::vector<int64_t> idx;
    for (int64_t i = 0; i < n; ++i)
      if (std::max(x.data<float>()[i], 0.f) > 0.25f) {
        idx.push_back(i);
        y.push_back(2 * x.data<float>()[i]);
      }
    std::map<float, int64_t> uniq;
    float sum = 0;
    for (float v : y) {
      ++uniq[std::floor(4 * v)];
      sum += v;
    }
    counts.insert(static_cast<int64_t>(y.size()));
    const std::vector<Tensor>& r = *out;
    ASSERT_EQ(r[0].sizes(), Sizes{static_cast<int64_t>(y.size())}) << "n=" << n;
    for (size_t i = 0; i < y.size(); ++i) {
      EXPECT_EQ(r[0].data<float>()[i], y[i]);
      EXPECT_EQ(r[4].data<int64_t>()[i], idx[i]);
    }
    EXPECT_NEAR(r[1].get_f64(0), sum, 1e-5 * (1 + std::fabs(sum)));
    ASSERT_EQ(r[2].numel(), static_cast<int64_t>(uniq.size()));
    size_t k = 0;
    for (const auto& [v, c] : uniq) {
      EXPECT_EQ(r[2].data<float>()[k], v);
      EXPECT_EQ(r[3].data<int64_t>()[k], c);
      ++k;
    }
  }
  EXPECT_TRUE(counts.count(0));
  std::printf("%s: counts seen %zu distinct\n", device.c_str(), counts.size());
}

// A loop run by the host (ONNX Loop with a run-time trip count): v = v * w + i / 8 while
// i < m and sum(|v|) < 50, each iteration's v stacked. The body, a graph of its own, runs on
// the device; fresh random inputs, against the loop written out here.
Graph loop_graph() {
  Graph body;
  body.name = "body";
  const TensorType vec{DType::f32, {Dim::symbol("n")}};
  ValueId i = body.add_input("i", TensorType{DType::i64, {}});
  body.add_input("c", TensorType{DType::boolean, {}});
  ValueId v = body.add_input("v", vec);
  ValueId w = body.add_input("w", vec);
  {
    GraphBuilder gb(body);
    OpBuilder o(gb);
    ValueId v2 = o.add(o.mul(v, w), o.mul(o.cast(i, DType::f32), o.scalar(0.125, DType::f32)));
    ValueId more = o.binary(Op::Less, o.reduce_sum(o.unary(Op::Abs, v2), {0}, false), o.scalar(50, DType::f32));
    EXPECT_TRUE(o.ok()) << o.status().to_string();
    body.outputs = {more, v2, v2};
  }
  Graph g;
  ValueId m = g.add_input("m", TensorType{DType::i64, {}});
  ValueId c = g.add_input("c", TensorType{DType::boolean, {}});
  ValueId x = g.add_input("x", vec);
  ValueId wx = g.add_input("w", vec);
  GraphBuilder gb(g);
  OpBuilder o(gb);
  std::vector<ValueId> r = o.op_multi(
      Op::Loop, {m, c, x, wx}, Attrs{{"count", std::string("it")}, {"body", print_graph(body)}, {"num_state", int64_t{1}}});
  EXPECT_TRUE(o.ok()) << o.status().to_string();
  g.outputs = {r[0], r[1]};
  return g;
}

TEST_P(DataDependent, LoopRunsItsBodyOnTheDevice) {
  const std::string device = GetParam();
  if (const std::string why = why_not_run(device); !why.empty()) GTEST_SKIP() << why;
  auto model = Model::compile(loop_graph(), {.device = device});
  ASSERT_TRUE(model.has_value()) << model.status().to_string();
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> val(-1.f, 1.f), scale(0.9f, 1.4f);
  for (auto [n, trips, go] : {std::tuple{5, int64_t{12}, true}, std::tuple{17, int64_t{3}, true},
                             std::tuple{5, int64_t{0}, true}, std::tuple{5, int64_t{9}, false}}) {
    Tensor x = Tensor::zeros(DType::f32, {n}), w = Tensor::zeros(DType::f32, {n});
    for (int64_t k = 0; k < n; ++k) {
      x.data<float>()[k] = val(rng);
      w.data<float>()[k] = scale(rng);
    }
    Tensor mt = Tensor::zeros(DType::i64, {}), ct = Tensor::zeros(DType::boolean, {});
    mt.data<int64_t>()[0] = trips;
    ct.bytes()[0] = go;
    auto out = (*model)->run(std::vector<Tensor>{mt, ct, x, w});
    ASSERT_TRUE(out.has_value()) << device << ": " << out.status().to_string();
    std::vector<float> v(x.data<float>(), x.data<float>() + n), stacked;
    int64_t it = 0;
    for (bool more = go; it < trips && more; ++it) {
      float sum = 0;
      for (int64_t k = 0; k < n; ++k) {
        v[k] = v[k] * w.data<float>()[k] + static_cast<float>(it) * 0.125f;
        sum += std::fabs(v[k]);
      }
      stacked.insert(stacked.end(), v.begin(), v.end());
      more = sum < 50;
    }
    ASSERT_EQ((*out)[1].sizes(), (Sizes{it, n})) << device << " n=" << n << " trips=" << trips;
    for (int64_t k = 0; k < n; ++k) EXPECT_NEAR((*out)[0].data<float>()[k], v[k], 1e-5 * (1 + std::fabs(v[k])));
    for (size_t k = 0; k < stacked.size(); ++k)
      EXPECT_NEAR((*out)[1].data<float>()[k], stacked[k], 1e-5 * (1 + std::fabs(stacked[k])));
  }
}

RLX_INSTANTIATE_FOR_DEVICES(DataDependent);

TEST(DataDependentGraph, ExplainReportsHostNodesAndPrepareRefuses) {
  Graph g = two_stage_graph();
  auto rep = explain(g, "cpu", DispatchPolicy{}, {{"n", 16}});
  ASSERT_TRUE(rep.has_value()) << rep.status().to_string();
  int host = 0;
  for (const NodeDecision& d : rep->nodes)
    if (d.op == Op::NonZero || d.op == Op::Unique) {
      ++host;
      EXPECT_NE(d.how.find("host"), std::string::npos) << d.how;
    }
  EXPECT_EQ(host, 2);
  EXPECT_TRUE(rep->ok()) << rep->to_text();
  auto m = Model::compile(g, {.device = "cpu"});
  ASSERT_TRUE(m.has_value());
  auto v = (*m)->prepare({{"n", 16}});
  ASSERT_FALSE(v.has_value());
  EXPECT_NE(v.status().message().find("depends on the data"), std::string::npos) << v.status().message();
}

TEST(DataDependentGraph, BadAttributesAndInputsNameTheNode) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{DType::f32, {4, 3}});
  auto bad_axis = g.add_node(Op::Unique, {x}, Attrs{{"count", std::string("u")}, {"axis", int64_t{2}}}, "uq");
  ASSERT_FALSE(bad_axis.has_value());
  EXPECT_NE(bad_axis.status().message().find("'uq'"), std::string::npos) << bad_axis.status().message();
  auto no_count = g.add_node(Op::NonZero, {x}, Attrs{}, "nz");
  ASSERT_FALSE(no_count.has_value());
  ValueId b = g.add_input("b", TensorType{DType::f32, {1, 5, 4}});
  ValueId s = g.add_input("s", TensorType{DType::f32, {1, 2, 6}});
  auto mismatch = g.add_node(Op::NonMaxSuppression, {b, s}, Attrs{{"count", std::string("c")}}, "nms");
  ASSERT_FALSE(mismatch.has_value());
  EXPECT_NE(mismatch.status().message().find("disagree"), std::string::npos) << mismatch.status().message();
}

// Non-max suppression by hand on boxes whose overlaps are known: two near-identical boxes and
// a far one, three classes, a score threshold that drops one class entirely.
TEST(DataDependentGraph, NonMaxSuppressionKeepsTheExpectedBoxes) {
  Graph g;
  ValueId b = g.add_input("b", TensorType{DType::f32, {1, 3, 4}});
  ValueId s = g.add_input("s", TensorType{DType::f32, {1, 3, 3}});
  GraphBuilder gb(g);
  OpBuilder o(gb);
  ValueId sel = o.op(Op::NonMaxSuppression,
                     {b, s, o.scalar(2, DType::i64), o.scalar(0.5, DType::f32), o.scalar(0.2, DType::f32)},
                     Attrs{{"count", std::string("kept")}});
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  g.outputs = {sel};
  auto m = Model::compile(g, {.device = "cpu"});
  ASSERT_TRUE(m.has_value());
  // corners flipped in box 1 (y2 < y1 is allowed); box 0 and 1 overlap with IoU 0.81
  Tensor boxes = Tensor::from_vector(DType::f32, {1, 3, 4}, std::vector<float>{0, 0, 10, 10, 10, 10, 1, 1, 20, 20, 30, 30});
  Tensor scores = Tensor::from_vector(
      DType::f32, {1, 3, 3}, std::vector<float>{0.9f, 0.8f, 0.7f, /* class 1 */ 0.1f, 0.15f, 0.05f, /* class 2 */ 0.3f, 0.6f, 0.6f});
  auto out = (*m)->run(std::vector<Tensor>{boxes, scores});
  ASSERT_TRUE(out.has_value()) << out.status().to_string();
  // class 0: box 0, box 2 (box 1 suppressed); class 1: none above 0.2; class 2: boxes 1 and 2
  // tie at 0.6: the lower index first, then the limit of 2
  const std::vector<int64_t> want = {0, 0, 0, 0, 0, 2, 0, 2, 1, 0, 2, 2};
  ASSERT_EQ((*out)[0].sizes(), (Sizes{4, 3}));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ((*out)[0].data<int64_t>()[i], want[i]) << "entry " << i;
}

// range of run-time values: the length from the values (negative steps and empty ranges
// included), floats accumulating in f32, and a zero step an error naming the node.
TEST(DataDependentGraph, RangeOfRunTimeValues) {
  for (DType dt : {DType::i64, DType::f32}) {
    Graph g;
    ValueId a = g.add_input("a", TensorType{dt, {}});
    ValueId b = g.add_input("b", TensorType{dt, {}});
    ValueId d = g.add_input("d", TensorType{dt, {}});
    GraphBuilder gb(g);
    OpBuilder o(gb);
    g.outputs = {o.op(Op::Range, {a, b, d}, Attrs{{"count", std::string("len")}})};
    ASSERT_TRUE(o.ok()) << o.status().to_string();
    auto m = Model::compile(g, {.device = "cpu"});
    ASSERT_TRUE(m.has_value());
    auto run = [&](double s, double l, double st) {
      return (*m)->run(std::vector<Tensor>{Tensor::from_f64(dt, {}, std::vector<double>{s}),
                                           Tensor::from_f64(dt, {}, std::vector<double>{l}),
                                           Tensor::from_f64(dt, {}, std::vector<double>{st})});
    };
    for (auto [s, l, st] : {std::tuple{1.0, 10.0, 3.0}, {10.0, 1.0, -2.0}, {5.0, 5.0, 1.0}, {3.0, 1.0, 1.0}}) {
      auto out = run(s, l, st);
      ASSERT_TRUE(out.has_value()) << out.status().to_string();
      const int64_t n = std::max<int64_t>(static_cast<int64_t>(std::ceil((l - s) / st)), 0);
      ASSERT_EQ((*out)[0].sizes(), Sizes{n}) << s << " " << l << " " << st;
      float v = static_cast<float>(s);
      for (int64_t i = 0; i < n; ++i, v += static_cast<float>(st)) EXPECT_EQ((*out)[0].get_f64(i), v);
    }
    auto zero = run(1, 4, 0);
    ASSERT_FALSE(zero.has_value());
    EXPECT_NE(zero.status().message().find("delta is 0"), std::string::npos) << zero.status().message();
  }
  // one computed value read twice by the node: range(c, 3 c, c) with c = 2 a
  Graph g;
  ValueId a = g.add_input("a", TensorType{DType::i64, {}});
  GraphBuilder gb(g);
  OpBuilder o(gb);
  ValueId c = o.mul(a, o.scalar(2, DType::i64));
  g.outputs = {o.op(Op::Range, {c, o.mul(c, o.scalar(3, DType::i64)), c}, Attrs{{"count", std::string("len")}})};
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  auto m = Model::compile(g, {.device = "cpu"});
  ASSERT_TRUE(m.has_value());
  auto out = (*m)->run(std::vector<Tensor>{Tensor::from_vector(DType::i64, {}, std::vector<int64_t>{3})});
  ASSERT_TRUE(out.has_value()) << out.status().to_string();
  ASSERT_EQ((*out)[0].sizes(), Sizes{2});  // 6, 12 up to 18
  EXPECT_EQ((*out)[0].data<int64_t>()[0], 6);
  EXPECT_EQ((*out)[0].data<int64_t>()[1], 12);
}

// top_k with a run-time k: ties by lower index, NaN above every number, k = 0 and k past the
// axis (an error naming the node).
TEST(DataDependentGraph, TopKOfARunTimeK) {
  for (int64_t largest : {1, 0}) {
    Graph g;
    ValueId x = g.add_input("x", TensorType{DType::f32, {2, 6}});
    ValueId k = g.add_input("k", TensorType{DType::i64, {1}});
    GraphBuilder gb(g);
    OpBuilder o(gb);
    std::vector<ValueId> tk = o.op_multi(Op::TopK, {x, k}, Attrs{{"count", std::string("k")}, {"largest", largest}});
    ASSERT_TRUE(o.ok()) << o.status().to_string();
    g.outputs = {tk[0], tk[1]};
    auto m = Model::compile(g, {.device = "cpu"});
    ASSERT_TRUE(m.has_value());
    const float nan = std::nanf("");
    Tensor xv = Tensor::from_vector(DType::f32, {2, 6}, std::vector<float>{3, 1, 4, 1, 5, 9, /* row 1 */ 2, nan, 2, -7, 0, 2});
    auto run = [&](int64_t kk) { return (*m)->run(std::vector<Tensor>{xv, Tensor::from_vector(DType::i64, {1}, std::vector<int64_t>{kk})}); };
    auto out = run(3);
    ASSERT_TRUE(out.has_value()) << out.status().to_string();
    ASSERT_EQ((*out)[1].sizes(), (Sizes{2, 3}));
    const std::vector<int64_t> want = largest ? std::vector<int64_t>{5, 4, 2, 1, 0, 2} : std::vector<int64_t>{1, 3, 0, 3, 4, 0};
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ((*out)[1].data<int64_t>()[i], want[i]) << "largest=" << largest << " entry " << i;
      const float v = xv.data<float>()[(i / 3) * 6 + want[i]], got = (*out)[0].data<float>()[i];
      EXPECT_TRUE(got == v || (std::isnan(got) && std::isnan(v))) << i;
    }
    auto none = run(0);
    ASSERT_TRUE(none.has_value()) << none.status().to_string();
    EXPECT_EQ((*none)[0].sizes(), (Sizes{2, 0}));
    auto past = run(7);
    ASSERT_FALSE(past.has_value());
    EXPECT_NE(past.status().message().find("top_k"), std::string::npos) << past.status().message();
  }
}

}  // namespace
}  // namespace rlx
