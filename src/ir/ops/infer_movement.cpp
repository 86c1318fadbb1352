// Type inference for movement ops: reshape, transpose, expand, slices, pad, concat, gather,
// scatter, embedding, split, squeeze, unsqueeze.
#include <algorithm>

#include "infer_util.h"
#include "rlx/checked.h"

namespace rlx::infer {
namespace {

Expected<Shape> reshape_shape(Op op, const NodeSig& sig, const Shape& in, std::vector<int64_t> target,
                              bool allowzero) {
  Shape out(target.size());
  int infer_at = -1;
  std::vector<bool> copied(in.size(), false);
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t t = target[i];
    if (t == -1) {
      if (infer_at >= 0) return fail(ErrorCode::shape_error, op, sig, "more than one -1 in shape");
      infer_at = static_cast<int>(i);
    } else if (t == 0 && !allowzero) {
      if (i >= in.size())
        return fail(ErrorCode::shape_error, op, sig, "0 at position ", i, " has no input dimension to copy");
      out[i] = in[i];
      copied[i] = true;
    } else if (t < 0) {
      return fail(ErrorCode::shape_error, op, sig, "invalid dimension ", t, " in shape");
    } else {
      out[i] = Dim(t);
    }
  }
  // Element count bookkeeping: static product and the symbols left over on each side.
  int64_t in_static = 1, out_static = 1;
  std::vector<std::string> in_syms, out_syms;
  bool in_unknown = false, out_unknown = false;
  for (size_t i = 0; i < in.size(); ++i) {
    if (copied[i]) continue;  // copied dims cancel
    if (in[i].is_static()) {
      auto m = checked_mul_i64(in_static, in[i].size());
      if (!m) return fail(ErrorCode::overflow, op, sig, "element count overflows");
      in_static = *m;
    } else if (in[i].is_symbol()) {
      in_syms.push_back(in[i].symbol_name());
    } else {
      in_unknown = true;
    }
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (static_cast<int>(i) == infer_at || (i < copied.size() && copied[i] && target[i] == 0 && !allowzero))
      continue;
    auto m = checked_mul_i64(out_static, out[i].size());
    if (!m) return fail(ErrorCode::overflow, op, sig, "element count overflows");
    out_static = *m;
  }
  (void)out_syms;
  (void)out_unknown;
  if (infer_at >= 0) {
    if (in_unknown || !in_syms.empty()) {
      if (in_syms.size() == 1 && !in_unknown && out_static == in_static) {
        out[infer_at] = Dim::symbol(in_syms[0]);
      } else {
        out[infer_at] = Dim::unknown();
      }
    } else {
      if (out_static == 0 || in_static % out_static != 0)
        return fail(ErrorCode::shape_error, op, sig, "cannot reshape ", shape_to_string(in), " to ",
                    sizes_to_string(target));
      out[infer_at] = Dim(in_static / out_static);
    }
  } else if (!in_unknown && in_syms.empty() && in_static != out_static) {
    return fail(ErrorCode::shape_error, op, sig, "cannot reshape ", shape_to_string(in), " (",
                in_static, " elements) to ", shape_to_string(out));
  }
  return out;
}

}  // namespace

Expected<Types> infer_movement(Op op, const NodeSig& sig) {
  const TensorType& x = sig.inputs[0];
  const Attrs& a = sig.attrs;
  const int rank = x.rank();
  switch (op) {
    case Op::Reshape: {
      RLX_ASSIGN_OR_RETURN(Shape s, reshape_shape(op, sig, x.shape, a.ints("shape"), a.i("allowzero", 0) != 0));
      return Types{TensorType{x.dtype, s}};
    }
    case Op::Transpose: {
      std::vector<int64_t> perm = a.ints("perm");
      if (!a.has("perm"))
        for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
      if (static_cast<int>(perm.size()) != rank)
        return fail(ErrorCode::shape_error, op, sig, "perm has ", perm.size(), " entries for rank ", rank);
      std::vector<bool> seen(rank, false);
      Shape s(rank);
      for (int i = 0; i < rank; ++i) {
        int64_t p = perm[i] < 0 ? perm[i] + rank : perm[i];
        if (p < 0 || p >= rank || seen[p])
          return fail(ErrorCode::shape_error, op, sig, "perm is not a permutation of 0..", rank - 1);
        seen[p] = true;
        s[i] = x.shape[p];
      }
      return Types{TensorType{x.dtype, s}};
    }
    case Op::Expand: {
      std::vector<int64_t> target = a.ints("shape");
      for (int64_t d : target)
        if (d < 0) return fail(ErrorCode::shape_error, op, sig, "negative dimension in shape");
      auto b = broadcast_shapes(x.shape, to_shape(target));
      if (!b) return std::move(b).take_status().with_context(where(op, sig));
      return Types{TensorType{x.dtype, *b}};
    }
    case Op::StridedSlice: {
      auto starts = a.ints("starts"), steps = a.ints("steps"), sizes = a.ints("sizes");
      if (static_cast<int>(starts.size()) != rank || steps.size() != starts.size() || sizes.size() != starts.size())
        return fail(ErrorCode::shape_error, op, sig, "starts, steps and sizes need one entry per axis (", rank, ")");
      for (int i = 0; i < rank; ++i) {
        if (sizes[i] < 0) return fail(ErrorCode::shape_error, op, sig, "negative size on axis ", i);
        if (steps[i] == 0) return fail(ErrorCode::shape_error, op, sig, "step 0 on axis ", i);
        if (sizes[i] == 0 || !x.shape[i].is_static()) continue;
        int64_t dim = x.shape[i].size();
        int64_t last = starts[i] + (sizes[i] - 1) * steps[i];
        if (starts[i] < 0 || starts[i] >= dim || last < 0 || last >= dim)
          return fail(ErrorCode::out_of_range, op, sig, "axis ", i, " reads outside [0, ", dim, ")");
      }
      return Types{TensorType{x.dtype, to_shape(sizes)}};
    }
    case Op::Slice: {
      auto starts = a.ints("starts"), ends = a.ints("ends"), axes = a.ints("axes"), steps = a.ints("steps");
      if (ends.size() != starts.size())
        return fail(ErrorCode::shape_error, op, sig, "starts and ends differ in length");
      if (axes.empty())
        for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
      if (steps.empty()) steps.assign(starts.size(), 1);
      if (axes.size() != starts.size() || steps.size() != starts.size())
        return fail(ErrorCode::shape_error, op, sig, "axes and steps must match starts in length");
      Shape s = x.shape;
      std::vector<bool> seen(rank, false);
      for (size_t k = 0; k < starts.size(); ++k) {
        auto ax = normalize_axis(axes[k], rank);
        if (!ax || rank == 0) return fail(ErrorCode::out_of_range, op, sig, "axis ", axes[k], " out of range");
        if (seen[*ax]) return fail(ErrorCode::shape_error, op, sig, "axis ", axes[k], " repeats");
        seen[*ax] = true;
        if (steps[k] == 0) return fail(ErrorCode::shape_error, op, sig, "step 0");
        if (!x.shape[*ax].is_static()) {
          s[*ax] = Dim::unknown();
          continue;
        }
        s[*ax] = Dim(resolve_slice_range(starts[k], ends[k], steps[k], x.shape[*ax].size()).size);
      }
      return Types{TensorType{x.dtype, s}};
    }
    case Op::Pad: {
      auto pads = a.ints("pads");
      if (static_cast<int>(pads.size()) != 2 * rank)
        return fail(ErrorCode::shape_error, op, sig, "pads needs ", 2 * rank, " entries, got ", pads.size());
      std::string mode = a.s("mode", "constant");
      if (mode != "constant" && mode != "reflect" && mode != "edge")
        return fail(ErrorCode::verify_error, op, sig, "mode must be constant, reflect or edge");
      Shape s = x.shape;
      for (int i = 0; i < rank; ++i) {
        if (!s[i].is_static()) {
          if (pads[i] != 0 || pads[i + rank] != 0) s[i] = Dim::unknown();
          continue;
        }
        int64_t n = s[i].size() + pads[i] + pads[i + rank];
        if (n < 0) return fail(ErrorCode::shape_error, op, sig, "pads make axis ", i, " negative");
        if (mode != "constant" && (pads[i] < 0 || pads[i + rank] < 0))
          return fail(ErrorCode::shape_error, op, sig, "negative pads need mode constant");
        if (mode == "reflect" && (pads[i] >= s[i].size() || pads[i + rank] >= s[i].size()) &&
            (pads[i] > 0 || pads[i + rank] > 0))
          return fail(ErrorCode::shape_error, op, sig, "reflect pad larger than axis ", i);
        s[i] = Dim(n);
      }
      return Types{TensorType{x.dtype, s}};
    }
    case Op::Concat: {
      auto ax = normalize_axis(a.i("axis"), rank);
      if (!ax || rank == 0) return fail(ErrorCode::out_of_range, op, sig, "axis ", a.i("axis"), " out of range");
      Shape s = x.shape;
      int64_t total = 0;
      bool static_axis = true;
      for (size_t k = 0; k < sig.inputs.size(); ++k) {
        const TensorType& t = sig.inputs[k];
        if (t.dtype != x.dtype) return fail(ErrorCode::dtype_error, op, sig, "inputs differ in dtype");
        if (t.rank() != rank) return fail(ErrorCode::shape_error, op, sig, "inputs differ in rank");
        for (int i = 0; i < rank; ++i) {
          if (i == *ax) continue;
          const Dim& d = t.shape[i];
          if (d != s[i] && !d.is_unknown() && !s[i].is_unknown())
            return fail(ErrorCode::shape_error, op, sig, "input ", k, " has ", shape_to_string(t.shape),
                        ", which differs from ", shape_to_string(x.shape), " off the concat axis");
        }
        if (t.shape[*ax].is_static()) {
          total += t.shape[*ax].size();
        } else {
          static_axis = false;
        }
      }
      s[*ax] = static_axis ? Dim(total) : (sig.inputs.size() == 1 ? x.shape[*ax] : Dim::unknown());
      return Types{TensorType{x.dtype, s}};
    }
    case Op::Gather:
    case Op::Embedding: {
      const TensorType& idx = sig.inputs[1];
      RLX_TRY(expect_int(op, sig, 1));
      int64_t axis_attr = op == Op::Embedding ? 0 : a.i("axis", 0);
      auto ax = normalize_axis(axis_attr, rank);
      if (!ax || rank == 0) return fail(ErrorCode::out_of_range, op, sig, "axis out of range for rank ", rank);
      if (op == Op::Embedding && rank != 2)
        return fail(ErrorCode::shape_error, op, sig, "table must be [vocab, dim], got ", shape_to_string(x.shape));
      Shape s(x.shape.begin(), x.shape.begin() + *ax);
      s.insert(s.end(), idx.shape.begin(), idx.shape.end());
      s.insert(s.end(), x.shape.begin() + *ax + 1, x.shape.end());
      return Types{TensorType{x.dtype, s}};
    }
    case Op::Scatter:
    case Op::ScatterAdd: {
      const TensorType& idx = sig.inputs[1];
      const TensorType& upd = sig.inputs[2];
      RLX_TRY(expect_int(op, sig, 1));
      RLX_TRY(expect_same_dtype(op, sig, 0, 2));
      auto ax = normalize_axis(a.i("axis", 0), rank);
      if (!ax || rank == 0) return fail(ErrorCode::out_of_range, op, sig, "axis out of range");
      const int64_t nb = a.i("batch_dims", 0);
      if (nb < 0 || nb > *ax || nb > idx.rank())
        return fail(ErrorCode::out_of_range, op, sig, "batch_dims ", nb, " must be in [0, min(axis, indices rank)]");
      for (int64_t d = 0; d < nb; ++d)
        if (idx.shape[d] != x.shape[d])
          return fail(ErrorCode::shape_error, op, sig, "indices ", shape_to_string(idx.shape), " and base ",
                      shape_to_string(x.shape), " differ in batch dim ", d);
      Shape want(x.shape.begin(), x.shape.begin() + *ax);
      want.insert(want.end(), idx.shape.begin() + nb, idx.shape.end());
      want.insert(want.end(), x.shape.begin() + *ax + 1, x.shape.end());
      if (want != upd.shape)
        return fail(ErrorCode::shape_error, op, sig, "updates must be ", shape_to_string(want), ", got ",
                    shape_to_string(upd.shape));
      return Types{x};
    }
    case Op::Split: {
      auto ax = normalize_axis(a.i("axis", 0), rank);
      if (!ax || rank == 0) return fail(ErrorCode::out_of_range, op, sig, "axis out of range");
      auto sizes = a.ints("sizes");
      if (sizes.empty()) return fail(ErrorCode::shape_error, op, sig, "sizes is empty");
      int64_t total = 0;
      Types out;
      for (int64_t n : sizes) {
        if (n < 0) return fail(ErrorCode::shape_error, op, sig, "negative split size");
        total += n;
        Shape s = x.shape;
        s[*ax] = Dim(n);
        out.push_back(TensorType{x.dtype, s});
      }
      if (x.shape[*ax].is_static() && total != x.shape[*ax].size())
        return fail(ErrorCode::shape_error, op, sig, "sizes sum to ", total, " but the axis has ",
                    x.shape[*ax].size());
      return out;
    }
    case Op::Squeeze: {
      auto axes = a.ints("axes");
      Shape s;
      if (axes.empty()) {
        for (const Dim& d : x.shape)
          if (!(d.is_static() && d.size() == 1)) s.push_back(d);
      } else {
        RLX_ASSIGN_OR_RETURN(auto ax, normalize_axes(op, sig, axes, rank, false));
        for (int i = 0; i < rank; ++i) {
          bool drop = std::find(ax.begin(), ax.end(), i) != ax.end();
          if (drop && x.shape[i].is_static() && x.shape[i].size() != 1)
            return fail(ErrorCode::shape_error, op, sig, "axis ", i, " has size ", x.shape[i].size(), ", not 1");
          if (!drop) s.push_back(x.shape[i]);
        }
      }
      return Types{TensorType{x.dtype, s}};
    }
    case Op::Unsqueeze: {
      int out_rank = rank + static_cast<int>(a.ints("axes").size());
      RLX_ASSIGN_OR_RETURN(auto ax, normalize_axes(op, sig, a.ints("axes"), out_rank, false));
      Shape s;
      int src = 0;
      for (int i = 0; i < out_rank; ++i) {
        if (std::find(ax.begin(), ax.end(), i) != ax.end()) {
          s.push_back(1);
        } else {
          s.push_back(x.shape[src++]);
        }
      }
      return Types{TensorType{x.dtype, s}};
    }
    default: break;
  }
  return fail(ErrorCode::internal, op, sig, "not a movement op");
}

}  // namespace rlx::infer

namespace rlx {

SliceRange resolve_slice_range(int64_t start, int64_t end, int64_t step, int64_t dim) {
  if (dim <= 0 || step == 0) return {0, 0};
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  int64_t size;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    size = end > start ? (end - start + step - 1) / step : 0;
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
    size = start > end ? (start - end + (-step) - 1) / (-step) : 0;
  }
  return {size == 0 ? 0 : start, size};
}

}  // namespace rlx
