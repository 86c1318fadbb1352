// The CPU's native attention: scaled dot-product attention with an f32 result, on f32 operands
// or bf16 ones with out_type f32 (kernels/attention.h), for the
// graph-level attention and paged_attention nodes, in either layout (bhsd, or bshd read in place through strides),
// with grouped key/value heads, a query length different from the key length, a bool or f32
// mask broadcast to [B, Hq, Sq, Sk], causality and the scale. Legality is decided from the
// node's attributes, dtypes and static shapes; anything else is refused with the reason (and
// the node then decomposes into primitives).
#pragma once

#include <span>

#include "kernels/attention.h"
#include "rlx/attrs.h"
#include "rlx/device.h"

namespace rlx::cpu {

// The kernel arguments for an attention node, without the data pointers (the executable binds
// q, k, v, out and the mask when has_mask).
struct AttentionPlan {
  AttentionArgs args;
  bool has_mask = false;
  bool paged = false;  // paged_attention: the block table is input 3 and the mask input 4
};
Expected<AttentionPlan> plan_attention(const Attrs& attrs, std::span<const TensorType> inputs,
                                       std::span<const TensorType> outputs);
// The same for a paged_attention node (q, k_pool, v_pool, block_table i64, mask).
Expected<AttentionPlan> plan_paged_attention(const Attrs& attrs, std::span<const TensorType> inputs,
                                             std::span<const TensorType> outputs);
// plan_attention or plan_paged_attention, by `op`.
Expected<AttentionPlan> plan_attention_node(Op op, const Attrs& attrs, std::span<const TensorType> inputs,
                                            std::span<const TensorType> outputs);

// Whether the CPU claims this attention node, with the description.
Claim claim_cpu_attention(const NodeDesc& n);

}  // namespace rlx::cpu
