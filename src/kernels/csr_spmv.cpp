// The GPU devices' native CSR SpMV/SpMM (csr_spmv.h).
#include "kernels/csr_spmv.h"

#include "codegen/glsl_prelude.h"

namespace rlx::kernels {

Expected<CsrSpmvPlan> plan_csr_spmv(const NodeDesc& n, bool f64_scatter) {
  if (!csr_kernel_op(n.op))
    return error(ErrorCode::unsupported, op_name(n.op),
                 " has no GPU kernel (the GPU CSR kernels are spmv_csr and sddmm_csr)");
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
    if (p.value != DType::f32 && !f64_scatter)
      return error(ErrorCode::unsupported, "transposed spmv_csr (a scatter whose rows collide) needs float atomics: "
                   "the GPU kernel is f32 only, got ", dtype_name(p.value));
    p.m = n.outputs[0].shape[0].size();  // x is [n, k], y [m, k]
    p.zero_output = true;
  }
  p.work_items = p.sddmm ? p.n : p.n * p.k;
  p.kernel = csr_kernel_name(p.sddmm, p.transposed, p.value, p.index);
  return p;
}

Claim claim_csr_spmv(const NodeDesc& n, std::string_view device, bool fp64, bool f64_scatter) {
  auto p = plan_csr_spmv(n, f64_scatter);
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

namespace {

// The kernels' bodies, one text for OpenCL C and CUDA C++: a language prelude (below) defines
// the qualifiers, the 64-bit integer type, the global id, and the atomics. Kernel signature:
// (rp, ci, va|a, x|b, y|out, flags, n, m, k, nnz), one work item per `work_items`.
constexpr const char* kCsrKernels = R"SRC(
#define RLX_SPMV(NAME, V, I)                                                                          \
RLX_KERNEL NAME(RLX_GLOBAL const I* rp, RLX_GLOBAL const I* ci, RLX_GLOBAL const V* va,               \
                RLX_GLOBAL const V* x, RLX_GLOBAL V* y, RLX_GLOBAL int* flags, const RLX_LONG n,      \
                const RLX_LONG m, const RLX_LONG k, const RLX_LONG nnz) {                             \
  const RLX_LONG g = RLX_GLOBAL_ID;                                                                   \
  if (g >= n * k) return;                                                                             \
  const RLX_LONG i = g / k, j = g - i * k;                                                            \
  RLX_LONG b = (RLX_LONG)rp[i], e = (RLX_LONG)rp[i + 1];                                              \
  if (b < 0 || e < b || e > nnz || (i == 0 && b != 0) || (i == n - 1 && e != nnz)) {                 \
    RLX_FLAG(flags, 2);                                                                               \
    b = 0;                                                                                            \
    e = 0;                                                                                            \
  }                                                                                                   \
  V s = 0;                                                                                            \
  for (RLX_LONG p = b; p < e; ++p) {                                                                  \
    const RLX_LONG c = (RLX_LONG)ci[p];                                                               \
    if (c < 0 || c >= m) {                                                                            \
      RLX_FLAG(flags, 1);                                                                             \
      continue;                                                                                       \
    }                                                                                                 \
    s += va[p] * x[c * k + j];                                                                        \
  }                                                                                                   \
  y[g] = s;                                                                                           \
}
#define RLX_SDDMM(NAME, V, I)                                                                         \
RLX_KERNEL NAME(RLX_GLOBAL const I* rp, RLX_GLOBAL const I* ci, RLX_GLOBAL const V* a,                \
                RLX_GLOBAL const V* b, RLX_GLOBAL V* out, RLX_GLOBAL int* flags, const RLX_LONG n,     \
                const RLX_LONG m, const RLX_LONG k, const RLX_LONG nnz) {                             \
  const RLX_LONG i = RLX_GLOBAL_ID;                                                                   \
  if (i >= n) return;                                                                                 \
  const RLX_LONG e0 = (RLX_LONG)rp[i], e1 = (RLX_LONG)rp[i + 1];                                      \
  if (e0 < 0 || e1 < e0 || e1 > nnz || (i == 0 && e0 != 0) || (i == n - 1 && e1 != nnz)) {          \
    RLX_FLAG(flags, 2);                                                                               \
    return;                                                                                           \
  }                                                                                                   \
  for (RLX_LONG p = e0; p < e1; ++p) {                                                                \
    const RLX_LONG c = (RLX_LONG)ci[p];                                                               \
    if (c < 0 || c >= m) {                                                                            \
      RLX_FLAG(flags, 1);                                                                             \
      out[p] = 0;                                                                                     \
      continue;                                                                                       \
    }                                                                                                 \
    V s = 0;                                                                                          \
    for (RLX_LONG j = 0; j < k; ++j) s += a[i * k + j] * b[c * k + j];                                \
    out[p] = s;                                                                                       \
  }                                                                                                   \
}
/* y = A^T x (y zeroed by the device first): row i of A scatters va[p] * x[i, j] into y[ci[p], j] */
#define RLX_SPMV_T(NAME, V, I)                                                                        \
RLX_KERNEL NAME(RLX_GLOBAL const I* rp, RLX_GLOBAL const I* ci, RLX_GLOBAL const V* va,               \
                RLX_GLOBAL const V* x, RLX_GLOBAL V* y, RLX_GLOBAL int* flags, const RLX_LONG n,      \
                const RLX_LONG m, const RLX_LONG k, const RLX_LONG nnz) {                             \
  const RLX_LONG g = RLX_GLOBAL_ID;                                                                   \
  if (g >= n * k) return;                                                                             \
  const RLX_LONG i = g / k, j = g - i * k;                                                            \
  const RLX_LONG b = (RLX_LONG)rp[i], e = (RLX_LONG)rp[i + 1];                                        \
  if (b < 0 || e < b || e > nnz || (i == 0 && b != 0) || (i == n - 1 && e != nnz)) {                 \
    RLX_FLAG(flags, 2);                                                                               \
    return;                                                                                           \
  }                                                                                                   \
  const V xi = x[g];                                                                                  \
  for (RLX_LONG p = b; p < e; ++p) {                                                                  \
    const RLX_LONG c = (RLX_LONG)ci[p];                                                               \
    if (c < 0 || c >= m) {                                                                            \
      RLX_FLAG(flags, 1);                                                                             \
      continue;                                                                                       \
    }                                                                                                 \
    RLX_ATOMIC_ADD(y + c * k + j, va[p] * xi);                                                        \
  }                                                                                                   \
}
)SRC";

// OpenCL C: the float add is a compare-and-swap loop on the bits (OpenCL 1.2 has no float atomics).
constexpr const char* kOpenclPrelude = R"CL(
#define RLX_KERNEL __kernel void
#define RLX_GLOBAL __global
#define RLX_LONG long
#define RLX_GLOBAL_ID ((long)get_global_id(0))
#define RLX_FLAG(flags, bit) atomic_or(flags, bit)
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
#define RLX_ATOMIC_ADD(p, v) rlx_atomic_add_f32(p, v)
)CL";

// CUDA C++ (NVRTC): kernels unmangled for cudaLibraryGetKernel; atomicAdd is native for float,
// and for double from sm_60 on.
constexpr const char* kCudaPrelude = R"CU(
#define RLX_KERNEL extern "C" __global__ void
#define RLX_GLOBAL
#define RLX_LONG long long
#define RLX_GLOBAL_ID ((long long)blockIdx.x * (long long)blockDim.x + (long long)threadIdx.x)
#define RLX_FLAG(flags, bit) atomicOr(flags, bit)
#define RLX_ATOMIC_ADD(p, v) atomicAdd(p, v)
)CU";

// The instantiation of one kernel: "RLX_SPMV(rlx_native_spmv_f32_i32, float, int)".
std::string instance(bool sddmm, bool transposed, DType value, DType index) {
  return cat(sddmm ? "RLX_SDDMM(" : transposed ? "RLX_SPMV_T(" : "RLX_SPMV(",
             csr_kernel_name(sddmm, transposed, value, index), ", ", value == DType::f64 ? "double" : "float", ", ",
             index == DType::i64 ? "RLX_LONG" : "int", ")\n");
}

// The kernels of one value dtype (SpMV, SDDMM, and the transposed SpMV where `transposed`), both
// index dtypes.
std::string instances(DType value, bool transposed) {
  std::string s;
  for (DType index : {DType::i32, DType::i64}) {
    s += instance(false, false, value, index);
    if (transposed) s += instance(false, true, value, index);
    s += instance(true, false, value, index);
  }
  return s;
}

}  // namespace

std::string csr_kernel_name(bool sddmm, bool transposed, DType value, DType index) {
  return cat(sddmm ? "rlx_native_sddmm_" : transposed ? "rlx_native_spmv_t_" : "rlx_native_spmv_",
             dtype_name(value), "_", dtype_name(index));
}

std::string csr_spmv_opencl_source(bool fp64) {
  std::string s = std::string(kOpenclPrelude) + kCsrKernels + instances(DType::f32, true);
  if (fp64) s += "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" + instances(DType::f64, false);
  return s;
}

std::string csr_spmv_cuda_source(bool f64_scatter) {
  return std::string(kCudaPrelude) + kCsrKernels + instances(DType::f32, true) +
         instances(DType::f64, f64_scatter);
}

std::string csr_spmv_glsl_source(const CsrSpmvPlan& p, bool opengl) {
  const std::string v = p.value == DType::f64 ? "double" : "float", i = p.index == DType::i64 ? "int64_t" : "int";
  return codegen::glsl_native_header(opengl ? codegen::CTarget::glsl_gl : codegen::CTarget::glsl_vulkan, 4) +
         "layout(local_size_x = 64) in;\n#define V " + v + "\n#define I " + i + "\n" + R"GLSL(
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

}  // namespace rlx::kernels
