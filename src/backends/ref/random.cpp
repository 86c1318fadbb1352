#include "backends/ref/random.h"

#include <algorithm>
#include <cmath>

namespace rlx::ref {

namespace {
constexpr double kTwoPow53Inv = 1.0 / 9007199254740992.0;  // 2^-53
constexpr double kPi = 3.14159265358979323846;
}  // namespace

double random_uniform01(uint64_t seed, uint64_t counter) {
  return static_cast<double>(random_bits(seed, counter) >> 11) * kTwoPow53Inv;
}

double random_uniform(uint64_t seed, uint64_t index, double a, double b) {
  return a + (b - a) * random_uniform01(seed, index);
}

double random_normal(uint64_t seed, uint64_t index, double mean, double stddev) {
  // max() keeps log() finite: u1 = 0 would give an infinite radius.
  const double u1 = std::max(random_uniform01(seed, 2 * index), kTwoPow53Inv);
  const double u2 = random_uniform01(seed, 2 * index + 1);
  return mean + stddev * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * kPi * u2);
}

}  // namespace rlx::ref
