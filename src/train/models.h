// Classifier definitions for training: parameters (with their seeded initial values) and a
// forward function that emits graph-level ops. The MNIST architectures:
//   mlp:      784 -> 128 (ReLU) -> 10
//   tinyconv: conv 1->8 3x3 + ReLU, max-pool 2, conv 8->16 3x3 + ReLU, max-pool 2,
//             fully connected 400 -> 10   (28 -> 26 -> 13 -> 11 -> 5; 16 * 5 * 5 = 400)
//   dsconv:   stem conv 1->16 3x3 stride 2 pad 1 + ReLU (28 -> 14), depthwise conv 16 3x3 pad 1
//             + ReLU, pointwise conv 16->16 1x1, residual add of the stem + ReLU, max-pool 3
//             stride 2 pad 1 (14 -> 7), average pool 2 stride 2 padded bottom/right (7 -> 4),
//             fully connected 256 -> 10 (the layers of small mobile networks)
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "rlx/op_builder.h"

namespace rlx::train {

struct ParamSpec {
  std::string name;  // as saved in safetensors ("fc1.weight", ...)
  Tensor init;       // initial value (its dtype and shape are the parameter's)
};

struct ModelDef {
  std::string name;
  Sizes example_shape;  // one input example, e.g. {784} or {1, 28, 28}
  int64_t classes = 10;
  std::vector<ParamSpec> params;
  // logits [B, classes] from images [B, example_shape...] and the parameters (params order).
  // When `layer_ends` is given, the output of every layer but the last is appended to it: the
  // points where pipeline parallelism may cut the model into stages (src/runtime/pipeline.h).
  std::function<ValueId(OpBuilder& o, ValueId images, std::span<const ValueId> params, std::vector<ValueId>* layer_ends)>
      forward;
};

// "mlp", "tinyconv" or "dsconv", f32, weights Kaiming-uniform (ReLU gain; gain 1 for the output layer)
// from `seed`, biases zero. Linear weights are stored [in, out] (y = x W + b).
Expected<ModelDef> mnist_model(std::string_view arch, uint64_t seed);

}  // namespace rlx::train
