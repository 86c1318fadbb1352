// Krylov solvers on CSR matrices: CG / preconditioned CG (Jacobi, IC(0)), BiCGSTAB and
// restarted GMRES. Vectors are in the matrix's value type, inner products accumulate in
// double; the matrix-vector products run on the thread pool (csr.cpp).
#include <algorithm>
#include <limits>

#include "sparse_internal.h"

namespace rlx::sparse {

std::string SolveReport::to_string() const {
  return cat(method, converged ? " converged" : " did NOT converge", " in ", iterations, " iterations, ||b - A x|| = ",
             residual_norm, " (relative ", relative_residual, ")");
}

namespace {

using detail::dot;
using detail::norm2;

template <class V, class I>
Status check_system(const Csr<V, I>& a, const std::vector<V>& b, std::vector<V>& x, const SolveOptions& o,
                    const char* method) {
  RLX_TRY(validate(a, cat(method, ": A")));
  if (a.rows != a.cols) return error(ErrorCode::shape_error, method, ": A must be square, got ", a.rows, " x ", a.cols);
  if (static_cast<int64_t>(b.size()) != a.rows)
    return error(ErrorCode::shape_error, method, ": b has ", b.size(), " entries, A has ", a.rows, " rows");
  if (x.empty()) x.assign(b.size(), V(0));
  if (x.size() != b.size())
    return error(ErrorCode::shape_error, method, ": x has ", x.size(), " entries, A has ", a.rows, " rows");
  if (!(o.rtol >= 0) || !(o.atol >= 0) || o.max_iterations < 0)
    return error(ErrorCode::invalid_argument, method, ": tolerances and the iteration cap must be non-negative");
  return Status::ok();
}

// The preconditioner z = M^-1 r.
template <class V, class I>
class Precond {
 public:
  Status init(const Csr<V, I>& a, Preconditioner kind) {
    kind_ = kind;
    const int64_t n = a.rows;
    if (kind == Preconditioner::none) return Status::ok();
    diag_pos_.assign(static_cast<size_t>(n), -1);
    for (int64_t i = 0; i < n; ++i)
      for (I k = a.row_ptr[i]; k < a.row_ptr[i + 1]; ++k)
        if (a.col_idx[k] == i) diag_pos_[i] = k;
    if (kind == Preconditioner::jacobi) {
      inv_diag_.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        if (diag_pos_[i] < 0 || a.values[diag_pos_[i]] == V(0))
          return error(ErrorCode::invalid_argument, "jacobi preconditioner: A has a zero diagonal entry at row ", i);
        inv_diag_[i] = V(1) / a.values[diag_pos_[i]];
      }
      return Status::ok();
    }
    // IC(0): L on the lower triangle's pattern, row by row; L_ij = (A_ij - sum_{p<j} L_ip L_jp) / L_jj
    l_.rows = l_.cols = n;
    l_.row_ptr.assign(1, 0);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t row_start = static_cast<int64_t>(l_.col_idx.size());
      for (I k = a.row_ptr[i]; k < a.row_ptr[i + 1] && a.col_idx[k] <= i; ++k) {
        const int64_t j = a.col_idx[k];
        // sparse dot of L row i (so far, columns < j) and L row j (columns < j)
        double s = a.values[k];
        int64_t p = row_start, q = l_.row_ptr[j];
        const int64_t pe = static_cast<int64_t>(l_.col_idx.size()), qe = j == i ? pe : static_cast<int64_t>(l_.row_ptr[j + 1]) - 1;
        if (j == i) {
          for (int64_t t = row_start; t < pe; ++t) s -= static_cast<double>(l_.values[t]) * l_.values[t];
          if (!(s > 0))
            return error(ErrorCode::runtime_error, "IC(0) preconditioner: pivot ", s, " at row ", i,
                         " is not positive (the incomplete factor does not exist for this matrix)");
          l_.col_idx.push_back(static_cast<I>(i));
          l_.values.push_back(static_cast<V>(std::sqrt(s)));
          break;
        }
        while (p < pe && q < qe) {
          const int64_t cp = l_.col_idx[p], cq = l_.col_idx[q];
          if (cp == cq) s -= static_cast<double>(l_.values[p++]) * l_.values[q++];
          else if (cp < cq) ++p;
          else ++q;
        }
        l_.col_idx.push_back(static_cast<I>(j));
        l_.values.push_back(static_cast<V>(s / l_.values[l_.row_ptr[j + 1] - 1]));
      }
      if (l_.col_idx.empty() || static_cast<int64_t>(l_.col_idx.back()) != i)
        return error(ErrorCode::invalid_argument, "IC(0) preconditioner: A has no diagonal entry at row ", i);
      l_.row_ptr.push_back(static_cast<I>(l_.col_idx.size()));
    }
    return Status::ok();
  }
  void apply(const std::vector<V>& r, std::vector<V>& z) const {
    const int64_t n = static_cast<int64_t>(r.size());
    switch (kind_) {
      case Preconditioner::none: z = r; return;
      case Preconditioner::jacobi:
        for (int64_t i = 0; i < n; ++i) z[i] = r[i] * inv_diag_[i];
        return;
      case Preconditioner::ic0: {
        // L y = r (forward), then L^T z = y (backward, scattering columns of L^T = rows of L)
        for (int64_t i = 0; i < n; ++i) {
          double s = r[i];
          const int64_t e = l_.row_ptr[i + 1] - 1;  // the diagonal is the row's last entry
          for (int64_t k = l_.row_ptr[i]; k < e; ++k) s -= static_cast<double>(l_.values[k]) * z[l_.col_idx[k]];
          z[i] = static_cast<V>(s / l_.values[e]);
        }
        for (int64_t i = n - 1; i >= 0; --i) {
          const int64_t e = l_.row_ptr[i + 1] - 1;
          z[i] = z[i] / l_.values[e];
          for (int64_t k = l_.row_ptr[i]; k < e; ++k) z[l_.col_idx[k]] -= l_.values[k] * z[i];
        }
        return;
      }
    }
  }
  std::string name() const {
    switch (kind_) {
      case Preconditioner::none: return "";
      case Preconditioner::jacobi: return "jacobi";
      case Preconditioner::ic0: return "ic0";
    }
    return "";
  }

 private:
  Preconditioner kind_ = Preconditioner::none;
  std::vector<int64_t> diag_pos_;
  std::vector<V> inv_diag_;
  Csr<V, I> l_;
};

template <class V, class I>
void finish(const Csr<V, I>& a, const std::vector<V>& b, const std::vector<V>& x, double tol, SolveReport& rep) {
  std::vector<V> r = b;
  detail::spmv_unchecked(a, x.data(), r.data(), V(-1), V(1));
  rep.residual_norm = norm2(r);
  const double bn = norm2(b);
  rep.relative_residual = bn > 0 ? rep.residual_norm / bn : rep.residual_norm;
  // the recursive residual converged; the true one may be a little larger in f32
  rep.converged = rep.converged && rep.residual_norm <= std::max(tol * 10, tol + 1e-300);
}

}  // namespace

template <class V, class I>
Expected<SolveReport> cg(const Csr<V, I>& a, const std::vector<V>& b, std::vector<V>& x, const SolveOptions& o) {
  RLX_TRY(check_system(a, b, x, o, "cg"));
  Precond<V, I> m;
  RLX_TRY(m.init(a, o.preconditioner));
  SolveReport rep;
  rep.method = m.name().empty() ? "cg" : cat("pcg(", m.name(), ")");
  const int64_t n = a.rows;
  const double tol = std::max(o.rtol * norm2(b), o.atol);
  std::vector<V> r = b, z(static_cast<size_t>(n)), p, ap(static_cast<size_t>(n));
  detail::spmv_unchecked(a, x.data(), r.data(), V(-1), V(1));
  double rn = norm2(r);
  if (rn <= tol) rep.converged = true;
  m.apply(r, z);
  p = z;
  double rz = dot(r, z);
  for (int64_t it = 0; it < o.max_iterations && !rep.converged; ++it) {
    detail::spmv_unchecked(a, p.data(), ap.data(), V(1), V(0));
    const double pap = dot(p, ap);
    if (!(pap > 0))
      return error(ErrorCode::runtime_error, rep.method, ": p^T A p = ", pap, " at iteration ", it,
                   " (A is not symmetric positive definite)");
    const V alpha = static_cast<V>(rz / pap);
    // one threaded pass: x += alpha p, r -= alpha A p, and ||r||^2
    rn = std::sqrt(detail::par_sum(n, [&](int64_t s, int64_t e) {
      double t = 0;
      for (int64_t i = s; i < e; ++i) {
        x[i] += alpha * p[i];
        r[i] -= alpha * ap[i];
        t += static_cast<double>(r[i]) * r[i];
      }
      return t;
    }));
    rep.iterations = it + 1;
    if (o.record_history) rep.history.push_back(rn);
    if (rn <= tol) {
      rep.converged = true;
      break;
    }
    m.apply(r, z);
    const double rz_new = dot(r, z);
    const V beta = static_cast<V>(rz_new / rz);
    rz = rz_new;
    detail::par_sum(n, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) p[i] = z[i] + beta * p[i];
      return 0.0;
    });
  }
  finish(a, b, x, tol, rep);
  return rep;
}

template <class V, class I>
Expected<SolveReport> bicgstab(const Csr<V, I>& a, const std::vector<V>& b, std::vector<V>& x, const SolveOptions& o) {
  RLX_TRY(check_system(a, b, x, o, "bicgstab"));
  Precond<V, I> m;
  RLX_TRY(m.init(a, o.preconditioner));
  SolveReport rep;
  rep.method = m.name().empty() ? "bicgstab" : cat("bicgstab(", m.name(), ")");
  const int64_t n = a.rows;
  const double tol = std::max(o.rtol * norm2(b), o.atol);
  std::vector<V> r = b, r0, p(static_cast<size_t>(n), V(0)), v(p), ph(p), s(p), sh(p), t(p);
  detail::spmv_unchecked(a, x.data(), r.data(), V(-1), V(1));
  r0 = r;
  double rho = 1, alpha = 1, omega = 1;
  if (norm2(r) <= tol) rep.converged = true;
  for (int64_t it = 0; it < o.max_iterations && !rep.converged; ++it) {
    const double rho_new = dot(r0, r);
    if (rho_new == 0 || omega == 0)
      return error(ErrorCode::runtime_error, rep.method, ": breakdown at iteration ", it, " (rho or omega is 0)");
    const double beta = (rho_new / rho) * (alpha / omega);
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<V>(r[i] + beta * (p[i] - omega * v[i]));
    m.apply(p, ph);
    detail::spmv_unchecked(a, ph.data(), v.data(), V(1), V(0));
    const double r0v = dot(r0, v);
    if (r0v == 0) return error(ErrorCode::runtime_error, rep.method, ": breakdown at iteration ", it, " (r0^T v = 0)");
    alpha = rho_new / r0v;
    for (int64_t i = 0; i < n; ++i) s[i] = static_cast<V>(r[i] - alpha * v[i]);
    rep.iterations = it + 1;
    const double sn = norm2(s);
    if (sn <= tol) {
      for (int64_t i = 0; i < n; ++i) x[i] += static_cast<V>(alpha * ph[i]);
      if (o.record_history) rep.history.push_back(sn);
      rep.converged = true;
      break;
    }
    m.apply(s, sh);
    detail::spmv_unchecked(a, sh.data(), t.data(), V(1), V(0));
    const double tt = dot(t, t);
    omega = tt > 0 ? dot(t, s) / tt : 0;
    for (int64_t i = 0; i < n; ++i) {
      x[i] += static_cast<V>(alpha * ph[i] + omega * sh[i]);
      r[i] = static_cast<V>(s[i] - omega * t[i]);
    }
    rho = rho_new;
    const double rn = norm2(r);
    if (o.record_history) rep.history.push_back(rn);
    if (rn <= tol) rep.converged = true;
  }
  finish(a, b, x, tol, rep);
  return rep;
}

template <class V, class I>
Expected<SolveReport> gmres(const Csr<V, I>& a, const std::vector<V>& b, std::vector<V>& x, const SolveOptions& o) {
  RLX_TRY(check_system(a, b, x, o, "gmres"));
  if (o.gmres_restart < 1) return error(ErrorCode::invalid_argument, "gmres: the restart length must be >= 1");
  if (o.preconditioner == Preconditioner::ic0)
    return error(ErrorCode::invalid_argument, "gmres: IC(0) is for symmetric matrices; use jacobi or none");
  Precond<V, I> m;
  RLX_TRY(m.init(a, o.preconditioner));
  const int mr = o.gmres_restart;
  SolveReport rep;
  rep.method = cat("gmres(", mr, m.name().empty() ? "" : ", " + m.name(), ")");
  const int64_t n = a.rows;
  const double tol = std::max(o.rtol * norm2(b), o.atol);
  // right preconditioning: A M^-1 u = b, x = x0 + M^-1 u, so the residual is the true one
  std::vector<std::vector<double>> q(static_cast<size_t>(mr + 1), std::vector<double>(static_cast<size_t>(n)));
  std::vector<double> h(static_cast<size_t>((mr + 1) * mr)), cs(static_cast<size_t>(mr)), sn(static_cast<size_t>(mr)),
      g(static_cast<size_t>(mr + 1)), y(static_cast<size_t>(mr));
  std::vector<V> r(static_cast<size_t>(n)), w(r), z(r);
  int64_t total = 0;
  while (total < o.max_iterations) {
    r = b;
    detail::spmv_unchecked(a, x.data(), r.data(), V(-1), V(1));
    const double beta = norm2(r);
    if (beta <= tol) {
      rep.converged = true;
      break;
    }
    for (int64_t i = 0; i < n; ++i) q[0][i] = r[i] / beta;
    std::fill(g.begin(), g.end(), 0.0);
    g[0] = beta;
    int k = 0;
    for (; k < mr && total < o.max_iterations; ++k) {
      for (int64_t i = 0; i < n; ++i) w[i] = static_cast<V>(q[k][i]);
      m.apply(w, z);
      detail::spmv_unchecked(a, z.data(), w.data(), V(1), V(0));
      std::vector<double> wd(w.begin(), w.end());
      for (int j = 0; j <= k; ++j) {  // modified Gram-Schmidt
        double hj = 0;
        for (int64_t i = 0; i < n; ++i) hj += wd[i] * q[j][i];
        h[j * mr + k] = hj;
        for (int64_t i = 0; i < n; ++i) wd[i] -= hj * q[j][i];
      }
      double hn = 0;
      for (double v : wd) hn += v * v;
      hn = std::sqrt(hn);
      h[(k + 1) * mr + k] = hn;
      if (hn > 0)
        for (int64_t i = 0; i < n; ++i) q[k + 1][i] = wd[i] / hn;
      for (int j = 0; j < k; ++j) {  // earlier rotations
        const double t1 = h[j * mr + k], t2 = h[(j + 1) * mr + k];
        h[j * mr + k] = cs[j] * t1 + sn[j] * t2;
        h[(j + 1) * mr + k] = -sn[j] * t1 + cs[j] * t2;
      }
      const double d = std::hypot(h[k * mr + k], h[(k + 1) * mr + k]);
      cs[k] = d > 0 ? h[k * mr + k] / d : 1;
      sn[k] = d > 0 ? h[(k + 1) * mr + k] / d : 0;
      h[k * mr + k] = d;
      h[(k + 1) * mr + k] = 0;
      g[k + 1] = -sn[k] * g[k];
      g[k] = cs[k] * g[k];
      ++total;
      if (o.record_history) rep.history.push_back(std::abs(g[k + 1]));
      if (std::abs(g[k + 1]) <= tol || hn == 0) {
        ++k;
        break;
      }
    }
    // y = H^-1 g (upper triangular k x k), x += M^-1 (Q y)
    for (int i = k - 1; i >= 0; --i) {
      double s = g[i];
      for (int j = i + 1; j < k; ++j) s -= h[i * mr + j] * y[j];
      y[i] = h[i * mr + i] != 0 ? s / h[i * mr + i] : 0;
    }
    for (int64_t i = 0; i < n; ++i) {
      double s = 0;
      for (int j = 0; j < k; ++j) s += q[j][i] * y[j];
      w[i] = static_cast<V>(s);
    }
    m.apply(w, z);
    for (int64_t i = 0; i < n; ++i) x[i] += z[i];
    if (k > 0 && std::abs(g[k]) <= tol) {
      rep.converged = true;
      break;
    }
  }
  rep.iterations = total;
  finish(a, b, x, tol, rep);
  return rep;
}

#define RLX_SPARSE_ITER(V, I)                                                                                    \
  template Expected<SolveReport> cg(const Csr<V, I>&, const std::vector<V>&, std::vector<V>&, const SolveOptions&); \
  template Expected<SolveReport> bicgstab(const Csr<V, I>&, const std::vector<V>&, std::vector<V>&,             \
                                          const SolveOptions&);                                                 \
  template Expected<SolveReport> gmres(const Csr<V, I>&, const std::vector<V>&, std::vector<V>&, const SolveOptions&);
RLX_SPARSE_ITER(float, int32_t)
RLX_SPARSE_ITER(float, int64_t)
RLX_SPARSE_ITER(double, int32_t)
RLX_SPARSE_ITER(double, int64_t)
#undef RLX_SPARSE_ITER

}  // namespace rlx::sparse
