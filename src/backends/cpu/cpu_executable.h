// The CPU executable: runs a kernel program with generated kernels loaded from the JIT, the
// native GEMM (weights pre-packed at compile time), one arena for intermediates, and the
// shared thread pool. A steady-state run allocates nothing.
#pragma once

#include <memory>

#include "rlx/device.h"
#include "rlx/graph.h"
#include "rlx/kernel_ir.h"

namespace rlx::dist {
class Communicator;
}

namespace rlx::cpu {

// Builds the executable: renders and compiles the generated kernels, binds weights and
// constants, pre-packs constant GEMM operands, and allocates the arena. Collectives in the
// program run over `comm` (null: this process alone).
Expected<std::unique_ptr<Executable>> make_cpu_executable(kir::KernelProgram program, const Graph& g,
                                                          std::shared_ptr<dist::Communicator> comm = nullptr);

}  // namespace rlx::cpu
