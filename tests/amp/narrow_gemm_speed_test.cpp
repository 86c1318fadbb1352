// Why the autocast pass widens narrow operands onto the f32 GEMM on the CPU: the same product
// (256 x 384 by 384 x 1536, MiniLM's FFN shape with 256 tokens) as the CPU's generated narrow dot loop
// (Compute::narrow with matmul and dot forced to the common-IR path) and as the widened form, in
// the same run; and Compute::narrow as it runs by default now, on the CPU's native 16-bit GEMM
// (kernels/gemm.h). Prints the times; asserts only that all agree and that the widened form is
// not slower than the generated loop.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "passes/autocast.h"
#include "rlx/compile.h"
#include "rlx/op_builder.h"

namespace rlx {
namespace {

double best_ms(Model& m, const std::vector<Tensor>& in, std::vector<Tensor>* out) {
  auto first = m.run(in);
  EXPECT_TRUE(first.has_value()) << first.status().to_string();
  double best = 1e30;
  for (int r = 0; r < 3; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    auto o = m.run(in);
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  if (out && first.has_value()) *out = *first;
  return best;
}

TEST(NarrowGemm, WidenedFormIsFasterThanTheGeneratedNarrowLoop) {
  const int64_t m = 256, k = 384, n = 1536;
  std::mt19937 rng(3);
  std::normal_distribution<double> d(0, 1);
  std::vector<double> xv(static_cast<size_t>(m * k)), wv(static_cast<size_t>(k * n));
  for (double& v : xv) v = d(rng);
  for (double& v : wv) v = d(rng) * 0.05;
  const Tensor x = Tensor::from_f64(DType::f32, {m, k}, xv), w = Tensor::from_f64(DType::f32, {k, n}, wv);
  for (DType dt : {DType::bf16, DType::f16}) {
    std::vector<Tensor> outs[4];
    double ms[4];
    for (int form = 0; form < 4; ++form) {  // f32, widened, narrow (generated loop), narrow (native)
      Graph g;
      const ValueId a = g.add_input("x", x.type()), b = g.add_input("w", w.type());
      GraphBuilder gb(g);
      OpBuilder o(gb);
      g.outputs = {o.matmul(a, b)};
      ASSERT_TRUE(o.status().is_ok());
      if (form > 0) {
        auto r = passes::autocast(g, {.narrow = dt,
                                      .compute = form == 1 ? passes::AutocastOptions::Compute::widened
                                                           : passes::AutocastOptions::Compute::narrow});
        ASSERT_TRUE(r.has_value()) << r.status().to_string();
      }
      CompileOptions opt{.device = "cpu"};
      if (form == 2)  // the generated loop: the native 16-bit GEMM would claim the product
        for (Op op : {Op::MatMul, Op::Dot}) opt.policy.per_op[op] = PathPolicy::force_common;
      auto model = Model::compile(g, opt);
      ASSERT_TRUE(model.has_value()) << model.status().to_string();
      ms[form] = best_ms(**model, {x, w}, &outs[form]);
    }
    const auto wide = outs[1][0].to_f64();
    for (int form : {2, 3}) {
      const auto nar = outs[form][0].to_f64();
      double maxd = 0, maxa = 0;
      for (size_t i = 0; i < wide.size(); ++i) {
        maxd = std::max(maxd, std::fabs(wide[i] - nar[i]));
        maxa = std::max(maxa, std::fabs(wide[i]));
      }
      // the narrow form rounds its result to the narrow type; the widened one keeps f32
      EXPECT_LT(maxd, (dt == DType::bf16 ? 1.0 / 128 : 1.0 / 1024) * maxa) << "form " << form;
    }
    std::printf("matmul %lldx%lldx%lld %s: f32 GEMM %.1f ms, widened (narrow operands on the f32 GEMM) %.1f ms, "
                "generated narrow loop %.1f ms (%.1fx the widened form), native 16-bit GEMM %.1f ms (%.2fx)\n",
                static_cast<long long>(m), static_cast<long long>(k), static_cast<long long>(n),
                std::string(dtype_name(dt)).c_str(), ms[0], ms[1], ms[2], ms[2] / ms[1], ms[3], ms[3] / ms[1]);
    EXPECT_LT(ms[1], ms[2]) << "the widened form should beat the generated loop";
  }
}

}  // namespace
}  // namespace rlx
