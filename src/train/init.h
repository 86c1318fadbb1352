// Seeded parameter initializers. The random stream is rlx's own (splitmix64 feeding uniform
// doubles and Box-Muller normals), so the same seed gives the same tensor on every platform
// and standard library.
#pragma once

#include <cstdint>

#include "rlx/tensor.h"

namespace rlx::train {

// fan_in / fan_out of a weight: for a 2-D weight stored [in, out] (y = x W) they are
// (in, out); for a convolution weight [M, C/group, kh, kw] they are (C/group*kh*kw, M*kh*kw).
struct Fans {
  int64_t in = 1, out = 1;
};
Fans fans_linear(int64_t in, int64_t out);
Fans fans_conv(const Sizes& weight_shape);

// Kaiming/He (for ReLU networks, gain sqrt(2) by default): uniform in +-gain*sqrt(3/fan_in),
// or normal with std gain/sqrt(fan_in).
Tensor kaiming_uniform(DType dt, const Sizes& shape, Fans fans, uint64_t seed, double gain = 1.4142135623730951);
Tensor kaiming_normal(DType dt, const Sizes& shape, Fans fans, uint64_t seed, double gain = 1.4142135623730951);
// Xavier/Glorot: uniform in +-gain*sqrt(6/(fan_in+fan_out)), or normal with std
// gain*sqrt(2/(fan_in+fan_out)).
Tensor xavier_uniform(DType dt, const Sizes& shape, Fans fans, uint64_t seed, double gain = 1.0);
Tensor xavier_normal(DType dt, const Sizes& shape, Fans fans, uint64_t seed, double gain = 1.0);
// Uniform in [lo, hi).
Tensor uniform(DType dt, const Sizes& shape, double lo, double hi, uint64_t seed);

// The generator behind them, for data shuffling and synthetic data too.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next();                  // splitmix64
  double uniform();                 // [0, 1), 53 bits
  double normal();                  // standard normal (Box-Muller)
  uint64_t below(uint64_t n);       // uniform in [0, n) without modulo bias
 private:
  uint64_t state_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

}  // namespace rlx::train
