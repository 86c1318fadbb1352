#include "kernels/host_families.h"

#include "linalg/lapack_kernels.h"
#include "sparse/sparse_kernels.h"
#include "splat/splat_kernels.h"

namespace rlx::kernels {
namespace {

constexpr HostFamily kFamilies[] = {
    {OpFamily::linalg, "LAPACK (src/linalg/lapack_kernels.h)", linalg::claim_lapack, linalg::run_lapack},
    {OpFamily::sparse, "CSR kernels and SuiteSparse (src/sparse/sparse_kernels.h)", sparse::claim_sparse,
     sparse::run_sparse},
    {OpFamily::splat, "splatting kernels (src/splat/splat_kernels.h)", splat::claim_splat, splat::run_splat},
};

}  // namespace

std::span<const HostFamily> host_families() { return kFamilies; }

const HostFamily* host_family(OpFamily f) {
  for (const HostFamily& h : kFamilies)
    if (h.family == f) return &h;
  return nullptr;
}

}  // namespace rlx::kernels
