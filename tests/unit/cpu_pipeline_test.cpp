// End-to-end checks of the CPU pipeline (legalize, schedule, render C, compile, run) against
// the reference device on fresh random inputs.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <functional>
#include <random>

#include "codegen/c_renderer.h"
#include "rlx/compile.h"
#include "rlx/dtype.h"
#include "rlx/op_builder.h"

namespace rlx {
namespace {

Tensor random_tensor(DType dt, Sizes s, std::mt19937& rng, double lo = -2, double hi = 2) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(static_cast<size_t>(numel(s)));
  for (double& x : v) x = is_float(dt) ? u(rng) : std::floor(u(rng) * 10);
  return Tensor::from_f64(dt, std::move(s), v);
}

// Builds a graph with `build`, runs it on cpu and ref, compares.
void check(const std::string& name, std::vector<TensorType> inputs,
           const std::function<std::vector<ValueId>(OpBuilder&, std::vector<ValueId>)>& build, double tol = 1e-5) {
  SCOPED_TRACE(name);
  Graph g;
  std::vector<ValueId> ins;
  for (size_t i = 0; i < inputs.size(); ++i) ins.push_back(g.add_input(cat("x", i), inputs[i]));
  GraphBuilder gb(g);
  OpBuilder o(gb);
  g.outputs = build(o, ins);
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  std::random_device rd;
  unsigned seed = rd();
  std::mt19937 rng(seed);
  std::vector<Tensor> xs;
  for (const TensorType& t : inputs) xs.push_back(random_tensor(t.dtype, *static_sizes(t.shape), rng));
  auto cpu = Model::compile(g, {.device = "cpu"});
  ASSERT_TRUE(cpu.has_value()) << cpu.status().to_string();
  auto ref = Model::compile(g, {.device = "ref"});
  ASSERT_TRUE(ref.has_value()) << ref.status().to_string();
  auto a = (*cpu)->run(xs);
  ASSERT_TRUE(a.has_value()) << a.status().to_string();
  auto b = (*ref)->run(xs);
  ASSERT_TRUE(b.has_value()) << b.status().to_string();
  ASSERT_EQ(a->size(), b->size());
  for (size_t i = 0; i < a->size(); ++i) {
    const Tensor& x = (*a)[i];
    const Tensor& y = (*b)[i];
    ASSERT_EQ(x.sizes(), y.sizes());
    for (int64_t j = 0; j < x.numel(); ++j) {
      double p = x.get_f64(j), q = y.get_f64(j);
      if (std::isnan(q)) {
        EXPECT_TRUE(std::isnan(p)) << "output " << i << " element " << j << " seed " << seed;
        continue;
      }
      ASSERT_NEAR(p, q, tol * (1 + std::fabs(q))) << "output " << i << " element " << j << " seed " << seed;
    }
  }
}

TensorType f32(Sizes s) { return TensorType{DType::f32, to_shape(s)}; }

TEST(CpuPipeline, ElementwiseChain) {
  check("chain", {f32({64, 300}), f32({300})}, [](OpBuilder& o, std::vector<ValueId> x) {
    return std::vector<ValueId>{o.gelu(o.add(o.mul(x[0], x[0]), x[1]), "tanh")};
  });
}

TEST(CpuPipeline, Softmax) {
  check("softmax last", {f32({8, 12, 37})}, [](OpBuilder& o, std::vector<ValueId> x) {
    return std::vector<ValueId>{o.softmax(x[0], -1)};
  });
  check("softmax middle", {f32({4, 9, 5})}, [](OpBuilder& o, std::vector<ValueId> x) {
    return std::vector<ValueId>{o.softmax(x[0], 1)};
  });
}

TEST(CpuPipeline, LayerNormAndMatmul) {
  check("ln", {f32({2, 7, 64}), f32({64}), f32({64})}, [](OpBuilder& o, std::vector<ValueId> x) {
    return std::vector<ValueId>{o.layer_norm(x[0], x[1], x[2], -1, 1e-5)};
  });
  check("matmul", {f32({3, 5, 64}), f32({64, 48}), f32({48})}, [](OpBuilder& o, std::vector<ValueId> x) {
    return std::vector<ValueId>{o.gelu(o.add(o.matmul(x[0], x[1]), x[2]))};
  }, 1e-4);
}

TEST(CpuPipeline, Movement) {
  check("transpose+concat", {f32({4, 6, 5}), f32({4, 5, 3})}, [](OpBuilder& o, std::vector<ValueId> x) {
    return std::vector<ValueId>{o.concat({o.transpose(x[0], {0, 2, 1}), x[1]}, 2)};
  });
  check("pad+slice", {f32({5, 7})}, [](OpBuilder& o, std::vector<ValueId> x) {
    return std::vector<ValueId>{o.slice(o.pad(x[0], {1, 2, 3, 0}, 0.5), {1, -1}, {6, 0}, {0, 1}, {2, -2})};
  });
  check("reduce", {f32({6, 7, 8})}, [](OpBuilder& o, std::vector<ValueId> x) {
    return std::vector<ValueId>{o.reduce_sum(x[0], {0, 2}, false), o.reduce_max(x[0], {1}, true),
                                o.argmax(x[0], 2, false)};
  });
}

// c64 through fused generated kernels: complex values built from f32 parts, a complex constant,
// conj/mul/div, a broadcast, a matmul (generated loops: the native GEMM is f32 only), a complex
// reduction and f32 parts of the results, on cpu against ref, comparing both parts. Inputs are
// fresh random numbers with both parts nonzero.
TEST(CpuPipeline, ComplexChainMatchesReference) {
  std::random_device rd;
  const unsigned seed = rd();
  std::mt19937 rng(seed);
  auto c64_input = [&](Sizes s) {
    Tensor t = Tensor::zeros(DType::c64, s);
    std::uniform_real_distribution<double> mag(0.25, 2), coin(0, 1);
    for (int64_t i = 0; i < t.numel(); ++i) {
      t.set_f64(i, (coin(rng) < 0.5 ? -1 : 1) * mag(rng));
      t.set_imag(i, (coin(rng) < 0.5 ? -1 : 1) * mag(rng));
    }
    return t;
  };
  Graph g;
  const ValueId re = g.add_input("re", TensorType{DType::f32, {5, 7}});
  const ValueId im = g.add_input("im", TensorType{DType::f32, {7}});
  const ValueId z = g.add_input("z", TensorType{DType::c64, {5, 7}});
  const ValueId w = g.add_input("w", TensorType{DType::c64, {7, 3}});
  const ValueId wf = g.add_input("wf", TensorType{DType::f32, {7, 4}});
  GraphBuilder gb(g);
  OpBuilder o(gb);
  Tensor k = Tensor::zeros(DType::c64, {});
  k.set_f64(0, 0.75), k.set_imag(0, -1.25);
  const ValueId c = o.complex(re, im);                          // [5, 7], im broadcast
  const ValueId q = o.div(o.mul(o.conj(c), o.constant(k)), z);  // nonzero divisors
  const ValueId m = o.matmul(q, w);                             // [5, 3]
  const ValueId s = o.reduce_sum(m, {1}, false);                // [5]
  // an f32 product (the native GEMM) whose c64 consumer may run as its epilogue on each tile
  const ValueId mf = o.matmul(re, wf);
  const ValueId e = o.complex(mf, o.neg(mf));
  g.outputs = {m, s, o.abs(q), o.angle(q), o.real(s), o.imag(o.cast(re, DType::c64)), e};
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  std::vector<Tensor> xs = {random_tensor(DType::f32, {5, 7}, rng), random_tensor(DType::f32, {7}, rng),
                            c64_input({5, 7}), c64_input({7, 3}), random_tensor(DType::f32, {7, 4}, rng)};
  auto cpu = Model::compile(g, {.device = "cpu"});
  ASSERT_TRUE(cpu.has_value()) << cpu.status().to_string();
  auto ref = Model::compile(g, {.device = "ref"});
  ASSERT_TRUE(ref.has_value()) << ref.status().to_string();
  auto a = (*cpu)->run(xs);
  ASSERT_TRUE(a.has_value()) << a.status().to_string();
  auto b = (*ref)->run(xs);
  ASSERT_TRUE(b.has_value()) << b.status().to_string();
  ASSERT_EQ(a->size(), b->size());
  for (size_t i = 0; i < a->size(); ++i) {
    const Tensor& x = (*a)[i];
    const Tensor& y = (*b)[i];
    ASSERT_EQ(x.type(), y.type()) << "output " << i;
    const bool cplx = is_complex(y.dtype());
    for (int64_t j = 0; j < x.numel(); ++j) {
      // ref rounds the intermediates to f32 parts, cpu keeps them in double: a few f32 ulps
      const double mag = cplx ? std::hypot(y.get_f64(j), y.get_imag(j)) : std::fabs(y.get_f64(j));
      EXPECT_NEAR(x.get_f64(j), y.get_f64(j), 1e-5 * (1 + mag)) << "output " << i << " element " << j << " seed " << seed;
      if (cplx) EXPECT_NEAR(x.get_imag(j), y.get_imag(j), 1e-5 * (1 + mag)) << "output " << i << " element " << j << " seed " << seed;
    }
  }
  // the last output is imag(cast(re, c64)): exactly zero
  for (int64_t j = 0; j < (*a)[5].numel(); ++j) EXPECT_EQ((*a)[5].get_f64(j), 0.0);
}

// A value rounded to f16 / bf16 and stored in that type: the kernel stores the f32 value
// through the conversion alone (the renderer drops the separate rounding); the bits must be
// the host converters' on ties, overflow, subnormals, infinities and NaN payloads, with the
// rounding in an elementwise chain (x * 1 + 0 keeps each value) as a fused epilogue would have it.
TEST(CpuPipeline, StoringARoundedValueKeepsTheConversionsBits) {
  std::vector<float> v = {0.f, -0.f, 1.f, 1.00390625f, 1.01171875f, 3.14159265f, -2.5e-3f, 65504.f, 65520.f, 7e4f,
                          3.4e38f, 6e-8f, 3e-8f, 1e-40f, -1e-45f, INFINITY, -INFINITY};
  for (uint32_t bits : {0x7fc00001u, 0xffa00000u, 0x7f800001u, 0x3f808000u, 0x3f818000u, 0x33000000u, 0x477ff000u})
    v.push_back(std::bit_cast<float>(bits));
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 4000; ++i) v.push_back(std::bit_cast<float>(any(rng)));
  const int64_t n = static_cast<int64_t>(v.size());
  for (DType dt : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(dtype_name(dt));
    Graph g;
    ValueId x = g.add_input("x", TensorType{DType::f32, {Dim(n)}});
    GraphBuilder gb(g);
    OpBuilder o(gb);
    ValueId y = o.add(o.mul(x, o.scalar(1.0, DType::f32)), o.scalar(0.0, DType::f32));
    g.outputs = {o.cast(y, dt)};
    ASSERT_TRUE(o.ok()) << o.status().to_string();
    auto cpu = Model::compile(g, {.device = "cpu"});
    ASSERT_TRUE(cpu.has_value()) << cpu.status().to_string();
    Tensor in = Tensor::zeros(DType::f32, {n});
    std::copy(v.begin(), v.end(), in.data<float>());
    auto out = (*cpu)->run(std::vector<Tensor>{in});
    ASSERT_TRUE(out.has_value()) << out.status().to_string();
    const uint16_t* got = (*out)[0].data<uint16_t>();
    for (int64_t i = 0; i < n; ++i) {
      // x * 1 + 0 turns -0 into +0 and quiets a signalling NaN: compare with the host's
      // conversion of the same f32 value
      const float f = v[static_cast<size_t>(i)] * 1.f + 0.f;
      const uint16_t want = dt == DType::bf16 ? f32_to_bf16(f) : f32_to_f16(f);
      if (std::isnan(f) && dt == DType::f16) {
        // the kernels' f16 conversion keeps NaN payload bits, the host's gives one quiet NaN
        EXPECT_TRUE(std::isnan(f16_to_f32(got[i]))) << std::hex << std::bit_cast<uint32_t>(v[static_cast<size_t>(i)]);
        continue;
      }
      EXPECT_EQ(got[i], want) << std::hex << std::bit_cast<uint32_t>(v[static_cast<size_t>(i)]);
    }
  }
}

// f16 and bf16 stores into rows (the host renderer stages them in an f32 row buffer and
// converts the buffer after the loop: f16 with the CPU's vcvtps2ph, bf16 with the prelude's
// conversion in a loop of its own, c_renderer.cpp): rows of every width around the vector
// lengths (8, 16) and the buffer's 256 columns, each row at its own offset, values from special
// to random bits, a bias per column so the stored value is computed in the loop. Bit for bit
// the host's conversion of the same f32 sums.
TEST(CpuPipeline, NarrowFloatRowsStoredThroughTheRowBufferKeepTheConversionsBits) {
  for (DType dt : {DType::f16, DType::bf16}) {
  SCOPED_TRACE(dtype_name(dt));
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> any;
  const std::vector<float> special = {0.f, -0.f, 65504.f, 65520.f, 7e4f, 6e-8f, 3e-8f, -1e-40f, INFINITY, -INFINITY,
                                      std::bit_cast<float>(0x3f808000u), std::bit_cast<float>(0x33000000u)};
  for (int64_t w : {1, 3, 7, 8, 10, 15, 16, 17, 31, 33, 255, 256, 257, 300, 600}) {
    SCOPED_TRACE(cat("width ", w));
    const int64_t rows = 5;
    Graph g;
    ValueId x = g.add_input("x", TensorType{DType::f32, {Dim(rows), Dim(w)}});
    ValueId b = g.add_input("b", TensorType{DType::f32, {Dim(w)}});
    GraphBuilder gb(g);
    OpBuilder o(gb);
    g.outputs = {o.cast(o.add(x, b), dt)};
    ASSERT_TRUE(o.ok()) << o.status().to_string();
    auto cpu = Model::compile(g, {.device = "cpu"});
    ASSERT_TRUE(cpu.has_value()) << cpu.status().to_string();
    Tensor xs = Tensor::zeros(DType::f32, {rows, w}), bs = Tensor::zeros(DType::f32, {w});
    for (int64_t i = 0; i < rows * w; ++i) {
      const uint32_t r = any(rng);
      // a third special values, a third f16's range, a third any bits
      xs.data<float>()[i] = i % 3 == 0   ? special[r % special.size()]
                            : i % 3 == 1 ? std::ldexp(static_cast<float>(r % 20000) - 1e4f, static_cast<int>(r % 40) - 30)
                                         : std::bit_cast<float>(r);
    }
    for (int64_t j = 0; j < w; ++j) bs.data<float>()[j] = j % 2 ? 0.f : std::ldexp(1.f, -static_cast<int>(j % 30));
    auto out = (*cpu)->run(std::vector<Tensor>{xs, bs});
    ASSERT_TRUE(out.has_value()) << out.status().to_string();
    const uint16_t* got = (*out)[0].data<uint16_t>();
    int failures = 0;
    for (int64_t i = 0; i < rows * w; ++i) {
      const float f = xs.data<float>()[i] + bs.data<float>()[i % w];
      if (std::isnan(f) && dt == DType::f16) {  // (the host's f16 conversion gives one quiet NaN)
        EXPECT_TRUE(std::isnan(f16_to_f32(got[i]))) << "element " << i;
        continue;
      }
      const uint16_t want = dt == DType::f16 ? f32_to_f16(f) : f32_to_bf16(f);
      if (got[i] != want && failures++ < 5)
        ADD_FAILURE() << std::hex << "element " << std::dec << i << ": 0x" << std::hex << got[i] << ", want 0x" << want
                      << " for 0x" << std::bit_cast<uint32_t>(f);
    }
    EXPECT_EQ(failures, 0);
  }
  }
}

// f16 and bf16 loads of rows in a loop that also gathers (widened into an f32 row buffer before
// the loop, f16 by the CPU's vcvtph2ps, c_renderer.cpp): every 16-bit code, signalling NaNs included, in rows
// of widths around the vector lengths and the row buffer, selected by a gathered mask and stored
// as f32, bit for bit as the host's f16_to_f32 (the reference's) widens them; and without the
// gather (the prelude's conversion in the loop) the same.
TEST(CpuPipeline, NarrowFloatRowsLoadedThroughTheRowBufferKeepTheCodesBits) {
  for (DType dt : {DType::f16, DType::bf16})
  for (int64_t w : {1, 7, 10, 16, 17, 255, 256, 257, 600}) {
    SCOPED_TRACE(cat(dtype_name(dt), " width ", w));
    const int64_t rows = (65536 + w - 1) / w;
    Graph g;
    ValueId x = g.add_input("x", TensorType{dt, {Dim(rows), Dim(w)}});
    ValueId m = g.add_input("m", TensorType{DType::boolean, {Dim(w)}});
    ValueId ix = g.add_input("ix", TensorType{DType::i64, {Dim(w)}});
    GraphBuilder gb(g);
    OpBuilder o(gb);
    g.outputs = {o.where(o.gather(m, ix, 0), o.cast(x, DType::f32), o.scalar(0.0, DType::f32))};
    ASSERT_TRUE(o.ok()) << o.status().to_string();
    Graph plain = g;  // the cast alone: a vector loop, converting in it
    plain.outputs = {plain.nodes[plain.values[g.outputs[0]].producer].inputs[1]};
    auto cpu = Model::compile(g, {.device = "cpu"});
    ASSERT_TRUE(cpu.has_value()) << cpu.status().to_string();
    auto cpu_plain = Model::compile(plain, {.device = "cpu"});
    ASSERT_TRUE(cpu_plain.has_value()) << cpu_plain.status().to_string();
    Tensor xs = Tensor::zeros(dt, {rows, w}), ms = Tensor::zeros(DType::boolean, {w}), is = Tensor::zeros(DType::i64, {w});
    for (int64_t i = 0; i < rows * w; ++i) xs.data<uint16_t>()[i] = static_cast<uint16_t>(i * 40503);  // every code
    for (int64_t j = 0; j < w; ++j) {
      ms.data<uint8_t>()[j] = 1;
      is.data<int64_t>()[j] = w - 1 - j;
    }
    auto out = (*cpu)->run(std::vector<Tensor>{xs, ms, is});
    ASSERT_TRUE(out.has_value()) << out.status().to_string();
    auto out_plain = (*cpu_plain)->run(std::vector<Tensor>{xs, ms, is});
    ASSERT_TRUE(out_plain.has_value()) << out_plain.status().to_string();
    int failures = 0;
    for (int64_t i = 0; i < rows * w; ++i) {
      const uint16_t h = xs.data<uint16_t>()[i];
      const uint32_t want = std::bit_cast<uint32_t>(dt == DType::f16 ? f16_to_f32(h) : bf16_to_f32(h));
      for (int k = 0; k < 2; ++k) {
        const uint32_t got = std::bit_cast<uint32_t>((k ? *out_plain : *out)[0].data<float>()[i]);
        if (got != want && failures++ < 5)
          ADD_FAILURE() << std::hex << (k ? "plain" : "gathering") << " kernel, code 0x" << h << ": 0x" << got << ", want 0x" << want;
      }
    }
    EXPECT_EQ(failures, 0);
  }
}

// A 1-D kernel of 1000 columns whose expressions are [column, b0[column] (f32), that value
// rounded to f16]: the start of the hand-built kernels below.
kir::GeneratedKernel row_rounding_kernel() {
  kir::GeneratedKernel k;
  k.name = "k";
  k.domain_rank = 1;
  k.loops.push_back({1000});
  kir::Expr i{.kind = kir::ExprKind::loop_var, .dtype = DType::i64, .loop = 0};
  kir::Expr load{.kind = kir::ExprKind::load, .dtype = DType::f32, .a = 0, .buffer = 0};
  kir::Expr half{.kind = kir::ExprKind::cast, .dtype = DType::f16, .a = 1};
  k.exprs = {i, load, half};
  return k;
}

// A kernel with more 16-bit row stores than row buffers (20 f16 outputs of one value) stages
// the first kMaxStagedRows (16) and converts the rest in the loop: the row buffers' stack stays
// bounded however many outputs a kernel has.
TEST(CpuPipeline, RowBuffersPerKernelAreBounded) {
  kir::GeneratedKernel k = row_rounding_kernel();
  std::vector<DType> dts{DType::f32};
  k.args = {0};
  for (int o = 1; o <= 20; ++o) {
    k.args.push_back(o);
    dts.push_back(DType::f16);
    k.stores.push_back({.buffer = o, .index = 0, .value = 2});
  }
  auto text = codegen::render_c_kernel(k, dts, "k");
  ASSERT_TRUE(text.has_value()) << text.status().to_string();
  auto count = [&](const std::string& what) {
    int n = 0;
    for (size_t at = text->find(what); at != std::string::npos; at = text->find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("rlx_store_f16_n(b"), 16) << *text;
  EXPECT_EQ(count("= rlx_f32_to_f16("), 4) << *text;
}

// Autocast's widened f16 form rounds f32 values through f16 and back: a kernel that stores
// such a row (the batch's and each weight's rounding copy) or loads one (the SGD update reading
// the rounded gradient) rounds the row with rlx_round_f16_n (vcvtps2ph + vcvtph2ps) instead of
// the integer rounding per value. The bits are the reference's, specials and ties included.
TEST(CpuPipeline, F16RoundTripRowsAreRoundedByTheStagedHelper) {
  Graph g;
  const TensorType t{DType::f32, {7, 300}};
  const ValueId x = g.add_input("x", t), w = g.add_input("w", t);
  GraphBuilder gb(g);
  OpBuilder o(gb);
  auto round_trip = [&](ValueId v) { return o.cast(o.cast(v, DType::f16), DType::f32); };
  const ValueId stored = round_trip(x);                                      // a rounded store
  const ValueId updated = o.sub(w, o.mul(round_trip(x), o.scalar(0.25, DType::f32)));  // a rounded load
  g.outputs = {stored, updated};
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  Tensor xs = Tensor::zeros(DType::f32, {7, 300}), ws = Tensor::zeros(DType::f32, {7, 300});
  for (int64_t i = 0; i < 2100; ++i) {
    // all kinds of f32: ties at f16's precision, subnormals, values past f16's range, NaN
    const uint32_t b = i % 3 == 0 ? bits(rng) : (bits(rng) & 0xffffe000u) | 0x1000u;
    xs.data<float>()[i] = std::bit_cast<float>(i % 5 == 0 ? b : (b & 0x8fffffffu) | 0x30000000u);
    ws.data<float>()[i] = static_cast<float>(i % 17) - 8;
  }
  auto cpu = Model::compile(g, {.device = "cpu"});
  auto ref = Model::compile(g, {.device = "ref"});
  ASSERT_TRUE(cpu.has_value() && ref.has_value());
  const std::vector<Tensor> in{xs, ws};
  auto a = (*cpu)->run(in);
  auto b = (*ref)->run(in);
  ASSERT_TRUE(a.has_value() && b.has_value()) << (a.has_value() ? b.status().to_string() : a.status().to_string());
  int failures = 0;
  for (size_t k = 0; k < 2; ++k)
    for (int64_t i = 0; i < 2100; ++i) {
      const float p = (*a)[k].data<float>()[i], q = (*b)[k].data<float>()[i];
      const bool same = std::isnan(q) ? std::isnan(p) : std::bit_cast<uint32_t>(p) == std::bit_cast<uint32_t>(q);
      if (!same && failures++ < 5)
        ADD_FAILURE() << "output " << k << " element " << i << ": " << p << ", want " << q << " (x = " << xs.data<float>()[i] << ")";
    }
  // the rendered kernels: a row store and a row load staged through the helper
  kir::GeneratedKernel k = row_rounding_kernel();
  k.exprs.push_back({.kind = kir::ExprKind::cast, .dtype = DType::f32, .a = 2});                  // widened
  k.exprs.push_back({.kind = kir::ExprKind::binary, .dtype = DType::f32, .op = Op::Add, .a = 3, .b = 3});  // read twice
  k.args = {0, 1, 2};
  k.stores = {{.buffer = 1, .index = 0, .value = 3}, {.buffer = 2, .index = 0, .value = 4}};
  auto text = codegen::render_c_kernel(k, {DType::f32, DType::f32, DType::f32}, "k");
  ASSERT_TRUE(text.has_value()) << text.status().to_string();
  EXPECT_NE(text->find("rlx_round_f16_n(b1 + rlx_cb, rlx_s0"), std::string::npos) << *text;  // the store
  EXPECT_NE(text->find("rlx_round_f16_n(rlx_r2, b0 + rlx_cb"), std::string::npos) << *text;  // the load
}

}  // namespace
}  // namespace rlx
