// The oneapi device's native kernels: oneDNN primitives (Debian's libdnnl, oneDNN 2.6) run on
// host memory through the host-family interface (host_families.h), one family per op family:
// - contraction: matmul and dot that map onto one batched, strided product without a third
//   operand (kernels/gemm_plan.h) -> dnnl::matmul, operands described by their strides (no copy);
// - conv: conv2d (any group, stride, dilation, padding, optional bias) and avg_pool2d without
//   dilation or ceil mode -> dnnl::convolution_forward, pooling_forward (not max_pool2d:
//   oneDNN's max ignores NaN, where rlx and PyTorch propagate it);
// - normalization: softmax and log_softmax over one axis, layer_norm with scale and bias over
//   the trailing axes -> softmax_forward, logsoftmax_forward, layer_normalization_forward.
// f32 only; a node outside these is refused with the reason (and runs on the cpu's own native
// kernels or generated code). Primitives are created per run from oneDNN's primitive cache; the
// engine is oneDNN's CPU engine (Debian's build has an OpenCL GPU engine too, which needs an
// Intel GPU driver: onednn_engine_summary says what was found).
#pragma once

#include <span>
#include <string>

#include "kernels/host_families.h"

namespace rlx::kernels {

// The three families above.
std::span<const HostFamily> onednn_families();
// The family that takes op family `f`; nullptr when oneDNN runs none of it here.
const HostFamily* onednn_family(OpFamily f);
// "oneDNN 2.6.3, CPU engine (avx512_core_amx), 0 GPU engines": for `rlx devices`.
std::string onednn_engine_summary();

}  // namespace rlx::kernels
