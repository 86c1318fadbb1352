// splat_project and splat_project_backward: one Gaussian per work item, threaded.
// The forward evaluates project_math.h's template in double; the backward evaluates the same
// template on dual numbers seeded with the 10 geometric parameters of the Gaussian (the colour,
// which depends on the mean only, on duals with 3) and contracts the resulting Jacobian with the
// output gradients, so it is the exact derivative of the code the forward ran (culling, the x/z
// clamp of the EWA Jacobian and the colour clamp included).
#include <cmath>

#include "kernels_internal.h"
#include "rlx/thread_pool.h"

namespace rlx::splat::detail {

Camera camera_of(const Attrs& a) {
  Camera c{};
  const std::vector<double> vm = a.floats("viewmat");
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) c.r[i * 3 + j] = vm[i * 4 + j];
    c.t[i] = vm[i * 4 + 3];
  }
  // campos = -W^T t (W is a rotation)
  for (int j = 0; j < 3; ++j) c.campos[j] = -(c.r[0 * 3 + j] * c.t[0] + c.r[1 * 3 + j] * c.t[1] + c.r[2 * 3 + j] * c.t[2]);
  c.fx = a.f("fx");
  c.fy = a.f("fy");
  c.cx = a.f("cx");
  c.cy = a.f("cy");
  c.near = a.f("near", 0.01);
  c.width = a.i("width");
  c.height = a.i("height");
  return c;
}

template <class F>
void project_forward(const Camera& c, int64_t n, int k, const F* means, const F* log_scales, const F* quats,
                     const F* sh, F* means2d, F* conics, F* depths, F* radii, F* colors) {
  ThreadPool::global().parallel_for(n, 256, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      double p[3], ls[3], q[4];
      for (int j = 0; j < 3; ++j) p[j] = means[i * 3 + j], ls[j] = log_scales[i * 3 + j];
      for (int j = 0; j < 4; ++j) q[j] = quats[i * 4 + j];
      const Projected<double> o = project_one<double, F>(c, p, ls, q, sh + i * k * 3, k);
      means2d[i * 2 + 0] = static_cast<F>(o.mean2d[0]);
      means2d[i * 2 + 1] = static_cast<F>(o.mean2d[1]);
      for (int j = 0; j < 3; ++j) conics[i * 3 + j] = static_cast<F>(o.conic[j]), colors[i * 3 + j] = static_cast<F>(o.color[j]);
      depths[i] = static_cast<F>(o.depth);
      radii[i] = static_cast<F>(o.radius);
    }
  });
}

template <class F>
void project_backward(const Camera& c, int64_t n, int k, const F* means, const F* log_scales, const F* quats,
                      const F* sh, const F* g_means2d, const F* g_conics, const F* g_depths, const F* g_colors,
                      F* d_means, F* d_log_scales, F* d_quats, F* d_sh) {
  using D = Dual<10>;
  using D3 = Dual<3>;
  ThreadPool::global().parallel_for(n, 64, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      D p[3], ls[3], q[4];
      for (int j = 0; j < 3; ++j) {
        p[j] = D(means[i * 3 + j]);
        p[j].d[j] = 1;
        ls[j] = D(log_scales[i * 3 + j]);
        ls[j].d[3 + j] = 1;
      }
      for (int j = 0; j < 4; ++j) {
        q[j] = D(quats[i * 4 + j]);
        q[j].d[6 + j] = 1;
      }
      const Projected<D> o = project_one<D, F>(c, p, ls, q, sh + i * k * 3, k, /*with_color=*/false);
      double g[10] = {};
      auto acc = [&](const D& y, double gy) {
        if (gy == 0) return;
        for (int j = 0; j < 10; ++j) g[j] += gy * y.d[j];
      };
      for (int j = 0; j < 2; ++j) acc(o.mean2d[j], g_means2d[i * 2 + j]);
      for (int j = 0; j < 3; ++j) acc(o.conic[j], g_conics[i * 3 + j]);
      acc(o.depth, g_depths[i]);
      // the colour depends on the mean only: 3 derivative lanes
      D3 pm[3], basis[16], color[3];
      bool clamped[3];
      for (int j = 0; j < 3; ++j) {
        pm[j] = D3(means[i * 3 + j]);
        pm[j].d[j] = 1;
      }
      color_one<D3, F>(c, pm, sh + i * k * 3, k, basis, color, clamped);
      for (int ch = 0; ch < 3; ++ch) {
        const double gc = g_colors[i * 3 + ch];
        for (int j = 0; j < 3; ++j) g[j] += gc * color[ch].d[j];
      }
      for (int j = 0; j < 3; ++j) d_means[i * 3 + j] = static_cast<F>(g[j]), d_log_scales[i * 3 + j] = static_cast<F>(g[3 + j]);
      for (int j = 0; j < 4; ++j) d_quats[i * 4 + j] = static_cast<F>(g[6 + j]);
      // colour = 0.5 + sum_j basis_j sh_j per channel (where not clamped): linear in sh
      for (int j = 0; j < k; ++j)
        for (int ch = 0; ch < 3; ++ch)
          d_sh[(i * k + j) * 3 + ch] = clamped[ch] ? F(0) : static_cast<F>(basis[j].v * g_colors[i * 3 + ch]);
    }
  });
}

#define RLX_SPLAT_PROJECT(F)                                                                                        \
  template void project_forward<F>(const Camera&, int64_t, int, const F*, const F*, const F*, const F*, F*, F*, F*, \
                                   F*, F*);                                                                         \
  template void project_backward<F>(const Camera&, int64_t, int, const F*, const F*, const F*, const F*, const F*,  \
                                    const F*, const F*, const F*, F*, F*, F*, F*);
RLX_SPLAT_PROJECT(float)
RLX_SPLAT_PROJECT(double)
#undef RLX_SPLAT_PROJECT

}  // namespace rlx::splat::detail
