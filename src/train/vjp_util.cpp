// Helpers shared by the vector-Jacobian rules.
#include <algorithm>

#include "vjp_internal.h"

namespace rlx::train::vjp {

Sizes sizes_of(const TensorType& t) {
  Sizes s;
  for (const Dim& d : t.shape) s.push_back(d.is_static() ? d.size() : -1);
  return s;
}

Sizes sizes_of(OpBuilder& o, ValueId v) { return sizes_of(o.type(v)); }

ValueId sum_to(OpBuilder& o, ValueId g, const Sizes& target) {
  if (!o.ok()) return kNoValue;
  const Sizes s = sizes_of(o, g);
  if (s == target) return g;
  const int r = static_cast<int>(s.size()), t = static_cast<int>(target.size());
  if (t > r) return o.fail(error(ErrorCode::internal, "gradient of shape ", sizes_to_string(s),
                                 " cannot be summed to ", sizes_to_string(target)));
  std::vector<int64_t> axes;
  for (int i = 0; i < r; ++i) {
    if (i < r - t) {
      axes.push_back(i);
    } else if (target[i - (r - t)] == 1 && s[i] != 1) {
      axes.push_back(i);
    }
  }
  // Summing leading axes of a float tensor ([rows, cols] with cols >= 16, e.g. a bias
  // gradient over the batch) is a row vector of ones times the matrix: the native GEMM reads
  // the rows contiguously, where a generated column reduction walks them with stride cols.
  bool leading = is_float(o.dtype(g)) && !axes.empty() && axes.size() == static_cast<size_t>(r - t);
  int64_t rows = 1, cols = 1;
  for (int i = 0; i < r; ++i) (i < r - t ? rows : cols) *= s[i];
  if (leading && cols >= 16 && rows > 1) {
    std::vector<double> ones(static_cast<size_t>(rows), 1.0);
    ValueId ov = o.constant(Tensor::from_f64(o.dtype(g), {rows}, ones));
    ValueId m = reshape_if(o, g, {rows, cols});
    return reshape_if(o, o.dot(ov, m, {}, {}, {0}, {0}), target);
  }
  ValueId v = g;
  if (!axes.empty()) v = o.reduce_sum(v, axes, true);
  return reshape_if(o, v, target);
}

ValueId reshape_if(OpBuilder& o, ValueId v, const Sizes& s) {
  if (!o.ok() || v == kNoValue) return kNoValue;
  if (o.shape(v) == to_shape(s)) return v;
  return o.reshape(v, std::vector<int64_t>(s));
}

ValueId zeros(OpBuilder& o, DType dt, const Sizes& s) {
  if (s.empty()) return o.scalar(0.0, dt);
  return o.mul(o.iota(dt, s, 0), o.scalar(0.0, dt));
}

ValueId unslice(OpBuilder& o, ValueId g, const Sizes& in, std::vector<int64_t> starts, std::vector<int64_t> steps,
                const Sizes& sizes) {
  if (!o.ok()) return kNoValue;
  const size_t r = in.size();
  const DType dt = o.dtype(g);
  for (int64_t s : sizes)
    if (s == 0) return zeros(o, dt, in);
  ValueId v = g;
  // negative steps: reverse those axes, then it is a positive-step slice from the lowest index
  {
    std::vector<int64_t> st(r, 0), sp(r, 1);
    bool any = false;
    for (size_t d = 0; d < r; ++d) {
      if (steps[d] < 0) {
        st[d] = sizes[d] - 1;
        sp[d] = -1;
        starts[d] += (sizes[d] - 1) * steps[d];
        steps[d] = -steps[d];
        any = true;
      }
    }
    if (any) v = o.strided_slice(v, st, sp, std::vector<int64_t>(sizes));
  }
  // interior zeros: [n] -> [n, 1] -> pad to [n, step] -> [n * step]
  Sizes extent = sizes;
  bool strided = false;
  for (size_t d = 0; d < r; ++d) strided |= steps[d] > 1 && sizes[d] > 1;
  if (strided) {
    std::vector<int64_t> split, merged;
    std::vector<int64_t> pb, pe;
    for (size_t d = 0; d < r; ++d) {
      split.push_back(sizes[d]);
      pb.push_back(0);
      pe.push_back(0);
      if (steps[d] > 1 && sizes[d] > 1) {
        split.push_back(1);
        pb.push_back(0);
        pe.push_back(steps[d] - 1);
        extent[d] = sizes[d] * steps[d];
      }
      merged.push_back(extent[d]);
    }
    v = o.reshape(v, split);
    std::vector<int64_t> pads = pb;
    pads.insert(pads.end(), pe.begin(), pe.end());
    v = o.pad(v, pads, 0.0);
    v = o.reshape(v, merged);
  }
  std::vector<int64_t> pads(2 * r, 0);
  bool any = false;
  for (size_t d = 0; d < r; ++d) {
    pads[d] = starts[d];
    pads[d + r] = in[d] - starts[d] - extent[d];
    any |= pads[d] != 0 || pads[d + r] != 0;
  }
  if (any) v = o.pad(v, pads, 0.0);
  return v;
}

std::vector<int64_t> norm_axes(std::vector<int64_t> axes, int rank) {
  if (axes.empty())
    for (int i = 0; i < rank; ++i) axes.push_back(i);
  for (int64_t& a : axes)
    if (a < 0) a += rank;
  std::sort(axes.begin(), axes.end());
  return axes;
}

Sizes keepdims_shape(const Sizes& in, const std::vector<int64_t>& axes) {
  Sizes s = in;
  for (int64_t a : axes) s[a] = 1;
  return s;
}

double count_over(const Sizes& in, const std::vector<int64_t>& axes) {
  double n = 1;
  for (int64_t a : axes) n *= static_cast<double>(in[a]);
  return n;
}

std::vector<int64_t> inverse_perm(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int64_t>(i);
  return inv;
}

ValueId transpose_if(OpBuilder& o, ValueId v, const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i)) return o.transpose(v, perm);
  return v;
}

}  // namespace rlx::train::vjp
