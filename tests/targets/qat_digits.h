// Shared by the tests of tests/targets: scikit-learn's 8x8 handwritten digits (converted to
// 28x28 MNIST IDX files by scripts/digits-to-idx.py), the MNIST MLP and tinyconv trained on them
// in f32 or with quantization-aware training (train/qat.h), and the int8 programs the targets
// run for them (activation scales from QAT, or from post-training calibration).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>

#include "targets/int8/int8.h"
#include "targets/int8/rlx_mcu_kernels.h"
#include "train/data.h"
#include "train/trainer.h"

namespace rlx::targets::testing {

inline const char* kDigitsCsv = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz";

// Why the digits cannot be had here ("" when they can).
inline std::string digits_missing() {
  if (!std::filesystem::exists("/usr/bin/python3") || !std::filesystem::exists(kDigitsCsv))
    return cat(kDigitsCsv, " or /usr/bin/python3 is missing: install python3-sklearn (scripts/install-deps.sh)");
  return "";
}

// The digits as MNIST data (1438 training, 359 test images), converted into a folder of this
// process (tests may run in parallel).
inline Expected<train::MnistData> load_digits() {
  const std::string dir = cat(RLX_BINARY_DIR, "/targets_digits_", getpid());
  std::filesystem::remove_all(dir);
  const std::string cmd = cat("/usr/bin/python3 ", RLX_SOURCE_DIR, "/scripts/digits-to-idx.py ", dir, " > /dev/null");
  if (std::system(cmd.c_str()) != 0) return error(ErrorCode::io_error, "failed: ", cmd);
  auto d = train::load_mnist(dir);
  std::filesystem::remove_all(dir);
  return d;
}

// Trains `arch` on the digits as tests/train's digits test does (SGD, momentum 0.9, cosine
// schedule from `lr`, batch 32, seed 1), in f32 or with quantization-aware training; from the
// model's initial weights, or fine-tuning `from`'s parameters.
inline Expected<std::unique_ptr<train::Trainer>> train_digits(const train::MnistData& data, const std::string& arch, bool qat,
                                                              int64_t epochs, const train::Trainer* from = nullptr,
                                                              double lr = 0.05) {
  RLX_ASSIGN_OR_RETURN(train::ModelDef m, train::mnist_model(arch, 1));
  if (from) {  // fine-tuning: start from the other trainer's parameters
    const auto p = from->named_parameters();
    for (size_t i = 0; i < m.params.size() && i < p.size(); ++i) m.params[i].init = p[i].second.clone();
  }
  train::TrainConfig cfg;
  cfg.optimizer = {.kind = train::OptimizerKind::sgd, .momentum = 0.9};
  cfg.qat.enabled = qat;
  RLX_ASSIGN_OR_RETURN(std::unique_ptr<train::Trainer> t, train::Trainer::create(m, cfg));
  const int64_t batch = 32;
  train::BatchLoader loader(data.train, batch, m.example_shape, 1);
  const train::LrSchedule sched{.kind = train::LrSchedule::Kind::cosine, .base = lr,
                                .total_steps = epochs * loader.batches_per_epoch()};
  for (int64_t e = 1; e <= epochs; ++e) {
    loader.start_epoch(e);
    Tensor x, y;
    while (loader.next(x, y)) RLX_TRY(t->step(x, y, sched.at(t->steps_done())).status());
  }
  return t;
}

// The trained model's weights (and, under QAT, its sites' tensors) as a checkpoint would hold them.
inline std::map<std::string, Tensor> checkpoint_of(const train::Trainer& t) {
  std::map<std::string, Tensor> w;
  for (const auto& [name, tensor] : t.named_parameters()) w[name] = tensor;
  for (const auto& [name, tensor] : t.qat_tensors()) w[name] = tensor;
  return w;
}

struct Int8Model {
  Graph graph;
  int8::FloatProgram fp;
  int8::Int8Program q;
};

// The int8 program of a checkpoint for `arch`: with the checkpoint's QAT scales when it has them
// and `use_qat`, else calibrated on the first `n_calib` training images.
inline Expected<Int8Model> int8_model(const std::string& arch, const std::map<std::string, Tensor>& ckpt,
                                      const train::MnistData& data, bool use_qat, int64_t n_calib = 500) {
  Int8Model r;
  RLX_ASSIGN_OR_RETURN(train::ModelDef m, train::mnist_model(arch, 1));
  RLX_ASSIGN_OR_RETURN(r.graph, int8::classifier_graph(m, ckpt));
  RLX_ASSIGN_OR_RETURN(r.fp, int8::lower_to_int8(r.graph, "cortex-m"));
  RLX_ASSIGN_OR_RETURN(auto acts, train::qat_params_from_checkpoint(ckpt));
  if (use_qat) {
    if (acts.empty()) return error(ErrorCode::invalid_argument, "the checkpoint has no QAT scales");
    RLX_ASSIGN_OR_RETURN(r.q, int8::quantize_program_qat(r.fp, acts));
  } else {
    n_calib = std::min(n_calib, data.train.size());
    const int64_t f = r.fp.n_in;
    Tensor calib = Tensor::zeros(DType::f32, {n_calib, f});
    std::copy(data.train.images.data<float>(), data.train.images.data<float>() + n_calib * f, calib.data<float>());
    RLX_ASSIGN_OR_RETURN(r.q, int8::quantize_program(r.graph, r.fp, calib));
  }
  return r;
}

// Test accuracy of the host int8 reference (argmax of the int8 logits).
inline double int8_accuracy(const int8::Int8Program& q, const train::Dataset& test) {
  int64_t ok = 0;
  const int64_t f = q.n_in;
  for (int64_t i = 0; i < test.size(); ++i) {
    auto x = int8::quantize_input(q, std::span<const float>(test.images.data<float>() + i * f, static_cast<size_t>(f)));
    auto logits = int8::run_reference(q, x);
    ok += rlx_mcu_argmax_s8(logits.data(), q.n_out) == test.labels.data<int32_t>()[i];
  }
  return static_cast<double>(ok) / static_cast<double>(std::max<int64_t>(1, test.size()));
}

// The first n test images quantized for q, and the host reference's logits for them.
inline void embedded_inputs(const int8::Int8Program& q, const train::Dataset& test, int64_t n,
                            std::vector<std::vector<int8_t>>* inputs, std::vector<int32_t>* labels,
                            std::vector<std::vector<int8_t>>* want) {
  const int64_t f = q.n_in;
  for (int64_t i = 0; i < std::min(n, test.size()); ++i) {
    inputs->push_back(int8::quantize_input(q, std::span<const float>(test.images.data<float>() + i * f, static_cast<size_t>(f))));
    if (labels) labels->push_back(test.labels.data<int32_t>()[i]);
    if (want) want->push_back(int8::run_reference(q, inputs->back()));
  }
}

}  // namespace rlx::targets::testing
