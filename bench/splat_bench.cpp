// 3D Gaussian splatting render and backward time: rlx (the splat ops on the cpu device, the
// thread pool's threads) against a PyTorch implementation of the same forward, with its backward
// by autograd (bench/splat_bench.py, /usr/bin/python3 torch, the same number of threads), on the
// same scene in the same run. Prints, per Gaussian count, best-of-REPS times and the ratios, and
// the largest difference between the two images.
//
//   rlx_bench_splat [SIZE=256] [REPS=5] [N...=10000 30000 100000]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlx/compile.h"
#include "rlx/npy.h"
#include "rlx/splat.h"
#include "rlx/thread_pool.h"
#include "train/autodiff.h"

using namespace rlx;
using Clock = std::chrono::steady_clock;

namespace {

struct Scene {
  std::vector<Tensor> t;  // means, log_scales, quats, opacity_logits, sh, background
};

// n Gaussians filling the view of a camera 4 units away, sizes ~ a few pixels at 256x256.
Scene make_scene(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> m, ls, q, o, sh;
  for (int64_t i = 0; i < n; ++i) {
    m.insert(m.end(), {1.5 * u(rng), 1.5 * u(rng), 1.5 * u(rng)});
    for (int j = 0; j < 3; ++j) ls.push_back(-4.0 + 0.5 * u(rng));
    for (int j = 0; j < 4; ++j) q.push_back(u(rng) + (j == 0 ? 1.0 : 0.0));
    o.push_back(u(rng));
    for (int j = 0; j < 48; ++j) sh.push_back(j < 3 ? u(rng) : 0.2 * u(rng));
  }
  return {{Tensor::from_f64(DType::f32, {n, 3}, m), Tensor::from_f64(DType::f32, {n, 3}, ls),
           Tensor::from_f64(DType::f32, {n, 4}, q), Tensor::from_f64(DType::f32, {n}, o),
           Tensor::from_f64(DType::f32, {n, 16, 3}, sh), Tensor::from_f64(DType::f32, {3}, std::vector<double>{0.1, 0.1, 0.1})}};
}

std::unique_ptr<Model> build(const Scene& s, const splat::Camera& cam, const Tensor* weights) {
  Graph g;
  GraphBuilder gb(g);
  OpBuilder o(gb);
  const char* names[] = {"means", "log_scales", "quats", "opacity_logits", "sh", "background"};
  std::vector<ValueId> x;
  for (int i = 0; i < 6; ++i) x.push_back(g.add_input(names[i], s.t[i].type()));
  ValueId img = splat::render(o, x[0], x[1], x[2], x[3], x[4], x[5], cam);
  if (!weights) {
    g.outputs = {img};
  } else {
    ValueId loss = o.reduce_sum(o.mul(img, o.constant(*weights)), {}, false);
    auto grads = train::gradients(g, loss, std::span<const ValueId>(x.data(), 5));
    if (!grads) {
      std::fprintf(stderr, "autodiff: %s\n", grads.status().to_string().c_str());
      std::exit(1);
    }
    g.outputs = {loss};
    g.outputs.insert(g.outputs.end(), grads->begin(), grads->end());
  }
  auto m = Model::compile(g, {.device = "cpu"});
  if (!m) {
    std::fprintf(stderr, "compile: %s\n", m.status().to_string().c_str());
    std::exit(1);
  }
  return std::move(*m);
}

double best_ms(Model& m, const std::vector<Tensor>& in, int reps, std::vector<Tensor>* keep = nullptr) {
  double best = 1e30;
  for (int r = 0; r <= reps; ++r) {  // one warm-up run
    auto t0 = Clock::now();
    auto out = m.run(in);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (!out) {
      std::fprintf(stderr, "run: %s\n", out.status().to_string().c_str());
      std::exit(1);
    }
    if (r > 0) best = std::min(best, ms);
    if (keep) *keep = std::move(*out);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t size = argc > 1 ? std::atoll(argv[1]) : 256;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  std::vector<int64_t> counts;
  for (int i = 3; i < argc; ++i) counts.push_back(std::atoll(argv[i]));
  if (counts.empty()) counts = {10000, 30000, 100000};
  const int threads = ThreadPool::global().size();
  const splat::Camera cam = splat::Camera::look_at({0, 0, -4}, {0, 0, 0}, {0, 1, 0}, 50, size, size);
  const bool have_torch = std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0;
  if (!have_torch) std::printf("peer unavailable: /usr/bin/python3 cannot import torch; printing rlx times only\n");
  std::printf("3DGS %lldx%lld, SH degree 3, f32, %d threads (rlx thread pool; torch set to the same)\n",
              static_cast<long long>(size), static_cast<long long>(size), threads);
  std::printf("| Gaussians | rlx render ms | torch render ms | torch / rlx | rlx fwd+bwd ms | torch fwd+bwd ms | torch / rlx | max |img diff| |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  const auto dir = std::filesystem::temp_directory_path() / "rlx_splat_bench";
  std::filesystem::create_directories(dir);
  for (int64_t n : counts) {
    const Scene s = make_scene(n, 42 + n);
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> u(-1, 1);
    std::vector<double> w(static_cast<size_t>(size * size * 3));
    for (double& x : w) x = u(rng);
    const Tensor weights = Tensor::from_f64(DType::f32, {size, size, 3}, w);
    auto fwd = build(s, cam, nullptr);
    auto fb = build(s, cam, &weights);
    std::vector<Tensor> img;
    const double r_fwd = best_ms(*fwd, s.t, reps, &img);
    const double r_fb = best_ms(*fb, s.t, reps);
    double t_fwd = 0, t_fb = 0, diff = -1;
    if (have_torch) {
      const char* names[] = {"means", "log_scales", "quats", "opacity_logits", "sh", "background"};
      for (int i = 0; i < 6; ++i) (void)write_npy((dir / (std::string(names[i]) + ".npy")).string(), s.t[i]);
      (void)write_npy((dir / "weights.npy").string(), weights);
      std::vector<double> c(cam.viewmat.begin(), cam.viewmat.end());
      c.insert(c.end(), {cam.fx, cam.fy, cam.cx, cam.cy, double(cam.width), double(cam.height), cam.near});
      (void)write_npy((dir / "camera.npy").string(), Tensor::from_f64(DType::f64, {23}, c));
      const std::string out = (dir / "torch.json").string();
      const std::string cmd = std::string("/usr/bin/python3 ") + RLX_SOURCE_DIR + "/bench/splat_bench.py " + dir.string() + " " +
                              std::to_string(threads) + " " + std::to_string(reps) + " > " + out;
      if (std::system(cmd.c_str()) == 0) {
        std::ifstream f(out);
        const nlohmann::json j = nlohmann::json::parse(f);
        t_fwd = j["forward_ms"].get<double>();
        t_fb = j["forward_backward_ms"].get<double>();
        auto ti = read_npy((dir / "torch_image.npy").string());
        if (ti) {
          diff = 0;
          for (int64_t i = 0; i < ti->numel(); ++i) diff = std::max(diff, std::abs(ti->get_f64(i) - img[0].get_f64(i)));
        }
      }
    }
    std::printf("| %lld | %.1f | %.1f | %.2f | %.1f | %.1f | %.2f | %.2g |\n", static_cast<long long>(n), r_fwd, t_fwd,
                t_fwd / r_fwd, r_fb, t_fb, t_fb / r_fb, diff);
    std::fflush(stdout);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
