// The compiled training step alone: steps per second of rlx::train::Trainer on random data
// held in memory (no data loading, no shuffling), and the step's kernel listing. For
// profiling the compiler's output; the peer comparison is bench/train_bench.sh.
//
//   rlx_bench_train_step [--arch mlp|tinyconv] [--batch B] [--optimizer sgd|adam|adamw]
//                        [--momentum M] [--steps N] [--listing] [--cpu-time]
//                        [--precision f32|bf16|f16] [--form widened|narrow]
//
// --cpu-time divides by the process's CPU time instead of wall time: with RLX_NUM_THREADS=1
// on a loaded machine it measures the kernels without the time the process waits for a core
// (compare with scripts/peers/mnist_step_cpu.py, NumPy and PyTorch timed the same way).
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "train/init.h"
#include "train/trainer.h"

using namespace rlx;
using namespace rlx::train;

int main(int argc, char** argv) {
  std::string arch = "mlp", optimizer = "sgd";
  int64_t batch = 128, steps = 200;
  double momentum = 0.0;
  bool listing = false, cpu_time = false;
  std::string precision = "f32", form;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--arch") arch = next();
    else if (a == "--batch") batch = std::stoll(next());
    else if (a == "--optimizer") optimizer = next();
    else if (a == "--momentum") momentum = std::stod(next());
    else if (a == "--steps") steps = std::stoll(next());
    else if (a == "--listing") listing = true;
    else if (a == "--cpu-time") cpu_time = true;
    else if (a == "--precision") precision = next();
    else if (a == "--form") form = next();
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  auto model = mnist_model(arch, 1);
  auto kind = parse_optimizer(optimizer);
  if (!model || !kind) {
    std::fprintf(stderr, "bad --arch or --optimizer\n");
    return 2;
  }
  TrainConfig cfg;
  cfg.optimizer.kind = *kind;
  cfg.optimizer.momentum = momentum;
  auto prec = passes::parse_precision(precision);
  if (!prec || (!form.empty() && form != "narrow" && form != "widened")) {
    std::fprintf(stderr, "bad --precision or --form\n");
    return 2;
  }
  cfg.amp.precision = *prec;
  if (!form.empty())
    cfg.amp.compute = form == "narrow" ? passes::AutocastOptions::Compute::narrow : passes::AutocastOptions::Compute::widened;
  auto trainer = Trainer::create(*model, cfg);
  if (!trainer) {
    std::fprintf(stderr, "%s\n", trainer.status().to_string().c_str());
    return 1;
  }
  auto t0 = std::chrono::steady_clock::now();
  auto var = (*trainer)->step_variant(batch);
  if (!var) {
    std::fprintf(stderr, "%s\n", var.status().to_string().c_str());
    return 1;
  }
  double compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (listing) {
    std::printf("%s\n", (*var)->report.to_text().c_str());
    std::printf("%s\n", (*var)->executable->stats().kernel_listing.c_str());
  }
  Sizes xs{batch};
  xs.insert(xs.end(), model->example_shape.begin(), model->example_shape.end());
  Tensor x = uniform(DType::f32, xs, 0.0, 1.0, 7);
  Tensor y = Tensor::zeros(DType::i32, {batch});
  for (int64_t i = 0; i < batch; ++i) y.data<int32_t>()[i] = static_cast<int32_t>(i % 10);
  for (int i = 0; i < 5; ++i) (void)(*trainer)->step(x, y, 0.01);
  auto clock_s = [&]() {
    if (cpu_time) {
      timespec ts;
      clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
      return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  };
  std::vector<double> times;
  for (int r = 0; r < 5; ++r) {
    const double a = clock_s();
    for (int64_t s = 0; s < steps; ++s) {
      auto l = (*trainer)->step(x, y, 0.01);
      if (!l) {
        std::fprintf(stderr, "%s\n", l.status().to_string().c_str());
        return 1;
      }
    }
    times.push_back((clock_s() - a) / static_cast<double>(steps));
  }
  std::sort(times.begin(), times.end());
  std::printf("%s%s batch %lld %s: compile %.2f s, step %.1f us (best %.1f), %.0f images/s (best %.0f), %d native + %d generated kernels\n",
              cpu_time ? "[cpu time] " : "", arch.c_str(), static_cast<long long>(batch), optimizer.c_str(), compile_s, times[2] * 1e6, times[0] * 1e6,
              static_cast<double>(batch) / times[2], static_cast<double>(batch) / times[0],
              (*var)->executable->stats().native_kernels, (*var)->executable->stats().generated_kernels);
  return 0;
}
