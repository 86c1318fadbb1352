#include "onednn_families.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <mutex>

#include "kernels/gemm_plan.h"

namespace rlx::kernels {
namespace {

using dnnl::memory;
using Dims = memory::dims;

// One engine and stream for the process (oneDNN's CPU engine; its threads are its own).
struct Engine {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{eng};
  std::mutex mu;  // a stream runs one primitive at a time
};
Engine& engine() {
  static Engine e;
  return e;
}

bool all_f32(const NodeDesc& n) {
  for (const TensorType& t : n.inputs)
    if (t.dtype != DType::f32) return false;
  for (const TensorType& t : n.outputs)
    if (t.dtype != DType::f32) return false;
  return true;
}
bool all_static(const NodeDesc& n) {
  for (const TensorType& t : n.inputs)
    if (!static_sizes(t.shape)) return false;
  for (const TensorType& t : n.outputs)
    if (!static_sizes(t.shape)) return false;
  return true;
}
Claim f32_static(const NodeDesc& n) {
  if (!all_f32(n)) return Claim::no("oneDNN runs f32 here (other dtypes use the cpu's kernels)");
  if (!all_static(n)) return Claim::no("oneDNN needs static shapes");
  return Claim::yes("");
}

Dims dims_of(const TensorType& t) {
  const Sizes s = *static_sizes(t.shape);
  return Dims(s.begin(), s.end());
}
memory::desc plain(const Dims& d) {
  Dims strides(d.size(), 1);
  for (int i = static_cast<int>(d.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * d[i + 1];
  return memory::desc(d, memory::data_type::f32, strides);
}
memory mem(const memory::desc& d, const void* p) { return memory(d, engine().eng, const_cast<void*>(p)); }

// Runs primitive `p` with `args`, turning oneDNN's exceptions into an error naming `what`.
template <class Make>
Status run_primitive(const char* what, Make make) {
  try {
    Engine& e = engine();
    std::lock_guard<std::mutex> lock(e.mu);
    auto [prim, args] = make(e.eng);
    prim.execute(e.stream, args);
    e.stream.wait();
    return Status::ok();
  } catch (const dnnl::error& ex) {
    return error(ErrorCode::runtime_error, "oneDNN ", what, ": ", ex.what());
  }
}
using Args = std::unordered_map<int, memory>;

// ---------------------------------------------------------------- contraction: matmul
Claim claim_contraction(const NodeDesc& n) {
  if (n.op != Op::MatMul && n.op != Op::Dot) return Claim::no(cat("oneDNN's matmul runs matmul and dot, not ", op_name(n.op)));
  if (Claim c = f32_static(n); !c.ok) return c;
  auto p = plan_contraction(n.op, n.attrs, n.inputs, n.outputs);
  if (!p) return Claim::no(p.status().message());
  if (p->c_mode != GemmPlan::CMode::none || p->alpha != 1.f) return Claim::no("oneDNN's matmul here takes no third operand or scale");
  if (p->batch > 1 && p->stride_a == 0 && p->stride_b == 0) return Claim::no("both operands broadcast over the batch");
  return Claim::yes(cat("oneDNN matmul m=", p->m, " n=", p->n, " k=", p->k, p->batch > 1 ? cat(" batch=", p->batch) : ""));
}

Status run_contraction(Op op, const Attrs& attrs, std::span<const TensorType> in_t, std::span<const void* const> in,
                       std::span<const TensorType> out_t, std::span<void* const> out) {
  RLX_ASSIGN_OR_RETURN(GemmPlan p, plan_contraction(op, attrs, in_t, out_t));
  // element (b, i, j) of A at b*stride_a + i*lda + j (or j*lda + i transposed), and so on
  auto operand = [&](int64_t rows, int64_t cols, int64_t ld, bool trans, int64_t stride) {
    const int64_t rs = trans ? 1 : ld, cs = trans ? ld : 1;
    if (p.batch == 1) return memory::desc({rows, cols}, memory::data_type::f32, {rs, cs});
    return memory::desc({stride == 0 ? 1 : p.batch, rows, cols}, memory::data_type::f32, {stride, rs, cs});
  };
  const memory::desc a = operand(p.m, p.k, p.lda, p.trans_a, p.stride_a);
  const memory::desc b = operand(p.k, p.n, p.ldb, p.trans_b, p.stride_b);
  const memory::desc c = p.batch == 1 ? memory::desc({p.m, p.n}, memory::data_type::f32, {p.ldc, 1})
                                      : memory::desc({p.batch, p.m, p.n}, memory::data_type::f32, {p.stride_c, p.ldc, 1});
  return run_primitive("matmul", [&](const dnnl::engine& eng) {
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), eng);
    return std::pair{dnnl::matmul(pd), Args{{DNNL_ARG_SRC, mem(a, in[0])}, {DNNL_ARG_WEIGHTS, mem(b, in[1])},
                                            {DNNL_ARG_DST, mem(c, out[0])}}};
  });
}

// ---------------------------------------------------------------- conv: convolution, pooling
Claim claim_conv(const NodeDesc& n) {
  // oneDNN's max pooling returns the largest number of a window holding NaN, where rlx (as
  // PyTorch) returns NaN: max_pool2d stays on rlx's kernels
  if (n.op == Op::MaxPool2d) return Claim::no("oneDNN's max pooling does not propagate NaN");
  if (n.op != Op::Conv2d && n.op != Op::AvgPool2d)
    return Claim::no(cat("oneDNN runs conv2d and average pooling here, not ", op_name(n.op)));
  if (Claim c = f32_static(n); !c.ok) return c;
  if (n.op != Op::Conv2d) {
    if (n.attrs.i("ceil_mode", 0) != 0) return Claim::no("oneDNN's pooling here has no ceil mode");
    for (int64_t d : n.attrs.ints("dilations", {1, 1}))
      if (d != 1) return Claim::no("oneDNN's pooling here has no dilation");
  }
  return Claim::yes(cat("oneDNN ", n.op == Op::Conv2d ? "convolution" : "pooling"));
}

Status run_conv(Op op, const Attrs& attrs, std::span<const TensorType> in_t, std::span<const void* const> in,
                std::span<const TensorType> out_t, std::span<void* const> out) {
  const Dims x = dims_of(in_t[0]), y = dims_of(out_t[0]);
  const std::vector<int64_t> st = attrs.ints("strides", {1, 1}), pads = attrs.ints("pads", {0, 0, 0, 0});
  const Dims strides{st[0], st[1]}, pad_l{pads[0], pads[1]}, pad_r{pads[2], pads[3]};
  const memory::desc src = plain(x), dst = plain(y);
  if (op == Op::Conv2d) {
    const Dims w = dims_of(in_t[1]);
    const int64_t group = attrs.i("group", 1);
    const std::vector<int64_t> dil = attrs.ints("dilations", {1, 1});
    // oneDNN counts dilation from 0 (no gaps); grouped weights are [g, M/g, C/g, kh, kw]
    const Dims dilates{dil[0] - 1, dil[1] - 1};
    const memory::desc wd = group == 1 ? plain(w) : plain(Dims{group, w[0] / group, w[1], w[2], w[3]});
    const bool bias = in.size() == 3;
    const memory::desc bd = bias ? plain(Dims{w[0]}) : memory::desc();
    return run_primitive("convolution", [&](const dnnl::engine& eng) {
      dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src, wd, bd,
                                        dst, strides, dilates, pad_l, pad_r);
      dnnl::convolution_forward::primitive_desc pd(d, eng);
      Args args{{DNNL_ARG_SRC, mem(src, in[0])}, {DNNL_ARG_WEIGHTS, mem(wd, in[1])}, {DNNL_ARG_DST, mem(dst, out[0])}};
      if (bias) args.emplace(DNNL_ARG_BIAS, mem(bd, in[2]));
      return std::pair{dnnl::convolution_forward(pd), args};
    });
  }
  const std::vector<int64_t> k = attrs.ints("kernel");
  const dnnl::algorithm alg = attrs.i("count_include_pad", 0) ? dnnl::algorithm::pooling_avg_include_padding
                                                             : dnnl::algorithm::pooling_avg_exclude_padding;
  return run_primitive("pooling", [&](const dnnl::engine& eng) {
    dnnl::pooling_forward::desc d(dnnl::prop_kind::forward_inference, alg, src, dst, strides, Dims{k[0], k[1]}, pad_l, pad_r);
    dnnl::pooling_forward::primitive_desc pd(d, eng);
    return std::pair{dnnl::pooling_forward(pd), Args{{DNNL_ARG_SRC, mem(src, in[0])}, {DNNL_ARG_DST, mem(dst, out[0])}}};
  });
}

// ---------------------------------------------------------------- normalization
int64_t norm_axis(const Attrs& attrs, int rank) {
  int64_t a = attrs.i("axis", -1);
  return a < 0 ? a + rank : a;
}

Claim claim_normalization(const NodeDesc& n) {
  if (n.op != Op::Softmax && n.op != Op::LogSoftmax && n.op != Op::LayerNorm)
    return Claim::no(cat("oneDNN runs softmax, log_softmax and layer_norm here, not ", op_name(n.op)));
  if (Claim c = f32_static(n); !c.ok) return c;
  if (n.inputs[0].rank() == 0) return Claim::no("oneDNN normalizes tensors of rank 1 or more");
  if (n.op == Op::LayerNorm) {
    // scale and bias must cover the normalized axes whole (oneDNN takes one value per channel)
    const Sizes x = *static_sizes(n.inputs[0].shape);
    int64_t c = 1;
    for (size_t i = static_cast<size_t>(norm_axis(n.attrs, n.inputs[0].rank())); i < x.size(); ++i) c *= x[i];
    for (size_t i = 1; i < n.inputs.size(); ++i)
      if (numel(*static_sizes(n.inputs[i].shape)) != c) return Claim::no("a broadcast scale or bias (oneDNN takes one per channel)");
  }
  return Claim::yes(cat("oneDNN ", op_name(n.op)));
}

Status run_normalization(Op op, const Attrs& attrs, std::span<const TensorType> in_t, std::span<const void* const> in,
                         std::span<const TensorType> out_t, std::span<void* const> out) {
  const Dims x = dims_of(in_t[0]);
  const int axis = static_cast<int>(norm_axis(attrs, static_cast<int>(x.size())));
  if (op == Op::LayerNorm) {
    // [N, C]: the leading axes, then the normalized ones flattened
    int64_t rows = 1, c = 1;
    for (int i = 0; i < static_cast<int>(x.size()); ++i) (i < axis ? rows : c) *= x[i];
    const memory::desc data = plain(Dims{rows, c}), chan = plain(Dims{c});
    auto flags = dnnl::normalization_flags::none;
    if (in.size() > 1) flags = flags | dnnl::normalization_flags::use_scale;
    if (in.size() > 2) flags = flags | dnnl::normalization_flags::use_shift;
    const float eps = static_cast<float>(attrs.f("epsilon", 1e-5));
    return run_primitive("layer normalization", [&](const dnnl::engine& eng) {
      dnnl::layer_normalization_forward::desc d(dnnl::prop_kind::forward_inference, data, eps, flags);
      dnnl::layer_normalization_forward::primitive_desc pd(d, eng);
      Args args{{DNNL_ARG_SRC, mem(data, in[0])}, {DNNL_ARG_DST, mem(data, out[0])}};
      if (in.size() > 1) args.emplace(DNNL_ARG_SCALE, mem(chan, in[1]));
      if (in.size() > 2) args.emplace(DNNL_ARG_SHIFT, mem(chan, in[2]));
      return std::pair{dnnl::layer_normalization_forward(pd), args};
    });
  }
  const memory::desc data = plain(x);
  if (op == Op::LogSoftmax)
    return run_primitive("log-softmax", [&](const dnnl::engine& eng) {
      dnnl::logsoftmax_forward::primitive_desc pd(dnnl::logsoftmax_forward::desc(dnnl::prop_kind::forward_inference, data, axis), eng);
      return std::pair{dnnl::logsoftmax_forward(pd), Args{{DNNL_ARG_SRC, mem(data, in[0])}, {DNNL_ARG_DST, mem(data, out[0])}}};
    });
  return run_primitive("softmax", [&](const dnnl::engine& eng) {
    dnnl::softmax_forward::primitive_desc pd(dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, data, axis), eng);
    return std::pair{dnnl::softmax_forward(pd), Args{{DNNL_ARG_SRC, mem(data, in[0])}, {DNNL_ARG_DST, mem(data, out[0])}}};
  });
}

constexpr HostFamily kFamilies[] = {
    {OpFamily::contraction, "oneDNN matmul", claim_contraction, run_contraction},
    {OpFamily::conv, "oneDNN convolution and pooling", claim_conv, run_conv},
    {OpFamily::normalization, "oneDNN softmax and layer normalization", claim_normalization, run_normalization},
};

}  // namespace

std::span<const HostFamily> onednn_families() { return kFamilies; }

const HostFamily* onednn_family(OpFamily f) {
  for (const HostFamily& h : kFamilies)
    if (h.family == f) return &h;
  return nullptr;
}

std::string onednn_engine_summary() {
  const dnnl_version_t* v = dnnl_version();
  const char* isa = "";
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx512_core_amx: isa = "avx512_core_amx"; break;
    case dnnl::cpu_isa::avx512_core_bf16: isa = "avx512_core_bf16"; break;
    case dnnl::cpu_isa::avx512_core_vnni: isa = "avx512_core_vnni"; break;
    case dnnl::cpu_isa::avx512_core: isa = "avx512_core"; break;
    case dnnl::cpu_isa::avx2: isa = "avx2"; break;
    default: isa = "baseline"; break;
  }
  size_t gpus = 0;
  try {
    gpus = dnnl::engine::get_count(dnnl::engine::kind::gpu);
  } catch (const dnnl::error&) {
  }
  return cat("oneDNN ", v->major, ".", v->minor, ".", v->patch, ", CPU engine (", isa, "), ", gpus, " GPU engine",
             gpus == 1 ? "" : "s");
}

}  // namespace rlx::kernels
