// Activations quantized once for the int8_matmuls that read them (cpu_executable.h
// set_int8_quant_reuse): by the first of several readers of the same x (a layer's query, key
// and value projections), or by the int8_matmul that produced x, after its fused epilogue (the
// FFN's GELU). The programs must give the same bits as quantizing per int8_matmul, on every
// kernel family this CPU runs, and the reference's values.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>

#include "backends/cpu/cpu_executable.h"
#include "backends/cpu/kernels/qgemm.h"
#include "rlx/compile.h"
#include "rlx/op_builder.h"

namespace rlx {
namespace {

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
  if (cpu::set_qgemm_amx(true) && cpu::set_qgemm_isa(cpu::GemmIsa::avx512)) {
    all();
    cpu::set_qgemm_amx(false);
  } else {
    std::printf("AMX-INT8 tiles not usable on this CPU: their run is skipped\n");
  }
  for (cpu::GemmIsa isa : {cpu::GemmIsa::avx512, cpu::GemmIsa::avx2, cpu::GemmIsa::portable}) {
    if (!cpu::set_qgemm_isa(isa)) {
      std::printf("kernel family %d not runnable on this CPU: skipped\n", static_cast<int>(isa));
      continue;
    }
    all();
  }
  cpu::set_qgemm_amx(true);
  cpu::set_qgemm_isa(cpu::GemmIsa::avx512) || cpu::set_qgemm_isa(cpu::GemmIsa::avx2);
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
