// targets/hexagon: ahead-of-time code generation of full-integer int8 inference for Qualcomm
// Hexagon DSPs with HVX vectors (docs/targets.md). The front half (lowering, quantization, the
// host reference) is the shared src/targets/int8 one, as for Cortex-M; the project is C for
// clang's Hexagon target (v66, 128-byte HVX), freestanding (no C library: Linux system calls for
// output, its own _start), run as a Linux user program under qemu-hexagon (Debian's qemu-user).
// The int8 dot products of rlx_mcu_kernels.h run on HVX (vrmpy: 128 byte products a packet
// into 32 int32 lanes) where the compiler targets HVX; the sums are exact, so the logits are
// bit-identical to the host reference, which the --run check confirms.
#pragma once

#include <string>
#include <vector>

#include "targets/int8/emit_c.h"
#include "targets/int8/int8.h"

namespace rlx::targets::hexagon {

// The device name used in dispatch reports and errors.
inline constexpr const char* kDeviceName = "hexagon";

// int8::lower_to_int8 for this target, with every layer kind; errors name "hexagon".
inline Expected<int8::FloatProgram> lower_for_hexagon(const Graph& g) {
  return int8::lower_to_int8(g, kDeviceName, int8::LayerSupport::all());
}

// Writes the project into `dir` (created if needed): rlx_mcu_kernels.h, model.h, model.c,
// test_inputs.h, main.c (runs each input, prints "input I label L pred P ticks 0 logits ..." on
// stdout through the write system call, exits 0), Makefile (clang --target=hexagon -mv66 -mhvx,
// ld.lld; `make run` runs it in qemu-hexagon), report.txt.
Status emit_project(const int8::Int8Program& p, const int8::EmbeddedInputs& inputs, const std::string& dir,
                    const std::string& summary = "");

// Why the Hexagon toolchain cannot be used here ("" when a clang with the Hexagon target, ld.lld
// and qemu-hexagon are all found).
std::string toolchain_missing();

struct QemuRun {
  int64_t text = 0;  // bytes of code and read-only data (llvm-size-style, from the ELF's program headers)
  std::vector<int32_t> preds;
  std::vector<std::vector<int8_t>> logits;  // per embedded input, as printed
  int hvx_packets = 0;  // HVX vector multiply packets (vrmpy) in the binary: that the HVX path was compiled
  // Instruction packets QEMU executed in the model's code (rlx_model_run and what it calls,
  // not the reporting), per embedded input: counted from a second, single-stepped run's exec
  // log (one translation block per packet). A packet issues up to 4 instructions in one cycle
  // on the DSP; QEMU has no cycle model (its cycle counter reads 0).
  int64_t packets_per_inference = 0;
  std::string output;   // everything the program printed
};

// Builds the project in `dir` with clang's Hexagon target (v66, HVX 128B, -O2) and ld.lld, and
// runs it in qemu-hexagon; parses what it printed. Errors carry the build or run output.
Expected<QemuRun> build_and_run(const std::string& dir, int timeout_s = 120);

}  // namespace rlx::targets::hexagon
