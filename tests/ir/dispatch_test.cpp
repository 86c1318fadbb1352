// The dispatch contract on text IR: per node native / common-IR / rewritten / illegal,
// decided on op, attributes, dtypes and shapes; policies; the illegal-node error.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "rlx/compile.h"
#include "rlx/dispatch.h"
#include "rlx/ir_text.h"
#include "rlx/verify.h"

namespace rlx {
namespace {

Graph parse(const std::string& text) {
  auto g = parse_graph(text);
  EXPECT_TRUE(g.has_value()) << g.status().to_string();
  return g.has_value() ? *g : Graph{};
}

DispatchReport report_of(const std::string& text, const std::string& device, const std::string& policy = "prefer-native") {
  auto p = DispatchPolicy::parse(policy);
  EXPECT_TRUE(p.has_value());
  auto r = explain(parse(text), device, *p);
  EXPECT_TRUE(r.has_value()) << r.status().to_string();
  return r.has_value() ? *r : DispatchReport{};
}

const NodeDecision& by_op(const DispatchReport& r, Op op) {
  for (const NodeDecision& d : r.nodes)
    if (d.op == op) return d;
  static NodeDecision none;
  ADD_FAILURE() << "no decision for " << op_name(op);
  return none;
}

const char* kThreePaths = R"(
graph @g(%x: f32[batch, 64]) -> (f32[batch, 32]) {
  %w = param "w" : f32[64, 32]
  %h = matmul(%x, %w)
  %a = gelu(%h) {approximate = "tanh"}
  %p = softmax(%a) {axis = 1}
  return %p
})";

TEST(Dispatch, ThreePathsOnCpu) {
  DispatchReport r = report_of(kThreePaths, "cpu");
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(by_op(r, Op::MatMul).path, DispatchPath::native);
  EXPECT_EQ(by_op(r, Op::Softmax).path, DispatchPath::common_ir);
  EXPECT_EQ(by_op(r, Op::Gelu).path, DispatchPath::rewritten);
  EXPECT_FALSE(by_op(r, Op::Gelu).children.empty());
  EXPECT_NE(by_op(r, Op::Gelu).how.find("tanh"), std::string::npos);
  EXPECT_EQ(r.count(DispatchPath::native), 1);
  EXPECT_NE(r.to_text().find("compile-ready: yes (1 native, 1 common-ir, 1 rewritten, 0 illegal)"), std::string::npos);
  // the kernels each node runs in are named after scheduling
  EXPECT_FALSE(by_op(r, Op::Softmax).kernels.empty());
}

// Broadcasting an operand of lower rank with a zero-size dim: the explicit reshape keeps the 0
// (a reshape's 0 otherwise copies the input's dim, which made [0, 5] into [1, 5, 5]).
TEST(Dispatch, BroadcastsOverZeroSizeDims) {
  Graph g = parse(R"(
graph @g(%c: bool[0, 5], %x: f32[3, 0, 5]) -> (f32[3, 0, 5]) {
  %z = constant dense<0.0> : f32[]
  %y = where(%c, %x, %z)
  return %y
})");
  for (const char* device : {"cpu", "ref"}) {
    auto model = Model::compile(g, {.device = device});
    ASSERT_TRUE(model.has_value()) << device << ": " << model.status().to_string();
    std::vector<Tensor> ins{Tensor::zeros(DType::boolean, {0, 5}), Tensor::zeros(DType::f32, {3, 0, 5})};
    auto out = (*model)->run(ins);
    ASSERT_TRUE(out.has_value()) << device << ": " << out.status().to_string();
    EXPECT_EQ((*out)[0].sizes(), (Sizes{3, 0, 5})) << device;
  }
}

TEST(Dispatch, PoliciesForceEachPath) {
  DispatchReport common = report_of(kThreePaths, "cpu", "matmul=force-common,dot=force-common");
  EXPECT_EQ(by_op(common, Op::MatMul).path, DispatchPath::common_ir);
  EXPECT_EQ(by_op(common, Op::MatMul).native_refused, "not tried: policy force-common");
  EXPECT_EQ(by_op(common, Op::MatMul).how.find("native"), std::string::npos);
  // force-common on matmul alone still lets the dot inside it be native
  DispatchReport inner = report_of(kThreePaths, "cpu", "matmul=force-common");
  EXPECT_NE(by_op(inner, Op::MatMul).how.find("dot (native)"), std::string::npos);
  // softmax has no native kernel on the CPU: force-native makes it illegal, with reasons
  DispatchReport forced = report_of(kThreePaths, "cpu", "softmax=force-native");
  EXPECT_FALSE(forced.ok());
  const NodeDecision& s = by_op(forced, Op::Softmax);
  EXPECT_EQ(s.path, DispatchPath::illegal);
  EXPECT_NE(s.native_refused.find("no native softmax"), std::string::npos);
  EXPECT_EQ(s.common_refused, "not tried: policy force-native");
  // gelu has no decomposition of its own; force-common refuses it, naming why
  DispatchReport g = report_of(kThreePaths, "cpu", "gelu=force-common");
  EXPECT_EQ(by_op(g, Op::Gelu).path, DispatchPath::illegal);
  EXPECT_NE(by_op(g, Op::Gelu).common_refused.find("no decomposition"), std::string::npos);
  EXPECT_FALSE(DispatchPolicy::parse("softmax=fast").has_value());
  EXPECT_FALSE(DispatchPolicy::parse("nonsense_op=force-common").has_value());
}

TEST(Dispatch, IllegalNodesAreAllListedWithReasons) {
  auto g = parse(kThreePaths);
  auto model = Model::compile(g, {.device = "null"});
  ASSERT_TRUE(model.has_value());
  auto v = (*model)->prepare({{"batch", 2}});
  ASSERT_FALSE(v.has_value());
  EXPECT_EQ(v.status().code(), ErrorCode::illegal);
  const std::string& msg = v.status().message();
  EXPECT_NE(msg.find("3 nodes cannot run on null"), std::string::npos) << msg;
  for (const char* part : {"matmul", "gelu", "softmax", "native:", "common-ir:", "rewritten:", "hint:"})
    EXPECT_NE(msg.find(part), std::string::npos) << part << " missing from:\n" << msg;
}

TEST(Dispatch, DecidedOnDtypesNotJustOpKind) {
  // c64 arithmetic: legal on ref and cpu (host C computes complex values); an ordering of
  // c64 values (less) is refused on cpu, naming the op and the dtype
  const char* text = R"(
graph @c(%a: c64[4], %b: c64[4]) -> (c64[4]) {
  %s = add(%a, %b)
  return %s
})";
  EXPECT_TRUE(report_of(text, "ref").ok());
  EXPECT_TRUE(report_of(text, "cpu").ok());
  const char* less = R"(
graph @c(%a: c64[4], %b: c64[4]) -> (bool[4]) {
  %s = less(%a, %b)
  return %s
})";
  DispatchReport r = report_of(less, "cpu");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.nodes[0].common_refused.find("less on c64"), std::string::npos) << r.nodes[0].common_refused;
  // the native GEMM takes f32, f16 and bf16 only: an f64 matmul is refused natively and decomposed
  const char* f64mm = R"(
graph @m(%a: f64[8, 16], %b: f64[16, 4]) -> (f64[8, 4]) {
  %c = matmul(%a, %b)
  return %c
})";
  DispatchReport m = report_of(f64mm, "cpu");
  EXPECT_EQ(m.nodes[0].path, DispatchPath::common_ir);
  EXPECT_NE(m.nodes[0].native_refused.find("takes f32, f16 and bf16"), std::string::npos) << m.nodes[0].native_refused;
}

TEST(Dispatch, DecidedOnShapes) {
  // batch dims that broadcast partially cannot be one strided GEMM call: not native
  const char* text = R"(
graph @m(%a: f32[2, 1, 8, 16], %b: f32[1, 3, 16, 4]) -> (f32[2, 3, 8, 4]) {
  %c = matmul(%a, %b)
  return %c
})";
  DispatchReport r = report_of(text, "cpu");
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.nodes[0].path, DispatchPath::common_ir);
  EXPECT_NE(r.nodes[0].native_refused.find("broadcast partially"), std::string::npos);
}

TEST(Dispatch, JsonReport) {
  DispatchReport r = report_of(kThreePaths, "cpu");
  nlohmann::json j = r.to_json();
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_EQ(j["compile_ready"], true);
  EXPECT_EQ(j["counts"]["native"], 1);
  ASSERT_EQ(j["nodes"].size(), 3u);
  EXPECT_EQ(j["nodes"][0]["path"], "native");
  EXPECT_TRUE(j["nodes"][1].contains("children"));
}

TEST(Dispatch, LegalizedGraphVerifiesAtPrimitiveLevel) {
  Graph g = parse(kThreePaths);
  auto bound = bind_graph(g, {{"batch", 3}});
  ASSERT_TRUE(bound.has_value()) << bound.status().to_string();
  for (const char* dev : {"cpu", "ref"}) {
    auto d = get_device(dev);
    ASSERT_TRUE(d.has_value());
    auto lr = legalize(*bound, **d, DispatchPolicy{});
    ASSERT_TRUE(lr.has_value()) << lr.status().to_string();
    EXPECT_EQ(lr->graph.level, IrLevel::primitive);
    Status s = verify_graph(lr->graph);
    EXPECT_TRUE(s.is_ok()) << dev << ": " << s.to_string();
  }
}

TEST(Dispatch, SymbolsMustBeBoundToLegalize) {
  Graph g = parse(kThreePaths);
  auto d = get_device("cpu");
  auto lr = legalize(g, **d, DispatchPolicy{});
  ASSERT_FALSE(lr.has_value());
  EXPECT_EQ(lr.status().code(), ErrorCode::shape_error);
}

}  // namespace
}  // namespace rlx
