// Conventions that make the outputs of the factorizations unique, shared by the reference
// interpreter's plain-loop kernels and the CPU's LAPACK kernels so that both give the same
// answer (and so that a factorization is a function, which its gradient needs):
//   qr:   diag(R) >= 0 (row i of R and column i of Q flip together)
//   svd:  s descending; each column of U has its largest-magnitude entry positive (row i of
//         Vh flips with it)
//   eigh: w ascending; each eigenvector column has its largest-magnitude entry positive
// Matrices are row-major with explicit leading dimensions.
#pragma once

#include <cmath>
#include <cstdint>

namespace rlx::linalg {

// Flips column j of q (m rows, leading dim ldq) and row j of r (n columns, leading dim ldr)
// where r[j, j] < 0, for j < k.
template <class T>
void qr_fix_signs(T* q, int64_t m, int64_t ldq, T* r, int64_t n, int64_t ldr, int64_t k) {
  for (int64_t j = 0; j < k; ++j) {
    if (!(r[j * ldr + j] < 0)) continue;
    for (int64_t i = 0; i < m; ++i) q[i * ldq + j] = -q[i * ldq + j];
    for (int64_t c = 0; c < n; ++c) r[j * ldr + c] = -r[j * ldr + c];
  }
}

// For each column j < k of u (m rows), makes its largest-magnitude entry positive (the first
// one on ties); flips row j of vh (n columns) with it when vh is given.
template <class T>
void fix_column_signs(T* u, int64_t m, int64_t ldu, int64_t k, T* vh, int64_t n, int64_t ldvh) {
  for (int64_t j = 0; j < k; ++j) {
    int64_t best = 0;
    double big = -1;
    for (int64_t i = 0; i < m; ++i) {
      const double a = std::abs(static_cast<double>(u[i * ldu + j]));
      if (a > big) big = a, best = i;
    }
    if (!(u[best * ldu + j] < 0)) continue;
    for (int64_t i = 0; i < m; ++i) u[i * ldu + j] = -u[i * ldu + j];
    if (vh)
      for (int64_t c = 0; c < n; ++c) vh[j * ldvh + c] = -vh[j * ldvh + c];
  }
}

}  // namespace rlx::linalg
