// splat_rasterize: tile binning, depth sorting and front-to-back alpha compositing, as the
// original 3DGS renderer does it (on the CPU: one work item per tile instead of one CUDA block).
// Pixel (x, y) is sampled at its centre (x + 0.5, y + 0.5).
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels_internal.h"
#include "rlx/thread_pool.h"

namespace rlx::splat::detail {
namespace {

// The tile range [lo, hi] a Gaussian touches along one axis, or false when none.
bool tile_range(double centre, double radius, int64_t tile, int64_t tiles, int64_t& lo, int64_t& hi) {
  const double a = std::floor((centre - radius) / static_cast<double>(tile));
  const double b = std::floor((centre + radius) / static_cast<double>(tile));
  if (b < 0 || a > static_cast<double>(tiles - 1)) return false;
  lo = static_cast<int64_t>(std::max(a, 0.0));
  hi = static_cast<int64_t>(std::min(b, static_cast<double>(tiles - 1)));
  return lo <= hi;
}

}  // namespace

template <class F>
Expected<Bins> bin_and_sort(int64_t n, const F* means2d, const F* depths, const F* radii, int64_t width,
                            int64_t height, int64_t tile) {
  if (n > std::numeric_limits<int32_t>::max())
    return error(ErrorCode::invalid_argument, "splat_rasterize: ", n, " Gaussians exceed the 2^31 - 1 a node supports");
  Bins b;
  b.tile = tile;
  b.tiles_x = (width + tile - 1) / tile;
  b.tiles_y = (height + tile - 1) / tile;
  const int64_t tiles = b.tiles_x * b.tiles_y;
  // a Gaussian takes part when its radius is positive and every value it is sorted and binned
  // by is finite (a NaN depth must not reach the sort's comparison)
  auto usable = [&](int64_t i) {
    const double r = radii[i];
    return r > 0 && std::isfinite(r) && std::isfinite(static_cast<double>(means2d[i * 2])) &&
           std::isfinite(static_cast<double>(means2d[i * 2 + 1])) && std::isfinite(static_cast<double>(depths[i]));
  };
  std::vector<int64_t> count(static_cast<size_t>(tiles) + 1, 0);
  for (int64_t i = 0; i < n; ++i) {
    if (!usable(i)) continue;
    int64_t x0, x1, y0, y1;
    if (!tile_range(means2d[i * 2], radii[i], tile, b.tiles_x, x0, x1) ||
        !tile_range(means2d[i * 2 + 1], radii[i], tile, b.tiles_y, y0, y1))
      continue;
    for (int64_t ty = y0; ty <= y1; ++ty)
      for (int64_t tx = x0; tx <= x1; ++tx) ++count[ty * b.tiles_x + tx + 1];
  }
  for (int64_t t = 0; t < tiles; ++t) count[t + 1] += count[t];
  b.offsets = count;
  b.ids.resize(static_cast<size_t>(b.offsets[tiles]));
  std::vector<int64_t> fill(b.offsets.begin(), b.offsets.end() - 1);
  for (int64_t i = 0; i < n; ++i) {  // ascending i: each tile's list starts in index order
    if (!usable(i)) continue;
    int64_t x0, x1, y0, y1;
    if (!tile_range(means2d[i * 2], radii[i], tile, b.tiles_x, x0, x1) ||
        !tile_range(means2d[i * 2 + 1], radii[i], tile, b.tiles_y, y0, y1))
      continue;
    for (int64_t ty = y0; ty <= y1; ++ty)
      for (int64_t tx = x0; tx <= x1; ++tx) b.ids[fill[ty * b.tiles_x + tx]++] = static_cast<int32_t>(i);
  }
  ThreadPool::global().parallel_for(tiles, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t)
      std::stable_sort(b.ids.begin() + b.offsets[t], b.ids.begin() + b.offsets[t + 1],
                       [&](int32_t x, int32_t y) { return depths[x] < depths[y]; });
  });
  return b;
}

template <class F>
std::vector<double> skip_powers(int64_t n, const F* opacities) {
  std::vector<double> s(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double o = opacities[i];
    s[i] = o > 0 ? std::log(kMinAlpha / o) - 1e-6 : std::numeric_limits<double>::infinity();
  }
  return s;
}

template <class F>
Status rasterize_forward(const RasterIn<F>& r, F* image) {
  RLX_ASSIGN_OR_RETURN(Bins b, bin_and_sort(r.n, r.means2d, r.depths, r.radii, r.width, r.height, r.tile));
  const std::vector<double> skip = skip_powers(r.n, r.opacities);
  const double bg[3] = {r.background[0], r.background[1], r.background[2]};
  ThreadPool::global().parallel_for(b.tiles_x * b.tiles_y, 1, [&](int64_t lo, int64_t hi) {
    std::vector<TileGaussian> tg;
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t tx = t % b.tiles_x, ty = t / b.tiles_x;
      const int64_t count = b.offsets[t + 1] - b.offsets[t];
      collect(r, b.ids.data() + b.offsets[t], count, skip, tg);
      for (int64_t y = ty * b.tile; y < std::min(r.height, (ty + 1) * b.tile); ++y)
        for (int64_t x = tx * b.tile; x < std::min(r.width, (tx + 1) * b.tile); ++x) {
          const double px = static_cast<double>(x) + 0.5, py = static_cast<double>(y) + 0.5;
          double T = 1, col[3] = {0, 0, 0};
          for (int64_t e = 0; e < count; ++e) {
            const TileGaussian& k = tg[e];
            const double dx = k.mx - px, dy = k.my - py;
            const double power = -0.5 * (k.a * dx * dx + k.c * dy * dy) - k.b * dx * dy;
            if (!(power <= 0) || power < k.skip) continue;
            const double alpha = std::min(kMaxAlpha, k.o * std::exp(power));
            if (!(alpha >= kMinAlpha)) continue;
            const double next = T * (1 - alpha);
            if (next < kMinTransmittance) break;
            for (int ch = 0; ch < 3; ++ch) col[ch] += k.col[ch] * alpha * T;
            T = next;
          }
          F* out = image + (y * r.width + x) * 3;
          for (int ch = 0; ch < 3; ++ch) out[ch] = static_cast<F>(col[ch] + T * bg[ch]);
        }
    }
  });
  return Status::ok();
}

template Expected<Bins> bin_and_sort<float>(int64_t, const float*, const float*, const float*, int64_t, int64_t, int64_t);
template Expected<Bins> bin_and_sort<double>(int64_t, const double*, const double*, const double*, int64_t, int64_t,
                                             int64_t);
template std::vector<double> skip_powers<float>(int64_t, const float*);
template std::vector<double> skip_powers<double>(int64_t, const double*);
template Status rasterize_forward<float>(const RasterIn<float>&, float*);
template Status rasterize_forward<double>(const RasterIn<double>&, double*);

}  // namespace rlx::splat::detail
