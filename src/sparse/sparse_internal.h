// Helpers shared by the sparse sources (not a public header).
#pragma once

#include <cmath>
#include <vector>

#include "rlx/sparse.h"
#include "rlx/thread_pool.h"

namespace rlx::sparse::detail {

// A CSR matrix over borrowed arrays: what the kernels run on, so that the graph ops
// (src/sparse/graph_kernels.cpp) use the same code on tensor memory without copying it.
template <class V, class I>
struct CsrView {
  int64_t rows = 0, cols = 0, nnz = 0;
  const I* row_ptr = nullptr;
  const I* col_idx = nullptr;
  const V* values = nullptr;
};
template <class V, class I>
CsrView<V, I> view(const Csr<V, I>& a) {
  return {a.rows, a.cols, a.nnz(), a.row_ptr.data(), a.col_idx.data(), a.values.data()};
}

// y = alpha A x + beta y without size checks (callers checked them once); rows split over the
// thread pool in blocks of equal nonzero count.
template <class V, class I>
void spmv_unchecked(const CsrView<V, I>& a, const V* x, V* y, V alpha, V beta);
template <class V, class I>
void spmv_unchecked(const Csr<V, I>& a, const V* x, V* y, V alpha, V beta) {
  spmv_unchecked(view(a), x, y, alpha, beta);
}
// Y = A X for row-major X [a.cols, k], Y [a.rows, k], threaded like spmv_unchecked.
template <class V, class I>
void spmm_unchecked(const CsrView<V, I>& a, const V* x, int64_t k, V* y);
// Y = A X (k = 1: the spmv kernel) for a row_ptr the caller checked (monotone, from 0 to nnz)
// but columns not yet checked: an entry whose column is outside [0, a.cols) is skipped, never
// read, and the result is false (the caller reports it). For the graph ops, whose index data
// arrives at run time.
template <class V, class I>
bool spmm_checked_columns(const CsrView<V, I>& a, const V* x, int64_t k, V* y);

// Y = A^T X for row-major X [a.rows, k], Y [a.cols, k], columns already checked. A scatter
// into Y's rows, which collide between rows of A: on several threads each chunk of A's rows
// scatters into a buffer of its own (the first into Y), and the buffers are then summed into
// Y in parallel over Y's rows, in chunk order (the result does not depend on the thread count
// beyond that order). Serial when the product is small or the buffers would exceed 256 MiB.
// The buffers are kept per calling thread and only grow.
template <class V, class I>
void spmm_transposed_unchecked(const CsrView<V, I>& a, const V* x, int64_t k, V* y);

// Runs f(begin, end) -> double over [0, n) on the thread pool in a fixed number of chunks and
// sums the partial results in chunk order, so the result does not depend on the thread count.
template <class F>
double par_sum(int64_t n, F&& f) {
  constexpr int64_t kChunks = 32;
  if (n < (int64_t{1} << 15)) return f(int64_t{0}, n);
  double part[kChunks];
  ThreadPool::global().run(kChunks, [&](int64_t c, int) { part[c] = f(n * c / kChunks, n * (c + 1) / kChunks); });
  double s = 0;
  for (double v : part) s += v;
  return s;
}

template <class V>
double dot(const std::vector<V>& a, const std::vector<V>& b) {
  return par_sum(static_cast<int64_t>(a.size()), [&](int64_t s, int64_t e) {
    double t = 0;
    for (int64_t i = s; i < e; ++i) t += static_cast<double>(a[i]) * static_cast<double>(b[i]);
    return t;
  });
}
template <class V>
double norm2(const std::vector<V>& a) {
  return std::sqrt(dot(a, a));
}

}  // namespace rlx::sparse::detail
