#include "gpu_natives.h"

#include "codegen/glsl_prelude.h"
#include "kernels/csr_spmv.h"
#include "kernels/gemm_plan.h"

namespace rlx::kernels {
namespace {

// Element (b, m, k) of A is at b*sab + m*sam + k*sak (and likewise for B), so transposed
// operands need no copy.
constexpr const char* kGemmOpenclSource = R"CL(
#define RLX_TS 16
__kernel void rlx_native_gemm_f32(__global const float* A, __global const float* B, __global float* C,
                                  const long M, const long N, const long K,
                                  const long sab, const long sam, const long sak,
                                  const long sbb, const long sbk, const long sbn, const long scb) {
  __local float as[RLX_TS][RLX_TS];
  __local float bs[RLX_TS][RLX_TS + 1];
  const int lm = (int)get_local_id(1), ln = (int)get_local_id(0);
  const long m = (long)get_group_id(1) * RLX_TS + lm, n = (long)get_group_id(0) * RLX_TS + ln;
  const long b = (long)get_global_id(2);
  A += b * sab;
  B += b * sbb;
  float acc = 0.0f;
  for (long k0 = 0; k0 < K; k0 += RLX_TS) {
    const long ka = k0 + ln, kb = k0 + lm;
    as[lm][ln] = (m < M && ka < K) ? A[m * sam + ka * sak] : 0.0f;
    bs[lm][ln] = (kb < K && n < N) ? B[kb * sbk + n * sbn] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int kk = 0; kk < RLX_TS; ++kk) acc = fma(as[lm][kk], bs[kk][ln], acc);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (m < M && n < N) C[b * scb + m * N + n] = acc;
}
)CL";

bool glsl(codegen::CTarget d) { return d == codegen::CTarget::glsl_vulkan || d == codegen::CTarget::glsl_gl; }

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
  NodeDesc d{nk.op, nk.attrs, nk.input_types, nk.output_types, nk.name};
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
  NodeDesc d{nk.op, nk.attrs, nk.input_types, nk.output_types, nk.name};
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
  return glsl(dialect) ? codegen::glsl_gemm_source(dialect) : std::string(kGemmOpenclSource);
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

}  // namespace rlx::kernels
