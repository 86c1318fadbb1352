// The CSR graph ops (spmv_csr, sddmm_csr, sparse_solve, sparse_solve_backward): results on the
// cpu (thread-pooled kernel, SuiteSparse) and the reference (plain loops, dense LU) against the
// C++ API on random matrices, gradients against the closed forms of the API's adjoint, index
// data errors that name the op, type-rule errors, and the dispatch on other devices. The
// finite-difference checks of the gradient rules are in tests/train/vjp_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "device_fixture.h"
#include "rlx/compile.h"
#include "rlx/dispatch.h"
#include "rlx/op_builder.h"
#include "rlx/sparse.h"
#include "sparse/sparse_kernels.h"
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
  return *to_csr(coo);
}

std::vector<double> random_vector(std::mt19937_64& rng, int64_t n) {
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = u(rng);
  return v;
}

template <class T>
std::vector<double> as_double(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

template <class I>
constexpr DType index_dtype() {
  return sizeof(I) == 4 ? DType::i32 : DType::i64;
}
template <class V>
constexpr DType value_dtype() {
  return sizeof(V) == 4 ? DType::f32 : DType::f64;
}

// The three CSR arrays of `a` as graph inputs and as tensors.
template <class V, class I>
struct CsrInputs {
  ValueId rp, ci, va;
  std::vector<Tensor> tensors;
};
template <class V, class I>
CsrInputs<V, I> add_csr(Graph& g, const Csr<V, I>& a) {
  const DType it = index_dtype<I>(), vt = value_dtype<V>();
  CsrInputs<V, I> r;
  r.rp = g.add_input("row_ptr", TensorType{it, {a.rows + 1}});
  r.ci = g.add_input("col_idx", TensorType{it, {a.nnz()}});
  r.va = g.add_input("values", TensorType{vt, {a.nnz()}});
  r.tensors = {Tensor::from_f64(it, {a.rows + 1}, as_double(a.row_ptr)), Tensor::from_f64(it, {a.nnz()}, as_double(a.col_idx)),
               Tensor::from_f64(vt, {a.nnz()}, as_double(a.values))};
  return r;
}

// `g` compiled for `device`, or the dispatch report's reason where the device refuses a node
// (Model::compile compiles per input shape, at the first run; a GPU-class device without CSR
// kernels, such as webgpu, refuses here instead).
Expected<std::unique_ptr<Model>> compile_or_refusal(const Graph& g, const std::string& device) {
  auto rep = explain(g, device, DispatchPolicy{});
  if (!rep.has_value()) return rep.status();
  if (!rep->ok()) return rep->illegal_error();
  return Model::compile(g, {.device = device});
}

// Every registered device but the two that run every op (cpu, ref): the GPU-class ones and the
// null skeleton, whose refusals some tests check.
std::vector<std::string> not_cpu_or_ref() {
  std::vector<std::string> r = device_tests::devices_of_kind(DeviceKind::gpu);
  for (const std::string& s : device_tests::devices_of_kind(DeviceKind::skeleton)) r.push_back(s);
  return r;
}

// y = A x through the graph op on `device`, against the API's spmm, for one (V, I).
template <class V, class I>
void check_spmv(const char* device, int64_t k) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(cat(device, " ", dtype_name(value_dtype<V>()), "/", dtype_name(index_dtype<I>()), " k=", k, " seed ", seed));
  std::mt19937_64 rng(seed);
  // enough nonzeros (about 36000) for the threaded path on the cpu
  const int64_t m = 3000, n = 1200;
  Csr<V, I> a = random_sparse<V, I>(rng, m, n, 0.01);
  std::vector<double> xd = random_vector(rng, n * k);
  Graph g;
  GraphBuilder gb(g);
  OpBuilder o(gb);
  CsrInputs<V, I> c = add_csr(g, a);
  ValueId x = g.add_input("x", TensorType{value_dtype<V>(), k == 1 ? Shape{n} : Shape{n, k}});
  g.outputs = {spmv(o, c.rp, c.ci, c.va, x)};
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  auto rep = explain(g, device, DispatchPolicy{});
  ASSERT_TRUE(rep.has_value()) << rep.status().to_string();
  ASSERT_TRUE(rep->ok()) << rep->to_text();
  for (const NodeDecision& d : rep->nodes)
    if (d.op == Op::SpmvCsr) EXPECT_EQ(d.path, DispatchPath::native) << d.how;
  auto model = Model::compile(g, {.device = device});
  ASSERT_TRUE(model.has_value()) << model.status().to_string();
  std::vector<Tensor> in = c.tensors;
  in.push_back(Tensor::from_f64(value_dtype<V>(), k == 1 ? Sizes{n} : Sizes{n, k}, xd));
  auto out = (*model)->run(in);
  ASSERT_TRUE(out.has_value()) << out.status().to_string();
  std::vector<V> xv(xd.begin(), xd.end()), want(static_cast<size_t>(m * k));
  ASSERT_TRUE(spmm(a, xv.data(), k, want.data()).is_ok());
  const double tol = sizeof(V) == 4 ? 2e-5 : 1e-12;
  int64_t nonzero = 0;
  for (int64_t i = 0; i < m * k; ++i) {
    ASSERT_NEAR((*out)[0].get_f64(i), static_cast<double>(want[i]), tol * (1 + std::abs(double(want[i])))) << "y " << i;
    nonzero += want[i] != V(0);
  }
  EXPECT_GT(nonzero, m * k / 2) << "the test matrix should give mostly nonzero products";
}

TEST(GraphSparse, SpmvAndSpmmMatchTheApiKernelAllTypes) {
  for (const char* dev : {"cpu", "ref"})
    for (int64_t k : {1, 3}) {
      check_spmv<double, int32_t>(dev, k);
      check_spmv<double, int64_t>(dev, k);
      check_spmv<float, int32_t>(dev, k);
      check_spmv<float, int64_t>(dev, k);
    }
}

// spmv() and its autodiff gradients against the closed forms: d/dvalues[p] = sum_c r[row_p, c]
// x[col_p, c], d/dx = A^T r.
TEST(GraphSparse, SpmvGradientsMatchClosedForms) {
  for (const char* dev : {"cpu", "ref"}) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(cat(dev, " seed ", seed));
    std::mt19937_64 rng(seed);
    const int64_t m = 40, n = 30, k = 2;
    Csr<double, int64_t> a = random_sparse<double, int64_t>(rng, m, n, 0.15);
    const int64_t nnz = a.nnz();
    std::vector<double> x = random_vector(rng, n * k), r = random_vector(rng, m * k);
    Graph g;
    GraphBuilder gb(g);
    OpBuilder o(gb);
    CsrInputs<double, int64_t> c = add_csr(g, a);
    ValueId xv = g.add_input("x", TensorType{DType::f64, {n, k}});
    ValueId y = spmv(o, c.rp, c.ci, c.va, xv);
    ValueId loss = o.reduce_sum(o.mul(y, o.constant(Tensor::from_f64(DType::f64, {m, k}, r))), {}, false);
    ASSERT_TRUE(o.ok()) << o.status().to_string();
    std::vector<ValueId> wrt{c.va, xv};
    auto grads = train::gradients(g, loss, wrt);
    ASSERT_TRUE(grads.has_value()) << grads.status().to_string();
    g.outputs = {y, (*grads)[0], (*grads)[1]};
    auto model = Model::compile(g, {.device = dev});
    ASSERT_TRUE(model.has_value()) << model.status().to_string();
    std::vector<Tensor> in = c.tensors;
    in.push_back(Tensor::from_f64(DType::f64, {n, k}, x));
    auto out = (*model)->run(in);
    ASSERT_TRUE(out.has_value()) << out.status().to_string();
    std::vector<double> want(static_cast<size_t>(m * k));
    ASSERT_TRUE(spmm(a, x.data(), k, want.data()).is_ok());
    for (int64_t i = 0; i < m * k; ++i) ASSERT_NEAR((*out)[0].get_f64(i), want[i], 1e-12) << "y " << i;
    std::vector<int64_t> ri = row_indices(a);
    for (int64_t p = 0; p < nnz; ++p) {
      double gv = 0;
      for (int64_t j = 0; j < k; ++j) gv += r[ri[p] * k + j] * x[a.col_idx[p] * k + j];
      ASSERT_NEAR((*out)[1].get_f64(p), gv, 1e-12) << "d/dvalues " << p;
    }
    for (int64_t j = 0; j < k; ++j) {
      std::vector<double> rc(static_cast<size_t>(m)), gx(static_cast<size_t>(n));
      for (int64_t i = 0; i < m; ++i) rc[i] = r[i * k + j];
      ASSERT_TRUE(spmv_transposed(a, rc.data(), m, gx.data(), n).is_ok());
      for (int64_t i = 0; i < n; ++i) ASSERT_NEAR((*out)[2].get_f64(i * k + j), gx[i], 1e-12) << "d/dx " << i;
    }
  }
}

// sparse_solve on a 2D Poisson matrix (3600 unknowns) against the API's factorization, and its
// gradients against solve_gradients (LU: exactly the API's adjoint; Cholesky: the op reads the
// upper triangle, so an entry above the diagonal also carries its mirror's gradient).
TEST(GraphSparse, SparseSolveMatchesApiAndAdjoint) {
  for (DirectMethod method : {DirectMethod::lu, DirectMethod::cholesky}) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(cat(method == DirectMethod::lu ? "lu" : "cholesky", " seed ", seed));
    std::mt19937_64 rng(seed);
    Csr<double, int32_t> a = poisson_2d<double, int32_t>(60);
    const int64_t n = a.rows, k = 2;
    std::vector<double> b = random_vector(rng, n * k), r = random_vector(rng, n * k);
    Graph g;
    GraphBuilder gb(g);
    OpBuilder o(gb);
    CsrInputs<double, int32_t> c = add_csr(g, a);
    ValueId bv = g.add_input("b", TensorType{DType::f64, {n, k}});
    ValueId x = sparse_solve(o, c.rp, c.ci, c.va, bv, method);
    ValueId loss = o.reduce_sum(o.mul(x, o.constant(Tensor::from_f64(DType::f64, {n, k}, r))), {}, false);
    ASSERT_TRUE(o.ok()) << o.status().to_string();
    std::vector<ValueId> wrt{c.va, bv};
    auto grads = train::gradients(g, loss, wrt);
    ASSERT_TRUE(grads.has_value()) << grads.status().to_string();
    g.outputs = {x, (*grads)[0], (*grads)[1]};
    auto model = Model::compile(g, {.device = "cpu"});
    ASSERT_TRUE(model.has_value()) << model.status().to_string();
    std::vector<Tensor> in = c.tensors;
    in.push_back(Tensor::from_f64(DType::f64, {n, k}, b));
    const sparse::FactorCacheStats before = sparse::factor_cache_stats();
    auto out = (*model)->run(in);
    ASSERT_TRUE(out.has_value()) << out.status().to_string();
    // the backward's adjoint solve reuses the forward's factorization
    const sparse::FactorCacheStats after = sparse::factor_cache_stats();
    EXPECT_EQ(after.misses - before.misses, 1) << "A is factored once per run";
    EXPECT_EQ(after.hits - before.hits, 1);
    // other values: factored anew (a stale factorization would give the old solution)
    std::vector<Tensor> in2 = in;
    in2[2] = in[2].clone();
    for (int64_t p = 0; p < a.nnz(); ++p) in2[2].data<double>()[p] *= 2.0;
    auto out2 = (*model)->run(in2);
    ASSERT_TRUE(out2.has_value()) << out2.status().to_string();
    for (int64_t e = 0; e < n * k; ++e) ASSERT_NEAR((*out2)[0].get_f64(e), 0.5 * (*out)[0].get_f64(e), 1e-10) << "(2A)^-1 b";
    EXPECT_EQ(sparse::factor_cache_stats().misses - after.misses, 1);
    auto f = Factorization::factor(a, method);
    ASSERT_TRUE(f.has_value()) << f.status().to_string();
    std::vector<double> gvals(static_cast<size_t>(a.nnz()), 0.0);
    std::vector<int32_t> ri = row_indices(a);
    for (int64_t j = 0; j < k; ++j) {
      std::vector<double> bj(static_cast<size_t>(n)), rj(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) bj[i] = b[i * k + j], rj[i] = r[i * k + j];
      std::vector<double> xj = *f->solve(bj);
      for (int64_t i = 0; i < n; ++i) ASSERT_NEAR((*out)[0].get_f64(i * k + j), xj[i], 1e-10) << "x " << i;
      auto sg = solve_gradients(a, *f, xj, rj);
      ASSERT_TRUE(sg.has_value()) << sg.status().to_string();
      for (int64_t i = 0; i < n; ++i) ASSERT_NEAR((*out)[2].get_f64(i * k + j), sg->b[i], 1e-10) << "d/db " << i;
      for (int64_t p = 0; p < a.nnz(); ++p) {
        const int64_t row = ri[p], col = a.col_idx[p];
        if (method == DirectMethod::lu || col == row) gvals[p] += sg->values[p];
        else if (col > row) gvals[p] += sg->values[p] - sg->b[col] * xj[row];
      }
    }
    for (int64_t p = 0; p < a.nnz(); ++p) ASSERT_NEAR((*out)[1].get_f64(p), gvals[p], 1e-10) << "d/dvalues " << p;
  }
}

// A matrix assembled in the graph from COO triplets where every entry comes as two parts
// (0.3 v and 0.7 v, shuffled): sparse_solve treats repeated entries as their sum, on the cpu
// (merged before UMFPACK) and ref (dense assembly), and each part gets the whole entry's
// gradient.
TEST(GraphSparse, SparseSolveSumsRepeatedEntriesFromCoo) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(cat("seed ", seed));
  std::mt19937_64 rng(seed);
  const Csr<double, int32_t> a = poisson_2d<double, int32_t>(20);
  const int64_t n = a.rows, nnz = a.nnz();
  const std::vector<int32_t> ri = row_indices(a);
  std::vector<int64_t> perm(2 * nnz);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<double> r(2 * nnz), c(2 * nnz), v(2 * nnz);
  std::vector<int64_t> entry(2 * nnz);  // the API entry each triplet is part of
  for (int64_t q = 0; q < 2 * nnz; ++q) {
    const int64_t p = perm[q] / 2;
    entry[q] = p;
    r[q] = ri[p];
    c[q] = a.col_idx[p];
    v[q] = a.values[p] * (perm[q] % 2 ? 0.7 : 0.3);
  }
  const std::vector<double> b = random_vector(rng, n), w = random_vector(rng, n);
  Graph g;
  GraphBuilder gb(g);
  OpBuilder o(gb);
  ValueId rv = g.add_input("rows", TensorType{DType::i32, {2 * nnz}});
  ValueId cv = g.add_input("cols", TensorType{DType::i32, {2 * nnz}});
  ValueId vv = g.add_input("values", TensorType{DType::f64, {2 * nnz}});
  ValueId bv = g.add_input("b", TensorType{DType::f64, {n}});
  const CsrArrays m = coo_to_csr(o, rv, cv, vv, n, n);
  ValueId x = sparse_solve(o, m.row_ptr, m.col_idx, m.values, bv);
  ValueId loss = o.reduce_sum(o.mul(x, o.constant(Tensor::from_f64(DType::f64, {n}, w))), {}, false);
  auto grads = train::gradients(g, loss, std::vector<ValueId>{vv, bv});
  ASSERT_TRUE(grads.has_value()) << grads.status().to_string();
  g.outputs = {x, (*grads)[0], (*grads)[1]};
  auto f = Factorization::factor(a, DirectMethod::lu);
  ASSERT_TRUE(f.has_value()) << f.status().to_string();
  const std::vector<double> xw = *f->solve(b);
  auto sg = solve_gradients(a, *f, xw, w);
  ASSERT_TRUE(sg.has_value()) << sg.status().to_string();
  const std::vector<Tensor> in = {Tensor::from_f64(DType::i32, {2 * nnz}, r), Tensor::from_f64(DType::i32, {2 * nnz}, c),
                                  Tensor::from_f64(DType::f64, {2 * nnz}, v), Tensor::from_f64(DType::f64, {n}, b)};
  for (const char* dev : {"cpu", "ref"}) {
    auto model = Model::compile(g, {.device = dev});
    ASSERT_TRUE(model.has_value()) << dev << ": " << model.status().to_string();
    auto out = (*model)->run(in);
    ASSERT_TRUE(out.has_value()) << dev << ": " << out.status().to_string();
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR((*out)[0].get_f64(i), xw[i], 1e-10) << dev << " x " << i;
      ASSERT_NEAR((*out)[2].get_f64(i), sg->b[i], 1e-10) << dev << " d/db " << i;
    }
    for (int64_t q = 0; q < 2 * nnz; ++q)
      ASSERT_NEAR((*out)[1].get_f64(q), sg->values[entry[q]], 1e-10) << dev << " d/dvalues " << q;
  }
}

// Bad index data: an error naming the op and the entry, on the cpu and the reference, for
// SpMV (checked in the kernel) and the solve.
TEST(GraphSparse, BadIndexDataIsAnErrorNamingTheOp) {
  for (Op op : {Op::SpmvCsr, Op::SparseSolve})
    for (const char* dev : {"cpu", "ref"}) {
      SCOPED_TRACE(cat(op_name(op), " on ", dev));
      Graph g;
      GraphBuilder gb(g);
      OpBuilder o(gb);
      ValueId rp = g.add_input("row_ptr", TensorType{DType::i32, {4}});
      ValueId ci = g.add_input("col_idx", TensorType{DType::i32, {5}});
      ValueId va = g.add_input("values", TensorType{DType::f64, {5}});
      ValueId x = g.add_input("x", TensorType{DType::f64, {3}});
      g.outputs = {o.op(op, {rp, ci, va, x})};
      ASSERT_TRUE(o.ok()) << o.status().to_string();
      auto model = Model::compile(g, {.device = dev});
      ASSERT_TRUE(model.has_value()) << model.status().to_string();
      auto run = [&](std::vector<double> rpv, std::vector<double> civ) {
        std::vector<Tensor> in{Tensor::from_f64(DType::i32, {4}, rpv), Tensor::from_f64(DType::i32, {5}, civ),
                               Tensor::from_f64(DType::f64, {5}, std::vector<double>{4, 1, 5, -1, 6}),
                               Tensor::from_f64(DType::f64, {3}, std::vector<double>{1, 2, 3})};
        return (*model)->run(in);
      };
      auto good = run({0, 2, 3, 5}, {0, 1, 1, 0, 2});
      ASSERT_TRUE(good.has_value()) << good.status().to_string();
      EXPECT_NE((*good)[0].get_f64(0), 0.0);
      const std::vector<std::tuple<std::vector<double>, std::vector<double>, std::string>> bad = {
          {{0, 2, 3, 5}, {0, 1, 7, 0, 2}, "column 7 of entry 2"},
          {{0, 2, 3, 5}, {0, 1, -1, 0, 2}, "column -1 of entry 2"},
          {{0, 3, 2, 5}, {0, 1, 1, 0, 2}, "row_ptr decreases at row 1"},
          {{0, 2, 3, 9}, {0, 1, 1, 0, 2}, "row_ptr ends at 9"},
          {{1, 2, 3, 5}, {0, 1, 1, 0, 2}, "row_ptr[0] is 1"},
      };
      for (const auto& [rpv, civ, what] : bad) {
        auto r = run(rpv, civ);
        ASSERT_FALSE(r.has_value()) << what;
        const std::string msg = r.status().to_string();
        EXPECT_NE(msg.find(std::string(op_name(op))), std::string::npos) << msg;
        EXPECT_NE(msg.find(what), std::string::npos) << msg;
      }
    }
}

// The GPU devices' CSR kernels (opencl, vulkan, opengl, cuda): random SpMV/SpMM against the cpu, and
// bad index data skipped on the device and reported as an error naming the node.
TEST(GraphSparse, GpuSpmvMatchesCpuAndReportsBadIndices) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(cat("seed ", seed));
  std::mt19937_64 rng(seed);
  Csr<float, int32_t> a = random_sparse<float, int32_t>(rng, 300, 200, 0.05);
  int ran = 0;
  for (const std::string& dev : device_tests::devices_of_kind(DeviceKind::gpu)) {
    Graph g;
    GraphBuilder gb(g);
    OpBuilder o(gb);
    CsrInputs<float, int32_t> c = add_csr(g, a);
    ValueId x = g.add_input("x", TensorType{DType::f32, {200, 3}});
    g.outputs = {spmv(o, c.rp, c.ci, c.va, x)};
    ASSERT_TRUE(o.ok()) << o.status().to_string();
    auto model = compile_or_refusal(g, dev);
    if (!model.has_value()) {
      std::printf("%s not checked: %s\n", dev.c_str(), model.status().to_string().c_str());
      continue;
    }
    ++ran;
    std::vector<double> xd = random_vector(rng, 600);
    std::vector<Tensor> in = c.tensors;
    in.push_back(Tensor::from_f64(DType::f32, {200, 3}, xd));
    auto out = (*model)->run(in);
    ASSERT_TRUE(out.has_value()) << dev << ": " << out.status().to_string();
    std::vector<float> xv(xd.begin(), xd.end()), want(900);
    ASSERT_TRUE(spmm(a, xv.data(), 3, want.data()).is_ok());
    for (int64_t i = 0; i < 900; ++i) ASSERT_NEAR((*out)[0].get_f64(i), want[i], 1e-5 * (1 + std::abs(want[i]))) << dev << " y " << i;
    std::vector<double> bad_col = as_double(a.col_idx);
    bad_col[bad_col.size() / 2] = 200;
    in[1] = Tensor::from_f64(DType::i32, {a.nnz()}, bad_col);
    auto r = (*model)->run(in);
    ASSERT_FALSE(r.has_value()) << dev;
    EXPECT_NE(r.status().to_string().find("column index is outside"), std::string::npos) << r.status().to_string();
    std::vector<double> bad_rp = as_double(a.row_ptr);
    bad_rp[10] = bad_rp[11] + 1;  // row 10 ends before it starts
    in[1] = c.tensors[1];
    in[0] = Tensor::from_f64(DType::i32, {a.rows + 1}, bad_rp);
    r = (*model)->run(in);
    ASSERT_FALSE(r.has_value()) << dev;
    EXPECT_NE(r.status().to_string().find("row_ptr is not monotone"), std::string::npos) << r.status().to_string();
  }
  if (ran == 0) GTEST_SKIP() << "no GPU device (opencl, vulkan, opengl, cuda) is available here";
}

// The transposed SpMV/SpMM (spmv_csr transpose=1, y = A^T x: the gradient of spmv with respect
// to x) on the GPU devices: a scatter with atomic float adds into an output the device zeroes
// first (run twice: a stale output would double), f32 against the cpu; f64 refused with the
// reason; a bad column reported by name.
TEST(GraphSparse, GpuTransposedSpmvMatchesCpu) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(cat("seed ", seed));
  std::mt19937_64 rng(seed);
  Csr<float, int32_t> a = random_sparse<float, int32_t>(rng, 400, 90, 0.1);  // many rows per column: collisions
  const int64_t n = 400, m = 90;
  int ran = 0;
  for (int64_t k : {1, 3}) {
    Graph g;
    GraphBuilder gb(g);
    OpBuilder o(gb);
    CsrInputs<float, int32_t> c = add_csr(g, a);
    ValueId x = g.add_input("x", k == 1 ? TensorType{DType::f32, {n}} : TensorType{DType::f32, {n, k}});
    g.outputs = {o.op(Op::SpmvCsr, {c.rp, c.ci, c.va, x}, Attrs{{"transpose", int64_t{1}}, {"cols", m}})};
    ASSERT_TRUE(o.ok()) << o.status().to_string();
    std::vector<Tensor> in = c.tensors;
    in.push_back(Tensor::from_f64(DType::f32, k == 1 ? Sizes{n} : Sizes{n, k}, random_vector(rng, n * k)));
    auto cpu = Model::compile(g, {.device = "cpu"});
    ASSERT_TRUE(cpu.has_value()) << cpu.status().to_string();
    auto want = (*cpu)->run(in);
    ASSERT_TRUE(want.has_value()) << want.status().to_string();
    for (const std::string& dev : device_tests::devices_of_kind(DeviceKind::gpu)) {
      auto model = compile_or_refusal(g, dev);
      if (!model.has_value()) {
        std::printf("%s not checked: %s\n", dev.c_str(), model.status().to_string().c_str());
        continue;
      }
      ++ran;
      for (int round = 0; round < 2; ++round) {
        auto out = (*model)->run(in);
        ASSERT_TRUE(out.has_value()) << dev << ": " << out.status().to_string();
        for (int64_t e = 0; e < m * k; ++e)
          ASSERT_NEAR((*out)[0].get_f64(e), (*want)[0].get_f64(e), 1e-5 * (1 + std::abs((*want)[0].get_f64(e))))
              << dev << " k=" << k << " y " << e << ", run " << round;
      }
      std::vector<Tensor> bad = in;
      std::vector<double> bad_col = as_double(a.col_idx);
      bad_col[bad_col.size() / 2] = -1;  // negative: lavapipe once sign-extended int32 wrongly
      bad[1] = Tensor::from_f64(DType::i32, {a.nnz()}, bad_col);
      auto r = (*model)->run(bad);
      ASSERT_FALSE(r.has_value()) << dev;
      EXPECT_NE(r.status().to_string().find("column index is outside"), std::string::npos) << r.status().to_string();
    }
  }
  // A with no rows: y = A^T x is all zeros, though no work item runs; the output is a sum
  // with a nonzero constant so that it lands in a buffer the device did not just allocate
  {
    Graph g;
    GraphBuilder gb(g);
    OpBuilder o(gb);
    ValueId rp = g.add_input("row_ptr", TensorType{DType::i32, {1}});
    ValueId ci = g.add_input("col_idx", TensorType{DType::i32, {0}});
    ValueId va = g.add_input("values", TensorType{DType::f32, {0}});
    ValueId x = g.add_input("x", TensorType{DType::f32, {0}});
    ValueId y = o.op(Op::SpmvCsr, {rp, ci, va, x}, Attrs{{"transpose", int64_t{1}}, {"cols", m}});
    ValueId ones = g.add_input("ones", TensorType{DType::f32, {m}});
    g.outputs = {o.add(o.mul(ones, ones), y), y};
    ASSERT_TRUE(o.ok()) << o.status().to_string();
    const std::vector<Tensor> in = {Tensor::from_f64(DType::i32, {1}, std::vector<double>{0}),
                                    Tensor::from_f64(DType::i32, {0}, std::vector<double>{}),
                                    Tensor::from_f64(DType::f32, {0}, std::vector<double>{}),
                                    Tensor::from_f64(DType::f32, {0}, std::vector<double>{}),
                                    Tensor::from_f64(DType::f32, {m}, random_vector(rng, m))};
    std::vector<std::string> devices = device_tests::devices_of_kind(DeviceKind::gpu);
    devices.insert(devices.begin(), "cpu");
    for (const std::string& dev : devices) {
      auto model = compile_or_refusal(g, dev);
      if (!model.has_value()) continue;  // said above
      for (int round = 0; round < 2; ++round) {
        auto out = (*model)->run(in);
        ASSERT_TRUE(out.has_value()) << dev << ": " << out.status().to_string();
        for (int64_t e = 0; e < m; ++e) {
          ASSERT_EQ((*out)[1].get_f64(e), 0.0) << dev << " y " << e << " of an A with no rows";
          ASSERT_NEAR((*out)[0].get_f64(e), in[4].get_f64(e) * in[4].get_f64(e), 1e-6) << dev;
        }
      }
    }
  }
  // f64: no portable 64-bit float atomics, so refused with the reason (cuda has atomicAdd on
  // double and claims it: tests/cuda/csr_nvrtc_test.cpp)
  Graph g;
  GraphBuilder gb(g);
  OpBuilder o(gb);
  Csr<double, int32_t> ad = random_sparse<double, int32_t>(rng, 20, 10, 0.2);
  CsrInputs<double, int32_t> c = add_csr(g, ad);
  ValueId x = g.add_input("x", TensorType{DType::f64, {20}});
  g.outputs = {o.op(Op::SpmvCsr, {c.rp, c.ci, c.va, x}, Attrs{{"transpose", int64_t{1}}, {"cols", int64_t{10}}})};
  for (const std::string& dev : device_tests::devices_of_kind(DeviceKind::gpu)) {
    auto rep = explain(g, dev, {});
    if (!rep.has_value()) continue;  // the device is not here
    const std::string text = rep->to_text();
    EXPECT_FALSE(rep->ok()) << dev << "\n" << text;
    // a device with the CSR kernels (not webgpu) refuses f64 for the atomics
    if (text.find("no native CSR kernel on this device") == std::string::npos)
      EXPECT_NE(text.find("needs float atomics"), std::string::npos) << dev << "\n" << text;
  }
  if (ran == 0) GTEST_SKIP() << "no GPU device (opencl, vulkan, opengl, cuda) is available here";
}

// sddmm_csr (the values gradient of spmv_csr) on the GPU devices: a work item per row, against
// the cpu for f32 and f64 values (f64 where the device has it), and a bad column reported by
// name.
TEST(GraphSparse, GpuSddmmMatchesCpuAndReportsBadIndices) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(cat("seed ", seed));
  std::mt19937_64 rng(seed);
  Csr<double, int32_t> a = random_sparse<double, int32_t>(rng, 150, 120, 0.08);
  const int64_t n = 150, m = 120, k = 5;
  int ran = 0;
  for (DType vt : {DType::f32, DType::f64}) {
    Graph g;
    GraphBuilder gb(g);
    OpBuilder o(gb);
    ValueId rp = g.add_input("row_ptr", TensorType{DType::i32, {n + 1}});
    ValueId ci = g.add_input("col_idx", TensorType{DType::i32, {a.nnz()}});
    ValueId av = g.add_input("a", TensorType{vt, {n, k}});
    ValueId bv = g.add_input("b", TensorType{vt, {m, k}});
    g.outputs = {o.op(Op::SddmmCsr, {rp, ci, av, bv})};
    ASSERT_TRUE(o.ok()) << o.status().to_string();
    std::vector<Tensor> in{Tensor::from_f64(DType::i32, {n + 1}, as_double(a.row_ptr)),
                           Tensor::from_f64(DType::i32, {a.nnz()}, as_double(a.col_idx)),
                           Tensor::from_f64(vt, {n, k}, random_vector(rng, n * k)),
                           Tensor::from_f64(vt, {m, k}, random_vector(rng, m * k))};
    auto cpu = Model::compile(g, {.device = "cpu"});
    ASSERT_TRUE(cpu.has_value()) << cpu.status().to_string();
    auto want = (*cpu)->run(in);
    ASSERT_TRUE(want.has_value()) << want.status().to_string();
    for (const std::string& dev : device_tests::devices_of_kind(DeviceKind::gpu)) {
      auto model = compile_or_refusal(g, dev);
      if (!model.has_value()) {
        std::printf("%s %s not checked: %s\n", dev.c_str(), dtype_name(vt).data(), model.status().to_string().c_str());
        continue;
      }
      ++ran;
      auto rep = explain(g, dev, {});
      ASSERT_TRUE(rep.has_value()) << rep.status().to_string();
      EXPECT_NE(rep->to_text().find("CSR SDDMM kernel"), std::string::npos) << dev << "\n" << rep->to_text();
      auto out = (*model)->run(in);
      ASSERT_TRUE(out.has_value()) << dev << ": " << out.status().to_string();
      const double tol = vt == DType::f32 ? 1e-5 : 1e-12;
      for (int64_t p = 0; p < a.nnz(); ++p)
        ASSERT_NEAR((*out)[0].get_f64(p), (*want)[0].get_f64(p), tol * (1 + std::abs((*want)[0].get_f64(p)))) << dev << " " << p;
      std::vector<Tensor> bad = in;
      std::vector<double> bad_col = as_double(a.col_idx);
      bad_col[bad_col.size() / 3] = static_cast<double>(m);
      bad[1] = Tensor::from_f64(DType::i32, {a.nnz()}, bad_col);
      auto r = (*model)->run(bad);
      ASSERT_FALSE(r.has_value()) << dev;
      EXPECT_NE(r.status().to_string().find("sddmm_csr"), std::string::npos) << r.status().to_string();
      EXPECT_NE(r.status().to_string().find("outside b's rows"), std::string::npos) << r.status().to_string();
    }
  }
  if (ran == 0) GTEST_SKIP() << "no GPU device (opencl, vulkan, opengl, cuda) is available here";
}

// coo_to_csr in a graph: shuffled COO triplets with duplicates into CSR arrays, checked entry
// by entry (ordering, row_ptr, positions), then y = A x against the API (which sums the
// duplicates) and the values' gradient against its closed form w[r_k] x[c_k], on cpu and ref.
template <class V, class I>
void check_coo_to_csr(const char* device) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(cat(device, " seed ", seed));
  std::mt19937_64 rng(seed);
  const int64_t n = 120, m = 90, nnz = 2500;
  std::uniform_int_distribution<int64_t> ri(0, n - 1), cj(0, m - 1);
  Coo<V, I> coo{n, m, {}, {}, {}};
  for (int64_t k = 0; k < nnz; ++k) {
    const bool dup = k > 0 && k % 5 == 0;  // every fifth entry repeats an earlier (row, col)
    const int64_t src = dup ? std::uniform_int_distribution<int64_t>(0, k - 1)(rng) : 0;
    coo.row.push_back(static_cast<I>(dup ? static_cast<int64_t>(coo.row[src]) : (k % 17 == 3 ? 7 : ri(rng))));
    coo.col.push_back(static_cast<I>(dup ? static_cast<int64_t>(coo.col[src]) : cj(rng)));
  }
  const std::vector<double> vals = random_vector(rng, nnz), xs = random_vector(rng, m), w = random_vector(rng, n);
  coo.val.assign(vals.begin(), vals.end());
  const DType it = index_dtype<I>(), vt = value_dtype<V>();
  Graph g;
  GraphBuilder gb(g);
  OpBuilder o(gb);
  ValueId r = g.add_input("rows", TensorType{it, {nnz}});
  ValueId c = g.add_input("cols", TensorType{it, {nnz}});
  ValueId v = g.add_input("values", TensorType{vt, {nnz}});
  ValueId x = g.add_input("x", TensorType{vt, {m}});
  const CsrArrays a = coo_to_csr(o, r, c, v, n, m);
  ValueId y = spmv(o, a.row_ptr, a.col_idx, a.values, x);
  ValueId loss = o.reduce_sum(o.mul(y, o.constant(Tensor::from_f64(vt, {n}, w))), {}, false);
  auto grads = rlx::train::gradients(g, loss, std::vector<ValueId>{v});
  ASSERT_TRUE(grads.has_value()) << grads.status().to_string();
  g.outputs = {a.row_ptr, a.col_idx, a.values, a.position, y, (*grads)[0]};
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  auto model = Model::compile(g, {.device = device});
  ASSERT_TRUE(model.has_value()) << model.status().to_string();
  const std::vector<Tensor> in = {Tensor::from_f64(it, {nnz}, as_double(coo.row)), Tensor::from_f64(it, {nnz}, as_double(coo.col)),
                                  Tensor::from_f64(vt, {nnz}, vals), Tensor::from_f64(vt, {m}, xs)};
  auto out = (*model)->run(in);
  ASSERT_TRUE(out.has_value()) << out.status().to_string();
  const Tensor &rp = (*out)[0], &ci = (*out)[1], &cv = (*out)[2], &pos = (*out)[3];
  // row_ptr counts each row's entries
  std::vector<int64_t> count(n + 1, 0);
  for (int64_t k = 0; k < nnz; ++k) ++count[static_cast<int64_t>(coo.row[k]) + 1];
  for (int64_t i = 0; i < n; ++i) count[i + 1] += count[i];
  for (int64_t i = 0; i <= n; ++i) ASSERT_EQ(rp.get_f64(i), count[i]) << "row_ptr[" << i << "]";
  // every COO entry sits at its position, in its row, with its column and value
  std::vector<char> seen(nnz, 0);
  for (int64_t k = 0; k < nnz; ++k) {
    const int64_t p = static_cast<int64_t>(pos.get_f64(k));
    ASSERT_TRUE(p >= 0 && p < nnz && !seen[p]) << "position[" << k << "] = " << p << " is not a permutation";
    seen[p] = 1;
    ASSERT_TRUE(p >= count[coo.row[k]] && p < count[coo.row[k] + 1]) << "entry " << k << " left its row";
    ASSERT_EQ(ci.get_f64(p), static_cast<double>(coo.col[k])) << "entry " << k;
    ASSERT_EQ(cv.get_f64(p), static_cast<double>(static_cast<V>(vals[k]))) << "entry " << k;
  }
  // within a row: columns non-decreasing, equal columns in COO order
  std::vector<int64_t> from(nnz);
  for (int64_t k = 0; k < nnz; ++k) from[static_cast<int64_t>(pos.get_f64(k))] = k;
  int64_t repeats = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = count[i] + 1; p < count[i + 1]; ++p) {
      ASSERT_LE(ci.get_f64(p - 1), ci.get_f64(p)) << "row " << i;
      if (ci.get_f64(p - 1) == ci.get_f64(p)) {
        ++repeats;
        ASSERT_LT(from[p - 1], from[p]) << "duplicates of row " << i << " out of COO order";
      }
    }
  EXPECT_GT(repeats, nnz / 10) << "the test must exercise duplicates";
  // y = A x against the API's CSR, which sums the duplicates
  auto api = to_csr(coo);
  ASSERT_TRUE(api.has_value()) << api.status().to_string();
  std::vector<V> xv(xs.begin(), xs.end()), want(n);
  ASSERT_TRUE(spmm(*api, xv.data(), 1, want.data()).is_ok());
  const double tol = std::is_same_v<V, float> ? 1e-4 : 1e-12;
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR((*out)[4].get_f64(i), want[i], tol * (1 + std::abs(want[i]))) << "y " << i;
  for (int64_t k = 0; k < nnz; ++k) {
    const double d = w[coo.row[k]] * static_cast<double>(static_cast<V>(xs[coo.col[k]]));
    ASSERT_NEAR((*out)[5].get_f64(k), d, tol * (1 + std::abs(d))) << "d values[" << k << "]";
  }
  // an index outside the matrix is an error naming the entry
  std::vector<Tensor> bad = in;
  std::vector<double> br = as_double(coo.row);
  br[nnz / 3] = static_cast<double>(n);
  bad[0] = Tensor::from_f64(it, {nnz}, br);
  auto e = (*model)->run(bad);
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.status().to_string().find(cat("entry ", nnz / 3, " at (", n)), std::string::npos) << e.status().to_string();
}

TEST(GraphSparse, CooToCsrOrdersEntriesAndDifferentiates) {
  check_coo_to_csr<float, int32_t>("cpu");
  check_coo_to_csr<double, int64_t>("cpu");
  check_coo_to_csr<double, int32_t>("ref");
  check_coo_to_csr<float, int64_t>("ref");
}

TEST(GraphSparse, TypeRulesCheckDtypesAndShapes) {
  auto build = [](TensorType rp, TensorType ci, TensorType va, TensorType x, Op op, Attrs attrs = {}) {
    Graph g;
    GraphBuilder gb(g);
    OpBuilder o(gb);
    ValueId a = g.add_input("row_ptr", rp), b = g.add_input("col_idx", ci), c = g.add_input("values", va),
            d = g.add_input("x", x);
    o.op(op, {a, b, c, d}, std::move(attrs));
    return o.ok() ? std::string() : o.status().to_string();
  };
  const TensorType rp{DType::i32, {5}}, ci{DType::i32, {7}}, va{DType::f64, {7}}, x{DType::f64, {6}};
  EXPECT_EQ(build(rp, ci, va, x, Op::SpmvCsr), "");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {build(TensorType{DType::f32, {5}}, ci, va, x, Op::SpmvCsr), "row_ptr (input 0) must be i32 or i64"},
      {build(rp, TensorType{DType::i64, {7}}, va, x, Op::SpmvCsr), "col_idx (input 1) must have row_ptr's dtype"},
      {build(rp, ci, TensorType{DType::f64, {6}}, x, Op::SpmvCsr), "values (input 2) must be [nnz]"},
      {build(rp, ci, va, TensorType{DType::f32, {6}}, Op::SpmvCsr), "dtype"},
      {build(rp, ci, va, x, Op::SpmvCsr, Attrs{{"transpose", int64_t{1}}}), "needs the attribute cols"},
      {build(rp, ci, va, x, Op::SparseSolve), "b (input 3) must have 4 rows"},
      {build(rp, ci, va, TensorType{DType::f64, {4}}, Op::SparseSolve, Attrs{{"method", std::string("qr")}}),
       "method must be"},
      {build(TensorType{DType::i32, {2, 3}}, ci, va, x, Op::SpmvCsr), "static [n+1] vector"},
  };
  for (const auto& [msg, want] : cases) EXPECT_NE(msg.find(want), std::string::npos) << "got: " << msg << "\nwant: " << want;
}

// Devices without CSR kernels report the nodes illegal with the reason; sparse_solve is never
// run through a hidden copy to the host.
TEST(GraphSparse, OtherDevicesRefuseWithTheReason) {
  Graph g;
  GraphBuilder gb(g);
  OpBuilder o(gb);
  ValueId rp = g.add_input("row_ptr", TensorType{DType::i32, {5}});
  ValueId ci = g.add_input("col_idx", TensorType{DType::i32, {7}});
  ValueId va = g.add_input("values", TensorType{DType::f32, {7}});
  ValueId b = g.add_input("b", TensorType{DType::f32, {4}});
  g.outputs = {sparse_solve(o, rp, ci, va, b)};
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  int checked = 0;
  for (const std::string& dev : not_cpu_or_ref()) {
    auto rep = explain(g, dev, DispatchPolicy{});
    if (!rep.has_value()) {
      std::printf("sparse_solve dispatch on %s not checked: %s\n", dev.c_str(), rep.status().to_string().c_str());
      continue;
    }
    EXPECT_FALSE(rep->ok()) << dev;
    const std::string err = rep->illegal_error().to_string();
    EXPECT_NE(err.find("no sparse direct solver on this device"), std::string::npos) << dev << ": " << err;
    ++checked;
  }
  EXPECT_GE(checked, 1) << "no device other than cpu/ref could be asked";
  // coo_to_csr: a sort by index data, refused on every device but cpu and ref
  Graph h;
  GraphBuilder hb(h);
  OpBuilder ho(hb);
  const CsrArrays a = coo_to_csr(ho, h.add_input("r", TensorType{DType::i32, {7}}), h.add_input("c", TensorType{DType::i32, {7}}),
                                 h.add_input("v", TensorType{DType::f32, {7}}), 4, 4);
  h.outputs = {a.row_ptr, a.col_idx, a.values};
  ASSERT_TRUE(ho.ok()) << ho.status().to_string();
  for (const std::string& dev : not_cpu_or_ref()) {
    auto rep = explain(h, dev, DispatchPolicy{});
    if (!rep.has_value()) continue;  // said above
    EXPECT_FALSE(rep->ok()) << dev;
    EXPECT_NE(rep->illegal_error().to_string().find("no native COO sort on this device"), std::string::npos)
        << dev << ": " << rep->illegal_error().to_string();
  }
}

}  // namespace
}  // namespace rlx::sparse
