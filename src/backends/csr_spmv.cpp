// The GPU devices' native CSR SpMV/SpMM (csr_spmv.h).
#include "backends/csr_spmv.h"

namespace rlx::backends {

Expected<CsrSpmvPlan> plan_csr_spmv(const NodeDesc& n) {
  if (!csr_kernel_op(n.op))
    return error(ErrorCode::unsupported, op_name(n.op),
                 " has no GPU kernel (the GPU CSR kernels are spmv_csr without transpose and sddmm_csr)");
  if (n.inputs.size() != 4) return error(ErrorCode::unsupported, op_name(n.op), " takes 4 inputs");
  for (const TensorType& t : n.inputs)
    if (!static_sizes(t.shape)) return error(ErrorCode::unsupported, "the CSR kernel needs static shapes");
  CsrSpmvPlan p;
  p.index = n.inputs[0].dtype;
  p.value = n.inputs[2].dtype;
  if ((p.index != DType::i32 && p.index != DType::i64) || (p.value != DType::f32 && p.value != DType::f64))
    return error(ErrorCode::unsupported, "the CSR kernel takes f32/f64 values and i32/i64 indices");
  p.n = n.inputs[0].shape[0].size() - 1;
  p.nnz = n.inputs[1].shape[0].size();
  p.m = n.inputs[3].shape[0].size();
  p.k = n.inputs[3].rank() == 2 ? n.inputs[3].shape[1].size() : 1;
  p.sddmm = n.op == Op::SddmmCsr;
  p.transposed = n.op == Op::SpmvCsr && n.attrs.i("transpose", 0) != 0;
  if (p.transposed) {
    if (p.value != DType::f32)
      return error(ErrorCode::unsupported, "transposed spmv_csr (a scatter whose rows collide) needs float atomics: "
                   "the GPU kernel is f32 only, got ", dtype_name(p.value));
    p.m = n.outputs[0].shape[0].size();  // x is [n, k], y [m, k]
    p.zero_output = true;
  }
  p.work_items = p.sddmm ? p.n : p.n * p.k;
  p.kernel = cat(p.sddmm ? "rlx_native_sddmm_" : p.transposed ? "rlx_native_spmv_t_" : "rlx_native_spmv_",
                 dtype_name(p.value), "_", dtype_name(p.index));
  return p;
}

Claim claim_csr_spmv(const NodeDesc& n, std::string_view device, bool fp64) {
  auto p = plan_csr_spmv(n);
  if (!p) return Claim::no(cat(device, ": ", p.status().message()));
  if (p->value == DType::f64 && !fp64) return Claim::no(cat(device, " has no fp64"));
  if (p->sddmm)
    return Claim::yes(cat("CSR SDDMM kernel (a work item per row) ", dtype_name(p->value), "/", dtype_name(p->index),
                          " n=", p->n, " k=", p->k, " nnz=", p->nnz));
  if (p->transposed)
    return Claim::yes(cat("CSR transposed ", p->k > 1 ? cat("SpMM k=", p->k) : std::string("SpMV"),
                          " kernel (a work item per row", p->k > 1 ? " and column" : "",
                          ", scattered with atomic float adds) ", dtype_name(p->value), "/", dtype_name(p->index),
                          " n=", p->n, " nnz=", p->nnz));
  return Claim::yes(cat("CSR ", p->k > 1 ? cat("SpMM k=", p->k) : std::string("SpMV"), " kernel (a work item per row",
                        p->k > 1 ? " and column" : "", ") ", dtype_name(p->value), "/", dtype_name(p->index), " n=", p->n,
                        " nnz=", p->nnz));
}

std::string csr_spmv_opencl_source(bool fp64) {
  std::string s = R"CL(
#define RLX_SPMV(NAME, V, I)                                                                          \
__kernel void NAME(__global const I* rp, __global const I* ci, __global const V* va, __global const V* x, \
                   __global V* y, __global int* flags, const long n, const long m, const long k,      \
                   const long nnz) {                                                                  \
  const long g = (long)get_global_id(0);                                                              \
  if (g >= n * k) return;                                                                             \
  const long i = g / k, j = g - i * k;                                                                \
  long b = (long)rp[i], e = (long)rp[i + 1];                                                          \
  if (b < 0 || e < b || e > nnz || (i == 0 && b != 0) || (i == n - 1 && e != nnz)) {                 \
    atomic_or(flags, 2);                                                                              \
    b = 0;                                                                                            \
    e = 0;                                                                                            \
  }                                                                                                   \
  V s = 0;                                                                                            \
  for (long p = b; p < e; ++p) {                                                                      \
    const long c = (long)ci[p];                                                                       \
    if (c < 0 || c >= m) {                                                                            \
      atomic_or(flags, 1);                                                                            \
      continue;                                                                                       \
    }                                                                                                 \
    s += va[p] * x[c * k + j];                                                                        \
  }                                                                                                   \
  y[g] = s;                                                                                           \
}
#define RLX_SDDMM(NAME, V, I)                                                                         \
__kernel void NAME(__global const I* rp, __global const I* ci, __global const V* a, __global const V* b, \
                   __global V* out, __global int* flags, const long n, const long m, const long k,    \
                   const long nnz) {                                                                  \
  const long i = (long)get_global_id(0);                                                              \
  if (i >= n) return;                                                                                 \
  long e0 = (long)rp[i], e1 = (long)rp[i + 1];                                                        \
  if (e0 < 0 || e1 < e0 || e1 > nnz || (i == 0 && e0 != 0) || (i == n - 1 && e1 != nnz)) {          \
    atomic_or(flags, 2);                                                                              \
    return;                                                                                           \
  }                                                                                                   \
  for (long p = e0; p < e1; ++p) {                                                                    \
    const long c = (long)ci[p];                                                                       \
    if (c < 0 || c >= m) {                                                                            \
      atomic_or(flags, 1);                                                                            \
      out[p] = 0;                                                                                     \
      continue;                                                                                       \
    }                                                                                                 \
    V s = 0;                                                                                          \
    for (long j = 0; j < k; ++j) s += a[i * k + j] * b[c * k + j];                                    \
    out[p] = s;                                                                                       \
  }                                                                                                   \
}
inline void rlx_atomic_add_f32(volatile __global float* p, const float v) {
  union { unsigned int u; float f; } seen, want;
  seen.f = *p;
  for (;;) {
    want.f = seen.f + v;
    const unsigned int got = atomic_cmpxchg((volatile __global unsigned int*)p, seen.u, want.u);
    if (got == seen.u) break;
    seen.u = got;
  }
}
/* y = A^T x (y zeroed by the device first): row i of A scatters va[p] * x[i, j] into y[ci[p], j] */
#define RLX_SPMV_T(NAME, I)                                                                           \
__kernel void NAME(__global const I* rp, __global const I* ci, __global const float* va,              \
                   __global const float* x, __global float* y, __global int* flags, const long n,     \
                   const long m, const long k, const long nnz) {                                      \
  const long g = (long)get_global_id(0);                                                              \
  if (g >= n * k) return;                                                                             \
  const long i = g / k, j = g - i * k;                                                                \
  const long b = (long)rp[i], e = (long)rp[i + 1];                                                    \
  if (b < 0 || e < b || e > nnz || (i == 0 && b != 0) || (i == n - 1 && e != nnz)) {                 \
    atomic_or(flags, 2);                                                                              \
    return;                                                                                           \
  }                                                                                                   \
  const float xi = x[g];                                                                              \
  for (long p = b; p < e; ++p) {                                                                      \
    const long c = (long)ci[p];                                                                       \
    if (c < 0 || c >= m) {                                                                            \
      atomic_or(flags, 1);                                                                            \
      continue;                                                                                       \
    }                                                                                                 \
    rlx_atomic_add_f32(y + c * k + j, va[p] * xi);                                                    \
  }                                                                                                   \
}
RLX_SPMV(rlx_native_spmv_f32_i32, float, int)
RLX_SPMV(rlx_native_spmv_f32_i64, float, long)
RLX_SPMV_T(rlx_native_spmv_t_f32_i32, int)
RLX_SPMV_T(rlx_native_spmv_t_f32_i64, long)
RLX_SDDMM(rlx_native_sddmm_f32_i32, float, int)
RLX_SDDMM(rlx_native_sddmm_f32_i64, float, long)
)CL";
  if (fp64)
    s += "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\nRLX_SPMV(rlx_native_spmv_f64_i32, double, int)\n"
         "RLX_SPMV(rlx_native_spmv_f64_i64, double, long)\nRLX_SDDMM(rlx_native_sddmm_f64_i32, double, int)\n"
         "RLX_SDDMM(rlx_native_sddmm_f64_i64, double, long)\n";
  return s;
}

std::string csr_spmv_glsl_source(const CsrSpmvPlan& p, bool opengl) {
  const std::string v = p.value == DType::f64 ? "double" : "float", i = p.index == DType::i64 ? "int64_t" : "int";
  const std::string params =
      opengl ? "layout(location = 0) uniform int64_t rlx_p0;\nlayout(location = 1) uniform int64_t rlx_p1;\n"
               "layout(location = 2) uniform int64_t rlx_p2;\nlayout(location = 3) uniform int64_t rlx_p3;\n"
               "#define P(i) rlx_p##i\n"
             : "layout(push_constant) uniform RlxSpmv { int64_t v[4]; } rlx_p;\n#define P(i) rlx_p.v[i]\n";
  return std::string("#version 450\n") +
         (opengl ? "#extension GL_ARB_gpu_shader_int64 : require\n"
                 : "#extension GL_EXT_shader_explicit_arithmetic_types : require\n") +
         "layout(local_size_x = 64) in;\n#define V " + v + "\n#define I " + i + "\n" + params + R"GLSL(
layout(std430, binding = 0) readonly buffer RlxRp { I rp[]; };
layout(std430, binding = 1) readonly buffer RlxCi { I ci[]; };
layout(std430, binding = 2) readonly buffer RlxVa { V va[]; };
layout(std430, binding = 3) readonly buffer RlxX { V x[]; };
layout(std430, binding = 5) buffer RlxFlags { int flags[]; };
/* an index as int64 by its bits: lavapipe (Mesa 22.3) miscompiles some sign extensions of loaded
   int32 values, and a negative column then escaped the range check */
)GLSL" + (p.index == DType::i64 ? "int64_t ix(int64_t v) { return v; }\n" : "int64_t ix(int v) { return packInt2x32(ivec2(v, v >> 31)); }\n") + (p.transposed ? std::string(R"GLSL(
layout(std430, binding = 4) buffer RlxY { uint y[]; };  /* f32 bits, for the compare-and-swap add */
void add_f32(int at, float v) {
  uint seen = y[at];
  for (;;) {
    const uint got = atomicCompSwap(y[at], seen, floatBitsToUint(uintBitsToFloat(seen) + v));
    if (got == seen) break;
    seen = got;
  }
}
void main() {  /* y = A^T x, y zeroed by the device first: x is [n, k], y [m, k] */
  const int64_t n = P(0), m = P(1), k = P(2), nnz = P(3);
  const int64_t g = int64_t(gl_GlobalInvocationID.x) + int64_t(gl_GlobalInvocationID.y) * int64_t(gl_NumWorkGroups.x) * 64l;
  if (g >= n * k) return;
  const int64_t i = g / k, j = g - i * k;
  const int64_t b = ix(rp[int(i)]), e = ix(rp[int(i + 1)]);
  if (b < 0l || e < b || e > nnz || (i == 0l && b != 0l) || (i == n - 1l && e != nnz)) {
    atomicOr(flags[0], 2);
    return;
  }
  const float xi = x[int(g)];
  for (int64_t q = b; q < e; ++q) {
    const int64_t c = ix(ci[int(q)]);
    if (c < 0l || c >= m) {
      atomicOr(flags[0], 1);
      continue;
    }
    add_f32(int(c * k + j), va[int(q)] * xi);
  }
}
)GLSL") : std::string("layout(std430, binding = 4) writeonly buffer RlxY { V y[]; };\n")) + (p.transposed ? std::string() : p.sddmm ? std::string(R"GLSL(
void main() {  /* SDDMM: x is b [m, k], va is a [n, k], y is out [nnz] */
  const int64_t n = P(0), m = P(1), k = P(2), nnz = P(3);
  const int64_t i = int64_t(gl_GlobalInvocationID.x) + int64_t(gl_GlobalInvocationID.y) * int64_t(gl_NumWorkGroups.x) * 64l;
  if (i >= n) return;
  const int64_t e0 = ix(rp[int(i)]), e1 = ix(rp[int(i + 1)]);
  if (e0 < 0l || e1 < e0 || e1 > nnz || (i == 0l && e0 != 0l) || (i == n - 1l && e1 != nnz)) {
    atomicOr(flags[0], 2);
    return;
  }
  for (int64_t q = e0; q < e1; ++q) {
    const int64_t c = ix(ci[int(q)]);
    if (c < 0l || c >= m) {
      atomicOr(flags[0], 1);
      y[int(q)] = V(0);
      continue;
    }
    V s = V(0);
    for (int64_t j = 0l; j < k; ++j) s += va[int(i * k + j)] * x[int(c * k + j)];
    y[int(q)] = s;
  }
}
)GLSL") : std::string(R"GLSL(
void main() {
  const int64_t n = P(0), m = P(1), k = P(2), nnz = P(3);
  const int64_t g = int64_t(gl_GlobalInvocationID.x) + int64_t(gl_GlobalInvocationID.y) * int64_t(gl_NumWorkGroups.x) * 64l;
  if (g >= n * k) return;
  const int64_t i = g / k, j = g - i * k;
  int64_t b = ix(rp[int(i)]), e = ix(rp[int(i + 1)]);
  if (b < 0l || e < b || e > nnz || (i == 0l && b != 0l) || (i == n - 1l && e != nnz)) {
    atomicOr(flags[0], 2);
    b = 0l;
    e = 0l;
  }
  V s = V(0);
  for (int64_t q = b; q < e; ++q) {
    const int64_t c = ix(ci[int(q)]);
    if (c < 0l || c >= m) {
      atomicOr(flags[0], 1);
      continue;
    }
    s += va[int(q)] * x[int(c * k + j)];
  }
  y[int(g)] = s;
}
)GLSL"));
}

Status csr_spmv_flag_error(int flags, std::string_view name, Op op) {
  if (flags & 2)
    return error(ErrorCode::invalid_argument, op_name(op), " '", name, "': row_ptr is not monotone from 0 to nnz (checked "
                 "on the device; the cpu names the row)");
  return error(ErrorCode::invalid_argument, op_name(op), " '", name, "': a column index is outside ",
               op == Op::SddmmCsr ? "b's rows" : "x's rows", " (checked on the device; the cpu names the entry)");
}

}  // namespace rlx::backends
