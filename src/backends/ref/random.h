// ref/random.h: the counter-based random generator shared by every rlx device.
//
// Every device (the reference interpreter, generated C, CUDA, OpenCL, ...) must produce the
// same bits for the same (seed, counter), so the whole definition is written out here and is
// the contract generated code reproduces:
//
//   splitmix64(x):  z = x
//                   z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
//                   z = (z ^ (z >> 27)) * 0x94D049BB133111EB
//                   return z ^ (z >> 31)                          (all arithmetic mod 2^64)
//   h = splitmix64(seed + (counter + 1) * 0x9E3779B97F4A7C15)     (mod 2^64; seed as uint64 bits)
//   u = (h >> 11) * 2^-53                                         in [0, 1), exact in double
//
// The `random` primitive gives element i (row-major) of its output:
//   dist = uniform: a + (b - a) * u(seed, i)                      a defaults to 0, b to 1
//   dist = normal:  u1 = max(u(seed, 2i), 2^-53), u2 = u(seed, 2i + 1)
//                   a + b * sqrt(-2 ln u1) * cos(2 pi u2)         a (mean) defaults to 0, b (std) to 1
// computed in double and converted to the output dtype when stored. The seed attribute defaults
// to 0.
#pragma once

#include <cstdint>

namespace rlx::ref {

// The splitmix64 finalizer (the mix step only; the state increment is part of the counter).
inline uint64_t splitmix64(uint64_t x) {
  uint64_t z = x;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The raw 64 random bits for (seed, counter).
inline uint64_t random_bits(uint64_t seed, uint64_t counter) {
  return splitmix64(seed + (counter + 1) * 0x9E3779B97F4A7C15ull);
}

// A uniform double in [0, 1) with 53 random bits: (random_bits >> 11) * 2^-53.
double random_uniform01(uint64_t seed, uint64_t counter);

// Element `index` of a uniform [a, b) stream: a + (b - a) * random_uniform01(seed, index).
double random_uniform(uint64_t seed, uint64_t index, double a, double b);

// Element `index` of a normal(mean, stddev) stream (Box-Muller on counters 2*index and 2*index+1).
double random_normal(uint64_t seed, uint64_t index, double mean, double stddev);

}  // namespace rlx::ref
