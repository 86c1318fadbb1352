// The host kernels of the sparse graph ops (sparse_kernels.h). Index data comes from tensors
// at run time, so it is checked here before any access it steers: row_ptr in full (O(n)), and
// columns inside the SpMV loop itself (spmm_checked_columns, which skips and reports a bad
// column instead of reading through it) or in a pass before a scatter or a factorization.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>

#include "rlx/thread_pool.h"
#include "sparse/sparse_internal.h"
#include "sparse/sparse_kernels.h"

namespace rlx::sparse {
namespace {

int64_t rows_of(const TensorType& t) { return t.shape[0].size(); }
int64_t cols_of(const TensorType& t) { return t.rank() == 2 ? t.shape[1].size() : 1; }

// row_ptr[0] = 0, non-decreasing, row_ptr[n] = nnz. The scan for a decrease runs on the pool
// (a serial pass over a million rows costs a fifth of the SpMV); the error names the first.
template <class I>
Status check_row_ptr(Op op, const I* rp, int64_t n, int64_t nnz) {
  if (rp[0] != 0) return error(ErrorCode::invalid_argument, op_name(op), ": row_ptr[0] is ", rp[0], ", not 0");
  std::atomic<bool> bad{false};
  ThreadPool::global().parallel_for(n, 1 << 16, [&](int64_t s, int64_t e) {
    bool b = false;
    for (int64_t i = s; i < e; ++i) b |= rp[i + 1] < rp[i];
    if (b) bad.store(true, std::memory_order_relaxed);
  });
  for (int64_t i = 0; bad.load() && i < n; ++i)
    if (rp[i + 1] < rp[i])
      return error(ErrorCode::invalid_argument, op_name(op), ": row_ptr decreases at row ", i, " (row_ptr[", i, "] = ",
                   rp[i], ", row_ptr[", i + 1, "] = ", rp[i + 1], ")");
  if (static_cast<int64_t>(rp[n]) != nnz)
    return error(ErrorCode::invalid_argument, op_name(op), ": row_ptr ends at ", rp[n], " but col_idx has ", nnz, " entries");
  return Status::ok();
}

// The first entry whose column is outside [0, cols), as an error (ok when there is none).
template <class I>
Status check_columns(Op op, const I* rp, const I* ci, int64_t n, int64_t cols) {
  for (int64_t i = 0; i < n; ++i)
    for (I p = rp[i]; p < rp[i + 1]; ++p)
      if (ci[p] < 0 || static_cast<int64_t>(ci[p]) >= cols)
        return error(ErrorCode::invalid_argument, op_name(op), ": column ", ci[p], " of entry ", p, " (row ", i,
                     ") is outside [0, ", cols, ")");
  return Status::ok();
}

template <class V, class I>
Status spmv(Op op, const Attrs& attrs, std::span<const TensorType> t, std::span<const void* const> in, V* y,
            const TensorType& yt) {
  const I* rp = static_cast<const I*>(in[0]);
  const I* ci = static_cast<const I*>(in[1]);
  const V* va = static_cast<const V*>(in[2]);
  const V* x = static_cast<const V*>(in[3]);
  const int64_t n = rows_of(t[0]) - 1, nnz = rows_of(t[1]), k = cols_of(t[3]);
  RLX_TRY(check_row_ptr(op, rp, n, nnz));
  if (attrs.i("transpose", 0) == 0) {
    const detail::CsrView<V, I> a{n, rows_of(t[3]), nnz, rp, ci, va};
    if (!detail::spmm_checked_columns(a, x, k, y)) return check_columns(op, rp, ci, n, a.cols);
    return Status::ok();
  }
  // y = A^T x: a scatter into y's rows (columns checked first: the scatter writes through them)
  const int64_t cols = rows_of(yt);
  RLX_TRY(check_columns(op, rp, ci, n, cols));
  detail::spmm_transposed_unchecked(detail::CsrView<V, I>{n, cols, nnz, rp, ci, va}, x, k, y);
  return Status::ok();
}

// out[p] = sum_j a[i, j] b[c, j] for the stored entries p = (i, c).
template <class V, class I>
Status sddmm(Op op, std::span<const TensorType> t, std::span<const void* const> in, V* out) {
  const I* rp = static_cast<const I*>(in[0]);
  const I* ci = static_cast<const I*>(in[1]);
  const V* a = static_cast<const V*>(in[2]);
  const V* b = static_cast<const V*>(in[3]);
  const int64_t n = rows_of(t[0]) - 1, nnz = rows_of(t[1]), k = cols_of(t[2]), m = rows_of(t[3]);
  RLX_TRY(check_row_ptr(op, rp, n, nnz));
  RLX_TRY(check_columns(op, rp, ci, n, m));
  ThreadPool::global().parallel_for(n, std::max<int64_t>(1, 20000 / (k * (nnz / std::max<int64_t>(n, 1) + 1))),
                                    [&](int64_t r0, int64_t r1) {
                                      for (int64_t i = r0; i < r1; ++i)
                                        for (I p = rp[i]; p < rp[i + 1]; ++p) {
                                          const V* ai = a + i * k;
                                          const V* bc = b + static_cast<int64_t>(ci[p]) * k;
                                          V s = 0;
                                          for (int64_t j = 0; j < k; ++j) s += ai[j] * bc[j];
                                          out[p] = s;
                                        }
                                    });
  return Status::ok();
}

// coo_to_csr: a counting sort of the entries by row (stable, so equal rows keep their COO
// order), then each row's entries stably by column; duplicates stay side by side.
template <class V, class I>
Status coo_to_csr(Op op, const Attrs& attrs, std::span<const TensorType> t, std::span<const void* const> in,
                  std::span<void* const> out) {
  const I* r = static_cast<const I*>(in[0]);
  const I* c = static_cast<const I*>(in[1]);
  const V* v = static_cast<const V*>(in[2]);
  const int64_t nnz = rows_of(t[0]), n = attrs.i("rows"), m = attrs.i("cols");
  I* rp = static_cast<I*>(out[0]);
  I* ci = static_cast<I*>(out[1]);
  V* cv = static_cast<V*>(out[2]);
  int64_t* pos = static_cast<int64_t*>(out[3]);
  for (int64_t k = 0; k < nnz; ++k)
    if (r[k] < 0 || static_cast<int64_t>(r[k]) >= n || c[k] < 0 || static_cast<int64_t>(c[k]) >= m)
      return error(ErrorCode::invalid_argument, op_name(op), ": entry ", k, " at (", r[k], ", ", c[k], ") is outside the ",
                   n, " x ", m, " matrix");
  std::vector<int64_t> start(static_cast<size_t>(n) + 1, 0);
  for (int64_t k = 0; k < nnz; ++k) ++start[static_cast<size_t>(r[k]) + 1];
  for (int64_t i = 0; i < n; ++i) start[i + 1] += start[i];
  for (int64_t i = 0; i <= n; ++i) rp[i] = static_cast<I>(start[i]);
  std::vector<int64_t> order(static_cast<size_t>(nnz));
  for (int64_t k = 0; k < nnz; ++k) order[start[r[k]]++] = k;  // start[i] ends at row i's end
  ThreadPool::global().parallel_for(n, 4096, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      std::stable_sort(order.begin() + rp[i], order.begin() + rp[i + 1], [&](int64_t x, int64_t y) { return c[x] < c[y]; });
  });
  for (int64_t p = 0; p < nnz; ++p) {
    const int64_t k = order[p];
    ci[p] = c[k];
    cv[p] = v[k];
    pos[k] = p;
  }
  return Status::ok();
}

// The matrix of a solve node. Repeated columns within a row (coo_to_csr keeps duplicates) are
// summed into one entry, as the matrix they stand for has; merged_of maps each stored entry of
// the node's arrays to its entry of `a` (empty when nothing was merged).
template <class V, class I>
struct SolveMatrix {
  Csr<V, I> a;
  std::vector<int64_t> merged_of;
};

template <class V, class I>
Expected<SolveMatrix<V, I>> matrix(Op op, std::span<const TensorType> t, std::span<const void* const> in) {
  SolveMatrix<V, I> s;
  Csr<V, I>& a = s.a;
  a.rows = a.cols = rows_of(t[0]) - 1;
  const int64_t nnz = rows_of(t[1]);
  const I* rp = static_cast<const I*>(in[0]);
  const I* ci = static_cast<const I*>(in[1]);
  const V* va = static_cast<const V*>(in[2]);
  RLX_TRY(check_row_ptr(op, rp, a.rows, nnz));
  bool repeats = false;
  for (int64_t i = 0; i < a.rows && !repeats; ++i)
    for (I p = rp[i] + 1; p < rp[i + 1]; ++p) repeats |= ci[p] == ci[p - 1];
  if (!repeats) {
    a.row_ptr.assign(rp, rp + a.rows + 1);
    a.col_idx.assign(ci, ci + nnz);
    a.values.assign(va, va + nnz);
  } else {
    s.merged_of.resize(static_cast<size_t>(nnz));
    a.row_ptr.assign(1, 0);
    for (int64_t i = 0; i < a.rows; ++i) {
      for (I p = rp[i]; p < rp[i + 1]; ++p) {
        if (p > rp[i] && ci[p] == ci[p - 1]) {
          a.values.back() += va[p];
        } else {
          a.col_idx.push_back(ci[p]);
          a.values.push_back(va[p]);
        }
        s.merged_of[p] = a.nnz() - 1;
      }
      a.row_ptr.push_back(static_cast<I>(a.nnz()));
    }
  }
  // the factorization validates the rest (columns in range and increasing per row)
  RLX_TRY(validate(a, cat(op_name(op), ": A")));
  return s;
}

// The last matrix a solve op factored, kept so that sparse_solve_backward (the same A as its
// forward) and repeated solves with one matrix factor once. A hit needs the same dtypes and
// method and byte-identical row_ptr, col_idx and values, compared in full: O(nnz), small next
// to a factorization. One entry only: a factorization can be large (fill-in), and a training
// step changes the values anyway. Users of an entry hold its lock (CHOLMOD's solve writes
// to the factorization's workspace).
struct CachedFactor {
  DType vt = DType::f32, it = DType::i32;
  DirectMethod method = DirectMethod::lu;
  std::vector<uint8_t> row_ptr, col_idx, values;
  Factorization f;
  std::mutex use;
};

struct FactorCache {
  std::mutex mu;
  std::shared_ptr<CachedFactor> last;
  int64_t hits = 0, misses = 0;
};

FactorCache& factor_cache() {
  static FactorCache c;
  return c;
}

bool same_bytes(const std::vector<uint8_t>& v, const void* p, size_t n) {
  return v.size() == n && std::memcmp(v.data(), p, n) == 0;
}
std::vector<uint8_t> bytes_of(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  return std::vector<uint8_t>(b, b + n);
}

// The factorization of `a` (whose arrays are the node's inputs 0-2), from the cache or new.
template <class V, class I>
Expected<std::shared_ptr<CachedFactor>> factor_of(const Csr<V, I>& a, DirectMethod method, std::span<const TensorType> t) {
  const size_t rp = a.row_ptr.size() * sizeof(I), ci = a.col_idx.size() * sizeof(I), va = a.values.size() * sizeof(V);
  FactorCache& c = factor_cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    const std::shared_ptr<CachedFactor>& e = c.last;
    if (e && e->vt == t[2].dtype && e->it == t[0].dtype && e->method == method && same_bytes(e->row_ptr, a.row_ptr.data(), rp) &&
        same_bytes(e->col_idx, a.col_idx.data(), ci) && same_bytes(e->values, a.values.data(), va)) {
      ++c.hits;
      return e;
    }
    ++c.misses;
  }
  auto f = Factorization::factor(a, method);
  if (!f) return f.status();
  auto e = std::make_shared<CachedFactor>();
  e->vt = t[2].dtype;
  e->it = t[0].dtype;
  e->method = method;
  e->row_ptr = bytes_of(a.row_ptr.data(), rp);
  e->col_idx = bytes_of(a.col_idx.data(), ci);
  e->values = bytes_of(a.values.data(), va);
  e->f = std::move(*f);
  std::lock_guard<std::mutex> lock(c.mu);
  c.last = e;
  return e;
}

DirectMethod method_of(const Attrs& attrs) { return attrs.s("method", "lu") == "cholesky" ? DirectMethod::cholesky : DirectMethod::lu; }

// Column j of a row-major [n, k] buffer, in double.
template <class V>
std::vector<double> column(const V* p, int64_t n, int64_t k, int64_t j) {
  std::vector<double> c(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) c[i] = static_cast<double>(p[i * k + j]);
  return c;
}

template <class V, class I>
Status solve(Op op, const Attrs& attrs, std::span<const TensorType> t, std::span<const void* const> in,
             std::span<void* const> out) {
  auto got = matrix<V, I>(op, t, in);
  if (!got) return got.status();
  const Csr<V, I>& a = got->a;
  auto cached = factor_of(a, method_of(attrs), t);
  if (!cached) return cached.status().with_context(op_name(op));
  std::lock_guard<std::mutex> in_use((*cached)->use);
  const Factorization* f = &(*cached)->f;
  const int64_t n = a.rows;
  if (op == Op::SparseSolve) {
    const int64_t k = cols_of(t[3]);
    V* x = static_cast<V*>(out[0]);
    for (int64_t j = 0; j < k; ++j) {
      auto xj = f->solve(column(static_cast<const V*>(in[3]), n, k, j));
      if (!xj) return xj.status().with_context(op_name(op));
      for (int64_t i = 0; i < n; ++i) x[i * k + j] = static_cast<V>((*xj)[i]);
    }
    return Status::ok();
  }
  // sparse_solve_backward: the adjoint solve per column, gradients on the pattern summed over
  // the columns
  const int64_t k = cols_of(t[4]);
  V* gv = static_cast<V*>(out[0]);
  V* gb = static_cast<V*>(out[1]);
  std::vector<double> acc(static_cast<size_t>(a.nnz()), 0.0);
  const bool chol = method_of(attrs) == DirectMethod::cholesky;
  for (int64_t j = 0; j < k; ++j) {
    const std::vector<double> xj = column(static_cast<const V*>(in[3]), n, k, j);
    auto g = solve_gradients(a, *f, xj, column(static_cast<const V*>(in[4]), n, k, j));
    if (!g) return g.status().with_context(op_name(op));
    for (int64_t i = 0; i < n; ++i) {
      gb[i * k + j] = static_cast<V>(g->b[i]);
      for (I p = a.row_ptr[i]; p < a.row_ptr[i + 1]; ++p) {
        const int64_t c = a.col_idx[p];
        // CHOLMOD gets the CSR arrays as columns (A^T) and reads that matrix's lower triangle:
        // A's upper triangle, mirrored. An entry above the diagonal stands for both (i, c)
        // and (c, i); one below it is never read
        if (!chol || c == i) acc[p] += g->values[p];
        else if (c > i) acc[p] += g->values[p] - g->b[c] * xj[i];
      }
    }
  }
  // a merged entry's gradient belongs to each of the stored entries it sums
  const std::vector<int64_t>& merged = got->merged_of;
  for (int64_t p = 0; p < rows_of(t[1]); ++p) gv[p] = static_cast<V>(acc[merged.empty() ? p : merged[p]]);
  return Status::ok();
}

template <class V, class I>
Status run_typed(Op op, const Attrs& attrs, std::span<const TensorType> t, std::span<const void* const> in,
                 std::span<const TensorType> out_types, std::span<void* const> out) {
  switch (op) {
    case Op::CooToCsr: return coo_to_csr<V, I>(op, attrs, t, in, out);
    case Op::SpmvCsr: return spmv<V, I>(op, attrs, t, in, static_cast<V*>(out[0]), out_types[0]);
    case Op::SddmmCsr: return sddmm<V, I>(op, t, in, static_cast<V*>(out[0]));
    case Op::SparseSolve:
    case Op::SparseSolveBackward: return solve<V, I>(op, attrs, t, in, out);
    default: break;
  }
  return error(ErrorCode::internal, op_name(op), " is not a sparse op");
}

// The float dtype of the node: values (or the dense operand of sddmm_csr).
DType value_dtype(Op, std::span<const TensorType> t) { return t[2].dtype; }

}  // namespace

FactorCacheStats factor_cache_stats() {
  FactorCache& c = factor_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return {c.hits, c.misses};
}

Claim claim_sparse(const NodeDesc& n) {
  if (op_info(n.op).family != OpFamily::sparse) return Claim::no(cat(op_name(n.op), " is not a sparse op"));
  if (n.inputs.size() < (n.op == Op::CooToCsr ? 3u : 4u)) return Claim::no(cat(op_name(n.op), " needs its CSR inputs"));
  for (const TensorType& t : n.inputs)
    if (!static_sizes(t.shape)) return Claim::no("the sparse kernels need static shapes");
  const DType vt = value_dtype(n.op, n.inputs), it = n.inputs[0].dtype;
  if ((vt != DType::f32 && vt != DType::f64) || (it != DType::i32 && it != DType::i64))
    return Claim::no(cat("the sparse kernels take f32/f64 values and i32/i64 indices, got ", dtype_name(vt), " and ",
                         dtype_name(it)));
  const int64_t rows = rows_of(n.inputs[0]) - 1, nnz = rows_of(n.inputs[1]);
  const std::string sizes = cat(dtype_name(vt), "/", dtype_name(it), " n=", rows, " nnz=", nnz);
  switch (n.op) {
    case Op::CooToCsr:
      return Claim::yes(cat("host COO -> CSR (counting sort by row) ", dtype_name(vt), "/", dtype_name(it), " ",
                            n.attrs.i("rows"), "x", n.attrs.i("cols"), " nnz=", rows_of(n.inputs[0])));
    case Op::SpmvCsr: {
      const int64_t k = cols_of(n.inputs[3]);
      if (n.attrs.i("transpose", 0)) return Claim::yes(cat("host CSR transposed ", k > 1 ? "SpMM" : "SpMV", " (scatter) ", sizes));
      return Claim::yes(cat("host CSR ", k > 1 ? cat("SpMM k=", k) : std::string("SpMV"), " (thread pool) ", sizes));
    }
    case Op::SddmmCsr: return Claim::yes(cat("host CSR SDDMM (thread pool) ", sizes));
    case Op::SparseSolve:
    case Op::SparseSolveBackward: {
      const bool chol = n.attrs.s("method", "lu") == "cholesky";
      return Claim::yes(cat(chol ? "CHOLMOD Cholesky " : "UMFPACK LU ", n.op == Op::SparseSolveBackward ? "adjoint solve " : "",
                            sizes));
    }
    default: break;
  }
  return Claim::no(cat(op_name(n.op), " has no host kernel"));
}

Status run_sparse(Op op, const Attrs& attrs, std::span<const TensorType> in_types, std::span<const void* const> in,
                  std::span<const TensorType> out_types, std::span<void* const> out) {
  if (in_types.size() < (op == Op::CooToCsr ? 3u : 4u) || in.size() != in_types.size() || out.size() != out_types.size() ||
      out.empty())
    return error(ErrorCode::internal, op_name(op), ": inputs or outputs do not match their types");
  for (const TensorType& t : in_types)
    if (!static_sizes(t.shape)) return error(ErrorCode::shape_error, op_name(op), ": the sparse kernels need static shapes");
  const DType vt = value_dtype(op, in_types), it = in_types[0].dtype;
  if (vt == DType::f64 && it == DType::i32) return run_typed<double, int32_t>(op, attrs, in_types, in, out_types, out);
  if (vt == DType::f64 && it == DType::i64) return run_typed<double, int64_t>(op, attrs, in_types, in, out_types, out);
  if (vt == DType::f32 && it == DType::i32) return run_typed<float, int32_t>(op, attrs, in_types, in, out_types, out);
  if (vt == DType::f32 && it == DType::i64) return run_typed<float, int64_t>(op, attrs, in_types, in, out_types, out);
  return error(ErrorCode::dtype_error, op_name(op), ": the sparse kernels take f32/f64 values and i32/i64 indices, got ",
               dtype_name(vt), " and ", dtype_name(it));
}

}  // namespace rlx::sparse
