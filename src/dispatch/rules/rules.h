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
// Output of the rule must be the single value v.
inline Status single(OpBuilder& o, ValueId v, std::vector<ValueId>& outputs) {
  if (!o.ok()) return o.status();
  outputs = {v};
  return Status::ok();
}

}  // namespace rlx::dispatch
