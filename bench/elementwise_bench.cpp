// A fused elementwise chain against a plain memory copy of the same bytes, in one run.
//
//   y = gelu_tanh(x * a + b)   and   z = x * a + b   over n floats (read n, write n)
//   peer: memcpy of n floats (read n, write n), multi-threaded the same way
//
// Prints GB/s (bytes read + written) for each and the ratio to the copy.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "rlx/compile.h"
#include "rlx/op_builder.h"
#include "rlx/thread_pool.h"

using namespace rlx;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <class F>
double median_time(F&& f, int reps) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    double a = now_s();
    f();
    t.push_back(now_s() - a);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

std::unique_ptr<Model> chain_model(int64_t n, bool gelu) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{DType::f32, {n}});
  GraphBuilder gb(g);
  OpBuilder o(gb);
  ValueId y = o.add(o.mul(x, o.scalar(1.5, DType::f32)), o.scalar(0.25, DType::f32));
  if (gelu) y = o.gelu(y, "tanh");
  g.outputs = {y};
  auto m = Model::compile(std::move(g), {.device = "cpu"});
  if (!m) {
    std::fprintf(stderr, "%s\n", m.status().to_string().c_str());
    std::exit(1);
  }
  return std::move(*m);
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = 15;
  std::printf("# fused elementwise chain vs memcpy, %d threads, median of %d\n", ThreadPool::global().size(), reps);
  std::printf("| elements | memcpy GB/s | x*a+b GB/s | ratio | gelu(x*a+b) GB/s | ratio |\n|---|---|---|---|---|---|\n");
  for (int64_t n : {int64_t{1} << 20, int64_t{1} << 24}) {
    std::vector<Tensor> in{Tensor::zeros(DType::f32, {n})};
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-3, 3);
    for (int64_t i = 0; i < n; ++i) in[0].data<float>()[i] = u(rng);
    std::vector<Tensor> out{Tensor::zeros(DType::f32, {n})};
    auto affine = chain_model(n, false);
    auto gelu = chain_model(n, true);
    auto va = affine->variant_for(in);
    auto vg = gelu->variant_for(in);
    if (!va || !vg) return 1;
    Executable& ea = *(*va)->executable;
    Executable& eg = *(*vg)->executable;
    const float* src = in[0].data<float>();
    float* dst = out[0].data<float>();
    auto copy = [&] {
      ThreadPool::global().parallel_for(n, 1 << 16, [&](int64_t b, int64_t e) {
        std::memcpy(dst + b, src + b, static_cast<size_t>(e - b) * 4);
      });
    };
    // warm up every path, then alternate measurements so they share the machine's noise
    copy();
    (void)ea.run_into(in, out);
    (void)eg.run_into(in, out);
    double tc = 0, ta = 0, tg = 0;
    for (int round = 0; round < 3; ++round) {
      tc += median_time(copy, reps);
      ta += median_time([&] { (void)ea.run_into(in, out); }, reps);
      tg += median_time([&] { (void)eg.run_into(in, out); }, reps);
    }
    const double bytes = 8.0 * static_cast<double>(n);
    std::printf("| %lld | %.1f | %.1f | %.2f | %.1f | %.2f |\n", static_cast<long long>(n), 3 * bytes / tc / 1e9,
                3 * bytes / ta / 1e9, tc / ta, 3 * bytes / tg / 1e9, tc / tg);
  }
  return 0;
}
