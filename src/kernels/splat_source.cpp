// The GPU devices' splatting kernels (splat_source.h). The kernel text below follows the cpu's
// src/splat/ kernels step for step (the same operations in the same order, in double), so the
// devices differ from the cpu by their exp/log/sqrt (and, on cuda, NVRTC's fused
// multiply-adds) and, in the backward, by the order of the sums. It is one text for OpenCL C
// and CUDA C++: the language preludes at the end define its qualifiers, ids, barriers and
// atomics.
#include "kernels/splat_source.h"

#include <algorithm>

#include "splat/kernels_internal.h"

namespace rlx::kernels {
namespace {

// The projection of one Gaussian, generic in the scalar type S through macros (FN names the
// instance's functions; CST makes a constant, VAL reads the value, SCL multiplies by a double).
// Mirrors project_math.h: sh_basis, color_one, project_one.
constexpr const char* kProjectBody = R"SRC(
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

void FN(color_one)(const Cam* c, const S* p, RLX_GLOBAL const T* sh, int k, S* basis, S* color, int* clamped) {
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
int FN(project_one)(const Cam* c, const S* p, const S* ls, const S* q, RLX_GLOBAL const T* sh, int k, int with_color,
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
)SRC";

// The camera, the dual numbers, and the two instances of the projection.
constexpr const char* kProjectPrelude = R"SRC(
typedef struct { double r[9], t[3], campos[3], fx, fy, cx, cy, near, width, height; } Cam;
Cam load_cam(RLX_GLOBAL const double* p) {
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
)SRC";

constexpr const char* kDoubleOps = R"SRC(
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
)SRC";

constexpr const char* kDualOps = R"SRC(
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
)SRC";

constexpr const char* kProjectKernels = R"SRC(
RLX_KERNEL rlx_splat_project(RLX_GLOBAL const double* cam, RLX_GLOBAL const T* means, RLX_GLOBAL const T* log_scales,
                                RLX_GLOBAL const T* quats, RLX_GLOBAL const T* sh, const int n, const int k,
                                RLX_GLOBAL T* means2d, RLX_GLOBAL T* conics, RLX_GLOBAL T* depths, RLX_GLOBAL T* radii,
                                RLX_GLOBAL T* colors) {
  const int i = RLX_GID(0);
  if (i >= n) return;
  const Cam c = load_cam(cam);
  double p[3], ls[3], q[4];
  for (int j = 0; j < 3; ++j) p[j] = means[i * 3 + j], ls[j] = log_scales[i * 3 + j];
  for (int j = 0; j < 4; ++j) q[j] = quats[i * 4 + j];
  double mean2d[2], conic[3], depth, basis[16], color[3], radius;
  int clamped[3];
  project_one_d(&c, p, ls, q, sh + (RLX_LONG)i * k * 3, k, 1, mean2d, conic, &depth, basis, color, clamped, &radius);
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

RLX_KERNEL rlx_splat_project_backward(RLX_GLOBAL const double* cam, RLX_GLOBAL const T* means,
                                         RLX_GLOBAL const T* log_scales, RLX_GLOBAL const T* quats, RLX_GLOBAL const T* sh,
                                         const int n, const int k, RLX_GLOBAL const T* g_means2d,
                                         RLX_GLOBAL const T* g_conics, RLX_GLOBAL const T* g_depths,
                                         RLX_GLOBAL const T* g_colors, RLX_GLOBAL T* d_means, RLX_GLOBAL T* d_log_scales,
                                         RLX_GLOBAL T* d_quats, RLX_GLOBAL T* d_sh) {
  const int i = RLX_GID(0);
  if (i >= n) return;
  const Cam c = load_cam(cam);
  RLX_GLOBAL const T* shi = sh + (RLX_LONG)i * k * 3;
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
      d_sh[((RLX_LONG)i * k + j) * 3 + ch] = clamped[ch] ? (T)0 : (T)(basis[j].v * g_colors[i * 3 + ch]);
}
)SRC";

// Binning, sorting and compositing (rasterize.cpp, rasterize_backward.cpp).
constexpr const char* kRasterKernels = R"SRC(
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
RLX_KERNEL rlx_splat_prep(RLX_GLOBAL const T* means2d, RLX_GLOBAL const T* depths, RLX_GLOBAL const T* radii,
                             RLX_GLOBAL const T* opacities, const int n, const int padded, const int tile,
                             const int tiles_x, const int tiles_y, RLX_GLOBAL int4* rect, RLX_GLOBAL double* skip,
                             RLX_GLOBAL double* keys, RLX_GLOBAL int* order) {
  const int i = RLX_GID(0);
  if (i >= padded) return;
  order[i] = i;
  keys[i] = INFINITY;
  if (i >= n) return;
  const double o = opacities[i];
  skip[i] = o > 0 ? log(KMINA / o) - 1e-6 : INFINITY;
  rect[i] = RLX_INT4(1, 1, 0, 0);
  const double r = radii[i], mx = means2d[i * 2], my = means2d[i * 2 + 1], depth = depths[i];
  if (!(r > 0) || !isfinite(r) || !isfinite(mx) || !isfinite(my) || !isfinite(depth)) return;
  int x0, x1, y0, y1;
  if (!tile_range(mx, r, tile, tiles_x, &x0, &x1) || !tile_range(my, r, tile, tiles_y, &y0, &y1)) return;
  rect[i] = RLX_INT4(x0, y0, x1, y1);
  keys[i] = depth;
}

// One step (j, k) of the bitonic sort of order[] by (keys[order[i]], order[i]).
RLX_KERNEL rlx_splat_sort_step(RLX_GLOBAL const double* keys, RLX_GLOBAL int* order, const int j, const int k) {
  const int i = RLX_GID(0);
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
  int id, pos;  // the Gaussian and its sorted position
} Rec;

void load_rec(RLX_LOCAL Rec* r, int g, RLX_GLOBAL const int4* rect, RLX_GLOBAL const double* skip,
              RLX_GLOBAL const T* means2d, RLX_GLOBAL const T* conics, RLX_GLOBAL const T* colors,
              RLX_GLOBAL const T* opacities) {
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
int contributes(RLX_LOCAL const Rec* k, double px, double py, double* alpha, double* G, int* clamped) {
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

// The pixels of one BLK x BLK block: work-groups take GS sorted Gaussians at a time, stage in
// local memory those whose tile rectangle meets the block's tiles (in order: a prefix sum over
// the group), and stop once every pixel of the block is saturated.
#define RASTER_ARGS                                                                                          \
  RLX_GLOBAL const T *means2d, RLX_GLOBAL const T *conics, RLX_GLOBAL const T *colors, RLX_GLOBAL const T *opacities, \
      RLX_GLOBAL const T *background, RLX_GLOBAL const int4 *rect, RLX_GLOBAL const double *skip,                  \
      RLX_GLOBAL const int *order, const int n, const int tile, const int width, const int height

#define PIXEL_SETUP                                                              \
  const int x = RLX_GID(0), y = RLX_GID(1);                          \
  const int lid = RLX_LID(1) * BLK + RLX_LID(0);                       \
  const int inside = x < width && y < height;                                    \
  const int tx = x / tile, ty = y / tile;                                        \
  const double px = x + 0.5, py = y + 0.5;                                       \
  const int bx0 = x - (int)RLX_LID(0), by0 = y - (int)RLX_LID(1);                \
  const int btx0 = bx0 / tile, bty0 = by0 / tile;                                \
  const int btx1 = min(bx0 + BLK - 1, width - 1) / tile, bty1 = min(by0 + BLK - 1, height - 1) / tile;

// Stages the sorted Gaussians base .. base + GS - 1 whose tile rectangle meets the block's
// tiles into rec[0 .. count - 1], keeping their order; ends with a barrier.
#define STAGE_BATCH(base, count)                                                             \
  {                                                                                          \
    const int e = (base) + lid;                                                              \
    int g = 0, keep = 0;                                                                     \
    if (e < n) {                                                                             \
      g = order[e];                                                                          \
      const int4 r = rect[g];                                                                \
      keep = r.x <= btx1 && r.z >= btx0 && r.y <= bty1 && r.w >= bty0;                       \
    }                                                                                        \
    scan[lid] = keep;                                                                        \
    RLX_BARRIER();                                                                           \
    for (int off = 1; off < GS; off *= 2) {                                                  \
      const int add = lid >= off ? scan[lid - off] : 0;                                      \
      RLX_BARRIER();                                                                         \
      scan[lid] += add;                                                                      \
      RLX_BARRIER();                                                                         \
    }                                                                                        \
    if (keep) {                                                                              \
      load_rec(&rec[scan[lid] - 1], g, rect, skip, means2d, conics, colors, opacities);      \
      rec[scan[lid] - 1].pos = e;                                                            \
    }                                                                                        \
    count = scan[GS - 1];                                                                    \
    RLX_BARRIER();                                                                           \
  }

RLX_KERNEL_WG(BLK, BLK) rlx_splat_raster(RASTER_ARGS, RLX_GLOBAL T* image) {
  RLX_SHARED Rec rec[GS];
  RLX_SHARED int scan[GS];
  RLX_SHARED int finished;
  PIXEL_SETUP
  double t = 1, col[3] = {0, 0, 0};
  int done = !inside;
  for (int base = 0; base < n; base += GS) {
    if (lid == 0) finished = 0;
    RLX_BARRIER();
    if (done) RLX_LOCAL_INC(&finished);
    int count;
    STAGE_BATCH(base, count)
    if (finished == GS) break;
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
    RLX_BARRIER();
  }
  if (!inside) return;
  RLX_GLOBAL T* out = image + ((RLX_LONG)y * width + x) * 3;
  for (int ch = 0; ch < 3; ++ch) out[ch] = (T)(col[ch] + t * (double)background[ch]);
}
)SRC";

constexpr const char* kRasterBackwardKernels = R"SRC(
// acc: 9 sums per Gaussian (2D mean x, y; conic a, b, c; colour r, g, b; opacity), zeroed
// before the launch; bg_terms: each pixel's T_final * g, summed by rlx_splat_background_sum.
RLX_KERNEL_WG(BLK, BLK) rlx_splat_raster_backward(
    RASTER_ARGS, RLX_GLOBAL const T* g_image, RLX_GLOBAL double* acc, RLX_GLOBAL double* bg_terms) {
  RLX_SHARED Rec rec[GS];
  RLX_SHARED int scan[GS];
  RLX_SHARED int finished, last;
  PIXEL_SETUP
  // replay the forward: the final transmittance and the sorted position where it stopped
  double t = 1;
  int stop = inside ? n : 0, done = !inside;
  for (int base = 0; base < n; base += GS) {
    if (lid == 0) finished = 0;
    RLX_BARRIER();
    if (done) RLX_LOCAL_INC(&finished);
    int count;
    STAGE_BATCH(base, count)
    if (finished == GS) break;
    for (int j = 0; j < count && !done; ++j) {
      if (!in_rect(rec[j].rect, tx, ty)) continue;
      double alpha, G;
      int clamped;
      if (!contributes(&rec[j], px, py, &alpha, &G, &clamped)) continue;
      const double next = t * (1 - alpha);
      if (next < KMINT) {
        done = 1;
        stop = rec[j].pos;
        break;
      }
      t = next;
    }
    RLX_BARRIER();
  }
  if (lid == 0) last = 0;
  RLX_BARRIER();
  RLX_LOCAL_MAX(&last, stop);
  RLX_BARRIER();
  const int end = last;
  double g[3] = {0, 0, 0};
  if (inside) {
    RLX_GLOBAL const T* gp = g_image + ((RLX_LONG)y * width + x) * 3;
    for (int ch = 0; ch < 3; ++ch) {
      g[ch] = gp[ch];
      bg_terms[((RLX_LONG)y * width + x) * 3 + ch] = t * g[ch];
    }
  }
  // back to front: S is g . (the colour composited behind the current Gaussian)
  double S = t * ((double)background[0] * g[0] + (double)background[1] * g[1] + (double)background[2] * g[2]);
  for (int base = end > 0 ? (end - 1) / GS * GS : -GS; base >= 0; base -= GS) {
    int count;
    STAGE_BATCH(base, count)
    for (int j = count - 1; j >= 0; --j) {
      if (rec[j].pos >= stop || !in_rect(rec[j].rect, tx, ty)) continue;
      double alpha, G;
      int clamped;
      if (!contributes(&rec[j], px, py, &alpha, &G, &clamped)) continue;
      RLX_LOCAL const Rec* q = &rec[j];
      RLX_GLOBAL double* s = acc + (RLX_LONG)q->id * 9;
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
    RLX_BARRIER();
  }
}

RLX_KERNEL rlx_splat_gradients_out(RLX_GLOBAL const double* acc, const int n, RLX_GLOBAL T* d_means2d,
                                      RLX_GLOBAL T* d_conics, RLX_GLOBAL T* d_colors, RLX_GLOBAL T* d_opacities) {
  const int i = RLX_GID(0);
  if (i >= n) return;
  RLX_GLOBAL const double* a = acc + (RLX_LONG)i * 9;
  d_means2d[i * 2] = (T)a[0];
  d_means2d[i * 2 + 1] = (T)a[1];
  for (int j = 0; j < 3; ++j) d_conics[i * 3 + j] = (T)a[2 + j], d_colors[i * 3 + j] = (T)a[5 + j];
  d_opacities[i] = (T)a[8];
}

// The background's gradient: one work-group of 64 sums the pixels' terms in a fixed order.
RLX_KERNEL_WG(64, 1) rlx_splat_background_sum(
    RLX_GLOBAL const double* bg_terms, const int pixels, RLX_GLOBAL T* d_background) {
  RLX_SHARED double part[64 * 3];
  const int lid = RLX_LID(0);
  double s[3] = {0, 0, 0};
  for (int p = lid; p < pixels; p += 64)
    for (int ch = 0; ch < 3; ++ch) s[ch] += bg_terms[(RLX_LONG)p * 3 + ch];
  for (int ch = 0; ch < 3; ++ch) part[lid * 3 + ch] = s[ch];
  RLX_BARRIER();
  if (lid != 0) return;
  for (int ch = 0; ch < 3; ++ch) {
    double total = 0;
    for (int i = 0; i < 64; ++i) total += part[i * 3 + ch];
    d_background[ch] = (T)total;
  }
}
)SRC";

// OpenCL C. Every kernel reads doubles (cl_khr_fp64); the preludes' macros:
//   RLX_KERNEL, RLX_KERNEL_WG(X, Y)  a kernel's return type and qualifiers (with its fixed X x Y work-group)
//   RLX_GLOBAL, RLX_LOCAL            the address space of a pointer to global / local (shared) memory
//   RLX_SHARED                       a work-group's variable in local (shared) memory
//   RLX_GID(d), RLX_LID(d)           the global and local id in dimension d (0 or 1), as int
//   RLX_BARRIER()                    the work-group barrier (local memory)
//   RLX_LOCAL_INC(p), RLX_LOCAL_MAX(p, v)  atomic increment / maximum of a local int
//   RLX_INT4(a, b, c, d)             an int4 value
//   RLX_LONG                         the 64-bit integer
constexpr const char* kOpenclPrelude = R"CL(
#define RLX_KERNEL __kernel void
#define RLX_KERNEL_WG(X, Y) __kernel __attribute__((reqd_work_group_size(X, Y, 1))) void
#define RLX_GLOBAL __global
#define RLX_LOCAL __local
#define RLX_SHARED __local
#define RLX_LONG long
#define RLX_GID(d) ((int)get_global_id(d))
#define RLX_LID(d) ((int)get_local_id(d))
#define RLX_BARRIER() barrier(CLK_LOCAL_MEM_FENCE)
#define RLX_LOCAL_INC(p) atomic_inc(p)
#define RLX_LOCAL_MAX(p, v) atomic_max(p, v)
#define RLX_INT4(a, b, c, d) ((int4)(a, b, c, d))
)CL";

// The backward's double add: 64-bit compare-and-swap on the bits (cl_khr_int64_base_atomics).
constexpr const char* kOpenclAtomicF64 = R"CL(
void atomic_add_f64(__global double* p, double v) {
  if (v == 0) return;
  volatile __global long* q = (volatile __global long*)p;
  long seen = *q, expected;
  do {
    expected = seen;
    seen = atom_cmpxchg(q, expected, as_long(as_double(expected) + v));
  } while (seen != expected);
}
)CL";

// CUDA C++ (NVRTC, -default-device: the helpers are device functions). Kernels are unmangled
// for cudaLibraryGetKernel; __launch_bounds__ is the fixed work-group's size. NVRTC compiles
// without system headers: exp, log, floor, ceil, fmin, fmax, isfinite, min and int4 are
// CUDA's built-ins, INFINITY is defined here.
constexpr const char* kCudaPrelude = R"CU(
#define RLX_KERNEL extern "C" __global__ void
#define RLX_KERNEL_WG(X, Y) extern "C" __global__ void __launch_bounds__((X) * (Y))
#define RLX_GLOBAL
#define RLX_LOCAL
#define RLX_SHARED __shared__
#define RLX_LONG long long
#define RLX_GID(d) ((int)((d) == 0 ? blockIdx.x * blockDim.x + threadIdx.x : blockIdx.y * blockDim.y + threadIdx.y))
#define RLX_LID(d) ((int)((d) == 0 ? threadIdx.x : threadIdx.y))
#define RLX_BARRIER() __syncthreads()
#define RLX_LOCAL_INC(p) atomicAdd(p, 1)
#define RLX_LOCAL_MAX(p, v) atomicMax(p, v)
#define RLX_INT4(a, b, c, d) make_int4(a, b, c, d)
#ifndef INFINITY
#define INFINITY __longlong_as_double(0x7ff0000000000000LL)
#endif
)CU";

// The backward's double add: CUDA's atomicAdd on double (sm_60 on; the device claims the
// backward only there).
constexpr const char* kCudaAtomicF64 = R"CU(
void atomic_add_f64(double* p, double v) {
  if (v == 0) return;
  atomicAdd(p, v);
}
)CU";

bool projection(Op op) { return op == Op::SplatProject || op == Op::SplatProjectBackward; }

// The kernels of `op` under a language prelude (and its double atomic add, for the backward).
std::string kernels(Op op, DType dt, int block, const char* prelude, const char* atomic_f64) {
  std::string s = cat("#define T ", dt == DType::f64 ? "double" : "float", "\n#define BLK ", block, "\n");
  s += prelude;
  if (projection(op)) {
    s += kProjectPrelude;
    s += kDoubleOps;
    s += kProjectBody;
    s += kDualOps;
    s += kProjectBody;
    s += kProjectKernels;
  } else {
    s += kRasterKernels;
    if (op == Op::SplatRasterizeBackward) {
      s += atomic_f64;
      s += kRasterBackwardKernels;
    }
  }
  return s;
}

}  // namespace

std::string splat_opencl_source(Op op, DType dt, int block) {
  std::string s = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n";
  if (op == Op::SplatRasterizeBackward) s += "#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable\n";
  s += "#pragma OPENCL FP_CONTRACT OFF\n";
  return s + kernels(op, dt, block, kOpenclPrelude, kOpenclAtomicF64);
}

std::string splat_cuda_source(Op op, DType dt) { return kernels(op, dt, kSplatCudaBlock, kCudaPrelude, kCudaAtomicF64); }

std::vector<std::string> splat_kernel_names(Op op) {
  if (projection(op)) return {"rlx_splat_project", "rlx_splat_project_backward"};
  std::vector<std::string> k = {"rlx_splat_prep", "rlx_splat_sort_step", "rlx_splat_raster"};
  if (op == Op::SplatRasterizeBackward)
    k.insert(k.end(), {"rlx_splat_raster_backward", "rlx_splat_gradients_out", "rlx_splat_background_sum"});
  return k;
}

std::array<double, 22> splat_camera_buffer(const Attrs& attrs) {
  const splat::detail::Camera c = splat::detail::camera_of(attrs);
  std::array<double, 22> cam{};
  std::copy(c.r, c.r + 9, cam.begin());
  std::copy(c.t, c.t + 3, cam.begin() + 9);
  std::copy(c.campos, c.campos + 3, cam.begin() + 12);
  const double rest[7] = {c.fx, c.fy, c.cx, c.cy, c.near, static_cast<double>(c.width), static_cast<double>(c.height)};
  std::copy(rest, rest + 7, cam.begin() + 15);
  return cam;
}

int splat_sort_length(int n) {
  int padded = 1;
  while (padded < n) padded *= 2;
  return padded;
}

Claim claim_splat_kernels(const NodeDesc& n, std::string_view language) {
  if (op_info(n.op).family != OpFamily::splat) return Claim::no(cat(op_name(n.op), " is not a splatting op"));
  const DType dt = n.inputs.empty() ? DType::f32 : n.inputs[0].dtype;
  if (dt != DType::f32 && dt != DType::f64)
    return Claim::no(cat("the ", language, " splatting kernels take f32 or f64, got ", dtype_name(dt)));
  for (const TensorType& t : n.inputs)
    if (!static_sizes(t.shape)) return Claim::no(cat("the ", language, " splatting kernels need static shapes"));
  const int64_t gaussians = static_sizes(n.inputs[0].shape)->at(0);
  if (gaussians > kSplatMaxGaussians)
    return Claim::no(cat("the ", language, " splatting kernels take at most 2^30 Gaussians, got ", gaussians));
  const bool raster = n.op == Op::SplatRasterize || n.op == Op::SplatRasterizeBackward;
  return Claim::yes(cat(language, " splatting kernel ", op_name(n.op), " (", dtype_name(dt), ", ", gaussians,
                        " Gaussians",
                        raster ? cat(", ", n.attrs.i("width"), "x", n.attrs.i("height"), " tile ", n.attrs.i("tile", 16),
                                     ", sorted on the device")
                               : std::string(),
                        ")"));
}

}  // namespace rlx::kernels
