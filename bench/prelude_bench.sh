#!/usr/bin/env bash
# Throughput of the C prelude's vectorized math (src/codegen/c_prelude.cpp) against scalar libm
# calls, in one run, on one thread: y[i] = f(x[i]) over 16M floats, best of 7 passes.
#
#   bench/prelude_bench.sh [N]         (N elements, default 16777216)
#
# With the default N the loops stream 128 MiB and mostly measure memory bandwidth; a small N
# (e.g. 16384, repeated in cache) measures the arithmetic.
#
# Columns: the prelude compiled as the CPU device compiles kernels (cc -O3 -march=native
# -fno-math-errno -fopenmp-simd ...); the same loop calling libm (expf, tanhf, erff, ...;
# scalar calls without -ffast-math); and, as a peer, libm under -ffast-math, where glibc's
# libmvec vectorizes some of these calls (giving up special-value and accuracy guarantees).
# The machine is shared: compare ratios within one run, not absolute rates across runs.
set -euo pipefail

N=${1:-16777216}
CC=${CC:-cc}
CXX=${CXX:-c++}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# The prelude text comes from the library source itself.
cat > "$WORK/dump.cpp" <<'EOF'
#include "codegen/c_prelude.h"
#include <cstdio>
int main() { auto s = rlx::codegen::c_prelude(); std::fwrite(s.data(), 1, s.size(), stdout); }
EOF
"$CXX" -std=c++20 -O1 -I "$ROOT/src" "$WORK/dump.cpp" "$ROOT/src/codegen/c_prelude.cpp" -o "$WORK/dump"
"$WORK/dump" > "$WORK/prelude.h"

# Kernels: one function per loop, as a generated kernel would look.
cat > "$WORK/kern_rlx.c" <<'EOF'
#include "prelude.h"
#define K(name, expr) void rlx_k_##name(float* restrict y, const float* restrict x, long n) { \
  for (long i = 0; i < n; i++) { float v = x[i]; y[i] = (expr); } }
K(exp, rlx_exp_f32(v))
K(log, rlx_log_f32(v))
K(tanh, rlx_tanh_f32(v))
K(erf, rlx_erf_f32(v))
K(sigmoid, rlx_sigmoid_f32(v))
K(silu, rlx_silu_f32(v))
K(gelu_erf, rlx_gelu_erf_f32(v))
K(gelu_tanh, rlx_gelu_tanh_f32(v))
K(sin, rlx_sin_f32(v))
K(sqrt, rlx_sqrt_f32(v))
EOF
cat > "$WORK/kern_libm.c" <<'EOF'
#include <math.h>
#define CAT(a, b) a##b
#define PFX2(p, n) CAT(p, n)
#define K(name, expr) void PFX2(PFX, name)(float* restrict y, const float* restrict x, long n) { \
  for (long i = 0; i < n; i++) { float v = x[i]; y[i] = (expr); } }
K(exp, expf(v))
K(log, logf(v))
K(tanh, tanhf(v))
K(erf, erff(v))
K(sigmoid, 1.0f / (1.0f + expf(-v)))
K(silu, v / (1.0f + expf(-v)))
K(gelu_erf, 0.5f * v * (1.0f + erff(v * 0.70710678f)))
K(gelu_tanh, 0.5f * v * (1.0f + tanhf(0.79788456f * (v + 0.044715f * v * v * v))))
K(sin, sinf(v))
K(sqrt, sqrtf(v))
EOF
cat > "$WORK/main.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
typedef void (*kern)(float*, const float*, long);
#define DECL(name) void rlx_k_##name(float*, const float*, long); \
  void libm_k_##name(float*, const float*, long); void fast_k_##name(float*, const float*, long);
DECL(exp) DECL(log) DECL(tanh) DECL(erf) DECL(sigmoid) DECL(silu) DECL(gelu_erf) DECL(gelu_tanh)
DECL(sin) DECL(sqrt)
static void copy_k(float* y, const float* x, long n) { memcpy(y, x, (size_t)n * sizeof(float)); }
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
/* Small n (in cache) is repeated so that each timed pass covers at least 2^24 elements. */
static double rate(kern k, float* y, const float* x, long n) {
  long reps = n >= (1L << 24) ? 1 : (1L << 24) / n;
  double best = 1e30;
  for (int r = 0; r < 7; r++) {
    double t0 = now();
    for (long j = 0; j < reps; j++) { k(y, x, n); __asm__ volatile("" ::: "memory"); }
    double t = now() - t0;
    if (t < best) best = t;
  }
  return (double)n * reps / best;
}
int main(int argc, char** argv) {
  long n = atol(argv[1]);
  float* x = malloc(n * sizeof(float)); float* y = malloc(n * sizeof(float));
  float* xp = malloc(n * sizeof(float));
  unsigned s = 12345;
  for (long i = 0; i < n; i++) {  /* activations' working range; log/sqrt get |x| */
    s = s * 1664525u + 1013904223u;
    x[i] = ((s >> 8) * (1.0f / 16777216.0f) - 0.5f) * 16.0f;
    xp[i] = x[i] < 0 ? -x[i] : x[i];
  }
  struct { const char* name; kern r, l, f; int pos; } ks[] = {
#define E(name, pos) { #name, rlx_k_##name, libm_k_##name, fast_k_##name, pos },
    E(exp, 0) E(log, 1) E(tanh, 0) E(erf, 0) E(sigmoid, 0) E(silu, 0) E(gelu_erf, 0) E(gelu_tanh, 0)
    E(sin, 0) E(sqrt, 1)
  };
  printf("%ld floats, 1 thread, Melem/s (best of 7 passes)\n", n);
  printf("%-10s %10s %10s %16s %8s %14s\n", "function", "prelude", "libm", "libm fast-math", "vs libm", "vs fast-math");
  for (unsigned i = 0; i < sizeof ks / sizeof ks[0]; i++) {
    const float* in = ks[i].pos ? xp : x;
    double r = rate(ks[i].r, y, in, n), l = rate(ks[i].l, y, in, n), f = rate(ks[i].f, y, in, n);
    printf("%-10s %10.0f %10.0f %16.0f %7.1fx %13.2fx\n", ks[i].name, r / 1e6, l / 1e6, f / 1e6, r / l, r / f);
  }
  printf("(memcpy y = x for scale: %.0f Melem/s)\n", rate(copy_k, y, x, n) / 1e6);
  return 0;
}
EOF
# As src/codegen/c_jit.cpp compiles kernels (less -fPIC -shared -w).
FLAGS="-O3 -march=native -std=gnu11 -fwrapv -fno-math-errno -fopenmp-simd"
"$CC" $FLAGS -I "$WORK" -c "$WORK/kern_rlx.c" -o "$WORK/kern_rlx.o"
"$CC" $FLAGS -DPFX=libm_k_ -c "$WORK/kern_libm.c" -o "$WORK/kern_libm.o"
"$CC" $FLAGS -ffast-math -DPFX=fast_k_ -c "$WORK/kern_libm.c" -o "$WORK/kern_fast.o"
"$CC" -O2 "$WORK/main.c" "$WORK/kern_rlx.o" "$WORK/kern_libm.o" "$WORK/kern_fast.o" -o "$WORK/bench" -lmvec -lm
"$WORK/bench" "$N"
