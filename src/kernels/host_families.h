// The host families of native kernels: op families whose nodes a library of the kernels layer
// runs whole, on host memory, through one interface (a claim of a node, and a run of it on
// contiguous row-major buffers). A host device (the cpu) runs every family listed here by
// looking the node's family up, in place of a branch per family.
#pragma once

#include <span>

#include "rlx/device.h"

namespace rlx::kernels {

struct HostFamily {
  OpFamily family;
  const char* where;  // the library, for comments and reports
  // Whether the family runs node `n`; the claim text says how, a refusal why.
  Claim (*claim)(const NodeDesc& n);
  // Runs one claimed node: `in` / `out` point at contiguous row-major buffers of the node's
  // input / output types. Errors name the op.
  Status (*run)(Op op, const Attrs& attrs, std::span<const TensorType> in_types, std::span<const void* const> in,
                std::span<const TensorType> out_types, std::span<void* const> out);
};

// linalg (LAPACK: src/linalg/lapack_kernels.h), sparse (CSR kernels and SuiteSparse solvers:
// src/sparse/sparse_kernels.h) and splat (3D Gaussian splatting: src/splat/splat_kernels.h).
std::span<const HostFamily> host_families();
// The host family of op family `f`; nullptr when none runs it.
const HostFamily* host_family(OpFamily f);

}  // namespace rlx::kernels
