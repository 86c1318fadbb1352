// The reference interpreter's dense linear algebra: plain loops in double, independent of
// LAPACK, so that the CPU's LAPACK kernels have a real oracle. LU with partial pivoting (first
// maximum), Cholesky, Householder QR, cyclic Jacobi for the symmetric eigenproblem and
// one-sided Jacobi for the SVD; outputs follow src/linalg/conventions.h.
#include <algorithm>
#include <numeric>

#include "backends/ref/interp_internal.h"
#include "linalg/conventions.h"

namespace rlx::ref::detail {
namespace {

using Mat = std::vector<double>;  // row-major

Mat load(const Tensor& t, int64_t offset, int64_t count) {
  Mat v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[i] = load_f(t.bytes(), t.dtype(), offset + i);
  return v;
}
void store(Tensor& t, int64_t offset, const Mat& v) {
  for (size_t i = 0; i < v.size(); ++i) store_f(t.bytes(), t.dtype(), offset + static_cast<int64_t>(i), v[i]);
}

// In-place LU with partial pivoting of the n x n matrix a; perm[i] is the source row of row
// i. Returns the number of row swaps.
int lu_inplace(Mat& a, int64_t n, std::vector<int64_t>& perm) {
  perm.resize(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  int swaps = 0;
  for (int64_t k = 0; k < n; ++k) {
    int64_t p = k;
    for (int64_t i = k + 1; i < n; ++i)
      if (std::abs(a[i * n + k]) > std::abs(a[p * n + k])) p = i;
    if (p != k) {
      for (int64_t j = 0; j < n; ++j) std::swap(a[k * n + j], a[p * n + j]);
      std::swap(perm[k], perm[p]);
      ++swaps;
    }
    const double d = a[k * n + k];
    if (d == 0) continue;  // singular: U has a zero pivot, the factorization goes on
    for (int64_t i = k + 1; i < n; ++i) {
      const double l = a[i * n + k] / d;
      a[i * n + k] = l;
      for (int64_t j = k + 1; j < n; ++j) a[i * n + j] -= l * a[k * n + j];
    }
  }
  return swaps;
}

// Solves op(A) X = B in place in b (n x k); A triangular (n x n).
Status tri_solve(const Mat& a, Mat& b, int64_t n, int64_t k, bool lower, bool trans, bool unit) {
  // op(A) is lower triangular when lower != trans
  const bool eff_lower = lower != trans;
  auto at = [&](int64_t i, int64_t j) { return trans ? a[j * n + i] : a[i * n + j]; };
  for (int64_t c = 0; c < k; ++c) {
    for (int64_t s = 0; s < n; ++s) {
      const int64_t i = eff_lower ? s : n - 1 - s;
      double v = b[i * k + c];
      if (eff_lower) {
        for (int64_t j = 0; j < i; ++j) v -= at(i, j) * b[j * k + c];
      } else {
        for (int64_t j = i + 1; j < n; ++j) v -= at(i, j) * b[j * k + c];
      }
      if (!unit) {
        if (at(i, i) == 0) return error(ErrorCode::runtime_error, "the matrix is singular (zero pivot at ", i, ")");
        v /= at(i, i);
      }
      b[i * k + c] = v;
    }
  }
  return Status::ok();
}

// Householder QR of the m x n matrix a: q (m x k) with orthonormal columns and r (k x n)
// upper triangular, k = min(m, n), diag(r) >= 0.
void householder_qr(Mat a, int64_t m, int64_t n, Mat& q, Mat& r) {
  const int64_t k = std::min(m, n);
  std::vector<Mat> vs;
  for (int64_t j = 0; j < k; ++j) {
    Mat v(static_cast<size_t>(m), 0.0);
    double norm = 0;
    for (int64_t i = j; i < m; ++i) norm += a[i * n + j] * a[i * n + j];
    norm = std::sqrt(norm);
    const double alpha = a[j * n + j] > 0 ? -norm : norm;
    for (int64_t i = j; i < m; ++i) v[i] = a[i * n + j];
    v[j] -= alpha;
    double vv = 0;
    for (int64_t i = j; i < m; ++i) vv += v[i] * v[i];
    if (vv > 0) {
      for (int64_t c = j; c < n; ++c) {
        double d = 0;
        for (int64_t i = j; i < m; ++i) d += v[i] * a[i * n + c];
        const double f = 2 * d / vv;
        for (int64_t i = j; i < m; ++i) a[i * n + c] -= f * v[i];
      }
    }
    vs.push_back(std::move(v));
  }
  r.assign(static_cast<size_t>(k * n), 0.0);
  for (int64_t i = 0; i < k; ++i)
    for (int64_t c = i; c < n; ++c) r[i * n + c] = a[i * n + c];
  // Q = H_0 H_1 ... H_{k-1} applied to the first k columns of the identity
  q.assign(static_cast<size_t>(m * k), 0.0);
  for (int64_t i = 0; i < k; ++i) q[i * k + i] = 1;
  for (int64_t j = k - 1; j >= 0; --j) {
    const Mat& v = vs[j];
    double vv = 0;
    for (int64_t i = j; i < m; ++i) vv += v[i] * v[i];
    if (vv == 0) continue;
    for (int64_t c = 0; c < k; ++c) {
      double d = 0;
      for (int64_t i = j; i < m; ++i) d += v[i] * q[i * k + c];
      const double f = 2 * d / vv;
      for (int64_t i = j; i < m; ++i) q[i * k + c] -= f * v[i];
    }
  }
  linalg::qr_fix_signs(q.data(), m, k, r.data(), n, n, k);
}

// Cyclic Jacobi on the symmetric n x n matrix a: eigenvalues ascending in w, eigenvectors as
// the columns of v.
void jacobi_eigh(Mat a, int64_t n, Mat& w, Mat& v) {
  v.assign(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) v[i * n + i] = 1;
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0, total = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) (i == j ? total : off) += a[i * n + j] * a[i * n + j];
    if (off <= 1e-30 * (total + off) || off == 0) break;
    for (int64_t p = 0; p < n; ++p)
      for (int64_t q = p + 1; q < n; ++q) {
        const double apq = a[p * n + q];
        if (apq == 0) continue;
        const double theta = (a[q * n + q] - a[p * n + p]) / (2 * apq);
        const double t = (theta >= 0 ? 1.0 : -1.0) / (std::abs(theta) + std::sqrt(theta * theta + 1));
        const double c = 1 / std::sqrt(t * t + 1), s = t * c;
        for (int64_t k = 0; k < n; ++k) {  // columns p, q
          const double akp = a[k * n + p], akq = a[k * n + q];
          a[k * n + p] = c * akp - s * akq;
          a[k * n + q] = s * akp + c * akq;
        }
        for (int64_t k = 0; k < n; ++k) {  // rows p, q
          const double apk = a[p * n + k], aqk = a[q * n + k];
          a[p * n + k] = c * apk - s * aqk;
          a[q * n + k] = s * apk + c * aqk;
        }
        for (int64_t k = 0; k < n; ++k) {
          const double vkp = v[k * n + p], vkq = v[k * n + q];
          v[k * n + p] = c * vkp - s * vkq;
          v[k * n + q] = s * vkp + c * vkq;
        }
      }
  }
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return a[x * n + x] < a[y * n + y]; });
  w.resize(static_cast<size_t>(n));
  Mat vs(static_cast<size_t>(n * n));
  for (int64_t j = 0; j < n; ++j) {
    w[j] = a[order[j] * n + order[j]];
    for (int64_t i = 0; i < n; ++i) vs[i * n + j] = v[i * n + order[j]];
  }
  v = std::move(vs);
  linalg::fix_column_signs(v.data(), n, n, n, static_cast<double*>(nullptr), 0, 0);
}

// One-sided Jacobi SVD of the m x n matrix a (m >= n): u (m x n), s (n) descending, vh (n x n).
void jacobi_svd_tall(Mat a, int64_t m, int64_t n, Mat& u, Mat& s, Mat& vh) {
  Mat v(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) v[i * n + i] = 1;
  for (int sweep = 0; sweep < 100; ++sweep) {
    bool rotated = false;
    for (int64_t p = 0; p < n; ++p)
      for (int64_t q = p + 1; q < n; ++q) {
        double alpha = 0, beta = 0, gamma = 0;
        for (int64_t i = 0; i < m; ++i) {
          alpha += a[i * n + p] * a[i * n + p];
          beta += a[i * n + q] * a[i * n + q];
          gamma += a[i * n + p] * a[i * n + q];
        }
        if (gamma == 0 || std::abs(gamma) <= 1e-15 * std::sqrt(alpha * beta)) continue;
        rotated = true;
        const double zeta = (beta - alpha) / (2 * gamma);
        const double t = (zeta >= 0 ? 1.0 : -1.0) / (std::abs(zeta) + std::sqrt(1 + zeta * zeta));
        const double c = 1 / std::sqrt(1 + t * t), sn = c * t;
        for (int64_t i = 0; i < m; ++i) {
          const double ap = a[i * n + p], aq = a[i * n + q];
          a[i * n + p] = c * ap - sn * aq;
          a[i * n + q] = sn * ap + c * aq;
        }
        for (int64_t i = 0; i < n; ++i) {
          const double vp = v[i * n + p], vq = v[i * n + q];
          v[i * n + p] = c * vp - sn * vq;
          v[i * n + q] = sn * vp + c * vq;
        }
      }
    if (!rotated) break;
  }
  Mat norms(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    double t = 0;
    for (int64_t i = 0; i < m; ++i) t += a[i * n + j] * a[i * n + j];
    norms[j] = std::sqrt(t);
  }
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return norms[x] > norms[y]; });
  u.assign(static_cast<size_t>(m * n), 0.0);
  s.resize(static_cast<size_t>(n));
  vh.assign(static_cast<size_t>(n * n), 0.0);
  for (int64_t j = 0; j < n; ++j) {
    const int64_t c = order[j];
    s[j] = norms[c];
    for (int64_t i = 0; i < m; ++i) u[i * n + j] = s[j] > 0 ? a[i * n + c] / s[j] : 0.0;
    for (int64_t i = 0; i < n; ++i) vh[j * n + i] = v[i * n + c];
  }
  linalg::fix_column_signs(u.data(), m, n, n, vh.data(), n, n);
}

Mat transpose(const Mat& a, int64_t m, int64_t n) {
  Mat t(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) t[j * m + i] = a[i * n + j];
  return t;
}

Mat symmetrized(const Mat& a, int64_t n) {
  Mat s(a.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) s[i * n + j] = (a[i * n + j] + a[j * n + i]) / 2;
  return s;
}

}  // namespace

Status run_linalg(const KernelArgs& k) {
  const Op op = k.node.op;
  const Tensor& at = *k.in[0];
  const Sizes as = at.sizes();
  const int r = static_cast<int>(as.size());
  const int64_t m = as[r - 2], n = as[r - 1], kk = std::min(m, n);
  int64_t batch = 1;
  for (int d = 0; d < r - 2; ++d) batch *= as[d];
  const Attrs& attrs = k.node.attrs;
  for (int64_t b = 0; b < batch; ++b) {
    auto fail = [&](Status s) {
      return s.with_context(cat(k.label, batch > 1 ? cat(" (matrix ", b, " of the batch)") : ""));
    };
    const Mat a = load(at, b * m * n, m * n);
    switch (op) {
      case Op::Lu: {
        Mat lu = a;
        std::vector<int64_t> perm;
        lu_inplace(lu, n, perm);
        store(k.out[0], b * n * n, lu);
        for (int64_t i = 0; i < n; ++i) store_bits(k.out[1].bytes(), DType::i64, b * n + i, static_cast<uint64_t>(perm[i]));
        break;
      }
      case Op::Cholesky: {
        Mat s = symmetrized(a, n), l(static_cast<size_t>(n * n), 0.0);
        for (int64_t j = 0; j < n; ++j) {
          double d = s[j * n + j];
          for (int64_t p = 0; p < j; ++p) d -= l[j * n + p] * l[j * n + p];
          if (!(d > 0))
            return fail(error(ErrorCode::runtime_error, "the matrix is not positive definite (leading minor ", j + 1, ")"));
          l[j * n + j] = std::sqrt(d);
          for (int64_t i = j + 1; i < n; ++i) {
            double v = s[i * n + j];
            for (int64_t p = 0; p < j; ++p) v -= l[i * n + p] * l[j * n + p];
            l[i * n + j] = v / l[j * n + j];
          }
        }
        store(k.out[0], b * n * n, l);
        break;
      }
      case Op::Qr: {
        Mat q, rr;
        if (kk > 0) householder_qr(a, m, n, q, rr);
        store(k.out[0], b * m * kk, q);
        store(k.out[1], b * kk * n, rr);
        break;
      }
      case Op::Svd: {
        Mat u, s, vh;
        if (kk > 0) {
          if (m >= n) {
            jacobi_svd_tall(a, m, n, u, s, vh);
          } else {
            // A^T = U' S V'^T, so A = V' S U'^T: u = V' (= vh'^T), vh = U'^T
            Mat u2, vh2;
            jacobi_svd_tall(transpose(a, m, n), n, m, u2, s, vh2);
            u = transpose(vh2, m, m);
            vh = transpose(u2, n, m);
            linalg::fix_column_signs(u.data(), m, m, m, vh.data(), n, n);
          }
        }
        store(k.out[0], b * m * kk, u);
        store(k.out[1], b * kk, s);
        store(k.out[2], b * kk * n, vh);
        break;
      }
      case Op::Eigh: {
        Mat w, v;
        if (n > 0) jacobi_eigh(symmetrized(a, n), n, w, v);
        store(k.out[0], b * n, w);
        store(k.out[1], b * n * n, v);
        break;
      }
      case Op::TriangularSolve:
      case Op::Solve: {
        const int64_t nrhs = k.in[1]->sizes().back();
        Mat x = load(*k.in[1], b * n * nrhs, n * nrhs);
        if (op == Op::TriangularSolve) {
          Status s = tri_solve(a, x, n, nrhs, attrs.i("lower", 1) != 0, attrs.i("transpose", 0) != 0,
                               attrs.i("unit_diagonal", 0) != 0);
          if (!s.is_ok()) return fail(s);
        } else {
          Mat lu = a;
          std::vector<int64_t> perm;
          lu_inplace(lu, n, perm);
          Mat px(x.size());
          for (int64_t i = 0; i < n; ++i)
            for (int64_t c = 0; c < nrhs; ++c) px[i * nrhs + c] = x[perm[i] * nrhs + c];
          RLX_TRY(tri_solve(lu, px, n, nrhs, true, false, true));
          Status s = tri_solve(lu, px, n, nrhs, false, false, false);
          if (!s.is_ok()) return fail(s);
          x = std::move(px);
        }
        store(k.out[0], b * n * nrhs, x);
        break;
      }
      case Op::Det:
      case Op::Slogdet: {
        Mat lu = a;
        std::vector<int64_t> perm;
        const int swaps = lu_inplace(lu, n, perm);
        double sign = swaps % 2 ? -1 : 1, logabs = 0;
        for (int64_t i = 0; i < n; ++i) {
          const double d = lu[i * n + i];
          if (d < 0) sign = -sign;
          if (d == 0) sign = 0;
          logabs += std::log(std::abs(d));
        }
        if (op == Op::Det) {
          store_f(k.out[0].bytes(), k.out[0].dtype(), b, sign == 0 ? 0.0 : sign * std::exp(logabs));
        } else {
          store_f(k.out[0].bytes(), k.out[0].dtype(), b, sign);
          store_f(k.out[1].bytes(), k.out[1].dtype(), b, sign == 0 ? -std::numeric_limits<double>::infinity() : logabs);
        }
        break;
      }
      case Op::Lstsq: {
        const int64_t nrhs = k.in[1]->sizes().back();
        const Mat bm = load(*k.in[1], b * m * nrhs, m * nrhs);
        Mat x(static_cast<size_t>(n * nrhs), 0.0);
        if (n > 0 && nrhs > 0) {
          Mat q, rr;
          householder_qr(a, m, n, q, rr);  // q m x n, rr n x n
          for (int64_t i = 0; i < n; ++i)
            for (int64_t c = 0; c < nrhs; ++c) {
              double v = 0;
              for (int64_t p = 0; p < m; ++p) v += q[p * n + i] * bm[p * nrhs + c];
              x[i * nrhs + c] = v;
            }
          for (int64_t i = 0; i < n; ++i)
            if (std::abs(rr[i * n + i]) <= 1e-14 * std::abs(rr[0]))
              return fail(error(ErrorCode::runtime_error, "A does not have full column rank"));
          Status s = tri_solve(rr, x, n, nrhs, false, false, false);
          if (!s.is_ok()) return fail(s);
        }
        store(k.out[0], b * n * nrhs, x);
        break;
      }
      default: return error(ErrorCode::internal, k.label, ": ", op_name(op), " is not a linear-algebra op");
    }
  }
  return Status::ok();
}

}  // namespace rlx::ref::detail
