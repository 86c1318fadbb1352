// NonZero, Unique, NonMaxSuppression, Compress and Range of computed values, TopK of a computed
// k: ops whose output shape depends on the input values. They become rlx's data-dependent ops,
// whose output count is a symbol named after the node's first output ("<output>.count");
// Model::run computes them on the host and binds the count (src/runtime/data_dependent.h).
// With constant inputs the importer folds them like any other node.
#include "onnx_internal.h"

namespace rlx::onnx_import {
namespace {

std::string count_symbol(Importer& m) { return cat(m.node->output(0), ".count"); }

Status map_nonzero(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  return m.out(0, m.o().op(Op::NonZero, {x}, Attrs{{"count", count_symbol(m)}}));
}

Status map_unique(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId x, m.in(0));
  Attrs a{{"count", count_symbol(m)}, {"sorted", m.ai("sorted", 1)}};
  if (m.has_attr("axis")) a.set("axis", m.ai("axis", 0));
  std::vector<ValueId> outs = m.o().op_multi(Op::Unique, {x}, std::move(a));
  if (outs.size() != 4) return m.o().status().with_context(m.where());
  for (int i = 0; i < 4; ++i)
    if (m.wants(i)) RLX_TRY(m.out(i, outs[i]));
  return Status::ok();
}

Status map_nms(Importer& m) {
  std::vector<ValueId> ins;
  // an absent max_output_boxes_per_class or iou_threshold (an empty name before a given
  // input) takes its default, 0; an absent score_threshold means none
  for (int i = 0; i < std::min(m.num_inputs(), 5); ++i) {
    if (m.has(i)) {
      RLX_ASSIGN_OR_RETURN(ValueId v, m.in(i));
      ins.push_back(v);
    } else if (i < 2) {
      return m.fail(ErrorCode::format_error, "input ", i, " (boxes, scores) is required");
    } else if (i < 4) {
      ins.push_back(i == 2 ? m.cs(0, DType::i64) : m.cs(0, DType::f32));
    }
  }
  return m.out(0, m.o().op(Op::NonMaxSuppression, ins,
                           Attrs{{"count", count_symbol(m)}, {"center_point_box", m.ai("center_point_box", 0)}}));
}

}  // namespace

// The positions Compress keeps where its condition is computed: nonzero(condition), flattened.
Expected<ValueId> compress_positions(Importer& m) {
  RLX_ASSIGN_OR_RETURN(ValueId cond, m.in(1));
  OpBuilder& o = m.o();
  if (o.rank(cond) != 1) return m.fail(ErrorCode::shape_error, "condition must be 1-D, got ", o.type(cond).to_string());
  return o.reshape(o.op(Op::NonZero, {cond}, Attrs{{"count", count_symbol(m)}}), {-1});
}

Status map_range_computed(Importer& m) {
  std::vector<ValueId> ins;
  for (int i = 0; i < 3; ++i) {
    RLX_ASSIGN_OR_RETURN(ValueId v, m.in(i));
    ins.push_back(v);
  }
  return m.out(0, m.o().op(Op::Range, ins, Attrs{{"count", count_symbol(m)}}));
}

Status map_topk_computed(Importer& m, ValueId x) {
  RLX_ASSIGN_OR_RETURN(ValueId k, m.in(1));
  std::vector<ValueId> outs = m.o().op_multi(
      Op::TopK, {x, k},
      Attrs{{"count", count_symbol(m)}, {"axis", m.ai("axis", -1)}, {"largest", m.ai("largest", 1)}});
  if (outs.size() != 2) return m.o().status().with_context(m.where());
  RLX_TRY(m.out(0, outs[0]));
  if (m.wants(1)) RLX_TRY(m.out(1, outs[1]));
  return Status::ok();
}

void register_data_dependent_ops(OpTable& t) {
  t["NonZero"] = {map_nonzero};
  t["Unique"] = {map_unique};
  t["NonMaxSuppression"] = {map_nms};
}

}  // namespace rlx::onnx_import
