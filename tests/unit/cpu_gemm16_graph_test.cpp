// f16 and bf16 matmul / gemm / dot on the CPU device, end to end: the dispatch report names
// the 16-bit GEMM kernel, weights are packed once as 16-bit panels (weight_bytes), an
// elementwise consumer is fused as the GEMM's epilogue, and the results match the reference
// device on fresh random inputs within the roundings of the 16-bit type.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "rlx/compile.h"
#include "rlx/dtype.h"
#include "rlx/op_builder.h"

namespace rlx {
namespace {

// One ulp of a 16-bit type at magnitude x.
double ulp16(double x, DType t) {
  const int mant = t == DType::f16 ? 10 : 7;
  int e = 0;
  std::frexp(std::max(x, 1e-30), &e);
  return std::ldexp(1.0, std::max(e - 1, t == DType::f16 ? -14 : -126) - mant);
}

Tensor random_tensor(DType t, const Sizes& s, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(-1, 1);
  Tensor x = Tensor::zeros(t, s);
  for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, u(rng));  // rounded to t
  return x;
}

std::string native_how(const DispatchReport& r, Op op) {
  for (const NodeDecision& d : r.nodes)
    if (d.op == op) return d.path == DispatchPath::native ? d.how : "not native: " + d.native_refused;
  return "no such node";
}

// y = relu(x @ w + r) with w a weight: the matmul runs natively with w packed as 16-bit panels,
// and the add + relu run as its epilogue.
void check_matmul_with_epilogue(DType t, int64_t m, int64_t k, int64_t n, std::mt19937& rng) {
  SCOPED_TRACE(std::string(dtype_name(t)) + " m=" + std::to_string(m) + " k=" + std::to_string(k) + " n=" + std::to_string(n));
  Graph g;
  ValueId x = g.add_input("x", TensorType{t, to_shape({m, k})});
  ValueId r = g.add_input("r", TensorType{t, to_shape({m, n})});
  GraphBuilder gb(g);
  OpBuilder o(gb);
  ValueId w = o.param("w", TensorType{t, to_shape({k, n})});
  g.outputs = {o.relu(o.add(o.matmul(x, w), r))};
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  g.weights["w"] = random_tensor(t, {k, n}, rng);

  auto report = explain(g, "cpu", DispatchPolicy{});
  ASSERT_TRUE(report.has_value()) << report.status().to_string();
  const std::string how = native_how(*report, Op::MatMul);
  EXPECT_NE(how.find(cat(" ", dtype_name(t), " m=")), std::string::npos) << how;
  EXPECT_EQ(how.rfind("gemm ", 0), 0u) << how;

  auto cpu = Model::compile(g, {.device = "cpu"});
  ASSERT_TRUE(cpu.has_value()) << cpu.status().to_string();
  auto ref = Model::compile(g, {.device = "ref"});
  ASSERT_TRUE(ref.has_value()) << ref.status().to_string();
  std::vector<Tensor> in{random_tensor(t, {m, k}, rng), random_tensor(t, {m, n}, rng)};
  auto a = (*cpu)->run(in);
  ASSERT_TRUE(a.has_value()) << a.status().to_string();
  auto b = (*ref)->run(in);
  ASSERT_TRUE(b.has_value()) << b.status().to_string();

  auto variant = (*cpu)->prepare({});
  ASSERT_TRUE(variant.has_value()) << variant.status().to_string();
  const ExecStats& st = (*variant)->executable->stats();
  EXPECT_NE(st.kernel_listing.find(" epilogue "), std::string::npos) << "add + relu fused into the GEMM\n"
                                                                        << st.kernel_listing;
  // the weight itself plus its panels, which keep 2 bytes per element (padded to 32 columns;
  // for the AMX tiles, each K block of at most 384 rows padded to a multiple of 32 rows, and
  // an f16 weight in two parts, hi and lo)
  const size_t wbytes = static_cast<size_t>(k * n * 2);
  int64_t k_rows = k;
  if (st.kernel_listing.find("amx-bf16") != std::string::npos && (t != DType::f16 || m >= 32)) {
    const int64_t nkb = (k + 383) / 384, kc = (k + nkb - 1) / nkb;
    k_rows = (nkb - 1) * ((kc + 31) / 32 * 32) + (k - (nkb - 1) * kc + 31) / 32 * 32;
    if (t == DType::f16) k_rows *= 2;
  }
  const size_t panels = static_cast<size_t>(k_rows * ((n + 31) / 32 * 32) * 2);
  EXPECT_LE(st.weight_bytes, wbytes + panels + 64) << "weights packed as 16-bit panels";
  EXPECT_GE(st.weight_bytes, wbytes + panels) << "the weight was packed";

  const Tensor& xs = in[0];
  const Tensor& rs = in[1];
  const Tensor& ws = g.weights["w"];
  int failures = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double y = 0, mag = 0;
      for (int64_t p = 0; p < k; ++p) {
        y += xs.get_f64(i * k + p) * ws.get_f64(p * n + j);
        mag += std::fabs(xs.get_f64(i * k + p) * ws.get_f64(p * n + j));
      }
      // y rounded once (to nearest, from f32 here, from f64 on ref), then add and relu
      // each rounded once: one ulp of each on either side, plus the f32 accumulation
      const double z = y + rs.get_f64(i * n + j);
      const double tol = ulp16(std::fabs(y), t) + ulp16(std::fabs(z), t) + (k + 2) * std::ldexp(1.0, -24) * mag;
      const double got = (*a)[0].get_f64(i * n + j), want = (*b)[0].get_f64(i * n + j);
      if (!(std::fabs(got - want) <= tol) && ++failures <= 5)
        ADD_FAILURE() << "y[" << i << "][" << j << "] = " << got << ", ref " << want << " (tol " << tol << ")";
    }
  EXPECT_EQ(failures, 0);
}

TEST(CpuGemm16Graph, MatMulWithWeightAndEpilogue) {
  std::mt19937 rng(std::random_device{}());
  for (DType t : {DType::f16, DType::bf16}) {
    check_matmul_with_epilogue(t, 1, 257, 100, rng);  // decode-like
    check_matmul_with_epilogue(t, 33, 100, 7, rng);
    check_matmul_with_epilogue(t, 70, 400, 65, rng);  // two K blocks
  }
}

// gemm (bias row, full C with beta) and dot claimed natively in 16 bits, with the kernel
// named in the report, and matching ref.
TEST(CpuGemm16Graph, GemmAndDotAreNative) {
  std::mt19937 rng(std::random_device{}());
  for (DType t : {DType::f16, DType::bf16}) {
    for (int variant = 0; variant < 3; ++variant) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " variant " + std::to_string(variant));
      const int64_t m = 9, k = 45, n = 21;
      Graph g;
      ValueId a = g.add_input("a", TensorType{t, to_shape({m, k})});
      ValueId b = g.add_input("b", TensorType{t, to_shape({n, k})});
      GraphBuilder gb(g);
      OpBuilder o(gb);
      Op op = Op::Gemm;
      std::vector<Tensor> in{random_tensor(t, {m, k}, rng), random_tensor(t, {n, k}, rng)};
      if (variant == 0) {
        ValueId c = g.add_input("c", TensorType{t, to_shape({n})});
        in.push_back(random_tensor(t, {n}, rng));
        g.outputs = {o.op(Op::Gemm, {a, b, c}, Attrs{{"trans_b", int64_t{1}}, {"alpha", 0.5}, {"beta", 2.0}})};
      } else if (variant == 1) {
        ValueId c = g.add_input("c", TensorType{t, to_shape({m, n})});
        in.push_back(random_tensor(t, {m, n}, rng));
        g.outputs = {o.op(Op::Gemm, {a, b, c}, Attrs{{"trans_b", int64_t{1}}, {"beta", -1.5}})};
      } else {
        op = Op::Dot;
        g.outputs = {o.op(Op::Dot, {a, b}, Attrs{{"lhs_contract", std::vector<int64_t>{1}}, {"rhs_contract", std::vector<int64_t>{1}}})};
      }
      ASSERT_TRUE(o.ok()) << o.status().to_string();
      auto report = explain(g, "cpu", DispatchPolicy{});
      ASSERT_TRUE(report.has_value()) << report.status().to_string();
      const std::string how = native_how(*report, op);
      EXPECT_NE(how.find(cat(" ", dtype_name(t), " m=9 n=21 k=45")), std::string::npos) << how;
      auto cpu = Model::compile(g, {.device = "cpu"});
      ASSERT_TRUE(cpu.has_value()) << cpu.status().to_string();
      auto ref = Model::compile(g, {.device = "ref"});
      ASSERT_TRUE(ref.has_value()) << ref.status().to_string();
      auto x = (*cpu)->run(in);
      ASSERT_TRUE(x.has_value()) << x.status().to_string();
      auto y = (*ref)->run(in);
      ASSERT_TRUE(y.has_value()) << y.status().to_string();
      const double alpha = variant == 0 ? 0.5 : 1.0, beta = variant == 0 ? 2.0 : -1.5;
      for (int64_t i = 0; i < m * n; ++i) {
        const int64_t r = i / n, c = i % n;
        // ref rounds each primitive of the decomposed gemm (alpha*AB, beta*C, the sum) to
        // the 16-bit type, cpu rounds once: a few ulps at the size of those terms
        double mag = 0;
        for (int64_t p = 0; p < k; ++p) mag += std::fabs(in[0].get_f64(r * k + p) * in[1].get_f64(c * k + p));
        mag *= alpha;
        if (variant == 0) mag += std::fabs(beta * in[2].get_f64(c));
        if (variant == 1) mag += std::fabs(beta * in[2].get_f64(i));
        const double want = (*y)[0].get_f64(i);
        const double tol = 3 * ulp16(mag, t) + ulp16(std::fabs(want), t);
        ASSERT_NEAR((*x)[0].get_f64(i), want, tol) << i;
      }
    }
  }
}

}  // namespace
}  // namespace rlx
