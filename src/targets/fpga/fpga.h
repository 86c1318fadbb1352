// targets/fpga: ahead-of-time generation of an int8 inference accelerator in synthesizable
// SystemVerilog (docs/targets.md, FPGA section).
//
// The FPGA target shares the front half with the Cortex-M target (src/targets/int8): the
// lowering of the graph into int8 layers with the dispatch contract, the post-training
// quantization (Int8Program) and the host int8 reference (rlx_mcu_kernels.h). What it adds
// is the hardware: a parameterized MAC array of P int8 lanes with int32 accumulators, a weight
// memory initialized from .mem files ($readmemh), a controller FSM that walks the layers,
// valid/ready byte streams in and out, and requantization written to be bit-identical to
// rlx_mcu_requantize. Programs with conv2d / max_pool2d layers get a tap walker that gathers each
// output pixel's window into the activation banks (rlx_mcu_conv2d_s8's order) and max pooling.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "rlx/graph.h"
#include "rlx/status.h"
#include "targets/int8/int8.h"

namespace rlx::targets::fpga {

// The device name used in dispatch reports and errors.
inline constexpr const char* kDeviceName = "fpga";

// The shared int8 lowering (int8::lower_to_int8): the generated hardware runs the same
// layers (dense, conv2d with group 1 and dilation 1, max_pool2d without padding, fused ReLU,
// flatten). Any other node is illegal, and the error (ErrorCode::illegal, the dispatch report's
// format) names each one for the fpga target. The report's device is "fpga".
Expected<int8::FloatProgram> lower_for_fpga(const Graph& g);

struct Options {
  int32_t lanes = 8;  // P: int8 multipliers working in parallel (a power of two, 1..64)
};

// Sizes of what the generator laid out (also written to report.txt).
struct Layout {
  int32_t lanes = 0;
  int64_t weight_words = 0;      // depth of the weight memory (each word P int8 weights)
  int64_t channels = 0;          // entries of the bias / multiplier / shift memories
  int64_t act_words = 0;         // depth of each activation bank per ping-pong buffer
  int64_t col_words = 0;         // depth of each bank's window region (conv2d; 0 without)
  int64_t cycles_estimate = 0;   // controller cycles per inference (input + MACs + requant + output)
};

// Computes the layout of `p` for `o` (errors: lanes not a power of two in 1..64, more than 15
// layers). cycles_estimate is exact: the tests check the simulation against it.
Expected<Layout> layout(const int8::Int8Program& p, const Options& o);

// Writes the design into `dir` (created if needed): rlx_fpga_top.sv (the accelerator),
// weights.mem, bias.mem, mult.mem, shift.mem ($readmemh files the design reads at elaboration,
// relative to the working directory), inputs.mem (the embedded int8 test inputs, n_in bytes
// each), tb.cpp (a Verilator harness: streams each input in, reads the logits out, prints
// "input I logits ... cycles C"), Makefile (verilator, yosys) and report.txt (the dispatch
// report, the quantization parameters, `summary`).
Status emit_design(const int8::Int8Program& p, const Options& o, const std::vector<std::vector<int8_t>>& inputs,
                   const std::string& dir, const std::string& summary = "");

// --- simulation and synthesis (tests, `rlx codegen fpga --run`) ---

// Why Verilator cannot be used here ("" when verilator is on PATH).
std::string verilator_missing();
// Why Yosys cannot be used here ("" when yosys is on PATH).
std::string yosys_missing();

struct SimRun {
  std::vector<std::vector<int8_t>> logits;  // per embedded input, as the simulation streamed them out
  std::vector<int64_t> cycles;              // clock cycles from the first input byte to the last logit
  std::string output;
};

// Builds the emitted design with Verilator (in dir/obj_dir) and runs the harness in `dir`.
Expected<SimRun> simulate(const std::string& dir, int timeout_s = 300);

struct SynthStats {
  int64_t cells = 0;        // gate-level cells of the logic (memories left as memory cells)
  int64_t multipliers = 0;  // $mul cells at word level (DSP-like multipliers)
  std::map<std::string, int64_t> multiplier_shapes;  // "8x8" -> how many (operand widths in bits)
  int64_t memory_bits = 0;  // bits of the inferred memories
  int64_t memories = 0;
  std::map<std::string, std::string> memory_shapes;  // "wmem" -> "64x12704" (width x depth, after
                                                     // yosys dropped data bits that are constant)
  std::string stat;         // yosys' stat of the gate-level netlist
};

// Synthesizes dir/rlx_fpga_top.sv with yosys' generic flow (synth's coarse part, then techmap
// and abc of the logic; memories stay memory cells since the generic flow has no RAM primitives).
Expected<SynthStats> synthesize(const std::string& dir, int timeout_s = 300);

}  // namespace rlx::targets::fpga
