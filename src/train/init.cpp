#include "init.h"

#include <cmath>

namespace rlx::train {

uint64_t Rng::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

double Rng::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  double u1;
  do {
    u1 = uniform();
  } while (u1 <= 0.0);
  const double u2 = uniform();
  const double r = std::sqrt(-2.0 * std::log(u1));
  spare_ = r * std::sin(2.0 * M_PI * u2);
  has_spare_ = true;
  return r * std::cos(2.0 * M_PI * u2);
}

uint64_t Rng::below(uint64_t n) {
  if (n <= 1) return 0;
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do {
    x = next();
  } while (x >= limit);
  return x % n;
}

Fans fans_linear(int64_t in, int64_t out) { return Fans{in, out}; }

Fans fans_conv(const Sizes& w) {
  int64_t field = 1;
  for (size_t i = 2; i < w.size(); ++i) field *= w[i];
  return Fans{(w.size() > 1 ? w[1] : 1) * field, (w.empty() ? 1 : w[0]) * field};
}

namespace {

Tensor fill(DType dt, const Sizes& shape, uint64_t seed, double a, double b, bool normal) {
  Tensor t = Tensor::zeros(dt, shape);
  Rng rng(seed);
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) t.set_f64(i, normal ? a + b * rng.normal() : a + (b - a) * rng.uniform());
  return t;
}

}  // namespace

Tensor uniform(DType dt, const Sizes& shape, double lo, double hi, uint64_t seed) {
  return fill(dt, shape, seed, lo, hi, false);
}

Tensor kaiming_uniform(DType dt, const Sizes& shape, Fans f, uint64_t seed, double gain) {
  const double bound = gain * std::sqrt(3.0 / static_cast<double>(f.in));
  return fill(dt, shape, seed, -bound, bound, false);
}

Tensor kaiming_normal(DType dt, const Sizes& shape, Fans f, uint64_t seed, double gain) {
  return fill(dt, shape, seed, 0.0, gain / std::sqrt(static_cast<double>(f.in)), true);
}

Tensor xavier_uniform(DType dt, const Sizes& shape, Fans f, uint64_t seed, double gain) {
  const double bound = gain * std::sqrt(6.0 / static_cast<double>(f.in + f.out));
  return fill(dt, shape, seed, -bound, bound, false);
}

Tensor xavier_normal(DType dt, const Sizes& shape, Fans f, uint64_t seed, double gain) {
  return fill(dt, shape, seed, 0.0, gain * std::sqrt(2.0 / static_cast<double>(f.in + f.out)), true);
}

}  // namespace rlx::train
