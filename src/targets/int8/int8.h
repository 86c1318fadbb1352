// targets/int8: what the ahead-of-time int8 targets share (docs/targets.md): the lowering of a
// graph into a chain of int8 layers with the dispatch contract, post-training quantization with
// fixed-point requantization, and the host int8 reference, whose arithmetic is the one C
// definition in rlx_mcu_kernels.h.
//
//   graph (f32, from a model builder)  --lower_to_int8------>  FloatProgram (dense, conv2d,
//                                                               pooling, add layers)
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

enum class LayerKind : uint8_t { dense, conv2d, maxpool2d, avgpool2d, add };
const char* layer_kind_name(LayerKind k);  // "dense", "conv2d", "maxpool2d", "avgpool2d", "add"
inline bool is_pool(LayerKind k) { return k == LayerKind::maxpool2d || k == LayerKind::avgpool2d; }

// Geometry of a conv2d or pooling layer (NCHW, one example).
struct Conv2dGeometry {
  int32_t c_in = 0, h_in = 0, w_in = 0, c_out = 0, h_out = 0, w_out = 0;
  int32_t kh = 1, kw = 1, sh = 1, sw = 1, pt = 0, pl = 0;  // kernel, strides, top/left padding
  int32_t pb = 0, pr = 0;    // bottom/right padding (average pooling's count_include_pad divisor)
  int32_t groups = 1;        // conv2d: c_in / groups input channels per output channel
};

// Which layers a target runs beyond a chain of dense, conv2d (group 1) and unpadded max_pool2d
// layers, each reading the one before.
struct LayerSupport {
  bool grouped_conv = false;  // conv2d with group > 1 (depthwise)
  bool padded_pool = false;   // max_pool2d with padding or ceil_mode
  bool avg_pool = false;      // avg_pool2d, and reduce_mean over H and W (global average pooling)
  bool residual_add = false;  // add of two activations; layers may read any earlier layer's output
  static LayerSupport all() { return {true, true, true, true}; }
};

// Program values: -1 is the program's input, k >= 0 the output of layer k.
// One layer in float. dense: y = x W + b (W stored [in, out]); conv2d: NCHW, W [c_out,
// c_in / groups, kh, kw], dilation 1; pools: NCHW, dilation 1; add: y = a + b elementwise.
// dense, conv2d and add may end in ReLU.
struct FloatLayer {
  LayerKind kind = LayerKind::dense;
  std::string name;          // dense/conv2d: the weight's name without ".weight" ("fc1"); else "pool<k>",
                             // "avgpool<k>", "add<k>"
  int32_t n_in = 0, n_out = 0;  // values per example read and written
  int32_t input = -1;        // the program value it reads (a layer's inputs come before it)
  int32_t input2 = -1;       // add: the second operand
  Conv2dGeometry geo;        // conv2d and pools
  bool count_include_pad = false;  // avgpool2d: padding taps count in the divisor
  std::vector<float> w;      // dense [n_in][n_out]; conv2d [c_out][c_in / groups][kh][kw]
  std::vector<float> b;      // [output channels] (zeros when the layer has no bias)
  bool relu = false;
  ValueId out_value = kNoValue;  // the graph value holding this layer's output (for calibration)
  int32_t channels_out() const { return kind == LayerKind::dense ? n_out : geo.c_out; }
};

struct FloatProgram {
  int32_t n_in = 0;              // features of one example
  std::vector<FloatLayer> layers;  // in execution order; the last one writes the output
  DispatchReport report;         // what each graph node became on the target
};

// The inference graph of a classifier from src/train/models.h: input "images" f32 [batch,
// example_shape...], output the logits; each parameter a param node holding `weights[name]`
// (or the model's initial value when `weights` lacks it and `use_init` is set). Errors name a
// missing weight or one whose dtype or shape differs from the model's.
Expected<Graph> classifier_graph(const train::ModelDef& model, const std::map<std::string, Tensor>& weights,
                                 bool use_init = false);

// Walks a graph-level graph with one input [B, features...] and one output [B, classes] and
// matches what the int8 targets (cortex-m, fpga) run: matmul by a 2-D weight param, + bias
// param, conv2d by weight (and bias) params (dilation 1), max_pool2d, reshapes (no code: the
// activations are contiguous), relu fused into the layer whose output it alone reads; with
// `support`, grouped/depthwise conv2d, padded pools, avg_pool2d, reduce_mean over H and W, and
// the add of two activations (residual connections). Every other node is illegal, and the error
// (ErrorCode::illegal, the dispatch report's format) names each such node, its op and input
// types. Weights come from g.weights (f32). `target` names the device in the report and errors.
Expected<FloatProgram> lower_to_int8(const Graph& g, const std::string& target, const LayerSupport& support = {});

// The float graph of the program with one output per layer (each layer's output, after its
// ReLU), for a static batch; run on an rlx device for calibration and for the float reference.
Expected<std::vector<Tensor>> run_float(const Graph& g, const FloatProgram& p, const Tensor& images,
                                        const std::string& device = "cpu");

// A quantized layer, ready for the rlx_mcu_*_s8 kernel of its kind.
struct Int8Layer {
  LayerKind kind = LayerKind::dense;
  std::string name;
  int32_t n_in = 0, n_out = 0;
  int32_t input = -1, input2 = -1;  // program values read (as in FloatLayer)
  Conv2dGeometry geo;
  bool count_include_pad = false;
  std::vector<int8_t> w;         // dense [n_out][n_in]; conv2d [c_out][c_in][kh][kw]; symmetric per output channel
  std::vector<int32_t> bias;     // int32 at scale in_scale * w_scale[o], input zero point folded in
  std::vector<int32_t> mult, shift;  // per output channel: M in [2^30, 2^31), s in [1, 62]
  std::vector<float> w_scale;
  int32_t in_zp = 0;             // conv2d: the value of padding taps
  int32_t in2_zp = 0;            // add: the second operand's zero point
  int32_t in_mult = 0, in_shift = 1, in2_mult = 0, in2_shift = 1;  // add: each operand to the common scale
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
  // The activation memory plan (plan_arena): value v (-1 the input, k layer k's output) lives
  // at byte offsets[v + 1] of the static arena, 4-aligned; two values share bytes only when no
  // layer needs both (a value is live from the layer that writes it to the last that reads it,
  // the output to the end). activation_bytes is the end of the highest value.
  std::vector<int64_t> offsets;
  int64_t activation_bytes = 0;
  int64_t value_offset(int32_t v) const { return offsets.at(static_cast<size_t>(v + 1)); }
  // Bytes of the static arena: the planned activations, then the convolutions' window scratch.
  int64_t arena_bytes() const { return activation_bytes + scratch_bytes(); }
  // Bytes of the scratch a convolution gathers one output pixel's window of one group into (the
  // largest c_in / groups * kh * kw, rounded up to 4); 0 without convolutions.
  int64_t scratch_bytes() const;
  // Values per example of value v (-1: n_in).
  int32_t value_size(int32_t v) const { return v < 0 ? n_in : layers.at(static_cast<size_t>(v)).n_out; }
};

// Lays out the activations of `p` in its arena (sets offsets and activation_bytes): values
// largest first, each at the lowest 4-aligned offset that overlaps no value live at the same
// time (TFLite's greedy-by-size planner).
void plan_arena(Int8Program& p);

// real multiplier (> 0, < 2^31) -> (M, s) with M in [2^30, 2^31), s in [1, 62] and
// M * 2^-s closest to it; multipliers below 2^-31 become (0, 1), which outputs the zero point.
Status quantize_multiplier(double real, int32_t* mult, int32_t* shift);

// Post-training quantization: weights per output channel, activations per tensor from the
// min/max of the float model's layer outputs on `calib_images` ([N, features...], f32).
Expected<Int8Program> quantize_program(const Graph& g, const FloatProgram& p, const Tensor& calib_images,
                                       const std::string& device = "cpu");

// Quantization with the activation scales of quantization-aware training (train/qat.h) instead
// of calibration: `acts` maps each site to its scale and zero point: "<layer>.input" for every
// dense and conv2d layer (the scale of the value it reads; a pool keeps its input's) and
// "output" for the last layer's. Weights per output channel as quantize_program does them.
// Errors name a missing site, and a value no site covers (an operand of a residual add that
// no dense or conv2d layer reads): such programs are quantized by calibration.
Expected<Int8Program> quantize_program_qat(const FloatProgram& p, const std::map<std::string, train::ActQuantParams>& acts);

// f32 example (n_in values) -> int8 input with the program's input scale and zero point.
std::vector<int8_t> quantize_input(const Int8Program& p, std::span<const float> x);

// The host int8 reference: int8 input (n_in) -> int8 logits (n_out), through rlx_mcu_kernels.h.
std::vector<int8_t> run_reference(const Int8Program& p, std::span<const int8_t> input);

}  // namespace rlx::targets::int8
