// Every vector-Jacobian rule against central finite differences, in f64 on the reference
// device, with fresh random inputs each run (the seed is printed on failure). Each case
// builds a small graph around one op; the loss is sum_k sum(y_k * r_k) with random r_k, so
// every output element's gradient is exercised with a different weight.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <set>

#include "rlx/compile.h"
#include "rlx/dispatch.h"
#include "rlx/op_builder.h"
#include "rlx/verify.h"
#include "train/autodiff.h"

namespace rlx::train {
namespace {

struct In {
  DType dt = DType::f64;
  Sizes shape;
  double lo = -1.0, hi = 1.0;       // uniform range of random values
  std::vector<double> values = {};  // fixed values (indices, masks); random when empty
  bool diff = true;                 // differentiate with respect to it
  double min_abs = 0.0;             // resample values closer to 0 than this (kinks at 0)
  double min_frac_dist = 0.0;       // resample values closer than this to an integer or half
};

using Body = std::function<std::vector<ValueId>(OpBuilder& o, const std::vector<ValueId>& in)>;

struct Case {
  std::string name;
  Op op;
  std::vector<In> inputs;
  Body body;
  std::string device = "ref";
  double rtol = 1e-6;
  // The function has jumps (splatting's alpha cutoffs at 1/255 and 0.99): an element within h
  // of one has a central difference that grows as h shrinks. Such an element (its differences
  // at h and h/4 disagree) is reported and not compared; more than one per input fails.
  bool jumps = false;
};

In F(Sizes s, double lo = -1.0, double hi = 1.0) { return In{DType::f64, std::move(s), lo, hi}; }
In Pos(Sizes s) { return In{DType::f64, std::move(s), 0.5, 2.0}; }
In Away0(Sizes s) {
  In i = F(std::move(s));
  i.min_abs = 0.05;
  return i;
}
In Ints(Sizes s, std::vector<double> v, DType dt = DType::i64) {
  In i{dt, std::move(s)};
  i.values = std::move(v);
  i.diff = false;
  return i;
}
In Bools(Sizes s, std::vector<double> v) { return Ints(std::move(s), std::move(v), DType::boolean); }

Attrs A(std::initializer_list<std::pair<std::string, AttrValue>> a) { return Attrs(a); }
using I = std::vector<int64_t>;

std::vector<Case> cases() {
  std::vector<Case> c;
  auto un = [&](Op op, In in, std::string suffix = "") {
    c.push_back({std::string(op_name(op)) + suffix, op, {in}, [op](OpBuilder& o, const std::vector<ValueId>& x) {
                   return std::vector<ValueId>{o.op(op, {x[0]})};
                 }});
  };
  // unary math
  un(Op::Neg, F({2, 3}));
  un(Op::Abs, Away0({2, 3}));
  un(Op::Exp, F({2, 3}));
  un(Op::Log, Pos({2, 3}));
  un(Op::Sqrt, Pos({2, 3}));
  un(Op::Rsqrt, Pos({2, 3}));
  un(Op::Reciprocal, Pos({2, 3}));
  un(Op::Tanh, F({2, 3}));
  un(Op::Sigmoid, F({2, 3}, -3, 3));
  un(Op::Erf, F({2, 3}));
  un(Op::Sin, F({2, 3}, -3, 3));
  un(Op::Cos, F({2, 3}, -3, 3));
  for (Op op : {Op::Floor, Op::Ceil, Op::Round, Op::Sign}) {
    In in = F({2, 3}, -3, 3);
    in.min_frac_dist = 0.05;
    un(op, in);
  }
  // activations
  un(Op::Relu, Away0({3, 4}));
  un(Op::Silu, F({3, 4}, -3, 3));
  un(Op::Softplus, F({3, 4}, -5, 5));
  c.push_back({"gelu_erf", Op::Gelu, {F({3, 4}, -3, 3)},
               [](OpBuilder& o, const std::vector<ValueId>& x) { return std::vector<ValueId>{o.gelu(x[0], "none")}; }});
  c.push_back({"gelu_tanh", Op::Gelu, {F({3, 4}, -3, 3)},
               [](OpBuilder& o, const std::vector<ValueId>& x) { return std::vector<ValueId>{o.gelu(x[0], "tanh")}; }});
  c.push_back({"leaky_relu", Op::LeakyRelu, {Away0({3, 4})}, [](OpBuilder& o, const std::vector<ValueId>& x) {
                 return std::vector<ValueId>{o.op(Op::LeakyRelu, {x[0]}, A({{"alpha", 0.2}}))};
               }});
  // binary, with numpy broadcasting
  auto bin = [&](Op op, In a, In b, std::string name, Attrs at = {}) {
    c.push_back({name, op, {a, b}, [op, at](OpBuilder& o, const std::vector<ValueId>& x) {
                   return std::vector<ValueId>{o.op(op, {x[0], x[1]}, at)};
                 }});
  };
  bin(Op::Add, F({2, 3}), F({3}), "add_broadcast");
  bin(Op::Sub, F({2, 1, 4}), F({3, 1}), "sub_broadcast_both");
  bin(Op::Mul, F({2, 3}), F({2, 3}), "mul");
  bin(Op::Mul, F({2, 3, 2}), F({}), "mul_scalar");
  bin(Op::Div, F({2, 3}), Pos({2, 1}), "div_broadcast");
  bin(Op::Pow, Pos({2, 3}), F({2, 3}, -2, 2), "pow");
  bin(Op::Max, F({3, 4}), F({4}), "max_broadcast");
  bin(Op::Min, F({3, 4}), F({3, 1}), "min_broadcast");
  bin(Op::Mod, F({2, 3}, 2.3, 2.5), F({2, 3}, 1.5, 1.6), "mod_floored");
  bin(Op::Mod, F({2, 3}, -2.5, -2.3), F({2, 3}, 1.5, 1.6), "mod_fmod", A({{"fmod", int64_t{1}}}));
  c.push_back({"where_broadcast", Op::Where, {Bools({2, 3}, {1, 0, 1, 0, 0, 1}), F({2, 3}), F({3})},
               [](OpBuilder& o, const std::vector<ValueId>& x) { return std::vector<ValueId>{o.where(x[0], x[1], x[2])}; }});
  {
    In f32 = F({2, 3});
    f32.dt = DType::f32;
    c.push_back({"cast_f32_to_f64", Op::Cast, {f32}, [](OpBuilder& o, const std::vector<ValueId>& x) {
                   ValueId y = o.cast(x[0], DType::f64);
                   return std::vector<ValueId>{o.mul(y, y)};
                 }});
  }
  // reductions
  auto red = [&](Op op, In in, I axes, int64_t keep, std::string name) {
    c.push_back({name, op, {in}, [op, axes, keep](OpBuilder& o, const std::vector<ValueId>& x) {
                   return std::vector<ValueId>{o.reduce(op, x[0], axes, keep != 0)};
                 }});
  };
  red(Op::ReduceSum, F({2, 3, 4}), {1}, 0, "reduce_sum");
  red(Op::ReduceSum, F({2, 3}), {}, 1, "reduce_sum_all");
  red(Op::ReduceMean, F({2, 3, 4}), {0, -1}, 1, "reduce_mean");
  red(Op::ReduceMax, F({3, 5}), {1}, 0, "reduce_max");
  red(Op::ReduceMin, F({3, 5}), {0}, 1, "reduce_min");
  red(Op::ReduceProd, F({3, 4}, 0.5, 1.5), {1}, 1, "reduce_prod");
  {
    In z = F({2, 4});
    z.values = {0.0, 0.7, -1.2, 0.9, 0.0, 0.0, 1.1, 0.6};  // one zero in row 0, two in row 1
    red(Op::ReduceProd, z, {1}, 0, "reduce_prod_zeros");
  }
  // normalizations
  c.push_back({"softmax", Op::Softmax, {F({3, 5}, -2, 2)},
               [](OpBuilder& o, const std::vector<ValueId>& x) { return std::vector<ValueId>{o.softmax(x[0], 1)}; }});
  c.push_back({"log_softmax", Op::LogSoftmax, {F({2, 3, 4}, -2, 2)},
               [](OpBuilder& o, const std::vector<ValueId>& x) { return std::vector<ValueId>{o.log_softmax(x[0], -1)}; }});
  c.push_back({"layer_norm", Op::LayerNorm, {F({2, 3, 4}), F({4}), F({3, 4})},
               [](OpBuilder& o, const std::vector<ValueId>& x) {
                 return std::vector<ValueId>{o.layer_norm(x[0], x[1], x[2], 1, 1e-5)};
               }});
  c.push_back({"layer_norm_plain", Op::LayerNorm, {F({3, 5})}, [](OpBuilder& o, const std::vector<ValueId>& x) {
                 return std::vector<ValueId>{o.op(Op::LayerNorm, {x[0]}, A({{"axis", int64_t{-1}}, {"epsilon", 1e-3}}))};
               }});
  c.push_back({"rms_norm", Op::RmsNorm, {F({2, 3, 4}), F({4})},
               [](OpBuilder& o, const std::vector<ValueId>& x) { return std::vector<ValueId>{o.rms_norm(x[0], x[1], -1, 1e-6)}; }});
  // contractions
  auto mm = [&](In a, In b, std::string name) {
    c.push_back({name, Op::MatMul, {a, b},
                 [](OpBuilder& o, const std::vector<ValueId>& x) { return std::vector<ValueId>{o.matmul(x[0], x[1])}; }});
  };
  mm(F({2, 3}), F({3, 4}), "matmul");
  mm(F({2, 2, 3}), F({3, 4}), "matmul_batched_rows");
  mm(F({2, 1, 2, 3}), F({3, 3, 2}), "matmul_broadcast_batch");
  mm(F({3}), F({3, 4}), "matmul_vector_lhs");
  mm(F({2, 3}), F({3}), "matmul_vector_rhs");
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      Sizes as = ta ? Sizes{3, 2} : Sizes{2, 3}, bs = tb ? Sizes{4, 3} : Sizes{3, 4};
      c.push_back({cat("gemm_ta", ta, "_tb", tb), Op::Gemm, {F(as), F(bs), F({4})},
                   [ta, tb](OpBuilder& o, const std::vector<ValueId>& x) {
                     return std::vector<ValueId>{o.op(Op::Gemm, {x[0], x[1], x[2]},
                                                      A({{"trans_a", int64_t{ta}}, {"trans_b", int64_t{tb}},
                                                         {"alpha", 0.7}, {"beta", 1.3}}))};
                   }});
    }
  c.push_back({"dot_batched", Op::Dot, {F({2, 3, 4}), F({2, 4, 5})}, [](OpBuilder& o, const std::vector<ValueId>& x) {
                 return std::vector<ValueId>{o.dot(x[0], x[1], {0}, {0}, {2}, {1})};
               }});
  c.push_back({"dot_permuted", Op::Dot, {F({3, 2, 4}), F({4, 2, 5, 3})}, [](OpBuilder& o, const std::vector<ValueId>& x) {
                 return std::vector<ValueId>{o.dot(x[0], x[1], {1}, {1}, {0, 2}, {3, 0})};
               }});
  // bf16 operands with an f32 result (out_type, autocast's narrow form): the loss and the finite
  // differences are f32, but the incoming gradient is rounded to bf16 before the gradient dots
  // and their results are bf16, so an element's error is up to 2^-8 of the sum of its terms'
  // magnitudes, which cancellation can make a large part of a small gradient (2.5% seen): the
  // tolerance only separates a right rule from a wrong one (a swapped or untransposed operand)
  {
    Case k{"dot_bf16_out_f32", Op::Dot, {In{DType::bf16, {3, 4}}, In{DType::bf16, {5, 4}}},
           [](OpBuilder& o, const std::vector<ValueId>& x) {
             return std::vector<ValueId>{o.op(Op::Dot, {x[0], x[1]},
                                              Attrs{{"lhs_contract", std::vector<int64_t>{1}},
                                                    {"rhs_contract", std::vector<int64_t>{1}}, {"out_type", DType::f32}})};
           }};
    k.rtol = 0.5;
    c.push_back(k);
  }
  // movement
  c.push_back({"reshape", Op::Reshape, {F({2, 3, 4})},
               [](OpBuilder& o, const std::vector<ValueId>& x) { return std::vector<ValueId>{o.reshape(x[0], {4, -1})}; }});
  c.push_back({"transpose", Op::Transpose, {F({2, 3, 4})},
               [](OpBuilder& o, const std::vector<ValueId>& x) { return std::vector<ValueId>{o.transpose(x[0], {2, 0, 1})}; }});
  c.push_back({"expand", Op::Expand, {F({3, 1})},
               [](OpBuilder& o, const std::vector<ValueId>& x) { return std::vector<ValueId>{o.expand(x[0], {2, 3, 4})}; }});
  c.push_back({"strided_slice", Op::StridedSlice, {F({5, 6})}, [](OpBuilder& o, const std::vector<ValueId>& x) {
                 return std::vector<ValueId>{o.strided_slice(x[0], {1, 5}, {2, -2}, {2, 3})};
               }});
  c.push_back({"slice", Op::Slice, {F({4, 7})}, [](OpBuilder& o, const std::vector<ValueId>& x) {
                 return std::vector<ValueId>{o.slice(x[0], {-1, 1}, {0, 100}, {0, 1}, {-2, 3})};
               }});
  c.push_back({"pad_constant", Op::Pad, {F({3, 4})}, [](OpBuilder& o, const std::vector<ValueId>& x) {
                 return std::vector<ValueId>{o.pad(x[0], {1, -1, 2, 1}, 0.5)};
               }});
  for (std::string mode : {"reflect", "edge"})
    c.push_back({"pad_" + mode, Op::Pad, {F({3, 4})}, [mode](OpBuilder& o, const std::vector<ValueId>& x) {
                   return std::vector<ValueId>{o.op(Op::Pad, {x[0]}, A({{"pads", I{2, 1, 1, 3}}, {"mode", mode}}))};
                 }});
  c.push_back({"concat", Op::Concat, {F({2, 1}), F({2, 3}), F({2, 2})},
               [](OpBuilder& o, const std::vector<ValueId>& x) { return std::vector<ValueId>{o.concat({x[0], x[1], x[2]}, -1)}; }});
  c.push_back({"split", Op::Split, {F({2, 6})}, [](OpBuilder& o, const std::vector<ValueId>& x) {
                 auto parts = o.split(x[0], 1, {1, 3, 2});
                 return std::vector<ValueId>{parts[0], parts[2]};  // the middle part gets no gradient
               }});
  c.push_back({"squeeze", Op::Squeeze, {F({2, 1, 3})}, [](OpBuilder& o, const std::vector<ValueId>& x) {
                 return std::vector<ValueId>{o.op(Op::Squeeze, {x[0]}, A({{"axes", I{1}}}))};
               }});
  c.push_back({"unsqueeze", Op::Unsqueeze, {F({2, 3})}, [](OpBuilder& o, const std::vector<ValueId>& x) {
                 return std::vector<ValueId>{o.op(Op::Unsqueeze, {x[0]}, A({{"axes", I{0, 3}}}))};
               }});
  c.push_back({"gather_axis0", Op::Gather, {F({5, 3}), Ints({2, 2}, {4, -1, 0, 4})},
               [](OpBuilder& o, const std::vector<ValueId>& x) { return std::vector<ValueId>{o.gather(x[0], x[1], 0)}; }});
  c.push_back({"gather_axis1", Op::Gather, {F({2, 4, 3}), Ints({3}, {1, 1, 3}, DType::i32)},
               [](OpBuilder& o, const std::vector<ValueId>& x) { return std::vector<ValueId>{o.gather(x[0], x[1], 1)}; }});
  c.push_back({"embedding", Op::Embedding, {F({6, 3}), Ints({2, 2}, {5, 0, 5, 2})},
               [](OpBuilder& o, const std::vector<ValueId>& x) { return std::vector<ValueId>{o.embedding(x[0], x[1])}; }});
  c.push_back({"scatter_add", Op::ScatterAdd, {F({5, 3}), Ints({4}, {1, 3, 1, 0}), F({4, 3})},
               [](OpBuilder& o, const std::vector<ValueId>& x) {
                 return std::vector<ValueId>{o.op(Op::ScatterAdd, {x[0], x[1], x[2]}, A({{"axis", int64_t{0}}}))};
               }});
  c.push_back({"scatter", Op::Scatter, {F({3, 5}), Ints({2}, {4, -5}), F({3, 2})},
               [](OpBuilder& o, const std::vector<ValueId>& x) {
                 return std::vector<ValueId>{o.op(Op::Scatter, {x[0], x[1], x[2]}, A({{"axis", int64_t{1}}}))};
               }});
  // convolution and pooling
  auto conv = [&](std::string name, Sizes xs, Sizes ws, bool bias, I strides, I pads, I dil, int64_t group) {
    std::vector<In> ins{F(xs), F(ws)};
    if (bias) ins.push_back(F({ws[0]}));
    c.push_back({name, Op::Conv2d, ins, [=](OpBuilder& o, const std::vector<ValueId>& x) {
                   std::vector<ValueId> in(x.begin(), x.end());
                   return std::vector<ValueId>{o.op(Op::Conv2d, in,
                                                    A({{"strides", strides}, {"pads", pads}, {"dilations", dil},
                                                       {"group", group}}))};
                 }});
  };
  conv("conv2d", {2, 3, 5, 4}, {4, 3, 3, 2}, true, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
  conv("conv2d_stride_pad", {1, 2, 7, 6}, {3, 2, 3, 3}, true, {2, 2}, {1, 0, 2, 1}, {1, 1}, 1);
  conv("conv2d_group_dilation", {1, 4, 7, 7}, {6, 2, 2, 3}, false, {1, 2}, {0, 1, 1, 0}, {2, 1}, 2);
  // stride 1: dx as shifts of the flat padded input (uneven pads, groups, a 1-wide kernel row)
  conv("conv2d_stride1_pad_group", {2, 4, 5, 6}, {6, 2, 3, 2}, true, {1, 1}, {2, 0, 1, 1}, {1, 1}, 2);
  conv("conv2d_stride1_1x3", {1, 2, 4, 5}, {3, 2, 1, 3}, false, {1, 1}, {0, 1, 0, 1}, {1, 1}, 1);
  // bf16 x and w with an f32 result and bias (out_type, autocast's narrow form): the gradient
  // products take the incoming gradient rounded to bf16 (see dot_bf16_out_f32 for the
  // tolerance, which only separates a right rule from a wrong one)
  {
    Case k{"conv2d_bf16_out_f32", Op::Conv2d,
           {In{DType::bf16, {2, 4, 5, 6}}, In{DType::bf16, {6, 2, 3, 2}}, In{DType::f32, {6}}},
           [](OpBuilder& o, const std::vector<ValueId>& x) {
             return std::vector<ValueId>{o.op(Op::Conv2d, {x[0], x[1], x[2]},
                                              A({{"strides", I{2, 1}}, {"pads", I{1, 0, 1, 1}}, {"group", int64_t{2}},
                                                 {"out_type", DType::f32}}))};
           }};
    k.rtol = 0.5;
    c.push_back(k);
  }
  auto pool = [&](std::string name, Op op, Sizes xs, Attrs at) {
    c.push_back({name, op, {F(xs)}, [op, at](OpBuilder& o, const std::vector<ValueId>& x) {
                   return std::vector<ValueId>{o.op(op, {x[0]}, at)};
                 }});
  };
  pool("max_pool2d", Op::MaxPool2d, {2, 2, 4, 6}, A({{"kernel", I{2, 2}}, {"strides", I{2, 2}}}));
  pool("max_pool2d_overlap_pad", Op::MaxPool2d, {1, 2, 5, 5},
       A({{"kernel", I{3, 3}}, {"strides", I{2, 2}}, {"pads", I{1, 1, 1, 1}}}));
  pool("max_pool2d_ceil_dilation", Op::MaxPool2d, {1, 1, 6, 7},
       A({{"kernel", I{2, 2}}, {"strides", I{2, 2}}, {"dilations", I{1, 2}}, {"ceil_mode", int64_t{1}}}));
  pool("max_pool2d_tiles_remainder", Op::MaxPool2d, {1, 2, 5, 7}, A({{"kernel", I{2, 2}}, {"strides", I{2, 2}}}));
  pool("avg_pool2d_tiles", Op::AvgPool2d, {2, 1, 5, 4}, A({{"kernel", I{2, 2}}, {"strides", I{2, 2}}}));
  pool("avg_pool2d", Op::AvgPool2d, {1, 2, 5, 5},
       A({{"kernel", I{3, 3}}, {"strides", I{2, 2}}, {"pads", I{1, 1, 1, 1}}}));
  pool("avg_pool2d_include_pad_ceil", Op::AvgPool2d, {1, 2, 6, 5},
       A({{"kernel", I{2, 3}}, {"strides", I{2, 2}}, {"pads", I{1, 1, 0, 1}}, {"count_include_pad", int64_t{1}},
          {"ceil_mode", int64_t{1}}}));
  // attention (grouped-query heads, additive mask, causal) and rope
  c.push_back({"attention_gqa_mask_causal", Op::Attention, {F({1, 4, 3, 4}), F({1, 2, 5, 4}), F({1, 2, 5, 3}), F({3, 5})},
               [](OpBuilder& o, const std::vector<ValueId>& x) {
                 return std::vector<ValueId>{o.attention(x[0], x[1], x[2], x[3], true)};
               }});
  c.push_back({"attention_bool_mask", Op::Attention,
               {F({2, 2, 3, 4}), F({2, 2, 4, 4}), F({2, 2, 4, 2}), Bools({2, 1, 1, 4}, {1, 1, 0, 1, 1, 0, 1, 1})},
               [](OpBuilder& o, const std::vector<ValueId>& x) {
                 return std::vector<ValueId>{o.attention(x[0], x[1], x[2], x[3], false, 0.3)};
               }});
  c.push_back({"rope", Op::Rope, {F({1, 2, 3, 4}), Ints({3}, {0, 5, 2})},
               [](OpBuilder& o, const std::vector<ValueId>& x) { return std::vector<ValueId>{o.rope(x[0], x[1], 100.0)}; }});
  c.push_back({"rope_interleaved", Op::Rope, {F({2, 1, 2, 4}), Ints({2, 2}, {1, 3, 0, 7})},
               [](OpBuilder& o, const std::vector<ValueId>& x) {
                 return std::vector<ValueId>{o.op(Op::Rope, {x[0], x[1]}, A({{"theta", 50.0}, {"interleaved", int64_t{1}}}))};
               }});
  // qmatmul: dequantize has no primitive decomposition, so the reference device cannot run
  // it; this case runs on the cpu in f32 with f16 weights (exact), where x enters linearly
  {
    In x = F({3, 4});
    x.dt = DType::f32;
    std::vector<double> wbytes;
    for (float v : {0.5f, -1.25f, 2.0f, 0.75f, -0.5f, 1.5f, 0.25f, -2.0f}) {
      uint16_t h = f32_to_f16(v);
      wbytes.push_back(h & 0xff);
      wbytes.push_back(h >> 8);
    }
    In w = Ints({2, 8}, wbytes, DType::u8);
    c.push_back({"qmatmul_f32_cpu", Op::QMatMul, {x, w}, [](OpBuilder& o, const std::vector<ValueId>& in) {
                   return std::vector<ValueId>{o.cast(o.op(Op::QMatMul, {in[0], in[1]}, A({{"format", std::string("f16")}})),
                                                      DType::f64)};
                 }, "cpu", 2e-4});
  }
  // dense linear algebra (src/train/vjp_linalg.cpp), on the reference device's plain loops;
  // square inputs get n I added so that solves and factorizations are well conditioned
  {
    auto eye = [](OpBuilder& o, int64_t n, double scale) {
      std::vector<double> v(static_cast<size_t>(n * n), 0.0);
      for (int64_t i = 0; i < n; ++i) v[i * n + i] = scale;
      return o.constant(Tensor::from_f64(DType::f64, {n, n}, v));
    };
    auto lin = [&](std::string name, Op op, std::vector<In> ins, Body body) { c.push_back({name, op, ins, body}); };
    lin("cholesky", Op::Cholesky, {F({2, 4, 4})}, [eye](OpBuilder& o, const std::vector<ValueId>& x) {
      return std::vector<ValueId>{o.op(Op::Cholesky, {o.add(o.matmul(x[0], o.transpose(x[0], {0, 2, 1})), eye(o, 4, 4.0))})};
    });
    lin("eigh", Op::Eigh, {F({2, 4, 4})}, [](OpBuilder& o, const std::vector<ValueId>& x) { return o.op_multi(Op::Eigh, {x[0]}); });
    lin("svd_tall", Op::Svd, {F({5, 3})}, [](OpBuilder& o, const std::vector<ValueId>& x) { return o.op_multi(Op::Svd, {x[0]}); });
    lin("svd_wide_batched", Op::Svd, {F({2, 3, 4})},
        [](OpBuilder& o, const std::vector<ValueId>& x) { return o.op_multi(Op::Svd, {x[0]}); });
    lin("qr_tall", Op::Qr, {F({5, 3})}, [](OpBuilder& o, const std::vector<ValueId>& x) { return o.op_multi(Op::Qr, {x[0]}); });
    lin("qr_square_batched", Op::Qr, {F({2, 3, 3})},
        [](OpBuilder& o, const std::vector<ValueId>& x) { return o.op_multi(Op::Qr, {x[0]}); });
    lin("lu", Op::Lu, {F({2, 4, 4})}, [](OpBuilder& o, const std::vector<ValueId>& x) {
      return std::vector<ValueId>{o.op_multi(Op::Lu, {x[0]})[0]};  // perm is an integer output
    });
    for (int lower = 0; lower < 2; ++lower)
      for (int trans = 0; trans < 2; ++trans)
        lin(cat("triangular_solve_l", lower, "_t", trans, trans ? "_unit" : ""), Op::TriangularSolve, {F({2, 3, 3}), F({2, 3, 2})},
            [eye, lower, trans](OpBuilder& o, const std::vector<ValueId>& x) {
              return std::vector<ValueId>{o.op(Op::TriangularSolve, {o.add(x[0], eye(o, 3, 3.0)), x[1]},
                                               A({{"lower", int64_t{lower}}, {"transpose", int64_t{trans}},
                                                  {"unit_diagonal", int64_t{trans}}}))};
            });
    lin("solve", Op::Solve, {F({2, 3, 3}), F({2, 3, 2})}, [eye](OpBuilder& o, const std::vector<ValueId>& x) {
      return std::vector<ValueId>{o.op(Op::Solve, {o.add(x[0], eye(o, 3, 3.0)), x[1]})};
    });
    lin("det", Op::Det, {F({2, 3, 3})}, [](OpBuilder& o, const std::vector<ValueId>& x) {
      return std::vector<ValueId>{o.op(Op::Det, {x[0]})};
    });
    lin("slogdet", Op::Slogdet, {F({3, 3})}, [](OpBuilder& o, const std::vector<ValueId>& x) {
      return o.op_multi(Op::Slogdet, {x[0]});
    });
    lin("lstsq", Op::Lstsq, {F({2, 5, 3}), F({2, 5, 2})}, [](OpBuilder& o, const std::vector<ValueId>& x) {
      return std::vector<ValueId>{o.op(Op::Lstsq, {x[0], x[1]})};
    });
  }
  // fake_quantize: piecewise constant, so finite differences agree with the straight-through
  // rule only where every value is clipped (gradient 0); FakeQuantizeIsStraightThrough below
  // checks the rule inside the range
  c.push_back({"fake_quantize_clipped", Op::FakeQuantize,
               {F({2, 3}, 1.5, 3.0), In{DType::f64, {}, 0, 0, {0.01}, false}, In{DType::f64, {}, 0, 0, {-3}, false}},
               [](OpBuilder& o, const std::vector<ValueId>& x) {
                 return std::vector<ValueId>{o.op(Op::FakeQuantize, {x[0], x[1], x[2]})};
               }});
  // CSR ops (src/train/vjp_sparse.cpp): a 4x3 pattern with an empty row, and a 4x4 one whose
  // diagonal entries get +4 (well conditioned, SPD through the upper triangle); the solves on
  // ref (dense LU) and cpu (UMFPACK / CHOLMOD and solve_gradients)
  {
    const std::vector<double> rp{0, 2, 2, 5, 6}, ci{0, 2, 0, 1, 2, 1};
    const std::vector<double> rp4{0, 2, 3, 6, 8}, ci4{0, 2, 1, 0, 2, 3, 1, 3};
    auto spmv = [](Attrs a) {
      return [a](OpBuilder& o, const std::vector<ValueId>& x) {
        return std::vector<ValueId>{o.op(Op::SpmvCsr, {x[0], x[1], x[2], x[3]}, a)};
      };
    };
    c.push_back({"spmv_csr_spmm", Op::SpmvCsr, {Ints({5}, rp, DType::i32), Ints({6}, ci, DType::i32), F({6}), F({3, 2})},
                 spmv({})});
    c.push_back({"spmv_csr_cpu", Op::SpmvCsr, {Ints({5}, rp, DType::i32), Ints({6}, ci, DType::i32), F({6}), F({3})},
                 spmv({}), "cpu"});
    c.push_back({"spmv_csr_transposed", Op::SpmvCsr, {Ints({5}, rp), Ints({6}, ci), F({6}), F({4, 2})},
                 spmv(A({{"transpose", int64_t{1}}, {"cols", int64_t{3}}}))});
    // COO triplets in shuffled order with (2, 1) twice, into a 4x3 matrix (row 1 empty), then
    // y = A x: the values' gradient goes back through the positions
    const std::vector<double> cr{2, 0, 3, 2, 0, 2}, cc{1, 0, 2, 1, 2, 0};
    for (const char* dev : {"ref", "cpu"})
      c.push_back({cat("coo_to_csr_", dev), Op::CooToCsr,
                   {Ints({6}, cr, DType::i32), Ints({6}, cc, DType::i32), F({6}), F({3, 2})},
                   [](OpBuilder& o, const std::vector<ValueId>& x) {
                     std::vector<ValueId> a = o.op_multi(Op::CooToCsr, {x[0], x[1], x[2]},
                                                         A({{"rows", int64_t{4}}, {"cols", int64_t{3}}}));
                     if (a.size() != 4) return std::vector<ValueId>{};
                     return std::vector<ValueId>{o.op(Op::SpmvCsr, {a[0], a[1], a[2], x[3]}), a[2]};
                   },
                   dev});
    c.push_back({"sddmm_csr", Op::SddmmCsr, {Ints({5}, rp), Ints({6}, ci), F({4, 2}), F({3, 2})},
                 [](OpBuilder& o, const std::vector<ValueId>& x) {
                   return std::vector<ValueId>{o.op(Op::SddmmCsr, {x[0], x[1], x[2], x[3]})};
                 }});
    auto solve = [](std::string method) {
      return [method](OpBuilder& o, const std::vector<ValueId>& x) {
        ValueId shift = o.constant(Tensor::from_f64(DType::f64, {8}, std::vector<double>{4, 0, 4, 0, 4, 0, 0, 4}));
        return std::vector<ValueId>{
            o.op(Op::SparseSolve, {x[0], x[1], o.add(x[2], shift), x[3]}, A({{"method", method}}))};
      };
    };
    for (const char* dev : {"ref", "cpu"}) {
      c.push_back({cat("sparse_solve_lu_", dev), Op::SparseSolve,
                   {Ints({5}, rp4), Ints({8}, ci4), F({8}), F({4, 2})}, solve("lu"), dev});
      c.push_back({cat("sparse_solve_cholesky_", dev), Op::SparseSolve,
                   {Ints({5}, rp4, DType::i32), Ints({8}, ci4, DType::i32), F({8}), F({4})}, solve("cholesky"), dev});
    }
  }
  // 3D Gaussian splatting (src/train/vjp_splat.cpp emits the backward ops); tests/sci checks
  // the whole renderer with every SH degree, this is the per-rule check
  {
    const Attrs cam{{"viewmat", std::vector<double>{0.96, 0, -0.28, 0.1, 0, 1, 0, -0.1, 0.28, 0, 0.96, 4, 0, 0, 0, 1}},
                    {"fx", 14.0}, {"fy", 15.0}, {"cx", 8.0}, {"cy", 7.5}, {"width", int64_t{16}}, {"height", int64_t{16}}};
    c.push_back({"splat_project", Op::SplatProject, {F({5, 3}), F({5, 3}), F({5, 4}), F({5, 4, 3})},
                 [cam](OpBuilder& o, const std::vector<ValueId>& x) {
                   // log-scales in [-2.5, -1.5]: Gaussians of a few pixels
                   ValueId ls = o.add(o.mul(x[1], o.scalar(0.5, DType::f64)), o.scalar(-2.0, DType::f64));
                   std::vector<ValueId> p = o.op_multi(Op::SplatProject, {x[0], ls, x[2], x[3]}, cam);
                   return std::vector<ValueId>{p[0], p[1], p[2], p[4]};  // radii (3) are piecewise constant
                 }, "ref", 1e-5});
    const int64_t n = 4;
    c.push_back({"splat_rasterize", Op::SplatRasterize,
                 {F({n, 2}), F({n, 3}), F({n, 3}), F({n}), Ints({n}, {0.3, 0.1, 0.2, 0.4}, DType::f64),
                  Ints({n}, {20, 20, 20, 20}, DType::f64), F({3})},
                 [](OpBuilder& o, const std::vector<ValueId>& x) {
                   auto k = [&](double v) { return o.scalar(v, DType::f64); };
                   ValueId m2 = o.add(o.mul(x[0], k(5.0)), k(8.0));  // inside the 16x16 image
                   // a, c in [0.04, 0.16], |b| <= 0.01: positive definite, a few pixels wide
                   ValueId diag = o.constant(Tensor::from_f64(DType::f64, {3}, std::vector<double>{0.1, 0, 0.1}));
                   ValueId scale = o.constant(Tensor::from_f64(DType::f64, {3}, std::vector<double>{0.06, 0.01, 0.06}));
                   ValueId conic = o.add(o.mul(x[1], scale), diag);
                   ValueId opac = o.sigmoid(x[3]);
                   return std::vector<ValueId>{o.op(Op::SplatRasterize, {m2, conic, x[2], opac, x[4], x[5], x[6]},
                                                    A({{"width", int64_t{16}}, {"height", int64_t{16}}, {"tile", int64_t{8}}}))};
                 }, "ref", 1e-5, /*jumps=*/true});
  }
  // collectives on one process (the multi-rank adjoints are checked by tests/dist)
  c.push_back({"all_reduce", Op::AllReduce, {F({2, 3})}, [](OpBuilder& o, const std::vector<ValueId>& x) {
                 return std::vector<ValueId>{o.mul(o.op(Op::AllReduce, {x[0]}), x[0])};
               }});
  c.push_back({"all_gather_axis1", Op::AllGather, {F({2, 3})}, [](OpBuilder& o, const std::vector<ValueId>& x) {
                 return std::vector<ValueId>{
                     o.mul(o.op(Op::AllGather, {x[0]}, A({{"axis", int64_t{1}}, {"ranks", int64_t{1}}})), x[0])};
               }});
  c.push_back({"reduce_scatter", Op::ReduceScatter, {F({4, 3})}, [](OpBuilder& o, const std::vector<ValueId>& x) {
                 return std::vector<ValueId>{o.mul(o.op(Op::ReduceScatter, {x[0]}, A({{"ranks", int64_t{1}}})), x[0])};
               }});
  return c;
}

double frac_dist(double v) {
  double f = v * 2 - std::floor(v * 2);  // distance to the nearest multiple of 0.5
  return std::min(f, 1 - f) / 2;
}

Tensor make_input(const In& in, std::mt19937_64& rng) {
  const int64_t n = numel(in.shape);
  std::vector<double> v(static_cast<size_t>(n));
  if (!in.values.empty()) {
    v = in.values;
  } else {
    std::uniform_real_distribution<double> u(in.lo, in.hi);
    for (double& x : v) {
      do {
        x = u(rng);
      } while (std::abs(x) < in.min_abs || (in.min_frac_dist > 0 && frac_dist(x) < in.min_frac_dist));
    }
  }
  return Tensor::from_f64(in.dt, in.shape, v);
}

void run_case(const Case& k, uint64_t seed) {
  SCOPED_TRACE(cat(k.name, " (seed ", seed, ")"));
  std::mt19937_64 rng(seed);
  Graph g;
  GraphBuilder gb(g);
  OpBuilder o(gb);
  std::vector<ValueId> ins;
  std::vector<Tensor> values;
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    ins.push_back(g.add_input(cat("x", i), TensorType{k.inputs[i].dt, to_shape(k.inputs[i].shape)}));
    values.push_back(make_input(k.inputs[i], rng));
  }
  std::vector<ValueId> ys = k.body(o, ins);
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  ValueId loss = kNoValue;
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (ValueId y : ys) {
    Sizes s = *static_sizes(g.type(y).shape);
    std::vector<double> r(static_cast<size_t>(numel(s)));
    for (double& x : r) x = u(rng);
    ValueId term = o.reduce_sum(o.mul(y, o.constant(Tensor::from_f64(g.type(y).dtype, s, r))), {}, false);
    loss = loss == kNoValue ? term : o.add(loss, term);
  }
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  std::vector<ValueId> wrt;
  std::vector<size_t> wrt_index;
  for (size_t i = 0; i < ins.size(); ++i)
    if (k.inputs[i].diff) {
      wrt.push_back(ins[i]);
      wrt_index.push_back(i);
    }
  Graph fwd = g;
  fwd.outputs = {loss};
  auto grads = gradients(g, loss, wrt);
  ASSERT_TRUE(grads.has_value()) << grads.status().to_string();
  g.outputs = {loss};
  g.outputs.insert(g.outputs.end(), grads->begin(), grads->end());
  ASSERT_TRUE(verify_graph(g).is_ok()) << verify_graph(g).to_string();
  auto model = Model::compile(g, {.device = k.device});
  ASSERT_TRUE(model.has_value()) << model.status().to_string();
  auto out = (*model)->run(values);
  ASSERT_TRUE(out.has_value()) << out.status().to_string();
  auto fmodel = Model::compile(fwd, {.device = k.device});
  ASSERT_TRUE(fmodel.has_value());
  auto eval = [&](std::vector<Tensor>& v) {
    auto r = (*fmodel)->run(v);
    EXPECT_TRUE(r.has_value()) << r.status().to_string();
    return r.has_value() ? (*r)[0].get_f64(0) : NAN;
  };
  for (size_t w = 0; w < wrt.size(); ++w) {
    const size_t i = wrt_index[w];
    const Tensor& ad = (*out)[1 + w];
    int near_jumps = 0;
    for (int64_t e = 0; e < values[i].numel(); ++e) {
      std::vector<Tensor> v = values;
      v[i] = values[i].clone();
      const double x0 = values[i].get_f64(e);
      const double h = k.inputs[i].dt == DType::f64 ? 1e-6 * std::max(1.0, std::abs(x0)) : std::ldexp(1.0, -8);
      auto central = [&](double step) {
        v[i].set_f64(e, x0 + step);
        const double xp = v[i].get_f64(e);
        const double fp = eval(v);
        v[i].set_f64(e, x0 - step);
        const double xm = v[i].get_f64(e);
        const double fm = eval(v);
        return (fp - fm) / (xp - xm);
      };
      const double fd = central(h);
      const double got = ad.get_f64(e);
      if (k.jumps) {
        const double fd_quarter = central(h / 4);
        if (std::abs(fd_quarter - fd) > 0.1 * std::max({std::abs(fd), std::abs(fd_quarter), 1e-2})) {
          std::printf("input %zu element %lld lies within %g of a jump (differences %g at h, %g at h/4): not compared\n",
                      i, static_cast<long long>(e), h, fd, fd_quarter);
          EXPECT_LE(++near_jumps, 1) << "input " << i << ": too many elements near jumps for chance";
          continue;
        }
      }
      EXPECT_LE(std::abs(got - fd), k.rtol * std::max(std::abs(fd), 1e-2))
          << "input " << i << " element " << e << ": autodiff " << got << ", finite difference " << fd;
    }
  }
}

class VjpFiniteDifference : public ::testing::TestWithParam<size_t> {};

TEST_P(VjpFiniteDifference, MatchesCentralDifferences) {
  static const std::vector<Case> all = cases();
  const Case& k = all[GetParam()];
  // fresh inputs each run; RLX_TEST_SEED=<seed> replays the run that printed it
  const char* replay = std::getenv("RLX_TEST_SEED");
  const uint64_t seed = replay ? std::strtoull(replay, nullptr, 10)
                               : std::random_device{}() ^ (static_cast<uint64_t>(std::random_device{}()) << 32);
  run_case(k, seed);
}

INSTANTIATE_TEST_SUITE_P(AllRules, VjpFiniteDifference, ::testing::Range<size_t>(0, cases().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) { return cases()[info.param].name; });

// fake_quantize's straight-through estimator, by its definition: d loss / dx = dy where
// round_half_even(x / scale) + zero_point lies in [qmin, qmax], 0 where the value was clipped;
// scale and zero point get none. Per tensor and per channel, f64 on ref and f32 on cpu, with
// values kept away from the rounding ties and the clip edges (where the rule is a convention).
TEST(Vjp, FakeQuantizeIsStraightThrough) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(cat("seed ", seed));
  std::mt19937_64 rng(seed);
  struct Setup {
    DType dt;
    std::string device;
    bool per_channel;
    int64_t qmin, qmax;
  };
  for (const Setup& su : {Setup{DType::f64, "ref", false, -128, 127}, Setup{DType::f64, "ref", true, -127, 127},
                          Setup{DType::f32, "cpu", true, -128, 127}, Setup{DType::f32, "cpu", false, 0, 255}}) {
    SCOPED_TRACE(cat(dtype_name(su.dt), " on ", su.device, su.per_channel ? " per channel" : " per tensor"));
    const int64_t rows = 5, cols = 6, channels = su.per_channel ? cols : 1;
    std::uniform_real_distribution<double> xs(-3.0, 3.0), ss(0.005, 0.02), rs(-1.0, 1.0);
    std::uniform_int_distribution<int> zs(-20, 20);
    std::vector<double> scale(static_cast<size_t>(channels)), zp(static_cast<size_t>(channels));
    for (int64_t c = 0; c < channels; ++c) {
      scale[static_cast<size_t>(c)] = su.dt == DType::f32 ? static_cast<float>(ss(rng)) : ss(rng);
      zp[static_cast<size_t>(c)] = zs(rng);
    }
    // q = round(x / s) + zp as the device computes it (in the dtype), and the expected mask
    auto q_of = [&](double x, int64_t c) {
      const double s = scale[static_cast<size_t>(c)];
      const double r = su.dt == DType::f32 ? static_cast<double>(static_cast<float>(x) / static_cast<float>(s)) : x / s;
      return std::nearbyint(r) + zp[static_cast<size_t>(c)];  // the default rounding mode: half to even
    };
    std::vector<double> x(static_cast<size_t>(rows * cols)), r(x.size()), want(x.size());
    int inside = 0, clipped = 0;
    for (int64_t i = 0; i < rows * cols; ++i) {
      const int64_t c = su.per_channel ? i % cols : 0;
      const double s = scale[static_cast<size_t>(c)];
      double v = 0;
      for (;;) {
        v = su.dt == DType::f32 ? static_cast<float>(xs(rng)) : xs(rng);
        const double t = v / s - std::floor(v / s);  // fractional part: away from the ties
        const double q = q_of(v, c);
        if (std::fabs(t - 0.5) > 0.01 && std::fabs(q - static_cast<double>(su.qmin) + 0.5) > 0.6 &&
            std::fabs(q - static_cast<double>(su.qmax) - 0.5) > 0.6)
          break;
      }
      x[static_cast<size_t>(i)] = v;
      r[static_cast<size_t>(i)] = su.dt == DType::f32 ? static_cast<float>(rs(rng)) : rs(rng);
      const double q = q_of(v, c);
      const bool in = q >= static_cast<double>(su.qmin) && q <= static_cast<double>(su.qmax);
      (in ? inside : clipped) += 1;
      want[static_cast<size_t>(i)] = in ? r[static_cast<size_t>(i)] : 0.0;
    }
    ASSERT_GT(inside, 0) << "the values cover the inside of the range";
    ASSERT_GT(clipped, 0) << "and clipped values";
    Graph g;
    GraphBuilder gb(g);
    OpBuilder o(gb);
    const Sizes ps = su.per_channel ? Sizes{cols} : Sizes{};
    const ValueId xi = g.add_input("x", TensorType{su.dt, to_shape({rows, cols})});
    const ValueId si = g.add_input("scale", TensorType{su.dt, to_shape(ps)});
    const ValueId zi = g.add_input("zero_point", TensorType{su.dt, to_shape(ps)});
    Attrs at{{"qmin", su.qmin}, {"qmax", su.qmax}};
    if (su.per_channel) at.set("axis", int64_t{1});
    const ValueId y = o.op(Op::FakeQuantize, {xi, si, zi}, at);
    const ValueId loss = o.reduce_sum(o.mul(y, o.constant(Tensor::from_f64(su.dt, {rows, cols}, r))), {}, false);
    ASSERT_TRUE(o.ok()) << o.status().to_string();
    auto grads = gradients(g, loss, std::vector<ValueId>{xi, si, zi});
    ASSERT_TRUE(grads.has_value()) << grads.status().to_string();
    g.outputs = {y, (*grads)[0], (*grads)[1], (*grads)[2]};
    auto model = Model::compile(g, {.device = su.device});
    ASSERT_TRUE(model.has_value()) << model.status().to_string();
    const std::vector<Tensor> args{Tensor::from_f64(su.dt, {rows, cols}, x), Tensor::from_f64(su.dt, ps, scale),
                                   Tensor::from_f64(su.dt, ps, zp)};
    auto out = (*model)->run(args);
    ASSERT_TRUE(out.has_value()) << out.status().to_string();
    for (int64_t i = 0; i < rows * cols; ++i) {
      const int64_t c = su.per_channel ? i % cols : 0;
      const double s = scale[static_cast<size_t>(c)], z = zp[static_cast<size_t>(c)];
      const double q = std::clamp(q_of(x[static_cast<size_t>(i)], c), static_cast<double>(su.qmin), static_cast<double>(su.qmax));
      const double fq = su.dt == DType::f32 ? static_cast<double>(static_cast<float>(static_cast<float>(q - z) * static_cast<float>(s)))
                                            : (q - z) * s;
      EXPECT_EQ((*out)[0].get_f64(i), fq) << "forward, element " << i << " x " << x[static_cast<size_t>(i)];
      EXPECT_EQ((*out)[1].get_f64(i), want[static_cast<size_t>(i)]) << "gradient, element " << i << " x " << x[static_cast<size_t>(i)];
    }
    for (int k : {2, 3})
      for (int64_t c = 0; c < (*out)[static_cast<size_t>(k)].numel(); ++c)
        EXPECT_EQ((*out)[static_cast<size_t>(k)].get_f64(c), 0.0) << "scale and zero point are not learned";
  }
}

// Complex values have no gradients yet: a loss that depends on a requested value only through
// c64 ops is a clear error naming the node, never a crash or a wrong gradient.
TEST(Vjp, ComplexValuesAreAClearError) {
  {
    Graph g;
    const ValueId x = g.add_input("x", TensorType{DType::f32, {3}});
    const ValueId y = g.add_input("y", TensorType{DType::f32, {3}});
    GraphBuilder gb(g);
    OpBuilder o(gb);
    const ValueId loss = o.reduce_sum(o.abs(o.complex(x, y)), {}, false);
    ASSERT_TRUE(o.ok()) << o.status().to_string();
    auto grads = gradients(g, loss, std::vector<ValueId>{x});
    ASSERT_FALSE(grads.has_value());
    EXPECT_EQ(grads.status().code(), ErrorCode::invalid_argument);
    const std::string& m = grads.status().message();
    EXPECT_NE(m.find("cannot differentiate through"), std::string::npos) << m;
    EXPECT_NE(m.find("c64"), std::string::npos) << m;  // abs's input
  }
  {
    Graph g;
    const ValueId z = g.add_input("z", TensorType{DType::c64, {3}});
    GraphBuilder gb(g);
    OpBuilder o(gb);
    const ValueId loss = o.reduce_sum(o.real(o.conj(z)), {}, false);
    ASSERT_TRUE(o.ok()) << o.status().to_string();
    auto grads = gradients(g, loss, std::vector<ValueId>{z});
    ASSERT_FALSE(grads.has_value());
    EXPECT_NE(grads.status().message().find("real is not differentiable"), std::string::npos) << grads.status().message();
  }
}

// bf16 q, k, v with an f32 result (out_type), with a causal mask: the forward rounds the
// probabilities to bf16 for the value product, which finite differences cannot see through
// (a step moves them by whole bf16 values), and the rule differentiates straight through that
// rounding: the gradients are those of the f32 attention of the widened operands (checked
// against finite differences above), each rounded to bf16.
TEST(Vjp, AttentionOfBf16OperandsIsTheWidenedGradientRounded) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  auto random = [&](DType dt, Sizes s) {
    std::vector<double> v(static_cast<size_t>(numel(s)));
    for (double& x : v) x = u(rng);
    return Tensor::from_f64(dt, s, v);
  };
  const Sizes qs{1, 2, 3, 4}, ks{1, 2, 5, 4}, vs{1, 2, 5, 3};
  std::vector<Tensor> in{random(DType::bf16, qs), random(DType::bf16, ks), random(DType::bf16, vs)};
  const Tensor w = random(DType::f32, {1, 2, 3, 3});
  auto grads_of = [&](DType dt) {
    Graph g;
    GraphBuilder gb(g);
    OpBuilder o(gb);
    std::vector<ValueId> x;
    for (int i = 0; i < 3; ++i) x.push_back(g.add_input(cat("x", i), TensorType{dt, to_shape(in[i].sizes())}));
    Attrs a{{"causal", int64_t{1}}};
    if (dt == DType::bf16) a.set("out_type", DType::f32);
    const ValueId y = o.op(Op::Attention, x, a);
    const ValueId loss = o.reduce_sum(o.mul(y, o.constant(w)), {}, false);
    EXPECT_TRUE(o.ok()) << o.status().to_string();
    auto grads = gradients(g, loss, x);
    EXPECT_TRUE(grads.has_value()) << grads.status().to_string();
    g.outputs = *grads;
    auto m = Model::compile(g, {.device = "ref"});
    EXPECT_TRUE(m.has_value()) << m.status().to_string();
    std::vector<Tensor> args;
    for (const Tensor& t : in) args.push_back(dt == DType::bf16 ? t : Tensor::from_f64(dt, t.sizes(), t.to_f64()));
    auto r = (*m)->run(args);
    EXPECT_TRUE(r.has_value()) << r.status().to_string();
    return *r;
  };
  const std::vector<Tensor> narrow = grads_of(DType::bf16), wide = grads_of(DType::f32);
  ASSERT_EQ(narrow.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(narrow[i].dtype(), DType::bf16);
    const auto n = narrow[i].to_f64(), f = wide[i].to_f64();
    for (size_t e = 0; e < n.size(); ++e)
      EXPECT_EQ(n[e], bf16_to_f32(f32_to_bf16(static_cast<float>(f[e])))) << "input " << i << " element " << e;
  }
}

// Attention with int8 scores has no gradient rule (rounding to quants): a clear refusal.
TEST(Vjp, AttentionWithInt8ScoresIsRefused) {
  Graph g;
  const TensorType t{DType::f32, {1, 2, 4, 8}};
  const ValueId q = g.add_input("q", t), k = g.add_input("k", t), v = g.add_input("v", t);
  GraphBuilder gb(g);
  OpBuilder o(gb);
  const ValueId y = o.op(Op::Attention, {q, k, v}, Attrs{{"int8_scores", int64_t{1}}});
  const ValueId loss = o.reduce_sum(y, {}, false);
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  auto grads = gradients(g, loss, std::vector<ValueId>{q});
  ASSERT_FALSE(grads.has_value());
  EXPECT_NE(grads.status().message().find("int8_scores is not implemented"), std::string::npos) << grads.status().message();
}

// conv2d's weight gradient contracts the output gradient with the im2col matrix of x, which the
// forward's rule also builds (dispatch::im2col): after legalization the training graph fills it
// once, for both convolutions of a two-layer net (one of them padded, so masked).
TEST(Vjp, Conv2dWeightGradientSharesTheForwardIm2col) {
  Graph g;
  const ValueId x = g.add_input("x", TensorType{DType::f32, {2, 3, 10, 10}});
  const ValueId w1 = g.add_input("w1", TensorType{DType::f32, {4, 3, 3, 3}});
  const ValueId w2 = g.add_input("w2", TensorType{DType::f32, {5, 4, 3, 3}});
  GraphBuilder gb(g);
  OpBuilder o(gb);
  const ValueId h = o.relu(o.op(Op::Conv2d, {x, w1}, Attrs{}));
  const ValueId y = o.op(Op::Conv2d, {h, w2}, Attrs{{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  const ValueId loss = o.reduce_sum(o.mul(y, y), {}, false);
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  auto grads = gradients(g, loss, std::vector<ValueId>{w1, w2});
  ASSERT_TRUE(grads.has_value()) << grads.status().to_string();
  g.outputs = {loss, (*grads)[0], (*grads)[1]};
  auto dev = get_device("cpu");
  ASSERT_TRUE(dev.has_value());
  auto lr = legalize(g, **dev, DispatchPolicy{});
  ASSERT_TRUE(lr.has_value() && lr->report.ok());
  int gathers = 0;
  for (const Node& n : lr->graph.nodes) gathers += n.op == Op::Gather;
  EXPECT_EQ(gathers, 2) << "one im2col gather per convolution";
}

// The static check: every differentiable op of the ops table has a rule and a case above;
// ops without a gradient have no rule.
TEST(Vjp, EveryDifferentiableOpHasARuleAndATestCase) {
  std::set<Op> tested;
  for (const Case& k : cases()) tested.insert(k.op);
  int differentiable = 0;
  for (int i = 0; i < kNumOps; ++i) {
    const Op op = static_cast<Op>(i);
    if (differentiability(op) == Differentiability::differentiable) {
      ++differentiable;
      EXPECT_TRUE(has_vjp_rule(op)) << op_name(op) << " is differentiable but has no vector-Jacobian rule";
      EXPECT_TRUE(tested.count(op)) << op_name(op) << " has no finite-difference case in vjp_test.cpp";
    } else {
      EXPECT_FALSE(has_vjp_rule(op)) << op_name(op) << " is not differentiable but has a rule";
      EXPECT_FALSE(tested.count(op)) << op_name(op);
    }
  }
  EXPECT_GT(differentiable, 60);
}

}  // namespace
}  // namespace rlx::train

namespace rlx::train {
namespace {

// Graphs of any length differentiate, compile and run: no pass recurses once per node (a
// 100,000-node chain overflowed the scheduler's stack before its fusion depth was bounded).
// The loss is sum(0.5 * x) after 10,000 negations and 10,000 multiplications by one: its
// gradient is 0.5 everywhere, exactly.
TEST(Autodiff, LongChainDifferentiatesCompilesAndRuns) {
  Graph g;
  GraphBuilder gb(g);
  OpBuilder o(gb);
  const ValueId x = g.add_input("x", TensorType{DType::f32, to_shape({5})});
  ValueId v = x;
  const ValueId one = o.scalar(1.0, DType::f32);
  for (int i = 0; i < 10000; ++i) v = o.mul(o.neg(v), one);
  const ValueId loss = o.reduce_sum(o.mul(v, o.scalar(0.5, DType::f32)), {}, false);
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  auto grads = gradients(g, loss, std::vector<ValueId>{x});
  ASSERT_TRUE(grads.has_value()) << grads.status().to_string();
  g.outputs = {loss, (*grads)[0]};
  auto model = Model::compile(g, {.device = "cpu"});
  ASSERT_TRUE(model.has_value()) << model.status().to_string();
  const std::vector<double> xs{1, -2, 3, 0.25, 8};
  auto out = (*model)->run(std::vector<Tensor>{Tensor::from_f64(DType::f32, {5}, xs)});
  ASSERT_TRUE(out.has_value()) << out.status().to_string();
  EXPECT_EQ((*out)[0].get_f64(0), 0.5 * (1 - 2 + 3 + 0.25 + 8));
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ((*out)[1].get_f64(i), 0.5) << i;
}

}  // namespace
}  // namespace rlx::train
