// Type rules of the CSR ops (spmv_csr, sddmm_csr, sparse_solve, sparse_solve_backward;
// docs/scientific.md). A matrix is three tensors: row_ptr [n+1] and col_idx [nnz] with one
// integer dtype (i32 or i64), values [nnz] (f32 or f64). The row count n comes from row_ptr's
// length, which must be static; the index *data* (monotone row_ptr, columns in range) can only
// be checked when the kernel runs, and is (src/sparse/graph_kernels.cpp).
#include "infer_util.h"

namespace rlx::infer {
namespace {

bool compatible(const Dim& a, const Dim& b) { return a == b || a.is_unknown() || b.is_unknown(); }

// row_ptr (input 0) and col_idx (input 1); sets n (rows) and nnz.
Status expect_pattern(Op op, const NodeSig& sig, int64_t& n, Dim& nnz) {
  const TensorType& rp = sig.inputs[0];
  const TensorType& ci = sig.inputs[1];
  if (rp.dtype != DType::i32 && rp.dtype != DType::i64)
    return fail(ErrorCode::dtype_error, op, sig, "row_ptr (input 0) must be i32 or i64, got ", dtype_name(rp.dtype));
  if (ci.dtype != rp.dtype)
    return fail(ErrorCode::dtype_error, op, sig, "col_idx (input 1) must have row_ptr's dtype ", dtype_name(rp.dtype),
                ", got ", dtype_name(ci.dtype));
  if (rp.rank() != 1 || !rp.shape[0].is_static() || rp.shape[0].size() < 1)
    return fail(ErrorCode::shape_error, op, sig, "row_ptr (input 0) must be a static [n+1] vector (n >= 0), got ",
                shape_to_string(rp.shape));
  if (ci.rank() != 1) return fail(ErrorCode::shape_error, op, sig, "col_idx (input 1) must be [nnz], got ", shape_to_string(ci.shape));
  n = rp.shape[0].size() - 1;
  nnz = ci.shape[0];
  return Status::ok();
}

// Input i is f32/f64 [len] or [len, k].
Status expect_dense(Op op, const NodeSig& sig, int i, const char* what, const Dim& len) {
  const TensorType& t = sig.inputs[i];
  if (t.dtype != DType::f32 && t.dtype != DType::f64)
    return fail(ErrorCode::dtype_error, op, sig, what, " (input ", i, ") must be f32 or f64, got ", dtype_name(t.dtype));
  if (t.rank() != 1 && t.rank() != 2)
    return fail(ErrorCode::shape_error, op, sig, what, " (input ", i, ") must be [m] or [m, k], got ", shape_to_string(t.shape));
  if (!compatible(t.shape[0], len))
    return fail(ErrorCode::shape_error, op, sig, what, " (input ", i, ") must have ", len.to_string(), " rows, got ",
                shape_to_string(t.shape));
  return Status::ok();
}

Status expect_values(Op op, const NodeSig& sig, int i, const Dim& nnz) {
  const TensorType& v = sig.inputs[i];
  if (v.dtype != DType::f32 && v.dtype != DType::f64)
    return fail(ErrorCode::dtype_error, op, sig, "values (input ", i, ") must be f32 or f64, got ", dtype_name(v.dtype));
  if (v.rank() != 1 || !compatible(v.shape[0], nnz))
    return fail(ErrorCode::shape_error, op, sig, "values (input ", i, ") must be [nnz] with nnz = col_idx's length ",
                nnz.to_string(), ", got ", shape_to_string(v.shape));
  return Status::ok();
}

// Dense inputs a and b have one dtype, one rank and (rank 2) one column count.
Status expect_same_cols(Op op, const NodeSig& sig, int a, int b) {
  RLX_TRY(expect_same_dtype(op, sig, a, b));
  const TensorType& ta = sig.inputs[a];
  const TensorType& tb = sig.inputs[b];
  if (ta.rank() != tb.rank() || (ta.rank() == 2 && !compatible(ta.shape[1], tb.shape[1])))
    return fail(ErrorCode::shape_error, op, sig, "inputs ", a, " and ", b, " must both be vectors or both [., k] with one k, got ",
                shape_to_string(ta.shape), " and ", shape_to_string(tb.shape));
  return Status::ok();
}

Shape like(const TensorType& t, const Dim& rows) {
  Shape s{rows};
  if (t.rank() == 2) s.push_back(t.shape[1]);
  return s;
}

Status expect_method(Op op, const NodeSig& sig) {
  const std::string m = sig.attrs.s("method", "lu");
  if (m != "lu" && m != "cholesky")
    return fail(ErrorCode::verify_error, op, sig, "method must be \"lu\" or \"cholesky\", got \"", m, "\"");
  return Status::ok();
}

// coo_to_csr: rows, cols [nnz] (one integer dtype), values [nnz]; attrs rows, cols (static).
Expected<Types> infer_coo_to_csr(Op op, const NodeSig& sig) {
  const TensorType& r = sig.inputs[0];
  const TensorType& c = sig.inputs[1];
  if (r.dtype != DType::i32 && r.dtype != DType::i64)
    return fail(ErrorCode::dtype_error, op, sig, "rows (input 0) must be i32 or i64, got ", dtype_name(r.dtype));
  if (c.dtype != r.dtype)
    return fail(ErrorCode::dtype_error, op, sig, "cols (input 1) must have rows' dtype ", dtype_name(r.dtype), ", got ",
                dtype_name(c.dtype));
  if (r.rank() != 1 || !r.shape[0].is_static())
    return fail(ErrorCode::shape_error, op, sig, "rows (input 0) must be a static [nnz] vector, got ", shape_to_string(r.shape));
  const Dim nnz = r.shape[0];
  if (c.rank() != 1 || !compatible(c.shape[0], nnz))
    return fail(ErrorCode::shape_error, op, sig, "cols (input 1) must be [nnz] with rows' length ", nnz.to_string(), ", got ",
                shape_to_string(c.shape));
  RLX_TRY(expect_values(op, sig, 2, nnz));
  const int64_t n = sig.attrs.i("rows", -1), m = sig.attrs.i("cols", -1);
  if (n < 0 || m < 0)
    return fail(ErrorCode::verify_error, op, sig, "the attributes rows and cols (the matrix's size) must be >= 0, got ", n,
                " and ", m);
  const int64_t limit = r.dtype == DType::i32 ? int64_t{2147483647} : int64_t{1} << 62;
  if (n >= limit || nnz.size() >= limit)
    return fail(ErrorCode::verify_error, op, sig, "rows = ", n, " and nnz = ", nnz.size(), " must fit the index dtype ",
                dtype_name(r.dtype));
  return Types{TensorType{r.dtype, Shape{Dim(n + 1)}}, TensorType{r.dtype, Shape{nnz}}, sig.inputs[2],
               TensorType{DType::i64, Shape{nnz}}};
}

}  // namespace

Expected<Types> infer_sparse(Op op, const NodeSig& sig) {
  if (op == Op::CooToCsr) return infer_coo_to_csr(op, sig);
  int64_t n = 0;
  Dim nnz;
  RLX_TRY(expect_pattern(op, sig, n, nnz));
  switch (op) {
    case Op::SpmvCsr: {
      RLX_TRY(expect_values(op, sig, 2, nnz));
      const int64_t tr = sig.attrs.i("transpose", 0);
      if (tr != 0 && tr != 1) return fail(ErrorCode::verify_error, op, sig, "transpose must be 0 or 1, got ", tr);
      const TensorType& x = sig.inputs[3];
      if (tr == 0) {
        if (sig.attrs.has("cols") && x.rank() >= 1 && x.shape[0].is_static() && sig.attrs.i("cols") != x.shape[0].size())
          return fail(ErrorCode::shape_error, op, sig, "cols = ", sig.attrs.i("cols"), " but x has ", x.shape[0].to_string(), " rows");
        RLX_TRY(expect_dense(op, sig, 3, "x", Dim::unknown()));
        RLX_TRY(expect_same_dtype(op, sig, 2, 3));
        return Types{TensorType{x.dtype, like(x, Dim(n))}};
      }
      const int64_t cols = sig.attrs.i("cols", -1);
      if (cols < 0) return fail(ErrorCode::verify_error, op, sig, "transpose=1 needs the attribute cols (A's column count) >= 0");
      RLX_TRY(expect_dense(op, sig, 3, "x", Dim(n)));
      RLX_TRY(expect_same_dtype(op, sig, 2, 3));
      return Types{TensorType{x.dtype, like(x, Dim(cols))}};
    }
    case Op::SddmmCsr: {
      RLX_TRY(expect_dense(op, sig, 2, "a", Dim(n)));
      RLX_TRY(expect_dense(op, sig, 3, "b", Dim::unknown()));
      RLX_TRY(expect_same_cols(op, sig, 2, 3));
      return Types{TensorType{sig.inputs[2].dtype, Shape{nnz}}};
    }
    case Op::SparseSolve: {
      RLX_TRY(expect_method(op, sig));
      RLX_TRY(expect_values(op, sig, 2, nnz));
      RLX_TRY(expect_dense(op, sig, 3, "b", Dim(n)));
      RLX_TRY(expect_same_dtype(op, sig, 2, 3));
      return Types{sig.inputs[3]};
    }
    case Op::SparseSolveBackward: {
      RLX_TRY(expect_method(op, sig));
      RLX_TRY(expect_values(op, sig, 2, nnz));
      RLX_TRY(expect_dense(op, sig, 3, "x", Dim(n)));
      RLX_TRY(expect_dense(op, sig, 4, "g", Dim(n)));
      RLX_TRY(expect_same_dtype(op, sig, 2, 3));
      RLX_TRY(expect_same_cols(op, sig, 3, 4));
      return Types{sig.inputs[2], sig.inputs[4]};
    }
    default: break;
  }
  return fail(ErrorCode::internal, op, sig, "not a sparse op");
}

}  // namespace rlx::infer
