// The host kernels of the sparse graph ops (spmv_csr, sddmm_csr, sparse_solve,
// sparse_solve_backward; the sparse family of the ops table): what the cpu device claims and
// runs. SpMV/SpMM use the thread-pooled kernel of the C++ API (csr.cpp) on the tensors' memory
// without copying it; the solves go through UMFPACK / CHOLMOD (direct.cpp).
#pragma once

#include <span>

#include "rlx/device.h"

namespace rlx::sparse {

// Whether the host runs node `n`: a sparse op with static shapes. The claim text names the
// kernel and the sizes; a refusal says why.
Claim claim_sparse(const NodeDesc& n);

// Runs one sparse node on contiguous row-major buffers of the node's input / output types.
// The index data is checked first (row_ptr starts at 0, never decreases and ends at nnz;
// every column inside the matrix), and a violation is an invalid_argument error naming the op
// and the entry, never an out-of-bounds access. Solve errors (singular, not positive definite)
// name the op too.
Status run_sparse(Op op, const Attrs& attrs, std::span<const TensorType> in_types, std::span<const void* const> in,
                  std::span<const TensorType> out_types, std::span<void* const> out);

// How often the solve ops found their matrix factored already (the last matrix factored is
// kept: sparse_solve_backward reuses its forward's factorization) and how often they factored.
struct FactorCacheStats {
  int64_t hits = 0, misses = 0;
};
FactorCacheStats factor_cache_stats();

}  // namespace rlx::sparse
