// targets/cortex_m: ahead-of-time code generation of full-integer int8 inference for Cortex-M
// microcontrollers (docs/targets.md).
//
//   graph (f32, from a model builder)  --lower_for_cortex_m-->  FloatProgram (dense, conv2d,
//                                                                maxpool2d layers)
//   FloatProgram + calibration images  --quantize_program---->  Int8Program (int8 weights, int32
//                                                                biases, fixed-point multipliers)
//   Int8Program                        --emit_project--------->  C sources, linker script, startup,
//                                                                Makefile (builds with
//                                                                arm-none-eabi-gcc, runs in QEMU)
//
// The integer arithmetic is rlx_mcu_kernels.h, which run_reference() compiles on the host and
// emit_project() writes verbatim into the project, so the two agree bit for bit by construction.
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

namespace rlx::targets::cortex_m {

// The device name used in dispatch reports and errors.
inline constexpr const char* kDeviceName = "cortex-m";

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
  DispatchReport report;         // what each graph node became on the cortex-m target
};

// The inference graph of a classifier from src/train/models.h: input "images" f32 [batch,
// example_shape...], output the logits; each parameter a param node holding `weights[name]`
// (or the model's initial value when `weights` lacks it and `use_init` is set). Errors name a
// missing weight or one whose dtype or shape differs from the model's.
Expected<Graph> classifier_graph(const train::ModelDef& model, const std::map<std::string, Tensor>& weights,
                                 bool use_init = false);

// Walks a graph-level graph with one input [B, features...] and one output [B, classes] and
// matches what the target runs: matmul by a 2-D weight param, + bias param, conv2d by weight
// (and bias) params (group 1, dilation 1), relu after either, max_pool2d without padding,
// reshapes that flatten. Every other node is illegal, and the error (ErrorCode::illegal,
// the dispatch report's format) names each such node, its op and input types. Weights come
// from g.weights (f32).
Expected<FloatProgram> lower_for_cortex_m(const Graph& g);

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

// f32 example (n_in values) -> int8 input with the program's input scale and zero point.
std::vector<int8_t> quantize_input(const Int8Program& p, std::span<const float> x);

// The host int8 reference: int8 input (n_in) -> int8 logits (n_out), through rlx_mcu_kernels.h.
std::vector<int8_t> run_reference(const Int8Program& p, std::span<const int8_t> input);

// How the generated main exercises the model: these int8 inputs (each n_in) with labels.
struct EmbeddedInputs {
  std::vector<std::vector<int8_t>> inputs;
  std::vector<int32_t> labels;  // -1 when unknown
};

// Writes the project into `dir` (created if needed): rlx_mcu_kernels.h, model.h, model.c
// (const weights, the static arena, rlx_model_run), test_inputs.h, main.c (runs each input,
// prints "input I label L pred P logits ..." through semihosting, exits 0), startup.c,
// link.ld (256K flash at 0x0, 64K RAM at 0x20000000), Makefile (targets m3 and m4),
// report.txt (the dispatch report and the quantization parameters). `summary` lines are
// appended to report.txt.
Status emit_project(const Int8Program& p, const EmbeddedInputs& inputs, const std::string& dir,
                    const std::string& summary = "");

// The text of rlx_mcu_kernels.h (embedded at build time).
std::string_view kernels_text();

// --- building and running the emitted project (tests, `rlx codegen --run`) ---

// Why the Cortex-M toolchain cannot be used here ("" when arm-none-eabi-gcc, arm-none-eabi-size
// and qemu-system-arm are all on PATH).
std::string toolchain_missing();

struct QemuRun {
  std::string cpu;                          // "m3" or "m4"
  std::string machine;                      // "mps2-an385" / "mps2-an386"
  int64_t text = 0, data = 0, bss = 0;      // arm-none-eabi-size of the ELF
  int64_t flash_bytes() const { return text + data; }
  int64_t ram_bytes() const { return data + bss; }
  std::vector<int32_t> preds;
  std::vector<std::vector<int8_t>> logits;  // per embedded input, as printed by the firmware
  // Per embedded input: instructions QEMU executed for one inference, measured with SysTick
  // under -icount shift=0 (25 MHz SysTick, 1 ns per instruction: 40 per tick, so +-40).
  std::vector<int64_t> instructions;
  std::string output;                       // everything QEMU printed
};

// Builds `cpu` ("m3" or "m4") with make in `dir` and runs it in qemu-system-arm (mps2-an385 or
// mps2-an386) with semihosting; parses what the firmware printed. Errors carry the build or
// run output.
Expected<QemuRun> build_and_run(const std::string& dir, const std::string& cpu, int timeout_s = 60);

}  // namespace rlx::targets::cortex_m
