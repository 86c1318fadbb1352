// The reference interpreter's CSR ops: plain loops in double over the COO expansion of the
// pattern, and the solves as a dense LU with partial pivoting (the reference runs small
// matrices), so that the cpu's thread-pooled kernels and SuiteSparse have an independent
// oracle. Bad index data is an error naming the node, as on the cpu.
#include <algorithm>
#include <cmath>

#include "backends/ref/interp_internal.h"

namespace rlx::ref::detail {
namespace {

struct Pattern {
  int64_t n = 0;
  std::vector<int64_t> row, col;  // per stored entry
};

Expected<Pattern> pattern(const KernelArgs& k, int64_t cols) {
  const Tensor& rp = *k.in[0];
  const Tensor& ci = *k.in[1];
  Pattern p;
  p.n = rp.numel() - 1;
  const int64_t nnz = ci.numel();
  auto at = [](const Tensor& t, int64_t i) { return static_cast<int64_t>(load_f(t.bytes(), t.dtype(), i)); };
  if (at(rp, 0) != 0) return error(ErrorCode::invalid_argument, k.label, ": row_ptr[0] is ", at(rp, 0), ", not 0");
  for (int64_t i = 0; i < p.n; ++i) {
    const int64_t b = at(rp, i), e = at(rp, i + 1);
    if (e < b) return error(ErrorCode::invalid_argument, k.label, ": row_ptr decreases at row ", i);
    if (e > nnz) return error(ErrorCode::invalid_argument, k.label, ": row_ptr ends at ", at(rp, p.n), " but col_idx has ", nnz, " entries");
    for (int64_t q = b; q < e; ++q) {
      const int64_t c = at(ci, q);
      if (c < 0 || c >= cols)
        return error(ErrorCode::invalid_argument, k.label, ": column ", c, " of entry ", q, " (row ", i, ") is outside [0, ", cols, ")");
      p.row.push_back(i);
      p.col.push_back(c);
    }
  }
  if (at(rp, p.n) != nnz)
    return error(ErrorCode::invalid_argument, k.label, ": row_ptr ends at ", at(rp, p.n), " but col_idx has ", nnz, " entries");
  return p;
}

double f(const Tensor& t, int64_t i) { return load_f(t.bytes(), t.dtype(), i); }
int64_t width(const Tensor& t) { return t.sizes().size() == 2 ? t.sizes()[1] : 1; }

// Solves M X = B (M dense n x n, B n x k, both row-major) by LU with partial pivoting.
Status dense_solve(const KernelArgs& k, std::vector<double> m, std::vector<double>& b, int64_t n, int64_t nk) {
  for (int64_t c = 0; c < n; ++c) {
    int64_t p = c;
    for (int64_t i = c + 1; i < n; ++i)
      if (std::abs(m[i * n + c]) > std::abs(m[p * n + c])) p = i;
    if (m[p * n + c] == 0) return error(ErrorCode::runtime_error, k.label, ": A is singular");
    if (p != c) {
      for (int64_t j = 0; j < n; ++j) std::swap(m[c * n + j], m[p * n + j]);
      for (int64_t j = 0; j < nk; ++j) std::swap(b[c * nk + j], b[p * nk + j]);
    }
    for (int64_t i = c + 1; i < n; ++i) {
      const double l = m[i * n + c] / m[c * n + c];
      if (l == 0) continue;
      for (int64_t j = c; j < n; ++j) m[i * n + j] -= l * m[c * n + j];
      for (int64_t j = 0; j < nk; ++j) b[i * nk + j] -= l * b[c * nk + j];
    }
  }
  for (int64_t i = n - 1; i >= 0; --i)
    for (int64_t j = 0; j < nk; ++j) {
      double s = b[i * nk + j];
      for (int64_t c = i + 1; c < n; ++c) s -= m[i * n + c] * b[c * nk + j];
      b[i * nk + j] = s / m[i * n + i];
    }
  return Status::ok();
}

Status solve(const KernelArgs& k) {
  const int64_t n = k.in[0]->numel() - 1;
  if (n > 4096) return error(ErrorCode::unsupported, k.label, ": the reference solves densely, n = ", n, " > 4096");
  RLX_ASSIGN_OR_RETURN(Pattern p, pattern(k, n));
  const bool chol = k.node.attrs.s("method", "lu") == "cholesky";
  // the matrix the op solves with: cholesky reads the upper triangle and mirrors it
  std::vector<double> m(static_cast<size_t>(n * n), 0.0);
  for (size_t q = 0; q < p.row.size(); ++q) {
    const int64_t i = p.row[q], c = p.col[q];
    const double v = f(*k.in[2], static_cast<int64_t>(q));
    if (!chol) {
      m[i * n + c] += v;
    } else if (c >= i) {
      m[i * n + c] += v;
      if (c != i) m[c * n + i] += v;
    }
  }
  if (k.node.op == Op::SparseSolve) {
    const int64_t nk = width(*k.in[3]);
    std::vector<double> b(static_cast<size_t>(n * nk));
    for (int64_t i = 0; i < n * nk; ++i) b[i] = f(*k.in[3], i);
    RLX_TRY(dense_solve(k, m, b, n, nk));
    for (int64_t i = 0; i < n * nk; ++i) store_f(k.out[0].bytes(), k.out[0].dtype(), i, b[i]);
    return Status::ok();
  }
  // backward: gb = M^-T g; d/dM = -gb x^T, then mapped onto the stored entries that build M
  const int64_t nk = width(*k.in[4]);
  std::vector<double> mt(static_cast<size_t>(n * n));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) mt[j * n + i] = m[i * n + j];
  std::vector<double> gb(static_cast<size_t>(n * nk));
  for (int64_t i = 0; i < n * nk; ++i) gb[i] = f(*k.in[4], i);
  RLX_TRY(dense_solve(k, mt, gb, n, nk));
  auto dm = [&](int64_t i, int64_t c) {  // d loss / d M[i, c]
    double s = 0;
    for (int64_t j = 0; j < nk; ++j) s -= gb[i * nk + j] * f(*k.in[3], c * nk + j);
    return s;
  };
  for (size_t q = 0; q < p.row.size(); ++q) {
    const int64_t i = p.row[q], c = p.col[q];
    double g = !chol ? dm(i, c) : c == i ? dm(i, i) : c > i ? dm(i, c) + dm(c, i) : 0.0;
    store_f(k.out[0].bytes(), k.out[0].dtype(), static_cast<int64_t>(q), g);
  }
  for (int64_t i = 0; i < n * nk; ++i) store_f(k.out[1].bytes(), k.out[1].dtype(), i, gb[i]);
  return Status::ok();
}

}  // namespace

// coo_to_csr as one stable sort of all entries by (row, column): an algorithm other than the
// cpu's counting sort, giving the same order.
Status coo_to_csr(const KernelArgs& k) {
  const Tensor& r = *k.in[0];
  const Tensor& c = *k.in[1];
  const int64_t nnz = r.numel(), n = k.node.attrs.i("rows"), m = k.node.attrs.i("cols");
  auto at = [](const Tensor& t, int64_t i) { return static_cast<int64_t>(load_f(t.bytes(), t.dtype(), i)); };
  std::vector<std::pair<std::pair<int64_t, int64_t>, int64_t>> e;
  for (int64_t q = 0; q < nnz; ++q) {
    const int64_t i = at(r, q), j = at(c, q);
    if (i < 0 || i >= n || j < 0 || j >= m)
      return error(ErrorCode::invalid_argument, k.label, ": entry ", q, " at (", i, ", ", j, ") is outside the ", n, " x ",
                   m, " matrix");
    e.push_back({{i, j}, q});
  }
  std::stable_sort(e.begin(), e.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<int64_t> rp(static_cast<size_t>(n) + 1, 0);
  for (int64_t p = 0; p < nnz; ++p) {
    ++rp[e[p].first.first + 1];
    store_f(k.out[1].bytes(), k.out[1].dtype(), p, static_cast<double>(e[p].first.second));
    store_f(k.out[2].bytes(), k.out[2].dtype(), p, f(*k.in[2], e[p].second));
    store_f(k.out[3].bytes(), k.out[3].dtype(), e[p].second, static_cast<double>(p));
  }
  for (int64_t i = 0; i <= n; ++i) {
    if (i > 0) rp[i] += rp[i - 1];
    store_f(k.out[0].bytes(), k.out[0].dtype(), i, static_cast<double>(rp[i]));
  }
  return Status::ok();
}

Status run_sparse(const KernelArgs& k) {
  if (k.node.op == Op::CooToCsr) return coo_to_csr(k);
  Tensor& out = k.out[0];
  switch (k.node.op) {
    case Op::SpmvCsr: {
      const Tensor& x = *k.in[3];
      const int64_t nk = width(x);
      const bool tr = k.node.attrs.i("transpose", 0) != 0;
      RLX_ASSIGN_OR_RETURN(Pattern p, pattern(k, tr ? out.sizes()[0] : x.sizes()[0]));
      std::vector<double> y(static_cast<size_t>(out.numel()), 0.0);
      for (size_t q = 0; q < p.row.size(); ++q) {
        const double v = f(*k.in[2], static_cast<int64_t>(q));
        const int64_t dst = tr ? p.col[q] : p.row[q], src = tr ? p.row[q] : p.col[q];
        for (int64_t j = 0; j < nk; ++j) y[dst * nk + j] += v * f(x, src * nk + j);
      }
      for (int64_t i = 0; i < out.numel(); ++i) store_f(out.bytes(), out.dtype(), i, y[i]);
      return Status::ok();
    }
    case Op::SddmmCsr: {
      const Tensor& a = *k.in[2];
      const Tensor& b = *k.in[3];
      const int64_t nk = width(a);
      RLX_ASSIGN_OR_RETURN(Pattern p, pattern(k, b.sizes()[0]));
      for (size_t q = 0; q < p.row.size(); ++q) {
        double s = 0;
        for (int64_t j = 0; j < nk; ++j) s += f(a, p.row[q] * nk + j) * f(b, p.col[q] * nk + j);
        store_f(out.bytes(), out.dtype(), static_cast<int64_t>(q), s);
      }
      return Status::ok();
    }
    case Op::SparseSolve:
    case Op::SparseSolveBackward: return solve(k);
    default: break;
  }
  return error(ErrorCode::internal, k.label, ": not a sparse op");
}

}  // namespace rlx::ref::detail
