// Builds y = relu(x W + b) with the public API of an installed rlx, compiles it for the CPU,
// runs it and checks the result against a plain loop. docs/cpp-api.md quotes this file.
#include <cmath>
#include <cstdio>
#include <vector>

#include "rlx/compile.h"
#include "rlx/op_builder.h"

int main() {
  // the graph: x f32[2, 3] input, W [3, 4] and b [4] weights
  rlx::Graph g;
  g.name = "dense";
  rlx::ValueId x = g.add_input("x", {rlx::DType::f32, {2, 3}});
  std::vector<double> w(12), b(4), xs(6);
  for (int i = 0; i < 12; ++i) w[i] = 0.1 * (i - 5);
  for (int i = 0; i < 4; ++i) b[i] = 0.25 * i - 0.3;
  for (int i = 0; i < 6; ++i) xs[i] = 0.5 * i - 1.0;
  rlx::GraphBuilder gb(g);
  rlx::OpBuilder o(gb);
  rlx::ValueId W = g.add_param("W", {rlx::DType::f32, {3, 4}}, rlx::Tensor::from_f64(rlx::DType::f32, {3, 4}, w));
  rlx::ValueId B = g.add_param("b", {rlx::DType::f32, {4}}, rlx::Tensor::from_f64(rlx::DType::f32, {4}, b));
  g.outputs = {o.relu(o.add(o.matmul(x, W), B))};
  if (!o.ok()) {
    std::fprintf(stderr, "build: %s\n", o.status().message().c_str());
    return 1;
  }

  // compile for the CPU and run
  auto model = rlx::Model::compile(g, {.device = "cpu"});
  if (!model) {
    std::fprintf(stderr, "compile: %s\n", model.status().message().c_str());
    return 1;
  }
  std::vector<rlx::Tensor> inputs{rlx::Tensor::from_f64(rlx::DType::f32, {2, 3}, xs)};
  auto out = (*model)->run(inputs);
  if (!out) {
    std::fprintf(stderr, "run: %s\n", out.status().message().c_str());
    return 1;
  }

  // check against a loop
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 4; ++c) {
      double want = b[c];
      for (int k = 0; k < 3; ++k) want += xs[r * 3 + k] * w[k * 4 + c];
      want = std::max(want, 0.0);
      double got = (*out)[0].get_f64(r * 4 + c);
      if (std::fabs(got - want) > 1e-5) {
        std::fprintf(stderr, "y[%d,%d] = %g, expected %g\n", r, c, got, want);
        return 1;
      }
    }
  std::printf("y = %s\n", (*out)[0].to_string().c_str());
  return 0;
}
