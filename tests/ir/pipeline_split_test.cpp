// The stage-split pass of pipeline parallelism (src/runtime/pipeline.h), on text IR: the stages
// chained together compute what the whole graph computes, and a cut that does not separate
// the graph is an error naming the node that reaches across it.
#include <gtest/gtest.h>

#include <random>

#include "runtime/pipeline.h"
#include "rlx/compile.h"
#include "rlx/ir_text.h"
#include "rlx/verify.h"

namespace rlx {
namespace {

const char* kChain = R"(
graph @chain(%x: f32[4, 6], %w1: f32[6, 8], %w2: f32[8, 3], %w3: f32[3, 5]) -> (f32[4, 5], f32[4, 8]) {
  %a = matmul(%x, %w1)
  %h1 = relu(%a)
  %b = matmul(%h1, %w2)
  %h2 = tanh(%b)
  %c = matmul(%h2, %w3)
  %s = constant dense<0.5> : f32[]
  %y = mul(%c, %s)
  return %y, %h1
}
)";

Tensor random_tensor(Sizes s, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> v(static_cast<size_t>(numel(s)));
  for (double& x : v) x = u(rng);
  return Tensor::from_f64(DType::f32, std::move(s), v);
}

ValueId named(const Graph& g, const std::string& name) {
  for (size_t v = 0; v < g.values.size(); ++v)
    if (g.values[v].name == name) return static_cast<ValueId>(v);
  return kNoValue;
}

TEST(PipelineSplit, StagesChainedEqualTheWholeGraph) {
  auto g = parse_graph(kChain);
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  const std::vector<ValueId> cuts{named(*g, "h1"), named(*g, "h2")};
  auto stages = dist::split_stages(*g, cuts);
  ASSERT_TRUE(stages.has_value()) << stages.status().to_string();
  ASSERT_EQ(stages->size(), 3u);
  for (const dist::Stage& s : *stages) EXPECT_TRUE(verify_graph(s.graph).is_ok()) << verify_graph(s.graph).to_string();
  // stage 0 reads x and w1 and sends h1 (also an output of the whole graph); stage 1 reads the
  // boundary and w2; stage 2 reads the boundary, w3, and holds the constant
  EXPECT_EQ((*stages)[0].inputs_from, (std::vector<int>{0, 1}));
  EXPECT_EQ((*stages)[0].outputs_from, (std::vector<int>{-1, 1}));
  EXPECT_EQ((*stages)[1].inputs_from, (std::vector<int>{-1, 2}));
  EXPECT_EQ((*stages)[1].outputs_from, (std::vector<int>{-1}));
  EXPECT_EQ((*stages)[2].inputs_from, (std::vector<int>{-1, 3}));
  EXPECT_EQ((*stages)[2].outputs_from, (std::vector<int>{0}));

  std::mt19937_64 rng(std::random_device{}());
  std::vector<Tensor> in{random_tensor({4, 6}, rng), random_tensor({6, 8}, rng), random_tensor({8, 3}, rng),
                         random_tensor({3, 5}, rng)};
  auto whole = Model::compile(*g, {.device = "cpu"});
  ASSERT_TRUE(whole.has_value()) << whole.status().to_string();
  auto want = (*whole)->run(in);
  ASSERT_TRUE(want.has_value()) << want.status().to_string();
  Tensor boundary;
  std::vector<Tensor> got(2);
  for (const dist::Stage& s : *stages) {
    std::vector<Tensor> args;
    for (int f : s.inputs_from) args.push_back(f < 0 ? boundary : in[f]);
    auto m = Model::compile(s.graph, {.device = "cpu"});
    ASSERT_TRUE(m.has_value()) << m.status().to_string();
    auto out = (*m)->run(args);
    ASSERT_TRUE(out.has_value()) << out.status().to_string();
    for (size_t i = 0; i < s.outputs_from.size(); ++i) {
      if (s.outputs_from[i] < 0) boundary = (*out)[i];
      else got[s.outputs_from[i]] = (*out)[i];
    }
  }
  for (int o = 0; o < 2; ++o) {
    ASSERT_EQ(got[o].sizes(), (*want)[o].sizes());
    for (int64_t i = 0; i < got[o].numel(); ++i)
      EXPECT_NEAR(got[o].get_f64(i), (*want)[o].get_f64(i), 1e-5) << "output " << o << " element " << i;
  }
}

TEST(PipelineSplit, ACutThatDoesNotSeparateTheGraphIsAnError) {
  // the residual in stage 2 reads %b, computed in stage 1 from the first boundary: no cut
  // carries it (a value computed from graph inputs alone would be recomputed instead)
  auto g = parse_graph(R"(
graph @residual(%x: f32[2, 4], %w: f32[4, 4]) -> (f32[2, 4]) {
  %a = matmul(%x, %w)
  %h1 = relu(%a)
  %b = matmul(%h1, %w)
  %h2 = tanh(%b)
  %c = matmul(%h2, %w)
  %y = add(%c, %b)
  return %y
}
)");
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  const std::vector<ValueId> cuts{named(*g, "h1"), named(*g, "h2")};
  auto stages = dist::split_stages(*g, cuts);
  ASSERT_FALSE(stages.has_value());
  EXPECT_NE(stages.status().message().find("reads b from stage 1"), std::string::npos) << stages.status().message();
  // a cut that is a graph input, and cuts out of order
  const std::vector<ValueId> bad{g->inputs[0]};
  EXPECT_FALSE(dist::split_stages(*g, bad).has_value());
  const std::vector<ValueId> reversed{named(*g, "h2"), named(*g, "h1")};
  auto r = dist::split_stages(*g, reversed);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("cuts must follow the graph's order"), std::string::npos) << r.status().message();
}

TEST(PipelineSplit, ValuesOfTheInputsAloneAreRecomputedWhereTheyAreRead) {
  // %m (from the input %mask only) is read by both stages: each computes its own
  auto g = parse_graph(R"(
graph @masked(%x: f32[2, 4], %mask: f32[2, 4], %w: f32[4, 4]) -> (f32[2, 4]) {
  %m = sigmoid(%mask)
  %a = matmul(%x, %w)
  %h = mul(%a, %m)
  %b = matmul(%h, %w)
  %y = mul(%b, %m)
  return %y
}
)");
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  const std::vector<ValueId> cuts{named(*g, "h")};
  auto stages = dist::split_stages(*g, cuts);
  ASSERT_TRUE(stages.has_value()) << stages.status().to_string();
  for (const dist::Stage& s : *stages) {
    int sigmoids = 0;
    for (const Node& n : s.graph.nodes) sigmoids += n.op == Op::Sigmoid;
    EXPECT_EQ(sigmoids, 1) << s.graph.name;
  }
  EXPECT_EQ((*stages)[1].inputs_from, (std::vector<int>{-1, 1, 2}));
}

}  // namespace
}  // namespace rlx
