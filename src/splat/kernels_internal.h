// Shared declarations of the splatting kernels (one file per op and pass).
#pragma once

#include <cstdint>
#include <vector>

#include "project_math.h"
#include "rlx/attrs.h"
#include "rlx/status.h"

namespace rlx::splat::detail {

// The camera of a node's attributes (checked by the ops table's inference).
Camera camera_of(const Attrs& a);

// splat_project: n Gaussians, k SH coefficients per channel.
template <class F>
void project_forward(const Camera& c, int64_t n, int k, const F* means, const F* log_scales, const F* quats,
                     const F* sh, F* means2d, F* conics, F* depths, F* radii, F* colors);
// splat_project_backward: the output gradients (g_*) give the parameter gradients (d_*).
template <class F>
void project_backward(const Camera& c, int64_t n, int k, const F* means, const F* log_scales, const F* quats,
                      const F* sh, const F* g_means2d, const F* g_conics, const F* g_depths, const F* g_colors,
                      F* d_means, F* d_log_scales, F* d_quats, F* d_sh);

// Tile lists: the Gaussians overlapping each tile (by the square of side 2 radius around its
// 2D mean), front to back (ascending depth, ties by index).
struct Bins {
  int64_t tile = 16, tiles_x = 0, tiles_y = 0;
  std::vector<int64_t> offsets;  // tiles + 1: tile t's entries are [offsets[t], offsets[t + 1])
  std::vector<int32_t> ids;      // Gaussian index of each entry
};
template <class F>
Expected<Bins> bin_and_sort(int64_t n, const F* means2d, const F* depths, const F* radii, int64_t width,
                            int64_t height, int64_t tile);

// The inputs of splat_rasterize.
template <class F>
struct RasterIn {
  int64_t n, width, height, tile;
  const F *means2d, *conics, *colors, *opacities, *depths, *radii, *background;
};

// The compositing constants of the original 3DGS.
inline constexpr double kMaxAlpha = 0.99;
inline constexpr double kMinAlpha = 1.0 / 255.0;
inline constexpr double kMinTransmittance = 1e-4;

// Per Gaussian, a power below which alpha = min(0.99, o exp(power)) is surely under 1/255:
// ln(1 / (255 o)) less a margin, +inf when o <= 0. Most (pixel, Gaussian) pairs of a tile are
// far apart, and this skips them without an exp; pairs near the threshold still take the
// exact test, so the result is the same as testing every alpha.
template <class F>
std::vector<double> skip_powers(int64_t n, const F* opacities);

// One tile's Gaussians gathered front to back into contiguous records (what the original 3DGS
// stages in shared memory), so the per-pixel loops read memory in order.
struct TileGaussian {
  double mx, my, a, b, c, o, skip, col[3];
};
template <class F>
void collect(const RasterIn<F>& r, const int32_t* ids, int64_t count, const std::vector<double>& skip,
             std::vector<TileGaussian>& out) {
  out.resize(static_cast<size_t>(count));
  for (int64_t e = 0; e < count; ++e) {
    const int64_t g = ids[e];
    out[e] = TileGaussian{r.means2d[g * 2], r.means2d[g * 2 + 1], r.conics[g * 3], r.conics[g * 3 + 1],
                          r.conics[g * 3 + 2], r.opacities[g], skip[g],
                          {r.colors[g * 3], r.colors[g * 3 + 1], r.colors[g * 3 + 2]}};
  }
}

template <class F>
Status rasterize_forward(const RasterIn<F>& r, F* image);
template <class F>
Status rasterize_backward(const RasterIn<F>& r, const F* g_image, F* d_means2d, F* d_conics, F* d_colors,
                          F* d_opacities, F* d_background);

}  // namespace rlx::splat::detail
