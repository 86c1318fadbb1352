// Donated inputs: outputs written into the memory of inputs (in-place parameter updates).
#include <gtest/gtest.h>

#include "rlx/compile.h"
#include "rlx/ir_text.h"

namespace rlx {
namespace {

TEST(Donation, ParameterUpdatedInPlace) {
  // loss = sum((x @ w)^2); w' = w - 0.1 * grad, where the gradient's kernels read w before
  // the update overwrites it
  auto g = parse_graph(R"(graph @step(%w: f32[8, 4], %x: f32[3, 8]) -> (f32[8, 4], f32[]) {
  %y = matmul(%x, %w)
  %yy = mul(%y, %y)
  %l = reduce_sum(%yy) {axes = [0, 1], keepdims = 0}
  %xt = transpose(%x) {perm = [1, 0]}
  %two = constant dense<2.0> : f32[]
  %gy = mul(%y, %two)
  %gw = matmul(%xt, %gy)
  %lr = constant dense<0.1> : f32[]
  %step = mul(%gw, %lr)
  %w2 = sub(%w, %step)
  return %w2, %l
})");
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  Tensor w = Tensor::zeros(DType::f32, {8, 4}), x = Tensor::zeros(DType::f32, {3, 8});
  for (int i = 0; i < 32; ++i) w.data<float>()[i] = 0.05f * static_cast<float>(i % 7) - 0.1f;
  for (int i = 0; i < 24; ++i) x.data<float>()[i] = 0.1f * static_cast<float>(i % 5) - 0.2f;
  // expected: a normal run
  auto plain = Model::compile(*g, {.device = "cpu"});
  ASSERT_TRUE(plain.has_value());
  std::vector<Tensor> in{w, x};
  auto want = (*plain)->run(in);
  ASSERT_TRUE(want.has_value());
  // donated: w is updated where it lies
  auto model = Model::compile(*g, {.device = "cpu", .donate = {{0, 0}}});
  ASSERT_TRUE(model.has_value());
  Tensor w_inplace = w.clone();
  std::vector<Tensor> in2{w_inplace, x};
  auto var = (*model)->variant_for(in2);
  ASSERT_TRUE(var.has_value()) << var.status().to_string();
  std::vector<Tensor> out{w_inplace, Tensor::zeros(DType::f32, {})};
  Status s = (*var)->executable->run_into(in2, out);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(w_inplace.data<float>()[i], (*want)[0].data<float>()[i], 1e-6) << i;
  EXPECT_NEAR(out[1].data<float>()[0], (*want)[1].data<float>()[0], 1e-5);
  // without donation the same aliasing is refused
  auto var_plain = (*plain)->variant_for(in2);
  Status refused = (*var_plain)->executable->run_into(in2, out);
  EXPECT_EQ(refused.code(), ErrorCode::invalid_argument);
}

TEST(Donation, RefusedWhenTheWriterReadsOtherElements) {
  auto g = parse_graph(R"(graph @t(%a: f32[4, 4]) -> (f32[4, 4]) {
  %b = transpose(%a) {perm = [1, 0]}
  return %b
})");
  ASSERT_TRUE(g.has_value());
  auto model = Model::compile(*g, {.device = "cpu", .donate = {{0, 0}}});
  ASSERT_TRUE(model.has_value());
  auto var = (*model)->prepare({});
  ASSERT_FALSE(var.has_value());
  EXPECT_NE(var.status().message().find("other elements"), std::string::npos) << var.status().message();
}

}  // namespace
}  // namespace rlx

namespace rlx {
namespace {

// A KV-cache update: scatter new rows into a donated cache; only the new slots are written.
TEST(Donation, ScatterUpdatesACacheInPlace) {
  auto g = parse_graph(R"(graph @upd(%cache: f32[2, 8, 4], %pos: i64[3], %new: f32[2, 3, 4]) -> (f32[2, 8, 4]) {
  %c2 = scatter(%cache, %pos, %new) {axis = 1}
  return %c2
})");
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  Tensor cache = Tensor::zeros(DType::f32, {2, 8, 4});
  for (int i = 0; i < 64; ++i) cache.data<float>()[i] = static_cast<float>(i);
  Tensor pos = Tensor::from_vector(DType::i64, {3}, std::vector<int64_t>{5, 1, -1});
  Tensor upd = Tensor::zeros(DType::f32, {2, 3, 4});
  for (int i = 0; i < 24; ++i) upd.data<float>()[i] = -1.f - static_cast<float>(i);
  auto ref = Model::compile(*g, {.device = "ref"});
  std::vector<Tensor> in{cache, pos, upd};
  auto want = (*ref)->run(in);
  ASSERT_TRUE(want.has_value()) << want.status().to_string();
  auto model = Model::compile(*g, {.device = "cpu", .donate = {{0, 0}}});
  ASSERT_TRUE(model.has_value());
  Tensor c = cache.clone();
  std::vector<Tensor> in2{c, pos, upd};
  auto var = (*model)->variant_for(in2);
  ASSERT_TRUE(var.has_value()) << var.status().to_string();
  std::vector<Tensor> out{c};
  ASSERT_TRUE((*var)->executable->run_into(in2, out).is_ok());
  for (int i = 0; i < 64; ++i) EXPECT_EQ(c.data<float>()[i], (*want)[0].data<float>()[i]) << i;
}

}  // namespace
}  // namespace rlx
