// The scheduler: turns a verified primitive-level graph with static shapes into a kernel
// program. Every value is either materialized in a buffer or inlined into the kernels that
// read it; fused groups of primitives become generated kernels (loop nests over scalar
// expressions), nodes marked native become native kernel steps.
#pragma once

#include "rlx/graph.h"
#include "rlx/kernel_ir.h"

namespace rlx::sched {

struct ScheduleOptions {
  // Largest number of adjacent domain loops merged into one (0: no limit).
  int max_loop_merge = 0;
};

Expected<kir::KernelProgram> schedule(const Graph& g, const ScheduleOptions& options = {});

// Assigns arena offsets to intermediate buffers by liveness (first fit, 64-byte aligned)
// and sets program.arena_bytes.
void plan_memory(kir::KernelProgram& program);

}  // namespace rlx::sched
