#include "lapack_kernels.h"

#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "conventions.h"

namespace rlx::linalg {
namespace {

// LAPACKE's s/d routines behind one name per routine.
struct L {
  static lapack_int getrf(lapack_int m, lapack_int n, float* a, lapack_int* ipiv) {
    return LAPACKE_sgetrf(LAPACK_ROW_MAJOR, m, n, a, n, ipiv);
  }
  static lapack_int getrf(lapack_int m, lapack_int n, double* a, lapack_int* ipiv) {
    return LAPACKE_dgetrf(LAPACK_ROW_MAJOR, m, n, a, n, ipiv);
  }
  static lapack_int potrf(lapack_int n, float* a) { return LAPACKE_spotrf(LAPACK_ROW_MAJOR, 'L', n, a, n); }
  static lapack_int potrf(lapack_int n, double* a) { return LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'L', n, a, n); }
  static lapack_int geqrf(lapack_int m, lapack_int n, float* a, float* tau) {
    return LAPACKE_sgeqrf(LAPACK_ROW_MAJOR, m, n, a, n, tau);
  }
  static lapack_int geqrf(lapack_int m, lapack_int n, double* a, double* tau) {
    return LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, m, n, a, n, tau);
  }
  static lapack_int orgqr(lapack_int m, lapack_int k, float* a, const float* tau) {
    return LAPACKE_sorgqr(LAPACK_ROW_MAJOR, m, k, k, a, k, tau);
  }
  static lapack_int orgqr(lapack_int m, lapack_int k, double* a, const double* tau) {
    return LAPACKE_dorgqr(LAPACK_ROW_MAJOR, m, k, k, a, k, tau);
  }
  static lapack_int gesdd(lapack_int m, lapack_int n, float* a, float* s, float* u, float* vt) {
    const lapack_int k = std::min(m, n);
    return LAPACKE_sgesdd(LAPACK_ROW_MAJOR, 'S', m, n, a, n, s, u, k, vt, n);
  }
  static lapack_int gesdd(lapack_int m, lapack_int n, double* a, double* s, double* u, double* vt) {
    const lapack_int k = std::min(m, n);
    return LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'S', m, n, a, n, s, u, k, vt, n);
  }
  static lapack_int syevd(lapack_int n, float* a, float* w) { return LAPACKE_ssyevd(LAPACK_ROW_MAJOR, 'V', 'L', n, a, n, w); }
  static lapack_int syevd(lapack_int n, double* a, double* w) { return LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'L', n, a, n, w); }
  static lapack_int trtrs(char uplo, char trans, char diag, lapack_int n, lapack_int k, const float* a, float* b) {
    return LAPACKE_strtrs(LAPACK_ROW_MAJOR, uplo, trans, diag, n, k, a, n, b, k);
  }
  static lapack_int trtrs(char uplo, char trans, char diag, lapack_int n, lapack_int k, const double* a, double* b) {
    return LAPACKE_dtrtrs(LAPACK_ROW_MAJOR, uplo, trans, diag, n, k, a, n, b, k);
  }
  static lapack_int gesv(lapack_int n, lapack_int k, float* a, lapack_int* ipiv, float* b) {
    return LAPACKE_sgesv(LAPACK_ROW_MAJOR, n, k, a, n, ipiv, b, k);
  }
  static lapack_int gesv(lapack_int n, lapack_int k, double* a, lapack_int* ipiv, double* b) {
    return LAPACKE_dgesv(LAPACK_ROW_MAJOR, n, k, a, n, ipiv, b, k);
  }
  static lapack_int gels(lapack_int m, lapack_int n, lapack_int k, float* a, float* b) {
    return LAPACKE_sgels(LAPACK_ROW_MAJOR, 'N', m, n, k, a, n, b, k);
  }
  static lapack_int gels(lapack_int m, lapack_int n, lapack_int k, double* a, double* b) {
    return LAPACKE_dgels(LAPACK_ROW_MAJOR, 'N', m, n, k, a, n, b, k);
  }
};

const char* routine(Op op) {
  switch (op) {
    case Op::Lu: return "getrf";
    case Op::Cholesky: return "potrf";
    case Op::Qr: return "geqrf+orgqr";
    case Op::Svd: return "gesdd";
    case Op::Eigh: return "syevd";
    case Op::TriangularSolve: return "trtrs";
    case Op::Solve: return "gesv";
    case Op::Det:
    case Op::Slogdet: return "getrf";
    case Op::Lstsq: return "gels";
    default: return nullptr;
  }
}

Sizes sizes(const TensorType& t) { return *static_sizes(t.shape); }

// (A + A^T) / 2 of the n x n matrix a into s.
template <class T>
void symmetrize(const T* a, T* s, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) s[i * n + j] = static_cast<T>((a[i * n + j] + a[j * n + i]) / 2);
}

template <class T>
Status run_typed(Op op, const Attrs& attrs, std::span<const TensorType> in_types, std::span<const void* const> in,
                 std::span<const TensorType> out_types, std::span<void* const> out) {
  const Sizes as = sizes(in_types[0]);
  const int r = static_cast<int>(as.size());
  const int64_t m = as[r - 2], n = as[r - 1], k = std::min(m, n);
  int64_t batch = 1;
  for (int d = 0; d < r - 2; ++d) batch *= as[d];
  const T* a = static_cast<const T*>(in[0]);
  auto fail = [&](int64_t b, const std::string& what) {
    return error(ErrorCode::runtime_error, op_name(op), ": ", what, batch > 1 ? cat(" (matrix ", b, " of the batch)") : "");
  };
  std::vector<T> work;
  std::vector<lapack_int> ipiv(static_cast<size_t>(std::max<int64_t>(n, 1)));
  for (int64_t b = 0; b < batch; ++b) {
    const T* ab = a + b * m * n;
    switch (op) {
      case Op::Lu: {
        T* lu = static_cast<T*>(out[0]) + b * n * n;
        int64_t* perm = static_cast<int64_t*>(out[1]) + b * n;
        std::memcpy(lu, ab, sizeof(T) * n * n);
        for (int64_t i = 0; i < n; ++i) perm[i] = i;
        if (n == 0) break;
        const lapack_int info = L::getrf(n, n, lu, ipiv.data());
        if (info < 0) return fail(b, cat("getrf argument ", -info, " is invalid"));
        // a singular U (info > 0) is still a complete factorization
        for (int64_t i = 0; i < n; ++i) std::swap(perm[i], perm[ipiv[i] - 1]);
        break;
      }
      case Op::Cholesky: {
        T* l = static_cast<T*>(out[0]) + b * n * n;
        symmetrize(ab, l, n);
        if (n == 0) break;
        const lapack_int info = L::potrf(n, l);
        if (info > 0) return fail(b, cat("the matrix is not positive definite (leading minor ", info, ")"));
        if (info < 0) return fail(b, cat("potrf argument ", -info, " is invalid"));
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = i + 1; j < n; ++j) l[i * n + j] = 0;
        break;
      }
      case Op::Qr: {
        T* q = static_cast<T*>(out[0]) + b * m * k;
        T* rr = static_cast<T*>(out[1]) + b * k * n;
        if (k == 0) break;
        work.assign(ab, ab + m * n);
        std::vector<T> tau(static_cast<size_t>(k));
        lapack_int info = L::geqrf(m, n, work.data(), tau.data());
        if (info != 0) return fail(b, cat("geqrf failed (info ", info, ")"));
        for (int64_t i = 0; i < k; ++i)
          for (int64_t j = 0; j < n; ++j) rr[i * n + j] = j >= i ? work[i * n + j] : T(0);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < k; ++j) q[i * k + j] = work[i * n + j];
        info = L::orgqr(m, k, q, tau.data());
        if (info != 0) return fail(b, cat("orgqr failed (info ", info, ")"));
        qr_fix_signs(q, m, k, rr, n, n, k);
        break;
      }
      case Op::Svd: {
        T* u = static_cast<T*>(out[0]) + b * m * k;
        T* s = static_cast<T*>(out[1]) + b * k;
        T* vh = static_cast<T*>(out[2]) + b * k * n;
        if (k == 0) break;
        work.assign(ab, ab + m * n);
        const lapack_int info = L::gesdd(m, n, work.data(), s, u, vh);
        if (info > 0) return fail(b, "the SVD did not converge");
        if (info < 0) return fail(b, cat("gesdd argument ", -info, " is invalid"));
        fix_column_signs(u, m, k, k, vh, n, n);
        break;
      }
      case Op::Eigh: {
        T* w = static_cast<T*>(out[0]) + b * n;
        T* v = static_cast<T*>(out[1]) + b * n * n;
        if (n == 0) break;
        symmetrize(ab, v, n);
        const lapack_int info = L::syevd(n, v, w);
        if (info > 0) return fail(b, "the eigensolver did not converge");
        if (info < 0) return fail(b, cat("syevd argument ", -info, " is invalid"));
        fix_column_signs(v, n, n, n, static_cast<T*>(nullptr), 0, 0);
        break;
      }
      case Op::TriangularSolve:
      case Op::Solve: {
        const Sizes bs = sizes(in_types[1]);
        const int64_t nrhs = bs.back();
        const T* bb = static_cast<const T*>(in[1]) + b * n * nrhs;
        T* x = static_cast<T*>(out[0]) + b * n * nrhs;
        std::memcpy(x, bb, sizeof(T) * n * nrhs);
        if (n == 0 || nrhs == 0) break;
        lapack_int info;
        if (op == Op::TriangularSolve) {
          const bool lower = attrs.i("lower", 1) != 0;
          info = L::trtrs(lower ? 'L' : 'U', attrs.i("transpose", 0) ? 'T' : 'N', attrs.i("unit_diagonal", 0) ? 'U' : 'N',
                          n, nrhs, ab, x);
        } else {
          work.assign(ab, ab + n * n);
          info = L::gesv(n, nrhs, work.data(), ipiv.data(), x);
        }
        if (info > 0) return fail(b, cat("the matrix is singular (zero pivot at ", info - 1, ")"));
        if (info < 0) return fail(b, cat(routine(op), " argument ", -info, " is invalid"));
        break;
      }
      case Op::Det:
      case Op::Slogdet: {
        double sign = 1, logabs = 0;
        if (n > 0) {
          work.assign(ab, ab + n * n);
          const lapack_int info = L::getrf(n, n, work.data(), ipiv.data());
          if (info < 0) return fail(b, cat("getrf argument ", -info, " is invalid"));
          for (int64_t i = 0; i < n; ++i) {
            const double d = work[i * n + i];
            if (ipiv[i] - 1 != i) sign = -sign;
            if (d < 0) sign = -sign;
            if (d == 0) sign = 0;
            logabs += std::log(std::abs(d));
          }
        }
        if (op == Op::Det) {
          static_cast<T*>(out[0])[b] = static_cast<T>(sign == 0 ? 0.0 : sign * std::exp(logabs));
        } else {
          static_cast<T*>(out[0])[b] = static_cast<T>(sign);
          static_cast<T*>(out[1])[b] = static_cast<T>(sign == 0 ? -std::numeric_limits<double>::infinity() : logabs);
        }
        break;
      }
      case Op::Lstsq: {
        const Sizes bs = sizes(in_types[1]);
        const int64_t nrhs = bs.back();
        const T* bb = static_cast<const T*>(in[1]) + b * m * nrhs;
        T* x = static_cast<T*>(out[0]) + b * n * nrhs;
        if (n == 0 || nrhs == 0) break;
        work.assign(ab, ab + m * n);
        std::vector<T> rhs(bb, bb + m * nrhs);
        const lapack_int info = L::gels(m, n, nrhs, work.data(), rhs.data());
        if (info > 0) return fail(b, "A does not have full column rank");
        if (info < 0) return fail(b, cat("gels argument ", -info, " is invalid"));
        std::memcpy(x, rhs.data(), sizeof(T) * n * nrhs);
        break;
      }
      default: return error(ErrorCode::internal, op_name(op), " is not a linear-algebra op");
    }
  }
  return Status::ok();
}

}  // namespace

Claim claim_lapack(const NodeDesc& n) {
  const char* fn = routine(n.op);
  if (!fn) return Claim::no(cat("cpu has no native ", op_name(n.op), " kernel"));
  const DType dt = n.inputs.empty() ? DType::f32 : n.inputs[0].dtype;
  if (dt != DType::f32 && dt != DType::f64)
    return Claim::no(cat("LAPACK factorizations compute in f32 or f64, got ", dtype_name(dt)));
  for (const TensorType& t : n.inputs)
    if (!static_sizes(t.shape)) return Claim::no("the LAPACK kernels need static shapes");
  const Sizes s = *static_sizes(n.inputs[0].shape);
  if (s.size() < 2) return Claim::no("not a matrix");
  int64_t batch = 1;
  for (size_t d = 0; d + 2 < s.size(); ++d) batch *= s[d];
  const int64_t limit = std::numeric_limits<lapack_int>::max();
  for (const TensorType& t : n.inputs)
    for (const Dim& d : t.shape)
      if (d.size() > limit) return Claim::no(cat("a dimension of ", d.size(), " exceeds LAPACK's integer range"));
  return Claim::yes(cat("LAPACK ", dt == DType::f32 ? "s" : "d", fn, " ", s[s.size() - 2], "x", s.back(),
                        batch > 1 ? cat(" batch=", batch) : std::string()));
}

Status run_lapack(Op op, const Attrs& attrs, std::span<const TensorType> in_types, std::span<const void* const> in,
                  std::span<const TensorType> out_types, std::span<void* const> out) {
  if (in_types.empty() || in.size() != in_types.size() || out.size() != out_types.size())
    return error(ErrorCode::internal, op_name(op), ": inputs or outputs do not match their types");
  if (in_types[0].dtype == DType::f64) return run_typed<double>(op, attrs, in_types, in, out_types, out);
  if (in_types[0].dtype == DType::f32) return run_typed<float>(op, attrs, in_types, in, out_types, out);
  return error(ErrorCode::unsupported, op_name(op), ": LAPACK computes in f32 or f64, got ", dtype_name(in_types[0].dtype));
}

}  // namespace rlx::linalg
