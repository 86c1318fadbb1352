#include "gpu_natives.h"

#include "codegen/glsl_prelude.h"
#include "kernels/csr_spmv.h"
#include "kernels/gemm_plan.h"

namespace rlx::kernels {
namespace {

// The tiled f32 product, written once: 16x16 output tiles, A and B staged through local
// (shared) memory a 16-wide slice of K at a time. Element (b, m, k) of A is at
// b*P_SAB + m*P_SAM + k*P_SAK (and likewise for B), so transposed operands need no copy; C is
// dense [b][m][n] with batch stride P_SCB. A dialect prelude below makes it OpenCL C or GLSL.
constexpr const char* kTiledGemm = R"SRC(
RLX_TILES_OUTSIDE
RLX_GEMM_SIGNATURE {
  RLX_TILES_INSIDE
  const int lm = RLX_LOCAL_Y, ln = RLX_LOCAL_X;
  const RLX_LONG m = RLX_LONG_OF(RLX_GROUP_Y) * 16 + lm, n = RLX_LONG_OF(RLX_GROUP_X) * 16 + ln;
  const RLX_LONG b = RLX_LONG_OF(RLX_GROUP_Z);
  const RLX_LONG a0 = b * P_SAB, b0 = b * P_SBB;
  float acc = 0.0f;
  for (RLX_LONG k0 = 0; k0 < P_K; k0 += 16) {
    const RLX_LONG ka = k0 + ln, kb = k0 + lm;
    float av = 0.0f, bv = 0.0f;
    if (m < P_M && ka < P_K) av = A[RLX_INDEX(a0 + m * P_SAM + ka * P_SAK)];
    if (kb < P_K && n < P_N) bv = B[RLX_INDEX(b0 + kb * P_SBK + n * P_SBN)];
    as_[lm][ln] = av;
    bs_[lm][ln] = bv;
    RLX_BARRIER;
    for (int kk = 0; kk < 16; ++kk) acc = fma(as_[lm][kk], bs_[kk][ln], acc);
    RLX_BARRIER;
  }
  if (m < P_M && n < P_N) C[RLX_INDEX(b * P_SCB + m * P_N + n)] = acc;
}
)SRC";

// OpenCL C: a kernel with the ten parameters as arguments, the tiles in kernel scope.
constexpr const char* kTiledGemmOpencl = R"SRC(
#define RLX_GEMM_SIGNATURE __kernel void rlx_native_gemm_f32(__global const float* A, __global const float* B, \
    __global float* C, const long P_M, const long P_N, const long P_K, const long P_SAB, const long P_SAM, \
    const long P_SAK, const long P_SBB, const long P_SBK, const long P_SBN, const long P_SCB)
#define RLX_TILES_OUTSIDE
#define RLX_TILES_INSIDE __local float as_[16][16]; __local float bs_[16][17];
#define RLX_LOCAL_X ((int)get_local_id(0))
#define RLX_LOCAL_Y ((int)get_local_id(1))
#define RLX_GROUP_X get_group_id(0)
#define RLX_GROUP_Y get_group_id(1)
#define RLX_GROUP_Z get_group_id(2)
#define RLX_LONG long
#define RLX_LONG_OF(x) ((long)(x))
#define RLX_INDEX(i) (i)
#define RLX_BARRIER barrier(CLK_LOCAL_MEM_FENCE)
)SRC";

// GLSL (after glsl_native_header): storage buffers 0..2, the parameters P(0)..P(9), the tiles
// as shared variables at global scope, 16x16 invocations a work group.
constexpr const char* kTiledGemmGlsl = R"SRC(
#define P_M P(0)
#define P_N P(1)
#define P_K P(2)
#define P_SAB P(3)
#define P_SAM P(4)
#define P_SAK P(5)
#define P_SBB P(6)
#define P_SBK P(7)
#define P_SBN P(8)
#define P_SCB P(9)
layout(local_size_x = 16, local_size_y = 16) in;
layout(std430, binding = 0) readonly buffer RlxA { float A[]; };
layout(std430, binding = 1) readonly buffer RlxB { float B[]; };
layout(std430, binding = 2) writeonly buffer RlxC { float C[]; };
#define RLX_GEMM_SIGNATURE void main()
#define RLX_TILES_OUTSIDE shared float as_[16][16]; shared float bs_[16][17];
#define RLX_TILES_INSIDE
#define RLX_LOCAL_X int(gl_LocalInvocationID.x)
#define RLX_LOCAL_Y int(gl_LocalInvocationID.y)
#define RLX_GROUP_X gl_WorkGroupID.x
#define RLX_GROUP_Y gl_WorkGroupID.y
#define RLX_GROUP_Z gl_WorkGroupID.z
#define RLX_LONG int64_t
#define RLX_LONG_OF(x) int64_t(x)
#define RLX_INDEX(i) int(i)
#define RLX_BARRIER barrier()
)SRC";

std::vector<std::string> param_names(int n) {
  std::vector<std::string> r;
  for (int i = 0; i < n; ++i) r.push_back(cat("rlx_p", i));
  return r;
}

Expected<hal::Kernel> build_one(hal::Runtime& rt, std::string source, std::string entry, int buffers, int scalars) {
  RLX_ASSIGN_OR_RETURN(std::vector<hal::Kernel> k,
                       rt.build({std::move(source), {hal::KernelEntry{std::move(entry), buffers, param_names(scalars)}}}));
  return k.at(0);
}

Status plan_tiled_gemm_node(hal::NativeBuilder& b, const kir::NativeKernel& nk, const GpuTarget& t) {
  const NodeDesc d = hal::node_desc(nk);
  RLX_ASSIGN_OR_RETURN(GemmPlan p, plan_tiled_gemm(d));
  hal::Command c;
  hal::Dispatch& g = c.dispatch;
  RLX_ASSIGN_OR_RETURN(g.kernel, build_one(b.runtime(), tiled_gemm_source(t.dialect), "rlx_native_gemm_f32", 3, 10));
  g.name = nk.name;
  g.buffers = {b.range(nk.inputs[0]), b.range(nk.inputs[1]), b.range(nk.outputs[0])};
  g.scalars = {p.m, p.n, p.k, p.stride_a, p.trans_a ? 1 : p.lda, p.trans_a ? p.lda : 1,
               p.stride_b, p.trans_b ? 1 : p.ldb, p.trans_b ? p.ldb : 1, p.stride_c};
  if (p.m * p.n * p.batch > 0) {
    g.groups[0] = static_cast<uint32_t>((p.n + 15) / 16);
    g.groups[1] = static_cast<uint32_t>((p.m + 15) / 16);
    g.groups[2] = static_cast<uint32_t>(p.batch);
    g.local[0] = g.local[1] = 16;
  }
  b.add(std::move(c));
  return Status::ok();
}

Status plan_csr_node(hal::NativeBuilder& b, const kir::NativeKernel& nk, const GpuTarget& t) {
  const NodeDesc d = hal::node_desc(nk);
  RLX_ASSIGN_OR_RETURN(CsrSpmvPlan p, plan_csr_spmv(d, t.f64_scatter));
  std::string source;
  switch (t.dialect) {
    case codegen::CTarget::opencl: source = csr_spmv_opencl_source(t.fp64); break;
    case codegen::CTarget::cuda: source = csr_spmv_cuda_source(t.f64_scatter); break;
    case codegen::CTarget::glsl_vulkan: source = csr_spmv_glsl_source(p, false); break;
    case codegen::CTarget::glsl_gl: source = csr_spmv_glsl_source(p, true); break;
    default: return error(ErrorCode::internal, "the CSR kernels have no ", t.device, " source");
  }
  // the transposed form adds into its output: zeroed first, even when A has no rows (y = A^T x
  // is then all zeros)
  if (p.zero_output) {
    hal::Command z;
    z.kind = hal::Command::Kind::zero;
    z.range = b.range(nk.outputs[0]);
    z.name = "zeroing the output of " + nk.name;
    b.add(std::move(z));
  }
  if (p.work_items == 0) return Status::ok();
  const int32_t clear = 0;
  RLX_ASSIGN_OR_RETURN(hal::BufferRange flags, b.scratch(4, "the CSR index-check flag of " + nk.name, &clear));
  hal::Command z;
  z.kind = hal::Command::Kind::zero;
  z.range = flags;
  z.name = "clearing the CSR index-check flag of " + nk.name;
  b.add(std::move(z));
  hal::Command c;
  hal::Dispatch& k = c.dispatch;
  RLX_ASSIGN_OR_RETURN(k.kernel, build_one(b.runtime(), std::move(source), p.kernel, 6, 4));
  k.name = nk.name;
  k.buffers = {b.range(nk.inputs[0]), b.range(nk.inputs[1]), b.range(nk.inputs[2]),
               b.range(nk.inputs[3]), b.range(nk.outputs[0]), flags};
  k.scalars = {p.n, p.m, p.k, p.nnz};
  k.items = p.work_items;
  b.add(std::move(c));
  b.check_word(flags, [name = nk.name, op = nk.op](int32_t v) { return csr_spmv_flag_error(v, name, op); });
  return Status::ok();
}

}  // namespace

std::string tiled_gemm_source(codegen::CTarget dialect) {
  if (codegen::is_glsl(dialect)) return codegen::glsl_native_header(dialect, 10) + kTiledGemmGlsl + kTiledGemm;
  return std::string(kTiledGemmOpencl) + kTiledGemm;
}

hal::NativeFamily tiled_gemm_family(const GpuTarget& t) {
  return {"tiled_gemm", [](Op op) { return op == Op::Dot; },
          [t](const NodeDesc& n) { return claim_tiled_gemm(n, t.device); },
          [t](hal::NativeBuilder& b, const kir::NativeKernel& nk) { return plan_tiled_gemm_node(b, nk, t); }};
}

hal::NativeFamily csr_family(const GpuTarget& t) {
  return {"csr", [](Op op) { return op_info(op).family == OpFamily::sparse; },
          [t](const NodeDesc& n) { return claim_csr_spmv(n, t.device, t.fp64, t.f64_scatter); },
          [t](hal::NativeBuilder& b, const kir::NativeKernel& nk) { return plan_csr_node(b, nk, t); }};
}

hal::Target common_target(const GpuTarget& t) { return {t.dialect, {tiled_gemm_family(t), csr_family(t)}}; }

}  // namespace rlx::kernels
