// Helpers shared by the sparse sources (not a public header).
#pragma once

#include <cmath>
#include <vector>

#include "rlx/sparse.h"

namespace rlx::sparse::detail {

// y = alpha A x + beta y without size checks (callers checked them once).
template <class V, class I>
void spmv_unchecked(const Csr<V, I>& a, const V* x, V* y, V alpha, V beta);

template <class V>
double dot(const std::vector<V>& a, const std::vector<V>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  return s;
}
template <class V>
double norm2(const std::vector<V>& a) {
  return std::sqrt(dot(a, a));
}

}  // namespace rlx::sparse::detail
