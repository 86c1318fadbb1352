// ONNX control flow: If, Loop and Scan, compiled into the graph rather than interpreted. Their
// subgraphs are imported inline (outer-scope values visible, nested control flow included):
// If with a condition known at import takes one branch, and with a run-time condition both,
// selected element-wise by it; Loop and Scan are unrolled over a trip count known at import
// (at most kMaxUnroll iterations). A Loop whose trip count or condition is known only at run
// time (or that runs longer) becomes the IR's loop op: its body a graph of its own, run by the
// host once per iteration on the model's device. Branches of different shapes on a run-time
// condition are refused, saying which.
#include <algorithm>

#include "onnx_internal.h"

namespace rlx::onnx_import {
namespace {

constexpr int64_t kMaxUnroll = 4096;

Expected<const ::onnx::GraphProto*> graph_attr(Importer& m, const char* name) {
  const ::onnx::AttributeProto* a = m.attr(name);
  if (!a || !a->has_g()) return m.fail(ErrorCode::format_error, "attribute '", name, "' must be a graph");
  return &a->g();
}

OValue konst_value(Tensor t) {
  OValue v;
  v.type = t.type();
  v.konst = std::move(t);
  return v;
}

OValue scalar_i64(int64_t x) {
  Tensor t = Tensor::zeros(DType::i64, {});
  t.data<int64_t>()[0] = x;
  return konst_value(std::move(t));
}

OValue scalar_bool(bool b) {
  Tensor t = Tensor::zeros(DType::boolean, {});
  t.bytes()[0] = b;
  return konst_value(std::move(t));
}

// values stacked along a new axis (a Loop's or Scan's scan outputs)
Expected<ValueId> stack(Importer& m, std::vector<OValue>& parts, int64_t axis, const std::string& name) {
  OpBuilder& o = m.o();
  std::vector<ValueId> ids;
  for (OValue& p : parts) {
    RLX_ASSIGN_OR_RETURN(ValueId id, m.value_id(p, name));
    const int r = o.rank(id) + 1;
    RLX_ASSIGN_OR_RETURN(int ax, axis_of(m, axis, r));
    ids.push_back(o.op(Op::Unsqueeze, {id}, Attrs{{"axes", std::vector<int64_t>{ax}}}));
    RLX_TRY(m.ok().with_context(m.where()));
  }
  RLX_ASSIGN_OR_RETURN(int ax, axis_of(m, axis, o.rank(ids[0])));
  return o.concat(ids, ax);
}

Status map_if(Importer& m) {
  RLX_ASSIGN_OR_RETURN(const ::onnx::GraphProto* then_g, graph_attr(m, "then_branch"));
  RLX_ASSIGN_OR_RETURN(const ::onnx::GraphProto* else_g, graph_attr(m, "else_branch"));
  if (then_g->output_size() != m.num_outputs() || else_g->output_size() != m.num_outputs())
    return m.fail(ErrorCode::format_error, "the branches must have the node's ", m.num_outputs(), " outputs");
  if (m.is_konst(0)) {
    RLX_ASSIGN_OR_RETURN(Tensor c, m.konst(0));
    if (c.numel() != 1) return m.fail(ErrorCode::shape_error, "the condition must hold one element");
    const bool take = c.get_f64(0) != 0;
    RLX_ASSIGN_OR_RETURN(auto outs, m.run_subgraph(take ? *then_g : *else_g, {}, take ? "then_branch" : "else_branch"));
    for (int i = 0; i < m.num_outputs(); ++i) RLX_TRY(m.out_value(i, outs[static_cast<size_t>(i)]));
    return Status::ok();
  }
  // a run-time condition: both branches, then a select per output (equal shapes only: a
  // branch's shape cannot depend on data in a compiled graph)
  RLX_ASSIGN_OR_RETURN(ValueId cond, m.in(0));
  OpBuilder& o = m.o();
  RLX_ASSIGN_OR_RETURN(auto a, m.run_subgraph(*then_g, {}, "then_branch"));
  RLX_ASSIGN_OR_RETURN(auto b, m.run_subgraph(*else_g, {}, "else_branch"));
  if (o.rank(cond) > 1) return m.fail(ErrorCode::shape_error, "the condition must hold one element");
  ValueId c = o.reshape(cond, {});
  // one tensor of each branch, selected by the condition
  auto select = [&](OValue& x, OValue& y, const std::string& name, int i) -> Expected<ValueId> {
    RLX_ASSIGN_OR_RETURN(ValueId xi, m.value_id(x, name + "_then"));
    RLX_ASSIGN_OR_RETURN(ValueId yi, m.value_id(y, name + "_else"));
    if (o.shape(xi) != o.shape(yi) || o.dtype(xi) != o.dtype(yi))
      return m.fail(ErrorCode::unsupported, "output ", i, ": the branches give ", o.type(xi).to_string(), " and ",
                    o.type(yi).to_string(), ", and the condition is known only at run time (rlx compiles both "
                    "branches and selects, so their types must agree)");
    return o.where(c, xi, yi);
  };
  for (int i = 0; i < m.num_outputs(); ++i) {
    OValue& x = a[static_cast<size_t>(i)];
    OValue& y = b[static_cast<size_t>(i)];
    const std::string name = m.node->output(i);
    if (!x.seq && !y.seq && !x.none && !y.none) {
      RLX_ASSIGN_OR_RETURN(ValueId v, select(x, y, name, i));
      RLX_TRY(m.out(i, v));
      continue;
    }
    // sequences and optionals: the same structure in both branches selects element by element;
    // a structure that depends on the condition needs the condition at import
    const bool same_structure = x.none == y.none && (x.seq != nullptr) == (y.seq != nullptr) &&
                                (!x.seq || x.seq->size() == y.seq->size()) && x.type.dtype == y.type.dtype;
    if (!same_structure) {
      (void)m.konst(0);  // records the graph inputs it depends on, for the import that folds them in
      return m.fail(ErrorCode::unsupported, "output ", i, ": the branches give ",
                    x.none ? "an empty optional" : x.seq ? cat("a sequence of ", x.seq->size()) : "a tensor", " and ",
                    y.none ? "an empty optional" : y.seq ? cat("a sequence of ", y.seq->size()) : "a tensor",
                    ", and the condition is known only at run time");
    }
    if (x.none) {
      RLX_TRY(m.out_value(i, x));
      continue;
    }
    std::vector<OValue> xs = *x.seq, ys = *y.seq, elems;
    for (size_t k = 0; k < xs.size(); ++k) {
      RLX_ASSIGN_OR_RETURN(ValueId v, select(xs[k], ys[k], element_name(name, k), i));
      OValue e;
      e.id = v;
      e.type = o.type(v);
      elems.push_back(std::move(e));
    }
    RLX_TRY(m.out_seq(i, std::move(elems), x.type.dtype));
  }
  return Status::ok();
}

// Loop run by the host (the IR's loop op, docs/onnx.md "Control flow"): the body imported as a
// graph of its own, compiled once and run once per iteration while i < M and cond.
Status runtime_loop(Importer& m, const ::onnx::GraphProto& body, int n_state, int n_scan) {
  OpBuilder& o = m.o();
  std::vector<ValueId> ins;
  if (m.has(0)) {
    RLX_ASSIGN_OR_RETURN(ValueId mv, m.in(0));
    if (o.type(mv).shape.size() > 1) return m.fail(ErrorCode::shape_error, "M must hold one value");
    ins.push_back(o.reshape(o.cast(mv, DType::i64), {}));
  } else {
    ins.push_back(m.c(*scalar_i64(0).konst));  // unused: the node is unbounded (below)
  }
  if (m.has(1)) {
    RLX_ASSIGN_OR_RETURN(ValueId cv, m.in(1));
    if (o.type(cv).shape.size() > 1) return m.fail(ErrorCode::shape_error, "cond must hold one value");
    ins.push_back(o.reshape(o.cast(cv, DType::boolean), {}));
  } else {
    ins.push_back(m.c(*scalar_bool(true).konst));
  }
  std::vector<TensorType> types{TensorType{DType::i64, {}}, TensorType{DType::boolean, {}}};
  for (int i = 0; i < n_state; ++i) {
    RLX_ASSIGN_OR_RETURN(ValueId v, m.in(2 + i));
    ins.push_back(v);
    types.push_back(o.type(v));
  }
  std::vector<ValueId> outside;
  RLX_ASSIGN_OR_RETURN(std::string text, m.import_loop_body(body, types, outside));
  ins.insert(ins.end(), outside.begin(), outside.end());
  const std::string count = cat(m.node->output(0).empty() ? cat("loop", m.node_index) : m.node->output(0), ".count");
  std::vector<ValueId> outs = o.op_multi(
      Op::Loop, ins,
      Attrs{{"count", count}, {"body", text}, {"num_state", static_cast<int64_t>(n_state)}, {"bounded", int64_t{m.has(0)}}});
  RLX_TRY(m.ok().with_context(m.where()));
  for (int i = 0; i < n_state + n_scan; ++i)
    if (m.wants(i)) RLX_TRY(m.out(i, outs[static_cast<size_t>(i)]));
  return Status::ok();
}

// Loop(M, cond, v...) with body(iter, cond, v...) -> (cond, v..., scan...): unrolled while
// iter < M and cond are known at import (up to kMaxUnroll iterations); otherwise run by the
// host iteration by iteration (runtime_loop). Loop-carried sequences need the unrolled form.
Status map_loop(Importer& m) {
  RLX_ASSIGN_OR_RETURN(const ::onnx::GraphProto* body, graph_attr(m, "body"));
  const int n_state = m.num_inputs() - 2;
  if (n_state < 0) return m.fail(ErrorCode::format_error, "Loop needs the M and cond inputs (either may be empty)");
  const int n_scan = m.num_outputs() - n_state;
  if (n_scan < 0 || body->output_size() != 1 + n_state + n_scan || body->input_size() != 2 + n_state)
    return m.fail(ErrorCode::format_error, "the body's inputs and outputs do not match the node's");
  bool carries_structured = false;  // sequences, optionals, strings: only the unrolled form holds them
  for (int i = 0; i < n_state; ++i) {
    RLX_ASSIGN_OR_RETURN(OValue v, m.input_value(2 + i));
    carries_structured |= v.seq || v.none || v.strs;
  }
  int64_t trip = kMaxUnroll + 1;  // no M: until the condition turns false
  if (m.has(0)) {
    if (!m.is_konst(0)) {
      // computed from inputs given as values (rlx run): the import's retry folds them and unrolls
      if (m.foldable_from_given(0))
        return m.fail(ErrorCode::unsupported, "the trip count M is computed from inputs not yet folded in");
      if (!carries_structured) return runtime_loop(m, *body, n_state, n_scan);
      return m.fail(ErrorCode::unsupported, "the trip count M is computed at run time and the loop carries a "
                    "sequence or optional (rlx unrolls such loops, so their trip count must be known at import)");
    }
    RLX_ASSIGN_OR_RETURN(auto mv, m.ints(0));
    if (mv.size() != 1) return m.fail(ErrorCode::shape_error, "M must hold one element");
    trip = std::max<int64_t>(mv[0], 0);
  }
  bool cond = true;
  if (m.has(1)) {
    if (!m.is_konst(1)) {
      if (m.foldable_from_given(1))
        return m.fail(ErrorCode::unsupported, "the loop condition is computed from inputs not yet folded in");
      if (!carries_structured) return runtime_loop(m, *body, n_state, n_scan);
      return m.fail(ErrorCode::unsupported, "the loop condition is computed at run time and the loop carries a sequence or optional");
    }
    RLX_ASSIGN_OR_RETURN(Tensor c, m.konst(1));
    if (c.numel() != 1) return m.fail(ErrorCode::shape_error, "cond must hold one element");
    cond = c.get_f64(0) != 0;
  }
  std::vector<OValue> state;
  for (int i = 0; i < n_state; ++i) {
    RLX_ASSIGN_OR_RETURN(OValue v, m.input_value(2 + i));
    state.push_back(std::move(v));
  }
  std::vector<std::vector<OValue>> scans(static_cast<size_t>(n_scan));
  int64_t it = 0;
  for (; it < trip && cond; ++it) {
    if (it >= kMaxUnroll) {
      // too many iterations to unroll: run on the host instead (what was unrolled is unused)
      if (!carries_structured) return runtime_loop(m, *body, n_state, n_scan);
      return m.fail(ErrorCode::unsupported, "the loop runs more than ", kMaxUnroll, " iterations and carries a "
                    "sequence or optional (rlx unrolls such loops)");
    }
    std::vector<OValue> ins{scalar_i64(it), scalar_bool(cond)};
    ins.insert(ins.end(), state.begin(), state.end());
    RLX_ASSIGN_OR_RETURN(auto outs, m.run_subgraph(*body, std::move(ins), cat("body (iteration ", it, ")")));
    if (!outs[0].konst) {
      // the condition depends on the data: run the whole loop on the host
      if (!carries_structured) return runtime_loop(m, *body, n_state, n_scan);
      return m.fail(ErrorCode::unsupported, "the loop condition is computed at run time in iteration ", it,
                    " and the loop carries a sequence or optional");
    }
    cond = outs[0].konst->numel() == 1 && outs[0].konst->get_f64(0) != 0;
    for (int i = 0; i < n_state; ++i) state[static_cast<size_t>(i)] = outs[static_cast<size_t>(1 + i)];
    for (int i = 0; i < n_scan; ++i) scans[static_cast<size_t>(i)].push_back(outs[static_cast<size_t>(1 + n_state + i)]);
  }
  for (int i = 0; i < n_state; ++i) RLX_TRY(m.out_value(i, state[static_cast<size_t>(i)]));
  for (int i = 0; i < n_scan; ++i) {
    if (!m.wants(n_state + i)) continue;
    if (scans[static_cast<size_t>(i)].empty()) {
      // no iteration: the body's scan values' types give [0, ...]; the host loop knows them
      if (!carries_structured) return runtime_loop(m, *body, n_state, n_scan);
      return m.fail(ErrorCode::unsupported, "scan output ", i, " of a loop that runs no iteration and carries a sequence");
    }
    RLX_ASSIGN_OR_RETURN(ValueId s, stack(m, scans[static_cast<size_t>(i)], 0, m.node->output(n_state + i)));
    RLX_TRY(m.out(n_state + i, s));
  }
  return Status::ok();
}

// One scan: body(state..., slices...) -> (state..., elements...), unrolled over the scan
// inputs' (static) length along their axes and directions. Returns the final states and the
// stacked scan outputs.
struct ScanSpec {
  const ::onnx::GraphProto* body;
  std::vector<int64_t> in_axes, in_dirs, out_axes, out_dirs;
};

Expected<std::vector<OValue>> unroll_scan(Importer& m, const ScanSpec& spec, std::vector<OValue> state,
                                          const std::vector<ValueId>& xs, int n_out, const std::string& what) {
  OpBuilder& o = m.o();
  const size_t n_state = state.size();
  std::vector<int> axes;
  int64_t len = -1;
  for (size_t j = 0; j < xs.size(); ++j) {
    RLX_ASSIGN_OR_RETURN(int ax, axis_of(m, spec.in_axes[j], o.rank(xs[j])));
    const Dim& d = o.shape(xs[j])[ax];
    if (!d.is_static()) return m.fail(ErrorCode::unsupported, "scan input ", j, " has a symbolic length (rlx unrolls Scan)");
    if (len >= 0 && d.size() != len) return m.fail(ErrorCode::shape_error, "scan inputs differ in length");
    len = d.size();
    axes.push_back(ax);
  }
  if (len > kMaxUnroll) return m.fail(ErrorCode::unsupported, "a scan of ", len, " steps (rlx unrolls up to ", kMaxUnroll, ")");
  std::vector<std::vector<OValue>> outs_t(static_cast<size_t>(n_out));
  for (int64_t t = 0; t < len; ++t) {
    std::vector<OValue> ins = state;
    for (size_t j = 0; j < xs.size(); ++j) {
      const int64_t at = spec.in_dirs[j] != 0 ? len - 1 - t : t;
      ValueId sl = o.slice(xs[j], {at}, {at + 1}, {axes[j]});
      OValue v;
      v.id = o.op(Op::Squeeze, {sl}, Attrs{{"axes", std::vector<int64_t>{axes[j]}}});
      RLX_TRY(m.ok().with_context(m.where()));
      v.type = o.type(v.id);
      ins.push_back(std::move(v));
    }
    RLX_ASSIGN_OR_RETURN(auto outs, m.run_subgraph(*spec.body, std::move(ins), cat(what, " (step ", t, ")")));
    for (size_t i = 0; i < n_state; ++i) state[i] = outs[i];
    for (int i = 0; i < n_out; ++i) outs_t[static_cast<size_t>(i)].push_back(outs[n_state + static_cast<size_t>(i)]);
  }
  std::vector<OValue> result = state;
  for (int i = 0; i < n_out; ++i) {
    auto& parts = outs_t[static_cast<size_t>(i)];
    if (parts.empty()) return m.fail(ErrorCode::unsupported, "scan output ", i, " of a scan of no steps");
    if (spec.out_dirs[static_cast<size_t>(i)] != 0) std::reverse(parts.begin(), parts.end());
    OValue v;
    RLX_ASSIGN_OR_RETURN(v.id, stack(m, parts, spec.out_axes[static_cast<size_t>(i)], cat(what, "_scan", i)));
    v.type = o.type(v.id);
    result.push_back(std::move(v));
  }
  return result;
}

// Scan. From opset 9: states and scan inputs as they are, with per-input axes and directions.
// Opset 8: every input has a batch axis 0 (scanned along axis 1) and an optional sequence_lens
// input first; each batch element is scanned on its own and the results stacked again.
Status map_scan(Importer& m) {
  RLX_ASSIGN_OR_RETURN(const ::onnx::GraphProto* body, graph_attr(m, "body"));
  const bool v8 = m.opset < 9;
  const int first = v8 ? 1 : 0;
  const int64_t n_in = m.ai("num_scan_inputs", 0);
  if (n_in <= 0 || n_in > m.num_inputs() - first)
    return m.fail(ErrorCode::format_error, "num_scan_inputs ", n_in, " does not fit the ", m.num_inputs(), " inputs");
  const int n_state = m.num_inputs() - first - static_cast<int>(n_in);
  const int n_out = m.num_outputs() - n_state;
  if (n_out < 0 || body->input_size() != n_state + n_in || body->output_size() != n_state + n_out)
    return m.fail(ErrorCode::format_error, "the body's inputs and outputs do not match the node's");
  ScanSpec spec;
  spec.body = body;
  spec.in_axes = v8 ? std::vector<int64_t>(static_cast<size_t>(n_in), 0) : m.aints("scan_input_axes", std::vector<int64_t>(static_cast<size_t>(n_in), 0));
  spec.in_dirs = m.aints(v8 ? "directions" : "scan_input_directions", std::vector<int64_t>(static_cast<size_t>(n_in), 0));
  spec.out_axes = v8 ? std::vector<int64_t>(static_cast<size_t>(n_out), 0) : m.aints("scan_output_axes", std::vector<int64_t>(static_cast<size_t>(n_out), 0));
  spec.out_dirs = v8 ? std::vector<int64_t>(static_cast<size_t>(n_out), 0) : m.aints("scan_output_directions", std::vector<int64_t>(static_cast<size_t>(n_out), 0));
  if (static_cast<int64_t>(spec.in_axes.size()) != n_in || static_cast<int64_t>(spec.in_dirs.size()) != n_in ||
      static_cast<int>(spec.out_axes.size()) != n_out || static_cast<int>(spec.out_dirs.size()) != n_out)
    return m.fail(ErrorCode::format_error, "scan axes and directions need one entry per scan input and output");
  OpBuilder& o = m.o();
  if (!v8) {
    std::vector<OValue> state;
    for (int i = 0; i < n_state; ++i) {
      RLX_ASSIGN_OR_RETURN(OValue v, m.input_value(i));
      state.push_back(std::move(v));
    }
    std::vector<ValueId> xs;
    for (int64_t j = 0; j < n_in; ++j) {
      RLX_ASSIGN_OR_RETURN(ValueId x, m.in(n_state + static_cast<int>(j)));
      xs.push_back(x);
    }
    RLX_ASSIGN_OR_RETURN(auto r, unroll_scan(m, spec, std::move(state), xs, n_out, "body"));
    for (int i = 0; i < n_state + n_out; ++i) RLX_TRY(m.out_value(i, r[static_cast<size_t>(i)]));
    return Status::ok();
  }
  // opset 8: per batch element
  std::vector<ValueId> ins;
  for (int i = first; i < m.num_inputs(); ++i) {
    RLX_ASSIGN_OR_RETURN(ValueId x, m.in(i));
    ins.push_back(x);
  }
  for (size_t i = 0; i < ins.size(); ++i)  // every input has the batch axis; scan inputs scan axis 1
    if (o.rank(ins[i]) < (i < static_cast<size_t>(n_state) ? 1 : 2))
      return m.fail(ErrorCode::shape_error, "input ", first + static_cast<int>(i), " lacks the batch (and scan) axis");
  const Dim& bd = o.shape(ins[0])[0];
  if (!bd.is_static()) return m.fail(ErrorCode::unsupported, "a symbolic batch (rlx unrolls Scan)");
  if (m.has(0)) {  // sequence_lens: only the full length, the same for every batch element
    RLX_ASSIGN_OR_RETURN(auto lens, m.ints(0));
    const Dim& full = o.shape(ins[static_cast<size_t>(n_state)])[1];
    for (int64_t l : lens)
      if (!full.is_static() || l != full.size())
        return m.fail(ErrorCode::unsupported, "sequence_lens shorter than the scan inputs");
  }
  std::vector<std::vector<OValue>> per_out(static_cast<size_t>(n_state + n_out));
  for (int64_t b = 0; b < bd.size(); ++b) {
    auto row = [&](ValueId x) { return o.op(Op::Squeeze, {o.slice(x, {b}, {b + 1}, {0})}, Attrs{{"axes", std::vector<int64_t>{0}}}); };
    std::vector<OValue> state;
    for (int i = 0; i < n_state; ++i) {
      OValue v;
      v.id = row(ins[static_cast<size_t>(i)]);
      RLX_TRY(m.ok().with_context(m.where()));
      v.type = o.type(v.id);
      state.push_back(std::move(v));
    }
    std::vector<ValueId> xs;
    for (int64_t j = 0; j < n_in; ++j) xs.push_back(row(ins[static_cast<size_t>(n_state + j)]));
    RLX_ASSIGN_OR_RETURN(auto r, unroll_scan(m, spec, std::move(state), xs, n_out, cat("body (batch ", b, ")")));
    for (size_t i = 0; i < r.size(); ++i) per_out[i].push_back(r[i]);
  }
  for (int i = 0; i < n_state + n_out; ++i) {
    if (!m.wants(i)) continue;
    RLX_ASSIGN_OR_RETURN(ValueId s, stack(m, per_out[static_cast<size_t>(i)], 0, m.node->output(i)));
    RLX_TRY(m.out(i, s));
  }
  return Status::ok();
}

}  // namespace

void register_control_ops(OpTable& t) {
  // not foldable as a whole: their subgraphs' nodes fold one by one
  t["If"] = {map_if, false};
  t["Loop"] = {map_loop, false};
  t["Scan"] = {map_scan, false};
}

}  // namespace rlx::onnx_import
