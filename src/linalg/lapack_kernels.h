// The CPU's native dense linear algebra: each linalg op of the ops table (lu, cholesky, qr,
// svd, eigh, triangular_solve, solve, det, slogdet, lstsq) as a loop over the batch of one
// LAPACKE call per matrix (OpenBLAS's LAPACK), in f32 or f64, with the output conventions of
// conventions.h applied afterwards.
#pragma once

#include <span>

#include "rlx/device.h"

namespace rlx::linalg {

// Whether the CPU runs node `n` through LAPACK: a linalg op on f32/f64 with static shapes.
// The claim text names the LAPACK routine and the sizes; a refusal says why.
Claim claim_lapack(const NodeDesc& n);

// Runs one linalg node: `in` / `out` point at contiguous row-major buffers of the node's
// input / output types. Errors (a matrix that is not positive definite, a singular system,
// no convergence) name the op and the batch index.
Status run_lapack(Op op, const Attrs& attrs, std::span<const TensorType> in_types, std::span<const void* const> in,
                  std::span<const TensorType> out_types, std::span<void* const> out);

}  // namespace rlx::linalg
