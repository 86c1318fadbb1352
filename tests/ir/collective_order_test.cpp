// The pass that issues collectives early (sched::order_collectives_early), on text IR: a
// collective appended at the end of a graph moves up to just after the value it reduces, the
// order stays topological, a graph without collectives keeps its order, and the CPU device
// (which runs the moved collectives asynchronously) computes what the reference does.
#include <gtest/gtest.h>

#include <random>

#include "passes/schedule.h"
#include "rlx/compile.h"
#include "rlx/ir_text.h"
#include "rlx/verify.h"

namespace rlx {
namespace {

// Two "buckets" appended after all the work, as the data-parallel step builds them.
const char* kLate = R"(
graph @late(%x: f32[4, 6], %w1: f32[6, 8], %w2: f32[8, 3]) -> (f32[4, 8], f32[4, 3], f32[4, 3]) {
  %a = matmul(%x, %w1)
  %h = tanh(%a)
  %b = matmul(%h, %w2)
  %c = tanh(%b)
  %d = mul(%c, %c)
  %r1 = all_reduce(%a) {reduce = "sum"}
  %r2 = all_reduce(%c) {reduce = "sum"}
  return %r1, %r2, %d
}
)";

int node_of(const Graph& g, const std::string& value) {
  for (size_t v = 0; v < g.values.size(); ++v)
    if (g.values[v].name == value) return g.values[v].producer;
  return -1;
}

Tensor random_tensor(Sizes s, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> v(static_cast<size_t>(numel(s)));
  for (double& x : v) x = u(rng);
  return Tensor::from_f64(DType::f32, std::move(s), v);
}

TEST(CollectiveOrder, CollectivesMoveUpToTheirInputs) {
  auto g = parse_graph(kLate);
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  Graph moved = *g;
  sched::order_collectives_early(moved);
  ASSERT_TRUE(verify_graph(moved).is_ok()) << verify_graph(moved).to_string();
  ASSERT_EQ(moved.nodes.size(), g->nodes.size());
  // r1 right after a (before the tanh that feeds the other bucket); r2 right after c, before
  // d, which feeds no collective
  EXPECT_EQ(node_of(moved, "r1"), node_of(moved, "a") + 1);
  EXPECT_EQ(node_of(moved, "r2"), node_of(moved, "c") + 1);
  EXPECT_LT(node_of(moved, "r2"), node_of(moved, "d"));
  EXPECT_GT(node_of(*g, "r1"), node_of(*g, "d"));  // (they were last before)
}

TEST(CollectiveOrder, GraphsWithoutCollectivesKeepTheirOrder) {
  auto g = parse_graph(R"(
graph @plain(%x: f32[4, 6], %w: f32[6, 8]) -> (f32[4, 8], f32[4, 6]) {
  %e = exp(%x)
  %a = matmul(%x, %w)
  %h = tanh(%a)
  return %h, %e
}
)");
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  Graph same = *g;
  sched::order_collectives_early(same);
  ASSERT_EQ(same.nodes.size(), g->nodes.size());
  for (size_t i = 0; i < same.nodes.size(); ++i) EXPECT_EQ(same.nodes[i].outputs, g->nodes[i].outputs) << i;
}

TEST(CollectiveOrder, CpuWithAsynchronousCollectivesEqualsTheReference) {
  auto g = parse_graph(kLate);
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  std::mt19937_64 rng(std::random_device{}());
  const std::vector<Tensor> in{random_tensor({4, 6}, rng), random_tensor({6, 8}, rng), random_tensor({8, 3}, rng)};
  auto ref = Model::compile(*g, {.device = "ref"});
  auto cpu = Model::compile(*g, {.device = "cpu"});
  ASSERT_TRUE(ref.has_value() && cpu.has_value());
  auto want = (*ref)->run(in);
  ASSERT_TRUE(want.has_value()) << want.status().to_string();
  for (int run = 0; run < 3; ++run) {  // the executable's collective queue is reused across runs
    auto got = (*cpu)->run(in);
    ASSERT_TRUE(got.has_value()) << got.status().to_string();
    ASSERT_EQ(got->size(), want->size());
    for (size_t o = 0; o < want->size(); ++o)
      for (int64_t i = 0; i < (*want)[o].numel(); ++i)
        EXPECT_NEAR((*got)[o].get_f64(i), (*want)[o].get_f64(i), 1e-5) << "output " << o << " element " << i;
  }
}

}  // namespace
}  // namespace rlx
