// splat_rasterize_backward: the exact gradient of splat_rasterize's image with respect to the
// 2D means, conics, colours, opacities and the background. For one pixel with contributions
// i = 1..m (front to back), C = sum_i c_i a_i T_i + T_{m+1} bg, T_{i+1} = T_i (1 - a_i), so
//   dC/dc_i = a_i T_i,   dC/da_i = c_i T_i - S_i / (1 - a_i)  with S_i = sum_{j>i} c_j a_j T_j + T_{m+1} bg,
//   dC/dbg = T_{m+1};  a = min(0.99, o G), G = exp(power), power = -(a dx^2 + c dy^2)/2 - b dx dy
// (no gradient through a clamped alpha; the skipped and the terminating Gaussians contribute
// nothing, as in the forward). The pixel's list is replayed front to back (recording a_i, T_i),
// then walked back to front. Each tile writes its gradients into its own slots of the tile
// lists, and one ordered pass sums the slots per Gaussian, so the result does not depend on
// the number of threads.
#include <algorithm>
#include <cmath>

#include "kernels_internal.h"
#include "rlx/thread_pool.h"

namespace rlx::splat::detail {
namespace {

constexpr int kSlot = 9;  // mean x, y; conic a, b, c; colour r, g, b; opacity

struct Hit {
  int64_t entry;  // position in the tile list
  double alpha, T, G;
  bool clamped;
};

}  // namespace

template <class F>
Status rasterize_backward(const RasterIn<F>& r, const F* g_image, F* d_means2d, F* d_conics, F* d_colors,
                          F* d_opacities, F* d_background) {
  RLX_ASSIGN_OR_RETURN(Bins b, bin_and_sort(r.n, r.means2d, r.depths, r.radii, r.width, r.height, r.tile));
  const int64_t tiles = b.tiles_x * b.tiles_y;
  const std::vector<double> skip = skip_powers(r.n, r.opacities);
  std::vector<double> slots(b.ids.size() * kSlot, 0.0);
  std::vector<double> bg_grad(static_cast<size_t>(tiles) * 3, 0.0);
  const double bg[3] = {r.background[0], r.background[1], r.background[2]};
  ThreadPool::global().parallel_for(tiles, 1, [&](int64_t lo, int64_t hi) {
    std::vector<Hit> hits;
    std::vector<TileGaussian> tg;
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t tx = t % b.tiles_x, ty = t / b.tiles_x;
      const int64_t base = b.offsets[t];
      const int64_t count = b.offsets[t + 1] - base;
      collect(r, b.ids.data() + base, count, skip, tg);
      for (int64_t y = ty * b.tile; y < std::min(r.height, (ty + 1) * b.tile); ++y)
        for (int64_t x = tx * b.tile; x < std::min(r.width, (tx + 1) * b.tile); ++x) {
          const double px = static_cast<double>(x) + 0.5, py = static_cast<double>(y) + 0.5;
          const F* gp = g_image + (y * r.width + x) * 3;
          const double g[3] = {gp[0], gp[1], gp[2]};
          // replay the forward
          hits.clear();
          double T = 1;
          for (int64_t e = 0; e < count; ++e) {
            const TileGaussian& k = tg[e];
            const double dx = k.mx - px, dy = k.my - py;
            const double power = -0.5 * (k.a * dx * dx + k.c * dy * dy) - k.b * dx * dy;
            if (!(power <= 0) || power < k.skip) continue;
            const double G = std::exp(power);
            const double raw = k.o * G;
            const double alpha = std::min(kMaxAlpha, raw);
            if (!(alpha >= kMinAlpha)) continue;
            const double next = T * (1 - alpha);
            if (next < kMinTransmittance) break;
            hits.push_back(Hit{e, alpha, T, G, raw > kMaxAlpha});
            T = next;
          }
          double* bgg = &bg_grad[t * 3];
          for (int ch = 0; ch < 3; ++ch) bgg[ch] += T * g[ch];
          // back to front: S is the colour composited behind the current Gaussian
          double S = T * (bg[0] * g[0] + bg[1] * g[1] + bg[2] * g[2]);  // g . S
          for (size_t h = hits.size(); h-- > 0;) {
            const Hit& k = hits[h];
            const TileGaussian& q = tg[k.entry];
            double* s = &slots[(base + k.entry) * kSlot];
            const double w = k.alpha * k.T;
            double cg = 0;
            for (int ch = 0; ch < 3; ++ch) {
              s[5 + ch] += w * g[ch];
              cg += q.col[ch] * g[ch];
            }
            const double d_alpha = k.T * cg - S / (1 - k.alpha);
            S += w * cg;
            if (k.clamped) continue;
            s[8] += d_alpha * k.G;
            const double d_power = d_alpha * q.o * k.G;
            const double dx = q.mx - px, dy = q.my - py;
            s[0] += d_power * -(q.a * dx + q.b * dy);
            s[1] += d_power * -(q.b * dx + q.c * dy);
            s[2] += d_power * -0.5 * dx * dx;
            s[3] += d_power * -dx * dy;
            s[4] += d_power * -0.5 * dy * dy;
          }
        }
    }
  });
  // ordered reduction of the slots per Gaussian
  std::vector<double> acc(static_cast<size_t>(r.n) * kSlot, 0.0);
  for (size_t e = 0; e < b.ids.size(); ++e) {
    double* a = &acc[static_cast<size_t>(b.ids[e]) * kSlot];
    const double* s = &slots[e * kSlot];
    for (int j = 0; j < kSlot; ++j) a[j] += s[j];
  }
  for (int64_t i = 0; i < r.n; ++i) {
    const double* a = &acc[i * kSlot];
    d_means2d[i * 2] = static_cast<F>(a[0]);
    d_means2d[i * 2 + 1] = static_cast<F>(a[1]);
    for (int j = 0; j < 3; ++j) d_conics[i * 3 + j] = static_cast<F>(a[2 + j]), d_colors[i * 3 + j] = static_cast<F>(a[5 + j]);
    d_opacities[i] = static_cast<F>(a[8]);
  }
  for (int ch = 0; ch < 3; ++ch) {
    double s = 0;
    for (int64_t t = 0; t < tiles; ++t) s += bg_grad[t * 3 + ch];
    d_background[ch] = static_cast<F>(s);
  }
  return Status::ok();
}

template Status rasterize_backward<float>(const RasterIn<float>&, const float*, float*, float*, float*, float*, float*);
template Status rasterize_backward<double>(const RasterIn<double>&, const double*, double*, double*, double*, double*,
                                           double*);

}  // namespace rlx::splat::detail
