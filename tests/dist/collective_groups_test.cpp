// Collective graph ops over several communicator groups (dist::CommunicatorGroups, the
// `group` attribute) and Megatron's all-reduce (grad = "identity"), in one process: a node of
// group 1 runs over the second group, a graph compiled with a plain communicator says it has no
// such group, and the identity gradient adds no collective to the backward pass while the
// default one does. The multi-rank behaviour is checked end to end by
// tensor_parallel_train_test.cpp (--tp with --dp: both groups in one step graph).
#include <gtest/gtest.h>

#include <random>

#include "dist/collective_ops.h"
#include "rlx/compile.h"
#include "rlx/ir_text.h"
#include "train/autodiff.h"

namespace rlx {
namespace {

const char* kGroup1 = R"(
graph @g1(%x: f32[3, 5]) -> (f32[3, 5]) {
  %t = tanh(%x)
  %r = all_reduce(%t) {reduce = "sum", group = 1}
  return %r
}
)";

Tensor random_tensor(Sizes s, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> v(static_cast<size_t>(numel(s)));
  for (double& x : v) x = u(rng);
  return Tensor::from_f64(DType::f32, std::move(s), v);
}

TEST(CollectiveGroups, NodeOfGroupOneRunsOverTheSecondGroup) {
  auto g = parse_graph(kGroup1);
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  std::mt19937_64 rng(std::random_device{}());
  const Tensor x = random_tensor({3, 5}, rng);
  const std::vector<Tensor> in{x};
  auto groups = std::make_shared<dist::CommunicatorGroups>(std::vector<std::shared_ptr<dist::Communicator>>{
      dist::single_process_communicator(), dist::single_process_communicator()});
  EXPECT_EQ(groups->num_groups(), 2);
  for (const char* device : {"cpu", "ref"}) {
    auto m = Model::compile(*g, {.device = device, .comm = groups});
    ASSERT_TRUE(m.has_value()) << device << ": " << m.status().to_string();
    auto out = (*m)->run(in);
    ASSERT_TRUE(out.has_value()) << device << ": " << out.status().to_string();
    for (int64_t i = 0; i < x.numel(); ++i) EXPECT_NEAR((*out)[0].get_f64(i), std::tanh(x.get_f64(i)), 1e-6) << device;
    // a plain communicator has no group 1: an error naming the node, not a silent group 0
    auto plain = Model::compile(*g, {.device = device, .comm = dist::single_process_communicator()});
    ASSERT_TRUE(plain.has_value()) << plain.status().to_string();
    auto bad = (*plain)->run(in);
    ASSERT_FALSE(bad.has_value()) << device;
    EXPECT_NE(bad.status().message().find("communicator group 1"), std::string::npos) << bad.status().message();
  }
}

int count_all_reduces(const Graph& g) {
  int n = 0;
  for (const Node& node : g.nodes) n += node.op == Op::AllReduce;
  return n;
}

TEST(CollectiveGroups, MegatronAllReduceHasTheIdentityGradient) {
  for (const std::string grad : {"identity", "sum"}) {
    auto g = parse_graph(R"(
graph @tp(%x: f32[4, 6], %w: f32[6, 3]) -> (f32[]) {
  %p = matmul(%x, %w)
  %s = all_reduce(%p) {reduce = "sum", group = 1, grad = ")" + grad + R"("}
  %l = reduce_sum(%s) {axes = [0, 1], keepdims = 0}
  return %l
}
)");
    ASSERT_TRUE(g.has_value()) << g.status().to_string();
    Graph d = *g;
    const ValueId w = d.inputs[1];
    auto gr = train::differentiate(d, d.outputs[0], std::vector<ValueId>{w});
    ASSERT_TRUE(gr.has_value()) << gr.status().to_string();
    // identity: only the forward all-reduce; sum: its adjoint too, over the same group
    EXPECT_EQ(count_all_reduces(d), grad == "identity" ? 1 : 2) << grad;
    for (const Node& n : d.nodes)
      if (n.op == Op::AllReduce) EXPECT_EQ(n.attrs.i("group", 0), 1) << grad;
  }
}

}  // namespace
}  // namespace rlx
