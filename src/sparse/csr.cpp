// CSR construction and validation, SpMV / SpMM on the thread pool, Poisson test matrices.
#include <algorithm>
#include <atomic>
#include <limits>
#include <numeric>

#include "rlx/sparse.h"
#include "rlx/thread_pool.h"
#include "sparse_internal.h"

namespace rlx::sparse {

template <class V, class I>
Status validate(const Csr<V, I>& a, std::string_view what) {
  if (a.rows < 0 || a.cols < 0) return error(ErrorCode::invalid_argument, what, ": negative size ", a.rows, " x ", a.cols);
  if (static_cast<int64_t>(a.row_ptr.size()) != a.rows + 1)
    return error(ErrorCode::invalid_argument, what, ": row_ptr has ", a.row_ptr.size(), " entries, rows + 1 = ", a.rows + 1);
  if (a.values.size() != a.col_idx.size())
    return error(ErrorCode::invalid_argument, what, ": ", a.col_idx.size(), " column indices but ", a.values.size(), " values");
  if (a.row_ptr[0] != 0) return error(ErrorCode::invalid_argument, what, ": row_ptr[0] is ", a.row_ptr[0], ", not 0");
  if (static_cast<int64_t>(a.row_ptr[a.rows]) != a.nnz())
    return error(ErrorCode::invalid_argument, what, ": row_ptr ends at ", a.row_ptr[a.rows], " but there are ", a.nnz(),
                 " entries");
  for (int64_t i = 0; i < a.rows; ++i) {
    const int64_t b = a.row_ptr[i], e = a.row_ptr[i + 1];
    if (e < b) return error(ErrorCode::invalid_argument, what, ": row_ptr decreases at row ", i);
    for (int64_t k = b; k < e; ++k) {
      const int64_t c = a.col_idx[k];
      if (c < 0 || c >= a.cols)
        return error(ErrorCode::invalid_argument, what, ": column ", c, " of entry ", k, " (row ", i, ") is outside [0, ",
                     a.cols, ")");
      if (k > b && c <= static_cast<int64_t>(a.col_idx[k - 1]))
        return error(ErrorCode::invalid_argument, what, ": columns of row ", i, " are not strictly increasing at entry ", k);
    }
  }
  return Status::ok();
}

template <class V, class I>
Expected<Csr<V, I>> to_csr(const Coo<V, I>& coo) {
  if (coo.rows < 0 || coo.cols < 0) return error(ErrorCode::invalid_argument, "COO: negative size");
  if (coo.row.size() != coo.col.size() || coo.row.size() != coo.val.size())
    return error(ErrorCode::invalid_argument, "COO: row, col and val have different lengths (", coo.row.size(), ", ",
                 coo.col.size(), ", ", coo.val.size(), ")");
  const int64_t n = static_cast<int64_t>(coo.row.size());
  if (n > static_cast<int64_t>(std::numeric_limits<I>::max()) || coo.rows > static_cast<int64_t>(std::numeric_limits<I>::max()) ||
      coo.cols > static_cast<int64_t>(std::numeric_limits<I>::max()))
    return error(ErrorCode::overflow, "COO: sizes do not fit the index type");
  for (int64_t k = 0; k < n; ++k)
    if (coo.row[k] < 0 || coo.row[k] >= coo.rows || coo.col[k] < 0 || coo.col[k] >= coo.cols)
      return error(ErrorCode::out_of_range, "COO: entry ", k, " at (", coo.row[k], ", ", coo.col[k], ") is outside ",
                   coo.rows, " x ", coo.cols);
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
    return coo.row[x] != coo.row[y] ? coo.row[x] < coo.row[y] : coo.col[x] < coo.col[y];
  });
  Csr<V, I> a;
  a.rows = coo.rows;
  a.cols = coo.cols;
  a.row_ptr.assign(static_cast<size_t>(coo.rows + 1), 0);
  for (int64_t t = 0; t < n; ++t) {
    const int64_t k = order[t];
    if (t > 0 && coo.row[k] == coo.row[order[t - 1]] && coo.col[k] == coo.col[order[t - 1]]) {
      a.values.back() += coo.val[k];  // duplicate: summed
      continue;
    }
    a.col_idx.push_back(coo.col[k]);
    a.values.push_back(coo.val[k]);
    ++a.row_ptr[coo.row[k] + 1];
  }
  for (int64_t i = 0; i < coo.rows; ++i) a.row_ptr[i + 1] += a.row_ptr[i];
  return a;
}

namespace detail {

// Row blocks of about equal nonzero count (plus rows), so that threads get equal work.
template <class V, class I>
std::vector<int64_t> row_blocks(const CsrView<V, I>& a, int parts) {
  std::vector<int64_t> cut{0};
  const int64_t total = a.nnz + a.rows;
  for (int p = 1; p < parts; ++p) {
    const int64_t target = total * p / parts;
    // first row r with row_ptr[r] + r >= target
    int64_t lo = cut.back(), hi = a.rows;
    while (lo < hi) {
      const int64_t mid = (lo + hi) / 2;
      if (static_cast<int64_t>(a.row_ptr[mid]) + mid < target) lo = mid + 1;
      else hi = mid;
    }
    cut.push_back(lo);
  }
  cut.push_back(a.rows);
  return cut;
}

// Runs rows(r0, r1) -> bool over all rows, on the pool in nonzero-balanced blocks when the work
// (nonzeros times columns) is large enough to pay for it; true when every block returned true.
template <class V, class I, class F>
bool over_rows(const CsrView<V, I>& a, int64_t work, F&& rows) {
  ThreadPool& pool = ThreadPool::global();
  if (pool.size() == 1 || work < 20000) return rows(int64_t{0}, a.rows);
  const std::vector<int64_t> cut = row_blocks(a, pool.size() * 4);
  std::atomic<bool> ok{true};
  pool.run(static_cast<int64_t>(cut.size()) - 1, [&](int64_t t, int) {
    if (!rows(cut[t], cut[t + 1])) ok.store(false, std::memory_order_relaxed);
  });
  return ok.load();
}

// Checked: a column outside [0, cols) is skipped (never read) and reported by returning false;
// the compare is on a well-predicted branch of a memory-bound loop, so it costs next to nothing.
template <bool Checked, class V, class I>
bool spmv_rows(const CsrView<V, I>& a, const V* x, V* y, V alpha, V beta, int64_t r0, int64_t r1) {
  const I* rp = a.row_ptr;
  const I* ci = a.col_idx;
  const V* va = a.values;
  bool ok = true;
  for (int64_t i = r0; i < r1; ++i) {
    V s = 0;
    for (I k = rp[i]; k < rp[i + 1]; ++k) {
      if constexpr (Checked) {
        if (static_cast<uint64_t>(ci[k]) >= static_cast<uint64_t>(a.cols)) {
          ok = false;
          continue;
        }
      }
      s += va[k] * x[ci[k]];
    }
    y[i] = beta == V(0) ? alpha * s : alpha * s + beta * y[i];
  }
  return ok;
}

template <bool Checked, class V, class I>
bool spmm_rows(const CsrView<V, I>& a, const V* x, int64_t k, V* y, int64_t r0, int64_t r1) {
  bool ok = true;
  for (int64_t i = r0; i < r1; ++i) {
    V* yi = y + i * k;
    std::fill(yi, yi + k, V(0));
    for (I p = a.row_ptr[i]; p < a.row_ptr[i + 1]; ++p) {
      if constexpr (Checked) {
        if (static_cast<uint64_t>(a.col_idx[p]) >= static_cast<uint64_t>(a.cols)) {
          ok = false;
          continue;
        }
      }
      const V v = a.values[p];
      const V* xr = x + static_cast<int64_t>(a.col_idx[p]) * k;
      for (int64_t c = 0; c < k; ++c) yi[c] += v * xr[c];
    }
  }
  return ok;
}

template <class V, class I>
void spmv_unchecked(const CsrView<V, I>& a, const V* x, V* y, V alpha, V beta) {
  over_rows(a, a.nnz, [&](int64_t r0, int64_t r1) { return spmv_rows<false>(a, x, y, alpha, beta, r0, r1); });
}

template <class V, class I>
void spmm_unchecked(const CsrView<V, I>& a, const V* x, int64_t k, V* y) {
  over_rows(a, a.nnz * k, [&](int64_t r0, int64_t r1) { return spmm_rows<false>(a, x, k, y, r0, r1); });
}

template <class V, class I>
void spmm_transposed_unchecked(const CsrView<V, I>& a, const V* x, int64_t k, V* y) {
  const int64_t ny = a.cols * k;
  auto scatter = [&](int64_t r0, int64_t r1, V* out) {
    for (int64_t i = r0; i < r1; ++i) {
      const V* xi = x + i * k;
      for (I p = a.row_ptr[i]; p < a.row_ptr[i + 1]; ++p) {
        const V v = a.values[p];
        V* yc = out + static_cast<int64_t>(a.col_idx[p]) * k;
        for (int64_t c = 0; c < k; ++c) yc[c] += v * xi[c];
      }
    }
  };
  ThreadPool& pool = ThreadPool::global();
  // chunks of at least ~64k entries' work, as many as threads, while the buffers stay small
  int64_t chunks = std::min<int64_t>(pool.size(), a.nnz * k / 65536);
  chunks = std::min<int64_t>(chunks, 1 + (int64_t{256} << 20) / std::max<int64_t>(1, ny * static_cast<int64_t>(sizeof(V))));
  std::fill(y, y + ny, V(0));
  if (chunks <= 1) {
    scatter(0, a.rows, y);
    return;
  }
  thread_local std::vector<V> scratch;
  if (scratch.size() < static_cast<size_t>((chunks - 1) * ny)) scratch.resize(static_cast<size_t>((chunks - 1) * ny));
  // rows split by entries so that the chunks carry equal work
  thread_local std::vector<int64_t> bounds;
  bounds.assign(static_cast<size_t>(chunks) + 1, a.rows);
  bounds[0] = 0;
  for (int64_t c = 1, i = 0; c < chunks; ++c) {
    const int64_t target = a.nnz * c / chunks;
    while (i < a.rows && static_cast<int64_t>(a.row_ptr[i]) < target) ++i;
    bounds[static_cast<size_t>(c)] = i;
  }
  // (the pool's threads must see the caller's thread_local buffers: pass pointers, not names)
  V* const buf = scratch.data();
  const int64_t* const bound = bounds.data();
  pool.run(chunks, [&](int64_t c, int) {
    V* out = c == 0 ? y : buf + (c - 1) * ny;
    if (c > 0) std::fill(out, out + ny, V(0));
    scatter(bound[c], bound[c + 1], out);
  });
  pool.parallel_for(ny, 1 << 14, [&](int64_t e0, int64_t e1) {
    for (int64_t c = 1; c < chunks; ++c) {
      const V* b = buf + (c - 1) * ny;
      for (int64_t e = e0; e < e1; ++e) y[e] += b[e];
    }
  });
}

template <class V, class I>
bool spmm_checked_columns(const CsrView<V, I>& a, const V* x, int64_t k, V* y) {
  if (k == 1)
    return over_rows(a, a.nnz, [&](int64_t r0, int64_t r1) { return spmv_rows<true>(a, x, y, V(1), V(0), r0, r1); });
  return over_rows(a, a.nnz * k, [&](int64_t r0, int64_t r1) { return spmm_rows<true>(a, x, k, y, r0, r1); });
}

}  // namespace detail

template <class V, class I>
Status spmv(const Csr<V, I>& a, const V* x, int64_t x_size, V* y, int64_t y_size, V alpha, V beta) {
  if (x_size != a.cols || y_size != a.rows)
    return error(ErrorCode::shape_error, "spmv: A is ", a.rows, " x ", a.cols, ", x has ", x_size, " entries and y ", y_size);
  detail::spmv_unchecked(a, x, y, alpha, beta);
  return Status::ok();
}

template <class V, class I>
Status spmv_transposed(const Csr<V, I>& a, const V* x, int64_t x_size, V* y, int64_t y_size) {
  if (x_size != a.rows || y_size != a.cols)
    return error(ErrorCode::shape_error, "spmv_transposed: A is ", a.rows, " x ", a.cols, ", x has ", x_size,
                 " entries and y ", y_size);
  detail::spmm_transposed_unchecked(detail::view(a), x, 1, y);
  return Status::ok();
}

template <class V, class I>
Status spmm(const Csr<V, I>& a, const V* x, int64_t k, V* y) {
  if (k < 0) return error(ErrorCode::shape_error, "spmm: negative column count ", k);
  detail::spmm_unchecked(detail::view(a), x, k, y);
  return Status::ok();
}

template <class V, class I>
Csr<V, I> poisson_2d(int64_t n) {
  Csr<V, I> a;
  a.rows = a.cols = n * n;
  a.row_ptr.reserve(static_cast<size_t>(a.rows + 1));
  a.row_ptr.push_back(0);
  a.col_idx.reserve(static_cast<size_t>(5 * a.rows));
  a.values.reserve(static_cast<size_t>(5 * a.rows));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const int64_t r = i * n + j;
      auto put = [&](int64_t c, V v) {
        a.col_idx.push_back(static_cast<I>(c));
        a.values.push_back(v);
      };
      if (i > 0) put(r - n, -1);
      if (j > 0) put(r - 1, -1);
      put(r, 4);
      if (j + 1 < n) put(r + 1, -1);
      if (i + 1 < n) put(r + n, -1);
      a.row_ptr.push_back(static_cast<I>(a.col_idx.size()));
    }
  return a;
}

template <class V, class I>
Csr<V, I> poisson_3d(int64_t n) {
  Csr<V, I> a;
  a.rows = a.cols = n * n * n;
  a.row_ptr.reserve(static_cast<size_t>(a.rows + 1));
  a.row_ptr.push_back(0);
  a.col_idx.reserve(static_cast<size_t>(7 * a.rows));
  a.values.reserve(static_cast<size_t>(7 * a.rows));
  const int64_t s = n * n;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t l = 0; l < n; ++l) {
        const int64_t r = i * s + j * n + l;
        auto put = [&](int64_t c, V v) {
          a.col_idx.push_back(static_cast<I>(c));
          a.values.push_back(v);
        };
        if (i > 0) put(r - s, -1);
        if (j > 0) put(r - n, -1);
        if (l > 0) put(r - 1, -1);
        put(r, 6);
        if (l + 1 < n) put(r + 1, -1);
        if (j + 1 < n) put(r + n, -1);
        if (i + 1 < n) put(r + s, -1);
        a.row_ptr.push_back(static_cast<I>(a.col_idx.size()));
      }
  return a;
}

#define RLX_SPARSE_CSR(V, I)                                                                                   \
  template Status validate(const Csr<V, I>&, std::string_view);                                               \
  template Expected<Csr<V, I>> to_csr(const Coo<V, I>&);                                                      \
  template Status spmv(const Csr<V, I>&, const V*, int64_t, V*, int64_t, V, V);                               \
  template Status spmv_transposed(const Csr<V, I>&, const V*, int64_t, V*, int64_t);                          \
  template Status spmm(const Csr<V, I>&, const V*, int64_t, V*);                                              \
  template Csr<V, I> poisson_2d(int64_t);                                                                     \
  template Csr<V, I> poisson_3d(int64_t);                                                                     \
  template void detail::spmv_unchecked(const detail::CsrView<V, I>&, const V*, V*, V, V);                     \
  template void detail::spmm_unchecked(const detail::CsrView<V, I>&, const V*, int64_t, V*);                 \
  template void detail::spmm_transposed_unchecked(const detail::CsrView<V, I>&, const V*, int64_t, V*);      \
  template bool detail::spmm_checked_columns(const detail::CsrView<V, I>&, const V*, int64_t, V*);
RLX_SPARSE_CSR(float, int32_t)
RLX_SPARSE_CSR(float, int64_t)
RLX_SPARSE_CSR(double, int32_t)
RLX_SPARSE_CSR(double, int64_t)
#undef RLX_SPARSE_CSR

}  // namespace rlx::sparse
