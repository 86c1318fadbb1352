// The scheduler: turns a verified primitive-level graph with static shapes into a kernel
// program. Every value is either materialized in a buffer or inlined into the kernels that
// read it; fused groups of primitives become generated kernels (loop nests over scalar
// expressions), nodes marked native become native kernel steps.
#pragma once

#include <functional>

#include "rlx/graph.h"
#include "rlx/kernel_ir.h"

namespace rlx::sched {

struct ScheduleOptions {
  // Largest number of adjacent domain loops merged into one (0: no limit).
  int max_loop_merge = 0;
  // Whether native kernel `n` (its input types the graph's) can read input `input` from f32
  // storage, rounding each value to f16 as it reads it (the CPU GEMM, while packing). Where it
  // can, a cast of an f32 value u to f16, or u's round trip through f16 (autocast's widened
  // form) where u is a graph input or parameter, that feeds that input is not materialized for
  // it: the native reads u's buffer, and its input type says f16. Unset: natives read the
  // values the graph gives them.
  std::function<bool(const kir::NativeKernel& n, int input)> native_reads_f32_as_f16;
};

Expected<kir::KernelProgram> schedule(const Graph& g, const ScheduleOptions& options = {});

// Moves elementwise kernels that only transform a native kernel's output into that native
// kernel as its epilogue (for natives `accepts` says can run one), then re-plans memory.
void fuse_native_epilogues(kir::KernelProgram& program,
                           const std::function<bool(const kir::NativeKernel&)>& accepts);

// Lets output k reuse the memory of input j for each (k, j): the caller may then pass the
// same tensor as both. Reorders steps where needed; refuses (with the reason) when the
// kernel writing the output reads other elements of the input, or when another step must
// read the input after it is overwritten.
Status apply_donations(kir::KernelProgram& program, const std::vector<std::pair<int, int>>& donations);

// Reorders g's nodes (a valid topological order either way) so that each collective, with
// the nodes that only feed it, comes right after the last other value it depends on: an
// executable that runs collectives asynchronously then overlaps them with what follows
// (src/passes/collective_order.cpp). Deterministic: every rank gets the same order.
void order_collectives_early(Graph& g);

// Assigns arena offsets to intermediate buffers by liveness (first fit, 64-byte aligned)
// and sets program.arena_bytes.
void plan_memory(kir::KernelProgram& program);

}  // namespace rlx::sched
