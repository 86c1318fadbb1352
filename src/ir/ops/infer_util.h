// Helpers shared by the per-family type-inference rules of the ops table.
#pragma once

#include <string>

#include "rlx/ops.h"

namespace rlx::infer {

// "node 'x' (op)" prefix for messages.
std::string where(Op op, const NodeSig& sig);

template <class... Args>
Status fail(ErrorCode code, Op op, const NodeSig& sig, const Args&... args) {
  return error(code, where(op, sig), ": ", args...);
}

using Types = std::vector<TensorType>;

// Input i must have one of the accepted dtype classes.
Status expect_float(Op op, const NodeSig& sig, int i);
Status expect_int(Op op, const NodeSig& sig, int i);
Status expect_bool(Op op, const NodeSig& sig, int i);
Status expect_numeric(Op op, const NodeSig& sig, int i);  // not bool
Status expect_same_dtype(Op op, const NodeSig& sig, int a, int b);

// Normalized, sorted, de-duplicated axes (empty input means all axes when `all_if_empty`).
Expected<std::vector<int>> normalize_axes(Op op, const NodeSig& sig, std::vector<int64_t> axes,
                                          int rank, bool all_if_empty);

// Per-family rules (one function per family, dispatched on op inside).
Expected<Types> infer_source(Op op, const NodeSig& sig);
Expected<Types> infer_elementwise(Op op, const NodeSig& sig);
Expected<Types> infer_reduce(Op op, const NodeSig& sig);
Expected<Types> infer_movement(Op op, const NodeSig& sig);
Expected<Types> infer_contraction(Op op, const NodeSig& sig);
Expected<Types> infer_normalization(Op op, const NodeSig& sig);
Expected<Types> infer_conv(Op op, const NodeSig& sig);
Expected<Types> infer_attention(Op op, const NodeSig& sig);
Expected<Types> infer_quant(Op op, const NodeSig& sig);
Expected<Types> infer_linalg(Op op, const NodeSig& sig);
Expected<Types> infer_splat(Op op, const NodeSig& sig);
Expected<Types> infer_sparse(Op op, const NodeSig& sig);
Expected<Types> infer_collective(Op op, const NodeSig& sig);
Expected<Types> infer_data_dependent(Op op, const NodeSig& sig);

}  // namespace rlx::infer
