// spmv() in a graph: gather, multiply, scatter_add (existing ops; autodiff handles them).
#include "rlx/sparse.h"

namespace rlx::sparse {

ValueId spmv(OpBuilder& o, ValueId row_idx, ValueId col_idx, ValueId values, ValueId x, int64_t rows) {
  if (!o.ok()) return kNoValue;
  if (o.rank(values) != 1 || o.rank(row_idx) != 1 || o.rank(col_idx) != 1 || (o.rank(x) != 1 && o.rank(x) != 2))
    return o.fail(error(ErrorCode::shape_error, "sparse spmv: row/col indices and values must be [nnz] and x [cols] or "
                        "[cols, k], got ", o.type(row_idx).to_string(), ", ", o.type(col_idx).to_string(), ", ",
                        o.type(values).to_string(), ", ", o.type(x).to_string()));
  if (rows < 0) return o.fail(error(ErrorCode::shape_error, "sparse spmv: negative row count ", rows));
  ValueId xg = o.gather(x, col_idx, 0);  // [nnz] or [nnz, k]
  ValueId v = o.rank(x) == 2 ? o.op(Op::Unsqueeze, {values}, Attrs{{"axes", std::vector<int64_t>{1}}}) : values;
  ValueId prod = o.mul(v, xg);
  Sizes out{rows};
  if (o.rank(x) == 2) out.push_back(o.shape(x)[1].size());
  ValueId base = o.full(0.0, o.dtype(values), out);
  return o.op(Op::ScatterAdd, {base, row_idx, prod}, Attrs{{"axis", int64_t{0}}});
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
