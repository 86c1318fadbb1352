// Tensor parallelism for the training models (models.h), Megatron-style: the first layer of a
// pair is split by output features (a linear layer's columns of W [in, out] with its bias, a
// convolution's output channels), the second by input features (rows of W, input channels);
// each rank's product is then a partial sum that one all_reduce adds up, and the second
// layer's bias is added once after it. Everything else stays replicated:
//   mlp:      fc1 split by its 128 outputs, fc2 by its 128 inputs (fc2.bias replicated)
//   tinyconv: conv1 split by its 8 output channels, conv2 by its 8 input channels (conv2.bias
//             and fc replicated)
// The all_reduce carries grad=identity (Megatron's "g"): its gradient is the output gradient
// as it is, so the shards' gradients are those of the single-process model and the replicated
// parameters get the same gradient on every rank (they stay equal without communication).
#pragma once

#include <span>
#include <string>
#include <utility>
#include <vector>

#include "rlx/comm.h"
#include "train/models.h"

namespace rlx::train {

struct TensorParallelModel {
  ModelDef model;               // this rank's shard: the full model's parameter names, sliced
  std::vector<int> split_axis;  // per parameter: the axis split over the ranks, -1 replicated
  int rank = 0, ranks = 1;
};

// Rank `rank` of `ranks`' shard of `full` (an mnist_model, possibly with other initial values,
// e.g. from --init): the initial values are slices of the full model's, so the job starts
// where one process would. Errors when the split sizes are not divisible by `ranks`, naming
// the layer, or for a model that has no tensor-parallel layout.
Expected<TensorParallelModel> tensor_parallel_model(const ModelDef& full, int rank, int ranks);

// The full parameters from every rank's shards (`shards` in the model's parameter order, this
// rank's), gathered over `tp` (the ranks of the shards, in shard order); on every rank.
Expected<std::vector<std::pair<std::string, Tensor>>> gather_tensor_parallel(
    const TensorParallelModel& tpm, std::span<const std::pair<std::string, Tensor>> shards, dist::Communicator& tp);

}  // namespace rlx::train
