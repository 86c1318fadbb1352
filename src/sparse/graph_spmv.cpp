// spmv(), coo_to_csr() and sparse_solve() in a graph: the native sparse ops of the ops table
// (spmv_csr, coo_to_csr, sparse_solve); their type rules check the arrays' dtypes and shapes.
#include "rlx/sparse.h"

namespace rlx::sparse {

ValueId spmv(OpBuilder& o, ValueId row_ptr, ValueId col_idx, ValueId values, ValueId x) {
  return o.op(Op::SpmvCsr, {row_ptr, col_idx, values, x});
}

CsrArrays coo_to_csr(OpBuilder& o, ValueId row_idx, ValueId col_idx, ValueId values, int64_t rows, int64_t cols) {
  const std::vector<ValueId> r = o.op_multi(Op::CooToCsr, {row_idx, col_idx, values}, Attrs{{"rows", rows}, {"cols", cols}});
  if (r.size() != 4) return CsrArrays{kNoValue, kNoValue, kNoValue, kNoValue};
  return CsrArrays{r[0], r[1], r[2], r[3]};
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
