// Runs on a GPU: small graphs on the cuda device against the reference interpreter with fresh
// random inputs (a cuBLAS GEMM with transposed operands and batches, a fused softmax, f16 and
// f64 paths, and a graph run twice to check that weights stay resident). Without a GPU every
// test is skipped with the CUDA error as the reason. The op conformance suite
// (rlx_tests_conformance) covers every op on cuda when a GPU is present.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "rlx/compile.h"
#include "rlx/op_builder.h"

namespace rlx {
namespace {

// The reason cuda cannot run here, or "" when it can.
std::string cuda_unavailable() {
  for (const DeviceInfo& d : list_devices())
    if (d.name == "cuda") return d.available ? "" : d.reason;
  return "rlx was built without the cuda device";
}

#define SKIP_WITHOUT_GPU()                                                              \
  do {                                                                                  \
    if (std::string why = cuda_unavailable(); !why.empty()) GTEST_SKIP() << "cuda: " << why; \
  } while (0)

std::vector<Tensor> random_inputs(const Graph& g, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(-2, 2);
  std::vector<Tensor> xs;
  for (ValueId v : g.inputs) {
    const TensorType& t = g.type(v);
    Sizes s = *static_sizes(t.shape);
    std::vector<double> vals(static_cast<size_t>(numel(s)));
    for (double& x : vals) x = u(rng);
    xs.push_back(Tensor::from_f64(t.dtype, s, vals));
  }
  return xs;
}

// Runs g on cuda and ref, twice (the second run reuses the compiled program and resident
// weights), and compares within rtol.
void check_against_ref(const Graph& g, double rtol, bool expect_native) {
  std::random_device rd;
  const unsigned seed = rd();
  std::mt19937 rng(seed);
  auto cu = Model::compile(g, {.device = "cuda"});
  ASSERT_TRUE(cu.has_value()) << cu.status().to_string();
  auto ref = Model::compile(g, {.device = "ref"});
  ASSERT_TRUE(ref.has_value()) << ref.status().to_string();
  for (int run = 0; run < 2; ++run) {
    const std::vector<Tensor> xs = random_inputs(g, rng);
    auto a = (*cu)->run(xs);
    ASSERT_TRUE(a.has_value()) << a.status().to_string();
    auto b = (*ref)->run(xs);
    ASSERT_TRUE(b.has_value()) << b.status().to_string();
    for (size_t o = 0; o < a->size(); ++o) {
      const std::vector<double> x = (*a)[o].to_f64(), y = (*b)[o].to_f64();
      ASSERT_EQ(x.size(), y.size());
      for (size_t j = 0; j < x.size(); ++j)
        ASSERT_NEAR(x[j], y[j], rtol * (1 + std::fabs(y[j]))) << "output " << o << " element " << j << " seed " << seed;
    }
  }
  auto var = (*cu)->variant_for(random_inputs(g, rng));
  ASSERT_TRUE(var.has_value());
  if (expect_native) EXPECT_GT((*var)->report.count(DispatchPath::native), 0) << (*var)->report.to_text();
}

Graph mlp(DType dt, bool transposed_weight) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{dt, to_shape(Sizes{37, 64})});
  ValueId w = g.add_input("w", TensorType{dt, to_shape(transposed_weight ? Sizes{48, 64} : Sizes{64, 48})});
  GraphBuilder gb(g);
  OpBuilder o(gb);
  ValueId wt = transposed_weight ? o.transpose(w, {1, 0}) : w;
  ValueId h = o.matmul(x, wt);
  g.outputs = {o.softmax(o.gelu(h), -1)};
  EXPECT_TRUE(o.ok()) << o.status().to_string();
  return g;
}

TEST(CudaRun, MatmulGeluSoftmaxF32) {
  SKIP_WITHOUT_GPU();
  check_against_ref(mlp(DType::f32, false), 1e-4, true);
}

TEST(CudaRun, TransposedWeightF32) {
  SKIP_WITHOUT_GPU();
  check_against_ref(mlp(DType::f32, true), 1e-4, true);
}

TEST(CudaRun, F64) {
  SKIP_WITHOUT_GPU();
  check_against_ref(mlp(DType::f64, false), 1e-10, true);
}

TEST(CudaRun, F16) {
  SKIP_WITHOUT_GPU();
  check_against_ref(mlp(DType::f16, false), 2e-2, true);
}

TEST(CudaRun, BatchedMatmul) {
  SKIP_WITHOUT_GPU();
  Graph g;
  ValueId a = g.add_input("a", TensorType{DType::f32, to_shape(Sizes{3, 5, 33, 17})});
  ValueId b = g.add_input("b", TensorType{DType::f32, to_shape(Sizes{3, 5, 17, 29})});
  GraphBuilder gb(g);
  OpBuilder o(gb);
  g.outputs = {o.matmul(a, b)};
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  check_against_ref(g, 1e-4, true);
}

}  // namespace
}  // namespace rlx
