// Dense linear algebra: every linalg op on the cpu (LAPACK) against the reference
// interpreter's plain loops, plus the defining identities checked on the outputs (L L^T = A,
// Q R = A, U S Vh = A, A X = B, ...), in f32 and f64, batched, with fresh random
// well-conditioned inputs. Errors (not positive definite, singular) and the dispatch
// decisions (native on cpu, illegal with reasons elsewhere) are checked too.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "rlx/compile.h"
#include "rlx/dispatch.h"
#include "rlx/linalg.h"
#include "rlx/op_builder.h"

namespace rlx {
namespace {

uint64_t fresh_seed() { return (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}(); }

// Row-major matrices as vectors of double, batch-major.
using M = std::vector<double>;

M random_values(std::mt19937_64& rng, int64_t n, double lo = -1, double hi = 1) {
  std::uniform_real_distribution<double> u(lo, hi);
  M v(static_cast<size_t>(n));
  for (double& x : v) x = u(rng);
  return v;
}

// batch x (n x n) matrices A = R + n I (well conditioned, diagonally dominant), or SPD
// A = R R^T + n I.
M well_conditioned(std::mt19937_64& rng, int64_t batch, int64_t n, bool spd) {
  M a = random_values(rng, batch * n * n);
  if (spd) {
    M s(a.size(), 0.0);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double t = 0;
          for (int64_t p = 0; p < n; ++p) t += a[b * n * n + i * n + p] * a[b * n * n + j * n + p];
          s[b * n * n + i * n + j] = t;
        }
    a = s;
  }
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < n; ++i) a[b * n * n + i * n + i] += static_cast<double>(n);
  return a;
}

M values(const Tensor& t) {
  M v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = t.get_f64(i);
  return v;
}

// c = a (m x k) * b (k x n) for matrix `bi` of each batch
M matmul(const M& a, const M& b, int64_t bi, int64_t m, int64_t k, int64_t n) {
  M c(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) c[i * n + j] += a[bi * m * k + i * k + p] * b[bi * k * n + p * n + j];
  return c;
}

struct Both {
  std::vector<Tensor> cpu, ref;
};

// Builds one node of `op` on inputs of these types and runs it on cpu and ref.
Both run_both(Op op, const std::vector<Tensor>& in, Attrs attrs = {}) {
  Graph g;
  GraphBuilder gb(g);
  OpBuilder o(gb);
  std::vector<ValueId> ins;
  for (size_t i = 0; i < in.size(); ++i) ins.push_back(g.add_input(cat("x", i), in[i].type()));
  g.outputs = o.op_multi(op, ins, attrs);
  EXPECT_TRUE(o.ok()) << o.status().to_string();
  Both r;
  for (const char* dev : {"cpu", "ref"}) {
    auto model = Model::compile(g, {.device = dev});
    EXPECT_TRUE(model.has_value()) << model.status().to_string();
    if (!model) return r;
    auto out = (*model)->run(in);
    EXPECT_TRUE(out.has_value()) << dev << ": " << out.status().to_string();
    if (!out) return r;
    (std::string(dev) == "cpu" ? r.cpu : r.ref) = std::move(*out);
  }
  return r;
}

double tol(DType dt) { return dt == DType::f64 ? 1e-9 : 2e-4; }

void expect_near(const M& got, const M& want, double t, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], t * std::max(1.0, std::abs(want[i]))) << what << " element " << i;
}

void expect_same(const Both& r, DType dt, const std::string& what) {
  ASSERT_EQ(r.cpu.size(), r.ref.size());
  for (size_t i = 0; i < r.cpu.size(); ++i) expect_near(values(r.cpu[i]), values(r.ref[i]), tol(dt) * 10, cat(what, " output ", i, " cpu vs ref"));
}

class Linalg : public ::testing::TestWithParam<DType> {};

TEST_P(Linalg, CholeskyReconstructs) {
  const DType dt = GetParam();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(cat("seed ", seed));
  std::mt19937_64 rng(seed);
  const int64_t batch = 3, n = 7;
  M a = well_conditioned(rng, batch, n, true);
  Both r = run_both(Op::Cholesky, {Tensor::from_f64(dt, {batch, n, n}, a)});
  ASSERT_EQ(r.cpu.size(), 1u);
  expect_same(r, dt, "cholesky");
  const M l = values(r.cpu[0]);
  for (int64_t b = 0; b < batch; ++b) {
    M lt(static_cast<size_t>(batch * n * n));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        lt[b * n * n + i * n + j] = l[b * n * n + j * n + i];
        if (j > i) EXPECT_EQ(l[b * n * n + i * n + j], 0.0) << "upper triangle must be zero";
      }
    expect_near(matmul(l, lt, b, n, n, n), M(a.begin() + b * n * n, a.begin() + (b + 1) * n * n), tol(dt) * n, "L L^T");
  }
}

TEST_P(Linalg, LuQrSvdEighReconstruct) {
  const DType dt = GetParam();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(cat("seed ", seed));
  std::mt19937_64 rng(seed);
  const int64_t batch = 2, m = 9, n = 6;
  // LU of a square matrix: A[perm] = L U
  {
    M a = random_values(rng, batch * n * n);
    Both r = run_both(Op::Lu, {Tensor::from_f64(dt, {batch, n, n}, a)});
    ASSERT_EQ(r.cpu.size(), 2u);
    expect_same(r, dt, "lu");
    const M lu = values(r.cpu[0]), perm = values(r.cpu[1]);
    for (int64_t b = 0; b < batch; ++b) {
      M l(static_cast<size_t>(batch * n * n), 0.0), u(l.size(), 0.0);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) {
          const double v = lu[b * n * n + i * n + j];
          if (j < i) {
            l[b * n * n + i * n + j] = v;
          } else {
            u[b * n * n + i * n + j] = v;
          }
          if (i == j) l[b * n * n + i * n + j] = 1;
        }
      M lu_prod = matmul(l, u, b, n, n, n), pa(static_cast<size_t>(n * n));
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) pa[i * n + j] = a[b * n * n + static_cast<int64_t>(perm[b * n + i]) * n + j];
      expect_near(lu_prod, pa, tol(dt) * n, "L U = A[perm]");
    }
  }
  // QR of a tall and of a wide matrix
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{m, n}, {n, m}}) {
    const int64_t k = std::min(rows, cols);
    M a = random_values(rng, batch * rows * cols);
    Both r = run_both(Op::Qr, {Tensor::from_f64(dt, {batch, rows, cols}, a)});
    ASSERT_EQ(r.cpu.size(), 2u);
    expect_same(r, dt, cat("qr ", rows, "x", cols));
    const M q = values(r.cpu[0]), rr = values(r.cpu[1]);
    for (int64_t b = 0; b < batch; ++b) {
      expect_near(matmul(q, rr, b, rows, k, cols), M(a.begin() + b * rows * cols, a.begin() + (b + 1) * rows * cols),
                  tol(dt) * rows, "Q R = A");
      for (int64_t i = 0; i < k; ++i) EXPECT_GE(rr[b * k * cols + i * cols + i], 0.0) << "diag(R) >= 0";
    }
  }
  // SVD of a tall and a wide matrix: U diag(s) Vh = A, s descending
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{m, n}, {n, m}}) {
    const int64_t k = std::min(rows, cols);
    M a = random_values(rng, batch * rows * cols);
    Both r = run_both(Op::Svd, {Tensor::from_f64(dt, {batch, rows, cols}, a)});
    ASSERT_EQ(r.cpu.size(), 3u);
    expect_same(r, dt, cat("svd ", rows, "x", cols));
    M u = values(r.cpu[0]);
    const M s = values(r.cpu[1]), vh = values(r.cpu[2]);
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t j = 0; j < k; ++j) {
        if (j > 0) EXPECT_GE(s[b * k + j - 1], s[b * k + j]) << "s descending";
        for (int64_t i = 0; i < rows; ++i) u[b * rows * k + i * k + j] *= s[b * k + j];
      }
      expect_near(matmul(u, vh, b, rows, k, cols), M(a.begin() + b * rows * cols, a.begin() + (b + 1) * rows * cols),
                  tol(dt) * rows, "U S Vh = A");
    }
  }
  // eigh of (A + A^T) / 2: A V = V diag(w), w ascending
  {
    M a = random_values(rng, batch * n * n);
    Both r = run_both(Op::Eigh, {Tensor::from_f64(dt, {batch, n, n}, a)});
    ASSERT_EQ(r.cpu.size(), 2u);
    expect_same(r, dt, "eigh");
    const M w = values(r.cpu[0]), v = values(r.cpu[1]);
    M sym(a.size());
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j)
          sym[b * n * n + i * n + j] = (a[b * n * n + i * n + j] + a[b * n * n + j * n + i]) / 2;
    for (int64_t b = 0; b < batch; ++b) {
      M av = matmul(sym, v, b, n, n, n), vw(static_cast<size_t>(n * n));
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) vw[i * n + j] = v[b * n * n + i * n + j] * w[b * n + j];
      expect_near(av, vw, tol(dt) * n, "A V = V diag(w)");
      for (int64_t j = 1; j < n; ++j) EXPECT_LE(w[b * n + j - 1], w[b * n + j]) << "w ascending";
    }
  }
}

TEST_P(Linalg, SolvesDeterminantsLeastSquares) {
  const DType dt = GetParam();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(cat("seed ", seed));
  std::mt19937_64 rng(seed);
  const int64_t batch = 2, n = 8, k = 3, m = 12;
  M a = well_conditioned(rng, batch, n, false);
  M bm = random_values(rng, batch * n * k);
  const Tensor ta = Tensor::from_f64(dt, {batch, n, n}, a), tb = Tensor::from_f64(dt, {batch, n, k}, bm);
  // solve: A X = B
  {
    Both r = run_both(Op::Solve, {ta, tb});
    ASSERT_EQ(r.cpu.size(), 1u);
    expect_same(r, dt, "solve");
    const M x = values(r.cpu[0]);
    for (int64_t b = 0; b < batch; ++b)
      expect_near(matmul(a, x, b, n, n, k), M(bm.begin() + b * n * k, bm.begin() + (b + 1) * n * k), tol(dt) * n, "A X = B");
  }
  // triangular_solve, all four (lower, transpose) combinations and a unit diagonal
  for (int lower = 0; lower < 2; ++lower)
    for (int trans = 0; trans < 2; ++trans)
      for (int unit = 0; unit < 2; ++unit) {
        Attrs at{{"lower", int64_t{lower}}, {"transpose", int64_t{trans}}, {"unit_diagonal", int64_t{unit}}};
        Both r = run_both(Op::TriangularSolve, {ta, tb}, at);
        ASSERT_EQ(r.cpu.size(), 1u);
        expect_same(r, dt, cat("triangular_solve lower=", lower, " transpose=", trans, " unit=", unit));
        const M x = values(r.cpu[0]);
        M opa(a.size(), 0.0);  // op(A) restricted to the triangle read
        for (int64_t b = 0; b < batch; ++b)
          for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < n; ++j) {
              const bool in_tri = lower ? j <= i : j >= i;
              double v = in_tri ? a[b * n * n + i * n + j] : 0.0;
              if (i == j && unit) v = 1;
              (trans ? opa[b * n * n + j * n + i] : opa[b * n * n + i * n + j]) = v;
            }
        for (int64_t b = 0; b < batch; ++b)
          expect_near(matmul(opa, x, b, n, n, k), M(bm.begin() + b * n * k, bm.begin() + (b + 1) * n * k), tol(dt) * n,
                      "op(A) X = B");
      }
  // det and slogdet agree with each other and with the product of LU pivots on ref
  {
    Both d = run_both(Op::Det, {ta});
    Both s = run_both(Op::Slogdet, {ta});
    ASSERT_EQ(d.cpu.size(), 1u);
    ASSERT_EQ(s.cpu.size(), 2u);
    expect_same(d, dt, "det");
    expect_same(s, dt, "slogdet");
    for (int64_t b = 0; b < batch; ++b) {
      const double det = d.cpu[0].get_f64(b), sign = s.cpu[0].get_f64(b), logabs = s.cpu[1].get_f64(b);
      EXPECT_NEAR(det, sign * std::exp(logabs), tol(dt) * std::abs(det));
    }
  }
  // lstsq: the residual is orthogonal to the columns of A
  {
    M at = random_values(rng, batch * m * n), bt = random_values(rng, batch * m * k);
    Both r = run_both(Op::Lstsq, {Tensor::from_f64(dt, {batch, m, n}, at), Tensor::from_f64(dt, {batch, m, k}, bt)});
    ASSERT_EQ(r.cpu.size(), 1u);
    expect_same(r, dt, "lstsq");
    const M x = values(r.cpu[0]);
    for (int64_t b = 0; b < batch; ++b) {
      M ax = matmul(at, x, b, m, n, k);
      for (int64_t j = 0; j < n; ++j)
        for (int64_t c = 0; c < k; ++c) {
          double dotp = 0;
          for (int64_t i = 0; i < m; ++i) dotp += at[b * m * n + i * n + j] * (bt[b * m * k + i * k + c] - ax[i * k + c]);
          EXPECT_NEAR(dotp, 0.0, tol(dt) * m * 10) << "A^T (B - A X) = 0";
        }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Linalg, ::testing::Values(DType::f32, DType::f64),
                         [](const ::testing::TestParamInfo<DType>& i) { return std::string(dtype_name(i.param)); });

// The example of docs/scientific.md: a batched SPD solve through cholesky and two triangular
// solves, and log|det|, against solve and slogdet's definitions.
TEST(LinalgDocExample, CholeskySolveAndLogdet) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(cat("seed ", seed));
  std::mt19937_64 rng(seed);
  Graph g;
  GraphBuilder gb(g);
  OpBuilder o(gb);
  auto a = g.add_input("a", {DType::f64, {8, 16, 16}});
  auto b = g.add_input("b", {DType::f64, {8, 16, 1}});
  auto l = linalg::cholesky(o, a);
  auto y = linalg::triangular_solve(o, l, b);
  auto x = linalg::triangular_solve(o, l, y, /*lower=*/true, /*transpose=*/true);
  auto logdet = linalg::slogdet(o, a).logabsdet;
  g.outputs = {x, logdet, linalg::solve(o, a, b), linalg::eigh(o, a).w};
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  auto model = Model::compile(g, {.device = "cpu"});
  ASSERT_TRUE(model.has_value()) << model.status().to_string();
  std::vector<Tensor> in{Tensor::from_f64(DType::f64, {8, 16, 16}, well_conditioned(rng, 8, 16, true)),
                         Tensor::from_f64(DType::f64, {8, 16, 1}, random_values(rng, 8 * 16))};
  auto out = (*model)->run(in);
  ASSERT_TRUE(out.has_value()) << out.status().to_string();
  expect_near(values((*out)[0]), values((*out)[2]), 1e-10, "cholesky solve vs solve");
  const M w = values((*out)[3]);
  for (int64_t bi = 0; bi < 8; ++bi) {
    double sum_log = 0;
    for (int64_t i = 0; i < 16; ++i) sum_log += std::log(w[bi * 16 + i]);
    EXPECT_NEAR((*out)[1].get_f64(bi), sum_log, 1e-9 * std::abs(sum_log)) << "log|det| = sum log(eigenvalues)";
  }
}

TEST(LinalgErrors, NotPositiveDefiniteAndSingularAreErrorsOnEveryDevice) {
  for (const char* dev : {"cpu", "ref"}) {
    SCOPED_TRACE(dev);
    Graph g;
    GraphBuilder gb(g);
    OpBuilder o(gb);
    ValueId a = g.add_input("a", TensorType{DType::f64, {3, 3}});
    g.outputs = {o.op(Op::Cholesky, {a})};
    auto model = Model::compile(g, {.device = dev});
    ASSERT_TRUE(model.has_value()) << model.status().to_string();
    const Tensor indefinite = Tensor::from_f64(DType::f64, {3, 3}, std::vector<double>{1, 2, 0, 2, 1, 0, 0, 0, 1});
    std::vector<Tensor> in1{indefinite};
    auto out = (*model)->run(in1);
    ASSERT_FALSE(out.has_value()) << "indefinite matrix accepted";
    EXPECT_NE(out.status().message().find("not positive definite"), std::string::npos) << out.status().to_string();
    EXPECT_NE(out.status().message().find("cholesky"), std::string::npos) << out.status().to_string();
    ValueId b = g.add_input("b", TensorType{DType::f64, {3, 1}});
    g.outputs = {o.op(Op::Solve, {a, b})};
    auto solve = Model::compile(g, {.device = dev});
    ASSERT_TRUE(solve.has_value()) << solve.status().to_string();
    const Tensor singular = Tensor::from_f64(DType::f64, {3, 3}, std::vector<double>{1, 2, 3, 2, 4, 6, 1, 0, 1});
    std::vector<Tensor> in2{singular, Tensor::from_f64(DType::f64, {3, 1}, std::vector<double>{1, 2, 3})};
    auto s = (*solve)->run(in2);
    ASSERT_FALSE(s.has_value());
    EXPECT_NE(s.status().message().find("singular"), std::string::npos) << s.status().to_string();
  }
}

TEST(LinalgDispatch, NativeOnCpuIllegalWithReasonsElsewhere) {
  Graph g;
  GraphBuilder gb(g);
  OpBuilder o(gb);
  ValueId a = g.add_input("a", TensorType{DType::f32, {4, 5, 5}});
  g.outputs = o.op_multi(Op::Eigh, {a});
  auto cpu = explain(g, "cpu", DispatchPolicy{});
  ASSERT_TRUE(cpu.has_value()) << cpu.status().to_string();
  ASSERT_EQ(cpu->nodes.size(), 1u);
  EXPECT_EQ(cpu->nodes[0].path, DispatchPath::native);
  EXPECT_NE(cpu->nodes[0].how.find("LAPACK ssyevd 5x5 batch=4"), std::string::npos) << cpu->nodes[0].how;
  // f16 is refused by type inference (factorizations compute in f32/f64)
  Graph h;
  GraphBuilder hb(h);
  OpBuilder ho(hb);
  ValueId x = h.add_input("x", TensorType{DType::f16, {5, 5}});
  ho.op(Op::Cholesky, {x});
  EXPECT_FALSE(ho.ok());
  EXPECT_NE(ho.status().message().find("f32 or f64"), std::string::npos) << ho.status().to_string();
  // every other device: illegal, with a reason for each path and a hint, never a crash; except
  // the other host devices (oneapi), which run the cpu's native kernels where their own library
  // has none
  for (const DeviceInfo& d : list_devices()) {
    if (d.name == "cpu" || d.name == "ref" || !d.available) continue;
    SCOPED_TRACE(d.name);
    auto rep = explain(g, d.name, DispatchPolicy{});
    ASSERT_TRUE(rep.has_value()) << rep.status().to_string();
    ASSERT_EQ(rep->nodes.size(), 1u);
    if (d.kind == DeviceKind::host) {
      EXPECT_EQ(rep->nodes[0].path, DispatchPath::native);
      EXPECT_NE(rep->nodes[0].how.find("LAPACK ssyevd"), std::string::npos) << rep->nodes[0].how;
      continue;
    }
    const NodeDecision& n = rep->nodes[0];
    EXPECT_EQ(n.path, DispatchPath::illegal);
    EXPECT_FALSE(n.native_refused.empty());
    EXPECT_NE(n.common_refused.find("no native factorization on this device"), std::string::npos) << n.common_refused;
    EXPECT_NE(rep->illegal_error().message().find(d.name), std::string::npos) << rep->illegal_error().to_string();
    EXPECT_FALSE(n.rewrite_refused.empty());
    Status st = rep->illegal_error();
    EXPECT_EQ(st.code(), ErrorCode::illegal);
    EXPECT_NE(st.message().find("eigh"), std::string::npos) << st.to_string();
  }
}

}  // namespace
}  // namespace rlx
