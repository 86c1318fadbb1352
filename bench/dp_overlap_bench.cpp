// A data-parallel training step under mpirun: the time per step of rlx::train::Trainer with
// the gradient all-reduces overlapped with the backward pass (the default) or run where the
// schedule reaches them (RLX_COMM_OVERLAP=0, set per process: bench/dp_overlap.sh runs both).
// The model is a deep MLP whose later layers are as large as its first, so that there is
// backward work left to hide a bucket's all-reduce behind (the MNIST MLP's largest gradient is
// its first layer's, produced last).
//
//   mpirun -np 2 rlx_bench_dp_overlap [--width W] [--layers L] [--batch B] [--bucket-kb K] [--steps N]
//
// Prints, on rank 0, the median and best time per step over 5 rounds; with RLX_PROFILE=1 each
// rank's step executable also prints (when destroyed) the time its collectives spent in the
// communicator and the time the step waited for them.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "dist/collective_ops.h"
#include "runtime/pipeline.h"
#include "rlx/comm.h"
#include "train/init.h"
#include "train/trainer.h"

using namespace rlx;
using namespace rlx::train;

int main(int argc, char** argv) {
  int64_t width = 1024, layers = 4, batch = 64, bucket_kb = 4096, steps = 10;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> int64_t { return i + 1 < argc ? std::atoll(argv[++i]) : 0; };
    if (a == "--width") width = next();
    else if (a == "--layers") layers = next();
    else if (a == "--batch") batch = next();
    else if (a == "--bucket-kb") bucket_kb = next();
    else if (a == "--steps") steps = next();
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (width < 1 || layers < 1 || batch < 1 || bucket_kb < 1 || steps < 1) {
    std::fprintf(stderr, "--width, --layers, --batch, --bucket-kb and --steps must be positive\n");
    return 2;
  }
  auto world = dist::world_communicator();
  if (!world) {
    std::fprintf(stderr, "%s\n", world.status().to_string().c_str());
    return 1;
  }
  const int rank = (*world)->rank(), ranks = (*world)->size();
  // layers x (width -> width, relu), then width -> 10
  ModelDef m;
  m.name = "deep_mlp";
  m.example_shape = {width};
  for (int64_t l = 0; l < layers; ++l) {
    const std::string p = "fc" + std::to_string(l);
    m.params.push_back({p + ".weight", kaiming_uniform(DType::f32, {width, width}, fans_linear(width, width), 11 + l)});
    m.params.push_back({p + ".bias", Tensor::zeros(DType::f32, {width})});
  }
  m.params.push_back({"out.weight", kaiming_uniform(DType::f32, {width, 10}, fans_linear(width, 10), 5, 1.0)});
  m.params.push_back({"out.bias", Tensor::zeros(DType::f32, {10})});
  m.forward = [layers](OpBuilder& o, ValueId x, std::span<const ValueId> p, std::vector<ValueId>* ends) {
    for (int64_t l = 0; l < layers; ++l) {
      x = o.relu(o.add(o.matmul(x, p[2 * l]), p[2 * l + 1]));
      if (ends) ends->push_back(x);
    }
    return o.add(o.matmul(x, p[2 * layers]), p[2 * layers + 1]);
  };
  TrainConfig cfg;
  cfg.comm = ranks > 1 ? *world : nullptr;
  cfg.bucket_bytes = bucket_kb * 1024;
  auto trainer = Trainer::create(m, cfg);
  if (!trainer) {
    std::fprintf(stderr, "%s\n", trainer.status().to_string().c_str());
    return 1;
  }
  // each rank's share of a global batch of `batch`
  const int64_t mine = dist::even_share(batch, ranks, rank).size;
  Tensor x = uniform(DType::f32, {mine, width}, 0.0, 1.0, 7 + static_cast<uint64_t>(rank));
  Tensor y = Tensor::zeros(DType::i32, {mine});
  for (int64_t i = 0; i < mine; ++i) y.data<int32_t>()[i] = static_cast<int32_t>((i + rank) % 10);
  for (int i = 0; i < 3; ++i) {
    auto l = (*trainer)->step(x, y, 1e-3);
    if (!l) {
      std::fprintf(stderr, "%s\n", l.status().to_string().c_str());
      return 1;
    }
  }
  std::vector<double> times;
  for (int r = 0; r < 5; ++r) {
    if (ranks > 1 && !(*world)->barrier().is_ok()) return 1;
    const auto a = std::chrono::steady_clock::now();
    for (int64_t s = 0; s < steps; ++s) {
      auto l = (*trainer)->step(x, y, 1e-3);
      if (!l) {
        std::fprintf(stderr, "%s\n", l.status().to_string().c_str());
        return 1;
      }
    }
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count() /
                    static_cast<double>(steps));
  }
  std::sort(times.begin(), times.end());
  if (rank == 0)
    std::printf("ranks %d, %lld layers of %lld, global batch %lld, buckets of %lld KiB, collectives %s: "
                "step %.2f ms (median of 5 rounds of %lld), best %.2f ms\n",
                ranks, static_cast<long long>(layers), static_cast<long long>(width), static_cast<long long>(batch),
                static_cast<long long>(bucket_kb), dist::overlap_collectives() ? "overlapped" : "synchronous",
                times[2], static_cast<long long>(steps), times[0]);
  return 0;
}
