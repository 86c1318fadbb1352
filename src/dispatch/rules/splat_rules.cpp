// 3D Gaussian splatting (the splat family) has no decomposition into primitives: tile binning
// and depth sorting are data-dependent, and the projection's per-Gaussian culling branches. A
// device runs it natively (cpu and ref through the host kernels of src/splat/, opencl and cuda
// through the kernels of src/backends/splat_source.cpp) or not at all; this rule gives the
// common-IR path a clear refusal, with no hidden round trip to the host.
#include "rules.h"

namespace rlx::dispatch {
namespace {

Status refuse(OpBuilder&, const RuleNode& n, std::vector<ValueId>&) {
  const bool raster = n.op == Op::SplatRasterize || n.op == Op::SplatRasterizeBackward;
  return error(ErrorCode::illegal, "no native splatting kernel on this device: ", op_name(n.op),
               raster ? " (tile binning and depth sorting)" : " (per-Gaussian culling)",
               " has no decomposition into primitives; it runs natively on cpu, ref, opencl and cuda");
}

}  // namespace

void register_splat_rules(std::vector<OpRules>& t) {
  set_family_decompose(t, OpFamily::splat, refuse);
}

}  // namespace rlx::dispatch
