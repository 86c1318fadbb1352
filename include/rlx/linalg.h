// rlx/linalg.h: dense linear algebra as graph-level ops, f32 or f64, batched over the leading
// axes (docs/scientific.md). Each function appends one node to the graph `o` builds.
//
// Conventions (so each factorization is a function, and its gradient is defined):
//   cholesky and eigh read the symmetric part (A + A^T) / 2 of A;
//   qr has diag(R) >= 0; svd has s descending; svd's U columns and eigh's eigenvectors have
//   their largest-magnitude entry positive (svd flips Vh's rows with U's columns);
//   lu returns perm with A[perm, :] = L U (L unit lower, packed with U in one matrix).
// Devices: the cpu runs every op through LAPACKE (OpenBLAS), the reference interpreter with
// plain loops in double; any other device reports the node illegal ("no native factorization
// on this device"). Every op has a vector-Jacobian rule (src/train/vjp_linalg.cpp); svd and
// eigh gradients need distinct eigen/singular values, qr's needs m >= n, lstsq's full rank.
// Run-time failures (not positive definite, singular, no convergence) are errors naming the
// op and the matrix of the batch.
#pragma once

#include "rlx/op_builder.h"

namespace rlx::linalg {

struct LuResult {
  ValueId lu, perm;  // lu [..., n, n] packed L\U; perm i64 [..., n]
};
struct QrResult {
  ValueId q, r;  // q [..., m, k], r [..., k, n], k = min(m, n)
};
struct SvdResult {
  ValueId u, s, vh;  // u [..., m, k], s [..., k], vh [..., k, n]
};
struct EighResult {
  ValueId w, v;  // w [..., n] ascending, v [..., n, n] (eigenvectors as columns)
};
struct SlogdetResult {
  ValueId sign, logabsdet;  // both [...]
};

LuResult lu(OpBuilder& o, ValueId a);
// Lower factor L of (A + A^T) / 2 = L L^T.
ValueId cholesky(OpBuilder& o, ValueId a);
QrResult qr(OpBuilder& o, ValueId a);
SvdResult svd(OpBuilder& o, ValueId a);
EighResult eigh(OpBuilder& o, ValueId a);
// X with op(A) X = B; reads A's lower (or upper) triangle, op(A) = A^T when `transpose`.
ValueId triangular_solve(OpBuilder& o, ValueId a, ValueId b, bool lower = true, bool transpose = false,
                         bool unit_diagonal = false);
// X with A X = B (LU with partial pivoting).
ValueId solve(OpBuilder& o, ValueId a, ValueId b);
ValueId det(OpBuilder& o, ValueId a);
SlogdetResult slogdet(OpBuilder& o, ValueId a);
// argmin_X ||A X - B|| for A [..., m, n] with m >= n and full column rank.
ValueId lstsq(OpBuilder& o, ValueId a, ValueId b);

}  // namespace rlx::linalg
