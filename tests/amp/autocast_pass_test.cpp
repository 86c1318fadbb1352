// The autocast pass (src/passes/autocast.h) on text IR: which nodes it narrows, what stays f32,
// that constant weights fold to one converted constant, and that the CPU results equal a host
// reference that rounds the operands (and the result) to the narrow type and sums in f32.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>

#include "passes/autocast.h"
#include "passes/graph_passes.h"
#include "runtime/reference_eval.h"
#include "rlx/compile.h"
#include "rlx/device.h"
#include "rlx/dtype.h"
#include "rlx/ir_text.h"
#include "rlx/op_builder.h"
#include "rlx/verify.h"

namespace rlx {
namespace {

constexpr const char* kMlp = R"(graph @g(%x: f32[8, 32]) -> (f32[8, 16]) {
  %w = param "w" : f32[32, 16]
  %h = matmul(%x, %w)
  %a = relu(%h)
  %p = softmax(%a) {axis = 1}
  return %p
})";

Graph parse(const char* text) {
  auto g = parse_graph(text);
  EXPECT_TRUE(g.has_value()) << g.status().to_string();
  return g.has_value() ? *g : Graph{};
}

int count(const Graph& g, Op op) {
  int n = 0;
  for (const Node& x : g.nodes) n += x.op == op;
  return n;
}

Tensor random_tensor(Sizes s, uint32_t seed, double scale = 1.0) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> d(0.0, scale);
  std::vector<double> v(static_cast<size_t>(numel(s)));
  for (double& x : v) x = d(rng);
  return Tensor::from_f64(DType::f32, s, v);
}

// x rounded to dt (f16 or bf16) through the library's own conversion.
std::vector<double> rounded(const Tensor& t, DType dt) {
  Graph g;
  ValueId in = g.add_input("x", t.type());
  GraphBuilder gb(g);
  OpBuilder o(gb);
  g.outputs = {o.cast(o.cast(in, dt), DType::f32)};
  auto m = Model::compile(g, {.device = "ref"});
  EXPECT_TRUE(m.has_value());
  auto r = (*m)->run(std::vector<Tensor>{t});
  EXPECT_TRUE(r.has_value());
  return (*r)[0].to_f64();
}

TEST(Autocast, NarrowsProductsOnlyAndKeepsTypes) {
  for (DType dt : {DType::bf16, DType::f16}) {
    Graph g = parse(kMlp);
    auto n = passes::autocast(g, {.narrow = dt});
    ASSERT_TRUE(n.has_value()) << n.status().to_string();
    EXPECT_EQ(*n, 1) << "one matmul";
    // x and w round-trip (2 casts each); the result stays the f32 accumulator
    EXPECT_EQ(count(g, Op::Cast), 4);
    Graph h = parse(kMlp);
    ASSERT_TRUE(passes::autocast(h, {.narrow = dt, .narrow_output = true}).has_value());
    EXPECT_EQ(count(h, Op::Cast), 6) << "narrow_output rounds the result too";
    for (const Node& node : g.nodes) {
      if (node.op == Op::Softmax || node.op == Op::Relu || node.op == Op::MatMul) {
        EXPECT_EQ(g.type(node.outputs[0]).dtype, DType::f32) << op_name(node.op) << " stays f32 (widened form)";
      }
      if (node.op == Op::MatMul) {
        // its operands are the narrow values widened back
        for (ValueId v : node.inputs) {
          const Node& p = g.nodes[static_cast<size_t>(g.values[v].producer)];
          ASSERT_EQ(p.op, Op::Cast);
          EXPECT_EQ(g.type(p.inputs[0]).dtype, dt);
        }
      }
    }
    EXPECT_EQ(g.type(g.outputs[0]).dtype, DType::f32);
    EXPECT_TRUE(verify_graph(g).is_ok());
  }
}

// In the narrow form a matmul that is a dot (2-D right operand, or equal batch axes) becomes
// that dot with an f32 result; a broadcasting matmul takes the widened form (f32 matmul of
// rounded operands), as does gemm (conv2d: NarrowFormConvolutions below).
TEST(Autocast, NarrowComputeFormPutsTheProductInTheNarrowType) {
  Graph g = parse(kMlp);
  auto n = passes::autocast(g, {.narrow = DType::f16, .compute = passes::AutocastOptions::Compute::narrow});
  ASSERT_TRUE(n.has_value()) << n.status().to_string();
  EXPECT_EQ(count(g, Op::Cast), 2) << "the operands only";
  EXPECT_EQ(count(g, Op::MatMul), 0);
  ASSERT_EQ(count(g, Op::Dot), 1);
  for (const Node& node : g.nodes)
    if (node.op == Op::Dot) {
      EXPECT_EQ(g.type(node.outputs[0]), (TensorType{DType::f32, {Dim(8), Dim(16)}}));
      EXPECT_EQ(node.attrs.dtype("out_type", DType::u8), DType::f32);
    }
  EXPECT_TRUE(verify_graph(g).is_ok());

  constexpr const char* kBatched = R"(graph @g(%a: f32[3, 5, 8], %b: f32[3, 8, 4], %c: f32[1, 8, 4]) -> (f32[3, 5, 4], f32[3, 5, 4]) {
  %same = matmul(%a, %b)
  %bcast = matmul(%a, %c)
  return %same, %bcast
})";
  Graph h = parse(kBatched);
  auto m = passes::autocast(h, {.narrow = DType::bf16, .compute = passes::AutocastOptions::Compute::narrow});
  ASSERT_TRUE(m.has_value()) << m.status().to_string();
  EXPECT_EQ(*m, 2);
  ASSERT_EQ(count(h, Op::Dot), 1) << "equal batch axes: a batched dot";
  ASSERT_EQ(count(h, Op::MatMul), 1) << "the broadcast batch axis stays a matmul";
  for (const Node& node : h.nodes) {
    if (node.op == Op::Dot) {
      EXPECT_EQ(node.attrs.ints("lhs_batch"), (std::vector<int64_t>{0}));
      EXPECT_EQ(node.attrs.ints("rhs_contract"), (std::vector<int64_t>{1}));
    }
    if (node.op == Op::MatMul) {
      EXPECT_EQ(h.type(node.outputs[0]).dtype, DType::f32) << "widened form";
      EXPECT_EQ(h.type(node.inputs[0]).dtype, DType::f32);
    }
  }
  // the dot's two operand casts, the matmul's two round trips (a is rounded twice: once per
  // product, each cast pair folds or fuses in the device)
  EXPECT_EQ(count(h, Op::Cast), 2 + 4);
  EXPECT_TRUE(verify_graph(h).is_ok());
  // the dot computes what the matmul did on the rounded operands
  Graph ref = parse(kBatched);
  auto mr = Model::compile(ref, {.device = "ref"});
  auto mc = Model::compile(h, {.device = "ref"});
  ASSERT_TRUE(mr.has_value() && mc.has_value());
  Tensor a = random_tensor({3, 5, 8}, 3), b = random_tensor({3, 8, 4}, 4), c = random_tensor({1, 8, 4}, 5);
  for (Tensor* t : {&a, &b, &c})
    for (int64_t i = 0; i < t->numel(); ++i) t->data<float>()[i] = bf16_to_f32(f32_to_bf16(t->data<float>()[i]));
  auto yr = (*mr)->run(std::vector<Tensor>{a, b, c});
  auto yc = (*mc)->run(std::vector<Tensor>{a, b, c});
  ASSERT_TRUE(yr.has_value() && yc.has_value());
  const float* r = (*yr)[0].data<float>();
  const float* y = (*yc)[0].data<float>();
  for (int64_t i = 0; i < (*yr)[0].numel(); ++i) EXPECT_NEAR(y[i], r[i], 1e-5f) << i;
}

// In the narrow form a dot keeps an f32 result through its out_type (no cast after it, no
// rounding of the sums to the narrow type); on the cpu it runs on the native 16-bit GEMM with
// an f32 C and matches a host reference that rounds only the operands.
TEST(Autocast, NarrowFormDotHasAnF32Result) {
  constexpr const char* kDot = R"(graph @g(%x: f32[33, 96]) -> (f32[33, 40]) {
  %w = param "w" : f32[40, 96]
  %y = dot(%x, %w) {lhs_contract = [1], rhs_contract = [1]}
  return %y
})";
  for (DType dt : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(dtype_name(dt));
    Graph g = parse(kDot);
    g.weights["w"] = random_tensor({40, 96}, 7);
    auto n = passes::autocast(g, {.narrow = dt, .compute = passes::AutocastOptions::Compute::narrow});
    ASSERT_TRUE(n.has_value()) << n.status().to_string();
    EXPECT_EQ(count(g, Op::Cast), 2) << "the operands only: the result is not cast";
    for (const Node& node : g.nodes)
      if (node.op == Op::Dot) {
        EXPECT_EQ(g.type(node.outputs[0]).dtype, DType::f32);
        EXPECT_EQ(node.attrs.dtype("out_type", DType::u8), DType::f32);
        EXPECT_EQ(g.type(node.inputs[0]).dtype, dt);
      }
    ASSERT_TRUE(verify_graph(g).is_ok());
    // the text form keeps the attribute
    auto back = parse_graph(print_graph(g));
    ASSERT_TRUE(back.has_value()) << back.status().to_string();
    auto report = explain(g, "cpu", DispatchPolicy{});
    ASSERT_TRUE(report.has_value()) << report.status().to_string();
    bool native = false;
    for (const NodeDecision& d : report->nodes)
      if (d.op == Op::Dot) native = d.path == DispatchPath::native && d.how.find("c=f32") != std::string::npos;
    EXPECT_TRUE(native) << report->to_text();
    auto m = Model::compile(g, {.device = "cpu"});
    ASSERT_TRUE(m.has_value()) << m.status().to_string();
    Tensor x = random_tensor({33, 96}, 11);
    auto y = (*m)->run(std::vector<Tensor>{x});
    ASSERT_TRUE(y.has_value()) << y.status().to_string();
    const std::vector<double> xr = rounded(x, dt), wr = rounded(random_tensor({40, 96}, 7), dt);
    int differ_from_rounded = 0;
    for (int64_t i = 0; i < 33; ++i)
      for (int64_t j = 0; j < 40; ++j) {
        double want = 0, mag = 0;
        for (int64_t p = 0; p < 96; ++p) {
          want += xr[i * 96 + p] * wr[j * 96 + p];
          mag += std::fabs(xr[i * 96 + p] * wr[j * 96 + p]);
        }
        const double got = (*y)[0].get_f64(i * 40 + j);
        ASSERT_NEAR(got, want, 96 * 1.2e-7 * mag + 1e-6) << i << "," << j;
        const float as_narrow = dt == DType::bf16 ? bf16_to_f32(f32_to_bf16(static_cast<float>(got)))
                                                  : f16_to_f32(f32_to_f16(static_cast<float>(got)));
        differ_from_rounded += as_narrow != static_cast<float>(got);
      }
    EXPECT_GT(differ_from_rounded, 33 * 40 / 2) << "the results carry more than the narrow type's bits";
  }
  // out_type is only the f32 result of 16-bit operands
  auto bad = parse_graph(R"(graph @g(%x: f32[2, 3], %w: f32[3, 4]) -> (f64[2, 4]) {
  %y = dot(%x, %w) {lhs_contract = [1], rhs_contract = [0], out_type = f64}
  return %y
})");
  ASSERT_FALSE(bad.has_value()) << "f32 operands with out_type f64 are refused";
  EXPECT_NE(bad.status().message().find("out_type f64 is not allowed for f32 operands"), std::string::npos)
      << bad.status().to_string();
}

TEST(Autocast, LeavesNonF32ProductsAndRejectsBadOptions) {
  Graph g = parse(R"(graph @g(%x: f64[4, 4], %y: f64[4, 4]) -> (f64[4, 4]) {
  %h = matmul(%x, %y)
  return %h
})");
  auto n = passes::autocast(g, {.narrow = DType::bf16});
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(*n, 0);
  EXPECT_EQ(count(g, Op::Cast), 0);
  auto bad = passes::autocast(g, {.narrow = DType::i8});
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.status().message().find("i8"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(passes::parse_precision("fp8").has_value());
  EXPECT_EQ(*passes::parse_precision("bf16"), passes::Precision::bf16);
  EXPECT_EQ(*passes::parse_precision("fp16"), passes::Precision::f16);
}

TEST(Autocast, WeightsAreConvertedOnce) {
  Graph g = parse(kMlp);
  g.weights["w"] = random_tensor({32, 16}, 3);
  ASSERT_TRUE(passes::autocast(g, {.narrow = DType::bf16}).has_value());
  ASSERT_TRUE(passes::simplify(g, runtime::evaluate_on_reference).is_ok());
  // w was rounded once into a weight of its own: only x's round trip remains, and the f32
  // original (now unused) is gone
  EXPECT_EQ(count(g, Op::Cast), 2);
  EXPECT_EQ(count(g, Op::Param), 1);
  ASSERT_EQ(g.weights.count("w#bf16"), 1u);
  EXPECT_EQ(g.weights.count("w"), 0u);
  const std::vector<double> orig = random_tensor({32, 16}, 3).to_f64(), conv = g.weights["w#bf16"].to_f64();
  const std::vector<double> want = rounded(random_tensor({32, 16}, 3), DType::bf16);
  EXPECT_EQ(conv, want) << "the stored weight is the bf16 rounding of the original";
  EXPECT_NE(conv, orig);
  for (const Node& node : g.nodes)
    if (node.op == Op::MatMul) {
      const Node& p = g.nodes[static_cast<size_t>(g.values[node.inputs[1]].producer)];
      EXPECT_EQ(p.op, Op::Param) << "the weight operand is the converted weight";
    }
}

// matmul + gemm (with bias) + conv2d under the policy on the CPU against a host reference:
// operands rounded to the narrow type, products summed in f64, result rounded.
TEST(Autocast, CpuMatchesNarrowOperandsWithWideAccumulation) {
  for (DType dt : {DType::bf16, DType::f16}) {
    Graph g = parse(R"(graph @g(%x: f32[16, 64], %w: f32[64, 24]) -> (f32[16, 24], f32[16, 24]) {
  %h = matmul(%x, %w)
  %s = softmax(%h) {axis = 1}
  return %h, %s
})");
    ASSERT_TRUE(passes::autocast(g, {.narrow = dt, .narrow_output = true}).has_value());
    Tensor x = random_tensor({16, 64}, 11), w = random_tensor({64, 24}, 12, 0.2);
    auto m = Model::compile(g, {.device = "cpu"});
    ASSERT_TRUE(m.has_value()) << m.status().to_string();
    auto out = (*m)->run(std::vector<Tensor>{x, w});
    ASSERT_TRUE(out.has_value()) << out.status().to_string();
    const std::vector<double> xr = rounded(x, dt), wr = rounded(w, dt);
    std::vector<double> ref(16 * 24);
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 24; ++j) {
        double s = 0;
        for (int k = 0; k < 64; ++k) s += xr[i * 64 + k] * wr[k * 24 + j];
        ref[i * 24 + j] = s;
      }
    const std::vector<double> refr = rounded(Tensor::from_f64(DType::f32, {16, 24}, ref), dt);
    const std::vector<double> got = (*out)[0].to_f64();
    const double ulp = dt == DType::bf16 ? 1.0 / 128 : 1.0 / 1024;  // the narrow type's epsilon
    int exact = 0;
    double diff_from_f32 = 0;
    std::vector<double> xf = x.to_f64(), wf = w.to_f64();
    for (size_t i = 0; i < got.size(); ++i) {
      // at most one narrow ulp away (f32 vs f64 summation can flip a rounding)
      EXPECT_LE(std::fabs(got[i] - refr[i]), ulp * std::fabs(refr[i]) + 1e-6) << i;
      exact += got[i] == refr[i];
      double s = 0;
      for (int k = 0; k < 64; ++k) s += xf[(i / 24) * 64 + k] * wf[k * 24 + i % 24];
      diff_from_f32 = std::max(diff_from_f32, std::fabs(got[i] - s));
    }
    EXPECT_GE(exact, static_cast<int>(got.size()) * 9 / 10) << "most results round exactly like the reference";
    EXPECT_GT(diff_from_f32, 1e-4) << "the product did see narrow operands";
    // softmax rows still sum to 1 in f32
    const std::vector<double> sm = (*out)[1].to_f64();
    for (int i = 0; i < 16; ++i) {
      double s = 0;
      for (int j = 0; j < 24; ++j) s += sm[i * 24 + j];
      EXPECT_NEAR(s, 1.0, 1e-5);
    }
  }
}

// In the narrow form conv2d is conv2d on narrow operands with an f32 result and its bias in
// f32; with narrow_conv2d off (a device whose narrow products pay only on many rows) it takes
// the widened form. Both compute the same exact products summed in f32.
TEST(Autocast, NarrowFormConvolutions) {
  constexpr const char* kConv = R"(graph @g(%x: f32[2, 3, 8, 8], %k: f32[4, 3, 3, 3], %b: f32[4]) -> (f32[2, 4, 6, 6]) {
  %y = conv2d(%x, %k, %b)
  return %y
})";
  const std::vector<Tensor> in{random_tensor({2, 3, 8, 8}, 11), random_tensor({4, 3, 3, 3}, 12), random_tensor({4}, 13)};
  std::vector<std::vector<double>> outs;
  for (bool narrow_conv : {true, false}) {
    SCOPED_TRACE(narrow_conv ? "narrow_conv2d" : "widened conv2d");
    Graph g = parse(kConv);
    auto n = passes::autocast(g, {.narrow = DType::bf16, .compute = passes::AutocastOptions::Compute::narrow,
                                  .narrow_conv2d = narrow_conv});
    ASSERT_TRUE(n.has_value()) << n.status().to_string();
    EXPECT_EQ(*n, 1);
    ASSERT_EQ(count(g, Op::Conv2d), 1);
    for (const Node& node : g.nodes) {
      if (node.op != Op::Conv2d) continue;
      EXPECT_EQ(g.type(node.inputs[0]).dtype, narrow_conv ? DType::bf16 : DType::f32);
      EXPECT_EQ(g.type(node.inputs[1]).dtype, narrow_conv ? DType::bf16 : DType::f32);
      EXPECT_EQ(g.type(node.inputs[2]).dtype, DType::f32) << "the bias is added in f32";
      EXPECT_EQ(g.type(node.outputs[0]).dtype, DType::f32);
      EXPECT_EQ(node.attrs.dtype("out_type", DType::u8), narrow_conv ? DType::f32 : DType::u8);
    }
    EXPECT_EQ(count(g, Op::Cast), narrow_conv ? 2 : 4) << "operand casts, or round trips";
    ASSERT_TRUE(verify_graph(g).is_ok());
    auto m = Model::compile(g, {.device = "cpu"});
    ASSERT_TRUE(m.has_value()) << m.status().to_string();
    auto y = (*m)->run(in);
    ASSERT_TRUE(y.has_value()) << y.status().to_string();
    outs.push_back((*y)[0].to_f64());
  }
  double maxd = 0, maxa = 0;
  for (size_t i = 0; i < outs[0].size(); ++i) {
    maxd = std::max(maxd, std::fabs(outs[0][i] - outs[1][i]));
    maxa = std::max(maxa, std::fabs(outs[1][i]));
  }
  EXPECT_LT(maxd, 1e-5 * maxa) << "the same products, summed in f32 in another order";
}

// A device's narrow convolutions are among its fast narrow products, and RLX_AUTOCAST_FORM=narrow
// asks for them all. (On the cpu: bf16 with AVX-512 BF16 or AMX; never f16, whose tiles lose
// on a convolution's few rows per image.)
TEST(Autocast, NarrowConvolutionsAreAmongTheFastNarrowProducts) {
  DeviceInfo d;
  d.fast_narrow_products = {DType::bf16, DType::f16};
  d.fast_narrow_convolutions = {DType::bf16};
  ::unsetenv("RLX_AUTOCAST_FORM");
  EXPECT_TRUE(passes::narrow_conv2d(d, DType::bf16));
  EXPECT_FALSE(passes::narrow_conv2d(d, DType::f16));
  ::setenv("RLX_AUTOCAST_FORM", "narrow", 1);
  EXPECT_TRUE(passes::narrow_conv2d(d, DType::f16));
  ::unsetenv("RLX_AUTOCAST_FORM");
  auto cpu = get_device("cpu");
  ASSERT_TRUE(cpu.has_value()) << cpu.status().to_string();
  const DeviceInfo& info = (*cpu)->info();
  for (DType t : info.fast_narrow_convolutions) {
    EXPECT_NE(t, DType::f16);
    EXPECT_NE(std::find(info.fast_narrow_products.begin(), info.fast_narrow_products.end(), t),
              info.fast_narrow_products.end());
  }
  const bool bf16_fast = std::find(info.fast_narrow_products.begin(), info.fast_narrow_products.end(), DType::bf16) !=
                         info.fast_narrow_products.end();
  EXPECT_EQ(passes::narrow_conv2d(info, DType::bf16), bf16_fast);
}

TEST(Autocast, ConvAndGemmRunUnderThePolicy) {
  Graph g = parse(R"(graph @g(%x: f32[2, 3, 8, 8], %k: f32[4, 3, 3, 3], %b: f32[4], %a: f32[6, 10], %w: f32[10, 5], %c: f32[5]) -> (f32[2, 4, 6, 6], f32[6, 5]) {
  %y = conv2d(%x, %k, %b)
  %z = gemm(%a, %w, %c)
  return %y, %z
})");
  Graph f32 = g;
  auto n = passes::autocast(g, {.narrow = DType::bf16});
  ASSERT_TRUE(n.has_value()) << n.status().to_string();
  EXPECT_EQ(*n, 2);
  std::vector<Tensor> in{random_tensor({2, 3, 8, 8}, 1), random_tensor({4, 3, 3, 3}, 2), random_tensor({4}, 3),
                         random_tensor({6, 10}, 4), random_tensor({10, 5}, 5), random_tensor({5}, 6)};
  auto ma = Model::compile(f32, {.device = "cpu"});
  auto mb = Model::compile(g, {.device = "cpu"});
  ASSERT_TRUE(ma.has_value() && mb.has_value());
  auto a = (*ma)->run(in);
  auto b = (*mb)->run(in);
  ASSERT_TRUE(a.has_value() && b.has_value()) << (b.has_value() ? "" : b.status().to_string());
  for (int o = 0; o < 2; ++o) {
    const auto va = (*a)[o].to_f64(), vb = (*b)[o].to_f64();
    double maxd = 0, maxa = 0;
    for (size_t i = 0; i < va.size(); ++i) {
      maxd = std::max(maxd, std::fabs(va[i] - vb[i]));
      maxa = std::max(maxa, std::fabs(va[i]));
    }
    EXPECT_LT(maxd, 0.03 * maxa) << "output " << o << ": bf16 operands keep ~2-3 significant digits";
    EXPECT_GT(maxd, 0.0) << "output " << o << " was computed from narrow operands";
  }
}

// Attention under the policy: q, k and v rounded (both products see narrow operands), the
// boolean mask untouched, the softmax inside the fused op in f32. The cpu result equals the f32
// attention run on pre-rounded q, k and v, and differs from the f32 one. In the narrow form it
// is attention on narrow q, k and v with out_type f32, whose value product also takes the
// probabilities rounded to the narrow type (the cpu's bf16 kernel pairs the head dimension and
// the keys): the reference interpreter's result, and within one narrow step of each
// probability of the widened form's; a float mask keeps it f32.
TEST(Autocast, AttentionRoundsQKVAndKeepsItsSoftmaxF32) {
  constexpr const char* kAttn = R"(graph @g(%q: f32[2, 4, 6, 8], %k: f32[2, 2, 6, 8], %v: f32[2, 2, 6, 8], %mask: bool[6, 6]) -> (f32[2, 4, 6, 8]) {
  %o = attention(%q, %k, %v, %mask) {causal = 1, scale = 0.35}
  return %o
})";
  for (DType dt : {DType::bf16, DType::f16}) {
    Graph g = parse(kAttn);
    const Graph f32 = g;
    auto n = passes::autocast(g, {.narrow = dt});
    ASSERT_TRUE(n.has_value()) << n.status().to_string();
    EXPECT_EQ(*n, 1);
    EXPECT_EQ(count(g, Op::Cast), 6) << "q, k and v round-trip; the mask is not cast";
    EXPECT_TRUE(verify_graph(g).is_ok());
    Sizes qs{2, 4, 6, 8}, ks{2, 2, 6, 8};
    std::vector<Tensor> in{random_tensor(qs, 11), random_tensor(ks, 12), random_tensor(ks, 13), Tensor::zeros(DType::boolean, {6, 6})};
    for (int64_t i = 0; i < 36; ++i) in[3].data<uint8_t>()[i] = (i * 7) % 5 != 0;  // some keys masked out
    for (int64_t i = 0; i < 6; ++i) in[3].data<uint8_t>()[i * 6] = 1;               // every query sees key 0
    std::vector<Tensor> pre = in;
    for (int i = 0; i < 3; ++i) pre[i] = Tensor::from_f64(DType::f32, in[i].sizes(), rounded(in[i], dt));
    auto mg = Model::compile(g, {.device = "cpu"});
    auto mf = Model::compile(f32, {.device = "cpu"});
    ASSERT_TRUE(mg.has_value() && mf.has_value());
    auto a = (*mg)->run(in), b = (*mf)->run(pre), c = (*mf)->run(in);
    ASSERT_TRUE(a.has_value() && b.has_value() && c.has_value());
    const auto va = (*a)[0].to_f64(), vb = (*b)[0].to_f64(), vc = (*c)[0].to_f64();
    double from_f32 = 0;
    for (size_t i = 0; i < va.size(); ++i) {
      EXPECT_EQ(va[i], vb[i]) << i << ": the attention of the rounded q, k, v";
      from_f32 = std::max(from_f32, std::fabs(va[i] - vc[i]));
    }
    EXPECT_GT(from_f32, 0.0) << "the products saw narrow operands";
    Graph h = parse(kAttn);
    auto m = passes::autocast(h, {.narrow = dt, .compute = passes::AutocastOptions::Compute::narrow});
    ASSERT_TRUE(m.has_value());
    EXPECT_EQ(*m, 1);
    EXPECT_EQ(count(h, Op::Cast), 3) << "q, k and v; the mask is not cast, the result stays f32";
    for (const Node& node : h.nodes)
      if (node.op == Op::Attention) {
        EXPECT_EQ(h.type(node.inputs[0]).dtype, dt);
        EXPECT_EQ(h.type(node.inputs[3]).dtype, DType::boolean);
        EXPECT_EQ(node.attrs.dtype("out_type", DType::u8), DType::f32);
      }
    ASSERT_TRUE(verify_graph(h).is_ok());
    auto mh = Model::compile(h, {.device = "cpu"});
    ASSERT_TRUE(mh.has_value()) << mh.status().to_string();
    auto yh = (*mh)->run(in);
    ASSERT_TRUE(yh.has_value()) << yh.status().to_string();
    const auto vh = (*yh)[0].to_f64();
    auto rh = Model::compile(h, {.device = "ref"});
    ASSERT_TRUE(rh.has_value()) << rh.status().to_string();
    auto yr = (*rh)->run(in);
    ASSERT_TRUE(yr.has_value()) << yr.status().to_string();
    const auto vr = (*yr)[0].to_f64();
    double vmax = 0;
    for (double x : rounded(in[2], dt)) vmax = std::max(vmax, std::fabs(x));
    const double step = dt == DType::bf16 ? 0x1p-8 : 0x1p-11;  // of a probability rounded to dt
    double from_ref = 0, moved = 0;
    for (size_t i = 0; i < vh.size(); ++i) {
      // a probability may round to the neighbouring value where the cpu's exp and ref's differ
      // in the last bits; on average the two agree to f32 rounding
      EXPECT_NEAR(vh[i], vr[i], step * vmax) << i;
      EXPECT_NEAR(vh[i], vb[i], step * vmax) << i;
      from_ref += std::fabs(vh[i] - vr[i]);
      moved = std::max(moved, std::fabs(vr[i] - vb[i]));
    }
    EXPECT_LE(from_ref / static_cast<double>(vh.size()), 1e-5);
    EXPECT_GT(moved, 1e-5) << "the narrow form's probabilities are rounded";
    constexpr const char* kFloatMask = R"(graph @g(%q: f32[1, 2, 4, 8], %k: f32[1, 2, 4, 8], %v: f32[1, 2, 4, 8], %mask: f32[4, 4]) -> (f32[1, 2, 4, 8]) {
  %o = attention(%q, %k, %v, %mask)
  return %o
})";
    Graph fm = parse(kFloatMask);
    auto mf2 = passes::autocast(fm, {.narrow = dt, .compute = passes::AutocastOptions::Compute::narrow});
    ASSERT_TRUE(mf2.has_value());
    EXPECT_EQ(*mf2, 0) << "a float mask would have to become narrow: attention stays f32";
    // int8 scores (an int8 model's attention): q and k are quantized, not rounded to 16 bits
    constexpr const char* kInt8 = R"(graph @g(%q: f32[1, 2, 4, 8], %k: f32[1, 2, 4, 8], %v: f32[1, 2, 4, 8]) -> (f32[1, 2, 4, 8]) {
  %o = attention(%q, %k, %v) {int8_scores = 1}
  return %o
})";
    for (auto compute : {passes::AutocastOptions::Compute::widened, passes::AutocastOptions::Compute::narrow}) {
      Graph i8 = parse(kInt8);
      auto mi = passes::autocast(i8, {.narrow = dt, .compute = compute});
      ASSERT_TRUE(mi.has_value());
      EXPECT_EQ(*mi, 0) << "attention with int8 scores stays f32";
    }
  }
}

}  // namespace
}  // namespace rlx
