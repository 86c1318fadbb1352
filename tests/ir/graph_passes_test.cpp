// Graph clean-up passes on text IR: dead code, common subexpressions, constant folding.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>

#include "passes/graph_passes.h"
#include "runtime/reference_eval.h"
#include "rlx/compile.h"
#include "rlx/ir_text.h"

namespace rlx {
namespace {

Graph parse(const char* text) {
  auto g = parse_graph(text);
  EXPECT_TRUE(g.has_value()) << g.status().to_string();
  return *g;
}

int count(const Graph& g, Op op) {
  int n = 0;
  for (const Node& x : g.nodes) n += x.op == op;
  return n;
}

TEST(GraphPasses, DeadCodeGoes) {
  Graph g = parse(R"(graph @g(%x: f32[4]) -> (f32[4]) {
  %a = exp(%x)
  %b = log(%x)
  %w = param "unused" : f32[4]
  return %a
})");
  g.weights["unused"] = Tensor::zeros(DType::f32, {4});
  EXPECT_EQ(passes::eliminate_dead_code(g), 2);
  EXPECT_EQ(g.nodes.size(), 1u);
  EXPECT_TRUE(g.weights.empty());
}

TEST(GraphPasses, CommonSubexpressionsMerge) {
  Graph g = parse(R"(graph @g(%x: f32[4]) -> (f32[4]) {
  %a = exp(%x)
  %b = exp(%x)
  %c = add(%a, %b)
  %d = add(%a, %b)
  %e = mul(%c, %d)
  return %e
})");
  EXPECT_EQ(passes::eliminate_common_subexpressions(g), 2);
  EXPECT_EQ(count(g, Op::Exp), 1);
  EXPECT_EQ(count(g, Op::Add), 1);
}

TEST(GraphPasses, WeightTransposeFoldsToAConstant) {
  Graph g = parse(R"(graph @g(%x: f32[2, 3]) -> (f32[2, 4]) {
  %w = param "w" : f32[4, 3]
  %t = transpose(%w) {perm = [1, 0]}
  %s = mul(%t, %t)
  %y = matmul(%x, %s)
  return %y
})");
  Tensor w = Tensor::zeros(DType::f32, {4, 3});
  for (int i = 0; i < 12; ++i) w.data<float>()[i] = static_cast<float>(i);
  g.weights["w"] = w;
  auto f = passes::fold_constants(g, runtime::evaluate_on_reference);
  ASSERT_TRUE(f.has_value()) << f.status().to_string();
  EXPECT_EQ(*f, 2);
  passes::eliminate_dead_code(g);
  EXPECT_EQ(count(g, Op::Transpose), 0);
  EXPECT_EQ(count(g, Op::Param), 0);
  const Tensor* c = nullptr;
  for (const Node& n : g.nodes)
    if (n.op == Op::Constant) c = n.attrs.tensor("value");
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->sizes(), (Sizes{3, 4}));
  EXPECT_EQ(c->get_f64(1), 9.0);  // t[0][1] = w[1][0] = 3, squared
}

// The folding pass runs only what its evaluator gives: a node the evaluator refuses stays in
// the graph, and the evaluator sees each foldable node once with its known inputs.
TEST(GraphPasses, FoldingUsesTheGivenEvaluator) {
  Graph g = parse(R"(graph @g(%x: f32[2, 3]) -> (f32[2, 3]) {
  %w = param "w" : f32[2, 3]
  %e = exp(%w)
  %y = add(%x, %e)
  return %y
})");
  g.weights["w"] = Tensor::zeros(DType::f32, {2, 3});
  int calls = 0;
  auto refuse = [&](const Node& n, const std::vector<Tensor>& ins, const std::vector<TensorType>&)
      -> Expected<std::vector<Tensor>> {
    ++calls;
    EXPECT_EQ(n.op, Op::Exp);
    EXPECT_EQ(ins.size(), 1u);
    return error(ErrorCode::unsupported, "not here");
  };
  auto f = passes::fold_constants(g, refuse);
  ASSERT_TRUE(f.has_value()) << f.status().to_string();
  EXPECT_EQ(*f, 0);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(count(g, Op::Exp), 1);
}

// A weight cast to f16 or bf16 folds on the host (a fast path: autocast's narrow form casts
// every matrix); the result must be bit for bit what the reference interpreter's cast gives,
// including halfway cases, overflow to infinity, subnormals, NaN and signed zero.
TEST(GraphPasses, FoldedNarrowCastEqualsTheReferenceCast) {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 65520.0f, 1e6f, -1e30f, 3.4e38f, 1e-8f, -6e-8f,
                          1e-40f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(), 1.00390625f, 1.01171875f, 0.333333343f};
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 2000; ++i) {  // random bit patterns: every exponent, both signs
    uint32_t u = bits(rng);
    float f;
    std::memcpy(&f, &u, 4);
    v.push_back(f);
  }
  const int64_t n = static_cast<int64_t>(v.size());
  Tensor w = Tensor::zeros(DType::f32, {n});
  std::copy(v.begin(), v.end(), w.data<float>());
  for (const char* to : {"f16", "bf16"}) {
    Graph g = parse(cat("graph @g() -> (", to, "[", n, "]) {\n  %w = param \"w\" : f32[", n, "]\n  %c = cast(%w) {to = ", to,
                        "}\n  return %c\n}").c_str());
    g.weights["w"] = w;
    // the reference: the same cast of an input, which nothing folds
    Graph r = parse(cat("graph @r(%w: f32[", n, "]) -> (", to, "[", n, "]) {\n  %c = cast(%w) {to = ", to,
                        "}\n  return %c\n}").c_str());
    auto want = Model::compile(r, {.device = "ref"});
    ASSERT_TRUE(want.has_value()) << want.status().to_string();
    auto ref = (*want)->run(std::vector<Tensor>{w});
    ASSERT_TRUE(ref.has_value()) << ref.status().to_string();
    auto f = passes::fold_constants(g, runtime::evaluate_on_reference);
    ASSERT_TRUE(f.has_value()) << f.status().to_string();
    EXPECT_EQ(*f, 1);
    const Tensor* c = nullptr;
    for (const Node& node : g.nodes)
      if (node.op == Op::Constant) c = node.attrs.tensor("value");
    ASSERT_NE(c, nullptr);
    ASSERT_EQ(c->dtype(), (*ref)[0].dtype());
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(c->data<uint16_t>()[i], (*ref)[0].data<uint16_t>()[i]) << to << " element " << i << " = " << v[static_cast<size_t>(i)];
  }
}

TEST(GraphPasses, SimplifiedGraphComputesTheSame) {
  Graph g = parse(R"(graph @g(%x: f32[3, 5]) -> (f32[3, 5], f32[3, 5]) {
  %c = constant dense<2.0> : f32[]
  %d = add(%c, %c)
  %a = mul(%x, %d)
  %b = mul(%x, %d)
  return %a, %b
})");
  Graph s = g;
  ASSERT_TRUE(passes::simplify(s, runtime::evaluate_on_reference).is_ok());
  EXPECT_EQ(count(s, Op::Mul), 1);
  EXPECT_EQ(count(s, Op::Add), 0);
  Tensor x = Tensor::zeros(DType::f32, {3, 5});
  for (int i = 0; i < 15; ++i) x.data<float>()[i] = 0.5f * static_cast<float>(i) - 3.f;
  auto m = Model::compile(s, {.device = "cpu"});
  ASSERT_TRUE(m.has_value());
  std::vector<Tensor> in{x};
  auto out = (*m)->run(in);
  ASSERT_TRUE(out.has_value()) << out.status().to_string();
  for (int i = 0; i < 15; ++i) {
    EXPECT_FLOAT_EQ((*out)[0].data<float>()[i], 4.f * x.data<float>()[i]);
    EXPECT_FLOAT_EQ((*out)[1].data<float>()[i], 4.f * x.data<float>()[i]);
  }
}

}  // namespace
}  // namespace rlx
