// The cuBLAS call of the cuda device checked without a GPU: for dot nodes in every layout the
// planner maps onto one GEMM (plain, transposed operands, batched, several free dims), the
// column-major call the device makes (cuda::column_major_gemm of cuda::gemm_plan) is executed
// with the host BLAS (cblas_sgemm in column-major order, the convention cuBLAS uses, batch by
// batch with the same strides) and compared with the reference interpreter on random inputs.
#include <gtest/gtest.h>

#include <cblas.h>

#include <cmath>
#include <random>

#include "backends/cuda/cuda_codegen.h"
#include "rlx/compile.h"
#include "rlx/op_builder.h"

namespace rlx {
namespace {

struct DotCase {
  std::string name;
  Sizes a, b;
  std::vector<int64_t> lb, rb, lc, rc;
};

void run_case(const DotCase& c) {
  SCOPED_TRACE(c.name);
  Graph g;
  ValueId a = g.add_input("a", TensorType{DType::f32, to_shape(c.a)});
  ValueId b = g.add_input("b", TensorType{DType::f32, to_shape(c.b)});
  GraphBuilder gb(g);
  OpBuilder o(gb);
  Attrs at{{"lhs_batch", c.lb}, {"rhs_batch", c.rb}, {"lhs_contract", c.lc}, {"rhs_contract", c.rc}};
  g.outputs = {o.op(Op::Dot, {a, b}, at)};
  ASSERT_TRUE(o.ok()) << o.status().to_string();

  // the device's decision and plan for this node
  std::vector<TensorType> ins{g.type(a), g.type(b)}, outs{g.type(g.outputs[0])};
  NodeDesc d{Op::Dot, at, ins, outs, "dot"};
  ASSERT_TRUE(cuda::claim_native(d, 90).ok) << cuda::claim_native(d, 90).text;
  auto plan = cuda::gemm_plan(d, 90);
  ASSERT_TRUE(plan.has_value()) << plan.status().to_string();
  const cuda::ColumnMajorGemm cm = cuda::column_major_gemm(*plan);

  std::random_device rd;
  const unsigned seed = rd();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-2, 2);
  auto random = [&](const Sizes& s) {
    std::vector<double> v(static_cast<size_t>(numel(s)));
    for (double& x : v) x = u(rng);
    return Tensor::from_f64(DType::f32, s, v);
  };
  std::vector<Tensor> xs{random(c.a), random(c.b)};
  auto ref = Model::compile(g, {.device = "ref"});
  ASSERT_TRUE(ref.has_value()) << ref.status().to_string();
  auto want = (*ref)->run(xs);
  ASSERT_TRUE(want.has_value()) << want.status().to_string();
  const std::vector<double> w = (*want)[0].to_f64();

  // the call as cuBLAS gets it: B first, A second, column-major
  const std::vector<double> ad = xs[0].to_f64(), bd = xs[1].to_f64();
  std::vector<float> af(ad.begin(), ad.end()), bf(bd.begin(), bd.end());
  std::vector<float> cf(w.size(), std::nanf(""));
  for (int64_t i = 0; i < cm.batch; ++i)
    cblas_sgemm(CblasColMajor, cm.trans_first ? CblasTrans : CblasNoTrans, cm.trans_second ? CblasTrans : CblasNoTrans,
                static_cast<int>(cm.m), static_cast<int>(cm.n), static_cast<int>(cm.k), plan->alpha,
                bf.data() + i * cm.stride_first, static_cast<int>(cm.ld_first), af.data() + i * cm.stride_second,
                static_cast<int>(cm.ld_second), 0.f, cf.data() + i * cm.stride_c, static_cast<int>(cm.ldc));
  for (size_t j = 0; j < w.size(); ++j)
    ASSERT_NEAR(cf[j], w[j], 1e-4 * (1 + std::fabs(w[j]))) << "element " << j << " seed " << seed;
}

TEST(CudaGemmMapping, ColumnMajorCallMatchesReference) {
  const std::vector<DotCase> cases = {
      {"plain", {37, 19}, {19, 23}, {}, {}, {1}, {0}},
      {"transposed a", {19, 37}, {19, 23}, {}, {}, {0}, {0}},
      {"transposed b", {37, 19}, {23, 19}, {}, {}, {1}, {1}},
      {"both transposed", {19, 37}, {23, 19}, {}, {}, {0}, {1}},
      {"batched", {3, 17, 11}, {3, 11, 13}, {0}, {0}, {2}, {1}},
      {"batched transposed b", {4, 17, 11}, {4, 13, 11}, {0}, {0}, {2}, {2}},
      {"two batch dims", {2, 3, 9, 7}, {2, 3, 7, 5}, {0, 1}, {0, 1}, {3}, {2}},
      {"several free dims", {5, 6, 8}, {8, 7}, {}, {}, {2}, {0}},
      {"vector times matrix", {1, 64}, {64, 48}, {}, {}, {1}, {0}},
  };
  for (const DotCase& c : cases) run_case(c);
}

}  // namespace
}  // namespace rlx
