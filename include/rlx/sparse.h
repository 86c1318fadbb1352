// rlx/sparse.h: sparse matrices and solvers (docs/scientific.md).
//
// A C++ API (plus spmv() and sparse_solve() as graph ops, below): CSR matrices (built from COO triplets) with f32/f64 values and
// i32/i64 indices; multi-threaded SpMV/SpMM on the CPU (rlx::ThreadPool); Krylov solvers (CG,
// preconditioned CG with Jacobi or IC(0), BiCGSTAB, restarted GMRES) with a tolerance, an
// iteration cap and a convergence report; sparse direct LU (UMFPACK) and Cholesky (CHOLMOD)
// that never form a dense matrix; the adjoint-solve gradients of x = A^-1 b with respect to
// A's stored values and b; Matrix Market (.mtx) reading and writing with strict validation.
//
// Types: V is float or double, I is int32_t or int64_t (explicitly instantiated). Every
// function that takes a matrix from outside validates it (validate()); errors name what is
// wrong (and for files, the file and line).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/op_builder.h"
#include "rlx/status.h"

namespace rlx::sparse {

// A matrix in coordinate form (construction, Matrix Market): entries (row[k], col[k], val[k]),
// 0-based; duplicates are summed when converted to CSR.
template <class V, class I>
struct Coo {
  int64_t rows = 0, cols = 0;
  std::vector<I> row, col;
  std::vector<V> val;
};

// Compressed sparse rows: row i holds entries row_ptr[i] .. row_ptr[i+1]-1, with column
// indices col_idx (strictly increasing within a row after to_csr) and values.
template <class V, class I>
struct Csr {
  int64_t rows = 0, cols = 0;
  std::vector<I> row_ptr;  // rows + 1 entries, row_ptr[0] = 0, non-decreasing
  std::vector<I> col_idx;  // nnz entries in [0, cols)
  std::vector<V> values;   // nnz entries
  int64_t nnz() const { return static_cast<int64_t>(col_idx.size()); }
};

// Checks the CSR invariants (sizes, row_ptr monotone and ending at nnz, columns in range and
// strictly increasing in each row). `what` names the matrix in the error.
template <class V, class I>
Status validate(const Csr<V, I>& a, std::string_view what = "matrix");

// COO -> CSR: sorts each row by column and sums duplicates. Errors on indices out of range or
// sizes that do not fit I.
template <class V, class I>
Expected<Csr<V, I>> to_csr(const Coo<V, I>& coo);

// y = alpha * A x + beta * y (x has A.cols entries, y A.rows). Rows are split over the thread
// pool in blocks of about equal nonzero count. Sizes are checked (error, never a bad access).
template <class V, class I>
Status spmv(const Csr<V, I>& a, const V* x, int64_t x_size, V* y, int64_t y_size, V alpha = 1, V beta = 0);
// y = A^T x (serial scatter; for gradients).
template <class V, class I>
Status spmv_transposed(const Csr<V, I>& a, const V* x, int64_t x_size, V* y, int64_t y_size);
// Y = A X for row-major X [A.cols, k] and Y [A.rows, k].
template <class V, class I>
Status spmm(const Csr<V, I>& a, const V* x, int64_t k, V* y);

// ---- iterative solvers

enum class Preconditioner : uint8_t { none, jacobi, ic0 };

struct SolveOptions {
  double rtol = 1e-8;         // stop when ||b - A x|| <= max(rtol * ||b||, atol)
  double atol = 0;
  int64_t max_iterations = 10000;
  Preconditioner preconditioner = Preconditioner::none;  // cg (pcg) and bicgstab; gmres: jacobi only
  int gmres_restart = 30;
  bool record_history = false;  // residual norm after every iteration
};

// What a solve did. `converged` false is not an error: the caller decides.
struct SolveReport {
  std::string method;           // "cg", "pcg(jacobi)", "bicgstab", "gmres(30)", ...
  bool converged = false;
  int64_t iterations = 0;
  double residual_norm = 0;     // ||b - A x|| recomputed at the end (not the recursive estimate)
  double relative_residual = 0; // residual_norm / ||b||
  std::vector<double> history;  // when record_history
  std::string to_string() const;
};

// Solves A x = b; x holds the initial guess on entry (zeros are fine) and the solution on
// exit. CG needs A symmetric positive definite (a breakdown is reported as an error);
// BiCGSTAB and GMRES take general square A. IC(0) fails with an error when a pivot is not
// positive (the pattern's incomplete factor does not exist).
template <class V, class I>
Expected<SolveReport> cg(const Csr<V, I>& a, const std::vector<V>& b, std::vector<V>& x, const SolveOptions& o = {});
template <class V, class I>
Expected<SolveReport> bicgstab(const Csr<V, I>& a, const std::vector<V>& b, std::vector<V>& x,
                               const SolveOptions& o = {});
template <class V, class I>
Expected<SolveReport> gmres(const Csr<V, I>& a, const std::vector<V>& b, std::vector<V>& x, const SolveOptions& o = {});

// ---- direct solvers (SuiteSparse; computed in double, f32 input converted once)

// UMFPACK / CHOLMOD (SPD; CHOLMOD gets the CSR arrays as columns, A^T, and reads that one's
// lower triangle: A's upper triangle, entries (i, c) with c >= i)
enum class DirectMethod : uint8_t { lu, cholesky };

// A factorization of one square matrix, reusable for many right-hand sides and for the
// transposed system (adjoint solves).
class Factorization {
 public:
  Factorization();
  ~Factorization();
  Factorization(Factorization&&) noexcept;
  Factorization& operator=(Factorization&&) noexcept;
  // Factors A (errors: not square, singular, not positive definite, out of memory).
  template <class V, class I>
  static Expected<Factorization> factor(const Csr<V, I>& a, DirectMethod method);
  // x = A^-1 b, or A^-T b when `transposed`.
  Expected<std::vector<double>> solve(const std::vector<double>& b, bool transposed = false) const;
  int64_t size() const;
  DirectMethod method() const;
  // Nonzeros in the factors (L and U, or L), for reports.
  int64_t factor_nnz() const;

 private:
  struct Impl;
  Impl* impl_ = nullptr;
};

// Gradients of a loss through x = A^-1 b, given g = d loss / d x (the adjoint method):
// gb = A^-T g, and for each stored entry k of A at (i, j): g_values[k] = -gb[i] * x[j]
// (the gradient restricted to A's sparsity pattern).
struct SolveGradients {
  std::vector<double> values, b;
};
template <class V, class I>
Expected<SolveGradients> solve_gradients(const Csr<V, I>& a, const Factorization& f, const std::vector<double>& x,
                                         const std::vector<double>& g);

// ---- Matrix Market

// Parses Matrix Market text ("%%MatrixMarket matrix coordinate real|integer|pattern
// general|symmetric|skew-symmetric"; array format is refused). Symmetric files are expanded
// to both triangles. Errors name `name` and the line. Rows are bounded by max(2^20, 16 x the
// text's size) so that a short file cannot make the CSR conversion allocate without bound.
Expected<Coo<double, int64_t>> parse_matrix_market(std::string_view text, std::string_view name);
Expected<Coo<double, int64_t>> read_matrix_market(const std::string& path);
// Writes A as "coordinate real general" with 17 significant digits.
template <class V, class I>
Status write_matrix_market(const std::string& path, const Csr<V, I>& a);

// ---- in a graph

// A matrix in a graph is its three CSR arrays as ordinary tensors: row_ptr [n+1] and col_idx
// [nnz] (i32 or i64, one dtype), values [nnz] (f32 or f64). The ops check the index data when
// they run (an error naming the op, never a bad access).
//
// y = A x (SpMV for x [m], SpMM for x [m, k]) as the native graph op spmv_csr: the cpu's
// thread-pooled CSR kernel, plain loops on ref (see docs/scientific.md for other devices).
// Autodiff gives d/dvalues (on the pattern, sddmm_csr) and d/dx (= A^T g, spmv_csr
// transposed).
ValueId spmv(OpBuilder& o, ValueId row_ptr, ValueId col_idx, ValueId values, ValueId x);
// A rows x cols matrix built in the graph from COO triplets (entry k: values[k] at
// (row_idx[k], col_idx[k]); i32 or i64 indices, f32 or f64 values): the graph op coo_to_csr.
// Entries are ordered by row, then column, then COO position; duplicates are kept side by side
// (spmv and sparse_solve read them as their sum; sddmm gives each its own product). `position[k]` is where entry k went, and
// the values' gradient is the CSR values' gradient gathered through it. An index outside the
// matrix is an error naming the entry when the graph runs.
struct CsrArrays {
  ValueId row_ptr, col_idx, values, position;
};
CsrArrays coo_to_csr(OpBuilder& o, ValueId row_idx, ValueId col_idx, ValueId values, int64_t rows, int64_t cols);
// x = A^-1 b (b [n] or [n, k], A square) as the graph op sparse_solve: a sparse direct
// factorization on the cpu (UMFPACK LU or CHOLMOD Cholesky, never densified); its gradient is
// the adjoint solve (sparse_solve_backward, via solve_gradients()). Refused on GPU devices.
ValueId sparse_solve(OpBuilder& o, ValueId row_ptr, ValueId col_idx, ValueId values, ValueId b,
                     DirectMethod method = DirectMethod::lu);
// The row index of every stored entry (row_ptr expanded): COO rows from a CSR matrix.
template <class V, class I>
std::vector<I> row_indices(const Csr<V, I>& a);

// ---- test matrices

// The 5-point Laplacian on an n x n grid (Dirichlet boundary): n^2 unknowns, SPD.
template <class V, class I>
Csr<V, I> poisson_2d(int64_t n);
// The 7-point Laplacian on an n x n x n grid: n^3 unknowns, SPD.
template <class V, class I>
Csr<V, I> poisson_3d(int64_t n);

}  // namespace rlx::sparse
