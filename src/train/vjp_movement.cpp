// Vector-Jacobian rules of movement ops: the adjoint of each view or copy (reshape back,
// inverse permutation, sum over broadcast axes, slices placed back with zeros, pads cropped,
// concat split, gathers scattered).
#include "vjp_internal.h"

namespace rlx::train::vjp {
namespace {

Status reshape_back(Ctx& c, std::vector<ValueId>& out) {
  out[0] = c.o.reshape(c.g(), sizes_of(c.in_types[0]));
  return c.o.status();
}

Status transpose(Ctx& c, std::vector<ValueId>& out) {
  const int rank = c.rank();
  std::vector<int64_t> perm = c.attrs().ints("perm");
  if (!c.attrs().has("perm"))
    for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
  for (int64_t& p : perm)
    if (p < 0) p += rank;
  out[0] = transpose_if(c.o, c.g(), inverse_perm(perm));
  return c.o.status();
}

Status expand(Ctx& c, std::vector<ValueId>& out) {
  out[0] = sum_to(c.o, c.g(), sizes_of(c.in_types[0]));
  return c.o.status();
}

Status strided_slice(Ctx& c, std::vector<ValueId>& out) {
  out[0] = unslice(c.o, c.g(), sizes_of(c.in_types[0]), c.attrs().ints("starts"), c.attrs().ints("steps"),
                   c.attrs().ints("sizes"));
  return c.o.status();
}

Status slice(Ctx& c, std::vector<ValueId>& out) {
  const Sizes in = sizes_of(c.in_types[0]);
  const int rank = c.rank();
  std::vector<int64_t> starts(rank, 0), steps(rank, 1), sizes = in;
  auto st = c.attrs().ints("starts"), en = c.attrs().ints("ends"), axes = c.attrs().ints("axes"),
       sp = c.attrs().ints("steps");
  if (axes.empty())
    for (size_t i = 0; i < st.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (sp.empty()) sp.assign(st.size(), 1);
  for (size_t k = 0; k < st.size(); ++k) {
    const int64_t ax = axes[k] < 0 ? axes[k] + rank : axes[k];
    const SliceRange r = resolve_slice_range(st[k], en[k], sp[k], in[ax]);
    starts[ax] = r.start;
    steps[ax] = sp[k];
    sizes[ax] = r.size;
  }
  out[0] = unslice(c.o, c.g(), in, starts, steps, sizes);
  return c.o.status();
}

// The gradient of one axis of reflect/edge padding (see pad_axis_by_copy in the movement
// lowering rules): the middle part, plus the mirrored or repeated border parts added back.
ValueId unpad_axis(OpBuilder& o, ValueId g, int axis, int64_t lo, int64_t hi, int64_t len, bool reflect) {
  if (lo == 0 && hi == 0) return g;
  const Sizes gs = sizes_of(o, g);
  const int rank = static_cast<int>(gs.size());
  Sizes xs = gs;
  xs[axis] = len;
  auto part = [&](int64_t start, int64_t count) {
    std::vector<int64_t> starts(rank, 0), steps(rank, 1), sizes = gs;
    starts[axis] = start;
    sizes[axis] = count;
    return o.strided_slice(g, starts, steps, sizes);
  };
  // where a border part of `count` elements was read from x: start, step
  auto place = [&](ValueId v, int64_t start, int64_t step, int64_t count) {
    std::vector<int64_t> starts(rank, 0), steps(rank, 1), sizes = xs;
    starts[axis] = start;
    steps[axis] = step;
    sizes[axis] = count;
    return unslice(o, v, xs, starts, steps, sizes);
  };
  ValueId dx = part(lo, len);
  if (lo > 0) {
    ValueId left = part(0, lo);
    dx = o.add(dx, reflect ? place(left, lo, -1, lo) : place(o.reduce_sum(left, {axis}, true), 0, 1, 1));
  }
  if (hi > 0) {
    ValueId right = part(lo + len, hi);
    dx = o.add(dx, reflect ? place(right, len - 2, -1, hi) : place(o.reduce_sum(right, {axis}, true), len - 1, 1, 1));
  }
  return dx;
}

Status pad(Ctx& c, std::vector<ValueId>& out) {
  OpBuilder& o = c.o;
  std::vector<int64_t> pads = c.attrs().ints("pads");
  const std::string mode = c.attrs().s("mode", "constant");
  if (mode == "constant") {
    // crop what was padded, pad with zeros what was cropped (negative pads)
    for (int64_t& p : pads) p = -p;
    out[0] = o.pad(c.g(), pads, 0.0);
    return o.status();
  }
  const Sizes in = sizes_of(c.in_types[0]);
  const int rank = c.rank();
  ValueId g = c.g();
  for (int i = rank - 1; i >= 0; --i) g = unpad_axis(o, g, i, pads[i], pads[i + rank], in[i], mode == "reflect");
  out[0] = g;
  return o.status();
}

Status concat(Ctx& c, std::vector<ValueId>& out) {
  OpBuilder& o = c.o;
  const int rank = c.rank();
  int64_t axis = c.attrs().i("axis");
  if (axis < 0) axis += rank;
  int64_t offset = 0;
  for (size_t k = 0; k < c.node.inputs.size(); ++k) {
    const Sizes is = sizes_of(c.in_types[k]);
    if (c.need(static_cast<int>(k))) {
      std::vector<int64_t> starts(rank, 0), steps(rank, 1);
      starts[axis] = is[axis] == 0 ? 0 : offset;
      out[k] = o.strided_slice(c.g(), starts, steps, is);
    }
    offset += is[axis];
  }
  return o.status();
}

Status split(Ctx& c, std::vector<ValueId>& out) {
  OpBuilder& o = c.o;
  int64_t axis = c.attrs().i("axis", 0);
  if (axis < 0) axis += c.rank();
  std::vector<ValueId> parts;
  for (size_t k = 0; k < c.node.outputs.size(); ++k) {
    if (sizes_of(c.out_types[k])[axis] == 0) continue;
    ValueId gk = c.out_grads[k];
    parts.push_back(gk != kNoValue ? gk : zeros(o, c.out_types[k].dtype, sizes_of(c.out_types[k])));
  }
  if (parts.empty()) {
    out[0] = zeros(o, c.dtype(), sizes_of(c.in_types[0]));
  } else {
    out[0] = parts.size() == 1 ? parts[0] : o.concat(parts, axis);
  }
  return o.status();
}

Status gather(Ctx& c, std::vector<ValueId>& out) {
  OpBuilder& o = c.o;
  int64_t axis = c.node.op == Op::Embedding ? 0 : c.attrs().i("axis", 0);
  if (axis < 0) axis += c.rank();
  ValueId base = zeros(o, c.dtype(), sizes_of(c.in_types[0]));
  out[0] = o.op(Op::ScatterAdd, {base, c.in(1), c.g()}, Attrs{{"axis", axis}});
  return o.status();
}

Status scatter_add(Ctx& c, std::vector<ValueId>& out) {
  OpBuilder& o = c.o;
  int64_t axis = c.attrs().i("axis", 0);
  if (axis < 0) axis += c.rank();
  if (c.need(0)) out[0] = c.g();
  if (c.need(2)) out[2] = o.gather(c.g(), c.in(1), axis);
  return o.status();
}

// scatter overwrites: the base gets no gradient where an update landed, each update gets the
// gradient at its position (exact for distinct indices; a repeated index is ambiguous anyway)
Status scatter(Ctx& c, std::vector<ValueId>& out) {
  OpBuilder& o = c.o;
  if (c.attrs().i("batch_dims", 0) != 0)
    return error(ErrorCode::unsupported, "the gradient of Scatter with batch_dims (a KV-cache update) is not implemented");
  int64_t axis = c.attrs().i("axis", 0);
  if (axis < 0) axis += c.rank();
  if (c.need(0)) {
    ValueId none = zeros(o, c.dtype(), sizes_of(c.in_types[2]));
    out[0] = o.op(Op::Scatter, {c.g(), c.in(1), none}, Attrs{{"axis", axis}});
  }
  if (c.need(2)) out[2] = o.gather(c.g(), c.in(1), axis);
  return o.status();
}

}  // namespace

void register_movement_vjps(std::vector<Rule>& t) {
  auto set = [&](Op op, Rule r) { t[static_cast<size_t>(op)] = r; };
  set(Op::Reshape, reshape_back);
  set(Op::Squeeze, reshape_back);
  set(Op::Unsqueeze, reshape_back);
  set(Op::Transpose, transpose);
  set(Op::Expand, expand);
  set(Op::StridedSlice, strided_slice);
  set(Op::Slice, slice);
  set(Op::Pad, pad);
  set(Op::Concat, concat);
  set(Op::Split, split);
  set(Op::Gather, gather);
  set(Op::Embedding, gather);
  set(Op::ScatterAdd, scatter_add);
  set(Op::Scatter, scatter);
}

}  // namespace rlx::train::vjp
