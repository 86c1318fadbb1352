// Reference kernels of the movement primitives: reshape, transpose, expand, strided_slice,
// pad, concat, gather and scatter_add. Everything but scatter_add copies elements bit for bit.
#include <algorithm>

#include "backends/ref/interp_internal.h"

namespace rlx::ref::detail {
namespace {

// Copies out[i] = in[offset(i)] for an affine offset given by per-output-dim strides.
void copy_strided(const Tensor& x, Tensor& o, const Sizes& strides, int64_t base) {
  const ElemCopy copy(o.dtype());
  const uint8_t* xp = x.bytes();
  uint8_t* p = o.bytes();
  for_each_strided<1>(o.sizes(), {strides.data()}, {base},
                      [&](int64_t i, const std::array<int64_t, 1>& off) { copy(p, i, xp, off[0]); });
}

Status run_transpose(const KernelArgs& k) {
  const Tensor& x = *k.in[0];
  const int rank = x.rank();
  std::vector<int64_t> perm = k.node.attrs.ints("perm");
  if (!k.node.attrs.has("perm"))
    for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
  const Sizes cs = contiguous_strides(x.sizes());
  Sizes strides(rank);
  for (int i = 0; i < rank; ++i) strides[i] = cs[perm[i] < 0 ? perm[i] + rank : perm[i]];
  copy_strided(x, k.out[0], strides, 0);
  return Status::ok();
}

Status run_strided_slice(const KernelArgs& k) {
  const Tensor& x = *k.in[0];
  const auto starts = k.node.attrs.ints("starts"), steps = k.node.attrs.ints("steps");
  const Sizes cs = contiguous_strides(x.sizes());
  Sizes strides(x.rank());
  int64_t base = 0;
  for (int d = 0; d < x.rank(); ++d) {
    base += starts[d] * cs[d];
    strides[d] = steps[d] * cs[d];
  }
  if (k.out[0].numel() == 0) return Status::ok();  // starts need not be in range then
  copy_strided(x, k.out[0], strides, base);
  return Status::ok();
}

// Source coordinate of output coordinate `o` on one axis of size n, or -1 for padding.
int64_t pad_source(int64_t o, int64_t begin, int64_t n, int mode) {
  int64_t c = o - begin;
  if (mode == 0) return (c >= 0 && c < n) ? c : -1;
  if (mode == 2) return std::clamp<int64_t>(c, 0, n - 1);
  if (n == 1) return 0;  // reflect
  const int64_t period = 2 * (n - 1);
  c %= period;
  if (c < 0) c += period;
  return c >= n ? period - c : c;
}

Status run_pad(const KernelArgs& k) {
  const Tensor& x = *k.in[0];
  Tensor& o = k.out[0];
  const int rank = x.rank();
  const auto pads = k.node.attrs.ints("pads");
  const std::string mode_name = k.node.attrs.s("mode", "constant");
  const int mode = mode_name == "reflect" ? 1 : mode_name == "edge" ? 2 : 0;
  if (o.numel() == 0) return Status::ok();
  const Sizes cs = contiguous_strides(x.sizes());
  // Per axis: output coordinate -> source offset contribution, or -1 for padding.
  std::vector<std::vector<int64_t>> table(rank);
  for (int d = 0; d < rank; ++d) {
    const int64_t n = x.sizes()[d];
    if (mode != 0 && n == 0)
      return error(ErrorCode::shape_error, k.label, ": ", mode_name, " padding of the empty axis ", d);
    table[d].resize(o.sizes()[d]);
    for (int64_t i = 0; i < o.sizes()[d]; ++i) {
      const int64_t c = pad_source(i, pads[d], n, mode);
      table[d][i] = c < 0 ? -1 : c * cs[d];
    }
  }
  // The fill value, stored once in the output dtype.
  uint8_t fill[16] = {0};
  store_f(fill, o.dtype(), 0, k.node.attrs.f("value", 0.0));
  const ElemCopy copy(o.dtype());
  const uint8_t* xp = x.bytes();
  uint8_t* p = o.bytes();
  if (rank == 0) {
    copy(p, 0, xp, 0);
    return Status::ok();
  }
  const int64_t inner = o.sizes()[rank - 1];
  const int64_t rows = o.numel() / inner;
  std::vector<int64_t> coord(rank, 0);
  const std::vector<int64_t>& last = table[rank - 1];
  for (int64_t row = 0; row < rows; ++row) {
    int64_t base = 0;
    bool padded = false;
    for (int d = 0; d < rank - 1; ++d) {
      const int64_t t = table[d][coord[d]];
      if (t < 0) padded = true;
      base += t;
    }
    const int64_t o0 = row * inner;
    for (int64_t j = 0; j < inner; ++j) {
      if (padded || last[j] < 0) {
        copy(p, o0 + j, fill, 0);
      } else {
        copy(p, o0 + j, xp, base + last[j]);
      }
    }
    for (int d = rank - 2; d >= 0; --d) {
      if (++coord[d] < o.sizes()[d]) break;
      coord[d] = 0;
    }
  }
  return Status::ok();
}

Status run_concat(const KernelArgs& k) {
  Tensor& o = k.out[0];
  const int rank = o.rank();
  int64_t axis = k.node.attrs.i("axis");
  if (axis < 0) axis += rank;
  const Sizes ocs = contiguous_strides(o.sizes());
  const ElemCopy copy(o.dtype());
  uint8_t* p = o.bytes();
  int64_t at = 0;
  for (const Tensor* x : k.in) {
    const uint8_t* xp = x->bytes();
    for_each_strided<1>(x->sizes(), {ocs.data()}, {at * ocs[axis]},
                        [&](int64_t i, const std::array<int64_t, 1>& off) { copy(p, off[0], xp, i); });
    at += x->sizes()[axis];
  }
  return Status::ok();
}

// Resolves every index of `idx` against an axis of size n (n > 0): negative indices wrap once,
// then everything is clamped into [0, n - 1].
std::vector<int64_t> resolve_indices(const Tensor& idx, int64_t n) {
  std::vector<int64_t> r(static_cast<size_t>(idx.numel()));
  const bool sgn = is_signed_int(idx.dtype());
  for (int64_t j = 0; j < idx.numel(); ++j) {
    const uint64_t v = load_bits(idx.bytes(), idx.dtype(), j);
    int64_t i;
    if (sgn) {
      i = static_cast<int64_t>(v);
      if (i < 0) i = i < -n ? 0 : i + n;  // wraps once; what stays negative clamps to 0 below
    } else {
      i = v > static_cast<uint64_t>(n - 1) ? n - 1 : static_cast<int64_t>(v);
    }
    r[j] = std::clamp<int64_t>(i, 0, n - 1);
  }
  return r;
}

// The [outer, axis, inner] view of a tensor around `axis`.
struct AxisView {
  int64_t outer = 1, n = 1, inner = 1;
};
AxisView axis_view(const Sizes& s, int64_t axis) {
  AxisView v;
  for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d) {
    if (d < axis) v.outer *= s[d];
    if (d > axis) v.inner *= s[d];
  }
  v.n = s[axis];
  return v;
}

Status run_gather(const KernelArgs& k) {
  const Tensor& x = *k.in[0];
  const Tensor& idx = *k.in[1];
  Tensor& o = k.out[0];
  int64_t axis = k.node.attrs.i("axis", 0);
  if (axis < 0) axis += x.rank();
  if (o.numel() == 0) return Status::ok();
  const AxisView v = axis_view(x.sizes(), axis);
  if (v.n == 0)
    return error(ErrorCode::out_of_range, k.label, ": gather from the empty axis ", axis);
  const std::vector<int64_t> ids = resolve_indices(idx, v.n);
  const int64_t nj = static_cast<int64_t>(ids.size());
  const ElemCopy copy(o.dtype());
  for (int64_t po = 0; po < v.outer; ++po)
    for (int64_t j = 0; j < nj; ++j)
      copy.run(o.bytes(), (po * nj + j) * v.inner, x.bytes(), (po * v.n + ids[j]) * v.inner, v.inner);
  return Status::ok();
}

Status run_scatter_add(const KernelArgs& k) {
  const Tensor& base = *k.in[0];
  const Tensor& idx = *k.in[1];
  const Tensor& upd = *k.in[2];
  Tensor& o = k.out[0];
  int64_t axis = k.node.attrs.i("axis", 0);
  if (axis < 0) axis += base.rank();
  const AxisView v = axis_view(base.sizes(), axis);
  const int64_t nj = idx.numel();
  if (upd.numel() > 0 && v.n == 0)
    return error(ErrorCode::out_of_range, k.label, ": scatter_add into the empty axis ", axis);
  const std::vector<int64_t> ids = v.n > 0 ? resolve_indices(idx, v.n) : std::vector<int64_t>{};
  const DType t = o.dtype();
  const int64_t n = o.numel();
  // Accumulates in the wide domain type, then stores once.
  auto scatter = [&](auto& acc, auto load) {
    for (int64_t i = 0; i < n; ++i) acc[i] = load(base.bytes(), i);
    if (upd.numel() == 0) return;
    for (int64_t po = 0; po < v.outer; ++po)
      for (int64_t j = 0; j < nj; ++j) {
        const int64_t dst = (po * v.n + ids[j]) * v.inner;
        const int64_t src = (po * nj + j) * v.inner;
        for (int64_t q = 0; q < v.inner; ++q) acc[dst + q] += load(upd.bytes(), src + q);
      }
  };
  switch (domain(t)) {
    case Dom::f: {
      std::vector<double> acc(n);
      scatter(acc, [&](const uint8_t* p, int64_t i) { return load_f(p, t, i); });
      for (int64_t i = 0; i < n; ++i) store_f(o.bytes(), t, i, acc[i]);
      break;
    }
    case Dom::i:
    case Dom::u: {
      std::vector<uint64_t> acc(n);
      scatter(acc, [&](const uint8_t* p, int64_t i) { return load_bits(p, t, i); });
      for (int64_t i = 0; i < n; ++i) store_bits(o.bytes(), t, i, acc[i]);
      break;
    }
    case Dom::c: {
      std::vector<cplx> acc(n);
      scatter(acc, [&](const uint8_t* p, int64_t i) { return load_c(p, t, i); });
      for (int64_t i = 0; i < n; ++i) store_c(o.bytes(), t, i, acc[i]);
      break;
    }
  }
  return Status::ok();
}

// Assignment scatter: a bitwise copy of base, then each update copied to its slot in order
// (a repeated index keeps the last update).
Status run_scatter(const KernelArgs& k) {
  const Tensor& base = *k.in[0];
  const Tensor& idx = *k.in[1];
  const Tensor& upd = *k.in[2];
  Tensor& o = k.out[0];
  int64_t axis = k.node.attrs.i("axis", 0);
  if (axis < 0) axis += base.rank();
  // batch_dims nb: each of the leading batches scatters into its own sub-tensor with its own indices
  const int64_t nb = k.node.attrs.i("batch_dims", 0);
  const Sizes inner_sizes(base.sizes().begin() + nb, base.sizes().end());
  int64_t batches = 1;
  for (int64_t d = 0; d < nb; ++d) batches *= base.sizes()[d];
  const AxisView v = axis_view(inner_sizes, axis - nb);
  const int64_t nj = batches > 0 ? idx.numel() / batches : 0;
  if (upd.numel() > 0 && v.n == 0) return error(ErrorCode::out_of_range, k.label, ": scatter into the empty axis ", axis);
  const ElemCopy copy(o.dtype());
  for (int64_t i = 0; i < o.numel(); ++i) copy(o.bytes(), i, base.bytes(), i);
  if (upd.numel() == 0) return Status::ok();
  const std::vector<int64_t> ids = resolve_indices(idx, v.n);
  const int64_t base_per_batch = v.outer * v.n * v.inner, upd_per_batch = v.outer * nj * v.inner;
  for (int64_t pb = 0; pb < batches; ++pb)
    for (int64_t po = 0; po < v.outer; ++po)
      for (int64_t j = 0; j < nj; ++j) {
        const int64_t dst = pb * base_per_batch + (po * v.n + ids[pb * nj + j]) * v.inner;
        const int64_t src = pb * upd_per_batch + (po * nj + j) * v.inner;
        for (int64_t q = 0; q < v.inner; ++q) copy(o.bytes(), dst + q, upd.bytes(), src + q);
      }
  return Status::ok();
}

}  // namespace

Status run_movement(const KernelArgs& k) {
  const Tensor& x = *k.in[0];
  Tensor& o = k.out[0];
  switch (k.node.op) {
    case Op::Reshape:
      ElemCopy(o.dtype()).run(o.bytes(), 0, x.bytes(), 0, o.numel());
      return Status::ok();
    case Op::Transpose: return run_transpose(k);
    case Op::Expand: copy_strided(x, o, broadcast_strides(x.sizes(), o.sizes()), 0); return Status::ok();
    case Op::StridedSlice: return run_strided_slice(k);
    case Op::Pad: return run_pad(k);
    case Op::Concat: return run_concat(k);
    case Op::Gather: return run_gather(k);
    case Op::ScatterAdd: return run_scatter_add(k);
    case Op::Scatter: return run_scatter(k);
    default: break;
  }
  return error(ErrorCode::unsupported, k.label, ": the reference interpreter does not run ",
               op_name(k.node.op));
}

}  // namespace rlx::ref::detail
