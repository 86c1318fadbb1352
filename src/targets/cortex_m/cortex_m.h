// targets/cortex_m: ahead-of-time code generation of full-integer int8 inference for Cortex-M
// microcontrollers (docs/targets.md).
//
//   graph (f32, from a model builder)  --lower_for_cortex_m-->  FloatProgram (dense, conv2d,
//                                                                pooling, add layers)
//   FloatProgram + calibration images  --quantize_program---->  Int8Program (int8 weights, int32
//                                                                biases, fixed-point multipliers)
//   Int8Program                        --emit_project--------->  C sources, linker script, startup,
//                                                                Makefile (builds with
//                                                                arm-none-eabi-gcc, runs in QEMU)
//
// The lowering, quantization and host reference are the shared src/targets/int8 ones; the integer
// arithmetic is rlx_mcu_kernels.h, which run_reference() compiles on the host and emit_project()
// writes verbatim into the project, so the two agree bit for bit by construction.
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
#include "targets/int8/emit_c.h"
#include "targets/int8/int8.h"
#include "train/models.h"

namespace rlx::targets::cortex_m {

// The device name used in dispatch reports and errors.
inline constexpr const char* kDeviceName = "cortex-m";

// The shared int8 front half (src/targets/int8), under the names this target always used.
using int8::LayerKind;
using int8::layer_kind_name;
using int8::is_pool;
using int8::Conv2dGeometry;
using int8::FloatLayer;
using int8::FloatProgram;
using int8::classifier_graph;
using int8::run_float;
using int8::Int8Layer;
using int8::Int8Program;
using int8::quantize_multiplier;
using int8::quantize_program;
using int8::quantize_input;
using int8::run_reference;

// int8::lower_to_int8 for this target, with every layer kind (grouped and depthwise conv2d,
// padded and average pooling, residual adds): errors and the report name "cortex-m".
inline Expected<FloatProgram> lower_for_cortex_m(const Graph& g) {
  return int8::lower_to_int8(g, kDeviceName, int8::LayerSupport::all());
}

// The embedded inputs and the kernels' text are the shared C emitter's (targets/int8/emit_c.h).
using int8::EmbeddedInputs;
using int8::kernels_text;

// Writes the project into `dir` (created if needed): rlx_mcu_kernels.h, model.h, model.c
// (const weights, the static arena, rlx_model_run), test_inputs.h, main.c (runs each input,
// prints "input I label L pred P logits ..." through semihosting, exits 0), startup.c,
// link.ld (256K flash at 0x0, 64K RAM at 0x20000000), link_m0.ld (16K RAM), Makefile (targets
// m3 and m4, and m0),
// report.txt (the dispatch report and the quantization parameters). `summary` lines are
// appended to report.txt.
Status emit_project(const Int8Program& p, const EmbeddedInputs& inputs, const std::string& dir,
                    const std::string& summary = "");

// --- building and running the emitted project (tests, `rlx codegen --run`) ---

// Why the Cortex-M toolchain cannot be used here ("" when arm-none-eabi-gcc, arm-none-eabi-size
// and qemu-system-arm are all on PATH).
std::string toolchain_missing();

struct QemuRun {
  std::string cpu;                          // "m0", "m3" or "m4"
  std::string machine;                      // "microbit" / "mps2-an385" / "mps2-an386"
  int64_t text = 0, data = 0, bss = 0;      // arm-none-eabi-size of the ELF
  int64_t flash_bytes() const { return text + data; }
  int64_t ram_bytes() const { return data + bss; }
  std::vector<int32_t> preds;
  std::vector<std::vector<int8_t>> logits;  // per embedded input, as printed by the firmware
  // Per embedded input: instructions QEMU executed for one inference, measured with SysTick
  // under -icount shift=0 (1 ns per instruction; SysTick at 25 MHz on mps2: 40 per tick, so
  // +-40; 16 MHz on microbit: 62.5 per tick).
  std::vector<int64_t> instructions;
  std::string output;                       // everything QEMU printed
};

// Builds `cpu` ("m0", "m3" or "m4") with make in `dir` and runs it in qemu-system-arm
// (microbit: nRF51 with 16K of RAM, linked with link_m0.ld; mps2-an385; mps2-an386) with
// semihosting; parses what the firmware printed. Errors carry the build or run output (an M0
// link fails when the arena and the 4K stack exceed 16K).
Expected<QemuRun> build_and_run(const std::string& dir, const std::string& cpu, int timeout_s = 60);

}  // namespace rlx::targets::cortex_m
