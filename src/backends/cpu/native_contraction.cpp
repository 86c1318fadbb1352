#include "native_contraction.h"

#include <algorithm>

#include "kernels/host_families.h"
#include "kernels/qgemm.h"
#include "native_attention.h"

namespace rlx::cpu {

namespace {

// dequantize and qmatmul on block-quantized weights (kernels/qgemm.h).
Claim claim_quant(const NodeDesc& n) {
  const std::string fmt = n.attrs.s("format");
  auto qt = qgemm_format(fmt);
  if (!qt) return Claim::no(cat("cpu has no kernel for quantization format '", fmt, "'"));
  for (const TensorType& t : n.inputs)
    if (!static_sizes(t.shape)) return Claim::no("the quantized kernels need static shapes");
  const TensorType& w = n.inputs[n.op == Op::Dequantize ? 0 : 1];
  if (w.dtype != DType::u8) return Claim::no(cat("quantized blocks must be u8, got ", dtype_name(w.dtype)));
  const Sizes ws = *static_sizes(w.shape);
  if (n.op == Op::Dequantize) {
    const int64_t cols = n.attrs.i("cols");
    return Claim::yes(cat("dequantize ", fmt, " ", qgemm_kernel_name(), " rows=", numel(ws) / std::max<int64_t>(1, ws.back()),
                          " cols=", cols));
  }
  const TensorType& x = n.inputs[0];
  if (x.dtype != DType::f32)
    return Claim::no(cat("the native qmatmul multiplies f32 x, got ", dtype_name(x.dtype),
                         " (the rewrite dequantizes, casts and multiplies instead)"));
  const Sizes xs = *static_sizes(x.shape);
  const int64_t k = xs.back(), m = numel(xs) / std::max<int64_t>(1, k);
  return Claim::yes(cat("qmatmul ", fmt, " ", qgemm_kernel_name(), " m=", m, " n=", ws[0], " k=", k,
                        " (", qgemm_path_name(*qt, m), ")"));
}

// int8_matmul (kernels/qgemm.h i8gemm): static shapes; the type rules fixed the dtypes.
Claim claim_int8(const NodeDesc& n) {
  for (const TensorType& t : n.inputs)
    if (!static_sizes(t.shape)) return Claim::no("the int8 kernel needs static shapes");
  const Sizes xs = *static_sizes(n.inputs[0].shape), ws = *static_sizes(n.inputs[1].shape);
  const int64_t k = xs.back(), m = numel(xs) / std::max<int64_t>(1, k);
  return Claim::yes(cat("int8_matmul ", qgemm_kernel_name(), " m=", m, " n=", ws[0], " k=", k,
                        n.attrs.has("x_scale") ? " (x per tensor)" : " (x per token)"));
}

}  // namespace

std::optional<GemmType> gemm_type_of(DType t) {
  switch (t) {
    case DType::f32: return GemmType::f32;
    case DType::f16: return GemmType::f16;
    case DType::bf16: return GemmType::bf16;
    default: return std::nullopt;
  }
}

namespace {

// matmul, dot and gemm that map onto one GEMM call
Claim claim_gemm(const NodeDesc& n) {
  // f32, f16 and bf16 in any mix: 16-bit operands are widened in the kernels, products are
  // accumulated in f32 and a 16-bit output is rounded once, when its block is stored
  for (const auto* ts : {&n.inputs, &n.outputs})
    for (const TensorType& t : *ts)
      if (!gemm_type_of(t.dtype))
        return Claim::no(cat("the native GEMM takes f32, f16 and bf16 operands, got ", dtype_name(t.dtype)));
  auto plan = plan_contraction(n.op, n.attrs, n.inputs, n.outputs);
  if (!plan) return Claim::no(plan.status().message());
  // a full C operand starts the accumulation from C itself (copied into the output), which
  // needs the output's type
  if (plan->c_mode == GemmPlan::CMode::full && n.inputs[2].dtype != n.outputs[0].dtype)
    return Claim::no(cat("gemm's C is ", dtype_name(n.inputs[2].dtype), " but the output is ",
                         dtype_name(n.outputs[0].dtype), "; the native GEMM needs them equal"));
  const std::string kernel =
      gemm_kernel_name(*gemm_type_of(n.inputs[0].dtype), *gemm_type_of(n.inputs[1].dtype), *gemm_type_of(n.outputs[0].dtype));
  std::string how = cat("gemm ", kernel, " m=", plan->m, " n=", plan->n, " k=", plan->k);
  if (plan->batch > 1) how += cat(" batch=", plan->batch);
  return Claim::yes(how);
}

Claim claim_host_family(const NodeDesc& n) { return kernels::host_family(op_info(n.op).family)->claim(n); }

Claim claim_collective(const NodeDesc& n) {
  if (!is_static(n.inputs[0].shape)) return Claim::no("collectives need static shapes");
  return Claim::yes("the compiled model's communicator (MPI or a single process)");
}

bool is_gemm(Op op) { return op == Op::MatMul || op == Op::Dot || op == Op::Gemm; }
bool is_quant(Op op) { return op == Op::Dequantize || op == Op::QMatMul; }
bool is_int8(Op op) { return op == Op::Int8MatMul; }
bool is_attention(Op op) { return op == Op::Attention || op == Op::PagedAttention; }
bool in_host_family(Op op) { return kernels::host_family(op_info(op).family) != nullptr; }
bool is_collective(Op op) { return op_info(op).family == OpFamily::collective; }

constexpr CpuFamily kFamilies[] = {
    {CpuNativeKind::gemm, is_gemm, claim_gemm},
    {CpuNativeKind::quant, is_quant, claim_quant},
    {CpuNativeKind::int8, is_int8, claim_int8},
    {CpuNativeKind::attention, is_attention, claim_cpu_attention},
    {CpuNativeKind::host_family, in_host_family, claim_host_family},
    {CpuNativeKind::collective, is_collective, claim_collective},
};

}  // namespace

std::span<const CpuFamily> cpu_families() { return kFamilies; }

const CpuFamily* cpu_family(Op op) {
  for (const CpuFamily& f : kFamilies)
    if (f.takes(op)) return &f;
  return nullptr;
}

Claim claim_cpu_native(const NodeDesc& n) {
  const CpuFamily* f = cpu_family(n.op);
  if (!f) return Claim::no(cat("cpu has no native ", op_name(n.op), " kernel"));
  return f->claim(n);
}

}  // namespace rlx::cpu
