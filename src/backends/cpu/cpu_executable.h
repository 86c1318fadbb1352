// The CPU executable: runs a kernel program with generated kernels loaded from the JIT, the
// native GEMM (weights pre-packed at compile time), one arena for intermediates, and the
// shared thread pool. A steady-state run allocates nothing.
#pragma once

#include <memory>

#include "rlx/device.h"
#include "rlx/graph.h"
#include "rlx/kernel_ir.h"
#include "kernels/host_families.h"

#include <span>

namespace rlx::dist {
class Communicator;
}

namespace rlx::cpu {

// Builds the executable: renders and compiles the generated kernels, binds weights and
// constants, pre-packs constant GEMM operands, and allocates the arena. Collectives in the
// program run over `comm` (null: this process alone). A native node that one of
// `device_families` claims runs there (a host device's own library: oneapi's oneDNN); the
// others run on the cpu's native kernels.
Expected<std::unique_ptr<Executable>> make_cpu_executable(kir::KernelProgram program, const Graph& g,
                                                          std::shared_ptr<dist::Communicator> comm = nullptr,
                                                          std::span<const kernels::HostFamily> device_families = {});

// What a host device's compile() does: schedules the graph (collectives early), fuses the
// epilogues of the cpu's GEMMs, applies donations, and builds the executable above.
Expected<std::unique_ptr<Executable>> compile_host_program(const Graph& g, const CompileOptions& options,
                                                           std::span<const kernels::HostFamily> device_families = {});

// Whether executables built from now on quantize each activation that int8_matmuls read once
// (by the first reader for the later ones, or by the int8_matmul that produced it, as its rows
// are final; on by default) instead of once per int8_matmul. The results are the same bits;
// the switch is for tests and measurements. Returns the previous setting.
bool set_int8_quant_reuse(bool enable);

// The family of `device_families` that claims native node `n`; nullptr when none does.
const kernels::HostFamily* claiming_family(std::span<const kernels::HostFamily> device_families, const NodeDesc& n);

}  // namespace rlx::cpu
