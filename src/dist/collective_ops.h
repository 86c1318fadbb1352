// Running the collective graph ops (all_reduce, all_gather, reduce_scatter, broadcast) over a
// communicator, on dense host buffers. Shared by the reference interpreter and the CPU device
// so that both give exactly the same result (the reductions are the communicator's).
#pragma once

#include <string_view>

#include "rlx/comm.h"
#include "rlx/graph.h"

namespace rlx::dist {

// Runs collective `op` with attributes `attrs` on `in` (dtype, static sizes `in_sizes`) into
// `out` (sizes `out_sizes`, distinct from `in`). Checks that the graph's `ranks` attribute
// matches the communicator; errors are prefixed with `label` (the node).
Status run_collective(Communicator& comm, Op op, const Attrs& attrs, DType dtype, const Sizes& in_sizes,
                      const void* in, const Sizes& out_sizes, void* out, std::string_view label);

// The communicator a compiled graph without one runs its collectives on: a single process.
Communicator& default_communicator();

}  // namespace rlx::dist
