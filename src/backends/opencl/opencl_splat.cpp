// The opencl device's splatting kernels (opencl_splat.h). The OpenCL C below follows the cpu's
// src/splat/ kernels step for step (the same operations in the same order, in double), so the
// two differ by the device's exp/log/sqrt and, in the backward, by the order of the sums.
#include "opencl_splat.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "splat/kernels_internal.h"

namespace rlx::opencl {
namespace {

// The projection of one Gaussian, generic in the scalar type S through macros (FN names the
// instance's functions; CST makes a constant, VAL reads the value, SCL multiplies by a double).
// Mirrors project_math.h: sh_basis, color_one, project_one.
constexpr const char* kProjectBody = R"CL(
void FN(sh_basis)(S x, S y, S z, int k, S* b) {
  b[0] = CST(0.28209479177387814);
  if (k <= 1) return;
  const double c1 = 0.4886025119029199;
  b[1] = SCL(-c1, y);
  b[2] = SCL(c1, z);
  b[3] = SCL(-c1, x);
  if (k <= 4) return;
  const S xx = MUL(x, x), yy = MUL(y, y), zz = MUL(z, z), xy = MUL(x, y), yz = MUL(y, z), xz = MUL(x, z);
  b[4] = SCL(1.0925484305920792, xy);
  b[5] = SCL(-1.0925484305920792, yz);
  b[6] = SCL(0.31539156525252005, SUB(SUB(SCL(2.0, zz), xx), yy));
  b[7] = SCL(-1.0925484305920792, xz);
  b[8] = SCL(0.5462742152960396, SUB(xx, yy));
  if (k <= 9) return;
  b[9] = MUL(SCL(-0.5900435899266435, y), SUB(SCL(3.0, xx), yy));
  b[10] = MUL(SCL(2.890611442640554, xy), z);
  b[11] = MUL(SCL(-0.4570457994644658, y), SUB(SUB(SCL(4.0, zz), xx), yy));
  b[12] = MUL(SCL(0.3731763325901154, z), SUB(SUB(SCL(2.0, zz), SCL(3.0, xx)), SCL(3.0, yy)));
  b[13] = MUL(SCL(-0.4570457994644658, x), SUB(SUB(SCL(4.0, zz), xx), yy));
  b[14] = MUL(SCL(1.445305721320277, z), SUB(xx, yy));
  b[15] = MUL(SCL(-0.5900435899266435, x), SUB(xx, SCL(3.0, yy)));
}

void FN(color_one)(const Cam* c, const S* p, __global const T* sh, int k, S* basis, S* color, int* clamped) {
  const S d0 = SUB(p[0], CST(c->campos[0])), d1 = SUB(p[1], CST(c->campos[1])), d2 = SUB(p[2], CST(c->campos[2]));
  const S len = SQRT(ADD(ADD(MUL(d0, d0), MUL(d1, d1)), MUL(d2, d2)));
  const S inv = VAL(len) > 0 ? DIV(CST(1.0), len) : CST(0.0);
  FN(sh_basis)(MUL(d0, inv), MUL(d1, inv), MUL(d2, inv), k, basis);
  for (int ch = 0; ch < 3; ++ch) {
    S acc = CST(0.5);
    for (int j = 0; j < k; ++j) acc = ADD(acc, SCL((double)sh[j * 3 + ch], basis[j]));
    clamped[ch] = VAL(acc) < 0;
    color[ch] = clamped[ch] ? CST(0.0) : acc;
  }
}

// Returns whether the Gaussian is drawn; mean2d, conic and radius stay 0 when it is not.
int FN(project_one)(const Cam* c, const S* p, const S* ls, const S* q, __global const T* sh, int k, int with_color,
                    S* mean2d, S* conic, S* depth, S* basis, S* color, int* clamped, double* radius) {
  mean2d[0] = CST(0.0);
  mean2d[1] = CST(0.0);
  for (int i = 0; i < 3; ++i) conic[i] = CST(0.0);
  *radius = 0;
  if (with_color) FN(color_one)(c, p, sh, k, basis, color, clamped);
  S v[3];
  for (int i = 0; i < 3; ++i)
    v[i] = ADD(ADD(ADD(SCL(c->r[i * 3 + 0], p[0]), SCL(c->r[i * 3 + 1], p[1])), SCL(c->r[i * 3 + 2], p[2])), CST(c->t[i]));
  *depth = v[2];
  if (!(VAL(v[2]) >= c->near)) return 0;
  const S qn2 = ADD(ADD(ADD(MUL(q[0], q[0]), MUL(q[1], q[1])), MUL(q[2], q[2])), MUL(q[3], q[3]));
  if (!(VAL(qn2) > 1e-24)) return 0;
  const S qinv = DIV(CST(1.0), SQRT(qn2));
  const S w = MUL(q[0], qinv), x = MUL(q[1], qinv), y = MUL(q[2], qinv), z = MUL(q[3], qinv);
  S rot[9];
  rot[0] = SUB(CST(1.0), SCL(2.0, ADD(MUL(y, y), MUL(z, z))));
  rot[1] = SCL(2.0, SUB(MUL(x, y), MUL(w, z)));
  rot[2] = SCL(2.0, ADD(MUL(x, z), MUL(w, y)));
  rot[3] = SCL(2.0, ADD(MUL(x, y), MUL(w, z)));
  rot[4] = SUB(CST(1.0), SCL(2.0, ADD(MUL(x, x), MUL(z, z))));
  rot[5] = SCL(2.0, SUB(MUL(y, z), MUL(w, x)));
  rot[6] = SCL(2.0, SUB(MUL(x, z), MUL(w, y)));
  rot[7] = SCL(2.0, ADD(MUL(y, z), MUL(w, x)));
  rot[8] = SUB(CST(1.0), SCL(2.0, ADD(MUL(x, x), MUL(y, y))));
  S s[3], b[9];
  for (int j = 0; j < 3; ++j) s[j] = EXP(ls[j]);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      b[i * 3 + j] = MUL(ADD(ADD(SCL(c->r[i * 3 + 0], rot[j]), SCL(c->r[i * 3 + 1], rot[3 + j])), SCL(c->r[i * 3 + 2], rot[6 + j])), s[j]);
  const double limx = 1.3 * 0.5 * c->width / c->fx;
  const double limy = 1.3 * 0.5 * c->height / c->fy;
  const S iz = DIV(CST(1.0), v[2]);
  S txz = MUL(v[0], iz), tyz = MUL(v[1], iz);
  if (VAL(txz) > limx) txz = CST(limx);
  if (VAL(txz) < -limx) txz = CST(-limx);
  if (VAL(tyz) > limy) tyz = CST(limy);
  if (VAL(tyz) < -limy) tyz = CST(-limy);
  const S j00 = SCL(c->fx, iz), j02 = MUL(SCL(-c->fx, txz), iz), j11 = SCL(c->fy, iz), j12 = MUL(SCL(-c->fy, tyz), iz);
  S u[3], w2[3];
  for (int j = 0; j < 3; ++j) {
    u[j] = ADD(MUL(j00, b[j]), MUL(j02, b[6 + j]));
    w2[j] = ADD(MUL(j11, b[3 + j]), MUL(j12, b[6 + j]));
  }
  const S ca = ADD(ADD(ADD(MUL(u[0], u[0]), MUL(u[1], u[1])), MUL(u[2], u[2])), CST(0.3));
  const S cb = ADD(ADD(MUL(u[0], w2[0]), MUL(u[1], w2[1])), MUL(u[2], w2[2]));
  const S cc = ADD(ADD(ADD(MUL(w2[0], w2[0]), MUL(w2[1], w2[1])), MUL(w2[2], w2[2])), CST(0.3));
  const S det = SUB(MUL(ca, cc), MUL(cb, cb));
  if (!(VAL(det) > 0)) return 0;
  const S idet = DIV(CST(1.0), det);
  const double mid = 0.5 * (VAL(ca) + VAL(cc));
  const double lambda1 = mid + sqrt(fmax(0.1, mid * mid - VAL(det)));
  const double rad = ceil(3.0 * sqrt(lambda1));
  const S mx = ADD(MUL(SCL(c->fx, v[0]), iz), CST(c->cx)), my = ADD(MUL(SCL(c->fy, v[1]), iz), CST(c->cy));
  if (VAL(mx) + rad <= 0 || VAL(mx) - rad >= c->width || VAL(my) + rad <= 0 || VAL(my) - rad >= c->height) return 0;
  mean2d[0] = mx;
  mean2d[1] = my;
  conic[0] = MUL(cc, idet);
  conic[1] = MUL(NEG(cb), idet);
  conic[2] = MUL(ca, idet);
  *radius = rad;
  return 1;
}
)CL";

// The camera, the dual numbers, and the two instances of the projection.
constexpr const char* kProjectPrelude = R"CL(
typedef struct { double r[9], t[3], campos[3], fx, fy, cx, cy, near, width, height; } Cam;
Cam load_cam(__global const double* p) {
  Cam c;
  for (int i = 0; i < 9; ++i) c.r[i] = p[i];
  for (int i = 0; i < 3; ++i) c.t[i] = p[9 + i], c.campos[i] = p[12 + i];
  c.fx = p[15]; c.fy = p[16]; c.cx = p[17]; c.cy = p[18]; c.near = p[19]; c.width = p[20]; c.height = p[21];
  return c;
}

#define NL 10
typedef struct { double v; double d[NL]; } dual;
dual dl_c(double x) { dual r; r.v = x; for (int i = 0; i < NL; ++i) r.d[i] = 0; return r; }
dual dl_add(dual a, dual b) { dual r; r.v = a.v + b.v; for (int i = 0; i < NL; ++i) r.d[i] = a.d[i] + b.d[i]; return r; }
dual dl_sub(dual a, dual b) { dual r; r.v = a.v - b.v; for (int i = 0; i < NL; ++i) r.d[i] = a.d[i] - b.d[i]; return r; }
dual dl_neg(dual a) { dual r; r.v = -a.v; for (int i = 0; i < NL; ++i) r.d[i] = -a.d[i]; return r; }
dual dl_mul(dual a, dual b) {
  dual r; r.v = a.v * b.v;
  for (int i = 0; i < NL; ++i) r.d[i] = a.d[i] * b.v + a.v * b.d[i];
  return r;
}
dual dl_scl(double c, dual a) { dual r; r.v = c * a.v; for (int i = 0; i < NL; ++i) r.d[i] = c * a.d[i]; return r; }
dual dl_div(dual a, dual b) {
  const double inv = 1.0 / b.v;
  dual r; r.v = a.v * inv;
  for (int i = 0; i < NL; ++i) r.d[i] = (a.d[i] - r.v * b.d[i]) * inv;
  return r;
}
dual dl_sqrt(dual a) {
  dual r; r.v = sqrt(a.v);
  const double k = r.v > 0 ? 0.5 / r.v : 0.0;
  for (int i = 0; i < NL; ++i) r.d[i] = a.d[i] * k;
  return r;
}
dual dl_exp(dual a) { dual r; r.v = exp(a.v); for (int i = 0; i < NL; ++i) r.d[i] = a.d[i] * r.v; return r; }
)CL";

constexpr const char* kDoubleOps = R"CL(
#define S double
#define FN(x) x##_d
#define CST(x) ((double)(x))
#define VAL(a) (a)
#define ADD(a, b) ((a) + (b))
#define SUB(a, b) ((a) - (b))
#define MUL(a, b) ((a) * (b))
#define DIV(a, b) ((a) / (b))
#define NEG(a) (-(a))
#define SCL(c, a) ((c) * (a))
#define SQRT(a) sqrt(a)
#define EXP(a) exp(a)
)CL";

constexpr const char* kDualOps = R"CL(
#undef S
#undef FN
#undef CST
#undef VAL
#undef ADD
#undef SUB
#undef MUL
#undef DIV
#undef NEG
#undef SCL
#undef SQRT
#undef EXP
#define S dual
#define FN(x) x##_dual
#define CST(x) dl_c(x)
#define VAL(a) ((a).v)
#define ADD(a, b) dl_add(a, b)
#define SUB(a, b) dl_sub(a, b)
#define MUL(a, b) dl_mul(a, b)
#define DIV(a, b) dl_div(a, b)
#define NEG(a) dl_neg(a)
#define SCL(c, a) dl_scl(c, a)
#define SQRT(a) dl_sqrt(a)
#define EXP(a) dl_exp(a)
)CL";

constexpr const char* kProjectKernels = R"CL(
__kernel void rlx_splat_project(__global const double* cam, __global const T* means, __global const T* log_scales,
                                __global const T* quats, __global const T* sh, const int n, const int k,
                                __global T* means2d, __global T* conics, __global T* depths, __global T* radii,
                                __global T* colors) {
  const int i = get_global_id(0);
  if (i >= n) return;
  const Cam c = load_cam(cam);
  double p[3], ls[3], q[4];
  for (int j = 0; j < 3; ++j) p[j] = means[i * 3 + j], ls[j] = log_scales[i * 3 + j];
  for (int j = 0; j < 4; ++j) q[j] = quats[i * 4 + j];
  double mean2d[2], conic[3], depth, basis[16], color[3], radius;
  int clamped[3];
  project_one_d(&c, p, ls, q, sh + (long)i * k * 3, k, 1, mean2d, conic, &depth, basis, color, clamped, &radius);
  means2d[i * 2] = (T)mean2d[0];
  means2d[i * 2 + 1] = (T)mean2d[1];
  for (int j = 0; j < 3; ++j) conics[i * 3 + j] = (T)conic[j], colors[i * 3 + j] = (T)color[j];
  depths[i] = (T)depth;
  radii[i] = (T)radius;
}

void dl_acc(double* g, dual y, double gy) {
  if (gy == 0) return;
  for (int l = 0; l < NL; ++l) g[l] += gy * y.d[l];
}

__kernel void rlx_splat_project_backward(__global const double* cam, __global const T* means,
                                         __global const T* log_scales, __global const T* quats, __global const T* sh,
                                         const int n, const int k, __global const T* g_means2d,
                                         __global const T* g_conics, __global const T* g_depths,
                                         __global const T* g_colors, __global T* d_means, __global T* d_log_scales,
                                         __global T* d_quats, __global T* d_sh) {
  const int i = get_global_id(0);
  if (i >= n) return;
  const Cam c = load_cam(cam);
  __global const T* shi = sh + (long)i * k * 3;
  dual p[3], ls[3], q[4];
  for (int j = 0; j < 3; ++j) {
    p[j] = dl_c(means[i * 3 + j]);
    p[j].d[j] = 1;
    ls[j] = dl_c(log_scales[i * 3 + j]);
    ls[j].d[3 + j] = 1;
  }
  for (int j = 0; j < 4; ++j) {
    q[j] = dl_c(quats[i * 4 + j]);
    q[j].d[6 + j] = 1;
  }
  dual mean2d[2], conic[3], depth, basis[16], color[3];
  int clamped[3];
  double radius, g[NL];
  for (int l = 0; l < NL; ++l) g[l] = 0;
  project_one_dual(&c, p, ls, q, shi, k, 0, mean2d, conic, &depth, basis, color, clamped, &radius);
  for (int j = 0; j < 2; ++j) dl_acc(g, mean2d[j], g_means2d[i * 2 + j]);
  for (int j = 0; j < 3; ++j) dl_acc(g, conic[j], g_conics[i * 3 + j]);
  dl_acc(g, depth, g_depths[i]);
  // the colour depends on the mean only: seed the mean's lanes alone
  for (int j = 0; j < 3; ++j) {
    p[j] = dl_c(means[i * 3 + j]);
    p[j].d[j] = 1;
  }
  color_one_dual(&c, p, shi, k, basis, color, clamped);
  for (int ch = 0; ch < 3; ++ch) {
    const double gc = g_colors[i * 3 + ch];
    for (int j = 0; j < 3; ++j) g[j] += gc * color[ch].d[j];
  }
  for (int j = 0; j < 3; ++j) d_means[i * 3 + j] = (T)g[j], d_log_scales[i * 3 + j] = (T)g[3 + j];
  for (int j = 0; j < 4; ++j) d_quats[i * 4 + j] = (T)g[6 + j];
  for (int j = 0; j < k; ++j)
    for (int ch = 0; ch < 3; ++ch)
      d_sh[((long)i * k + j) * 3 + ch] = clamped[ch] ? (T)0 : (T)(basis[j].v * g_colors[i * 3 + ch]);
}
)CL";

// Binning, sorting and compositing (rasterize.cpp, rasterize_backward.cpp).
constexpr const char* kRasterKernels = R"CL(
#define KMAXA 0.99
#define KMINA (1.0 / 255.0)
#define KMINT 1e-4
#define GS (BLK * BLK)

int tile_range(double centre, double radius, int tile, int tiles, int* lo, int* hi) {
  const double a = floor((centre - radius) / (double)tile), b = floor((centre + radius) / (double)tile);
  if (b < 0 || a > (double)(tiles - 1)) return 0;
  *lo = (int)fmax(a, 0.0);
  *hi = (int)fmin(b, (double)(tiles - 1));
  return *lo <= *hi;
}

// Each Gaussian's tile rectangle (x0, y0, x1, y1; empty when it is not drawn), skip power and
// sort key; order[] starts as the identity over the padded power-of-two length.
__kernel void rlx_splat_prep(__global const T* means2d, __global const T* depths, __global const T* radii,
                             __global const T* opacities, const int n, const int padded, const int tile,
                             const int tiles_x, const int tiles_y, __global int4* rect, __global double* skip,
                             __global double* keys, __global int* order) {
  const int i = get_global_id(0);
  if (i >= padded) return;
  order[i] = i;
  keys[i] = INFINITY;
  if (i >= n) return;
  const double o = opacities[i];
  skip[i] = o > 0 ? log(KMINA / o) - 1e-6 : INFINITY;
  rect[i] = (int4)(1, 1, 0, 0);
  const double r = radii[i], mx = means2d[i * 2], my = means2d[i * 2 + 1], depth = depths[i];
  if (!(r > 0) || !isfinite(r) || !isfinite(mx) || !isfinite(my) || !isfinite(depth)) return;
  int x0, x1, y0, y1;
  if (!tile_range(mx, r, tile, tiles_x, &x0, &x1) || !tile_range(my, r, tile, tiles_y, &y0, &y1)) return;
  rect[i] = (int4)(x0, y0, x1, y1);
  keys[i] = depth;
}

// One step (j, k) of the bitonic sort of order[] by (keys[order[i]], order[i]).
__kernel void rlx_splat_sort_step(__global const double* keys, __global int* order, const int j, const int k) {
  const int i = get_global_id(0);
  const int l = i ^ j;
  if (l <= i) return;
  const int a = order[i], b = order[l];
  const double ka = keys[a], kb = keys[b];
  const int a_after = ka > kb || (ka == kb && a > b);
  if (((i & k) == 0) == a_after) {
    order[i] = b;
    order[l] = a;
  }
}

typedef struct {
  double mx, my, a, b, c, o, skip, col[3];
  int4 rect;
  int id;
} Rec;

void load_rec(__local Rec* r, int g, __global const int4* rect, __global const double* skip,
              __global const T* means2d, __global const T* conics, __global const T* colors,
              __global const T* opacities) {
  r->rect = rect[g];
  r->id = g;
  r->mx = means2d[g * 2];
  r->my = means2d[g * 2 + 1];
  r->a = conics[g * 3];
  r->b = conics[g * 3 + 1];
  r->c = conics[g * 3 + 2];
  r->o = opacities[g];
  r->skip = skip[g];
  for (int ch = 0; ch < 3; ++ch) r->col[ch] = colors[g * 3 + ch];
}

// Whether Gaussian k is composited at (px, py) (the tile test is the caller's): its alpha,
// Gaussian value and whether alpha is clamped at 0.99.
int contributes(__local const Rec* k, double px, double py, double* alpha, double* G, int* clamped) {
  const double dx = k->mx - px, dy = k->my - py;
  const double power = -0.5 * (k->a * dx * dx + k->c * dy * dy) - k->b * dx * dy;
  if (!(power <= 0) || power < k->skip) return 0;
  *G = exp(power);
  const double raw = k->o * *G;
  *alpha = fmin(KMAXA, raw);
  *clamped = raw > KMAXA;
  return *alpha >= KMINA;
}

int in_rect(int4 r, int tx, int ty) { return tx >= r.x && tx <= r.z && ty >= r.y && ty <= r.w; }

// The pixels of one BLK x BLK block: work-groups stage GS sorted Gaussians at a time in local
// memory and stop once every pixel of the block is saturated.
#define RASTER_ARGS                                                                                          \
  __global const T *means2d, __global const T *conics, __global const T *colors, __global const T *opacities, \
      __global const T *background, __global const int4 *rect, __global const double *skip,                  \
      __global const int *order, const int n, const int tile, const int width, const int height

#define PIXEL_SETUP                                                              \
  const int x = get_global_id(0), y = get_global_id(1);                          \
  const int lid = get_local_id(1) * BLK + get_local_id(0);                       \
  const int inside = x < width && y < height;                                    \
  const int tx = x / tile, ty = y / tile;                                        \
  const double px = x + 0.5, py = y + 0.5;

#define LOAD_BATCH(base)                                                                                  \
  if ((base) + lid < n) load_rec(&rec[lid], order[(base) + lid], rect, skip, means2d, conics, colors, opacities);

__kernel __attribute__((reqd_work_group_size(BLK, BLK, 1))) void rlx_splat_raster(RASTER_ARGS, __global T* image) {
  __local Rec rec[GS];
  __local int finished;
  PIXEL_SETUP
  double t = 1, col[3] = {0, 0, 0};
  int done = !inside;
  for (int base = 0; base < n; base += GS) {
    if (lid == 0) finished = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (done) atomic_inc(&finished);
    LOAD_BATCH(base)
    barrier(CLK_LOCAL_MEM_FENCE);
    if (finished == GS) break;
    const int count = min(GS, n - base);
    for (int j = 0; j < count && !done; ++j) {
      if (!in_rect(rec[j].rect, tx, ty)) continue;
      double alpha, G;
      int clamped;
      if (!contributes(&rec[j], px, py, &alpha, &G, &clamped)) continue;
      const double next = t * (1 - alpha);
      if (next < KMINT) {
        done = 1;
        break;
      }
      for (int ch = 0; ch < 3; ++ch) col[ch] += rec[j].col[ch] * alpha * t;
      t = next;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (!inside) return;
  __global T* out = image + ((long)y * width + x) * 3;
  for (int ch = 0; ch < 3; ++ch) out[ch] = (T)(col[ch] + t * (double)background[ch]);
}
)CL";

constexpr const char* kRasterBackwardKernels = R"CL(
void atomic_add_f64(__global double* p, double v) {
  if (v == 0) return;
  volatile __global long* q = (volatile __global long*)p;
  long seen = *q, expected;
  do {
    expected = seen;
    seen = atom_cmpxchg(q, expected, as_long(as_double(expected) + v));
  } while (seen != expected);
}

// acc: 9 sums per Gaussian (2D mean x, y; conic a, b, c; colour r, g, b; opacity), zeroed
// before the launch; bg_terms: each pixel's T_final * g, summed by rlx_splat_background_sum.
__kernel __attribute__((reqd_work_group_size(BLK, BLK, 1))) void rlx_splat_raster_backward(
    RASTER_ARGS, __global const T* g_image, __global double* acc, __global double* bg_terms) {
  __local Rec rec[GS];
  __local int finished, last;
  PIXEL_SETUP
  // replay the forward: the final transmittance and the sorted position where it stopped
  double t = 1;
  int stop = inside ? n : 0, done = !inside;
  for (int base = 0; base < n; base += GS) {
    if (lid == 0) finished = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (done) atomic_inc(&finished);
    LOAD_BATCH(base)
    barrier(CLK_LOCAL_MEM_FENCE);
    if (finished == GS) break;
    const int count = min(GS, n - base);
    for (int j = 0; j < count && !done; ++j) {
      if (!in_rect(rec[j].rect, tx, ty)) continue;
      double alpha, G;
      int clamped;
      if (!contributes(&rec[j], px, py, &alpha, &G, &clamped)) continue;
      const double next = t * (1 - alpha);
      if (next < KMINT) {
        done = 1;
        stop = base + j;
        break;
      }
      t = next;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) last = 0;
  barrier(CLK_LOCAL_MEM_FENCE);
  atomic_max(&last, stop);
  barrier(CLK_LOCAL_MEM_FENCE);
  const int end = last;
  double g[3] = {0, 0, 0};
  if (inside) {
    __global const T* gp = g_image + ((long)y * width + x) * 3;
    for (int ch = 0; ch < 3; ++ch) {
      g[ch] = gp[ch];
      bg_terms[((long)y * width + x) * 3 + ch] = t * g[ch];
    }
  }
  // back to front: S is g . (the colour composited behind the current Gaussian)
  double S = t * ((double)background[0] * g[0] + (double)background[1] * g[1] + (double)background[2] * g[2]);
  for (int base = end > 0 ? (end - 1) / GS * GS : -GS; base >= 0; base -= GS) {
    LOAD_BATCH(base)
    barrier(CLK_LOCAL_MEM_FENCE);
    const int count = min(GS, n - base);
    for (int j = count - 1; j >= 0; --j) {
      if (base + j >= stop || !in_rect(rec[j].rect, tx, ty)) continue;
      double alpha, G;
      int clamped;
      if (!contributes(&rec[j], px, py, &alpha, &G, &clamped)) continue;
      __local const Rec* q = &rec[j];
      __global double* s = acc + (long)q->id * 9;
      const double ti = t / (1 - alpha);
      const double w = alpha * ti;
      double cg = 0;
      for (int ch = 0; ch < 3; ++ch) {
        atomic_add_f64(&s[5 + ch], w * g[ch]);
        cg += q->col[ch] * g[ch];
      }
      const double d_alpha = ti * cg - S / (1 - alpha);
      S += w * cg;
      t = ti;
      if (clamped) continue;
      atomic_add_f64(&s[8], d_alpha * G);
      const double d_power = d_alpha * q->o * G;
      const double dx = q->mx - px, dy = q->my - py;
      atomic_add_f64(&s[0], d_power * -(q->a * dx + q->b * dy));
      atomic_add_f64(&s[1], d_power * -(q->b * dx + q->c * dy));
      atomic_add_f64(&s[2], d_power * -0.5 * dx * dx);
      atomic_add_f64(&s[3], d_power * -dx * dy);
      atomic_add_f64(&s[4], d_power * -0.5 * dy * dy);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

__kernel void rlx_splat_gradients_out(__global const double* acc, const int n, __global T* d_means2d,
                                      __global T* d_conics, __global T* d_colors, __global T* d_opacities) {
  const int i = get_global_id(0);
  if (i >= n) return;
  __global const double* a = acc + (long)i * 9;
  d_means2d[i * 2] = (T)a[0];
  d_means2d[i * 2 + 1] = (T)a[1];
  for (int j = 0; j < 3; ++j) d_conics[i * 3 + j] = (T)a[2 + j], d_colors[i * 3 + j] = (T)a[5 + j];
  d_opacities[i] = (T)a[8];
}

// The background's gradient: one work-group of 64 sums the pixels' terms in a fixed order.
__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void rlx_splat_background_sum(
    __global const double* bg_terms, const int pixels, __global T* d_background) {
  __local double part[64 * 3];
  const int lid = get_local_id(0);
  double s[3] = {0, 0, 0};
  for (int p = lid; p < pixels; p += 64)
    for (int ch = 0; ch < 3; ++ch) s[ch] += bg_terms[(long)p * 3 + ch];
  for (int ch = 0; ch < 3; ++ch) part[lid * 3 + ch] = s[ch];
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid != 0) return;
  for (int ch = 0; ch < 3; ++ch) {
    double total = 0;
    for (int i = 0; i < 64; ++i) total += part[i * 3 + ch];
    d_background[ch] = (T)total;
  }
}
)CL";

// The work-group side of the raster kernels: 16 x 16 pixels where the device allows it.
int block_side(const Runtime& rt) { return rt.max_work_group() >= 256 ? 16 : 8; }

std::string source(Op op, DType dt, const Runtime& rt) {
  std::string s = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n";
  if (op == Op::SplatRasterizeBackward) s += "#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable\n";
  s += "#pragma OPENCL FP_CONTRACT OFF\n";
  s += cat("#define T ", dt == DType::f64 ? "double" : "float", "\n#define BLK ", block_side(rt), "\n");
  if (op == Op::SplatProject || op == Op::SplatProjectBackward) {
    s += kProjectPrelude;
    s += kDoubleOps;
    s += kProjectBody;
    s += kDualOps;
    s += kProjectBody;
    s += kProjectKernels;
  } else {
    s += kRasterKernels;
    if (op == Op::SplatRasterizeBackward) s += kRasterBackwardKernels;
  }
  return s;
}

constexpr int64_t kMaxGaussians = int64_t{1} << 30;  // the padded sort length must fit an int

}  // namespace

Claim claim_splat(const NodeDesc& n, const Runtime& rt) {
  if (op_info(n.op).family != OpFamily::splat) return Claim::no(cat(op_name(n.op), " is not a splatting op"));
  const DType dt = n.inputs.empty() ? DType::f32 : n.inputs[0].dtype;
  if (dt != DType::f32 && dt != DType::f64)
    return Claim::no(cat("the OpenCL splatting kernels take f32 or f64, got ", dtype_name(dt)));
  for (const TensorType& t : n.inputs)
    if (!static_sizes(t.shape)) return Claim::no("the OpenCL splatting kernels need static shapes");
  if (!rt.fp64()) return Claim::no("the OpenCL splatting kernels compute in double (as the cpu's do); this device has no fp64");
  if (n.op == Op::SplatRasterizeBackward && !rt.int64_atomics())
    return Claim::no("splat_rasterize_backward adds gradients with 64-bit compare-and-swap; this OpenCL device lacks "
                     "cl_khr_int64_base_atomics");
  if (rt.max_work_group() < 64) return Claim::no("the OpenCL splatting kernels need work-groups of 64 items");
  const int64_t gaussians = static_sizes(n.inputs[0].shape)->at(0);
  if (gaussians > kMaxGaussians) return Claim::no(cat("the OpenCL splatting kernels take at most 2^30 Gaussians, got ", gaussians));
  const bool raster = n.op == Op::SplatRasterize || n.op == Op::SplatRasterizeBackward;
  return Claim::yes(cat("OpenCL splatting kernel ", op_name(n.op), " (", dtype_name(dt), ", ", gaussians, " Gaussians",
                        raster ? cat(", ", n.attrs.i("width"), "x", n.attrs.i("height"), " tile ", n.attrs.i("tile", 16),
                                     ", sorted on the device")
                               : std::string(),
                        ")"));
}

SplatLaunches::~SplatLaunches() {
  for (cl_kernel k : kernels_) clReleaseKernel(k);
  for (cl_mem m : owned_) clReleaseMemObject(m);
}

Expected<cl_kernel> SplatLaunches::kernel(cl_program p, const char* name) {
  cl_int err = CL_SUCCESS;
  cl_kernel k = clCreateKernel(p, name, &err);
  RLX_TRY(cl_check(err, cat("clCreateKernel ", name)));
  kernels_.push_back(k);
  return k;
}

Expected<cl_mem> SplatLaunches::scratch(Runtime& rt, size_t bytes, const void* init) {
  cl_int err = CL_SUCCESS;
  cl_mem m = clCreateBuffer(rt.context(), CL_MEM_READ_WRITE | (init ? CL_MEM_COPY_HOST_PTR : 0), std::max<size_t>(bytes, 8),
                            const_cast<void*>(init), &err);
  RLX_TRY(cl_check(err, cat("allocating ", bytes, " bytes of splatting scratch")));
  owned_.push_back(m);
  return m;
}

namespace {

// Binds the arguments of `k` in order: cl_mem buffers and int scalars.
struct Args {
  cl_kernel k;
  cl_uint i = 0;
  Status status = Status::ok();
  Args& mem(cl_mem m) {
    if (status.is_ok()) status = cl_check(clSetKernelArg(k, i, sizeof m, &m), cat("binding splatting argument ", i));
    ++i;
    return *this;
  }
  Args& num(int64_t v) {
    const cl_int x = static_cast<cl_int>(v);
    if (status.is_ok()) status = cl_check(clSetKernelArg(k, i, sizeof x, &x), cat("binding splatting argument ", i));
    ++i;
    return *this;
  }
};

size_t round_up(int64_t v, int64_t m) { return static_cast<size_t>((v + m - 1) / m * m); }

}  // namespace

Status SplatLaunches::prep_and_sort(cl_program p, const std::vector<cl_mem>& in, int n, int tile, int tiles_x,
                                    int tiles_y, cl_mem& rect, cl_mem& skip, cl_mem& order) {
  int padded = 1;
  while (padded < n) padded *= 2;
  RLX_ASSIGN_OR_RETURN(rect, scratch(*rt_, sizeof(cl_int4) * static_cast<size_t>(std::max(n, 1))));
  RLX_ASSIGN_OR_RETURN(skip, scratch(*rt_, sizeof(double) * static_cast<size_t>(std::max(n, 1))));
  RLX_ASSIGN_OR_RETURN(cl_mem keys, scratch(*rt_, sizeof(double) * static_cast<size_t>(padded)));
  RLX_ASSIGN_OR_RETURN(order, scratch(*rt_, sizeof(cl_int) * static_cast<size_t>(padded)));
  RLX_ASSIGN_OR_RETURN(cl_kernel prep, kernel(p, "rlx_splat_prep"));
  // inputs: means2d 0, conics 1, colors 2, opacities 3, depths 4, radii 5
  Args a{prep};
  a.mem(in[0]).mem(in[4]).mem(in[5]).mem(in[3]).num(n).num(padded).num(tile).num(tiles_x).num(tiles_y);
  a.mem(rect).mem(skip).mem(keys).mem(order);
  RLX_TRY(a.status);
  launches_.push_back(Launch{prep, 1, {static_cast<size_t>(padded), 1}, {0, 0}, 0, 0});
  RLX_ASSIGN_OR_RETURN(cl_kernel step, kernel(p, "rlx_splat_sort_step"));
  Args b{step};
  b.mem(keys).mem(order);
  RLX_TRY(b.status);
  for (int k = 2; k <= padded; k *= 2)
    for (int j = k / 2; j > 0; j /= 2) launches_.push_back(Launch{step, 1, {static_cast<size_t>(padded), 1}, {0, 0}, j, k});
  return Status::ok();
}

Expected<std::unique_ptr<SplatLaunches>> SplatLaunches::create(Runtime& rt, const NodeDesc& node,
                                                               const std::vector<cl_mem>& in,
                                                               const std::vector<cl_mem>& out) {
  std::unique_ptr<SplatLaunches> s(new SplatLaunches());
  s->rt_ = &rt;
  s->name_ = node.name;
  const DType dt = node.inputs[0].dtype;
  RLX_ASSIGN_OR_RETURN(cl_program p, rt.program(source(node.op, dt, rt)));
  const int n = static_cast<int>(static_sizes(node.inputs[0].shape)->at(0));
  if (node.op == Op::SplatProject || node.op == Op::SplatProjectBackward) {
    const splat::detail::Camera c = splat::detail::camera_of(node.attrs);
    double cam[22];
    std::copy(c.r, c.r + 9, cam);
    std::copy(c.t, c.t + 3, cam + 9);
    std::copy(c.campos, c.campos + 3, cam + 12);
    const double rest[7] = {c.fx, c.fy, c.cx, c.cy, c.near, static_cast<double>(c.width), static_cast<double>(c.height)};
    std::copy(rest, rest + 7, cam + 15);
    RLX_ASSIGN_OR_RETURN(cl_mem cm, s->scratch(rt, sizeof cam, cam));
    const int k = static_cast<int>(static_sizes(node.inputs[3].shape)->at(1));
    const bool fwd = node.op == Op::SplatProject;
    RLX_ASSIGN_OR_RETURN(cl_kernel kern, s->kernel(p, fwd ? "rlx_splat_project" : "rlx_splat_project_backward"));
    Args a{kern};
    a.mem(cm).mem(in[0]).mem(in[1]).mem(in[2]).mem(in[3]).num(n).num(k);
    if (!fwd) a.mem(in[4]).mem(in[5]).mem(in[6]).mem(in[7]);
    for (cl_mem m : out) a.mem(m);
    RLX_TRY(a.status);
    if (n > 0) s->launches_.push_back(Launch{kern, 1, {static_cast<size_t>(n), 1}, {0, 0}, 0, 0});
    return s;
  }
  const int64_t width = node.attrs.i("width"), height = node.attrs.i("height"), tile = node.attrs.i("tile", 16);
  const int tiles_x = static_cast<int>((width + tile - 1) / tile), tiles_y = static_cast<int>((height + tile - 1) / tile);
  cl_mem rect, skip, order;
  RLX_TRY(s->prep_and_sort(p, in, n, static_cast<int>(tile), tiles_x, tiles_y, rect, skip, order));
  const int blk = block_side(rt);
  const bool fwd = node.op == Op::SplatRasterize;
  RLX_ASSIGN_OR_RETURN(cl_kernel raster, s->kernel(p, fwd ? "rlx_splat_raster" : "rlx_splat_raster_backward"));
  // the register and local-memory needs of a kernel can lower its work-group limit below the device's
  size_t fits = 0;
  RLX_TRY(cl_check(clGetKernelWorkGroupInfo(raster, rt.device(), CL_KERNEL_WORK_GROUP_SIZE, sizeof fits, &fits, nullptr),
                   "querying the splatting kernel's work-group limit"));
  if (fits < static_cast<size_t>(blk * blk))
    return error(ErrorCode::unsupported, node.name, ": the OpenCL rasterizer needs work-groups of ", blk * blk,
                 " items; this device allows ", fits, " for it");
  // inputs: means2d 0, conics 1, colors 2, opacities 3, depths 4 and radii 5 (read by the prep
  // kernel), background 6
  Args a{raster};
  a.mem(in[0]).mem(in[1]).mem(in[2]).mem(in[3]).mem(in[6]);
  a.mem(rect).mem(skip).mem(order).num(n).num(tile).num(width).num(height);
  const Launch pixels{raster, 2, {round_up(width, blk), round_up(height, blk)}, {static_cast<size_t>(blk), static_cast<size_t>(blk)}, 0, 0};
  if (fwd) {
    a.mem(out[0]);
    RLX_TRY(a.status);
    s->launches_.push_back(pixels);
    return s;
  }
  RLX_ASSIGN_OR_RETURN(cl_mem acc, s->scratch(rt, sizeof(double) * 9 * static_cast<size_t>(std::max(n, 1))));
  RLX_ASSIGN_OR_RETURN(cl_mem terms, s->scratch(rt, sizeof(double) * 3 * static_cast<size_t>(width * height)));
  a.mem(in[7]).mem(acc).mem(terms);
  RLX_TRY(a.status);
  s->zero_.push_back(Fill{acc, sizeof(double) * 9 * static_cast<size_t>(std::max(n, 1))});
  s->launches_.push_back(pixels);
  RLX_ASSIGN_OR_RETURN(cl_kernel gout, s->kernel(p, "rlx_splat_gradients_out"));
  Args b{gout};
  b.mem(acc).num(n).mem(out[0]).mem(out[1]).mem(out[2]).mem(out[3]);
  RLX_TRY(b.status);
  if (n > 0) s->launches_.push_back(Launch{gout, 1, {static_cast<size_t>(n), 1}, {0, 0}, 0, 0});
  RLX_ASSIGN_OR_RETURN(cl_kernel bsum, s->kernel(p, "rlx_splat_background_sum"));
  Args c{bsum};
  c.mem(terms).num(width * height).mem(out[4]);
  RLX_TRY(c.status);
  s->launches_.push_back(Launch{bsum, 1, {64, 1}, {64, 1}, 0, 0});
  return s;
}

Status SplatLaunches::enqueue(cl_command_queue q) {
  for (const Fill& f : zero_) {
    const cl_double zero = 0;
    RLX_TRY(cl_check(clEnqueueFillBuffer(q, f.mem, &zero, sizeof zero, 0, f.bytes, 0, nullptr, nullptr),
                     "zeroing the splatting gradient sums"));
  }
  for (const Launch& l : launches_) {
    if (l.sort_k) {
      const cl_int j = l.sort_j, k = l.sort_k;
      RLX_TRY(cl_check(clSetKernelArg(l.kernel, 2, sizeof j, &j), "binding the sort step"));
      RLX_TRY(cl_check(clSetKernelArg(l.kernel, 3, sizeof k, &k), "binding the sort step"));
    }
    RLX_TRY(cl_check(clEnqueueNDRangeKernel(q, l.kernel, l.dims, nullptr, l.global, l.local[0] ? l.local : nullptr, 0,
                                            nullptr, nullptr),
                     cat("running the splatting kernels of ", name_)));
  }
  return Status::ok();
}

}  // namespace rlx::opencl
