// Quantization-aware training (QAT) for the int8 targets (docs/training.md, docs/targets.md).
//
// The forward of a classifier is emitted with fake_quantize (ops table: quantize-dequantize
// with a straight-through gradient) exactly where the int8 flow of src/targets/int8 quantizes:
//   - every dense layer (matmul by a 2-D parameter) and conv2d layer (by a parameter) reads its
//     input through fake_quantize with a per-tensor asymmetric int8 scale and zero point (a
//     "site", named "<layer>.input", <layer> being the weight's name without ".weight"); the
//     first site is the network input, and each later one is the previous layer's output (a
//     max-pool or reshape in between does not change the quantization: max commutes with a
//     monotone rounding);
//   - every such layer's weight goes through fake_quantize per output channel, symmetric in
//     [-127, 127] with scale max|w| / 127 (as quantize_program quantizes weights);
//   - the logits go through the "output" site (the last layer's int8 output).
// Each site's range is tracked during training as an exponential moving average of the batch
// min/max (the first step takes the batch's own), inside the step graph; the trainer turns the
// tracked range into a scale and zero point with act_quant_params, the same function the int8
// targets use, so that evaluation, the checkpoint and the exported int8 program share them.
#pragma once

#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "models.h"

namespace rlx::train {

struct QatConfig {
  bool enabled = false;     // --qat int8
  double momentum = 0.01;   // weight of each batch's min/max in the moving average
};

// Asymmetric int8 activation parameters over [lo, hi], the range widened to include 0 (ReLU's
// floor and convolution padding must be exact): scale = float((hi - lo) / 255), zero_point =
// clamp(round(-128 - lo / scale), -128, 127). The int8 targets' calibration uses this too.
struct ActQuantParams {
  float scale = 1.0f;
  int32_t zero_point = 0;
};
ActQuantParams act_quant_params(double lo, double hi);

// The tracked range of one site.
struct QatRange {
  float lo = 0.0f, hi = 0.0f;
};

// The activation sites of `model` in forward order ("<layer>.input" ..., "output"), found by
// emitting its forward once on a scratch graph. Errors: the model's forward fails to build.
Expected<std::vector<std::string>> qat_sites(const ModelDef& model);

// Gives the (scale, zero_point) values, each f32 [], for site `site` whose pre-quantization
// value is `x`; it may emit ops (the step graph computes them from the moving average).
using QatSiteFn = std::function<std::pair<ValueId, ValueId>(OpBuilder& o, int site, ValueId x)>;

// Emits model.forward(images, params) with fake_quantize at the sites and on the weights as
// described at the top of this file; returns the logits (after the "output" site).
ValueId qat_forward(OpBuilder& o, const ModelDef& model, ValueId images, std::span<const ValueId> params,
                    const QatSiteFn& site_fn);

// The step graph's site function: from the running range (lo, hi inputs, f32 []) and the
// batch's min/max, the updated range (the batch's own when step <= 1, else the moving average
// with `momentum`), appended to new_lo / new_hi, and the scale and zero point computed from it
// in the graph as act_quant_params does. With `dp_group` >= 0 (data parallelism) the batch's
// min and max are all-reduced (min, max) over that communicator group first, so every rank
// tracks the range of the global batch.
std::pair<ValueId, ValueId> qat_track_range(OpBuilder& o, ValueId x, ValueId lo, ValueId hi, ValueId step,
                                            double momentum, ValueId* new_lo, ValueId* new_hi, int dp_group = -1);

// Checkpoint tensor names of a site: "qat.<site>.scale", ".zero_point" (f32 [], integral),
// ".min", ".max" (the tracked range).
std::string qat_tensor_name(const std::string& site, const char* what);

// The per-site scales and zero points a QAT checkpoint carries, by site name; empty when the
// checkpoint has none. Errors: a site with a scale but no zero point (or the reverse), or a
// value that is not a finite f32 scalar (scale > 0, zero point an integer in [-128, 127]).
Expected<std::map<std::string, ActQuantParams>> qat_params_from_checkpoint(const std::map<std::string, Tensor>& tensors);

}  // namespace rlx::train
