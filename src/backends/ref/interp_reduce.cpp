// Reference kernels of the reductions (reduce_sum/max/min/prod, argmax/argmin) and of the
// contraction `dot` (XLA dot_general). Floats accumulate in double, integers in wrapping
// 64-bit arithmetic, c64 in complex<double>.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/ref/interp_internal.h"

namespace rlx::ref::detail {
namespace {

// Normalized reduction axes as a per-dimension mask (empty axes = all axes).
std::vector<bool> axis_mask(const Attrs& a, int rank) {
  std::vector<int64_t> axes = a.ints("axes");
  std::vector<bool> m(rank, axes.empty());
  for (int64_t ax : axes) m[ax < 0 ? ax + rank : ax] = true;
  return m;
}

// For each input dim: the stride of the reduced output index (0 on reduced dims).
Sizes reduced_out_strides(const Sizes& in, const std::vector<bool>& reduced) {
  Sizes kept;
  for (size_t d = 0; d < in.size(); ++d)
    if (!reduced[d]) kept.push_back(in[d]);
  Sizes ks = contiguous_strides(kept);
  Sizes s(in.size(), 0);
  size_t j = 0;
  for (size_t d = 0; d < in.size(); ++d)
    if (!reduced[d]) s[d] = ks[j++];
  return s;
}

double combine_f(Op op, double acc, double x) {
  switch (op) {
    case Op::ReduceSum: return acc + x;
    case Op::ReduceProd: return acc * x;
    case Op::ReduceMax:
      if (std::isnan(acc)) return acc;
      return (std::isnan(x) || x > acc) ? x : acc;
    case Op::ReduceMin:
      if (std::isnan(acc)) return acc;
      return (std::isnan(x) || x < acc) ? x : acc;
    default: return acc;
  }
}

Status run_reduce_values(const KernelArgs& k) {
  const Op op = k.node.op;
  const Tensor& x = *k.in[0];
  Tensor& o = k.out[0];
  const DType xt = x.dtype(), ot = o.dtype();
  const uint8_t* xp = x.bytes();
  uint8_t* p = o.bytes();
  const int64_t n_out = o.numel();
  const std::vector<bool> reduced = axis_mask(k.node.attrs, x.rank());
  const Sizes os = reduced_out_strides(x.sizes(), reduced);
  const Sizes is = contiguous_strides(x.sizes());
  auto visit = [&](auto&& f) {
    for_each_strided<2>(x.sizes(), {is.data(), os.data()}, {0, 0},
                        [&](int64_t, const std::array<int64_t, 2>& off) { f(off[0], off[1]); });
  };
  switch (domain(xt)) {
    case Dom::f: {
      const double init = op == Op::ReduceSum ? 0.0
                          : op == Op::ReduceProd ? 1.0
                          : op == Op::ReduceMax ? -std::numeric_limits<double>::infinity()
                                                : std::numeric_limits<double>::infinity();
      std::vector<double> acc(n_out, init);
      visit([&](int64_t xi, int64_t oi) { acc[oi] = combine_f(op, acc[oi], load_f(xp, xt, xi)); });
      for (int64_t i = 0; i < n_out; ++i) store_f(p, ot, i, acc[i]);
      return Status::ok();
    }
    case Dom::i:
    case Dom::u: {
      const bool sgn = domain(xt) == Dom::i;
      uint64_t init = 0;
      if (op == Op::ReduceProd) init = 1;
      if (op == Op::ReduceMax) init = sgn ? static_cast<uint64_t>(std::numeric_limits<int64_t>::min()) : 0;
      if (op == Op::ReduceMin)
        init = sgn ? static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) : ~uint64_t{0};
      std::vector<uint64_t> acc(n_out, init);
      visit([&](int64_t xi, int64_t oi) {
        const uint64_t v = load_bits(xp, xt, xi);
        uint64_t& a = acc[oi];
        switch (op) {
          case Op::ReduceSum: a += v; break;
          case Op::ReduceProd: a *= v; break;
          case Op::ReduceMax:
            if (sgn ? static_cast<int64_t>(v) > static_cast<int64_t>(a) : v > a) a = v;
            break;
          case Op::ReduceMin:
            if (sgn ? static_cast<int64_t>(v) < static_cast<int64_t>(a) : v < a) a = v;
            break;
          default: break;
        }
      });
      for (int64_t i = 0; i < n_out; ++i) store_bits(p, ot, i, acc[i]);
      return Status::ok();
    }
    case Dom::c: {
      if (op != Op::ReduceSum && op != Op::ReduceProd) return unsupported_dtype(k, xt);
      std::vector<cplx> acc(n_out, op == Op::ReduceSum ? cplx(0.0) : cplx(1.0));
      visit([&](int64_t xi, int64_t oi) {
        const cplx v = load_c(xp, xt, xi);
        acc[oi] = op == Op::ReduceSum ? acc[oi] + v : acc[oi] * v;
      });
      for (int64_t i = 0; i < n_out; ++i) store_c(p, ot, i, acc[i]);
      return Status::ok();
    }
  }
  return Status::ok();
}

Status run_argreduce(const KernelArgs& k) {
  const bool is_max = k.node.op == Op::ArgMax;
  const Tensor& x = *k.in[0];
  Tensor& o = k.out[0];
  const DType xt = x.dtype();
  const uint8_t* xp = x.bytes();
  uint8_t* p = o.bytes();
  const int64_t n_out = o.numel();
  const int rank = x.rank();
  int64_t axis = k.node.attrs.i("axis", 0);
  if (axis < 0) axis += rank;
  const bool last = k.node.attrs.i("select_last_index", 0) != 0;
  if (x.sizes()[axis] == 0) {
    if (n_out == 0) return Status::ok();
    return error(ErrorCode::shape_error, k.label, ": ", op_name(k.node.op), " over the empty axis ", axis);
  }
  std::vector<bool> reduced(rank, false);
  reduced[axis] = true;
  const Sizes os = reduced_out_strides(x.sizes(), reduced);
  const Sizes is = contiguous_strides(x.sizes());
  Sizes axs(rank, 0);
  axs[axis] = 1;
  std::vector<int64_t> best_idx(n_out, 0);
  auto visit = [&](auto&& f) {
    for_each_strided<3>(x.sizes(), {is.data(), os.data(), axs.data()}, {0, 0, 0},
                        [&](int64_t, const std::array<int64_t, 3>& off) { f(off[0], off[1], off[2]); });
  };
  switch (domain(xt)) {
    case Dom::f: {
      std::vector<double> best(n_out, 0.0);
      visit([&](int64_t xi, int64_t oi, int64_t c) {
        const double v = load_f(xp, xt, xi);
        bool take;
        if (c == 0) {
          take = true;
        } else if (std::isnan(best[oi])) {
          take = last && std::isnan(v);  // NaN is the extreme: only another NaN replaces it
        } else if (std::isnan(v)) {
          take = true;
        } else {
          take = is_max ? (last ? v >= best[oi] : v > best[oi]) : (last ? v <= best[oi] : v < best[oi]);
        }
        if (take) {
          best[oi] = v;
          best_idx[oi] = c;
        }
      });
      break;
    }
    case Dom::i:
    case Dom::u: {
      const bool sgn = domain(xt) == Dom::i;
      std::vector<uint64_t> best(n_out, 0);
      visit([&](int64_t xi, int64_t oi, int64_t c) {
        const uint64_t v = load_bits(xp, xt, xi);
        bool take;
        if (c == 0) {
          take = true;
        } else {
          const uint64_t b = best[oi];
          const bool gt = sgn ? static_cast<int64_t>(v) > static_cast<int64_t>(b) : v > b;
          const bool lt = sgn ? static_cast<int64_t>(v) < static_cast<int64_t>(b) : v < b;
          take = is_max ? (gt || (last && v == b)) : (lt || (last && v == b));
        }
        if (take) {
          best[oi] = v;
          best_idx[oi] = c;
        }
      });
      break;
    }
    case Dom::c: return unsupported_dtype(k, xt);
  }
  for (int64_t i = 0; i < n_out; ++i) store_bits(p, o.dtype(), i, static_cast<uint64_t>(best_idx[i]));
  return Status::ok();
}

// ---- dot ----

// Packs `t` into a contiguous buffer with its dims visited in `order`, loading with `load`.
template <class T, class Load>
std::vector<T> pack(const Tensor& t, const std::vector<int64_t>& order, Load load) {
  const Sizes cs = contiguous_strides(t.sizes());
  Sizes sizes, strides;
  for (int64_t d : order) {
    sizes.push_back(t.sizes()[d]);
    strides.push_back(cs[d]);
  }
  std::vector<T> buf(static_cast<size_t>(t.numel()));
  for_each_strided<1>(sizes, {strides.data()}, {0},
                      [&](int64_t i, const std::array<int64_t, 1>& off) { buf[i] = load(off[0]); });
  return buf;
}

template <class T, class LoadA, class LoadB, class Store>
void dot_kernel(const Tensor& a, const Tensor& b, const std::vector<int64_t>& a_order,
                const std::vector<int64_t>& b_order, int64_t nb, int64_t m, int64_t kk, int64_t n,
                LoadA load_a, LoadB load_b, Store store) {
  const std::vector<T> pa = pack<T>(a, a_order, load_a);  // [B, M, K]
  const std::vector<T> pb = pack<T>(b, b_order, load_b);  // [B, K, N]
  std::vector<T> acc(static_cast<size_t>(n));
  for (int64_t bi = 0; bi < nb; ++bi) {
    for (int64_t mi = 0; mi < m; ++mi) {
      std::fill(acc.begin(), acc.end(), T(0));
      const T* arow = pa.data() + (bi * m + mi) * kk;
      for (int64_t ki = 0; ki < kk; ++ki) {
        const T av = arow[ki];
        const T* brow = pb.data() + (bi * kk + ki) * n;
        for (int64_t ni = 0; ni < n; ++ni) acc[ni] += av * brow[ni];
      }
      for (int64_t ni = 0; ni < n; ++ni) store((bi * m + mi) * n + ni, acc[ni]);
    }
  }
}

}  // namespace

Status run_reduce(const KernelArgs& k) {
  if (op_info(k.node.op).family == OpFamily::argreduce) return run_argreduce(k);
  return run_reduce_values(k);
}

Status run_dot(const KernelArgs& k) {
  const Tensor& a = *k.in[0];
  const Tensor& b = *k.in[1];
  Tensor& o = k.out[0];
  const Attrs& at = k.node.attrs;
  const auto lb = at.ints("lhs_batch"), rb = at.ints("rhs_batch");
  const auto lc = at.ints("lhs_contract"), rc = at.ints("rhs_contract");
  auto free_dims = [](int rank, const std::vector<int64_t>& x, const std::vector<int64_t>& y) {
    std::vector<int64_t> f;
    for (int64_t d = 0; d < rank; ++d)
      if (std::find(x.begin(), x.end(), d) == x.end() && std::find(y.begin(), y.end(), d) == y.end())
        f.push_back(d);
    return f;
  };
  const auto lf = free_dims(a.rank(), lb, lc), rf = free_dims(b.rank(), rb, rc);
  auto prod = [](const Tensor& t, const std::vector<int64_t>& dims) {
    int64_t p = 1;
    for (int64_t d : dims) p *= t.sizes()[d];
    return p;
  };
  const int64_t nb = prod(a, lb), m = prod(a, lf), kk = prod(a, lc), n = prod(b, rf);
  std::vector<int64_t> a_order(lb), b_order(rb);
  a_order.insert(a_order.end(), lf.begin(), lf.end());
  a_order.insert(a_order.end(), lc.begin(), lc.end());
  b_order.insert(b_order.end(), rc.begin(), rc.end());
  b_order.insert(b_order.end(), rf.begin(), rf.end());
  if (o.numel() == 0) return Status::ok();
  const DType t = a.dtype(), ot = o.dtype();
  const uint8_t* ap = a.bytes();
  const uint8_t* bp = b.bytes();
  uint8_t* p = o.bytes();
  switch (domain(t)) {
    case Dom::f:
      dot_kernel<double>(
          a, b, a_order, b_order, nb, m, kk, n, [&](int64_t i) { return load_f(ap, t, i); },
          [&](int64_t i) { return load_f(bp, t, i); }, [&](int64_t i, double v) { store_f(p, ot, i, v); });
      return Status::ok();
    case Dom::i:
    case Dom::u:
      // Wrapping 64-bit products and sums give the exact low bits for every integer width.
      dot_kernel<uint64_t>(
          a, b, a_order, b_order, nb, m, kk, n, [&](int64_t i) { return load_bits(ap, t, i); },
          [&](int64_t i) { return load_bits(bp, t, i); }, [&](int64_t i, uint64_t v) { store_bits(p, ot, i, v); });
      return Status::ok();
    case Dom::c:
      dot_kernel<cplx>(
          a, b, a_order, b_order, nb, m, kk, n, [&](int64_t i) { return load_c(ap, t, i); },
          [&](int64_t i) { return load_c(bp, t, i); }, [&](int64_t i, cplx v) { store_c(p, ot, i, v); });
      return Status::ok();
  }
  return Status::ok();
}

}  // namespace rlx::ref::detail
