// Lowering rules by op family: how each op decomposes into primitives (the common-IR path)
// and how composites are rewritten into other graph-level ops (the rewritten path).
//
// Rules are written with OpBuilder against whatever Builder the legalizer hands them: the
// primitive emitter (which canonicalizes each emitted op into strict primitive form, and
// expands nested composites) or the legalizing emitter (which legalizes each emitted op in
// turn). So a rule may emit graph-level conveniences (broadcasting add, negative axes).
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "rlx/op_builder.h"

namespace rlx::dispatch {

// The node being lowered; inputs are values of the destination graph.
struct RuleNode {
  Op op;
  const Attrs& attrs;
  std::span<const ValueId> inputs;
  std::span<const TensorType> input_types;
  std::span<const TensorType> output_types;
  std::string_view name;
};

using RuleFn = Status (*)(OpBuilder& o, const RuleNode& n, std::vector<ValueId>& outputs);

struct OpRules {
  RuleFn decompose = nullptr;  // into primitives (for a primitive: its canonical strict form)
  RuleFn rewrite = nullptr;    // into other graph-level ops
};

const OpRules& rules_for(Op op);

// Per-family registration (each in its own file).
void register_elementwise_rules(std::vector<OpRules>& t);
void register_reduce_rules(std::vector<OpRules>& t);
void register_movement_rules(std::vector<OpRules>& t);
void register_contraction_rules(std::vector<OpRules>& t);
void register_normalization_rules(std::vector<OpRules>& t);
void register_conv_rules(std::vector<OpRules>& t);
void register_attention_rules(std::vector<OpRules>& t);
void register_quant_rules(std::vector<OpRules>& t);
void register_linalg_rules(std::vector<OpRules>& t);
void register_splat_rules(std::vector<OpRules>& t);
void register_sparse_rules(std::vector<OpRules>& t);
void register_collective_rules(std::vector<OpRules>& t);
void register_data_dependent_rules(std::vector<OpRules>& t);

// Helpers shared by the rule files.
// Sets the decomposition of every op of `family` to f (the native-only families register the
// refusal that says where their ops run).
void set_family_decompose(std::vector<OpRules>& t, OpFamily family, RuleFn f);
Sizes static_sizes_or_empty(const TensorType& t);
// x quantized to int8 along its last axis as int8_matmul quantizes activations: per row
// scale = max(max|row| / 127, 1e-30) ([..., 1]), quants = clamp(round_half_even(x / scale),
// -127, 127) (f32 integers). x / scale is a division, as the CPU kernels compute it, so every
// device rounds each quant alike.
struct Int8Rows {
  ValueId quants, scale;
};
Int8Rows int8_rows(OpBuilder& o, ValueId x, int64_t rank);
// A 2-D window over NCHW: kernel, strides, dilations and pads (top, left, bottom, right); the
// input's [n, c, h, w] and the output's spatial [ho, wo].
struct Window2d {
  int64_t kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
  int64_t n, c, h, w, ho, wo;
};
// The im2col matrix of x [N, C, H, W] for `groups` groups: [N, groups, C/groups*kh*kw, Ho*Wo],
// element (n, g, (c, i, j), (oy, ox)) = x[n, g*C/groups + c, oy*sh + i*dh - pt, ox*sw + j*dw - pl],
// 0 in the padding. conv2d's rule and its weight gradient (train/vjp_conv.cpp) both build it
// here, node for node, so that common-subexpression elimination after legalization leaves
// one im2col per convolution in a training step.
ValueId im2col(OpBuilder& o, ValueId x, const Window2d& w, int64_t groups);
// Output of the rule must be the single value v.
inline Status single(OpBuilder& o, ValueId v, std::vector<ValueId>& outputs) {
  if (!o.ok()) return o.status();
  outputs = {v};
  return Status::ok();
}

}  // namespace rlx::dispatch
