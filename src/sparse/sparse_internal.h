// Helpers shared by the sparse sources (not a public header).
#pragma once

#include <cmath>
#include <vector>

#include "rlx/sparse.h"
#include "rlx/thread_pool.h"

namespace rlx::sparse::detail {

// y = alpha A x + beta y without size checks (callers checked them once).
template <class V, class I>
void spmv_unchecked(const Csr<V, I>& a, const V* x, V* y, V alpha, V beta);

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
