// 3D Gaussian splatting (rlx/splat.h): the rendered image of a fixed seeded scene against the
// plain NumPy renderer of tests/sci/splat_reference.py; the gradients of every Gaussian
// parameter (means, log-scales, quaternions, opacity logits, SH coefficients of degree 3, the
// background) against central finite differences in f64; an optimization that fits Gaussians to
// a target image with Adam and must cut the loss 10x; the dispatch (native on cpu and ref,
// illegal with the reason elsewhere); and the PLY loader on good, truncated and corrupt files.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "device_fixture.h"
#include "rlx/compile.h"
#include "rlx/dispatch.h"
#include "rlx/npy.h"
#include "rlx/splat.h"
#include "train/autodiff.h"

namespace rlx {
namespace {

namespace fs = std::filesystem;
using splat::Camera;

// A seeded scene of n Gaussians in front of a camera at the origin looking along +z.
struct HostScene {
  int64_t n;
  int k;
  std::vector<double> means, log_scales, quats, opacity_logits, sh, background;
};

HostScene make_scene(uint64_t seed, int64_t n, int k, double spread = 1.0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  HostScene s{n, k, {}, {}, {}, {}, {}, {}};
  for (int64_t i = 0; i < n; ++i) {
    s.means.insert(s.means.end(), {spread * 0.8 * u(rng), spread * 0.8 * u(rng), 4.0 + u(rng)});
    for (int j = 0; j < 3; ++j) s.log_scales.push_back(-2.0 + 0.5 * u(rng));
    for (int j = 0; j < 4; ++j) s.quats.push_back(u(rng) + (j == 0 ? 1.5 : 0.0));
    s.opacity_logits.push_back(1.5 * u(rng));
    for (int j = 0; j < k * 3; ++j) s.sh.push_back(j < 3 ? 1.2 * u(rng) : 0.3 * u(rng));
  }
  s.background = {0.1, 0.2, 0.3};
  return s;
}

Camera camera(int64_t w, int64_t h) {
  // slightly rotated and shifted, so that every term of the projection is exercised
  return Camera::look_at({0.3, -0.2, -0.5}, {0, 0, 4}, {0, 1, 0}, 40, w, h);
}

struct Inputs {
  std::vector<Tensor> t;  // means, log_scales, quats, opacity_logits, sh, background
};

Inputs tensors(const HostScene& s, DType dt) {
  return {{Tensor::from_f64(dt, {s.n, 3}, s.means), Tensor::from_f64(dt, {s.n, 3}, s.log_scales),
           Tensor::from_f64(dt, {s.n, 4}, s.quats), Tensor::from_f64(dt, {s.n}, s.opacity_logits),
           Tensor::from_f64(dt, {s.n, s.k, 3}, s.sh), Tensor::from_f64(dt, {3}, s.background)}};
}

// A graph rendering the scene's inputs; outputs the image, or with `weights` the loss
// sum(image * weights) followed by its gradients with respect to all six inputs.
Graph render_graph(const HostScene& s, DType dt, const Camera& cam, const std::vector<double>* weights,
                   const std::vector<double>* target = nullptr, int64_t tile = 16) {
  Graph g;
  GraphBuilder gb(g);
  OpBuilder o(gb);
  Inputs in = tensors(s, dt);
  const char* names[] = {"means", "log_scales", "quats", "opacity_logits", "sh", "background"};
  std::vector<ValueId> x;
  for (int i = 0; i < 6; ++i) x.push_back(g.add_input(names[i], in.t[i].type()));
  ValueId img = tile == 16 ? splat::render(o, x[0], x[1], x[2], x[3], x[4], x[5], cam)
                           : splat::rasterize(o, splat::project(o, x[0], x[1], x[2], x[4], cam), o.sigmoid(x[3]), x[5],
                                              cam.width, cam.height, tile);
  EXPECT_TRUE(o.ok()) << o.status().to_string();
  if (!weights && !target) {
    g.outputs = {img};
    return g;
  }
  const Sizes is = {cam.height, cam.width, 3};
  ValueId loss;
  if (target) {  // mean squared error against the target image
    ValueId d = o.sub(img, o.constant(Tensor::from_f64(dt, is, *target)));
    loss = o.reduce_mean(o.mul(d, d), {}, false);
  } else {
    loss = o.reduce_sum(o.mul(img, o.constant(Tensor::from_f64(dt, is, *weights))), {}, false);
  }
  auto grads = train::gradients(g, loss, x);
  EXPECT_TRUE(grads.has_value()) << grads.status().to_string();
  g.outputs = {loss};
  if (grads) g.outputs.insert(g.outputs.end(), grads->begin(), grads->end());
  return g;
}

std::unique_ptr<Model> compile_on(const Graph& g, const char* dev) {
  auto m = Model::compile(g, {.device = dev});
  EXPECT_TRUE(m.has_value()) << m.status().to_string();
  return m ? std::move(*m) : nullptr;
}

TEST(Splat, ImageMatchesNumPyReference) {
  const char* py = "/usr/bin/python3";
  if (!fs::exists(py)) GTEST_SKIP() << "no /usr/bin/python3: the NumPy reference cannot run";
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 has no numpy: the NumPy reference cannot run";
  const HostScene s = make_scene(20261202, 40, 16);
  const Camera cam = camera(48, 40);  // 3 x 3 tiles, the last ones partial
  const fs::path dir = fs::temp_directory_path() / cat("rlx_splat_ref_", ::getpid());
  fs::create_directories(dir);
  Inputs in = tensors(s, DType::f64);
  in.t[3] = Tensor::from_f64(DType::f64, {s.n}, [&] {
    std::vector<double> o;
    for (double l : s.opacity_logits) o.push_back(1 / (1 + std::exp(-l)));
    return o;
  }());
  const char* names[] = {"means", "log_scales", "quats", "opacities", "sh", "background"};
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(write_npy((dir / cat(names[i], ".npy")).string(), in.t[i]).is_ok());
  std::vector<double> c(cam.viewmat.begin(), cam.viewmat.end());
  c.insert(c.end(), {cam.fx, cam.fy, cam.cx, cam.cy, double(cam.width), double(cam.height), cam.near});
  ASSERT_TRUE(write_npy((dir / "camera.npy").string(), Tensor::from_f64(DType::f64, {23}, c)).is_ok());
  const std::string cmd = cat(py, " ", RLX_SOURCE_DIR, "/tests/sci/splat_reference.py ", dir.string());
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto want = read_npy((dir / "image.npy").string());
  ASSERT_TRUE(want.has_value()) << want.status().to_string();
  const Graph g = render_graph(s, DType::f64, cam, nullptr);
  for (const char* dev : {"cpu", "ref"}) {
    auto m = compile_on(g, dev);
    ASSERT_TRUE(m);
    auto out = m->run(tensors(s, DType::f64).t);
    ASSERT_TRUE(out.has_value()) << out.status().to_string();
    const Tensor& img = (*out)[0];
    ASSERT_EQ(img.numel(), want->numel());
    double max_err = 0, sum = 0, bg_diff = 0;
    for (int64_t i = 0; i < img.numel(); ++i) {
      max_err = std::max(max_err, std::abs(img.get_f64(i) - want->get_f64(i)));
      sum += img.get_f64(i);
      bg_diff += std::abs(img.get_f64(i) - s.background[i % 3]);
    }
    EXPECT_LT(max_err, 1e-9) << dev << ": max |rlx - numpy| over the image";
    EXPECT_GT(bg_diff / img.numel(), 0.02) << "the scene must cover the image (not just background)";
  }
  // f32 storage renders the same image to f32 precision
  {
    auto m = compile_on(render_graph(s, DType::f32, cam, nullptr), "cpu");
    ASSERT_TRUE(m);
    auto out = m->run(tensors(s, DType::f32).t);
    ASSERT_TRUE(out.has_value()) << out.status().to_string();
    double max_err = 0;
    for (int64_t i = 0; i < want->numel(); ++i) max_err = std::max(max_err, std::abs((*out)[0].get_f64(i) - want->get_f64(i)));
    EXPECT_LT(max_err, 2e-3) << "f32 vs the f64 NumPy reference";
  }
  fs::remove_all(dir);
}

// d loss / d (every parameter) by autodiff (the backward ops) against central differences.
void check_gradients(const char* device, int k) {
  const HostScene s = make_scene(7 + k, 6, k);
  const Camera cam = camera(16, 16);
  std::mt19937_64 rng(99);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> w(16 * 16 * 3);
  for (double& x : w) x = u(rng);
  const Graph g = render_graph(s, DType::f64, cam, &w);
  auto m = compile_on(g, device);
  ASSERT_TRUE(m);
  Graph fwd = g;
  fwd.outputs = {g.outputs[0]};
  auto fm = compile_on(fwd, device);
  ASSERT_TRUE(fm);
  const std::vector<Tensor> x = tensors(s, DType::f64).t;
  auto out = m->run(x);
  ASSERT_TRUE(out.has_value()) << out.status().to_string();
  const char* names[] = {"means", "log_scales", "quats", "opacity_logits", "sh", "background"};
  int checked = 0, nonzero = 0;
  for (int i = 0; i < 6; ++i) {
    const Tensor& ad = (*out)[1 + i];
    for (int64_t e = 0; e < x[i].numel(); ++e) {
      std::vector<Tensor> v = x;
      v[i] = x[i].clone();
      const double x0 = x[i].get_f64(e), h = 1e-6;
      v[i].set_f64(e, x0 + h);
      const double fp = (*fm->run(v))[0].get_f64(0);
      v[i].set_f64(e, x0 - h);
      const double fmn = (*fm->run(v))[0].get_f64(0);
      const double fd = (fp - fmn) / (2 * h), got = ad.get_f64(e);
      EXPECT_NEAR(got, fd, 1e-5 * std::max(1.0, std::abs(fd))) << device << " " << names[i] << "[" << e << "]";
      ++checked;
      nonzero += std::abs(got) > 1e-6;
    }
  }
  // a wrong rule that returns zeros would pass trivially for invisible Gaussians; most
  // parameters of this scene must have a real gradient
  EXPECT_GT(nonzero, checked * 3 / 4) << nonzero << " of " << checked << " gradients are nonzero";
}

TEST(Splat, GradientsMatchFiniteDifferencesShDegree3) { check_gradients("cpu", 16); }
TEST(Splat, GradientsMatchFiniteDifferencesShDegree1OnRef) { check_gradients("ref", 4); }

// The projection alone, with a loss on every output it differentiates (2D means, conics,
// depths, colours): exercises the depth gradient that the image does not use.
TEST(Splat, ProjectionGradientsMatchFiniteDifferences) {
  const HostScene s = make_scene(5, 5, 9);
  const Camera cam = camera(32, 24);
  Graph g;
  GraphBuilder gb(g);
  OpBuilder o(gb);
  Inputs in = tensors(s, DType::f64);
  std::vector<ValueId> x;
  for (int i : {0, 1, 2, 4}) x.push_back(g.add_input(cat("x", i), in.t[i].type()));
  splat::Projection p = splat::project(o, x[0], x[1], x[2], x[3], cam);
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(-1, 1);
  ValueId loss = kNoValue;
  for (ValueId y : {p.means2d, p.conics, p.depths, p.colors}) {
    Sizes sz = *static_sizes(g.type(y).shape);
    std::vector<double> r(static_cast<size_t>(numel(sz)));
    for (double& v : r) v = u(rng);
    ValueId t = o.reduce_sum(o.mul(y, o.constant(Tensor::from_f64(DType::f64, sz, r))), {}, false);
    loss = loss == kNoValue ? t : o.add(loss, t);
  }
  auto grads = train::gradients(g, loss, x);
  ASSERT_TRUE(grads.has_value()) << grads.status().to_string();
  Graph fwd = g;
  fwd.outputs = {loss};
  g.outputs = {loss};
  g.outputs.insert(g.outputs.end(), grads->begin(), grads->end());
  auto m = compile_on(g, "cpu");
  auto fm = compile_on(fwd, "cpu");
  ASSERT_TRUE(m && fm);
  const std::vector<Tensor> xs = {in.t[0], in.t[1], in.t[2], in.t[4]};
  auto out = m->run(xs);
  ASSERT_TRUE(out.has_value()) << out.status().to_string();
  for (int i = 0; i < 4; ++i)
    for (int64_t e = 0; e < xs[i].numel(); ++e) {
      std::vector<Tensor> v = xs;
      v[i] = xs[i].clone();
      const double x0 = xs[i].get_f64(e), h = 1e-6;
      v[i].set_f64(e, x0 + h);
      const double fp = (*fm->run(v))[0].get_f64(0);
      v[i].set_f64(e, x0 - h);
      const double fmn = (*fm->run(v))[0].get_f64(0);
      const double fd = (fp - fmn) / (2 * h);
      EXPECT_NEAR((*out)[1 + i].get_f64(e), fd, 1e-5 * std::max(1.0, std::abs(fd))) << "input " << i << "[" << e << "]";
    }
}

// Fits a scene to a target image rendered from another scene, with Adam on all parameters.
TEST(Splat, AdamFitCutsTheLossTenfold) {
  const int64_t w = 32, h = 32;
  const Camera cam = camera(w, h);
  const HostScene truth = make_scene(11, 24, 4, 0.9);
  auto tm = compile_on(render_graph(truth, DType::f32, cam, nullptr), "cpu");
  ASSERT_TRUE(tm);
  auto target_img = tm->run(tensors(truth, DType::f32).t);
  ASSERT_TRUE(target_img.has_value());
  const std::vector<double> target = (*target_img)[0].to_f64();
  HostScene s = make_scene(12345, 48, 4, 0.9);  // more Gaussians than the truth, other places
  s.background = truth.background;
  auto m = compile_on(render_graph(s, DType::f32, cam, nullptr, &target), "cpu");
  ASSERT_TRUE(m);
  std::vector<double>* params[] = {&s.means, &s.log_scales, &s.quats, &s.opacity_logits, &s.sh, &s.background};
  const double lr[] = {0.01, 0.02, 0.02, 0.05, 0.02, 0.0};
  std::vector<std::vector<double>> m1, m2;
  for (auto* p : params) m1.emplace_back(p->size(), 0.0), m2.emplace_back(p->size(), 0.0);
  double first = 0, last = 0;
  const int steps = 300;
  for (int it = 1; it <= steps; ++it) {
    auto out = m->run(tensors(s, DType::f32).t);
    ASSERT_TRUE(out.has_value()) << out.status().to_string();
    const double loss = (*out)[0].get_f64(0);
    if (it == 1) first = loss;
    last = loss;
    for (int i = 0; i < 6; ++i) {
      const Tensor& gi = (*out)[1 + i];
      for (size_t e = 0; e < params[i]->size(); ++e) {
        const double gv = gi.get_f64(static_cast<int64_t>(e));
        m1[i][e] = 0.9 * m1[i][e] + 0.1 * gv;
        m2[i][e] = 0.999 * m2[i][e] + 0.001 * gv * gv;
        const double mh = m1[i][e] / (1 - std::pow(0.9, it)), vh = m2[i][e] / (1 - std::pow(0.999, it));
        (*params[i])[e] -= lr[i] * mh / (std::sqrt(vh) + 1e-8);
      }
    }
  }
  std::printf("splat fit: loss %.6g -> %.6g after %d Adam steps (%.1fx)\n", first, last, steps, first / last);
  EXPECT_LT(last, first / 10) << "loss " << first << " -> " << last;
}

TEST(Splat, NativeOnHostDevicesIllegalElsewhereWithTheReason) {
  const HostScene s = make_scene(1, 3, 1);
  const Graph g = render_graph(s, DType::f32, camera(8, 8), nullptr);
  for (const char* dev : {"cpu", "ref"}) {
    auto rep = explain(g, dev, DispatchPolicy{});
    ASSERT_TRUE(rep.has_value()) << rep.status().to_string();
    EXPECT_TRUE(rep->ok()) << rep->to_text();
    for (const NodeDecision& d : rep->nodes)
      if (op_info(d.op).family == OpFamily::splat) EXPECT_EQ(d.path, DispatchPath::native) << dev << " " << d.how;
  }
  auto rep = explain(g, "null", DispatchPolicy{});
  ASSERT_TRUE(rep.has_value());
  EXPECT_FALSE(rep->ok());
  const std::string err = rep->illegal_error().to_string();
  EXPECT_NE(err.find("no native splatting kernel on this device"), std::string::npos) << err;
}

// The opencl device's kernels (device-side sort, per-pixel compositing, atomic gradient sums)
// against the cpu's on fresh random scenes of more Gaussians than one staged batch (256), on
// an image of partial tiles and blocks. Skipped, saying why, where there is no OpenCL device.
uint64_t fresh_seed() { return (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}(); }

std::unique_ptr<Model> gpu_or_skip_reason(const Graph& g, const std::string& device, std::string& why) {
  // a device without splatting kernels refuses the nodes (the reason is the dispatch report's)
  auto rep = explain(g, device, DispatchPolicy{});
  if (!rep.has_value() || !rep->ok()) {
    why = rep.has_value() ? rep->illegal_error().to_string() : rep.status().to_string();
    return nullptr;
  }
  auto m = Model::compile(g, {.device = device});
  if (!m.has_value()) {
    why = m.status().to_string();
    return nullptr;
  }
  return std::move(*m);
}

// Every GPU-class device (tests/device_fixture.h); those with splatting kernels run the bodies
// (opencl here on PoCL; cuda where there is a GPU: its kernels are compiled from the same text,
// tests/cuda/splat_nvrtc_test.cpp), the others skip with the reason their compile gives.
class SplatGpu : public device_tests::DeviceTest {};
RLX_INSTANTIATE_FOR_DEVICES(SplatGpu);

// Every 7th Gaussian repeats the geometry of the one before with other colours and opacity,
// so that equal depths are ordered by index; tiles of 16 and of 2 pixels (with small tiles a
// Gaussian's tile rectangle cuts through pixels where its alpha is above 1/255, which the
// rectangle must exclude as the cpu's tile lists do).
HostScene scene_with_ties(uint64_t seed, int64_t n, int k) {
  HostScene s = make_scene(seed, n, k);
  for (double& l : s.opacity_logits) l *= 2;  // opacities up to 0.95: more pixels reach alpha 1/255
  for (int64_t i = 7; i < n; i += 7) {
    std::copy_n(s.means.begin() + (i - 1) * 3, 3, s.means.begin() + i * 3);
    std::copy_n(s.log_scales.begin() + (i - 1) * 3, 3, s.log_scales.begin() + i * 3);
    std::copy_n(s.quats.begin() + (i - 1) * 4, 4, s.quats.begin() + i * 4);
  }
  return s;
}

TEST_P(SplatGpu, ImageMatchesCpu) {
  RLX_REQUIRE_DEVICE_KIND(DeviceKind::gpu);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(cat("seed ", seed));
  const HostScene s = scene_with_ties(seed, 300, 16);
  const Camera cam = camera(70, 50);
  for (auto [dt, tile] : {std::pair{DType::f64, 16}, std::pair{DType::f64, 2}, std::pair{DType::f32, 16}}) {
    SCOPED_TRACE(cat(dtype_name(dt), " tile ", tile));
    const Graph g = render_graph(s, dt, cam, nullptr, nullptr, tile);
    std::string why;
    auto gpu = gpu_or_skip_reason(g, GetParam(), why);
    if (!gpu) GTEST_SKIP() << GetParam() << " not checked: " << why;
    auto cpu = compile_on(g, "cpu");
    ASSERT_TRUE(cpu);
    const std::vector<Tensor> in = tensors(s, dt).t;
    auto want = cpu->run(in);
    ASSERT_TRUE(want.has_value()) << want.status().to_string();
    for (int rep = 0; rep < 2; ++rep) {
      auto got = gpu->run(in);
      ASSERT_TRUE(got.has_value()) << got.status().to_string();
      double max_err = 0, bg_diff = 0;
      for (int64_t i = 0; i < (*want)[0].numel(); ++i) {
        max_err = std::max(max_err, std::abs((*got)[0].get_f64(i) - (*want)[0].get_f64(i)));
        bg_diff += std::abs((*want)[0].get_f64(i) - s.background[i % 3]);
      }
      EXPECT_LT(max_err, dt == DType::f64 ? 1e-10 : 1e-5) << dtype_name(dt) << " run " << rep;
      EXPECT_GT(bg_diff / (*want)[0].numel(), 0.05) << "the scene must cover the image";
    }
  }
}

TEST_P(SplatGpu, GradientsMatchCpu) {
  RLX_REQUIRE_DEVICE_KIND(DeviceKind::gpu);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(cat("seed ", seed));
  const HostScene s = scene_with_ties(seed, 280, 9);
  const Camera cam = camera(70, 50);
  std::mt19937_64 rng(seed + 1);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> w(70 * 50 * 3);
  for (double& x : w) x = u(rng);
  for (auto [dt, tile] : {std::pair{DType::f64, 16}, std::pair{DType::f64, 2}, std::pair{DType::f32, 16}}) {
    SCOPED_TRACE(cat(dtype_name(dt), " tile ", tile));
    const Graph g = render_graph(s, dt, cam, &w, nullptr, tile);
    std::string why;
    auto gpu = gpu_or_skip_reason(g, GetParam(), why);
    if (!gpu) GTEST_SKIP() << GetParam() << " not checked: " << why;
    auto cpu = compile_on(g, "cpu");
    ASSERT_TRUE(cpu);
    const std::vector<Tensor> in = tensors(s, dt).t;
    auto want = cpu->run(in);
    ASSERT_TRUE(want.has_value()) << want.status().to_string();
    const char* names[] = {"loss", "means", "log_scales", "quats", "opacity_logits", "sh", "background"};
    // twice: the gradient sums must start from zero on every run
    for (int rep = 0; rep < 2; ++rep) {
      auto got = gpu->run(in);
      ASSERT_TRUE(got.has_value()) << got.status().to_string();
      int nonzero = 0, total = 0;
      for (size_t o = 0; o < want->size(); ++o) {
        const Tensor &a = (*got)[o], &b = (*want)[o];
        double scale = 0;
        for (int64_t i = 0; i < b.numel(); ++i) scale = std::max(scale, std::abs(b.get_f64(i)));
        for (int64_t i = 0; i < b.numel(); ++i) {
          const double tol = dt == DType::f64 ? 1e-9 * (1 + scale) : 2e-4 * (1 + scale);
          ASSERT_NEAR(a.get_f64(i), b.get_f64(i), tol) << dtype_name(dt) << " run " << rep << " " << names[o] << "[" << i << "]";
          nonzero += std::abs(b.get_f64(i)) > 1e-8;
          ++total;
        }
      }
      EXPECT_GT(nonzero, total / 2) << "most gradients of the scene must be nonzero";
    }
  }
}

// splat_rasterize and its backward alone, with radii drawn independently of the conics (as
// the conformance cases do), so that tile rectangles often cut through Gaussians: which
// Gaussians a pixel composites is then decided by the rectangles, forward and backward.
TEST_P(SplatGpu, RasterizeWithNarrowRectanglesMatchesCpu) {
  RLX_REQUIRE_DEVICE_KIND(DeviceKind::gpu);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(cat("seed ", seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  const int64_t n = 400, w = 45, h = 30;
  std::vector<double> m2(n * 2), con(n * 3), col(n * 3), op(n), dep(n), rad(n), img_w(w * h * 3);
  for (int64_t i = 0; i < n; ++i) {
    m2[i * 2] = -5 + (w + 10) * u(rng);
    m2[i * 2 + 1] = -5 + (h + 10) * u(rng);
    const double sa = 1 + 4 * u(rng), sb = 1 + 4 * u(rng), rho = 0.8 * (2 * u(rng) - 1);
    const double det = sa * sa * sb * sb * (1 - rho * rho);  // inverse of [[sa^2, r sa sb], [r sa sb, sb^2]]
    con[i * 3] = sb * sb / det;
    con[i * 3 + 1] = -rho * sa * sb / det;
    con[i * 3 + 2] = sa * sa / det;
    for (int c = 0; c < 3; ++c) col[i * 3 + c] = u(rng);
    op[i] = 0.2 + 1.3 * u(rng);  // above 1 now and then: alpha clamps at 0.99
    dep[i] = i % 9 == 0 && i > 0 ? dep[i - 1] : 1 + 5 * u(rng);  // some equal depths
    rad[i] = 0.5 + 6 * u(rng);
  }
  for (double& x : img_w) x = 2 * u(rng) - 1;
  for (DType dt : {DType::f64, DType::f32}) {
    SCOPED_TRACE(dtype_name(dt));
    Graph g;
    GraphBuilder gb(g);
    OpBuilder o(gb);
    const std::vector<Tensor> in = {Tensor::from_f64(dt, {n, 2}, m2), Tensor::from_f64(dt, {n, 3}, con),
                                    Tensor::from_f64(dt, {n, 3}, col), Tensor::from_f64(dt, {n}, op),
                                    Tensor::from_f64(dt, {n}, dep),    Tensor::from_f64(dt, {n}, rad),
                                    Tensor::from_f64(dt, {3}, std::vector<double>{0.3, 0.6, 0.9})};
    const char* inputs[] = {"means2d", "conics", "colors", "opacities", "depths", "radii", "background"};
    std::vector<ValueId> x;
    for (int i = 0; i < 7; ++i) x.push_back(g.add_input(inputs[i], in[i].type()));
    const splat::Projection p{x[0], x[1], x[4], x[5], x[2]};
    ValueId img = splat::rasterize(o, p, x[3], x[6], w, h, 4);
    ValueId loss = o.reduce_sum(o.mul(img, o.constant(Tensor::from_f64(dt, {h, w, 3}, img_w))), {}, false);
    auto grads = train::gradients(g, loss, std::vector<ValueId>{x[0], x[1], x[2], x[3], x[6]});
    ASSERT_TRUE(grads.has_value()) << grads.status().to_string();
    g.outputs = {img};
    g.outputs.insert(g.outputs.end(), grads->begin(), grads->end());
    std::string why;
    auto gpu = gpu_or_skip_reason(g, GetParam(), why);
    if (!gpu) GTEST_SKIP() << GetParam() << " not checked: " << why;
    auto cpu = compile_on(g, "cpu");
    ASSERT_TRUE(cpu);
    auto want = cpu->run(in);
    ASSERT_TRUE(want.has_value()) << want.status().to_string();
    auto got = gpu->run(in);
    ASSERT_TRUE(got.has_value()) << got.status().to_string();
    const char* names[] = {"image", "d_means2d", "d_conics", "d_colors", "d_opacities", "d_background"};
    for (size_t k = 0; k < want->size(); ++k) {
      double scale = 0;
      for (int64_t i = 0; i < (*want)[k].numel(); ++i) scale = std::max(scale, std::abs((*want)[k].get_f64(i)));
      for (int64_t i = 0; i < (*want)[k].numel(); ++i)
        ASSERT_NEAR((*got)[k].get_f64(i), (*want)[k].get_f64(i), (dt == DType::f64 ? 1e-9 : 2e-4) * (1 + scale))
            << names[k] << "[" << i << "]";
    }
  }
}

TEST(SplatOpencl, DispatchSaysNativeOrWhyNot) {
  const HostScene s = make_scene(3, 5, 4);
  Graph g = render_graph(s, DType::f32, camera(8, 8), nullptr);
  auto rep = explain(g, "opencl", DispatchPolicy{});
  if (!rep.has_value()) GTEST_SKIP() << "opencl not checked: " << rep.status().to_string();
  if (!rep->ok()) {
    // a device without fp64 refuses with that reason, never silently
    EXPECT_NE(rep->illegal_error().to_string().find("fp64"), std::string::npos) << rep->to_text();
    GTEST_SKIP() << "this OpenCL device refuses the splatting kernels: " << rep->illegal_error().to_string();
  }
  int splat = 0;
  for (const NodeDecision& d : rep->nodes)
    if (op_info(d.op).family == OpFamily::splat) {
      ++splat;
      EXPECT_EQ(d.path, DispatchPath::native) << d.how;
      EXPECT_NE(d.how.find("OpenCL splatting kernel"), std::string::npos) << d.how;
    }
  EXPECT_EQ(splat, 2);
}

TEST(Splat, BadAttributesAndShapesAreErrors) {
  Graph g;
  GraphBuilder gb(g);
  OpBuilder o(gb);
  ValueId m = g.add_input("m", TensorType{DType::f32, to_shape({4, 3})});
  ValueId q = g.add_input("q", TensorType{DType::f32, to_shape({4, 4})});
  ValueId sh5 = g.add_input("sh", TensorType{DType::f32, to_shape({4, 5, 3})});
  splat::project(o, m, m, q, sh5, camera(8, 8));
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().to_string().find("K = 1, 4, 9 or 16"), std::string::npos) << o.status().to_string();
  OpBuilder o2(gb);
  Camera bad = camera(8, 8);
  bad.fx = -1;
  ValueId sh = g.add_input("sh1", TensorType{DType::f32, to_shape({4, 1, 3})});
  splat::project(o2, m, m, q, sh, bad);
  ASSERT_FALSE(o2.ok());
  EXPECT_NE(o2.status().to_string().find("focal length fx"), std::string::npos) << o2.status().to_string();
}

// ---- PLY

splat::Scene float_scene(const HostScene& h) {
  splat::Scene s;
  s.count = h.n;
  s.sh_coeffs = h.k;
  auto f = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  s.means = f(h.means);
  s.log_scales = f(h.log_scales);
  s.quats = f(h.quats);
  s.opacity_logits = f(h.opacity_logits);
  s.sh = f(h.sh);
  return s;
}

std::string temp_file(const std::string& name) {
  return (fs::temp_directory_path() / cat("rlx_splat_", ::getpid(), "_", name)).string();
}

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void spit(const std::string& p, const std::string& b) { std::ofstream(p, std::ios::binary).write(b.data(), b.size()); }

TEST(SplatPly, RoundTripsEveryShDegree) {
  for (int k : {1, 4, 9, 16}) {
    const splat::Scene s = float_scene(make_scene(k, 5, k));
    const std::string p = temp_file(cat("rt", k, ".ply"));
    ASSERT_TRUE(splat::save_ply(s, p).is_ok());
    auto r = splat::load_ply(p);
    ASSERT_TRUE(r.has_value()) << r.status().to_string();
    EXPECT_EQ(r->count, 5);
    EXPECT_EQ(r->sh_coeffs, k);
    EXPECT_EQ(r->means, s.means);
    EXPECT_EQ(r->log_scales, s.log_scales);
    EXPECT_EQ(r->quats, s.quats);
    EXPECT_EQ(r->opacity_logits, s.opacity_logits);
    EXPECT_EQ(r->sh, s.sh);
    fs::remove(p);
  }
}

TEST(SplatPly, NamedErrorsForBadFiles) {
  const std::string p = temp_file("bad.ply");
  ASSERT_TRUE(splat::save_ply(float_scene(make_scene(3, 4, 4)), p).is_ok());
  const std::string good = slurp(p);
  auto expect_error = [&](const std::string& bytes, const std::string& needle) {
    spit(p, bytes);
    auto r = splat::load_ply(p);
    ASSERT_FALSE(r.has_value()) << "accepted: " << needle;
    const std::string msg = r.status().to_string();
    EXPECT_NE(msg.find(p), std::string::npos) << "the error must name the file: " << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  };
  auto replace = [&](std::string from, std::string to) {
    std::string b = good;
    b.replace(b.find(from), from.size(), to);
    return b;
  };
  expect_error(good.substr(0, good.size() - 1), "need");                           // one byte short
  expect_error(good + "x", "need");                                                 // trailing byte
  expect_error(replace("property float opacity", "property float opacitx"), "'opacity' is missing");
  expect_error(replace("property float scale_1", "property double scale_1"), "'scale_1' has type double");
  expect_error(replace("binary_little_endian", "binary_big_endian___"), "not supported");
  expect_error(replace("element vertex 4", "element vertex 9"), "need");
  expect_error(replace("element vertex 4", "element vertex 99999999999999999999"), "not a count");
  expect_error(replace("property float f_rest_3", "property float f_rest_x"), "f_rest_");
  expect_error(replace("ply\n", "plx\n"), "not a PLY file");
  expect_error(replace("end_header", "end_headex"), "end_header");
  {  // a NaN value names the vertex and property
    std::string b = good;
    const float nan = std::nanf("");
    std::memcpy(&b[b.size() - 4], &nan, 4);  // rot_3 of the last vertex
    expect_error(b, "vertex 3 property 'rot_3' is not finite");
  }
  EXPECT_FALSE(splat::load_ply(temp_file("does_not_exist.ply")).has_value());
  fs::remove(p);
}

// Fuzz-style: every truncation of a valid file, and random byte corruptions, give an error or
// a scene whose arrays have the sizes its count says, never a crash or hang.
TEST(SplatPly, TruncatedAndCorruptFilesNeverCrash) {
  const std::string p = temp_file("fuzz.ply");
  ASSERT_TRUE(splat::save_ply(float_scene(make_scene(4, 3, 9)), p).is_ok());
  const std::string good = slurp(p);
  for (size_t n = 0; n < good.size(); ++n) {
    spit(p, good.substr(0, n));
    EXPECT_FALSE(splat::load_ply(p).has_value()) << "truncated to " << n << " bytes was accepted";
  }
  std::mt19937_64 rng(2024);
  int accepted = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::string b = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) b[rng() % b.size()] = static_cast<char>(rng() & 0xFF);
    spit(p, b);
    auto r = splat::load_ply(p);
    if (!r) continue;
    ++accepted;
    const size_t n = static_cast<size_t>(r->count);
    EXPECT_EQ(r->means.size(), n * 3);
    EXPECT_EQ(r->sh.size(), n * r->sh_coeffs * 3);
    for (float v : r->means) EXPECT_TRUE(std::isfinite(v));
  }
  std::printf("corrupt PLY trials: %d of 400 still valid files (flips inside float data)\n", accepted);
  fs::remove(p);
}

TEST(SplatPng, WritesADecodablePng) {
  if (std::system("/usr/bin/python3 -c 'import zlib' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 with zlib is needed to decode the PNG";
  const int64_t w = 70, h = 300;  // > 65535 bytes of scanlines: several stored blocks
  std::vector<float> img(w * h * 3);
  for (size_t i = 0; i < img.size(); ++i) img[i] = static_cast<float>((i * 37) % 256) / 255.f;
  const std::string p = temp_file("img.png");
  ASSERT_TRUE(splat::write_png(p, img.data(), w, h).is_ok());
  // decode with Python's zlib and binascii.crc32 (an independent implementation) and compare
  const std::string script = cat(
      "import zlib,struct,sys\n"
      "b=open('", p, "','rb').read()\nassert b[:8]==b'\\x89PNG\\r\\n\\x1a\\n'\npos=8\ndata=b''\n"
      "while pos<len(b):\n n,=struct.unpack('>I',b[pos:pos+4]);t=b[pos+4:pos+8];d=b[pos+8:pos+8+n]\n"
      " c,=struct.unpack('>I',b[pos+8+n:pos+12+n]);assert zlib.crc32(t+d)==c,t\n"
      " if t==b'IHDR': W,H=struct.unpack('>II',d[:8]);assert (W,H)==(", w, ",", h, ")\n"
      " if t==b'IDAT': data+=d\n pos+=12+n\n"
      "raw=zlib.decompress(data);s=1+", w, "*3\nassert len(raw)==", h, "*s\n"
      "px=[raw[y*s+1+i] for y in range(", h, ") for i in range(", w, "*3)]\n"
      "assert all(px[i]==(i*37)%256 for i in range(len(px))), 'pixel mismatch'\n");
  const std::string sp = temp_file("check_png.py");
  spit(sp, script);
  EXPECT_EQ(std::system(cat("/usr/bin/python3 ", sp).c_str()), 0);
  fs::remove(p);
  fs::remove(sp);
}

}  // namespace
}  // namespace rlx
