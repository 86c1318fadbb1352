// Sparse direct solvers through SuiteSparse: LU with UMFPACK, Cholesky with CHOLMOD. The CSR
// arrays are handed over as compressed columns (CSR of A = CSC of A^T), so nothing is ever
// densified; UMFPACK then solves with its transposed system to get A x = b.
#include <cholmod.h>
#include <umfpack.h>

#include "sparse_internal.h"

namespace rlx::sparse {

struct Factorization::Impl {
  DirectMethod method = DirectMethod::lu;
  int64_t n = 0;
  // UMFPACK
  std::vector<SuiteSparse_long> ap, ai;
  std::vector<double> ax;
  void* numeric = nullptr;
  // CHOLMOD
  cholmod_common common;
  bool common_started = false;
  cholmod_factor* factor = nullptr;
  int64_t nnz_factor = 0;

  ~Impl() {
    if (numeric) umfpack_dl_free_numeric(&numeric);
    if (factor) cholmod_l_free_factor(&factor, &common);
    if (common_started) cholmod_l_finish(&common);
  }
};

Factorization::Factorization() = default;
Factorization::~Factorization() { delete impl_; }
Factorization::Factorization(Factorization&& o) noexcept : impl_(o.impl_) { o.impl_ = nullptr; }
Factorization& Factorization::operator=(Factorization&& o) noexcept {
  if (this != &o) {
    delete impl_;
    impl_ = o.impl_;
    o.impl_ = nullptr;
  }
  return *this;
}
int64_t Factorization::size() const { return impl_ ? impl_->n : 0; }
DirectMethod Factorization::method() const { return impl_ ? impl_->method : DirectMethod::lu; }
int64_t Factorization::factor_nnz() const { return impl_ ? impl_->nnz_factor : 0; }

template <class V, class I>
Expected<Factorization> Factorization::factor(const Csr<V, I>& a, DirectMethod method) {
  const char* what = method == DirectMethod::lu ? "sparse LU (UMFPACK)" : "sparse Cholesky (CHOLMOD)";
  RLX_TRY(validate(a, cat(what, ": A")));
  if (a.rows != a.cols) return error(ErrorCode::shape_error, what, ": A must be square, got ", a.rows, " x ", a.cols);
  Factorization f;
  f.impl_ = new Impl;
  Impl& m = *f.impl_;
  m.method = method;
  m.n = a.rows;
  const int64_t n = a.rows, nnz = a.nnz();
  if (method == DirectMethod::lu) {
    m.ap.assign(a.row_ptr.begin(), a.row_ptr.end());
    m.ai.assign(a.col_idx.begin(), a.col_idx.end());
    m.ax.assign(a.values.begin(), a.values.end());
    void* symbolic = nullptr;
    double info[UMFPACK_INFO];
    SuiteSparse_long st = umfpack_dl_symbolic(n, n, m.ap.data(), m.ai.data(), m.ax.data(), &symbolic, nullptr, info);
    if (st != UMFPACK_OK) return error(ErrorCode::runtime_error, what, ": symbolic analysis failed (status ", st, ")");
    st = umfpack_dl_numeric(m.ap.data(), m.ai.data(), m.ax.data(), symbolic, &m.numeric, nullptr, info);
    umfpack_dl_free_symbolic(&symbolic);
    if (st == UMFPACK_WARNING_singular_matrix) return error(ErrorCode::runtime_error, what, ": A is singular");
    if (st == UMFPACK_ERROR_out_of_memory) return error(ErrorCode::runtime_error, what, ": out of memory");
    if (st != UMFPACK_OK) return error(ErrorCode::runtime_error, what, ": numeric factorization failed (status ", st, ")");
    SuiteSparse_long lnz = 0, unz = 0, nr = 0, nc = 0, nzud = 0;
    umfpack_dl_get_lunz(&lnz, &unz, &nr, &nc, &nzud, m.numeric);
    m.nnz_factor = lnz + unz;
    return f;
  }
  cholmod_l_start(&m.common);
  m.common_started = true;
  m.common.print = 0;
  // supernodal LL^T: a simplicial LDL^T would factor an indefinite matrix without complaint
  m.common.supernodal = CHOLMOD_SUPERNODAL;
  cholmod_sparse* s = cholmod_l_allocate_sparse(n, n, nnz, 1, 1, -1, CHOLMOD_REAL, &m.common);
  if (!s) return error(ErrorCode::runtime_error, what, ": out of memory");
  auto* p = static_cast<SuiteSparse_long*>(s->p);
  auto* ii = static_cast<SuiteSparse_long*>(s->i);
  auto* x = static_cast<double*>(s->x);
  for (int64_t k = 0; k <= n; ++k) p[k] = a.row_ptr[k];
  for (int64_t k = 0; k < nnz; ++k) {
    ii[k] = a.col_idx[k];
    x[k] = a.values[k];
  }
  m.factor = cholmod_l_analyze(s, &m.common);
  if (!m.factor) {
    cholmod_l_free_sparse(&s, &m.common);
    return error(ErrorCode::runtime_error, what, ": analysis failed (status ", m.common.status, ")");
  }
  cholmod_l_factorize(s, m.factor, &m.common);
  cholmod_l_free_sparse(&s, &m.common);
  if (m.common.status == CHOLMOD_NOT_POSDEF || m.factor->minor < static_cast<size_t>(n))
    return error(ErrorCode::runtime_error, what, ": A is not positive definite (leading minor ", m.factor->minor + 1, ")");
  if (m.common.status < CHOLMOD_OK)
    return error(ErrorCode::runtime_error, what, ": factorization failed (status ", m.common.status, ")");
  m.nnz_factor = static_cast<int64_t>(m.common.lnz);
  return f;
}

Expected<std::vector<double>> Factorization::solve(const std::vector<double>& b, bool transposed) const {
  if (!impl_) return error(ErrorCode::invalid_argument, "solve: the factorization is empty");
  Impl& m = *impl_;
  if (static_cast<int64_t>(b.size()) != m.n)
    return error(ErrorCode::shape_error, "solve: b has ", b.size(), " entries, A has ", m.n, " rows");
  std::vector<double> x(b.size());
  if (m.method == DirectMethod::lu) {
    double info[UMFPACK_INFO];
    // UMFPACK holds A^T (our CSR read as columns): A x = b is its transposed system
    const SuiteSparse_long st = umfpack_dl_solve(transposed ? UMFPACK_A : UMFPACK_At, m.ap.data(), m.ai.data(), m.ax.data(),
                                                 x.data(), b.data(), m.numeric, nullptr, info);
    if (st != UMFPACK_OK) return error(ErrorCode::runtime_error, "sparse LU solve failed (status ", st, ")");
    return x;
  }
  cholmod_dense* bd = cholmod_l_allocate_dense(m.n, 1, m.n, CHOLMOD_REAL, &m.common);
  if (!bd) return error(ErrorCode::runtime_error, "sparse Cholesky solve: out of memory");
  std::copy(b.begin(), b.end(), static_cast<double*>(bd->x));
  cholmod_dense* xd = cholmod_l_solve(CHOLMOD_A, m.factor, bd, &m.common);  // A symmetric: A^T = A
  cholmod_l_free_dense(&bd, &m.common);
  if (!xd) return error(ErrorCode::runtime_error, "sparse Cholesky solve failed (status ", m.common.status, ")");
  std::copy(static_cast<double*>(xd->x), static_cast<double*>(xd->x) + m.n, x.begin());
  cholmod_l_free_dense(&xd, &m.common);
  return x;
}

template <class V, class I>
Expected<SolveGradients> solve_gradients(const Csr<V, I>& a, const Factorization& f, const std::vector<double>& x,
                                         const std::vector<double>& g) {
  if (f.size() != a.rows || static_cast<int64_t>(x.size()) != a.cols || static_cast<int64_t>(g.size()) != a.rows)
    return error(ErrorCode::shape_error, "solve_gradients: A is ", a.rows, " x ", a.cols, ", the factorization ", f.size(),
                 ", x ", x.size(), ", g ", g.size());
  SolveGradients r;
  RLX_ASSIGN_OR_RETURN(r.b, f.solve(g, /*transposed=*/true));
  r.values.resize(static_cast<size_t>(a.nnz()));
  for (int64_t i = 0; i < a.rows; ++i)
    for (I k = a.row_ptr[i]; k < a.row_ptr[i + 1]; ++k) r.values[k] = -r.b[i] * x[a.col_idx[k]];
  return r;
}

#define RLX_SPARSE_DIRECT(V, I)                                                                         \
  template Expected<Factorization> Factorization::factor(const Csr<V, I>&, DirectMethod);             \
  template Expected<SolveGradients> solve_gradients(const Csr<V, I>&, const Factorization&,           \
                                                    const std::vector<double>&, const std::vector<double>&);
RLX_SPARSE_DIRECT(float, int32_t)
RLX_SPARSE_DIRECT(float, int64_t)
RLX_SPARSE_DIRECT(double, int32_t)
RLX_SPARSE_DIRECT(double, int64_t)
#undef RLX_SPARSE_DIRECT

}  // namespace rlx::sparse
