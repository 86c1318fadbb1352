// Sparse matrices and solvers (rlx/sparse.h): CSR construction and validation, SpMV/SpMM
// against a dense product and against SciPy, the Krylov solvers and the SuiteSparse direct
// solvers on 2D/3D Poisson matrices of about 10^5 unknowns against residual bounds and on small
// systems against the dense solution (rlx's own LAPACK solve op), adjoint gradients against
// finite differences, and Matrix Market round trips and corrupt files.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "rlx/compile.h"
#include "rlx/linalg.h"
#include "rlx/op_builder.h"
#include "rlx/sparse.h"
#include "rlx/thread_pool.h"
#include "train/autodiff.h"

namespace rlx::sparse {
namespace {

uint64_t fresh_seed() { return (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}(); }

template <class V, class I>
Csr<V, I> random_sparse(std::mt19937_64& rng, int64_t rows, int64_t cols, double density, double diag = 0) {
  Coo<V, I> coo;
  coo.rows = rows;
  coo.cols = cols;
  std::uniform_real_distribution<double> u(-1, 1), p(0, 1);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      if ((i == j && diag != 0) || p(rng) < density) {
        coo.row.push_back(static_cast<I>(i));
        coo.col.push_back(static_cast<I>(j));
        coo.val.push_back(static_cast<V>(u(rng) + (i == j ? diag : 0)));
      }
  auto a = to_csr(coo);
  EXPECT_TRUE(a.has_value()) << a.status().to_string();
  return *a;
}

template <class V>
std::vector<V> random_vector(std::mt19937_64& rng, int64_t n) {
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<V> v(static_cast<size_t>(n));
  for (V& x : v) x = static_cast<V>(u(rng));
  return v;
}

template <class V, class I>
std::vector<double> dense_of(const Csr<V, I>& a) {
  std::vector<double> d(static_cast<size_t>(a.rows * a.cols), 0.0);
  for (int64_t i = 0; i < a.rows; ++i)
    for (I k = a.row_ptr[i]; k < a.row_ptr[i + 1]; ++k) d[i * a.cols + a.col_idx[k]] = a.values[k];
  return d;
}

// A x = b solved densely by rlx's own solve op on the cpu (LAPACK gesv).
std::vector<double> dense_solve(const std::vector<double>& a, const std::vector<double>& b, int64_t n) {
  Graph g;
  GraphBuilder gb(g);
  OpBuilder o(gb);
  ValueId av = g.add_input("a", TensorType{DType::f64, {n, n}});
  ValueId bv = g.add_input("b", TensorType{DType::f64, {n, 1}});
  g.outputs = {linalg::solve(o, av, bv)};
  auto m = Model::compile(g, {.device = "cpu"});
  EXPECT_TRUE(m.has_value());
  std::vector<Tensor> in{Tensor::from_f64(DType::f64, {n, n}, a), Tensor::from_f64(DType::f64, {n, 1}, b)};
  auto out = (*m)->run(in);
  EXPECT_TRUE(out.has_value()) << out.status().to_string();
  std::vector<double> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[i] = (*out)[0].get_f64(i);
  return x;
}

template <class V, class I>
double residual(const Csr<V, I>& a, const std::vector<V>& b, const std::vector<V>& x) {
  std::vector<V> r = b;
  EXPECT_TRUE(spmv(a, x.data(), a.cols, r.data(), a.rows, V(-1), V(1)).is_ok());
  double s = 0, bn = 0;
  for (size_t i = 0; i < r.size(); ++i) s += double(r[i]) * r[i], bn += double(b[i]) * b[i];
  return std::sqrt(s / bn);
}

// L + S: the 3D Laplacian plus a skew-symmetric convection part (nonsymmetric, positive real).
Csr<double, int64_t> convection_diffusion(int64_t n, double c) {
  Csr<double, int64_t> l = poisson_3d<double, int64_t>(n);
  Coo<double, int64_t> coo;
  coo.rows = coo.cols = l.rows;
  for (int64_t i = 0; i < l.rows; ++i) {
    for (int64_t k = l.row_ptr[i]; k < l.row_ptr[i + 1]; ++k) {
      coo.row.push_back(i);
      coo.col.push_back(l.col_idx[k]);
      coo.val.push_back(l.values[k]);
    }
    if (i + 1 < l.rows) {
      coo.row.push_back(i), coo.col.push_back(i + 1), coo.val.push_back(c);
      coo.row.push_back(i + 1), coo.col.push_back(i), coo.val.push_back(-c);
    }
  }
  return *to_csr(coo);
}

TEST(Csr, FromCooSumsDuplicatesAndValidates) {
  Coo<double, int32_t> coo{3, 4, {2, 0, 2, 1, 0}, {1, 3, 1, 0, 0}, {1.5, 2, 2.5, -1, 7}};
  auto a = to_csr(coo);
  ASSERT_TRUE(a.has_value()) << a.status().to_string();
  EXPECT_EQ(a->nnz(), 4);
  EXPECT_EQ(a->row_ptr, (std::vector<int32_t>{0, 2, 3, 4}));
  EXPECT_EQ(a->col_idx, (std::vector<int32_t>{0, 3, 0, 1}));
  EXPECT_EQ(a->values, (std::vector<double>{7, 2, -1, 4}));
  EXPECT_TRUE(validate(*a).is_ok());
  coo.col[0] = 4;
  auto bad = to_csr(coo);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.status().message().find("outside 3 x 4"), std::string::npos) << bad.status().to_string();
  Csr<double, int32_t> c = *a;
  c.col_idx[1] = 0;  // not increasing
  EXPECT_NE(validate(c, "c").message().find("strictly increasing"), std::string::npos);
  c = *a;
  c.row_ptr[3] = 5;
  EXPECT_NE(validate(c, "c").message().find("row_ptr ends"), std::string::npos);
  std::vector<double> x(3), y(3);
  EXPECT_FALSE(spmv(*a, x.data(), 3, y.data(), 3).is_ok()) << "x has the wrong size";
}

template <class V, class I>
void check_spmv(uint64_t seed) {
  std::mt19937_64 rng(seed);
  // large enough for the threaded path (nnz > 20000)
  const int64_t m = 700, n = 500;
  Csr<V, I> a = random_sparse<V, I>(rng, m, n, 0.08);
  ASSERT_GT(a.nnz(), 20000);
  std::vector<V> x = random_vector<V>(rng, n), y = random_vector<V>(rng, m), y0 = y;
  ASSERT_TRUE(spmv(a, x.data(), n, y.data(), m, V(2), V(-0.5)).is_ok());
  const std::vector<double> d = dense_of(a);
  const double tol = std::is_same_v<V, float> ? 1e-4 : 1e-12;
  for (int64_t i = 0; i < m; ++i) {
    double s = 0;
    for (int64_t j = 0; j < n; ++j) s += d[i * n + j] * x[j];
    ASSERT_NEAR(y[i], 2 * s - 0.5 * y0[i], tol * 10) << "row " << i;
  }
  // SpMM: each column of Y is one SpMV
  const int64_t k = 3;
  std::vector<V> xm = random_vector<V>(rng, n * k), ym(static_cast<size_t>(m * k));
  ASSERT_TRUE(spmm(a, xm.data(), k, ym.data()).is_ok());
  for (int64_t c = 0; c < k; ++c) {
    std::vector<V> xc(static_cast<size_t>(n)), yc(static_cast<size_t>(m));
    for (int64_t j = 0; j < n; ++j) xc[j] = xm[j * k + c];
    ASSERT_TRUE(spmv(a, xc.data(), n, yc.data(), m).is_ok());
    for (int64_t i = 0; i < m; ++i) ASSERT_NEAR(ym[i * k + c], yc[i], tol) << "spmm column " << c;
  }
  // A^T x against the dense transpose
  std::vector<V> xt = random_vector<V>(rng, m), yt(static_cast<size_t>(n));
  ASSERT_TRUE(spmv_transposed(a, xt.data(), m, yt.data(), n).is_ok());
  for (int64_t j = 0; j < n; ++j) {
    double s = 0;
    for (int64_t i = 0; i < m; ++i) s += d[i * n + j] * xt[i];
    ASSERT_NEAR(yt[j], s, tol * 10);
  }
}

TEST(Csr, SpmvSpmmMatchDenseAllTypes) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(cat("seed ", seed));
  check_spmv<float, int32_t>(seed);
  check_spmv<float, int64_t>(seed);
  check_spmv<double, int32_t>(seed);
  check_spmv<double, int64_t>(seed);
}

// A^T x on a matrix large enough to split over the pool's threads (each chunk of rows scatters
// into its own buffer, then the buffers are summed), nonsymmetric (random values on the Poisson
// pattern), against a serial double-precision scatter.
TEST(Csr, TransposedSpmvOnManyThreadsMatchesASerialScatter) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(cat("seed ", seed));
  std::mt19937_64 rng(seed);
  Csr<double, int32_t> a = poisson_2d<double, int32_t>(300);  // 90000 rows, ~450k entries
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (double& v : a.values) v = u(rng);
  std::vector<double> x(static_cast<size_t>(a.rows)), y(static_cast<size_t>(a.cols)), want(static_cast<size_t>(a.cols), 0.0);
  for (double& v : x) v = u(rng);
  for (int64_t i = 0; i < a.rows; ++i)
    for (int32_t p = a.row_ptr[i]; p < a.row_ptr[i + 1]; ++p) want[a.col_idx[p]] += a.values[p] * x[i];
  if (ThreadPool::global().size() < 2) std::printf("note: one thread in the pool, so only the serial scatter runs here\n");
  for (int round = 0; round < 2; ++round) {  // the second call reuses the chunk buffers
    std::fill(y.begin(), y.end(), 7.0);     // the kernel must overwrite, not accumulate
    ASSERT_TRUE(spmv_transposed(a, x.data(), a.rows, y.data(), a.cols).is_ok());
    for (int64_t j = 0; j < a.cols; ++j) ASSERT_NEAR(y[j], want[j], 1e-12) << "column " << j << ", round " << round;
  }
}

TEST(Csr, SpmvMatchesScipy) {
  if (!std::filesystem::exists("/usr/bin/python3") ||
      std::system("/usr/bin/python3 -c 'import scipy.sparse, scipy.io' 2>/dev/null") != 0)
    GTEST_SKIP() << "SciPy for /usr/bin/python3 is not installed (python3-scipy)";
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(cat("seed ", seed));
  std::mt19937_64 rng(seed);
  Csr<double, int64_t> a = random_sparse<double, int64_t>(rng, 300, 200, 0.05);
  std::vector<double> x = random_vector<double>(rng, 200), y(300);
  ASSERT_TRUE(spmv(a, x.data(), 200, y.data(), 300).is_ok());
  const std::string dir = testing::TempDir();
  const std::string mtx = dir + "/rlx_spmv.mtx", xs = dir + "/rlx_x.txt", ys = dir + "/rlx_y.txt";
  ASSERT_TRUE(write_matrix_market(mtx, a).is_ok());
  {
    std::ofstream f(xs);
    f.precision(17);
    for (double v : x) f << v << "\n";
  }
  const std::string cmd = cat("/usr/bin/python3 -c \"import numpy as np, scipy.io; A = scipy.io.mmread('", mtx,
                              "').tocsr(); x = np.loadtxt('", xs, "'); np.savetxt('", ys, "', A @ x, fmt='%.17g')\"");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream f(ys);
  for (int64_t i = 0; i < 300; ++i) {
    double v;
    ASSERT_TRUE(f >> v);
    ASSERT_NEAR(y[i], v, 1e-12) << "row " << i;
  }
}

// CI size: about 10^5 unknowns (RLX_SCI_LARGE=1 runs 10^6).
int64_t grid_2d() { return std::getenv("RLX_SCI_LARGE") ? 1000 : 317; }
int64_t grid_3d() { return std::getenv("RLX_SCI_LARGE") ? 100 : 47; }

TEST(Krylov, PoissonLargeAgainstResidualBounds) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(cat("seed ", seed));
  std::mt19937_64 rng(seed);
  struct Run {
    std::string name;
    Csr<double, int32_t> a;
    Preconditioner p;
  };
  std::vector<Run> runs;
  runs.push_back({"2d cg", poisson_2d<double, int32_t>(grid_2d()), Preconditioner::none});
  runs.push_back({"2d pcg jacobi", poisson_2d<double, int32_t>(grid_2d()), Preconditioner::jacobi});
  runs.push_back({"2d pcg ic0", poisson_2d<double, int32_t>(grid_2d()), Preconditioner::ic0});
  runs.push_back({"3d pcg ic0", poisson_3d<double, int32_t>(grid_3d()), Preconditioner::ic0});
  int64_t cg_iters = 0;
  for (Run& r : runs) {
    SCOPED_TRACE(r.name);
    ASSERT_GE(r.a.rows, 100000);
    std::vector<double> b = random_vector<double>(rng, r.a.rows), x;
    SolveOptions o;
    o.rtol = 1e-8;
    o.preconditioner = r.p;
    auto t0 = std::chrono::steady_clock::now();
    auto rep = cg(r.a, b, x, o);
    ASSERT_TRUE(rep.has_value()) << rep.status().to_string();
    std::cout << "[ " << r.name << " n=" << r.a.rows << " ] " << rep->to_string() << ", "
              << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s\n";
    EXPECT_TRUE(rep->converged);
    EXPECT_LE(rep->relative_residual, 1e-7);
    EXPECT_LE(residual(r.a, b, x), 1e-7);
    if (r.name == "2d cg") cg_iters = rep->iterations;
    if (r.name == "2d pcg ic0") EXPECT_LT(rep->iterations, cg_iters * 3 / 4) << "IC(0) must cut CG's iterations";
  }
  // float values, int64 indices: the same solver at single precision
  Csr<float, int64_t> af = poisson_2d<float, int64_t>(100);
  std::vector<float> bf = random_vector<float>(rng, af.rows), xf;
  SolveOptions o;
  o.rtol = 1e-4;
  auto rep = cg(af, bf, xf, o);
  ASSERT_TRUE(rep.has_value()) << rep.status().to_string();
  EXPECT_TRUE(rep->converged) << rep->to_string();
  EXPECT_LE(residual(af, bf, xf), 1e-3);
}

TEST(Krylov, NonsymmetricBicgstabGmres) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(cat("seed ", seed));
  std::mt19937_64 rng(seed);
  Csr<double, int64_t> a = convection_diffusion(grid_3d(), 0.7);
  std::vector<double> b = random_vector<double>(rng, a.rows);
  for (auto [name, p] : {std::pair<const char*, Preconditioner>{"none", Preconditioner::none}, {"jacobi", Preconditioner::jacobi}}) {
    SCOPED_TRACE(name);
    SolveOptions o;
    o.rtol = 1e-8;
    o.preconditioner = p;
    std::vector<double> x;
    auto r1 = bicgstab(a, b, x, o);
    ASSERT_TRUE(r1.has_value()) << r1.status().to_string();
    std::cout << "[ n=" << a.rows << " ] " << r1->to_string() << "\n";
    EXPECT_TRUE(r1->converged);
    EXPECT_LE(residual(a, b, x), 1e-7);
    x.clear();
    o.gmres_restart = 40;
    auto r2 = gmres(a, b, x, o);
    ASSERT_TRUE(r2.has_value()) << r2.status().to_string();
    std::cout << "[ n=" << a.rows << " ] " << r2->to_string() << "\n";
    EXPECT_TRUE(r2->converged);
    EXPECT_LE(residual(a, b, x), 1e-7);
  }
}

TEST(Krylov, SmallSystemsMatchDenseSolution) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(cat("seed ", seed));
  std::mt19937_64 rng(seed);
  const int64_t n = 60;
  // SPD: B^T B + n I built densely, stored sparsely (with a sparse B)
  Csr<double, int32_t> bm = random_sparse<double, int32_t>(rng, n, n, 0.1, 1.0);
  std::vector<double> db = dense_of(bm), spd(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t p = 0; p < n; ++p) spd[i * n + j] += db[p * n + i] * db[p * n + j];
      if (i == j) spd[i * n + j] += 1;
    }
  Coo<double, int32_t> coo;
  coo.rows = coo.cols = n;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      if (spd[i * n + j] != 0) coo.row.push_back(i), coo.col.push_back(j), coo.val.push_back(spd[i * n + j]);
  Csr<double, int32_t> a = *to_csr(coo);
  Csr<double, int32_t> ns = random_sparse<double, int32_t>(rng, n, n, 0.1, 4.0);  // nonsymmetric
  std::vector<double> b = random_vector<double>(rng, n);
  const std::vector<double> want_spd = dense_solve(spd, b, n), want_ns = dense_solve(dense_of(ns), b, n);
  auto expect_x = [&](const std::vector<double>& x, const std::vector<double>& want, const std::string& what) {
    ASSERT_EQ(x.size(), want.size());
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(x[i], want[i], 1e-8 * (1 + std::abs(want[i]))) << what << " entry " << i;
  };
  SolveOptions o;
  o.rtol = 1e-13;
  for (Preconditioner p : {Preconditioner::none, Preconditioner::jacobi, Preconditioner::ic0}) {
    o.preconditioner = p;
    std::vector<double> x;
    auto r = cg(a, b, x, o);
    ASSERT_TRUE(r.has_value()) << r.status().to_string();
    expect_x(x, want_spd, r->method);
  }
  o.preconditioner = Preconditioner::none;
  std::vector<double> x;
  ASSERT_TRUE(bicgstab(ns, b, x, o).has_value());
  expect_x(x, want_ns, "bicgstab");
  x.clear();
  ASSERT_TRUE(gmres(ns, b, x, o).has_value());
  expect_x(x, want_ns, "gmres");
  // direct solvers
  auto lu = Factorization::factor(ns, DirectMethod::lu);
  ASSERT_TRUE(lu.has_value()) << lu.status().to_string();
  expect_x(*lu->solve(b), want_ns, "umfpack");
  auto ch = Factorization::factor(a, DirectMethod::cholesky);
  ASSERT_TRUE(ch.has_value()) << ch.status().to_string();
  expect_x(*ch->solve(b), want_spd, "cholmod");
  // the iteration cap is honoured and reported
  o.max_iterations = 3;
  x.clear();
  auto capped = cg(a, b, x, o);
  ASSERT_TRUE(capped.has_value());
  EXPECT_FALSE(capped->converged);
  EXPECT_EQ(capped->iterations, 3);
  EXPECT_NE(capped->to_string().find("did NOT converge"), std::string::npos);
}

TEST(Krylov, ErrorsAreReported) {
  Csr<double, int32_t> a = poisson_2d<double, int32_t>(5);
  for (double& v : a.values) v = -v;  // negative definite
  std::vector<double> b(25, 1.0), x;
  auto r = cg(a, b, x);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("not symmetric positive definite"), std::string::npos) << r.status().to_string();
  SolveOptions o;
  o.preconditioner = Preconditioner::ic0;
  x.clear();
  auto r2 = cg(a, b, x, o);
  ASSERT_FALSE(r2.has_value());
  EXPECT_NE(r2.status().message().find("IC(0)"), std::string::npos) << r2.status().to_string();
  auto ch = Factorization::factor(a, DirectMethod::cholesky);
  ASSERT_FALSE(ch.has_value());
  EXPECT_NE(ch.status().message().find("not positive definite"), std::string::npos) << ch.status().to_string();
  Csr<double, int32_t> sing = poisson_2d<double, int32_t>(3);
  for (int32_t k = sing.row_ptr[4]; k < sing.row_ptr[5]; ++k) sing.values[k] = 0;  // a zero row
  auto lu = Factorization::factor(sing, DirectMethod::lu);
  ASSERT_FALSE(lu.has_value());
  EXPECT_NE(lu.status().message().find("singular"), std::string::npos) << lu.status().to_string();
  std::vector<double> short_b(3, 1.0);
  x.clear();
  EXPECT_FALSE(bicgstab(a, short_b, x).has_value());
}

TEST(Direct, PoissonLargeNeverDense) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(cat("seed ", seed));
  std::mt19937_64 rng(seed);
  Csr<double, int64_t> a = poisson_2d<double, int64_t>(grid_2d());
  std::vector<double> b = random_vector<double>(rng, a.rows);
  for (DirectMethod m : {DirectMethod::lu, DirectMethod::cholesky}) {
    SCOPED_TRACE(m == DirectMethod::lu ? "umfpack" : "cholmod");
    auto t0 = std::chrono::steady_clock::now();
    auto f = Factorization::factor(a, m);
    ASSERT_TRUE(f.has_value()) << f.status().to_string();
    auto x = f->solve(b);
    ASSERT_TRUE(x.has_value()) << x.status().to_string();
    std::cout << "[ n=" << a.rows << " ] factor nnz " << f->factor_nnz() << ", "
              << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s\n";
    EXPECT_LE(residual(a, b, *x), 1e-10);
    // a dense factor would hold n^2 / 2 = 5e9 entries; fill-in of a nested-dissection-ordered
    // 2D grid is O(n log n)
    EXPECT_LT(f->factor_nnz(), 100 * a.rows);
  }
}

TEST(Direct, AdjointGradientsMatchFiniteDifferences) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(cat("seed ", seed));
  std::mt19937_64 rng(seed);
  const int64_t n = 12;
  Csr<double, int32_t> a = random_sparse<double, int32_t>(rng, n, n, 0.2, 3.0);
  std::vector<double> b = random_vector<double>(rng, n), c = random_vector<double>(rng, n);
  auto loss = [&](const Csr<double, int32_t>& m, const std::vector<double>& rhs) {
    auto f = Factorization::factor(m, DirectMethod::lu);
    EXPECT_TRUE(f.has_value());
    std::vector<double> x = *f->solve(rhs);
    double l = 0;
    for (int64_t i = 0; i < n; ++i) l += c[i] * x[i];
    return l;
  };
  auto f = Factorization::factor(a, DirectMethod::lu);
  ASSERT_TRUE(f.has_value());
  std::vector<double> x = *f->solve(b);
  auto g = solve_gradients(a, *f, x, c);  // d loss / d x = c
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  const double h = 1e-6;
  for (int64_t k = 0; k < a.nnz(); ++k) {
    Csr<double, int32_t> p = a, m = a;
    p.values[k] += h;
    m.values[k] -= h;
    const double fd = (loss(p, b) - loss(m, b)) / (2 * h);
    ASSERT_NEAR(g->values[k], fd, 1e-6 * std::max(1.0, std::abs(fd))) << "value " << k;
  }
  for (int64_t i = 0; i < n; ++i) {
    std::vector<double> p = b, m = b;
    p[i] += h;
    m[i] -= h;
    const double fd = (loss(a, p) - loss(a, m)) / (2 * h);
    ASSERT_NEAR(g->b[i], fd, 1e-6 * std::max(1.0, std::abs(fd))) << "b " << i;
  }
}

// spmv() and sparse_solve() as graph ops: sparse_graph_test.cpp.

TEST(MatrixMarket, RoundTripAndSymmetricPattern) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  Csr<double, int64_t> a = random_sparse<double, int64_t>(rng, 40, 30, 0.1);
  const std::string path = testing::TempDir() + "/rlx_roundtrip.mtx";
  ASSERT_TRUE(write_matrix_market(path, a).is_ok());
  auto coo = read_matrix_market(path);
  ASSERT_TRUE(coo.has_value()) << coo.status().to_string();
  auto back = to_csr(*coo);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->row_ptr, a.row_ptr);
  EXPECT_EQ(back->col_idx, a.col_idx);
  EXPECT_EQ(back->values, a.values);  // %.17g round-trips doubles exactly
  auto sym = parse_matrix_market(
      "%%MatrixMarket matrix coordinate real symmetric\n% a comment\n3 3 4\n1 1 2.0\n2 1 -1\n3 2 -1e0\n3 3 +4\n", "sym.mtx");
  ASSERT_TRUE(sym.has_value()) << sym.status().to_string();
  auto s = *to_csr(*sym);
  EXPECT_EQ(s.nnz(), 6);
  EXPECT_EQ(dense_of(s), (std::vector<double>{2, -1, 0, -1, 0, -1, 0, -1, 4}));
  auto pat = parse_matrix_market("%%MatrixMarket matrix coordinate pattern general\n2 2 2\n1 2\n2 1\n", "p.mtx");
  ASSERT_TRUE(pat.has_value()) << pat.status().to_string();
  EXPECT_EQ(pat->val, (std::vector<double>{1, 1}));
}

TEST(MatrixMarket, CorruptFilesNameFileAndLine) {
  const std::string hdr = "%%MatrixMarket matrix coordinate real general\n";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "empty file"},
      {"%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n", "x.mtx:1: format"},
      {"%%MatrixMarket matrix coordinate complex general\n", "x.mtx:1: field"},
      {"%%MatrixMarket tensor coordinate real general\n", "x.mtx:1: object"},
      {hdr, "missing the size line"},
      {hdr + "2 2\n", "x.mtx:2: expected the size line"},
      {hdr + "2 2 -1\n", "x.mtx:2: negative size"},
      {hdr + "2 2 5\n1 1 1\n1 2 1\n2 1 1\n2 2 1\n1 1 1\n", "do not fit"},
      {hdr + "100000 100000 999999999\n1 1 1\n", "too short"},
      {hdr + "2 2 2\n1 1 1\n", "x.mtx:4: the file ends after 1 of 2"},
      {hdr + "2 2 1\n3 1 1\n", "x.mtx:3: entry (3, 1) is outside"},
      {hdr + "2 2 1\n0 1 1\n", "x.mtx:3: entry (0, 1) is outside"},
      {hdr + "2 2 1\n1 1 abc\n", "x.mtx:3: 'abc' is not a finite real"},
      {hdr + "2 2 1\n1 1 nan\n", "not a finite real"},
      {hdr + "2 2 1\n1 1\n", "x.mtx:3: expected 3 fields"},
      {hdr + "2 2 1\n1 1 1 1\n", "expected 3 fields"},
      {hdr + "2 2 1\n1.5 1 1\n", "must be integers"},
      {hdr + "2 2 1\n1 1 1\n2 2 2\n", "x.mtx:4: unexpected content"},
      {"%%MatrixMarket matrix coordinate real symmetric\n2 3 0\n", "must be square"},
      {"%%MatrixMarket matrix coordinate real symmetric\n2 2 1\n1 2 1\n", "above the diagonal"},
      {"%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 1 1.5\n", "is not an integer"},
  };
  for (const auto& [text, want] : bad) {
    auto r = parse_matrix_market(text, "x.mtx");
    ASSERT_FALSE(r.has_value()) << "accepted: " << text;
    EXPECT_EQ(r.status().code(), ErrorCode::parse_error);
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().to_string() << "\nwanted: " << want;
  }
  auto missing = read_matrix_market("/nonexistent/dir/m.mtx");
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.status().message().find("/nonexistent/dir/m.mtx"), std::string::npos);
}

}  // namespace
}  // namespace rlx::sparse
