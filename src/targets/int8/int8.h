// targets/int8: what the ahead-of-time int8 targets share (docs/targets.md): the lowering of a
// graph into a chain of int8 layers with the dispatch contract, post-training quantization with
// fixed-point requantization, and the host int8 reference, whose arithmetic is the one C
// definition in rlx_mcu_kernels.h.
//
//   graph (f32, from a model builder)  --lower_to_int8------>  FloatProgram (dense, conv2d,
//                                                               maxpool2d layers)
//   FloatProgram + calibration images  --quantize_program--->  Int8Program (int8 weights, int32
//                                                               biases, fixed-point multipliers)
//   Int8Program + int8 input           --run_reference------>  int8 logits (rlx_mcu_kernels.h)
//
// Targets: cortex-m (src/targets/cortex_m, C for microcontrollers) and fpga (src/targets/fpga,
// SystemVerilog), each bit-identical to run_reference.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "rlx/dispatch.h"
#include "rlx/graph.h"
#include "rlx/status.h"
#include "rlx/tensor.h"
#include "train/models.h"
#include "train/qat.h"

namespace rlx::targets::int8 {

enum class LayerKind : uint8_t { dense, conv2d, maxpool2d };
const char* layer_kind_name(LayerKind k);  // "dense", "conv2d", "maxpool2d"

// Geometry of a conv2d or maxpool2d layer (NCHW, one example).
struct Conv2dGeometry {
  int32_t c_in = 0, h_in = 0, w_in = 0, c_out = 0, h_out = 0, w_out = 0;
  int32_t kh = 1, kw = 1, sh = 1, sw = 1, pt = 0, pl = 0;  // kernel, strides, top/left padding
};

// One layer in float. dense: y = x W + b (W stored [in, out]); conv2d: NCHW, W [c_out, c_in,
// kh, kw], group 1, dilation 1; maxpool2d: no padding. dense and conv2d may end in ReLU.
struct FloatLayer {
  LayerKind kind = LayerKind::dense;
  std::string name;          // dense/conv2d: the weight's name without ".weight" ("fc1"); pool: "pool<k>"
  int32_t n_in = 0, n_out = 0;  // values per example read and written
  Conv2dGeometry geo;        // conv2d and maxpool2d
  std::vector<float> w;      // dense [n_in][n_out]; conv2d [c_out][c_in][kh][kw]
  std::vector<float> b;      // [output channels] (zeros when the layer has no bias)
  bool relu = false;
  ValueId out_value = kNoValue;  // the graph value holding this layer's output (for calibration)
  int32_t channels_out() const { return kind == LayerKind::dense ? n_out : geo.c_out; }
};

struct FloatProgram {
  int32_t n_in = 0;              // features of one example
  std::vector<FloatLayer> layers;
  DispatchReport report;         // what each graph node became on the target
};

// The inference graph of a classifier from src/train/models.h: input "images" f32 [batch,
// example_shape...], output the logits; each parameter a param node holding `weights[name]`
// (or the model's initial value when `weights` lacks it and `use_init` is set). Errors name a
// missing weight or one whose dtype or shape differs from the model's.
Expected<Graph> classifier_graph(const train::ModelDef& model, const std::map<std::string, Tensor>& weights,
                                 bool use_init = false);

// Walks a graph-level graph with one input [B, features...] and one output [B, classes] and
// matches what the int8 targets (cortex-m, fpga) run: matmul by a 2-D weight param, + bias param, conv2d by weight
// (and bias) params (group 1, dilation 1), relu after either, max_pool2d without padding,
// reshapes that flatten. Every other node is illegal, and the error (ErrorCode::illegal,
// the dispatch report's format) names each such node, its op and input types. Weights come
// from g.weights (f32). `target` names the device in the report and the errors.
Expected<FloatProgram> lower_to_int8(const Graph& g, const std::string& target);

// The float graph of the program with one output per layer (each layer's output, after its
// ReLU), for a static batch; run on an rlx device for calibration and for the float reference.
Expected<std::vector<Tensor>> run_float(const Graph& g, const FloatProgram& p, const Tensor& images,
                                        const std::string& device = "cpu");

// A quantized layer, ready for rlx_mcu_dense_s8 / rlx_mcu_conv2d_s8 / rlx_mcu_maxpool2d_s8.
struct Int8Layer {
  LayerKind kind = LayerKind::dense;
  std::string name;
  int32_t n_in = 0, n_out = 0;
  Conv2dGeometry geo;
  std::vector<int8_t> w;         // dense [n_out][n_in]; conv2d [c_out][c_in][kh][kw]; symmetric per output channel
  std::vector<int32_t> bias;     // int32 at scale in_scale * w_scale[o], input zero point folded in
  std::vector<int32_t> mult, shift;  // per output channel: M in [2^30, 2^31), s in [1, 62]
  std::vector<float> w_scale;
  int32_t in_zp = 0;             // conv2d: the value of padding taps
  float out_scale = 1.0f;
  int32_t out_zp = 0, act_min = -128, act_max = 127;
  bool relu = false;
};

struct Int8Program {
  int32_t n_in = 0, n_out = 0;
  float in_scale = 1.0f;
  int32_t in_zp = 0;
  std::vector<Int8Layer> layers;
  DispatchReport report;
  bool from_qat = false;  // activation scales from quantization-aware training (else calibration)
  // Bytes of the static arena: two ping-pong activation buffers laid out back to back, each
  // as large as the largest activation it holds (layer k reads buffer k % 2, writes the other),
  // then the convolutions' window scratch.
  int64_t arena_bytes() const;
  // Bytes of the scratch a convolution gathers one output pixel's window into (the largest
  // c_in * kh * kw, rounded up to 4); 0 without convolutions.
  int64_t scratch_bytes() const;
  // Bytes of ping-pong buffer b (0: the input and what layers 1, 3, ... write; 1: layers 0, 2, ...).
  int64_t buffer_bytes(int b) const;
};

// real multiplier (> 0, < 2^31) -> (M, s) with M in [2^30, 2^31), s in [1, 62] and
// M * 2^-s closest to it; multipliers below 2^-31 become (0, 1), which outputs the zero point.
Status quantize_multiplier(double real, int32_t* mult, int32_t* shift);

// Post-training quantization: weights per output channel, activations per tensor from the
// min/max of the float model's layer outputs on `calib_images` ([N, features...], f32).
Expected<Int8Program> quantize_program(const Graph& g, const FloatProgram& p, const Tensor& calib_images,
                                       const std::string& device = "cpu");

// Quantization with the activation scales of quantization-aware training (train/qat.h) instead
// of calibration: `acts` maps each site to its scale and zero point: "<layer>.input" for every
// dense and conv2d layer (the first one is the program's input, each later one the previous
// dense/conv2d layer's output, a max-pool in between keeping it) and "output" for the last
// layer's. Weights per output channel as quantize_program does them. Errors name a missing site.
Expected<Int8Program> quantize_program_qat(const FloatProgram& p, const std::map<std::string, train::ActQuantParams>& acts);

// f32 example (n_in values) -> int8 input with the program's input scale and zero point.
std::vector<int8_t> quantize_input(const Int8Program& p, std::span<const float> x);

// The host int8 reference: int8 input (n_in) -> int8 logits (n_out), through rlx_mcu_kernels.h.
std::vector<int8_t> run_reference(const Int8Program& p, std::span<const int8_t> input);

}  // namespace rlx::targets::int8
