// ONNX movement and shape ops: Reshape, Transpose, Flatten, (Un)Squeeze, Concat, Slice, Split,
// Gather(Elements/ND), Scatter(Elements/ND), Expand, Tile, Pad, Shape, Size, Constant(OfShape),
// Range, Trilu, EyeLike, OneHot, Compress, DepthToSpace, SpaceToDepth. Shape-valued inputs must
// be known at import time; Shape of static dims folds to a constant.
#include <algorithm>
#include <cmath>

#include "onnx_internal.h"
#include "runtime/data_dependent.h"
#include "rlx/checked.h"

namespace rlx::onnx_import {
namespace {

Expected<Sizes> need_static(Importer& m, const TensorType& t, const char* what) {
  auto s = static_sizes(t.shape, what);
  if (!s) return m.fail(ErrorCode::unsupported, what, " ", shape_to_string(t.shape),
                        " must have static dims here (bind symbolic dims with --dims)");
  return s;
}

// Import-time tables (masks, offsets) are bounded so a declared huge shape cannot allocate.
Status bound(Importer& m, int64_t elems) {
  if (elems < 0 || elems > (int64_t{1} << 24))
    return m.fail(ErrorCode::unsupported, "would need an import-time table of ", elems, " elements (limit 2^24)");
  return Status::ok();
}

Status bound(Importer& m, const Sizes& s) {
  auto n = checked_numel(s);
  return bound(m, n ? *n : -1);
}

Tensor i64_tensor(const std::vector<int64_t>& v, Sizes sizes) {
  Tensor t = Tensor::zeros(DType::i64, std::move(sizes));
  for (size_t i = 0; i < v.size(); ++i) t.data<int64_t>()[i] = v[i];
  return t;
}

Status map_reshape(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  std::vector<int64_t> shape;
  if (m.opset < 5 || (!m.has(1) && m.has_attr("shape"))) {
    shape = m.aints("shape");
  } else {
    RLX_ASSIGN_OR_RETURN(auto dims, m.dims_in(1));
    // symbolic entries: the input's own dim at that position is copied (0); one other may be inferred (-1)
    const Shape& xs = m.o().shape(x);
    bool inferred = false;
    for (size_t k = 0; k < dims.size(); ++k) {
      if (dims[k].is_static()) {
        shape.push_back(dims[k].size());
      } else if (k < xs.size() && xs[k] == dims[k] && m.ai("allowzero", 0) == 0) {
        shape.push_back(0);
      } else if (!inferred) {
        shape.push_back(-1);
        inferred = true;
      } else {
        return m.fail(ErrorCode::unsupported, "shape ", shape_to_string(dims), " has more symbolic dims than rlx can infer");
      }
    }
    if (inferred)
      for (int64_t d : shape)
        if (d == -1 && std::count(shape.begin(), shape.end(), -1) > 1)
          return m.fail(ErrorCode::unsupported, "shape ", shape_to_string(dims), " has -1 and a symbolic dim");
  }
  return m.out(0, m.o().op(Op::Reshape, {x}, Attrs{{"shape", shape}, {"allowzero", m.ai("allowzero", 0)}}));
}

Status map_transpose(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  std::vector<int64_t> perm = m.aints("perm");
  if (perm.empty())
    for (int i = m.o().rank(x) - 1; i >= 0; --i) perm.push_back(i);
  return m.out(0, m.o().transpose(x, perm));
}

Status map_flatten(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  int r = m.o().rank(x);
  int64_t axis = m.ai("axis", 1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r) return m.fail(ErrorCode::out_of_range, "axis ", m.ai("axis", 1), " out of range for rank ", r);
  const Shape& s = m.o().shape(x);
  int64_t lead = 1, trail = 1;
  bool lead_static = true, trail_static = true;
  for (int i = 0; i < r; ++i) {
    int64_t& side = i < axis ? lead : trail;
    if (!s[i].is_static()) {
      (i < axis ? lead_static : trail_static) = false;
      continue;
    }
    auto prod = checked_mul_i64(side, s[i].size());
    if (!prod) return m.fail(ErrorCode::overflow, "element count of ", shape_to_string(s), " overflows");
    side = *prod;
  }
  std::vector<int64_t> shape;
  if (lead_static) shape = {lead, trail_static ? trail : -1};
  else if (trail_static) shape = {-1, trail};
  else return m.fail(ErrorCode::unsupported, "Flatten of ", shape_to_string(s), " needs static dims on one side");
  return m.out(0, m.o().reshape(x, shape));
}

Status map_squeeze(Importer& m, bool un) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  std::vector<int64_t> axes = m.aints("axes");
  if (m.has(1)) { RLX_ASSIGN_OR_RETURN(axes, m.ints(1)); }
  if (un) return m.out(0, m.o().op(Op::Unsqueeze, {x}, Attrs{{"axes", axes}}));
  return m.out(0, m.o().op(Op::Squeeze, {x}, Attrs{{"axes", axes}}));
}

Status map_concat(Importer& m) {
  std::vector<ValueId> xs;
  for (int i = 0; i < m.num_inputs(); ++i) {
    if (!m.has(i)) continue;
    RLX_ASSIGN_OR_RETURN(ValueId x, m.in(i));
    xs.push_back(x);
  }
  if (xs.empty()) return m.fail(ErrorCode::format_error, "needs at least one input");
  return m.out(0, m.o().concat(xs, m.ai("axis", 0)));
}

Status map_slice(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  std::vector<int64_t> starts, ends, axes, steps;
  if (m.opset < 10) {
    starts = m.aints("starts");
    ends = m.aints("ends");
    axes = m.aints("axes");
  } else {
    RLX_ASSIGN_OR_RETURN(starts, m.ints(1));
    RLX_ASSIGN_OR_RETURN(ends, m.ints(2));
    if (m.has(3)) { RLX_ASSIGN_OR_RETURN(axes, m.ints(3)); }
    if (m.has(4)) { RLX_ASSIGN_OR_RETURN(steps, m.ints(4)); }
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  // dims are at most 2^40, so clamping to +-2^62 keeps the meaning and rules out overflow
  const int64_t big = int64_t{1} << 62;
  for (auto* v : {&starts, &ends, &steps})
    for (int64_t& e : *v) e = std::clamp(e, -big, big);
  return m.out(0, m.o().slice(x, starts, ends, axes, steps));
}

Status map_split(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  int r = m.o().rank(x);
  RLX_ASSIGN_OR_RETURN(int axis, axis_of(m, m.ai("axis", 0), r));
  std::vector<int64_t> sizes = m.aints("split");
  if (m.has(1)) { RLX_ASSIGN_OR_RETURN(sizes, m.ints(1)); }
  if (m.has_attr("num_outputs")) {  // opset 18: chunks of ceil(size / n), the last one smaller
    if (!sizes.empty()) return m.fail(ErrorCode::invalid_argument, "num_outputs and split are both given");
    if (m.ai("num_outputs", 0) != m.num_outputs())
      return m.fail(ErrorCode::shape_error, "num_outputs is ", m.ai("num_outputs", 0), " but the node has ",
                    m.num_outputs(), " outputs");
  }
  if (sizes.empty()) {
    const Dim& d = m.o().shape(x)[axis];
    if (!d.is_static()) return m.fail(ErrorCode::unsupported, "an even split needs a static axis");
    int n = m.num_outputs();
    if (n <= 0) return m.fail(ErrorCode::format_error, "no outputs");
    int64_t each = (d.size() + n - 1) / n;
    int64_t left = d.size();
    for (int i = 0; i < n; ++i) {
      int64_t s = std::min(each, left);
      sizes.push_back(s);
      left -= s;
    }
  }
  for (int64_t sz : sizes)
    if (sz < 0 || sz > (int64_t{1} << 40)) return m.fail(ErrorCode::out_of_range, "split size ", sz, " out of range");
  if (static_cast<int>(sizes.size()) != m.num_outputs())
    return m.fail(ErrorCode::shape_error, "split has ", sizes.size(), " sizes for ", m.num_outputs(), " outputs");
  auto outs = m.o().split(x, axis, sizes);
  RLX_TRY(m.ok().with_context(m.where()));
  for (size_t i = 0; i < outs.size(); ++i) RLX_TRY(m.out(static_cast<int>(i), outs[i]));
  return Status::ok();
}

// Normalizes integer indices against `dim` (negative counts from the end), as i64.
ValueId norm_index(OpBuilder& o, ValueId idx, int64_t dim) {
  idx = o.cast(idx, DType::i64);
  ValueId d = o.scalar(static_cast<double>(dim), DType::i64);
  return o.where(o.binary(Op::Less, idx, o.scalar(0, DType::i64)), o.add(idx, d), idx);
}

Status map_gather(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId idx, m.in(1));
  // Constant indices are checked here: ONNX makes an index outside [-n, n) an error, and rlx's
  // gather clamps (what a run-time index that is out of range gets on every device).
  const TensorType& xt = m.o().type(x);
  const int64_t axis = m.ai("axis", 0);
  const int rank = static_cast<int>(xt.shape.size());
  if (m.is_konst(1) && axis >= -rank && axis < rank && xt.shape[axis < 0 ? axis + rank : axis].is_static()) {
    const int64_t n = xt.shape[axis < 0 ? axis + rank : axis].size();
    RLX_ASSIGN_OR_RETURN(Tensor k, m.konst(1));
    for (int64_t i = 0; i < k.numel(); ++i) {
      const double v = k.get_f64(i);
      if (v < static_cast<double>(-n) || v >= static_cast<double>(n))
        return m.fail(ErrorCode::out_of_range, "index ", static_cast<int64_t>(v), " (entry ", i, " of indices) is outside [", -n,
                      ", ", n, ") on axis ", axis);
    }
  }
  return m.out(0, m.o().gather(x, m.o().cast(idx, DType::i64), axis));
}

// Flat offsets into data (row-major over data's shape) of every position of `ishape`, leaving
// out axis `skip` (or none when skip < 0).
Tensor base_offsets(const Sizes& ishape, const Sizes& dshape, int skip) {
  Sizes dstr = contiguous_strides(dshape);
  Tensor t = Tensor::zeros(DType::i64, ishape);
  int64_t n = numel(ishape);
  Sizes pos(ishape.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t off = 0;
    for (size_t j = 0; j < ishape.size(); ++j)
      if (static_cast<int>(j) != skip) off += pos[j] * dstr[j];
    t.data<int64_t>()[k] = off;
    for (int j = static_cast<int>(ishape.size()) - 1; j >= 0; --j) {
      if (++pos[j] < ishape[j]) break;
      pos[j] = 0;
    }
  }
  return t;
}

Status map_gather_elements(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId idx, m.in(1));
  OpBuilder& o = m.o();
  RLX_ASSIGN_OR_RETURN(Sizes ds, need_static(m, o.type(x), "data"));
  RLX_ASSIGN_OR_RETURN(Sizes is, need_static(m, o.type(idx), "indices"));
  if (ds.size() != is.size()) return m.fail(ErrorCode::shape_error, "data and indices differ in rank");
  RLX_TRY(bound(m, is));
  RLX_ASSIGN_OR_RETURN(int axis, axis_of(m, m.ai("axis", 0), static_cast<int>(ds.size())));
  Sizes dstr = contiguous_strides(ds);
  ValueId flat = o.add(m.c(base_offsets(is, ds, axis)),
                       o.mul(norm_index(o, idx, ds[axis]), o.scalar(static_cast<double>(dstr[axis]), DType::i64)));
  ValueId xf = o.reshape(x, {-1});
  return m.out(0, o.gather(xf, flat, 0));
}

// Element k of an integer index tensor as int64 (u64 past int64 saturates: it is out of range
// for any dim anyway).
int64_t index_at(const Tensor& t, int64_t k) {
  if (t.dtype() == DType::i64) return t.data<int64_t>()[k];
  const double v = t.get_f64(k);
  return v >= 9.2233720368547758e18 ? INT64_MAX : static_cast<int64_t>(v);
}

// ScatterElements / ScatterND with reduction max, min or mul (opsets 16 and 18), for indices
// known at import: each destination row's updates are gathered into a row of K (padded with
// the reduction's identity), reduced, and combined with the data. `dest` holds each update
// row's destination row; data_rows is [R, rest...] and upd_rows [U, rest...].
Expected<ValueId> scatter_reduce_known(Importer& m, ValueId data_rows, int64_t rows, const std::vector<int64_t>& dest,
                                       ValueId upd_rows, const std::string& red) {
  OpBuilder& o = m.o();
  const int64_t U = static_cast<int64_t>(dest.size());
  RLX_TRY(bound(m, rows));
  std::vector<int64_t> count(static_cast<size_t>(rows), 0);
  int64_t K = 0;
  for (int64_t d : dest) {
    if (d < 0 || d >= rows) return m.fail(ErrorCode::out_of_range, "an index points outside the data");
    K = std::max(K, ++count[d]);
  }
  if (K == 0) return o.reshape(data_rows, std::vector<int64_t>(o.rank(data_rows), 0));
  RLX_TRY(bound(m, K > (int64_t{1} << 24) / std::max<int64_t>(rows, 1) ? -1 : rows * K));
  std::vector<int64_t> table(static_cast<size_t>(rows * K), U);  // U: the identity row
  std::fill(count.begin(), count.end(), 0);
  for (int64_t u = 0; u < U; ++u) table[dest[u] * K + count[dest[u]]++] = u;
  const DType dt = o.dtype(upd_rows);
  const double lowest = is_float(dt) ? -INFINITY : -std::ldexp(1.0, dtype_bits(dt) - 1);
  const double highest = is_float(dt) ? INFINITY : std::ldexp(1.0, dtype_bits(dt) - (is_unsigned_int(dt) ? 0 : 1)) - 1;
  const double identity = red == "max" ? lowest : red == "min" ? highest : 1.0;
  Sizes one{1};
  for (int i = 1; i < o.rank(upd_rows); ++i) one.push_back(o.shape(upd_rows)[i].size());
  ValueId ext = o.concat({upd_rows, o.full(identity, dt, one)}, 0);
  ValueId g = o.gather(ext, m.c(i64_tensor(table, {rows, K})), 0);
  const Op rop = red == "max" ? Op::ReduceMax : red == "min" ? Op::ReduceMin : Op::ReduceProd;
  ValueId r = o.reduce(rop, g, {1}, false);
  return red == "max" ? o.max(data_rows, r) : red == "min" ? o.min(data_rows, r) : o.mul(data_rows, r);
}

// The same for indices known only at run time (rlx has scatter and scatter_add primitives, no
// scatter-mul/max/min): every update row is compared with every destination row, the updates
// of the rows they hit kept and the others replaced by the reduction's identity, then reduced
// over the updates: U x R x rest elements, bounded. `dest` [U] holds each update row's
// destination row, clamped into [0, R) as rlx's scatter_add clamps an index out of range.
Expected<ValueId> scatter_reduce_runtime(Importer& m, ValueId data_rows, int64_t rows, ValueId dest, ValueId upd_rows,
                                         const std::string& red) {
  OpBuilder& o = m.o();
  RLX_ASSIGN_OR_RETURN(Sizes us, need_static(m, o.type(upd_rows), "updates"));
  const int64_t U = us[0];
  const int64_t rest = numel(Sizes(us.begin() + 1, us.end()));
  if (U == 0) return o.reshape(data_rows, std::vector<int64_t>(o.rank(data_rows), 0));
  constexpr int64_t kMaxCompared = int64_t{1} << 24;
  if (rows > kMaxCompared / U || rows * U > kMaxCompared / std::max<int64_t>(rest, 1))
    return m.fail(ErrorCode::unsupported, "reduction '", red, "' over indices known only at run time compares ", U,
                  " update rows with ", rows, " data rows of ", rest, " elements, over rlx's 2^24 (no scatter-", red,
                  " primitive; give the indices at import to scatter them directly)");
  const DType dt = o.dtype(upd_rows);
  const double lowest = is_float(dt) ? -INFINITY : -std::ldexp(1.0, dtype_bits(dt) - 1);
  const double highest = is_float(dt) ? INFINITY : std::ldexp(1.0, dtype_bits(dt) - (is_unsigned_int(dt) ? 0 : 1)) - 1;
  const double identity = red == "max" ? lowest : red == "min" ? highest : 1.0;
  ValueId d = o.reshape(o.cast(dest, DType::i64), {U, 1});
  d = o.min(o.max(d, o.scalar(0, DType::i64)), o.scalar(static_cast<double>(rows - 1), DType::i64));
  std::vector<int64_t> hit_shape{U, rows}, upd_shape{U, 1};
  for (size_t i = 1; i < us.size(); ++i) {
    hit_shape.push_back(1);
    upd_shape.push_back(us[i]);
  }
  ValueId hit = o.reshape(o.binary(Op::Equal, d, o.iota(DType::i64, {1, rows}, 1)), hit_shape);
  ValueId kept = o.where(hit, o.reshape(upd_rows, upd_shape), o.scalar(identity, dt));
  const Op rop = red == "max" ? Op::ReduceMax : red == "min" ? Op::ReduceMin : Op::ReduceProd;
  ValueId r = o.reduce(rop, kept, {0}, false);
  return red == "max" ? o.max(data_rows, r) : red == "min" ? o.min(data_rows, r) : o.mul(data_rows, r);
}

// The reduction a Scatter node names, refused where the opset does not define it.
Expected<std::string> scatter_reduction(Importer& m) {
  std::string red = m.as("reduction", "none");
  const bool known = red == "none" || red == "add" || (red == "mul" && m.opset >= 16) ||
                     ((red == "max" || red == "min") && m.opset >= 18);
  if (!known) return m.fail(ErrorCode::unsupported, "reduction '", red, "' at opset ", m.opset);
  return red;
}

Status map_scatter_elements(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId idx, m.in(1));
  RLX_ASSIGN_OR_RETURN(ValueId upd, m.in(2));
  OpBuilder& o = m.o();
  RLX_ASSIGN_OR_RETURN(std::string red, scatter_reduction(m));
  const Op op = red == "none" ? Op::Scatter : Op::ScatterAdd;
  RLX_ASSIGN_OR_RETURN(Sizes ds, need_static(m, o.type(x), "data"));
  RLX_ASSIGN_OR_RETURN(Sizes is, need_static(m, o.type(idx), "indices"));
  if (ds.size() != is.size()) return m.fail(ErrorCode::shape_error, "data and indices differ in rank");
  RLX_TRY(bound(m, is));
  RLX_ASSIGN_OR_RETURN(int axis, axis_of(m, m.ai("axis", 0), static_cast<int>(ds.size())));
  Sizes dstr = contiguous_strides(ds);
  if (red != "none" && red != "add" && m.is_konst(1)) {
    RLX_ASSIGN_OR_RETURN(auto iv, m.konst(1));
    Tensor base = base_offsets(is, ds, axis);
    std::vector<int64_t> dest(static_cast<size_t>(iv.numel()));
    for (int64_t u = 0; u < iv.numel(); ++u) {
      const int64_t i = index_at(iv, u);
      if (i < -ds[axis] || i >= ds[axis]) return m.fail(ErrorCode::out_of_range, "index ", i, " is out of range");
      dest[u] = base.data<int64_t>()[u] + (i < 0 ? i + ds[axis] : i) * dstr[axis];
    }
    RLX_ASSIGN_OR_RETURN(ValueId r, scatter_reduce_known(m, o.reshape(x, {-1}), numel(ds), dest, o.reshape(upd, {-1}), red));
    return m.out(0, o.reshape(r, std::vector<int64_t>(ds.begin(), ds.end())));
  }
  // an index out of range along the axis is clamped into it before it is flattened
  ValueId along = o.min(o.max(norm_index(o, idx, ds[axis]), o.scalar(0, DType::i64)),
                        o.scalar(static_cast<double>(ds[axis] - 1), DType::i64));
  ValueId flat = o.add(m.c(base_offsets(is, ds, axis)), o.mul(along, o.scalar(static_cast<double>(dstr[axis]), DType::i64)));
  if (red != "none" && red != "add") {
    RLX_ASSIGN_OR_RETURN(ValueId r, scatter_reduce_runtime(m, o.reshape(x, {-1}), numel(ds), o.reshape(flat, {-1}),
                                                           o.reshape(upd, {-1}), red));
    return m.out(0, o.reshape(r, std::vector<int64_t>(ds.begin(), ds.end())));
  }
  ValueId r = o.op(op, {o.reshape(x, {-1}), o.reshape(flat, {-1}), o.reshape(upd, {-1})}, Attrs{{"axis", int64_t{0}}});
  return m.out(0, o.reshape(r, std::vector<int64_t>(ds.begin(), ds.end())));
}

// GatherND / ScatterND: flat row index over the first k data dims (after batch dims).
Expected<ValueId> nd_rows(Importer& m, ValueId idx, const Sizes& ds, const Sizes& is, int64_t batch, int64_t& rows,
                          Sizes& rest) {
  OpBuilder& o = m.o();
  int64_t k = is.back();
  if (batch < 0 || batch >= static_cast<int64_t>(is.size()) || batch >= static_cast<int64_t>(ds.size()))
    return m.fail(ErrorCode::out_of_range, "batch_dims ", batch, " out of range");
  for (int64_t b = 0; b < batch; ++b)
    if (ds[b] != is[b]) return m.fail(ErrorCode::shape_error, "batch dim ", b, " differs between data and indices");
  if (k < 1 || k > static_cast<int64_t>(ds.size()) || batch + k > static_cast<int64_t>(ds.size()))
    return m.fail(ErrorCode::shape_error, "index depth ", k, " does not fit data of rank ", ds.size());
  if (!checked_numel(ds)) return m.fail(ErrorCode::overflow, "data element count overflows");
  Sizes inner(ds.begin() + batch, ds.begin() + batch + k);
  Sizes istr = contiguous_strides(inner);
  int64_t inner_n = numel(inner);
  std::vector<int64_t> strides(istr.begin(), istr.end());
  ValueId cols = o.cast(idx, DType::i64);
  // negative indices count from the end of each dim
  std::vector<int64_t> dims(inner.begin(), inner.end());
  ValueId dimc = m.c(i64_tensor(dims, {k}));
  cols = o.where(o.binary(Op::Less, cols, o.scalar(0, DType::i64)), o.add(cols, dimc), cols);
  ValueId lin = o.reduce_sum(o.mul(cols, m.c(i64_tensor(strides, {k}))), {-1}, false);
  // batch offsets: each batch position's row block
  int64_t bn = 1;
  for (int64_t b = 0; b < batch; ++b) bn *= ds[b];
  Sizes ishape(is.begin(), is.end() - 1);
  if (batch > 0) {
    Tensor base = Tensor::zeros(DType::i64, ishape);
    int64_t per_batch = numel(ishape) / std::max<int64_t>(bn, 1);
    for (int64_t q = 0; q < numel(ishape); ++q) base.data<int64_t>()[q] = (q / std::max<int64_t>(per_batch, 1)) * inner_n;
    lin = o.add(lin, m.c(base));
  }
  rows = bn * inner_n;
  rest.assign(ds.begin() + batch + k, ds.end());
  return lin;
}

Status map_gather_nd(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId idx, m.in(1));
  OpBuilder& o = m.o();
  RLX_ASSIGN_OR_RETURN(Sizes ds, need_static(m, o.type(x), "data"));
  const int64_t batch = m.ai("batch_dims", 0);
  Sizes is;
  if (batch == 0) {
    // without batch dims only the index depth must be known: the tuples' count may be symbolic
    // (PyTorch's x[mask] exports GatherND of NonZero's transposed output)
    const Shape& sh = o.shape(idx);
    if (sh.empty()) return m.fail(ErrorCode::shape_error, "indices must have rank >= 1");
    if (!sh.back().is_static()) return m.fail(ErrorCode::shape_error, "indices' last dim (the index depth) must be static");
    for (const Dim& d : sh) is.push_back(d.is_static() ? d.size() : -1);
  } else {
    RLX_ASSIGN_OR_RETURN(is, need_static(m, o.type(idx), "indices"));
    if (is.empty()) return m.fail(ErrorCode::shape_error, "indices must have rank >= 1");
    RLX_TRY(bound(m, is));
  }
  int64_t rows;
  Sizes rest;
  RLX_ASSIGN_OR_RETURN(ValueId lin, nd_rows(m, idx, ds, is, batch, rows, rest));
  std::vector<int64_t> flat_shape{rows};
  flat_shape.insert(flat_shape.end(), rest.begin(), rest.end());
  return m.out(0, o.gather(o.reshape(x, flat_shape), lin, 0));
}

Status map_scatter_nd(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  RLX_ASSIGN_OR_RETURN(ValueId idx, m.in(1));
  RLX_ASSIGN_OR_RETURN(ValueId upd, m.in(2));
  OpBuilder& o = m.o();
  RLX_ASSIGN_OR_RETURN(std::string red, scatter_reduction(m));
  const Op op = red == "none" ? Op::Scatter : Op::ScatterAdd;
  RLX_ASSIGN_OR_RETURN(Sizes ds, need_static(m, o.type(x), "data"));
  RLX_ASSIGN_OR_RETURN(Sizes is, need_static(m, o.type(idx), "indices"));
  if (is.empty()) return m.fail(ErrorCode::shape_error, "indices must have rank >= 1");
  RLX_TRY(bound(m, is));
  int64_t rows;
  Sizes rest;
  RLX_ASSIGN_OR_RETURN(ValueId lin, nd_rows(m, idx, ds, is, 0, rows, rest));
  std::vector<int64_t> flat_shape{rows}, upd_shape{-1};
  flat_shape.insert(flat_shape.end(), rest.begin(), rest.end());
  upd_shape.insert(upd_shape.end(), rest.begin(), rest.end());
  if (red != "none" && red != "add" && !m.is_konst(1)) {
    RLX_ASSIGN_OR_RETURN(ValueId r, scatter_reduce_runtime(m, o.reshape(x, flat_shape), rows, o.reshape(lin, {-1}),
                                                           o.reshape(upd, upd_shape), red));
    return m.out(0, o.reshape(r, std::vector<int64_t>(ds.begin(), ds.end())));
  }
  if (red != "none" && red != "add") {
    // the destination rows on the host: the index tuples' row-major offsets over the first k dims
    RLX_ASSIGN_OR_RETURN(auto iv, m.konst(1));
    const int64_t k = is.back(), n = iv.numel() / std::max<int64_t>(k, 1);
    Sizes inner(ds.begin(), ds.begin() + k);
    Sizes istr = contiguous_strides(inner);
    std::vector<int64_t> dest(static_cast<size_t>(n));
    for (int64_t u = 0; u < n; ++u) {
      int64_t off = 0;
      for (int64_t j = 0; j < k; ++j) {
        const int64_t i = index_at(iv, u * k + j);
        if (i < -inner[j] || i >= inner[j]) return m.fail(ErrorCode::out_of_range, "index ", i, " is out of range");
        off += (i < 0 ? i + inner[j] : i) * istr[j];
      }
      dest[u] = off;
    }
    RLX_ASSIGN_OR_RETURN(ValueId r, scatter_reduce_known(m, o.reshape(x, flat_shape), rows, dest, o.reshape(upd, upd_shape), red));
    return m.out(0, o.reshape(r, std::vector<int64_t>(ds.begin(), ds.end())));
  }
  ValueId r = o.op(op, {o.reshape(x, flat_shape), o.reshape(lin, {-1}), o.reshape(upd, upd_shape)}, Attrs{{"axis", int64_t{0}}});
  return m.out(0, o.reshape(r, std::vector<int64_t>(ds.begin(), ds.end())));
}

// CenterCropPad (opset 18): each named axis (all by default) cropped or zero-padded to its
// target size about its centre; an odd difference leaves the extra element at the end.
Status map_center_crop_pad(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  RLX_ASSIGN_OR_RETURN(auto target, m.ints(1));
  OpBuilder& o = m.o();
  RLX_ASSIGN_OR_RETURN(Sizes xs, need_static(m, m.type(0), "input"));
  const int r = static_cast<int>(xs.size());
  std::vector<int64_t> axes = m.aints("axes");
  if (axes.empty())
    for (int i = 0; i < r; ++i) axes.push_back(i);
  if (target.size() != axes.size())
    return m.fail(ErrorCode::shape_error, "shape has ", target.size(), " entries for ", axes.size(), " axes");
  std::vector<int64_t> pads(2 * static_cast<size_t>(r), 0), starts, ends, slice_axes;
  for (size_t i = 0; i < axes.size(); ++i) {
    RLX_ASSIGN_OR_RETURN(int a, axis_of(m, axes[i], r));
    const int64_t n = xs[a], t = target[i];
    if (t < 0 || t > (int64_t{1} << 40)) return m.fail(ErrorCode::out_of_range, "target size ", t);
    if (t < n) {
      starts.push_back((n - t) / 2);
      ends.push_back((n - t) / 2 + t);
      slice_axes.push_back(a);
    } else if (t > n) {
      pads[a] = (t - n) / 2;
      pads[a + r] = t - n - (t - n) / 2;
    }
  }
  ValueId y = slice_axes.empty() ? x : o.slice(x, starts, ends, slice_axes);
  bool any_pad = false;
  for (int64_t p : pads) any_pad |= p != 0;
  if (any_pad) y = o.pad(y, pads, 0.0);
  if (y == x) y = o.reshape(x, std::vector<int64_t>(r, 0));
  return m.out(0, y);
}

// Col2Im (opset 18): columns [N, C * prod(block), L] summed back into an image [N, C, H, W],
// the inverse of im2col: a scatter-add of every column element into the padded image at a
// position computed at import, then a crop of the padding.
Status map_col2im(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  RLX_ASSIGN_OR_RETURN(auto image, m.ints(1));
  RLX_ASSIGN_OR_RETURN(auto block, m.ints(2));
  OpBuilder& o = m.o();
  RLX_ASSIGN_OR_RETURN(Sizes xs, need_static(m, m.type(0), "input"));
  const size_t nd = image.size();
  if (nd != 2 || block.size() != 2) return m.fail(ErrorCode::unsupported, "only 2-D images are supported");
  if (xs.size() != 3) return m.fail(ErrorCode::shape_error, "input must be [N, C * prod(block_shape), L]");
  std::vector<int64_t> dil = m.aints("dilations", {1, 1}), str = m.aints("strides", {1, 1}), pads = m.aints("pads", {0, 0, 0, 0});
  if (dil.size() != 2 || str.size() != 2 || pads.size() != 4)
    return m.fail(ErrorCode::shape_error, "dilations and strides need 2 entries, pads 4");
  int64_t kk = 1, L = 1;
  int64_t padded[2], count[2];
  for (size_t i = 0; i < 2; ++i) {
    const int64_t lim = int64_t{1} << 20;  // keeps every product below in int64
    if (image[i] < 1 || block[i] < 1 || dil[i] < 1 || str[i] < 1 || pads[i] < 0 || pads[i + 2] < 0 ||
        image[i] > lim || block[i] > lim || dil[i] > lim || str[i] > lim || pads[i] > lim || pads[i + 2] > lim)
      return m.fail(ErrorCode::invalid_argument, "image, block, dilations and strides must be in [1, 2^20], pads in [0, 2^20]");
    padded[i] = image[i] + pads[i] + pads[i + 2];
    const int64_t span = dil[i] * (block[i] - 1) + 1;
    count[i] = padded[i] >= span ? (padded[i] - span) / str[i] + 1 : 0;
    kk *= block[i];
    L *= count[i];
  }
  if (xs[1] % kk != 0 || xs[2] != L)
    return m.fail(ErrorCode::shape_error, "input ", sizes_to_string(xs), " does not match ", L, " blocks of ", kk,
                  " elements per channel");
  const int64_t N = xs[0], C = xs[1] / kk, P = padded[0] * padded[1];
  RLX_TRY(bound(m, kk * L));  // no overflow: kk * L <= the input's element count (L == xs[2])
  // destination of column element (k, l): block offset k = (bi, bj), block position l = (li, lj)
  std::vector<int64_t> dest(static_cast<size_t>(kk * L));
  for (int64_t k = 0; k < kk; ++k)
    for (int64_t l = 0; l < L; ++l) {
      const int64_t bi = k / block[1], bj = k % block[1], li = l / count[1], lj = l % count[1];
      dest[k * L + l] = (li * str[0] + bi * dil[0]) * padded[1] + lj * str[1] + bj * dil[1];
    }
  ValueId cols = o.reshape(x, {N, C, kk * L});
  ValueId idx = m.c(i64_tensor(dest, {kk * L}));  // updates: data's dims with axis 2 replaced by idx's
  ValueId img = o.op(Op::ScatterAdd, {o.full(0, o.dtype(x), {N, C, P}), idx, cols}, Attrs{{"axis", int64_t{2}}});
  img = o.reshape(img, {N, C, padded[0], padded[1]});
  img = o.slice(img, {pads[0], pads[1]}, {pads[0] + image[0], pads[1] + image[1]}, {2, 3});
  return m.out(0, img);
}

Status map_expand(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  RLX_ASSIGN_OR_RETURN(auto shape, m.dims_in(1));
  OpBuilder& o = m.o();
  // ONNX Expand broadcasts both ways: the target may be shorter or hold 1 where x is larger
  auto b = broadcast_shapes(o.shape(x), shape);
  if (!b) return b.status().with_context(m.where());
  std::vector<int64_t> target;
  int r = static_cast<int>(b->size()), xr = o.rank(x);
  for (int i = 0; i < r; ++i) {
    const Dim& d = (*b)[i];
    if (d.is_static()) target.push_back(d.size());
    else {
      int xi = i - (r - xr);
      if (xi < 0 || o.shape(x)[xi] != d) return m.fail(ErrorCode::unsupported, "Expand to a symbolic dim");
      target.push_back(1);  // symbolic dim of x kept: broadcast against 1
    }
  }
  return m.out(0, o.expand(x, target));
}

Status map_tile(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  RLX_ASSIGN_OR_RETURN(auto reps, m.ints(1));
  OpBuilder& o = m.o();
  RLX_ASSIGN_OR_RETURN(Sizes s, need_static(m, o.type(x), "input"));
  if (reps.size() != s.size()) return m.fail(ErrorCode::shape_error, "repeats has ", reps.size(), " entries for rank ", s.size());
  std::vector<int64_t> inter, big, out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (reps[i] < 0) return m.fail(ErrorCode::shape_error, "negative repeat");
    auto prod = checked_mul_i64(reps[i], s[i]);
    if (!prod || *prod > (int64_t{1} << 40)) return m.fail(ErrorCode::overflow, "tiled axis ", i, " is too large");
    inter.push_back(1);
    inter.push_back(s[i]);
    big.push_back(reps[i]);
    big.push_back(s[i]);
    out.push_back(reps[i] * s[i]);
  }
  return m.out(0, o.reshape(o.expand(o.reshape(x, inter), big), out));
}

Status map_pad(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  std::vector<int64_t> pads;
  double value = 0;
  if (m.opset < 11) {
    pads = m.aints("pads");
    value = m.af("value", 0.0);
  } else {
    RLX_ASSIGN_OR_RETURN(pads, m.ints(1));
    if (m.has(2)) {
      RLX_ASSIGN_OR_RETURN(auto v, m.floats(2));
      if (!v.empty()) value = v[0];
    }
    if (m.has(3)) {  // opset 18: pads name only these axes (begins, then ends)
      RLX_ASSIGN_OR_RETURN(auto axes, m.ints(3));
      const int r = m.o().rank(x);
      if (pads.size() != 2 * axes.size())
        return m.fail(ErrorCode::shape_error, "pads has ", pads.size(), " entries for ", axes.size(), " axes");
      std::vector<int64_t> full(2 * static_cast<size_t>(r), 0);
      std::vector<bool> seen(r, false);
      for (size_t i = 0; i < axes.size(); ++i) {
        RLX_ASSIGN_OR_RETURN(int a, axis_of(m, axes[i], r));
        if (seen[a]) return m.fail(ErrorCode::invalid_argument, "axes repeats axis ", axes[i]);
        seen[a] = true;
        full[a] = pads[i];
        full[a + r] = pads[i + axes.size()];
      }
      pads = full;
    }
  }
  for (int64_t p : pads)
    if (p < -(int64_t{1} << 40) || p > (int64_t{1} << 40)) return m.fail(ErrorCode::out_of_range, "pad ", p, " out of range");
  std::string mode = m.as("mode", "constant");
  if (mode == "wrap" && m.opset >= 19) {
    // output position j of an axis reads input (j - begin) mod n: a gather per padded axis
    OpBuilder& o = m.o();
    RLX_ASSIGN_OR_RETURN(Sizes xs, need_static(m, m.type(0), "input"));
    const int r = static_cast<int>(xs.size());
    if (pads.size() != 2 * xs.size()) return m.fail(ErrorCode::shape_error, "pads needs ", 2 * r, " entries");
    ValueId y = x;
    for (int a = 0; a < r; ++a) {
      const int64_t n = xs[a], b = pads[a], e = pads[a + r], len = n + b + e;
      if (b == 0 && e == 0) continue;
      if (n == 0 || len < 0) return m.fail(ErrorCode::shape_error, "wrap padding of axis ", a, " of size ", n);
      RLX_TRY(bound(m, len));  // the index table
      std::vector<int64_t> idx(static_cast<size_t>(len));
      for (int64_t j = 0; j < len; ++j) idx[j] = (((j - b) % n) + n) % n;
      y = o.gather(y, m.c(i64_tensor(idx, {len})), a);
    }
    if (y == x) y = o.reshape(x, std::vector<int64_t>(r, 0));
    return m.out(0, y);
  }
  return m.out(0, m.o().op(Op::Pad, {x}, Attrs{{"pads", pads}, {"value", value}, {"mode", mode}}));
}

Status map_shape(Importer& m) {
  const TensorType& t = m.type(0);
  int r = t.rank();
  int64_t start = m.ai("start", 0), end = m.ai("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  std::vector<Dim> dims;
  for (int64_t i = start; i < end; ++i) {
    if (t.shape[i].is_unknown())
      return m.fail(ErrorCode::unsupported, "Shape of ", t.to_string(), ": dim ", i, " is unknown until run time");
    dims.push_back(t.shape[i]);
  }
  return m.out_dims(0, dims, false);
}

Status map_size(Importer& m) {
  RLX_ASSIGN_OR_RETURN(Sizes s, need_static(m, m.type(0), "input"));
  return m.out_const(0, i64_tensor({numel(s)}, {}));
}

Status map_constant(Importer& m) {
  if (m.has_attr("value")) {
    RLX_ASSIGN_OR_RETURN(Tensor t, m.atensor("value"));
    return m.out_const(0, t);
  }
  if (m.has_attr("value_float")) return m.out_const(0, Tensor::from_vector<double>(DType::f32, {}, {m.af("value_float", 0)}));
  if (m.has_attr("value_int")) return m.out_const(0, i64_tensor({m.ai("value_int", 0)}, {}));
  if (m.has_attr("value_floats")) {
    auto v = m.afloats("value_floats");
    return m.out_const(0, Tensor::from_vector<double>(DType::f32, {static_cast<int64_t>(v.size())}, v));
  }
  if (m.has_attr("value_ints")) {
    auto v = m.aints("value_ints");
    return m.out_const(0, i64_tensor(v, {static_cast<int64_t>(v.size())}));
  }
  return m.fail(ErrorCode::unsupported, "only tensor, float(s) and int(s) values are supported (not sparse or string)");
}

Status map_constant_of_shape(Importer& m) {
  RLX_ASSIGN_OR_RETURN(auto shape, m.ints(0));
  Tensor v = Tensor::from_vector<double>(DType::f32, {1}, {0.0});
  if (m.has_attr("value")) { RLX_ASSIGN_OR_RETURN(v, m.atensor("value")); }
  if (v.numel() != 1) return m.fail(ErrorCode::format_error, "value must hold one element");
  Sizes s;
  for (int64_t d : shape) {
    if (d < 0) return m.fail(ErrorCode::shape_error, "negative dimension ", d);
    s.push_back(d);
  }
  auto n = checked_numel(s);
  if (!n || *n > (int64_t{1} << 40)) return m.fail(ErrorCode::overflow, "shape ", sizes_to_string(s), " is too large");
  if (*n <= (int64_t{1} << 16)) {
    Tensor t = Tensor::zeros(v.dtype(), s);
    double x = v.get_f64(0);
    for (int64_t i = 0; i < *n; ++i) t.set_f64(i, x);
    return m.out_const(0, t);
  }
  double x = v.get_f64(0);
  return m.out(0, m.o().full(x, v.dtype(), s));
}

// Range of constants folds here; of values computed at run time it is the data-dependent
// range op (onnx_ops_data_dependent.cpp).
Status map_range(Importer& m) {
  if (!m.is_konst(0) || !m.is_konst(1) || !m.is_konst(2)) return map_range_computed(m);
  RLX_ASSIGN_OR_RETURN(Tensor st, m.konst(0));
  RLX_ASSIGN_OR_RETURN(Tensor li, m.konst(1));
  RLX_ASSIGN_OR_RETURN(Tensor de, m.konst(2));
  RLX_ASSIGN_OR_RETURN(Tensor t, runtime::range_values(st, li, de, m.where()));
  return m.out_const(0, t);
}

Status map_trilu(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  int64_t k = 0;
  if (m.has(1)) {
    RLX_ASSIGN_OR_RETURN(auto kv, m.ints(1));
    if (kv.size() != 1) return m.fail(ErrorCode::shape_error, "k must be a scalar");
    k = kv[0];
  }
  OpBuilder& o = m.o();
  int r = o.rank(x);
  if (r < 2) return m.fail(ErrorCode::shape_error, "input must have rank >= 2");
  const Dim &dn = o.shape(x)[r - 2], &dm = o.shape(x)[r - 1];
  if (!dn.is_static() || !dm.is_static()) return m.fail(ErrorCode::unsupported, "the last two dims must be static");
  RLX_TRY(bound(m, Sizes{dn.size(), dm.size()}));
  bool upper = m.ai("upper", 1) != 0;
  Tensor mask = Tensor::zeros(DType::boolean, {dn.size(), dm.size()});
  for (int64_t i = 0; i < dn.size(); ++i)
    for (int64_t j = 0; j < dm.size(); ++j) mask.bytes()[i * dm.size() + j] = upper ? (j - i >= k) : (j - i <= k);
  return m.out(0, o.where(m.c(mask), x, o.scalar_like(0, x)));
}

Status map_eye_like(Importer& m) {
  RLX_ASSIGN_OR_RETURN(Sizes s, need_static(m, m.type(0), "input"));
  if (s.size() != 2) return m.fail(ErrorCode::shape_error, "input must be 2-D");
  RLX_TRY(bound(m, s));
  DType dt = m.type(0).dtype;
  if (m.has_attr("dtype")) {
    auto d = dtype_from_onnx(static_cast<int32_t>(m.ai("dtype", 1)));
    if (!d) return m.fail(ErrorCode::unsupported, "dtype ", m.ai("dtype", 1));
    dt = *d;
  }
  int64_t k = m.ai("k", 0);
  if (k < -(int64_t{1} << 40) || k > (int64_t{1} << 40)) return m.fail(ErrorCode::out_of_range, "k ", k, " out of range");
  Tensor t = Tensor::zeros(dt, s);
  for (int64_t i = 0; i < s[0]; ++i)
    if (i + k >= 0 && i + k < s[1]) t.set_f64(i * s[1] + i + k, 1);
  return m.out_const(0, t);
}

Status map_one_hot(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId idx, m.in(0));
  RLX_ASSIGN_OR_RETURN(Tensor depth_t, m.konst(1));
  RLX_ASSIGN_OR_RETURN(ValueId vals, m.in(2));
  OpBuilder& o = m.o();
  if (depth_t.numel() != 1) return m.fail(ErrorCode::shape_error, "depth must hold one value");
  int64_t depth = static_cast<int64_t>(depth_t.get_f64(0));
  if (depth < 1 || depth > (int64_t{1} << 24)) return m.fail(ErrorCode::out_of_range, "depth ", depth, " out of range");
  int r = o.rank(idx) + 1;
  RLX_ASSIGN_OR_RETURN(int axis, axis_of(m, m.ai("axis", -1), r));
  ValueId id = norm_index(o, o.cast(idx, DType::i64), depth);
  ValueId iu = o.op(Op::Unsqueeze, {id}, Attrs{{"axes", std::vector<int64_t>{axis}}});
  std::vector<int64_t> rs(r, 1);
  rs[axis] = depth;
  std::vector<int64_t> seq(depth);
  for (int64_t i = 0; i < depth; ++i) seq[i] = i;
  ValueId range = o.reshape(m.c(i64_tensor(seq, {depth})), rs);
  ValueId hit = o.binary(Op::Equal, iu, range);
  ValueId off = o.reshape(o.slice(vals, {0}, {1}, {0}), {});
  ValueId on = o.reshape(o.slice(vals, {1}, {2}, {0}), {});
  return m.out(0, o.where(hit, on, off));
}

Status map_compress(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  OpBuilder& o = m.o();
  ValueId pos = kNoValue;
  if (m.is_konst(1)) {
    RLX_ASSIGN_OR_RETURN(Tensor cond, m.konst(1));
    std::vector<int64_t> keep;
    for (int64_t i = 0; i < cond.numel(); ++i)
      if (cond.get_f64(i) != 0) keep.push_back(i);
    pos = m.c(i64_tensor(keep, {static_cast<int64_t>(keep.size())}));
  } else {
    RLX_ASSIGN_OR_RETURN(pos, compress_positions(m));
  }
  int64_t axis = 0;
  if (m.has_attr("axis")) {
    RLX_ASSIGN_OR_RETURN(int a, axis_of(m, m.ai("axis", 0), o.rank(x)));
    axis = a;
  } else {
    x = o.reshape(x, {-1});
  }
  return m.out(0, o.gather(x, pos, axis));
}

Status map_depth_space(Importer& m, bool to_space) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  OpBuilder& o = m.o();
  RLX_ASSIGN_OR_RETURN(Sizes s, need_static(m, o.type(x), "input"));
  if (s.size() != 4) return m.fail(ErrorCode::shape_error, "input must be NCHW");
  int64_t b = m.ai("blocksize", 0), n = s[0], c = s[1], h = s[2], w = s[3];
  if (b <= 0 || b > 4096) return m.fail(ErrorCode::invalid_argument, "blocksize must be 1 to 4096");
  if (!checked_numel({n, c, h, w, b, b})) return m.fail(ErrorCode::overflow, "sizes overflow");
  if (to_space) {
    if (c % (b * b)) return m.fail(ErrorCode::shape_error, "channels not divisible by blocksize^2");
    bool crd = m.as("mode", "DCR") == "CRD";
    ValueId r = crd ? o.reshape(x, {n, c / (b * b), b, b, h, w}) : o.reshape(x, {n, b, b, c / (b * b), h, w});
    ValueId t = crd ? o.transpose(r, {0, 1, 4, 2, 5, 3}) : o.transpose(r, {0, 3, 4, 1, 5, 2});
    return m.out(0, o.reshape(t, {n, c / (b * b), h * b, w * b}));
  }
  if (h % b || w % b) return m.fail(ErrorCode::shape_error, "spatial dims not divisible by blocksize");
  ValueId r = o.reshape(x, {n, c, h / b, b, w / b, b});
  return m.out(0, o.reshape(o.transpose(r, {0, 3, 5, 1, 2, 4}), {n, c * b * b, h / b, w / b}));
}

}  // namespace

void register_movement_ops(OpTable& t) {
  t["Reshape"] = {map_reshape};
  t["Transpose"] = {map_transpose};
  t["Flatten"] = {map_flatten};
  t["Squeeze"] = {[](Importer& m) { return map_squeeze(m, false); }};
  t["Unsqueeze"] = {[](Importer& m) { return map_squeeze(m, true); }};
  t["Concat"] = {map_concat};
  t["Slice"] = {map_slice};
  t["Split"] = {map_split};
  t["Gather"] = {map_gather};
  t["GatherElements"] = {map_gather_elements};
  t["ScatterElements"] = {map_scatter_elements};
  t["Scatter"] = {map_scatter_elements};
  t["GatherND"] = {map_gather_nd};
  t["ScatterND"] = {map_scatter_nd};
  t["Expand"] = {map_expand};
  t["Tile"] = {map_tile};
  t["Pad"] = {map_pad};
  t["CenterCropPad"] = {map_center_crop_pad};
  t["Col2Im"] = {map_col2im};
  t["Shape"] = {map_shape};
  t["Size"] = {map_size};
  t["Constant"] = {map_constant};
  t["ConstantOfShape"] = {map_constant_of_shape};
  t["Range"] = {map_range};
  t["Trilu"] = {map_trilu};
  t["EyeLike"] = {map_eye_like};
  t["OneHot"] = {map_one_hot};
  t["Compress"] = {map_compress};
  t["DepthToSpace"] = {[](Importer& m) { return map_depth_space(m, true); }};
  t["SpaceToDepth"] = {[](Importer& m) { return map_depth_space(m, false); }};
}

}  // namespace rlx::onnx_import
