// spmv() and sparse_solve() in a graph: the native CSR ops of the ops table (spmv_csr,
// sparse_solve); their type rules check the arrays' dtypes and shapes.
#include "rlx/sparse.h"

namespace rlx::sparse {

ValueId spmv(OpBuilder& o, ValueId row_ptr, ValueId col_idx, ValueId values, ValueId x) {
  return o.op(Op::SpmvCsr, {row_ptr, col_idx, values, x});
}

ValueId sparse_solve(OpBuilder& o, ValueId row_ptr, ValueId col_idx, ValueId values, ValueId b, DirectMethod method) {
  return o.op(Op::SparseSolve, {row_ptr, col_idx, values, b},
              Attrs{{"method", std::string(method == DirectMethod::cholesky ? "cholesky" : "lu")}});
}

template <class V, class I>
std::vector<I> row_indices(const Csr<V, I>& a) {
  std::vector<I> r(static_cast<size_t>(a.nnz()));
  for (int64_t i = 0; i < a.rows; ++i)
    for (I k = a.row_ptr[i]; k < a.row_ptr[i + 1]; ++k) r[k] = static_cast<I>(i);
  return r;
}

template std::vector<int32_t> row_indices(const Csr<float, int32_t>&);
template std::vector<int64_t> row_indices(const Csr<float, int64_t>&);
template std::vector<int32_t> row_indices(const Csr<double, int32_t>&);
template std::vector<int64_t> row_indices(const Csr<double, int64_t>&);

}  // namespace rlx::sparse
