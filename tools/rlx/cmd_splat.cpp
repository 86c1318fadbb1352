// rlx splat render SCENE.ply ... and rlx splat fit ...: the splatting ops of rlx/splat.h from
// the command line (docs/splatting.md). render loads a 3DGS PLY scene and writes a PNG; fit
// optimizes Gaussians with Adam (gradients from autodiff through the splat ops' backward ops)
// to the image of a seeded synthetic scene and writes PNGs of the progress.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>

#include "cli.h"
#include "entry.h"
#include "train/autodiff.h"

namespace rlx::cli {
namespace {

using splat::Camera;
using splat::Scene;

std::vector<Tensor> scene_tensors(const Scene& s, const std::array<float, 3>& bg) {
  const int64_t n = s.count;
  auto t = [](Sizes sz, const std::vector<float>& v) {
    Tensor x = Tensor::zeros(DType::f32, sz);
    std::copy(v.begin(), v.end(), x.data<float>());
    return x;
  };
  return {t({n, 3}, s.means), t({n, 3}, s.log_scales), t({n, 4}, s.quats), t({n}, s.opacity_logits),
          t({n, s.sh_coeffs, 3}, s.sh), t({3}, std::vector<float>(bg.begin(), bg.end()))};
}

// The graph: six inputs (means, log-scales, quaternions, opacity logits, SH, background) ->
// image; with a target, the MSE loss and its gradients instead.
Expected<Graph> render_graph(const Scene& s, const Camera& cam, const Tensor* target) {
  Graph g;
  GraphBuilder gb(g);
  OpBuilder o(gb);
  const std::vector<Tensor> ex = scene_tensors(s, {0, 0, 0});
  const char* names[] = {"means", "log_scales", "quats", "opacity_logits", "sh", "background"};
  std::vector<ValueId> x;
  for (int i = 0; i < 6; ++i) x.push_back(g.add_input(names[i], ex[i].type()));
  ValueId img = splat::render(o, x[0], x[1], x[2], x[3], x[4], x[5], cam);
  RLX_TRY(o.status());
  if (!target) {
    g.outputs = {img};
    return g;
  }
  ValueId d = o.sub(img, o.constant(*target));
  ValueId loss = o.reduce_mean(o.mul(d, d), {}, false);
  RLX_TRY(o.status());
  RLX_ASSIGN_OR_RETURN(std::vector<ValueId> grads, train::gradients(g, loss, std::span<const ValueId>(x.data(), 5)));
  g.outputs = {loss};
  g.outputs.insert(g.outputs.end(), grads.begin(), grads.end());
  return g;
}

// A seeded scene of n Gaussians around the origin, SH degree 1.
Scene random_scene(int64_t n, uint64_t seed, double size) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  Scene s;
  s.count = n;
  s.sh_coeffs = 4;
  for (int64_t i = 0; i < n; ++i) {
    for (int j = 0; j < 3; ++j) s.means.push_back(0.9f * u(rng));
    for (int j = 0; j < 3; ++j) s.log_scales.push_back(static_cast<float>(std::log(size)) + 0.4f * u(rng));
    for (int j = 0; j < 4; ++j) s.quats.push_back(u(rng) + (j == 0 ? 1.5f : 0.f));
    s.opacity_logits.push_back(u(rng));
    for (int j = 0; j < 12; ++j) s.sh.push_back(j < 3 ? 1.5f * u(rng) : 0.2f * u(rng));
  }
  return s;
}

int render_verb(int argc, char** argv) {
  auto a = parse_args(argc, argv, 3, {}, {"camera", "width", "height", "out", "background", "device"});
  if (!a) return report_error(a.status());
  if (a->positional.size() != 1)
    return report_error(error(ErrorCode::invalid_argument, "rlx splat render takes one SCENE.ply (see rlx help splat)"));
  auto num = [&](const char* k, int64_t def) -> Expected<int64_t> {
    auto v = a->get(k);
    if (!v) return def;
    return a->integer(k, def, 1, 16384);
  };
  auto w = num("width", 512), h = num("height", 512);
  if (!w) return report_error(w.status());
  if (!h) return report_error(h.status());
  auto spec = a->get("camera");
  if (!spec) return report_error(error(ErrorCode::invalid_argument, "rlx splat render needs --camera ex,ey,ez,tx,ty,tz[,fov]"));
  auto cam = splat::parse_camera(*spec, *w, *h);
  if (!cam) return report_error(cam.status());
  std::array<float, 3> bg{0, 0, 0};
  if (auto b = a->get("background")) {
    float r, g, bl;
    char tail;
    if (std::sscanf(b->c_str(), "%f,%f,%f%c", &r, &g, &bl, &tail) != 3)
      return report_error(error(ErrorCode::invalid_argument, "--background must be r,g,b, got '", *b, "'"));
    bg = {r, g, bl};
  }
  auto scene = splat::load_ply(a->positional[0]);
  if (!scene) return report_error(scene.status());
  const auto t0 = std::chrono::steady_clock::now();
  auto img = splat_render(*scene, *cam, bg, a->get("device").value_or("cpu"));
  if (!img) return report_error(img.status());
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const std::string out = a->get("out").value_or("image.png");
  Status s = splat::write_png(out, img->data<float>(), *w, *h);
  if (!s.is_ok()) return report_error(s);
  std::printf("%s: %lld Gaussians (SH degree %d), %lldx%lld, compile+render %.1f ms -> %s\n", a->positional[0].c_str(),
              static_cast<long long>(scene->count), static_cast<int>(std::lround(std::sqrt(scene->sh_coeffs))) - 1,
              static_cast<long long>(*w), static_cast<long long>(*h), ms, out.c_str());
  return kOk;
}

int fit_verb(int argc, char** argv) {
  auto a = parse_args(argc, argv, 3, {"quiet"}, {"out", "gaussians", "size", "steps", "lr", "seed"});
  if (!a) return report_error(a.status());
  SplatFitOptions o;
  auto out = a->get("out");
  if (!out) return report_error(error(ErrorCode::invalid_argument, "rlx splat fit needs --out DIR"));
  o.out_dir = *out;
  o.quiet = a->has("quiet");
  for (auto [key, dst, lo, hi] : {std::tuple<const char*, int64_t*, int64_t, int64_t>{"gaussians", &o.gaussians, 1, 1000000},
                                  {"size", &o.size, 8, 4096}}) {
    auto v = a->integer(key, *dst, lo, hi);
    if (!v) return report_error(v.status());
    *dst = *v;
  }
  auto steps = a->integer("steps", o.steps, 1, 100000);
  if (!steps) return report_error(steps.status());
  o.steps = static_cast<int>(*steps);
  auto seed = a->seed("seed", o.seed);
  if (!seed) return report_error(seed.status());
  o.seed = *seed;
  if (auto v = a->get("lr")) {
    char* end = nullptr;
    o.lr = std::strtod(v->c_str(), &end);
    if (end == v->c_str() || *end || !(o.lr > 0) || o.lr > 10)
      return report_error(error(ErrorCode::invalid_argument, "--lr must be a positive number, got '", *v, "'"));
  }
  auto r = splat_fit(o);
  if (!r) return report_error(r.status());
  std::printf("fit: loss %.6g -> %.6g (%.1fx lower) after %d Adam steps; PNGs and fit.ply in %s\n", r->first_loss,
              r->final_loss, r->first_loss / r->final_loss, o.steps, o.out_dir.c_str());
  return kOk;
}

}  // namespace

Expected<Tensor> splat_render(const Scene& scene, const Camera& camera, const std::array<float, 3>& background,
                              const std::string& device) {
  RLX_ASSIGN_OR_RETURN(Graph g, render_graph(scene, camera, nullptr));
  RLX_ASSIGN_OR_RETURN(auto model, Model::compile(g, {.device = device}));
  RLX_ASSIGN_OR_RETURN(std::vector<Tensor> out, model->run(scene_tensors(scene, background)));
  return out[0];
}

Expected<SplatFitResult> splat_fit(const SplatFitOptions& o) {
  std::error_code ec;
  std::filesystem::create_directories(o.out_dir, ec);
  if (ec) return error(ErrorCode::io_error, o.out_dir, ": cannot create the folder: ", ec.message());
  const Camera cam = Camera::look_at({0, 0, -3.2}, {0, 0, 0}, {0, 1, 0}, 45, o.size, o.size);
  const std::array<float, 3> bg{0, 0, 0};
  const Scene truth = random_scene(std::max<int64_t>(1, o.gaussians / 2), o.seed, 0.12);
  RLX_ASSIGN_OR_RETURN(Tensor target, splat_render(truth, cam, bg));
  auto png = [&](const std::string& name, const Tensor& img) {
    return splat::write_png((std::filesystem::path(o.out_dir) / name).string(), img.data<float>(), o.size, o.size);
  };
  RLX_TRY(png("target.png", target));
  SplatFitResult r;
  r.scene = random_scene(o.gaussians, o.seed + 1000, 0.08);
  RLX_ASSIGN_OR_RETURN(Tensor initial, splat_render(r.scene, cam, bg));
  RLX_TRY(png("initial.png", initial));
  RLX_ASSIGN_OR_RETURN(Graph g, render_graph(r.scene, cam, &target));
  RLX_ASSIGN_OR_RETURN(auto model, Model::compile(g, {.device = "cpu"}));
  std::vector<float>* params[] = {&r.scene.means, &r.scene.log_scales, &r.scene.quats, &r.scene.opacity_logits,
                                  &r.scene.sh};
  const double lr[] = {o.lr * 0.5, o.lr, o.lr, o.lr * 2, o.lr};
  std::vector<std::vector<double>> m1, m2;
  for (auto* p : params) m1.emplace_back(p->size(), 0.0), m2.emplace_back(p->size(), 0.0);
  const int snapshot = std::max(1, o.steps / 5);
  for (int it = 1; it <= o.steps; ++it) {
    RLX_ASSIGN_OR_RETURN(std::vector<Tensor> out, model->run(scene_tensors(r.scene, bg)));
    const double loss = out[0].get_f64(0);
    if (it == 1) r.first_loss = loss;
    r.final_loss = loss;
    if (!o.quiet && (it == 1 || it % snapshot == 0)) std::printf("step %5d  loss %.6g\n", it, loss);
    for (int i = 0; i < 5; ++i) {
      const float* gi = out[1 + i].data<float>();
      for (size_t e = 0; e < params[i]->size(); ++e) {
        const double gv = gi[e];
        m1[i][e] = 0.9 * m1[i][e] + 0.1 * gv;
        m2[i][e] = 0.999 * m2[i][e] + 0.001 * gv * gv;
        const double mh = m1[i][e] / (1 - std::pow(0.9, it)), vh = m2[i][e] / (1 - std::pow(0.999, it));
        (*params[i])[e] -= static_cast<float>(lr[i] * mh / (std::sqrt(vh) + 1e-8));
      }
    }
    if (it % snapshot == 0) {
      RLX_ASSIGN_OR_RETURN(Tensor img, splat_render(r.scene, cam, bg));
      char name[32];
      std::snprintf(name, sizeof name, "step_%04d.png", it);
      RLX_TRY(png(name, img));
    }
  }
  // the loss after the last update
  RLX_ASSIGN_OR_RETURN(std::vector<Tensor> out, model->run(scene_tensors(r.scene, bg)));
  r.final_loss = out[0].get_f64(0);
  RLX_ASSIGN_OR_RETURN(Tensor fin, splat_render(r.scene, cam, bg));
  RLX_TRY(png("final.png", fin));
  RLX_TRY(splat::save_ply(r.scene, (std::filesystem::path(o.out_dir) / "fit.ply").string()));
  return r;
}

int cmd_splat(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[2]) == "render") return render_verb(argc, argv);
  if (argc >= 3 && std::string(argv[2]) == "fit") return fit_verb(argc, argv);
  std::fprintf(stderr, "error: rlx splat: expected 'render' or 'fit', got '%.40s' (see rlx help splat)\n",
               argc > 2 ? argv[2] : "");
  return kUsage;
}

}  // namespace rlx::cli
