// Movement family: canonical strict forms (explicit shapes, perms, axes; rank-preserving
// expand), ONNX slice/pad/split/squeeze/unsqueeze/embedding expressed with primitives.
#include "rules.h"

namespace rlx::dispatch {
namespace {

std::vector<int64_t> out_sizes(const RuleNode& n, int i = 0) { return static_sizes_or_empty(n.output_types[i]); }

Status canonical_reshape(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  return single(o, o.reshape_to(n.inputs[0], out_sizes(n)), outputs);
}

Status canonical_transpose(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  const int rank = n.input_types[0].rank();
  std::vector<int64_t> perm = n.attrs.ints("perm");
  if (!n.attrs.has("perm"))
    for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
  for (int64_t& p : perm)
    if (p < 0) p += rank;
  return single(o, o.transpose(n.inputs[0], perm), outputs);
}

Status canonical_expand(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  return single(o, o.broadcast_to(n.inputs[0], out_sizes(n)), outputs);
}

Status canonical_axis(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  Attrs a = n.attrs;
  int64_t axis = a.i("axis", 0);
  if (axis < 0) axis += n.input_types[0].rank();
  a.set("axis", axis);
  std::vector<ValueId> ins(n.inputs.begin(), n.inputs.end());
  return single(o, o.op(n.op, ins, a), outputs);
}

Status slice_to_strided(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  const TensorType& x = n.input_types[0];
  const int rank = x.rank();
  std::vector<int64_t> starts(rank, 0), steps(rank, 1), sizes = static_sizes_or_empty(x);
  auto st = n.attrs.ints("starts"), en = n.attrs.ints("ends"), axes = n.attrs.ints("axes"), sp = n.attrs.ints("steps");
  if (axes.empty())
    for (size_t i = 0; i < st.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (sp.empty()) sp.assign(st.size(), 1);
  for (size_t k = 0; k < st.size(); ++k) {
    int64_t ax = axes[k] < 0 ? axes[k] + rank : axes[k];
    SliceRange r = resolve_slice_range(st[k], en[k], sp[k], x.shape[ax].size());
    starts[ax] = r.start;
    steps[ax] = sp[k];
    sizes[ax] = r.size;
  }
  return single(o, o.strided_slice(n.inputs[0], starts, steps, sizes), outputs);
}

// One axis of reflect/edge padding: [left part, x, right part] joined along the axis.
ValueId pad_axis_by_copy(OpBuilder& o, ValueId x, int axis, int64_t lo, int64_t hi, bool reflect) {
  if (x == kNoValue) return kNoValue;
  if (lo == 0 && hi == 0) return x;
  Sizes s = static_sizes_or_empty(o.type(x));
  const int rank = static_cast<int>(s.size());
  const int64_t len = s[axis];
  auto part = [&](int64_t start, int64_t step, int64_t count) {
    std::vector<int64_t> starts(rank, 0), steps(rank, 1), sizes = s;
    starts[axis] = start;
    steps[axis] = step;
    sizes[axis] = count;
    return o.strided_slice(x, starts, steps, sizes);
  };
  // a piece the device refuses is kNoValue (the builder holds the error): stop there
  auto edge = [&](int64_t at, int64_t count) {
    Sizes target = s;
    target[axis] = count;
    ValueId one = part(at, 1, 1);
    return one == kNoValue ? kNoValue : o.broadcast_to(one, target);
  };
  std::vector<ValueId> pieces;
  if (lo > 0) pieces.push_back(reflect ? part(lo, -1, lo) : edge(0, lo));
  pieces.push_back(x);
  if (hi > 0) pieces.push_back(reflect ? part(len - 2, -1, hi) : edge(len - 1, hi));
  for (ValueId p : pieces)
    if (p == kNoValue) return kNoValue;
  return o.concat(pieces, axis);
}

Status canonical_pad(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  const TensorType& x = n.input_types[0];
  const int rank = x.rank();
  std::vector<int64_t> pads = n.attrs.ints("pads");
  std::string mode = n.attrs.s("mode", "constant");
  ValueId v = n.inputs[0];
  if (mode != "constant") {
    for (int i = 0; i < rank && v != kNoValue; ++i) v = pad_axis_by_copy(o, v, i, pads[i], pads[i + rank], mode == "reflect");
    if (v == kNoValue) return o.ok() ? error(ErrorCode::internal, "pad: a piece was refused without a reason") : o.status();
    return single(o, v, outputs);
  }
  // Negative pads crop: a strided slice first, then a non-negative pad.
  bool crop = false;
  std::vector<int64_t> starts(rank, 0), steps(rank, 1), sizes = static_sizes_or_empty(x);
  for (int i = 0; i < rank; ++i) {
    if (pads[i] < 0) { starts[i] = -pads[i]; sizes[i] += pads[i]; pads[i] = 0; crop = true; }
    if (pads[i + rank] < 0) { sizes[i] += pads[i + rank]; pads[i + rank] = 0; crop = true; }
  }
  if (crop) v = o.strided_slice(v, starts, steps, sizes);
  bool any = false;
  for (int64_t p : pads) any |= p != 0;
  if (!any) return single(o, crop ? v : o.reshape(v, sizes), outputs);
  Attrs a{{"pads", pads}, {"value", n.attrs.f("value", 0.0)}};
  return single(o, o.op(Op::Pad, {v}, a), outputs);
}

Status split(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  const TensorType& x = n.input_types[0];
  const int rank = x.rank();
  int64_t axis = n.attrs.i("axis", 0);
  if (axis < 0) axis += rank;
  int64_t offset = 0;
  outputs.clear();
  for (int64_t size : n.attrs.ints("sizes")) {
    std::vector<int64_t> starts(rank, 0), steps(rank, 1), sizes = static_sizes_or_empty(x);
    starts[axis] = size == 0 ? 0 : offset;
    sizes[axis] = size;
    outputs.push_back(o.strided_slice(n.inputs[0], starts, steps, sizes));
    offset += size;
  }
  return o.status();
}

Status embedding(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  return single(o, o.gather(n.inputs[0], n.inputs[1], 0), outputs);
}

// iota shaped like its input becomes iota with the (now static) shape as an attribute
Status canonical_iota(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs) {
  return single(o, o.iota(n.output_types[0].dtype, out_sizes(n), n.attrs.i("axis") < 0
                                                                      ? n.attrs.i("axis") + n.output_types[0].rank()
                                                                      : n.attrs.i("axis")),
                outputs);
}

}  // namespace

void register_movement_rules(std::vector<OpRules>& t) {
  auto set = [&](Op op, RuleFn f) { t[static_cast<size_t>(op)].decompose = f; };
  set(Op::Reshape, canonical_reshape);
  set(Op::Squeeze, canonical_reshape);
  set(Op::Unsqueeze, canonical_reshape);
  set(Op::Transpose, canonical_transpose);
  set(Op::Expand, canonical_expand);
  set(Op::Concat, canonical_axis);
  set(Op::Gather, canonical_axis);
  set(Op::ScatterAdd, canonical_axis);
  set(Op::Scatter, canonical_axis);
  set(Op::Slice, slice_to_strided);
  set(Op::Pad, canonical_pad);
  set(Op::Split, split);
  set(Op::Embedding, embedding);
  set(Op::Iota, canonical_iota);
}

}  // namespace rlx::dispatch
