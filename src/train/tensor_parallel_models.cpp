#include "train/tensor_parallel_models.h"

#include <cstring>

namespace rlx::train {
namespace {

// [outer][len][inner] element counts of `s` around `axis`
void around(const Sizes& s, int axis, int64_t* outer, int64_t* len, int64_t* inner) {
  *outer = 1;
  *inner = 1;
  for (int d = 0; d < static_cast<int>(s.size()); ++d) {
    if (d < axis) *outer *= s[d];
    else if (d > axis) *inner *= s[d];
  }
  *len = s[static_cast<size_t>(axis)];
}

// Block `rank` of `ranks` equal blocks of `t` along `axis`, as a new tensor.
Tensor slice_block(const Tensor& t, int axis, int rank, int ranks) {
  int64_t outer, len, inner;
  around(t.sizes(), axis, &outer, &len, &inner);
  const int64_t part = len / ranks;
  Sizes s = t.sizes();
  s[static_cast<size_t>(axis)] = part;
  Tensor r = Tensor::zeros(t.dtype(), s);
  const size_t es = dtype_bytes(t.dtype(), 1);
  const size_t row = static_cast<size_t>(part * inner) * es;
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(r.bytes() + static_cast<size_t>(o) * row,
                t.bytes() + (static_cast<size_t>(o * len + rank * part) * static_cast<size_t>(inner)) * es, row);
  return r;
}

Attrs megatron_sum() { return Attrs{{"reduce", std::string("sum")}, {"grad", std::string("identity")}}; }

}  // namespace

Expected<TensorParallelModel> tensor_parallel_model(const ModelDef& full, int rank, int ranks) {
  if (ranks < 1 || rank < 0 || rank >= ranks)
    return error(ErrorCode::invalid_argument, "tensor parallelism: rank ", rank, " of ", ranks, " is not a rank");
  TensorParallelModel tp;
  tp.rank = rank;
  tp.ranks = ranks;
  tp.model = full;
  int64_t split = 0;  // the size the ranks divide
  std::string what;
  if (full.name == "mlp" && full.params.size() == 4) {
    tp.split_axis = {1, 0, 0, -1};
    split = full.params[0].init.sizes()[1];
    what = "the mlp's hidden layer (fc1 outputs, fc2 inputs)";
    tp.model.forward = [](OpBuilder& o, ValueId x, std::span<const ValueId> p, std::vector<ValueId>* ends) {
      ValueId h = o.relu(o.add(o.matmul(x, p[0]), p[1]));  // this rank's hidden features
      if (ends) ends->push_back(h);
      ValueId y = o.op(Op::AllReduce, {o.matmul(h, p[2])}, megatron_sum());
      return o.add(y, p[3]);
    };
  } else if (full.name == "tinyconv" && full.params.size() == 6) {
    tp.split_axis = {0, 0, 1, -1, -1, -1};
    split = full.params[0].init.sizes()[0];
    what = "tinyconv's first convolution's output channels (conv2's input channels)";
    tp.model.forward = [](OpBuilder& o, ValueId x, std::span<const ValueId> p, std::vector<ValueId>* ends) {
      const Attrs pool{{"kernel", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}};
      ValueId h = o.relu(o.op(Op::Conv2d, {x, p[0], p[1]}));  // [B, 8 / ranks, 26, 26]
      h = o.op(Op::MaxPool2d, {h}, pool);
      if (ends) ends->push_back(h);
      ValueId c = o.op(Op::AllReduce, {o.op(Op::Conv2d, {h, p[2]})}, megatron_sum());  // [B, 16, 11, 11]
      h = o.relu(o.add(c, o.reshape(p[3], {1, -1, 1, 1})));
      h = o.op(Op::MaxPool2d, {h}, pool);
      if (ends) ends->push_back(h);
      h = o.reshape(h, {-1, 400});
      return o.add(o.matmul(h, p[4]), p[5]);
    };
  } else {
    return error(ErrorCode::unsupported, "tensor parallelism: model '", full.name,
                 "' has no tensor-parallel layout (mlp and tinyconv have)");
  }
  if (split % ranks != 0)
    return error(ErrorCode::invalid_argument, "tensor parallelism over ", ranks, " ranks: ", what, " has ", split,
                 " features, not a multiple of ", ranks);
  for (size_t i = 0; i < tp.model.params.size(); ++i)
    if (tp.split_axis[i] >= 0) tp.model.params[i].init = slice_block(full.params[i].init, tp.split_axis[i], rank, ranks);
  return tp;
}

Expected<std::vector<std::pair<std::string, Tensor>>> gather_tensor_parallel(
    const TensorParallelModel& tpm, std::span<const std::pair<std::string, Tensor>> shards, dist::Communicator& tp) {
  if (shards.size() != tpm.split_axis.size())
    return error(ErrorCode::invalid_argument, "tensor parallelism: ", shards.size(), " shards for ", tpm.split_axis.size(),
                 " parameters");
  if (tp.size() != tpm.ranks)
    return error(ErrorCode::invalid_argument, "tensor parallelism: the model was split for ", tpm.ranks,
                 " ranks, the group has ", tp.size());
  std::vector<std::pair<std::string, Tensor>> r;
  for (size_t i = 0; i < shards.size(); ++i) {
    const Tensor& s = shards[i].second;
    const int axis = tpm.split_axis[i];
    if (axis < 0) {
      r.push_back({shards[i].first, s.clone()});
      continue;
    }
    // every rank's block, in rank order, then interleaved along the axis
    Tensor blocks = Tensor::zeros(s.dtype(), {tpm.ranks * s.numel()});
    RLX_TRY(tp.all_gather(s.bytes(), blocks.bytes(), s.numel(), s.dtype())
                .with_context(cat("gathering the shards of ", shards[i].first)));
    int64_t outer, len, inner;
    around(s.sizes(), axis, &outer, &len, &inner);
    Sizes fs = s.sizes();
    fs[static_cast<size_t>(axis)] = len * tpm.ranks;
    Tensor f = Tensor::zeros(s.dtype(), fs);
    const size_t es = dtype_bytes(s.dtype(), 1);
    const size_t row = static_cast<size_t>(len * inner) * es;
    for (int k = 0; k < tpm.ranks; ++k)
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(f.bytes() + (static_cast<size_t>(o * tpm.ranks + k)) * row,
                    blocks.bytes() + static_cast<size_t>(k) * s.nbytes() + static_cast<size_t>(o) * row, row);
    r.push_back({shards[i].first, std::move(f)});
  }
  return r;
}

}  // namespace rlx::train
