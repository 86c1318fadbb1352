// The CSR ops (the sparse family) have no decomposition into primitives: a row loop whose
// bounds come from row_ptr's data is not a static loop nest. A device runs them natively or
// not at all; this rule gives the common-IR path a clear refusal, with no hidden round trip to
// the host (sparse_solve in particular runs only where SuiteSparse does: cpu, and ref).
#include "rules.h"

namespace rlx::dispatch {
namespace {

Status refuse(OpBuilder&, const RuleNode& n, std::vector<ValueId>&) {
  if (n.op == Op::CooToCsr)
    return error(ErrorCode::illegal, "no native COO sort on this device: coo_to_csr orders entries by their index data, "
                 "which has no decomposition into primitives; it runs natively on cpu and ref");
  if (n.op == Op::SparseSolve || n.op == Op::SparseSolveBackward)
    return error(ErrorCode::illegal, "no sparse direct solver on this device: ", op_name(n.op),
                 " is a sparse LU/Cholesky factorization (UMFPACK/CHOLMOD on the host) with no decomposition into "
                 "primitives; it runs natively on cpu and ref");
  return error(ErrorCode::illegal, "no native CSR kernel on this device: ", op_name(n.op),
               " loops over rows whose bounds are row_ptr's data, which has no decomposition into primitives; it runs "
               "natively on cpu and ref, and on opencl, vulkan, opengl and cuda");
}

}  // namespace

void register_sparse_rules(std::vector<OpRules>& t) {
  set_family_decompose(t, OpFamily::sparse, refuse);
}

}  // namespace rlx::dispatch
