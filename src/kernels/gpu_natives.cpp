#include "gpu_natives.h"

#include <map>

#include "codegen/glsl_prelude.h"
#include "codegen/hlsl_prelude.h"
#include "codegen/text_words.h"
#include "kernels/csr_spmv.h"
#include "kernels/gemm_plan.h"

namespace rlx::kernels {
namespace {

// The tiled f32 product, written once for every GPU dialect: 16x16 output tiles, A and B staged
// through local (shared, workgroup) memory a 16-wide slice of K at a time. Element (b, m, k) of
// A is at b*P_SAB + m*P_SAM + k*P_SAK (and likewise for B), so transposed operands need no copy;
// C is dense [b][m][n] with batch stride P_SCB. The RLX_ words are replaced per dialect
// (gemm_words): WGSL has no preprocessor, so the text is expanded here rather than by the
// compiler, and keeps to what OpenCL C, GLSL and WGSL all parse (one declaration a statement,
// braced if bodies, postfix increments).
constexpr const char* kTiledGemm = R"SRC(RLX_HEAD
RLX_SIGNATURE {
  RLX_ENTRY
  RLX_CONST_INT lm = RLX_LOCAL_Y;
  RLX_CONST_INT ln = RLX_LOCAL_X;
  RLX_CONST_LONG m = RLX_GROUP_Y * 16 + lm;
  RLX_CONST_LONG n = RLX_GROUP_X * 16 + ln;
  RLX_CONST_LONG b = RLX_GROUP_Z;
  RLX_CONST_LONG a0 = b * P_SAB;
  RLX_CONST_LONG b0 = b * P_SBB;
  RLX_VAR_FLOAT acc = 0.0f;
  for (RLX_VAR_LONG k0 = 0; k0 < P_K; k0 += 16) {
    RLX_CONST_LONG ka = k0 + ln;
    RLX_CONST_LONG kb = k0 + lm;
    RLX_VAR_FLOAT av = 0.0f;
    RLX_VAR_FLOAT bv = 0.0f;
    if (m < P_M && ka < P_K) { av = A[RLX_INDEX(a0 + m * P_SAM + ka * P_SAK)]; }
    if (kb < P_K && n < P_N) { bv = RLX_B[RLX_INDEX(b0 + kb * P_SBK + n * P_SBN)]; }
    as_[lm][ln] = av;
    bs_[lm][ln] = bv;
    RLX_BARRIER;
    for (RLX_VAR_INT kk = 0; kk < 16; kk++) { acc = fma(as_[lm][kk], bs_[kk][ln], acc); }
    RLX_BARRIER;
  }
  if (m < P_M && n < P_N) { C[RLX_INDEX(b * P_SCB + m * P_N + n)] = acc; }
}
)SRC";

// The ten parameters, in launch order.
constexpr const char* kGemmParams[] = {"P_M", "P_N", "P_K", "P_SAB", "P_SAM", "P_SAK", "P_SBB", "P_SBK", "P_SBN", "P_SCB"};

using codegen::Words;
using codegen::expand_words;

// What each RLX_ word of kTiledGemm is in `dialect`. With `shared_ab` A and B are one buffer
// (a matrix times itself): bound once, because WebGPU refuses two writable bindings of one
// range in a dispatch.
Words gemm_words(codegen::CTarget dialect, bool shared_ab) {
  Words w;
  w["RLX_B"] = shared_ab ? "A" : "B";
  const std::vector<std::string> bufs = shared_ab ? std::vector<std::string>{"A", "C"} : std::vector<std::string>{"A", "B", "C"};
  if (codegen::is_glsl(dialect)) {
    // after glsl_native_header: the parameters as P(0)..P(9), the tiles as shared variables
    std::string head = "layout(local_size_x = 16, local_size_y = 16) in;\n";
    for (int i = 0; i < 10; ++i) head += cat("#define ", kGemmParams[i], " P(", i, ")\n");
    for (size_t i = 0; i < bufs.size(); ++i)
      head += cat("layout(std430, binding = ", i, ") ", bufs[i] == "C" ? "writeonly" : "readonly", " buffer Rlx", bufs[i],
                  " { float ", bufs[i], "[]; };\n");
    w["RLX_HEAD"] = head + "shared float as_[16][16];\nshared float bs_[16][17];";
    w["RLX_SIGNATURE"] = "void main()";
    w["RLX_ENTRY"] = "";
    w["RLX_CONST_INT"] = "const int";
    w["RLX_CONST_LONG"] = "const int64_t";
    w["RLX_VAR_INT"] = "int";
    w["RLX_VAR_LONG"] = "int64_t";
    w["RLX_VAR_FLOAT"] = "float";
    w["RLX_LOCAL_X"] = "int(gl_LocalInvocationID.x)";
    w["RLX_LOCAL_Y"] = "int(gl_LocalInvocationID.y)";
    w["RLX_GROUP_X"] = "int64_t(gl_WorkGroupID.x)";
    w["RLX_GROUP_Y"] = "int64_t(gl_WorkGroupID.y)";
    w["RLX_GROUP_Z"] = "int64_t(gl_WorkGroupID.z)";
    w["RLX_INDEX"] = "int";
    w["RLX_BARRIER"] = "barrier()";
  } else if (dialect == codegen::CTarget::wgsl) {
    // the webgpu runtime's layout: storage buffers at bindings 0..n-1, the parameters as i32
    // in a uniform array of vec4 after them
    std::string head;
    for (size_t i = 0; i < bufs.size(); ++i)
      head += cat("@group(0) @binding(", i, ") var<storage, read_write> ", bufs[i], ": array<f32>;\n");
    head += cat("@group(0) @binding(", bufs.size(), ") var<uniform> rlx_p: array<vec4<i32>, 3>;\n");
    w["RLX_HEAD"] = head +
                    "var<workgroup> as_: array<array<f32, 16>, 16>;\nvar<workgroup> bs_: array<array<f32, 17>, 16>;\n"
                    "@compute @workgroup_size(16, 16)";
    w["RLX_SIGNATURE"] =
        "fn rlx_native_gemm_f32(@builtin(local_invocation_id) rlx_lid: vec3<u32>, @builtin(workgroup_id) rlx_wg: vec3<u32>)";
    std::string lets;
    for (int i = 0; i < 10; ++i) lets += cat(i ? "\n  " : "", "let ", kGemmParams[i], " = rlx_p[", i / 4, "][", i % 4, "];");
    w["RLX_ENTRY"] = lets;
    w["RLX_CONST_INT"] = w["RLX_CONST_LONG"] = "let";
    w["RLX_VAR_INT"] = w["RLX_VAR_LONG"] = w["RLX_VAR_FLOAT"] = "var";
    w["RLX_LOCAL_X"] = "i32(rlx_lid.x)";
    w["RLX_LOCAL_Y"] = "i32(rlx_lid.y)";
    w["RLX_GROUP_X"] = "i32(rlx_wg.x)";
    w["RLX_GROUP_Y"] = "i32(rlx_wg.y)";
    w["RLX_GROUP_Z"] = "i32(rlx_wg.z)";
    w["RLX_INDEX"] = "";
    w["RLX_BARRIER"] = "workgroupBarrier()";
  } else if (dialect == codegen::CTarget::hlsl) {
    // RWStructuredBuffers at registers u0.., the parameters as a constant buffer (root
    // constants on D3D12, push constants on Vulkan) read by their low words, the tiles as
    // groupshared arrays; HLSL's fma is double-only, mad is its float multiply-add
    std::string head = codegen::hlsl_scalar_block(10);
    for (int i = 0; i < 10; ++i) head += cat("#define ", kGemmParams[i], " rlx_scalars.p", i, ".x\n");
    for (size_t i = 0; i < bufs.size(); ++i) head += cat("RWStructuredBuffer<float> ", bufs[i], " : register(u", i, ");\n");
    w["RLX_HEAD"] = head + "#define fma mad\ngroupshared float as_[16][16];\ngroupshared float bs_[16][17];\n[numthreads(16, 16, 1)]";
    w["RLX_SIGNATURE"] = "void main(uint3 rlx_lid : SV_GroupThreadID, uint3 rlx_wg : SV_GroupID)";
    w["RLX_ENTRY"] = "";
    w["RLX_CONST_INT"] = w["RLX_CONST_LONG"] = w["RLX_VAR_INT"] = w["RLX_VAR_LONG"] = "int";
    w["RLX_VAR_FLOAT"] = "float";
    w["RLX_LOCAL_X"] = "int(rlx_lid.x)";
    w["RLX_LOCAL_Y"] = "int(rlx_lid.y)";
    w["RLX_GROUP_X"] = "int(rlx_wg.x)";
    w["RLX_GROUP_Y"] = "int(rlx_wg.y)";
    w["RLX_GROUP_Z"] = "int(rlx_wg.z)";
    w["RLX_INDEX"] = "int";
    w["RLX_BARRIER"] = "GroupMemoryBarrierWithGroupSync()";
  } else {
    // OpenCL C: the buffers and parameters as kernel arguments, the tiles in kernel scope
    std::string sig = "__kernel void rlx_native_gemm_f32(";
    for (const std::string& b : bufs) sig += cat(b == "C" ? "__global float* " : "__global const float* ", b, ", ");
    for (int i = 0; i < 10; ++i) sig += cat("const long ", kGemmParams[i], i < 9 ? ", " : ")");
    w["RLX_HEAD"] = "";
    w["RLX_SIGNATURE"] = sig;
    w["RLX_ENTRY"] = "__local float as_[16][16];\n  __local float bs_[16][17];";
    w["RLX_CONST_INT"] = "const int";
    w["RLX_CONST_LONG"] = "const long";
    w["RLX_VAR_INT"] = "int";
    w["RLX_VAR_LONG"] = "long";
    w["RLX_VAR_FLOAT"] = "float";
    w["RLX_LOCAL_X"] = "((int)get_local_id(0))";
    w["RLX_LOCAL_Y"] = "((int)get_local_id(1))";
    w["RLX_GROUP_X"] = "((long)get_group_id(0))";
    w["RLX_GROUP_Y"] = "((long)get_group_id(1))";
    w["RLX_GROUP_Z"] = "((long)get_group_id(2))";
    w["RLX_INDEX"] = "";
    w["RLX_BARRIER"] = "barrier(CLK_LOCAL_MEM_FENCE)";
  }
  return w;
}

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
  const hal::BufferRange a = b.range(nk.inputs[0]), bb = b.range(nk.inputs[1]);
  const bool shared_ab = a == bb && a.bytes == bb.bytes;
  RLX_ASSIGN_OR_RETURN(g.kernel, build_one(b.runtime(), tiled_gemm_source(t.dialect, shared_ab), "rlx_native_gemm_f32",
                                           shared_ab ? 2 : 3, 10));
  g.name = nk.name;
  g.buffers = shared_ab ? std::vector<hal::BufferRange>{a, b.range(nk.outputs[0])}
                        : std::vector<hal::BufferRange>{a, bb, b.range(nk.outputs[0])};
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

std::string tiled_gemm_source(codegen::CTarget dialect, bool shared_ab) {
  const std::string body = expand_words(kTiledGemm, gemm_words(dialect, shared_ab));
  return codegen::is_glsl(dialect) ? codegen::glsl_native_header(dialect, 10) + body : body;
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
