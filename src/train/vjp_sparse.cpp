// Vector-Jacobian rules of the CSR ops (A given as row_ptr, col_idx, values; rows n, and m =
// A's column count):
//   spmv_csr        y = A x:    dvalues = sddmm(g, x) (on the pattern), dx = A^T g
//   (transpose=1)   y = A^T x:  dvalues = sddmm(x, g),                  dx = A g
//   sddmm_csr       out[p] = a[i] . b[c]: da = A(out_grad) b, db = A(out_grad)^T a
//   sparse_solve    x = A^-1 b: sparse_solve_backward (the adjoint solve through the same
//                   factorization method: db = A^-T g, dvalues = -db[i] x[c] on the pattern)
//   coo_to_csr      csr_values[position[k]] = values[k]: dvalues = gather(g_csr_values, position)
// row_ptr and col_idx (coo_to_csr: rows, cols) get none (autodiff.cpp marks them not
// differentiable).
#include "vjp_internal.h"

namespace rlx::train::vjp {
namespace {

int64_t rows(const TensorType& t) { return t.shape[0].size(); }

Status spmv(Ctx& c, std::vector<ValueId>& out) {
  const bool tr = c.attrs().i("transpose", 0) != 0;
  if (c.need(2)) {
    out[2] = tr ? c.o.op(Op::SddmmCsr, {c.in(0), c.in(1), c.in(3), c.g()})
                : c.o.op(Op::SddmmCsr, {c.in(0), c.in(1), c.g(), c.in(3)});
  }
  if (c.need(3)) {
    out[3] = tr ? c.o.op(Op::SpmvCsr, {c.in(0), c.in(1), c.in(2), c.g()})
                : c.o.op(Op::SpmvCsr, {c.in(0), c.in(1), c.in(2), c.g()},
                         Attrs{{"transpose", int64_t{1}}, {"cols", rows(c.in_types[3])}});
  }
  return c.o.status();
}

Status sddmm(Ctx& c, std::vector<ValueId>& out) {
  if (c.need(2)) out[2] = c.o.op(Op::SpmvCsr, {c.in(0), c.in(1), c.g(), c.in(3)});
  if (c.need(3))
    out[3] = c.o.op(Op::SpmvCsr, {c.in(0), c.in(1), c.g(), c.in(2)},
                    Attrs{{"transpose", int64_t{1}}, {"cols", rows(c.in_types[3])}});
  return c.o.status();
}

Status coo_to_csr(Ctx& c, std::vector<ValueId>& out) {
  // only the values output (2) is a float; without a gradient there, the values get none
  if (c.need(2) && c.out_grads[2] != kNoValue) out[2] = c.o.gather(c.out_grads[2], c.out(3), 0);
  return c.o.status();
}

Status solve(Ctx& c, std::vector<ValueId>& out) {
  std::vector<ValueId> g =
      c.o.op_multi(Op::SparseSolveBackward, {c.in(0), c.in(1), c.in(2), c.out(0), c.g()}, c.attrs());
  if (!c.o.ok()) return c.o.status();
  if (c.need(2)) out[2] = g[0];
  if (c.need(3)) out[3] = g[1];
  return c.o.status();
}

}  // namespace

void register_sparse_vjps(std::vector<Rule>& t) {
  t[static_cast<size_t>(Op::CooToCsr)] = coo_to_csr;
  t[static_cast<size_t>(Op::SpmvCsr)] = spmv;
  t[static_cast<size_t>(Op::SddmmCsr)] = sddmm;
  t[static_cast<size_t>(Op::SparseSolve)] = solve;
}

}  // namespace rlx::train::vjp
