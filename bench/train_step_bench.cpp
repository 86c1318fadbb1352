// The compiled training step alone: steps per second of rlx::train::Trainer on random data
// held in memory (no data loading, no shuffling), and the step's kernel listing. For
// profiling the compiler's output; the peer comparison is bench/train_bench.sh.
//
//   rlx_bench_train_step [--arch mlp|tinyconv] [--batch B] [--optimizer sgd|adam|adamw]
//                        [--momentum M] [--steps N] [--rounds R] [--listing] [--cpu-time]
//                        [--precision P[,P...]] [--form widened|narrow] [--weight-copies on|off|both]
//
// P is f32, bf16 or f16. Several precisions (and --weight-copies both: each narrow precision
// with and without AmpConfig::weight_copies, which rounds the f32 master weights in every step
// instead of carrying their rounded copies; the same values) are timed in one process, round
// by round in turn, so that they share the machine's state (on a host whose two cores run at
// one of two speeds from one process to the next, separate processes compare little); the
// report gives each one's median and best step and its per-round ratio to the first.
//
// --cpu-time divides by the process's CPU time instead of wall time: with RLX_NUM_THREADS=1
// on a loaded machine it measures the kernels without the time the process waits for a core
// (compare with scripts/peers/mnist_step_cpu.py, NumPy and PyTorch timed the same way).
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "train/init.h"
#include "train/trainer.h"

using namespace rlx;
using namespace rlx::train;

namespace {

struct Run {
  std::string label;
  std::unique_ptr<Trainer> trainer;
  const CompiledVariant* variant = nullptr;
  std::vector<double> times;  // seconds per step, per round
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  std::string arch = "mlp", optimizer = "sgd";
  int64_t batch = 128, steps = 200, rounds = 5;
  double momentum = 0.0;
  bool listing = false, cpu_time = false;
  std::string precisions = "f32", form, copies = "on";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--arch") arch = next();
    else if (a == "--batch") batch = std::stoll(next());
    else if (a == "--optimizer") optimizer = next();
    else if (a == "--momentum") momentum = std::stod(next());
    else if (a == "--steps") steps = std::stoll(next());
    else if (a == "--rounds") rounds = std::stoll(next());
    else if (a == "--listing") listing = true;
    else if (a == "--cpu-time") cpu_time = true;
    else if (a == "--precision") precisions = next();
    else if (a == "--form") form = next();
    else if (a == "--weight-copies") copies = next();
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
  if ((!form.empty() && form != "narrow" && form != "widened") || (copies != "on" && copies != "off" && copies != "both") ||
      steps < 1 || rounds < 1) {
    std::fprintf(stderr, "bad --form, --weight-copies, --steps or --rounds\n");
    return 2;
  }
  std::vector<Run> runs;
  for (size_t pos = 0; pos <= precisions.size();) {
    const size_t comma = std::min(precisions.find(',', pos), precisions.size());
    const std::string name = precisions.substr(pos, comma - pos);
    pos = comma + 1;
    auto prec = passes::parse_precision(name);
    if (!prec) {
      std::fprintf(stderr, "%s\n", prec.status().to_string().c_str());
      return 2;
    }
    const bool narrow = *prec != passes::Precision::f32;
    std::vector<bool> variants = !narrow || copies == "on" ? std::vector<bool>{true}
                                 : copies == "off"         ? std::vector<bool>{false}
                                                           : std::vector<bool>{true, false};
    for (bool with_copies : variants) {
      TrainConfig cfg;
      cfg.optimizer.kind = *kind;
      cfg.optimizer.momentum = momentum;
      cfg.amp.precision = *prec;
      cfg.amp.weight_copies = with_copies;
      if (!form.empty())
        cfg.amp.compute = form == "narrow" ? passes::AutocastOptions::Compute::narrow : passes::AutocastOptions::Compute::widened;
      auto trainer = Trainer::create(*model, cfg);
      if (!trainer) {
        std::fprintf(stderr, "%s\n", trainer.status().to_string().c_str());
        return 1;
      }
      runs.push_back({name + (narrow && copies == "both" ? (with_copies ? " (weight copies)" : " (no weight copies)") : ""),
                      std::move(*trainer)});
    }
  }
  Sizes xs{batch};
  xs.insert(xs.end(), model->example_shape.begin(), model->example_shape.end());
  Tensor x = uniform(DType::f32, xs, 0.0, 1.0, 7);
  Tensor y = Tensor::zeros(DType::i32, {batch});
  for (int64_t i = 0; i < batch; ++i) y.data<int32_t>()[i] = static_cast<int32_t>(i % 10);
  for (Run& r : runs) {
    auto t0 = std::chrono::steady_clock::now();
    auto var = r.trainer->step_variant(batch);
    if (!var) {
      std::fprintf(stderr, "%s\n", var.status().to_string().c_str());
      return 1;
    }
    r.variant = *var;
    std::printf("%s: compile %.2f s\n", r.label.c_str(), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (listing) {
      std::printf("%s\n", r.variant->report.to_text().c_str());
      std::printf("%s\n", r.variant->executable->stats().kernel_listing.c_str());
    }
    for (int i = 0; i < 5; ++i) (void)r.trainer->step(x, y, 0.01);
  }
  auto clock_s = [&]() {
    if (cpu_time) {
      timespec ts;
      clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
      return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  };
  for (int64_t round = 0; round < rounds; ++round) {
    for (Run& r : runs) {
      const double a = clock_s();
      for (int64_t s = 0; s < steps; ++s) {
        auto l = r.trainer->step(x, y, 0.01);
        if (!l) {
          std::fprintf(stderr, "%s\n", l.status().to_string().c_str());
          return 1;
        }
      }
      r.times.push_back((clock_s() - a) / static_cast<double>(steps));
    }
  }
  for (const Run& r : runs) {
    const double med = median(r.times), best = *std::min_element(r.times.begin(), r.times.end());
    std::printf("%s%s batch %lld %s %s: step %.1f us (best %.1f), %.0f images/s (best %.0f), %d native + %d generated kernels",
                cpu_time ? "[cpu time] " : "", arch.c_str(), static_cast<long long>(batch), optimizer.c_str(), r.label.c_str(),
                med * 1e6, best * 1e6, static_cast<double>(batch) / med, static_cast<double>(batch) / best,
                r.variant->executable->stats().native_kernels, r.variant->executable->stats().generated_kernels);
    if (&r != &runs[0]) {
      std::vector<double> ratio;  // the first run's step time over this one's: its speed-up
      for (size_t i = 0; i < r.times.size(); ++i) ratio.push_back(runs[0].times[i] / r.times[i]);
      std::printf(", %.3fx %s's speed (rounds %.3f-%.3f)", median(ratio), runs[0].label.c_str(),
                  *std::min_element(ratio.begin(), ratio.end()), *std::max_element(ratio.begin(), ratio.end()));
    }
    std::printf("\n");
  }
  return 0;
}
