// Shared by the Cortex-M tests of tests/targets: one epoch of plain SGD of a classifier on a
// data set, the first images of a set as one flat f32 tensor, and the int8 program's
// predictions against the float model's.
#pragma once

#include <algorithm>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "targets/cortex_m/cortex_m.h"
#include "targets/int8/rlx_mcu_kernels.h"
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

// The int8 program against the float model on the first n images of d (features each, float
// logits [n, classes] from run_float): how often the argmaxes agree and each is right; the
// first `embed` quantized images, their labels and the host reference's logits, for QEMU.
struct Int8VsFloat {
  int agree = 0, float_ok = 0, int8_ok = 0;
  cortex_m::EmbeddedInputs ins;
  std::vector<std::vector<int8_t>> want;
};
inline Int8VsFloat int8_vs_float(const int8::Int8Program& q, const Tensor& logits, const train::Dataset& d, int64_t n,
                                 int64_t features, int32_t classes, int64_t embed) {
  Int8VsFloat r;
  for (int64_t i = 0; i < n; ++i) {
    const float* fl = logits.data<float>() + i * classes;
    const int32_t fpred = static_cast<int32_t>(std::max_element(fl, fl + classes) - fl);
    auto x = int8::quantize_input(q, std::span<const float>(d.images.data<float>() + i * features, features));
    auto ql = int8::run_reference(q, x);
    const int32_t qpred = rlx_mcu_argmax_s8(ql.data(), classes), label = d.labels.data<int32_t>()[i];
    r.agree += fpred == qpred;
    r.float_ok += fpred == label;
    r.int8_ok += qpred == label;
    if (i < embed) {
      r.ins.inputs.push_back(std::move(x));
      r.ins.labels.push_back(label);
      r.want.push_back(std::move(ql));
    }
  }
  return r;
}

}  // namespace rlx::targets
