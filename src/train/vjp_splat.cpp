// Vector-Jacobian rules of the splatting ops: each emits the op's backward node
// (splat_project_backward, splat_rasterize_backward), which runs where the forward does and
// computes the exact gradient in the host kernels of src/splat/. An output without a gradient
// contributes zeros; radii (project) and depths/radii (rasterize input) carry none: they are
// piecewise constant or only order the Gaussians.
#include "vjp_internal.h"

namespace rlx::train::vjp {
namespace {

ValueId grad_or_zero(Ctx& c, int i) {
  if (c.out_grads[i] != kNoValue) return c.out_grads[i];
  return zeros(c.o, c.out_types[i].dtype, sizes_of(c.out_types[i]));
}

Status project(Ctx& c, std::vector<ValueId>& out) {
  // outputs: means2d 0, conics 1, depths 2, radii 3, colors 4
  std::vector<ValueId> g = c.o.op_multi(
      Op::SplatProjectBackward,
      {c.in(0), c.in(1), c.in(2), c.in(3), grad_or_zero(c, 0), grad_or_zero(c, 1), grad_or_zero(c, 2), grad_or_zero(c, 4)},
      c.attrs());
  if (!c.o.ok()) return c.o.status();
  for (int i = 0; i < 4; ++i)
    if (c.need(i)) out[i] = g[i];
  return c.o.status();
}

Status rasterize(Ctx& c, std::vector<ValueId>& out) {
  std::vector<ValueId> g = c.o.op_multi(
      Op::SplatRasterizeBackward, {c.in(0), c.in(1), c.in(2), c.in(3), c.in(4), c.in(5), c.in(6), c.g()}, c.attrs());
  if (!c.o.ok()) return c.o.status();
  // gradients: means2d 0, conics 1, colors 2, opacities 3, background 4 (input 6)
  for (int i = 0; i < 4; ++i)
    if (c.need(i)) out[i] = g[i];
  if (c.need(6)) out[6] = g[4];
  return c.o.status();
}

}  // namespace

void register_splat_vjps(std::vector<Rule>& t) {
  t[static_cast<size_t>(Op::SplatProject)] = project;
  t[static_cast<size_t>(Op::SplatRasterize)] = rasterize;
}

}  // namespace rlx::train::vjp
