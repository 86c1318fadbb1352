// ONNX sequence and optional ops, compiled at import: a sequence whose length and positions are
// known at import (as exporters write them: torch's unbind/stack, lists built in loops; a graph
// input specialized to the length it is given) is a list of values held by the importer, and
// each op is list manipulation; the tensors stay graph values or constants. SequenceMap runs
// its body once per element, inline. An optional's presence is known at import too: an empty
// one is a marked value (OValue::none), a full one is its value. Positions computed at run
// time are refused with the reason.
#include "onnx_internal.h"

namespace rlx::onnx_import {
namespace {

// A position input (or `def` when absent), normalized against `n`; `end_ok` admits n itself.
Expected<int64_t> position(Importer& m, int i, int64_t n, int64_t def, bool end_ok) {
  if (!m.has(i)) return def;
  RLX_ASSIGN_OR_RETURN(auto p, m.ints(i));
  if (p.size() != 1) return m.fail(ErrorCode::shape_error, "position must be a scalar");
  const int64_t hi = end_ok ? n : n - 1;
  if (p[0] < -n || p[0] > hi)
    return m.fail(ErrorCode::out_of_range, "position ", p[0], " is outside [", -n, ", ", hi, "] of a sequence of ", n);
  return p[0] < 0 ? p[0] + n : p[0];
}

// A position input must be known at import: one computed from graph inputs given as values is
// folded in by the import's retry (konst records them); one computed from data is refused.
Status position_known(Importer& m, int i) {
  if (!m.has(i) || m.is_konst(i)) return Status::ok();
  (void)m.konst(i);
  return m.fail(ErrorCode::unsupported, "the position is computed at run time (rlx compiles sequences whose "
                "positions are known at import)");
}

Status map_sequence_construct(Importer& m) {
  std::vector<OValue> elems;
  for (int i = 0; i < m.num_inputs(); ++i) {
    RLX_ASSIGN_OR_RETURN(OValue v, m.input_value(i));
    if (v.seq) return m.fail(ErrorCode::dtype_error, "input ", i, " is a sequence (elements are tensors)");
    if (!elems.empty() && v.type.dtype != elems[0].type.dtype)
      return m.fail(ErrorCode::dtype_error, "elements differ in type: ", dtype_name(elems[0].type.dtype), " and ",
                    dtype_name(v.type.dtype));
    elems.push_back(std::move(v));
  }
  if (elems.empty()) return m.fail(ErrorCode::format_error, "SequenceConstruct needs at least one input");
  const DType dt = elems[0].type.dtype;
  return m.out_seq(0, std::move(elems), dt);
}

Status map_sequence_empty(Importer& m) {
  const int64_t t = m.ai("dtype", 1);  // float by default
  auto dt = dtype_from_onnx(static_cast<int32_t>(t));
  if (!dt) return m.fail(ErrorCode::unsupported, "dtype ", onnx_dtype_name(static_cast<int32_t>(t)));
  return m.out_seq(0, {}, *dt);
}

Status map_sequence_at(Importer& m) {
  RLX_ASSIGN_OR_RETURN(auto elems, m.seq_in(0));
  const int64_t n = static_cast<int64_t>(elems.size());
  RLX_TRY(position_known(m, 1));
  RLX_ASSIGN_OR_RETURN(int64_t p, position(m, 1, n, 0, false));
  return m.out_value(0, elems[static_cast<size_t>(p)]);
}

Status map_sequence_insert(Importer& m) {
  RLX_ASSIGN_OR_RETURN(auto elems, m.seq_in(0));
  RLX_ASSIGN_OR_RETURN(OValue t, m.input_value(1));
  if (t.seq) return m.fail(ErrorCode::dtype_error, "the inserted value is a sequence (elements are tensors)");
  if (!elems.empty() && t.type.dtype != elems[0].type.dtype)
    return m.fail(ErrorCode::dtype_error, "inserting ", dtype_name(t.type.dtype), " into a sequence of ",
                  dtype_name(elems[0].type.dtype));
  const int64_t n = static_cast<int64_t>(elems.size());
  RLX_TRY(position_known(m, 2));
  RLX_ASSIGN_OR_RETURN(int64_t p, position(m, 2, n, n, true));
  const DType dt = t.type.dtype;
  elems.insert(elems.begin() + p, std::move(t));
  return m.out_seq(0, std::move(elems), dt);
}

Status map_sequence_erase(Importer& m) {
  RLX_ASSIGN_OR_RETURN(auto elems, m.seq_in(0));
  const int64_t n = static_cast<int64_t>(elems.size());
  if (n == 0) return m.fail(ErrorCode::out_of_range, "erasing from an empty sequence");
  RLX_TRY(position_known(m, 1));
  RLX_ASSIGN_OR_RETURN(int64_t p, position(m, 1, n, n - 1, false));
  const DType dt = elems[0].type.dtype;
  elems.erase(elems.begin() + p);
  return m.out_seq(0, std::move(elems), dt);
}

Status map_sequence_length(Importer& m) {
  RLX_ASSIGN_OR_RETURN(auto elems, m.seq_in(0));
  Tensor t = Tensor::zeros(DType::i64, {});
  t.data<int64_t>()[0] = static_cast<int64_t>(elems.size());
  return m.out_const(0, std::move(t));
}

// SplitToSequence: pieces of one element along `axis` (squeezed unless keepdims), of a scalar
// split's size (the last one smaller), or of the sizes a 1-D split lists.
Status map_split_to_sequence(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  OpBuilder& o = m.o();
  RLX_ASSIGN_OR_RETURN(int axis, axis_of(m, m.ai("axis", 0), o.rank(x)));
  const Dim& d = o.shape(x)[axis];
  if (!d.is_static()) return m.fail(ErrorCode::unsupported, "the split axis has a symbolic length");
  const int64_t n = d.size();
  if (n > (int64_t{1} << 16) && !m.has(1))
    return m.fail(ErrorCode::unsupported, "a sequence of ", n, " pieces (rlx holds up to 2^16)");
  std::vector<int64_t> sizes;
  bool squeeze = false;
  if (!m.has(1)) {
    sizes.assign(static_cast<size_t>(n), 1);
    squeeze = m.ai("keepdims", 1) == 0;
  } else {
    (void)m.ai("keepdims", 1);  // applies only without a split input
    RLX_ASSIGN_OR_RETURN(Tensor st, m.konst(1));
    RLX_ASSIGN_OR_RETURN(auto sv, tensor_ints(st, m.where() + ": split"));
    if (st.rank() == 0) {
      if (sv[0] <= 0) return m.fail(ErrorCode::invalid_argument, "split ", sv[0], " must be positive");
      if ((n + sv[0] - 1) / sv[0] > (int64_t{1} << 16))
        return m.fail(ErrorCode::unsupported, "a sequence of more than 2^16 pieces");
      for (int64_t left = n; left > 0; left -= sv[0]) sizes.push_back(std::min(sv[0], left));
    } else {
      int64_t sum = 0;
      for (int64_t s : sv) {
        if (s < 0) return m.fail(ErrorCode::invalid_argument, "split size ", s, " is negative");
        sum += s;
      }
      if (sum != n) return m.fail(ErrorCode::shape_error, "split sizes add up to ", sum, ", the axis has ", n);
      sizes = sv;
    }
  }
  if (sizes.size() > (size_t{1} << 16)) return m.fail(ErrorCode::unsupported, "a sequence of ", sizes.size(), " pieces");
  std::vector<OValue> elems;
  if (!sizes.empty()) {
    for (ValueId p : o.split(x, axis, sizes)) {
      OValue v;
      v.id = squeeze ? o.op(Op::Squeeze, {p}, Attrs{{"axes", std::vector<int64_t>{axis}}}) : p;
      RLX_TRY(m.ok().with_context(m.where()));
      v.type = o.type(v.id);
      elems.push_back(std::move(v));
    }
  }
  return m.out_seq(0, std::move(elems), o.dtype(x));
}

// ConcatFromSequence: the elements concatenated along `axis`, or stacked along a new one.
Status map_concat_from_sequence(Importer& m) {
  RLX_ASSIGN_OR_RETURN(auto elems, m.seq_in(0));
  if (elems.empty()) return m.fail(ErrorCode::shape_error, "concatenating an empty sequence");
  OpBuilder& o = m.o();
  const bool stack = m.ai("new_axis", 0) != 0;
  const int64_t axis_attr = m.ai("axis", 0);
  std::vector<ValueId> ids;
  int axis = 0;
  for (size_t k = 0; k < elems.size(); ++k) {
    RLX_ASSIGN_OR_RETURN(ValueId id, m.value_id(elems[k], cat(m.node->output(0), "_elem", k)));
    const int r = o.rank(id) + (stack ? 1 : 0);
    RLX_ASSIGN_OR_RETURN(axis, axis_of(m, axis_attr, r));
    ids.push_back(stack ? o.op(Op::Unsqueeze, {id}, Attrs{{"axes", std::vector<int64_t>{axis}}}) : id);
    RLX_TRY(m.ok().with_context(m.where()));
  }
  return m.out(0, ids.size() == 1 ? o.reshape(ids[0], std::vector<int64_t>(o.rank(ids[0]), 0)) : o.concat(ids, axis));
}

// SequenceMap (opset 17): the body once per element of the first input (a sequence); further
// sequence inputs give their element of the same position, tensors themselves. Each body
// output gathers into an output sequence.
Status map_sequence_map(Importer& m) {
  const ::onnx::AttributeProto* a = m.attr("body");
  if (!a || !a->has_g()) return m.fail(ErrorCode::format_error, "attribute 'body' must be a graph");
  std::vector<OValue> ins;
  for (int i = 0; i < m.num_inputs(); ++i) {
    RLX_ASSIGN_OR_RETURN(OValue v, m.input_value(i));
    ins.push_back(std::move(v));
  }
  if (ins.empty() || !ins[0].seq) return m.fail(ErrorCode::dtype_error, "input 0 must be a sequence");
  const size_t n = ins[0].seq->size();
  for (const OValue& v : ins)
    if (v.seq && v.seq->size() != n) return m.fail(ErrorCode::shape_error, "the sequences differ in length");
  std::vector<std::vector<OValue>> outs(static_cast<size_t>(m.num_outputs()));
  for (size_t k = 0; k < n; ++k) {
    std::vector<OValue> args;
    for (const OValue& v : ins) args.push_back(v.seq ? (*v.seq)[k] : v);
    RLX_ASSIGN_OR_RETURN(auto r, m.run_subgraph(a->g(), std::move(args), cat("body (element ", k, ")")));
    if (r.size() != outs.size()) return m.fail(ErrorCode::format_error, "the body has ", r.size(), " outputs for ", outs.size());
    for (size_t j = 0; j < r.size(); ++j) outs[j].push_back(std::move(r[j]));
  }
  for (int j = 0; j < m.num_outputs(); ++j) {
    auto& e = outs[static_cast<size_t>(j)];
    const DType dt = e.empty() ? ins[0].type.dtype : e[0].type.dtype;
    RLX_TRY(m.out_seq(j, std::move(e), dt));
  }
  return Status::ok();
}

// Optional(x) is x; Optional() with a `type` is an empty optional of that type.
Status map_optional(Importer& m) {
  if (m.has(0)) {
    (void)m.attr("type");  // only needed without an input
    RLX_ASSIGN_OR_RETURN(OValue v, m.input_value(0));
    return m.out_value(0, std::move(v));
  }
  const ::onnx::AttributeProto* a = m.attr("type");
  if (!a || !a->has_tp()) return m.fail(ErrorCode::format_error, "Optional without an input needs the 'type' attribute");
  const ::onnx::TypeProto& tp = a->tp();
  const ::onnx::TypeProto& elem = tp.has_sequence_type() ? tp.sequence_type().elem_type() : tp;
  if (!elem.has_tensor_type()) return m.fail(ErrorCode::unsupported, "an optional of other values than tensors or sequences of them");
  auto dt = dtype_from_onnx(elem.tensor_type().elem_type());
  if (!dt) return m.fail(ErrorCode::unsupported, "dtype ", onnx_dtype_name(elem.tensor_type().elem_type()));
  OValue v;
  v.none = true;
  v.type = TensorType{*dt, {}};
  return m.out_value(0, std::move(v));
}

Status map_optional_has_element(Importer& m) {
  bool has = false;  // opset 18: no input is an empty optional
  if (m.has(0)) {
    RLX_ASSIGN_OR_RETURN(OValue v, m.input_value(0));
    has = !v.none;
  }
  Tensor t = Tensor::zeros(DType::boolean, {});
  t.bytes()[0] = has;
  return m.out_const(0, std::move(t));
}

Status map_optional_get_element(Importer& m) {
  RLX_ASSIGN_OR_RETURN(OValue v, m.input_value(0));
  if (v.none) return m.fail(ErrorCode::invalid_argument, "the optional ('", m.node->input(0), "') is empty");
  return m.out_value(0, std::move(v));
}

}  // namespace

void register_sequence_ops(OpTable& t) {
  t["Optional"] = {map_optional, false};
  t["OptionalHasElement"] = {map_optional_has_element, false};
  t["OptionalGetElement"] = {map_optional_get_element, false};
  // not foldable: a sequence is not a tensor the reference device could evaluate
  t["SequenceConstruct"] = {map_sequence_construct, false};
  t["SequenceEmpty"] = {map_sequence_empty, false};
  t["SequenceAt"] = {map_sequence_at, false};
  t["SequenceInsert"] = {map_sequence_insert, false};
  t["SequenceErase"] = {map_sequence_erase, false};
  t["SequenceLength"] = {map_sequence_length, false};
  t["SplitToSequence"] = {map_split_to_sequence, false};
  t["ConcatFromSequence"] = {map_concat_from_sequence, false};
  t["SequenceMap"] = {map_sequence_map, false};
}

}  // namespace rlx::onnx_import
