// Loss functions as graph-level ops (differentiable by autodiff.h like any other nodes).
#pragma once

#include "rlx/op_builder.h"

namespace rlx::train {

// Mean cross-entropy of `logits` [B, C] (float) against integer class labels [B]:
//   -1/B sum_b log_softmax(logits)[b, labels[b]]
// computed through log_softmax (max-subtracted, so it never overflows) and a one-hot select
// (labels compared with an iota over classes), so the gradient is softmax - onehot, scaled.
// A label outside [0, C) selects nothing (contributes 0), like an ignored index.
ValueId cross_entropy(OpBuilder& o, ValueId logits, ValueId labels);

// Per-example cross-entropy [B] (same definition, not averaged).
ValueId cross_entropy_per_example(OpBuilder& o, ValueId logits, ValueId labels);

// Mean squared error over all elements: mean((pred - target)^2); shapes broadcast.
ValueId mse(OpBuilder& o, ValueId pred, ValueId target);

}  // namespace rlx::train
