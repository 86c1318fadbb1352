// The native kernels of the splatting ops (splat_project, splat_rasterize and their backward
// ops): plain C++ over host buffers, threaded with the global thread pool, in f32 or f64
// storage (arithmetic in double). The cpu device runs them as native kernels and the
// reference interpreter runs the same code at the node's dtype; every other device reports a
// splat node illegal (src/dispatch/rules/splat_rules.cpp).
#pragma once

#include <span>

#include "rlx/device.h"

namespace rlx::splat {

// Whether a host device runs node `n` through these kernels: a splat op on f32/f64 with
// static shapes. The claim text names the kernel and the sizes; a refusal says why.
Claim claim_splat(const NodeDesc& n);

// Runs one splat node: `in` / `out` point at contiguous row-major buffers of the node's input /
// output types (checked by the ops table's inference). Errors name the op.
Status run_splat(Op op, const Attrs& attrs, std::span<const TensorType> in_types, std::span<const void* const> in,
                 std::span<const TensorType> out_types, std::span<void* const> out);

}  // namespace rlx::splat
