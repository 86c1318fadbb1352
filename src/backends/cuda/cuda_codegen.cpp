#include "cuda_codegen.h"

#include <algorithm>

#include "codegen/c_prelude.h"
#include "codegen/c_renderer.h"
#include "codegen/device_modules.h"
#include "hal/program_executable.h"
#include "kernels/csr_spmv.h"
#include "kernels/splat_source.h"

namespace rlx::cuda {

Expected<kernels::GemmPlan> gemm_plan(const NodeDesc& n, ComputeCapability cc) {
  if (n.op != Op::Dot) return error(ErrorCode::unsupported, "only dot is native (cuBLAS)");
  if (n.inputs.size() != 2 || n.outputs.size() != 1) return error(ErrorCode::unsupported, "dot needs two inputs");
  const DType t = n.inputs[0].dtype;
  if (n.inputs[1].dtype != t || n.outputs[0].dtype != t)
    return error(ErrorCode::unsupported, "cuBLAS GEMM needs one dtype for both operands and the result");
  switch (t) {
    case DType::f32:
    case DType::f64:
    case DType::f16: break;
    case DType::bf16:
      if (cc < 80) return error(ErrorCode::unsupported, "cuBLAS bf16 GEMM needs sm_80 or newer, this GPU is sm_", cc);
      break;
    default: return error(ErrorCode::unsupported, "cuBLAS GEMM computes f32, f64, f16 and bf16, not ", dtype_name(t));
  }
  for (const TensorType& x : n.inputs)
    if (!static_sizes(x.shape)) return error(ErrorCode::unsupported, "the cuBLAS GEMM needs static shapes");
  RLX_ASSIGN_OR_RETURN(kernels::GemmPlan p, kernels::plan_contraction(n.op, n.attrs, n.inputs, n.outputs));
  // cuBLAS takes 32-bit sizes and leading dimensions
  const int64_t lim = INT32_MAX;
  if (p.m > lim || p.n > lim || p.k > lim || p.batch > lim || p.lda > lim || p.ldb > lim || p.ldc > lim)
    return error(ErrorCode::unsupported, "a GEMM dimension exceeds cuBLAS's 32-bit sizes");
  return p;
}

ColumnMajorGemm column_major_gemm(const kernels::GemmPlan& p) {
  ColumnMajorGemm g;
  g.trans_first = p.trans_b;
  g.trans_second = p.trans_a;
  g.m = p.n;
  g.n = p.m;
  g.k = p.k;
  g.ld_first = p.ldb;
  g.ld_second = p.lda;
  g.ldc = p.ldc;
  g.stride_first = p.stride_b;
  g.stride_second = p.stride_a;
  g.stride_c = p.stride_c;
  g.batch = p.batch;
  return g;
}

Claim claim_native(const NodeDesc& n, ComputeCapability cc) {
  if (op_info(n.op).family == OpFamily::sparse)
    return kernels::claim_csr_spmv(n, "cuda", /*fp64=*/true, has_f64_atomic_add(cc));
  if (op_info(n.op).family == OpFamily::splat) {
    Claim c = kernels::claim_splat_kernels(n, "CUDA");
    if (c.ok && n.op == Op::SplatRasterizeBackward && !has_f64_atomic_add(cc))
      return Claim::no(cat("splat_rasterize_backward adds gradients with atomicAdd on double, which needs sm_60 or "
                           "newer; this GPU is sm_", cc));
    return c;
  }
  if (n.op != Op::Dot)
    return Claim::no(cat("cuda has no native ", op_name(n.op),
                         " kernel (its native kernels are the cuBLAS GEMM for dot, the CSR kernels and the splatting "
                         "kernels)"));
  auto p = gemm_plan(n, cc);
  if (!p) return Claim::no(p.status().message());
  return Claim::yes(cat("cuBLAS gemm ", dtype_name(n.inputs[0].dtype), " m=", p->m, " n=", p->n, " k=", p->k,
                        p->batch > 1 ? cat(" batch=", p->batch) : ""));
}

Claim supports_primitive(const NodeDesc& n) {
  // every dtype the C renderer handles: CUDA has fp64, and f16/bf16 are computed in f32
  Claim c = codegen::c_renderer_supports(n);
  if (c.ok) c.text = "generated CUDA C++ (NVRTC)";
  return c;
}

Expected<kir::KernelProgram> schedule_program(const Graph& g, const CompileOptions& options) {
  return hal::schedule_program(g, options);
}

Expected<std::string> render_kernels(const kir::KernelProgram& prog, const std::string& prefix) {
  return codegen::render_unit_kernels(prog, prefix, codegen::CTarget::cuda);
}

std::string translation_unit(std::string_view kernels) { return codegen::translation_unit(codegen::CTarget::cuda, kernels); }

std::shared_ptr<const Device> make_codegen_device(ComputeCapability cc) {
  return hal::make_codegen_device("cuda", cat("code generation only (legalizes and renders as for sm_", cc, "; runs nothing)"),
                                  [cc](const NodeDesc& n) { return claim_native(n, cc); }, supports_primitive);
}

}  // namespace rlx::cuda
