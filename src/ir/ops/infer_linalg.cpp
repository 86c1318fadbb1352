// Type rules of the dense linear-algebra ops (lu, cholesky, qr, svd, eigh, triangular_solve,
// solve, det, slogdet, lstsq). All take f32 or f64 matrices in the last two axes and are
// batched over the leading axes, which must agree exactly between operands (no broadcasting).
#include <algorithm>

#include "infer_util.h"

namespace rlx::infer {
namespace {

bool compatible(const Dim& a, const Dim& b) { return a == b || a.is_unknown() || b.is_unknown(); }

Status expect_matrix(Op op, const NodeSig& sig, int i, bool square) {
  const TensorType& t = sig.inputs[i];
  if (t.dtype != DType::f32 && t.dtype != DType::f64)
    return fail(ErrorCode::dtype_error, op, sig, "input ", i, " must be f32 or f64 (factorizations compute in "
                "f32 or f64), got ", dtype_name(t.dtype));
  if (t.rank() < 2) return fail(ErrorCode::shape_error, op, sig, "input ", i, " must be a matrix [..., m, n], got rank ", t.rank());
  if (square && !compatible(t.shape[t.rank() - 1], t.shape[t.rank() - 2]))
    return fail(ErrorCode::shape_error, op, sig, "input ", i, " must be square, got ", shape_to_string(t.shape));
  return Status::ok();
}

// The leading (batch) dims of input i.
Shape batch_of(const TensorType& t) { return Shape(t.shape.begin(), t.shape.end() - 2); }

Shape with(Shape batch, std::initializer_list<Dim> tail) {
  for (const Dim& d : tail) batch.push_back(d);
  return batch;
}

// A [..., n, n] (or [..., m, n]) and B [..., rows, k] with the same batch and dtype.
Status expect_rhs(Op op, const NodeSig& sig, const Dim& rows) {
  const TensorType& a = sig.inputs[0];
  const TensorType& b = sig.inputs[1];
  RLX_TRY(expect_matrix(op, sig, 1, false));
  RLX_TRY(expect_same_dtype(op, sig, 0, 1));
  if (b.rank() != a.rank())
    return fail(ErrorCode::shape_error, op, sig, "B must have A's rank (same batch dims, no broadcasting): A ",
                shape_to_string(a.shape), ", B ", shape_to_string(b.shape));
  for (int d = 0; d < a.rank() - 2; ++d)
    if (!compatible(a.shape[d], b.shape[d]))
      return fail(ErrorCode::shape_error, op, sig, "batch dims differ: A ", shape_to_string(a.shape), ", B ",
                  shape_to_string(b.shape));
  if (!compatible(b.shape[b.rank() - 2], rows))
    return fail(ErrorCode::shape_error, op, sig, "B has ", b.shape[b.rank() - 2].to_string(), " rows, A gives ",
                rows.to_string(), ": A ", shape_to_string(a.shape), ", B ", shape_to_string(b.shape));
  return Status::ok();
}

Dim min_dim(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) return Dim(std::min(a.size(), b.size()));
  if (a == b) return a;
  return Dim::unknown();
}

}  // namespace

Expected<Types> infer_linalg(Op op, const NodeSig& sig) {
  const bool square = op != Op::Qr && op != Op::Svd && op != Op::Lstsq;
  RLX_TRY(expect_matrix(op, sig, 0, square));
  const TensorType& a = sig.inputs[0];
  const DType dt = a.dtype;
  const Shape batch = batch_of(a);
  const Dim m = a.shape[a.rank() - 2], n = a.shape[a.rank() - 1];
  switch (op) {
    case Op::Lu: return Types{a, TensorType{DType::i64, with(batch, {n})}};
    case Op::Cholesky: return Types{a};
    case Op::Qr: {
      const Dim k = min_dim(m, n);
      return Types{TensorType{dt, with(batch, {m, k})}, TensorType{dt, with(batch, {k, n})}};
    }
    case Op::Svd: {
      const Dim k = min_dim(m, n);
      return Types{TensorType{dt, with(batch, {m, k})}, TensorType{dt, with(batch, {k})},
                   TensorType{dt, with(batch, {k, n})}};
    }
    case Op::Eigh: return Types{TensorType{dt, with(batch, {n})}, a};
    case Op::TriangularSolve:
    case Op::Solve: {
      RLX_TRY(expect_rhs(op, sig, n));
      for (const char* flag : {"lower", "transpose", "unit_diagonal"}) {
        const int64_t v = sig.attrs.i(flag, op == Op::TriangularSolve && std::string_view(flag) == "lower" ? 1 : 0);
        if (v != 0 && v != 1) return fail(ErrorCode::verify_error, op, sig, "attribute '", flag, "' must be 0 or 1, got ", v);
      }
      return Types{sig.inputs[1]};
    }
    case Op::Det: return Types{TensorType{dt, batch}};
    case Op::Slogdet: return Types{TensorType{dt, batch}, TensorType{dt, batch}};
    case Op::Lstsq: {
      if (m.is_static() && n.is_static() && m.size() < n.size())
        return fail(ErrorCode::shape_error, op, sig, "A must have at least as many rows as columns (m >= n), got ",
                    shape_to_string(a.shape));
      RLX_TRY(expect_rhs(op, sig, m));
      const TensorType& b = sig.inputs[1];
      return Types{TensorType{dt, with(batch, {n, b.shape[b.rank() - 1]})}};
    }
    default: break;
  }
  return fail(ErrorCode::internal, op, sig, "not a linear-algebra op");
}

}  // namespace rlx::infer
