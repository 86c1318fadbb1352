// Attention fusion (passes::fuse_attention) on the op-by-op attention of exported BERT-family
// models: what it fuses gives the attention of a plain loop (fresh random inputs, on cpu and
// ref), and what differs from the pattern in one detail is left alone.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "passes/graph_passes.h"
#include "rlx/compile.h"
#include "rlx/ir_text.h"

namespace rlx {
namespace {

constexpr int64_t B = 2, S = 9, H = 3, D = 8;

// q, k, v [B, S, H, D] and an additive mask [B, 1, 1, S] as an exporter writes them; `body`
// is substituted for the lines between the transposes and the softmax.
std::string attention_text(const std::string& scores, const std::string& softmax_axis = "-1",
                           const std::string& extra_output = "") {
  return R"(graph @g(%q: f32[2, 9, 3, 8], %k: f32[2, 9, 3, 8], %v: f32[2, 9, 3, 8], %m: f32[2, 1, 1, 9]) -> (f32[2, 9, 3, 8])" +
         std::string(extra_output.empty() ? "" : ", f32[2, 3, 9, 9]") + R"() {
  %qt = transpose(%q) {perm = [0, 2, 1, 3]} : f32[2, 3, 9, 8]
  %kt = transpose(%k) {perm = [0, 2, 3, 1]} : f32[2, 3, 8, 9]
  %vt = transpose(%v) {perm = [0, 2, 1, 3]} : f32[2, 3, 9, 8]
  %s = matmul(%qt, %kt) : f32[2, 3, 9, 9]
  %c = constant dense<2.8284271247461903> : f32[]
)" + scores + R"(
  %p = softmax(%sm_in) {axis = )" +
         softmax_axis + R"(} : f32[2, 3, 9, 9]
  %o = matmul(%p, %vt) : f32[2, 3, 9, 8]
  %ot = transpose(%o) {perm = [0, 2, 1, 3]} : f32[2, 9, 3, 8]
  return %ot)" + extra_output +
         "\n}";
}

const char* kScaledMasked = R"(  %sc = div(%s, %c) : f32[2, 3, 9, 9]
  %sm_in = add(%sc, %m) : f32[2, 3, 9, 9])";

Graph parse(const std::string& text) {
  auto g = parse_graph(text);
  EXPECT_TRUE(g.has_value()) << g.status().to_string();
  return g.has_value() ? *g : Graph{};
}

int count(const Graph& g, Op op) {
  int n = 0;
  for (const Node& x : g.nodes) n += x.op == op;
  return n;
}

// softmax(q k^T * scale + mask) v per (b, h, i), in double.
std::vector<double> loop_attention(const std::vector<Tensor>& in, double scale) {
  std::vector<double> out(static_cast<size_t>(B * S * H * D));
  auto at = [](const Tensor& t, int64_t b, int64_t s, int64_t h, int64_t d) {
    return t.get_f64(((b * S + s) * H + h) * D + d);
  };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < S; ++i) {
        std::vector<double> w(S);
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < S; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += at(in[0], b, i, h, d) * at(in[1], b, j, h, d);
          w[j] = dot * scale + in[3].get_f64(b * S + j);
          mx = std::max(mx, w[j]);
        }
        for (double& x : w) sum += (x = std::exp(x - mx));
        for (int64_t d = 0; d < D; ++d) {
          double o = 0;
          for (int64_t j = 0; j < S; ++j) o += w[j] / sum * at(in[2], b, j, h, d);
          out[static_cast<size_t>(((b * S + i) * H + h) * D + d)] = o;
        }
      }
  return out;
}

std::vector<Tensor> random_inputs(unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-2, 2);
  std::vector<Tensor> in;
  for (int i = 0; i < 3; ++i) {
    std::vector<double> x(static_cast<size_t>(B * S * H * D));
    for (double& e : x) e = u(rng);
    in.push_back(Tensor::from_f64(DType::f32, {B, S, H, D}, x));
  }
  std::vector<double> m(static_cast<size_t>(B * S));
  for (double& e : m) e = u(rng) > 1.2 ? -10000.0 : 0.0;  // a padding-style mask
  in.push_back(Tensor::from_f64(DType::f32, {B, 1, 1, S}, m));
  return in;
}

TEST(AttentionFusion, ExportedPatternBecomesOneNodeWithTheSameResult) {
  Graph g = parse(attention_text(kScaledMasked));
  Graph fused = g;
  EXPECT_EQ(passes::fuse_attention(fused), 1);
  passes::eliminate_dead_code(fused);
  EXPECT_EQ(count(fused, Op::Attention), 1);
  EXPECT_EQ(count(fused, Op::Softmax), 0);
  EXPECT_EQ(count(fused, Op::MatMul), 0);
  EXPECT_EQ(count(fused, Op::Transpose), 0) << "the output transpose is the attention's bshd output";
  const Node* att = nullptr;
  for (const Node& n : fused.nodes)
    if (n.op == Op::Attention) att = &n;
  ASSERT_NE(att, nullptr);
  EXPECT_EQ(att->attrs.s("layout"), "bshd");
  EXPECT_NEAR(att->attrs.f("scale"), 1 / 2.8284271247461903, 1e-7);  // the f32 constant, inverted

  // the mask on the left of the add
  Graph swapped = parse(attention_text(R"(  %sc = div(%s, %c) : f32[2, 3, 9, 9]
  %sm_in = add(%m, %sc) : f32[2, 3, 9, 9])"));
  EXPECT_EQ(passes::fuse_attention(swapped), 1);

  const unsigned seed = std::random_device{}();
  const auto in = random_inputs(seed);
  const auto want = loop_attention(in, 1 / 2.8284271247461903);
  for (const char* device : {"cpu", "ref"}) {
    auto m = Model::compile(g, {.device = device});
    ASSERT_TRUE(m.has_value()) << m.status().to_string();
    auto var = (*m)->variant_for(in);
    ASSERT_TRUE(var.has_value()) << var.status().to_string();
    EXPECT_EQ(count((*var)->primitive_graph, Op::Softmax), 0) << device << ": the compile path fuses it too";
    auto out = (*m)->run(in);
    ASSERT_TRUE(out.has_value()) << out.status().to_string();
    for (int64_t i = 0; i < (*out)[0].numel(); ++i)
      ASSERT_NEAR((*out)[0].get_f64(i), want[static_cast<size_t>(i)], 2e-5) << device << " element " << i << " seed " << seed;
  }
}

TEST(AttentionFusion, MulScaleNoMaskAndKeptOutputLayout) {
  // scale as a product with the constant first, no mask, and the [B, H, S, D] output read
  // as it is (a transpose back is added)
  Graph g = parse(R"(graph @g(%q: f32[2, 9, 3, 8], %k: f32[2, 9, 3, 8], %v: f32[2, 9, 3, 8]) -> (f32[2, 3, 9, 8]) {
  %qt = transpose(%q) {perm = [0, 2, 1, 3]} : f32[2, 3, 9, 8]
  %kt = transpose(%k) {perm = [0, 2, 3, 1]} : f32[2, 3, 8, 9]
  %vt = transpose(%v) {perm = [0, 2, 1, 3]} : f32[2, 3, 9, 8]
  %s = matmul(%qt, %kt) : f32[2, 3, 9, 9]
  %c = constant dense<0.25> : f32[]
  %sc = mul(%c, %s) : f32[2, 3, 9, 9]
  %p = softmax(%sc) {axis = 3} : f32[2, 3, 9, 9]
  %o = matmul(%p, %vt) : f32[2, 3, 9, 8]
  return %o
})");
  auto in = random_inputs(std::random_device{}());
  std::vector<Tensor> qkv(in.begin(), in.begin() + 3);
  in[3] = Tensor::zeros(DType::f32, {B, 1, 1, S});
  const auto want = loop_attention(in, 0.25);
  auto m = Model::compile(g, {.device = "cpu"});
  ASSERT_TRUE(m.has_value()) << m.status().to_string();
  auto var = (*m)->variant_for(qkv);
  ASSERT_TRUE(var.has_value()) << var.status().to_string();
  EXPECT_EQ(count((*var)->primitive_graph, Op::Softmax), 0);
  auto out = (*m)->run(qkv);
  ASSERT_TRUE(out.has_value()) << out.status().to_string();
  // out is [B, H, S, D]; want is [B, S, H, D]
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t d = 0; d < D; ++d)
          ASSERT_NEAR((*out)[0].get_f64(((b * H + h) * S + s) * D + d),
                      want[static_cast<size_t>(((b * S + s) * H + h) * D + d)], 2e-5);
}

TEST(AttentionFusion, DifferentGraphsAreLeftAlone) {
  // the scale after the mask scales the mask too
  Graph after_mask = parse(attention_text(R"(  %sa = add(%s, %m) : f32[2, 3, 9, 9]
  %sm_in = div(%sa, %c) : f32[2, 3, 9, 9])"));
  EXPECT_EQ(passes::fuse_attention(after_mask), 0);
  // softmax over the queries
  Graph wrong_axis = parse(attention_text(kScaledMasked, "2"));
  EXPECT_EQ(passes::fuse_attention(wrong_axis), 0);
  // the probabilities are also an output of the graph
  Graph probs_read = parse(attention_text(kScaledMasked, "-1", ", %p"));
  EXPECT_EQ(passes::fuse_attention(probs_read), 0);
  // a scale that is not a constant
  Graph runtime_scale = parse(attention_text(R"(  %c2 = exp(%c) : f32[]
  %sc = div(%s, %m) : f32[2, 3, 9, 9]
  %sm_in = add(%sc, %m) : f32[2, 3, 9, 9])"));
  EXPECT_EQ(passes::fuse_attention(runtime_scale), 0);
}

}  // namespace
}  // namespace rlx
