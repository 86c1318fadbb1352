// How a contraction node (matmul, dot, gemm) maps onto one batched, strided GEMM call, shared
// by every device with a native GEMM (cpu's kernels, cuBLAS, the OpenCL and GLSL tiled GEMMs).
#include "kernels/gemm_plan.h"

#include <algorithm>

namespace rlx::kernels {
namespace {


Sizes sizes_of(const TensorType& t) {
  Sizes s;
  for (const Dim& d : t.shape) s.push_back(d.size());
  return s;
}

int64_t prod(const Sizes& s, size_t b, size_t e) {
  int64_t p = 1;
  for (size_t i = b; i < e; ++i) p *= s[i];
  return p;
}

Expected<GemmPlan> plan_matmul(std::span<const TensorType> in) {
  Sizes a = sizes_of(in[0]), b = sizes_of(in[1]);
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  const size_t ra = a.size(), rb = b.size();
  GemmPlan p;
  p.k = a[ra - 1];
  p.n = b[rb - 1];
  p.ldb = p.n;
  p.lda = p.k;
  p.ldc = p.n;
  if (rb == 2) {
    // all of A's batch rows are GEMM rows
    p.m = prod(a, 0, ra - 1);
    return p;
  }
  Sizes ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  const int64_t na = prod(ba, 0, ba.size()), nb = prod(bb, 0, bb.size());
  p.m = a[ra - 2];
  if (ba.size() == bb.size() && ba == bb) {
    p.batch = na;
    p.stride_a = p.m * p.k;
    p.stride_b = p.k * p.n;
  } else if (na == 1) {
    p.batch = nb;
    p.stride_b = p.k * p.n;
  } else if (nb == 1) {
    p.batch = na;
    p.stride_a = p.m * p.k;
  } else {
    return error(ErrorCode::unsupported, "batch dims ", sizes_to_string(ba), " and ", sizes_to_string(bb),
                 " broadcast partially; one GEMM call cannot express that");
  }
  p.stride_c = p.m * p.n;
  return p;
}

Expected<GemmPlan> plan_dot(const Attrs& at, std::span<const TensorType> in) {
  const Sizes a = sizes_of(in[0]), b = sizes_of(in[1]);
  auto lb = at.ints("lhs_batch"), rb = at.ints("rhs_batch"), lc = at.ints("lhs_contract"), rc = at.ints("rhs_contract");
  const int64_t nbatch = static_cast<int64_t>(lb.size());
  for (int64_t i = 0; i < nbatch; ++i)
    if (lb[i] != i || rb[i] != i) return error(ErrorCode::unsupported, "batch dims are not the leading dims");
  if (lc.size() != 1) return error(ErrorCode::unsupported, lc.size(), " contracting dims (one GEMM needs exactly 1)");
  const int64_t ra = static_cast<int64_t>(a.size()), rbk = static_cast<int64_t>(b.size());
  GemmPlan p;
  p.batch = prod(a, 0, nbatch);
  p.k = a[lc[0]];
  if (lc[0] == ra - 1) {
    p.trans_a = false;
    p.m = prod(a, nbatch, ra - 1);
    p.lda = p.k;
  } else if (lc[0] == nbatch) {
    p.trans_a = true;
    p.m = prod(a, nbatch + 1, ra);
    p.lda = p.m;
  } else {
    return error(ErrorCode::unsupported, "the lhs contracting dim is neither first nor last among its free dims");
  }
  if (rc[0] == nbatch) {
    p.trans_b = false;
    p.n = prod(b, nbatch + 1, rbk);
    p.ldb = p.n;
  } else if (rc[0] == rbk - 1) {
    p.trans_b = true;
    p.n = prod(b, nbatch, rbk - 1);
    p.ldb = p.k;
  } else {
    return error(ErrorCode::unsupported, "the rhs contracting dim is neither first nor last among its free dims");
  }
  p.ldc = p.n;
  if (p.batch > 1) {
    p.stride_a = p.m * p.k;
    p.stride_b = p.k * p.n;
    p.stride_c = p.m * p.n;
  }
  return p;
}

Expected<GemmPlan> plan_gemm(const Attrs& at, std::span<const TensorType> in, std::span<const TensorType> out) {
  const Sizes a = sizes_of(in[0]);
  GemmPlan p;
  p.trans_a = at.i("trans_a", 0) != 0;
  p.trans_b = at.i("trans_b", 0) != 0;
  const Sizes o = sizes_of(out[0]);
  p.m = o[0];
  p.n = o[1];
  p.k = p.trans_a ? a[0] : a[1];
  p.lda = a[1];
  p.ldb = sizes_of(in[1])[1];
  p.ldc = p.n;
  p.alpha = static_cast<float>(at.f("alpha", 1.0));
  if (in.size() == 3 && at.f("beta", 1.0) != 0.0) {
    const Sizes c = sizes_of(in[2]);
    p.beta = static_cast<float>(at.f("beta", 1.0));
    if (numel(c) == p.n && (c.empty() ? p.n == 1 : c.back() == p.n)) {
      p.c_mode = GemmPlan::CMode::bias_row;
    } else if (c == o) {
      p.c_mode = GemmPlan::CMode::full;
    } else {
      return error(ErrorCode::unsupported, "C of shape ", sizes_to_string(c), " is neither a row bias nor [M, N]");
    }
  }
  return p;
}

}  // namespace

Expected<GemmPlan> plan_contraction(Op op, const Attrs& attrs, std::span<const TensorType> inputs,
                                    std::span<const TensorType> outputs) {
  switch (op) {
    case Op::MatMul: return plan_matmul(inputs);
    case Op::Dot: return plan_dot(attrs, inputs);
    case Op::Gemm: return plan_gemm(attrs, inputs, outputs);
    default: break;
  }
  return error(ErrorCode::unsupported, op_name(op), " is not a contraction");
}

Expected<GemmPlan> plan_tiled_gemm(const NodeDesc& n) {
  if (n.op != Op::Dot) return error(ErrorCode::unsupported, "only dot is native");
  for (const TensorType& t : n.inputs)
    if (t.dtype != DType::f32) return error(ErrorCode::unsupported, "the tiled GEMM is f32 only");
  return plan_contraction(n.op, n.attrs, n.inputs, n.outputs);
}

Claim claim_tiled_gemm(const NodeDesc& n, std::string_view device) {
  if (n.op != Op::Dot)
    return Claim::no(cat(device, " has no native ", op_name(n.op), " kernel (its general one is the tiled f32 GEMM, dot)"));
  auto p = plan_tiled_gemm(n);
  if (!p) return Claim::no(p.status().message());
  return Claim::yes(cat("tiled gemm 16x16 m=", p->m, " n=", p->n, " k=", p->k, p->batch > 1 ? cat(" batch=", p->batch) : ""));
}

}  // namespace rlx::kernels
