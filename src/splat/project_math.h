// The per-Gaussian projection of splat_project, written once as a template over the scalar
// type: the forward kernel instantiates it with float or double, the backward kernel with
// forward-mode dual numbers carrying the derivatives with respect to the 10 geometric
// parameters of one Gaussian (mean 3, log-scale 3, quaternion 4). Forward-mode AD over the same
// code gives the exact analytic Jacobian (no finite differences, no second hand-written copy
// that could drift from the forward); the colour's derivative with respect to the SH
// coefficients is linear and computed in closed form by the caller.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

namespace rlx::splat::detail {

// The pinhole camera of a node's attributes. viewmat is row-major world-to-camera.
struct Camera {
  double r[9];    // rotation W
  double t[3];    // translation
  double campos[3];  // camera centre in world coordinates: -W^T t
  double fx, fy, cx, cy, near;
  int64_t width, height;
};

// A value with N partial derivatives. The operators are hidden friends so that a double
// converts to a constant Dual on either side.
template <int N>
struct Dual {
  double v = 0;
  std::array<double, N> d{};
  Dual() = default;
  Dual(double x) : v(x) {}  // NOLINT: constants convert implicitly

  friend Dual operator+(const Dual& a, const Dual& b) {
    Dual r(a.v + b.v);
    for (int i = 0; i < N; ++i) r.d[i] = a.d[i] + b.d[i];
    return r;
  }
  friend Dual operator-(const Dual& a, const Dual& b) {
    Dual r(a.v - b.v);
    for (int i = 0; i < N; ++i) r.d[i] = a.d[i] - b.d[i];
    return r;
  }
  friend Dual operator-(const Dual& a) {
    Dual r(-a.v);
    for (int i = 0; i < N; ++i) r.d[i] = -a.d[i];
    return r;
  }
  friend Dual operator*(const Dual& a, const Dual& b) {
    Dual r(a.v * b.v);
    for (int i = 0; i < N; ++i) r.d[i] = a.d[i] * b.v + a.v * b.d[i];
    return r;
  }
  friend Dual operator/(const Dual& a, const Dual& b) {
    const double inv = 1.0 / b.v;
    Dual r(a.v * inv);
    for (int i = 0; i < N; ++i) r.d[i] = (a.d[i] - r.v * b.d[i]) * inv;
    return r;
  }
  friend Dual sqrt(const Dual& a) {
    Dual r(std::sqrt(a.v));
    const double k = r.v > 0 ? 0.5 / r.v : 0.0;
    for (int i = 0; i < N; ++i) r.d[i] = a.d[i] * k;
    return r;
  }
  friend Dual exp(const Dual& a) {
    Dual r(std::exp(a.v));
    for (int i = 0; i < N; ++i) r.d[i] = a.d[i] * r.v;
    return r;
  }
  friend double value(const Dual& a) { return a.v; }
};

inline double value(double a) { return a; }
using std::exp;
using std::sqrt;

// Real spherical-harmonics basis up to degree 3 (the constants of the original 3DGS, with its
// sign convention) at the unit direction (x, y, z); writes k values.
template <class T>
void sh_basis(const T& x, const T& y, const T& z, int k, T* b) {
  b[0] = T(0.28209479177387814);
  if (k <= 1) return;
  const double c1 = 0.4886025119029199;
  b[1] = -c1 * y;
  b[2] = c1 * z;
  b[3] = -c1 * x;
  if (k <= 4) return;
  const T xx = x * x, yy = y * y, zz = z * z, xy = x * y, yz = y * z, xz = x * z;
  b[4] = 1.0925484305920792 * xy;
  b[5] = -1.0925484305920792 * yz;
  b[6] = 0.31539156525252005 * (2.0 * zz - xx - yy);
  b[7] = -1.0925484305920792 * xz;
  b[8] = 0.5462742152960396 * (xx - yy);
  if (k <= 9) return;
  b[9] = -0.5900435899266435 * y * (3.0 * xx - yy);
  b[10] = 2.890611442640554 * xy * z;
  b[11] = -0.4570457994644658 * y * (4.0 * zz - xx - yy);
  b[12] = 0.3731763325901154 * z * (2.0 * zz - 3.0 * xx - 3.0 * yy);
  b[13] = -0.4570457994644658 * x * (4.0 * zz - xx - yy);
  b[14] = 1.445305721320277 * z * (xx - yy);
  b[15] = -0.5900435899266435 * x * (xx - 3.0 * yy);
}

// What the projection of one Gaussian gives. visible is false when it is culled (behind the
// near plane, degenerate, or entirely off the image): then means2d, conic and radius are 0.
template <class T>
struct Projected {
  T mean2d[2], conic[3], depth, color[3];
  T basis[16];
  bool clamped[3] = {false, false, false};  // colour channel held at 0 (no gradient)
  double radius = 0;
  bool visible = false;
};

// The view-dependent colour of a Gaussian with mean p: SH (k x 3 coefficients) at the direction
// camera -> mean, plus 0.5, clamped at 0. Writes the basis (k values), the colour and which
// channels are clamped.
template <class T, class S>
void color_one(const Camera& c, const T* p, const S* sh, int k, T* basis, T* color, bool* clamped) {
  T d[3];
  for (int i = 0; i < 3; ++i) d[i] = p[i] - T(c.campos[i]);
  const T len = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
  const T inv = value(len) > 0 ? T(1.0) / len : T(0.0);
  sh_basis(d[0] * inv, d[1] * inv, d[2] * inv, k, basis);
  for (int ch = 0; ch < 3; ++ch) {
    T acc = T(0.5);
    for (int j = 0; j < k; ++j) acc = acc + static_cast<double>(sh[j * 3 + ch]) * basis[j];
    clamped[ch] = value(acc) < 0;
    color[ch] = clamped[ch] ? T(0.0) : acc;
  }
}

// Projects one Gaussian: p = mean, ls = log-scales, q = quaternion (w, x, y, z), sh = k x 3
// coefficients (plain doubles: the colour is linear in them). With with_color false the colour
// fields are left unset (the backward differentiates the colour, which depends only on the
// mean, with fewer derivative lanes).
template <class T, class S>
Projected<T> project_one(const Camera& c, const T* p, const T* ls, const T* q, const S* sh, int k,
                         bool with_color = true) {
  Projected<T> o;
  for (int i = 0; i < 2; ++i) o.mean2d[i] = T(0);
  for (int i = 0; i < 3; ++i) o.conic[i] = T(0);
  if (with_color) color_one(c, p, sh, k, o.basis, o.color, o.clamped);
  // camera coordinates
  T v[3];
  for (int i = 0; i < 3; ++i) v[i] = c.r[i * 3 + 0] * p[0] + c.r[i * 3 + 1] * p[1] + c.r[i * 3 + 2] * p[2] + T(c.t[i]);
  o.depth = v[2];
  if (!(value(v[2]) >= c.near)) return o;
  // rotation from the normalized quaternion, times the scales: M = R diag(s)
  const T qn2 = q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3];
  if (!(value(qn2) > 1e-24)) return o;
  const T qinv = T(1.0) / sqrt(qn2);
  const T w = q[0] * qinv, x = q[1] * qinv, y = q[2] * qinv, z = q[3] * qinv;
  const T rot[9] = {1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y - w * z),       2.0 * (x * z + w * y),
                    2.0 * (x * y + w * z),       1.0 - 2.0 * (x * x + z * z), 2.0 * (y * z - w * x),
                    2.0 * (x * z - w * y),       2.0 * (y * z + w * x),       1.0 - 2.0 * (x * x + y * y)};
  const T s[3] = {exp(ls[0]), exp(ls[1]), exp(ls[2])};
  // B = W R diag(s): the camera-space covariance is B B^T
  T b[9];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      b[i * 3 + j] = (c.r[i * 3 + 0] * rot[0 * 3 + j] + c.r[i * 3 + 1] * rot[1 * 3 + j] + c.r[i * 3 + 2] * rot[2 * 3 + j]) * s[j];
  // the Jacobian of the perspective map, with x/z and y/z clamped to 1.3 times the half field of
  // view as the original 3DGS does (far off-axis Gaussians would otherwise blow up)
  const double limx = 1.3 * 0.5 * static_cast<double>(c.width) / c.fx;
  const double limy = 1.3 * 0.5 * static_cast<double>(c.height) / c.fy;
  const T iz = T(1.0) / v[2];
  T txz = v[0] * iz, tyz = v[1] * iz;
  if (value(txz) > limx) txz = T(limx);
  if (value(txz) < -limx) txz = T(-limx);
  if (value(tyz) > limy) tyz = T(limy);
  if (value(tyz) < -limy) tyz = T(-limy);
  // J = [[fx/z, 0, -fx tx/z], [0, fy/z, -fy ty/z]] (tx = clamped x/z)
  const T j00 = c.fx * iz, j02 = -c.fx * txz * iz, j11 = c.fy * iz, j12 = -c.fy * tyz * iz;
  // rows of J B (2 x 3)
  T u[3], w2[3];
  for (int j = 0; j < 3; ++j) {
    u[j] = j00 * b[0 * 3 + j] + j02 * b[2 * 3 + j];
    w2[j] = j11 * b[1 * 3 + j] + j12 * b[2 * 3 + j];
  }
  const T ca = u[0] * u[0] + u[1] * u[1] + u[2] * u[2] + T(0.3);
  const T cb = u[0] * w2[0] + u[1] * w2[1] + u[2] * w2[2];
  const T cc = w2[0] * w2[0] + w2[1] * w2[1] + w2[2] * w2[2] + T(0.3);
  const T det = ca * cc - cb * cb;
  if (!(value(det) > 0)) return o;
  const T idet = T(1.0) / det;
  const double mid = 0.5 * (value(ca) + value(cc));
  const double lambda1 = mid + std::sqrt(std::max(0.1, mid * mid - value(det)));
  const double radius = std::ceil(3.0 * std::sqrt(lambda1));
  const T mx = c.fx * v[0] * iz + T(c.cx), my = c.fy * v[1] * iz + T(c.cy);
  if (value(mx) + radius <= 0 || value(mx) - radius >= static_cast<double>(c.width) || value(my) + radius <= 0 ||
      value(my) - radius >= static_cast<double>(c.height))
    return o;
  o.mean2d[0] = mx;
  o.mean2d[1] = my;
  o.conic[0] = cc * idet;
  o.conic[1] = -cb * idet;
  o.conic[2] = ca * idet;
  o.radius = radius;
  o.visible = true;
  return o;
}

}  // namespace rlx::splat::detail
