// The int8 linear layer (op int8_matmul): the CPU's native kernel (kernels/qgemm.h i8gemm) on
// every kernel family this CPU runs, against the reference device running the op's primitive
// decomposition (src/dispatch/rules/quant_rules.cpp), on fresh random inputs; and the
// quantization error against the f32 product it approximates.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <functional>
#include <cstring>
#include <random>

#include "backends/cpu/cpu_executable.h"
#include "backends/cpu/kernels/qgemm.h"
#include "rlx/compile.h"
#include "rlx/op_builder.h"

namespace rlx {
namespace {

struct Case {
  int64_t m, n, k;
  bool bias;
  bool per_row_scale;
  double x_scale;  // 0: per token
  bool epilogue = false;  // y feeds relu(y + r), which the cpu fuses into the kernel
  // x / s at or within a few ulps of half-integers (the kernels divide only there; elsewhere
  // they multiply by 1 / s, which must round to the same quants)
  bool ties = false;
};

Graph int8_graph(const Case& c, std::mt19937& rng, Tensor& w, Tensor& ws, Tensor& b) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{DType::f32, to_shape({c.m, c.k})});
  GraphBuilder gb(g);
  OpBuilder o(gb);
  std::uniform_int_distribution<int> wi(-128, 127);
  std::uniform_real_distribution<float> su(0.001f, 0.02f), bu(-1.f, 1.f);
  w = Tensor::zeros(DType::i8, {c.n, c.k});
  for (int64_t i = 0; i < w.numel(); ++i) w.data<int8_t>()[i] = static_cast<int8_t>(wi(rng));
  ws = c.per_row_scale ? Tensor::zeros(DType::f32, {c.n}) : Tensor::zeros(DType::f32, {});
  for (int64_t i = 0; i < ws.numel(); ++i) ws.data<float>()[i] = su(rng);
  std::vector<ValueId> in{x, o.param("w", w.type()), o.param("ws", ws.type())};
  g.weights["w"] = w;
  g.weights["ws"] = ws;
  if (c.bias) {
    b = Tensor::zeros(DType::f32, {c.n});
    for (int64_t i = 0; i < c.n; ++i) b.data<float>()[i] = bu(rng);
    in.push_back(o.param("b", b.type()));
    g.weights["b"] = b;
  }
  Attrs at;
  if (c.x_scale > 0) at = Attrs{{"x_scale", c.x_scale}};
  ValueId y = o.op(Op::Int8MatMul, in, at);
  if (c.epilogue) y = o.relu(o.add(y, g.add_input("r", TensorType{DType::f32, to_shape({c.m, c.n})})));
  EXPECT_TRUE(o.ok()) << o.status().to_string();
  g.outputs = {y};
  return g;
}

void check_case(const Case& c, std::mt19937& rng) {
  SCOPED_TRACE(cat("m=", c.m, " n=", c.n, " k=", c.k, " bias=", c.bias, " per_row=", c.per_row_scale,
                   " x_scale=", c.x_scale, " epilogue=", c.epilogue, " kernel=", cpu::qgemm_kernel_name(),
                   cpu::qgemm_amx() ? " (amx)" : ""));
  Tensor w, ws, b;
  Graph g = int8_graph(c, rng, w, ws, b);
  auto report = explain(g, "cpu", DispatchPolicy{});
  ASSERT_TRUE(report.has_value()) << report.status().to_string();
  ASSERT_EQ(report->count(DispatchPath::native), 1) << "int8_matmul runs natively on the cpu";
  auto cpu = Model::compile(g, {.device = "cpu"});
  ASSERT_TRUE(cpu.has_value()) << cpu.status().to_string();
  auto ref = Model::compile(g, {.device = "ref"});
  ASSERT_TRUE(ref.has_value()) << ref.status().to_string();
  Tensor x = Tensor::zeros(DType::f32, {c.m, c.k});
  std::uniform_real_distribution<float> xu(-2.f, 2.f);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = xu(rng);
  if (c.m > 2) std::memset(x.data<float>() + c.k, 0, c.k * 4);  // an all-zero row (scale floor)
  if (c.ties) {  // row i: amax a_i, so s = a_i / 127; then (j + 1/2) * s nudged by -3..3 ulps
    for (int64_t i = 0; i < c.m; ++i) {
      float* row = x.data<float>() + i * c.k;
      const float amax = c.x_scale > 0 ? static_cast<float>(c.x_scale) * 127.f : 0.5f + 0.37f * static_cast<float>(i);
      const float s = c.x_scale > 0 ? static_cast<float>(c.x_scale) : amax / 127.f;
      row[0] = amax;
      for (int64_t p = 1; p < c.k; ++p) {
        float v = (static_cast<float>(p % 254) - 127.f + 0.5f) * s;
        for (int64_t u = 0; u < (p / 254) % 7; ++u) v = std::nextafter(v, (p / 254) % 2 ? INFINITY : -INFINITY);
        row[p] = v;
      }
    }
  }
  std::vector<Tensor> in{x};
  if (c.epilogue) {
    Tensor r = Tensor::zeros(DType::f32, {c.m, c.n});
    for (int64_t i = 0; i < r.numel(); ++i) r.data<float>()[i] = xu(rng);
    in.push_back(r);
  }
  auto variant = (*cpu)->prepare({});
  ASSERT_TRUE(variant.has_value()) << variant.status().to_string();
  const std::string& listing = (*variant)->executable->stats().kernel_listing;
  if (c.epilogue) EXPECT_NE(listing.find(" epilogue "), std::string::npos) << "add + relu fused\n" << listing;
  // the panel kernel runs where the family has one (AVX-512 VNNI), on the AMX tiles while they
  // are on: weights are fixed here
  __builtin_cpu_init();
  const bool vnni = std::string(cpu::qgemm_kernel_name()) == "avx512" && __builtin_cpu_supports("avx512vnni");
  const bool amx = cpu::qgemm_amx();
  EXPECT_EQ(listing.find("vpdpbusd 12x32 panels") != std::string::npos, vnni && !amx) << listing;
  EXPECT_EQ(listing.find("amx-int8 32x32 tiles") != std::string::npos, vnni && amx) << listing;
  auto a = (*cpu)->run(in);
  ASSERT_TRUE(a.has_value()) << a.status().to_string();
  auto r = (*ref)->run(in);
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  // same integer sums; only the final f32 multiplications may round differently
  for (int64_t i = 0; i < c.m * c.n; ++i) {
    const double want = (*r)[0].get_f64(i), got = (*a)[0].data<float>()[i];
    // (with the epilogue, y + r may cancel: the bound is y's, |y| being about 10 here)
    ASSERT_NEAR(got, want, 4e-6 * (std::fabs(want) + (c.epilogue ? 16 : 0)) + 1e-6) << "element " << i;
  }
  // and the int8 result approximates the f32 product x W^T * w_scale within the rounding of x
  if (c.x_scale == 0 && !c.epilogue) {
    for (int64_t i = 0; i < c.m; ++i) {
      double amax = 0;
      for (int64_t p = 0; p < c.k; ++p) amax = std::max(amax, std::fabs(static_cast<double>(x.data<float>()[i * c.k + p])));
      for (int64_t j = 0; j < c.n; ++j) {
        double exact = c.bias ? b.data<float>()[j] : 0.0, bound = 0;
        const double sw = ws.data<float>()[c.per_row_scale ? j : 0];
        for (int64_t p = 0; p < c.k; ++p) {
          const double wv = w.data<int8_t>()[j * c.k + p] * sw;
          exact += x.data<float>()[i * c.k + p] * wv;
          bound += std::fabs(wv) * amax / 254.0;
        }
        ASSERT_NEAR((*a)[0].data<float>()[i * c.n + j], exact, 1.0001 * bound + 1e-5) << i << "," << j;
      }
    }
  }
}

// Runs `body` on the AMX tiles first, where the CPU has them, then on every kernel family this
// CPU runs (the VNNI panels, AVX2, portable); says which it skipped and why.
void for_each_int8_family(const std::function<void()>& body) {
  if (cpu::set_qgemm_amx(true) && cpu::set_qgemm_isa(cpu::GemmIsa::avx512)) {
    body();
    cpu::set_qgemm_amx(false);
  } else {
    std::printf("AMX-INT8 tiles not usable on this CPU (cpuid amx-tile and amx-int8, and the tile state from "
                "Linux): their run is skipped\n");
  }
  for (cpu::GemmIsa isa : {cpu::GemmIsa::avx512, cpu::GemmIsa::avx2, cpu::GemmIsa::portable}) {
    if (!cpu::set_qgemm_isa(isa)) {
      std::printf("kernel family %d not runnable on this CPU: skipped\n", static_cast<int>(isa));
      continue;
    }
    body();
  }
  cpu::set_qgemm_amx(true);
  cpu::set_qgemm_isa(cpu::GemmIsa::avx512) || cpu::set_qgemm_isa(cpu::GemmIsa::avx2);
}

TEST(Int8MatMul, NativeMatchesReferenceOnEveryKernelFamily) {
  std::mt19937 rng(std::random_device{}());
  const std::vector<Case> cases = {
      {1, 9, 64, true, true, 0},      {3, 7, 32, false, true, 0},  {4, 16, 96, true, true, 0},
      {5, 13, 100, true, false, 0},   {17, 33, 384, true, true, 0}, {2, 5, 7, false, true, 0},
      {9, 12, 64, true, true, 0.02},  {64, 40, 160, true, true, 0},
      // the panel kernel's edges: a 96-row chunk and a tail of 4 (12-row tiles and a 4-row
      // one), a last panel of 6 channels, k % 4 == 1 and k < 4, one scale for all channels
      {100, 70, 1001, true, true, 0}, {13, 33, 3, true, false, 0}, {200, 64, 96, false, true, 0.05},
      {37, 48, 130, true, true, 0, true}, {1, 40, 64, false, false, 0, true},
      // rows enough for two chunks per thread (up to 16 threads): units of whole rows across
      // every panel, the epilogue over whole rows, a last chunk of 28 rows
      {3100, 70, 40, true, true, 0, true},
      // the AMX tiles' edges: 32-row blocks with a last of 16 or fewer rows and of 17 to 31,
      // k off the 64-value steps, a chunk of 96 rows then one of 33
      {129, 40, 200, true, true, 0, true}, {48, 33, 64, false, true, 0}, {17, 64, 65, true, false, 0.03},
      // quotients at and next to half-integers, per token and with a fixed scale
      {40, 24, 1800, true, true, 0, false, true}, {8, 16, 1800, false, true, 0.0123, false, true},
  };
  for_each_int8_family([&] {
    for (const Case& c : cases) check_case(c, rng);
  });
}

TEST(Int8MatMul, TypeErrorsNameTheProblem) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{DType::f32, to_shape({2, 8})});
  GraphBuilder gb(g);
  OpBuilder o(gb);
  ValueId w = o.param("w", TensorType{DType::f32, to_shape({4, 8})});
  ValueId s = o.param("s", TensorType{DType::f32, to_shape({4})});
  o.op(Op::Int8MatMul, {x, w, s});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("w must be i8"), std::string::npos) << o.status().to_string();
  Graph g2;
  ValueId x2 = g2.add_input("x", TensorType{DType::f32, to_shape({2, 8})});
  GraphBuilder gb2(g2);
  OpBuilder o2(gb2);
  ValueId w2 = o2.param("w", TensorType{DType::i8, to_shape({4, 8})});
  ValueId s2 = o2.param("s", TensorType{DType::f32, to_shape({3})});
  o2.op(Op::Int8MatMul, {x2, w2, s2});
  ASSERT_FALSE(o2.ok());
  EXPECT_NE(o2.status().message().find("w_scale must be [N]"), std::string::npos) << o2.status().to_string();
}

TEST(Int8MatMul, KernelRejectsBadArguments) {
  cpu::I8GemmArgs a;
  a.m = 1;
  a.n = 1;
  a.k = 4;
  EXPECT_EQ(cpu::i8gemm(a).code(), ErrorCode::invalid_argument);  // null pointers
  // k past the exact int32 range is refused before anything is read
  float x = 0.f, y = 0.f, s = 1.f;
  int8_t w = 0;
  a.k = cpu::kI8GemmMaxK + 1;
  a.x = &x;
  a.w = &w;
  a.w_scale = &s;
  a.y = &y;
  a.ldx = a.ldw = a.k;
  a.ldy = 1;
  Status st = cpu::i8gemm(a);
  EXPECT_EQ(st.code(), ErrorCode::invalid_argument);
  EXPECT_NE(st.message().find("65537"), std::string::npos) << st.to_string();
  EXPECT_FALSE(cpu::pack_i8(&w, a.k, 1, a.k).valid());
}

// Activations quantized once for the int8_matmuls that read them (cpu_executable.h
// set_int8_quant_reuse): by the first of several readers of the same x (a layer's query, key
// and value projections), or by the int8_matmul that produced x, after its fused epilogue (the
// FFN's GELU). The programs must give the same bits as quantizing per int8_matmul, on every
// kernel family this CPU runs, and the reference's values.

// x [m, k] -> three int8_matmuls on x (q, k, v); q -> gelu (the fused epilogue) -> int8_matmul
// (per token, or with a fixed x_scale); outputs k, v and that product plus x (the residual
// reads x after its readers).
Graph reuse_graph(int64_t m, int64_t k, int64_t n, double down_x_scale, std::mt19937& rng) {
  Graph g;
  ValueId x = g.add_input("x", TensorType{DType::f32, to_shape({m, k})});
  GraphBuilder gb(g);
  OpBuilder o(gb);
  std::uniform_int_distribution<int> wi(-128, 127);
  std::uniform_real_distribution<float> su(0.001f, 0.02f), bu(-1.f, 1.f);
  auto linear = [&](ValueId in, const std::string& name, int64_t rows, int64_t cols, double x_scale) {
    Tensor w = Tensor::zeros(DType::i8, {rows, cols}), s = Tensor::zeros(DType::f32, {rows}),
           b = Tensor::zeros(DType::f32, {rows});
    for (int64_t i = 0; i < w.numel(); ++i) w.data<int8_t>()[i] = static_cast<int8_t>(wi(rng));
    for (int64_t i = 0; i < rows; ++i) {
      s.data<float>()[i] = su(rng);
      b.data<float>()[i] = bu(rng);
    }
    g.weights[name + ".w"] = w;
    g.weights[name + ".s"] = s;
    g.weights[name + ".b"] = b;
    Attrs at;
    if (x_scale > 0) at = Attrs{{"x_scale", x_scale}};
    return o.op(Op::Int8MatMul,
                {in, o.param(name + ".w", w.type()), o.param(name + ".s", s.type()), o.param(name + ".b", b.type())}, at);
  };
  ValueId q = linear(x, "q", n, k, 0);
  ValueId kk = linear(x, "k", n, k, 0);
  ValueId v = linear(x, "v", n, k, 0);
  ValueId down = linear(o.gelu(q, "none"), "down", k, n, down_x_scale);
  EXPECT_TRUE(o.ok()) << o.status().to_string();
  g.outputs = {kk, v, o.add(down, x)};
  return g;
}

struct Run {
  std::vector<Tensor> out;
  std::string listing;
};

Run run_cpu(const Graph& g, const Tensor& x, bool reuse) {
  const bool before = cpu::set_int8_quant_reuse(reuse);
  Run r;
  auto m = Model::compile(g, {.device = "cpu"});
  EXPECT_TRUE(m.has_value()) << m.status().to_string();
  if (m.has_value()) {
    auto var = (*m)->prepare({});
    EXPECT_TRUE(var.has_value()) << var.status().to_string();
    if (var.has_value()) {
      r.listing = (*var)->executable->stats().kernel_listing;
      auto o = (*var)->executable->run(std::vector<Tensor>{x});
      EXPECT_TRUE(o.has_value()) << o.status().to_string();
      if (o.has_value()) r.out = *o;
    }
  }
  cpu::set_int8_quant_reuse(before);
  return r;
}

void check(int64_t m, int64_t k, int64_t n, double down_x_scale, std::mt19937& rng) {
  SCOPED_TRACE(cat("m=", m, " k=", k, " n=", n, " down x_scale=", down_x_scale, " kernel=", cpu::qgemm_kernel_name(),
                   cpu::qgemm_amx() ? " (amx)" : ""));
  Graph g = reuse_graph(m, k, n, down_x_scale, rng);
  Tensor x = Tensor::zeros(DType::f32, {m, k});
  std::uniform_real_distribution<float> xu(-2.f, 2.f);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = xu(rng);
  const Run once = run_cpu(g, x, true), each = run_cpu(g, x, false);
  ASSERT_EQ(once.out.size(), 3u);
  ASSERT_EQ(each.out.size(), 3u);
  // the plan: k and v read q's quants of x; the GELU's product quantizes its output for the next
  int shared = 0;
  for (size_t at = once.listing.find("(x quantized before)"); at != std::string::npos;
       at = once.listing.find("(x quantized before)", at + 1))
    ++shared;
  EXPECT_EQ(shared, 3) << once.listing;
  EXPECT_NE(once.listing.find("(quantizes its output for"), std::string::npos) << once.listing;
  EXPECT_EQ(each.listing.find("quantiz"), std::string::npos) << each.listing;
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(std::memcmp(once.out[i].bytes(), each.out[i].bytes(), once.out[i].nbytes()), 0) << "output " << i;
  // and the reference's values (its decomposition quantizes the same way; the final f32
  // multiplications may round differently, and the GELU's erf differs by an ulp or two)
  auto ref = Model::compile(g, {.device = "ref"});
  ASSERT_TRUE(ref.has_value()) << ref.status().to_string();
  auto r = (*ref)->run(std::vector<Tensor>{x});
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  for (size_t i = 0; i < 2; ++i)
    for (int64_t e = 0; e < (*r)[i].numel(); ++e) {
      const double want = (*r)[i].get_f64(e);
      ASSERT_NEAR(once.out[i].data<float>()[e], want, 4e-6 * std::fabs(want) + 1e-6) << "output " << i << " element " << e;
    }
}

TEST(Int8MatMul, ActivationsQuantizedOnceGiveTheSameBits) {
  std::mt19937 rng(std::random_device{}());
  // rows for the panel kernel's (panel, chunk) units, for whole-row chunks (y quantized as each
  // chunk is final), and a few rows; x per token and, for the second product, a fixed scale
  const auto cases = {std::array<int64_t, 3>{200, 64, 96}, std::array<int64_t, 3>{900, 48, 160},
                      std::array<int64_t, 3>{5, 40, 72}};
  auto all = [&] {
    for (const auto& c : cases)
      for (double xs : {0.0, 0.01}) check(c[0], c[1], c[2], xs, rng);
  };
  for_each_int8_family(all);
}

// The kernel checks what it is handed: quants of another shape or scale are refused.
TEST(Int8MatMul, KernelRefusesQuantsOfAnotherX) {
  std::vector<float> x(4 * 64, 0.5f), y(4 * 8), s(8, 0.01f);
  std::vector<int8_t> w(8 * 64, 1);
  cpu::I8Quants q;
  cpu::I8GemmArgs a;
  a.m = 4;
  a.n = 8;
  a.k = 64;
  a.x = x.data();
  a.ldx = 64;
  a.w = w.data();
  a.ldw = 64;
  a.w_scale = s.data();
  a.y = y.data();
  a.ldy = 8;
  a.x_quants = &q;
  ASSERT_TRUE(cpu::i8gemm(a).is_ok());  // quantizes x into q
  EXPECT_EQ(q.rows(), 4);
  EXPECT_EQ(q.k(), 64);
  a.x_quants_ready = true;
  EXPECT_TRUE(cpu::i8gemm(a).is_ok());
  a.x_scale = 0.02f;
  EXPECT_EQ(cpu::i8gemm(a).code(), ErrorCode::invalid_argument);
  a.x_scale = 0.f;
  a.m = 3;
  EXPECT_EQ(cpu::i8gemm(a).code(), ErrorCode::invalid_argument);
}

}  // namespace
}  // namespace rlx
