// Shared by the Cortex-M tests of tests/targets: one epoch of plain SGD of a classifier on a
// data set, and the first images of a set as one flat f32 tensor.
#pragma once

#include <algorithm>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "train/data.h"
#include "train/models.h"
#include "train/trainer.h"

namespace rlx::targets {

// The parameters of `m` after one epoch of SGD (learning rate 0.1, batches of `batch`, shuffled
// with `seed`) on `d`, by name.
inline std::map<std::string, Tensor> train_one_epoch(const train::ModelDef& m, const train::Dataset& d, int64_t batch,
                                                     uint64_t seed) {
  std::map<std::string, Tensor> w;
  auto trainer = train::Trainer::create(m, train::TrainConfig{});
  EXPECT_TRUE(trainer.has_value()) << trainer.status().to_string();
  if (!trainer.has_value()) return w;
  train::BatchLoader loader(d, batch, m.example_shape, seed);
  loader.start_epoch(1);
  Tensor x, y;
  while (loader.next(x, y)) {
    auto s = (*trainer)->step(x, y, 0.1);
    EXPECT_TRUE(s.has_value()) << s.status().to_string();
    if (!s.has_value()) return w;
  }
  for (auto& [name, t] : (*trainer)->named_parameters()) w[name] = t;
  return w;
}

// The first n (at most all) images of d as f32 [n, features].
inline Tensor flat_images(const train::Dataset& d, int64_t n, int64_t features = 784) {
  n = std::min(n, d.size());
  Tensor t = Tensor::zeros(DType::f32, {n, features});
  std::copy(d.images.data<float>(), d.images.data<float>() + n * features, t.data<float>());
  return t;
}

}  // namespace rlx::targets
