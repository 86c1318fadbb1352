// The CPU's native fused attention against the reference interpreter on fresh random inputs:
// both layouts, grouped key/value heads, query length different from key length (prefill and
// decode), bool and additive masks broadcast in several ways, causality, an explicit scale,
// fully masked rows, bf16 operands with an f32 result (out_type: vdpbf16ps on AVX-512 BF16,
// widened otherwise), and that the device refuses (with the reason) what it does not claim.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backends/cpu/kernels/gemm.h"
#include "backends/cpu/kernels/qgemm.h"
#include "rlx/compile.h"
#include "rlx/op_builder.h"

namespace rlx {
namespace {

struct Case {
  std::string name;
  std::string layout = "bhsd";
  int64_t b = 2, hq = 4, hkv = 4, sq = 5, sk = 5, d = 8, dv = 8;
  int mask = 0;  // 0 none, 1 bool, 2 f32
  Sizes mask_shape;
  bool causal = false;
  double scale = 0.0;
  bool mask_row_empty = false;  // one query row sees no key (bool mask): NaN on both sides
  // > 0: instead of random, the mask [B, 1, Sq, Sk] is a decoder's: query i (at key position
  // i + Sk - Sq) sees the last `window` keys up to its own, none of batch b's first 5b (left
  // padding); whole blocks of rows then see only part of the keys (-inf for f32 masks)
  int64_t window = 0;
  bool bf16 = false;  // bf16 q, k, v and out_type f32
  bool bf16_direct = false;  // ... on the direct kernel's vdpbf16ps (where the CPU has it), else widened
  bool int8 = false;  // int8_scores
  bool int8_direct = false;  // ... on the direct kernel's vpdpbusd (where the CPU has it), else dequantized
};

Sizes qkv_shape(const Case& c, int64_t h, int64_t s, int64_t d) {
  return c.layout == "bshd" ? Sizes{c.b, s, h, d} : Sizes{c.b, h, s, d};
}

const NodeDecision* find_op(const DispatchReport& r, Op op) {
  for (const NodeDecision& d : r.nodes)
    if (d.op == op) return &d;
  return nullptr;
}

void run_case(const Case& c) {
  SCOPED_TRACE(c.name);
  Graph g;
  const DType dt = c.bf16 ? DType::bf16 : DType::f32;
  ValueId q = g.add_input("q", TensorType{dt, to_shape(qkv_shape(c, c.hq, c.sq, c.d))});
  ValueId k = g.add_input("k", TensorType{dt, to_shape(qkv_shape(c, c.hkv, c.sk, c.d))});
  ValueId v = g.add_input("v", TensorType{dt, to_shape(qkv_shape(c, c.hkv, c.sk, c.dv))});
  std::vector<ValueId> ins{q, k, v};
  if (c.mask)
    ins.push_back(g.add_input("mask", TensorType{c.mask == 1 ? DType::boolean : DType::f32, to_shape(c.mask_shape)}));
  GraphBuilder gb(g);
  OpBuilder o(gb);
  Attrs at{{"causal", int64_t{c.causal ? 1 : 0}}, {"layout", c.layout}};
  if (c.scale != 0.0) at.set("scale", c.scale);
  if (c.bf16) at.set("out_type", DType::f32);
  if (c.int8) at.set("int8_scores", int64_t{1});
  g.outputs = {o.op(Op::Attention, ins, at)};
  // int8 scores: the same attention without them, whose result the quantization must move
  at.erase("int8_scores");
  if (c.int8) g.outputs.push_back(o.op(Op::Attention, ins, at));
  if (c.bf16) {
    ASSERT_EQ(g.type(g.outputs[0]).dtype, DType::f32);
  }
  ASSERT_TRUE(o.ok()) << o.status().to_string();

  std::random_device rd;
  const unsigned seed = rd();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-2, 2);
  std::vector<Tensor> xs;
  for (size_t i = 0; i < ins.size(); ++i) {
    const TensorType& t = g.type(ins[i]);
    Sizes s = *static_sizes(t.shape);
    std::vector<double> vals(static_cast<size_t>(numel(s)));
    for (double& x : vals) x = t.dtype == DType::boolean ? (u(rng) > -1.2 ? 1 : 0) : u(rng);
    if (c.window > 0 && ins[i] == ins.back() && c.mask)
      for (int64_t bi = 0; bi < c.b; ++bi)
        for (int64_t qi = 0; qi < c.sq; ++qi)
          for (int64_t j = 0; j < c.sk; ++j) {
            const int64_t pos = qi + c.sk - c.sq;
            const bool seen = j <= pos && j > pos - c.window && j >= 5 * bi;
            vals[static_cast<size_t>((bi * c.sq + qi) * c.sk + j)] =
                t.dtype == DType::boolean ? (seen ? 1 : 0) : (seen ? 0 : -INFINITY);
          }
    if (t.dtype == DType::boolean && c.mask_row_empty)
      for (int64_t j = 0; j < s.back(); ++j) vals[static_cast<size_t>(j)] = 0;  // first row sees nothing
    xs.push_back(Tensor::from_f64(t.dtype, s, vals));
  }
  auto cpu = Model::compile(g, {.device = "cpu"});
  ASSERT_TRUE(cpu.has_value()) << cpu.status().to_string();
  auto ref = Model::compile(g, {.device = "ref"});
  ASSERT_TRUE(ref.has_value()) << ref.status().to_string();
  auto a = (*cpu)->run(xs);
  ASSERT_TRUE(a.has_value()) << a.status().to_string();
  auto var = (*cpu)->variant_for(xs);
  ASSERT_TRUE(var.has_value());
  const NodeDecision* d = find_op((*var)->report, Op::Attention);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->path, DispatchPath::native) << d->native_refused;
  if (c.bf16) {
    EXPECT_NE(d->how.find(cpu::gemm_bf16_dot() && c.bf16_direct ? "vdpbf16ps" : "widened"), std::string::npos) << d->how;
  }
  if (c.int8) {
    const bool vnni = __builtin_cpu_supports("avx512vnni") && std::string(cpu::qgemm_kernel_name()) == "avx512";
    EXPECT_NE(d->how.find(vnni && c.int8_direct ? "int8 scores vpdpbusd" : "int8 scores dequantized"), std::string::npos)
        << d->how;
  }
  auto b = (*ref)->run(xs);
  ASSERT_TRUE(b.has_value()) << b.status().to_string();
  const Tensor& x = (*a)[0];
  const Tensor& y = (*b)[0];
  ASSERT_EQ(x.sizes(), y.sizes());
  int nans = 0;
  // bf16 operands: the value product takes the probabilities rounded to bf16, and the kernel's
  // exp and the reference's differ in the last bits of f32, so now and then a probability
  // rounds to the neighbouring bf16 value on one side only (2^-8 of it): such an output moves
  // by a few 1e-5, never by more than 2^-8 of max|v| = 2. So each output is held to that bound,
  // and their mean to a tight one, which an unrounded (or wrongly rounded) product misses by
  // an order of magnitude.
  double err_sum = 0;
  int64_t compared = 0;
  for (int64_t j = 0; j < x.numel(); ++j) {
    const double p = x.get_f64(j), r = y.get_f64(j);
    if (std::isnan(r)) {
      ++nans;
      EXPECT_TRUE(std::isnan(p)) << "element " << j << " seed " << seed;
      continue;
    }
    err_sum += std::fabs(p - r);
    ++compared;
    ASSERT_NEAR(p, r, c.bf16 ? 2.0 / 256 : 2e-5 * (1 + std::fabs(r))) << "element " << j << " seed " << seed;
  }
  if (c.bf16 && compared > 0) {
    // (measured: 2e-8 typically, up to 9e-7 with a flip of a large probability; products of
    // unrounded probabilities: 2e-4 to 4e-4)
    EXPECT_LE(err_sum / compared, 2e-5) << "mean error, seed " << seed;
  }
  if (c.mask_row_empty) {
    EXPECT_GT(nans, 0) << "the fully masked row should give NaN";
  }
  if (c.int8) {
    // the reference's int8 scores against its f32 ones: rounding q and k to 127 levels moves
    // the result far beyond the tolerance above
    double moved = 0;
    for (int64_t j = 0; j < y.numel(); ++j)
      if (!std::isnan(y.get_f64(j))) moved = std::max(moved, std::fabs(y.get_f64(j) - (*b)[1].get_f64(j)));
    EXPECT_GT(moved, 1e-4) << "int8 scores left the result where f32 scores put it";
  }
}

TEST(CpuAttention, MatchesReference) {
  std::vector<Case> cases;
  cases.push_back({.name = "bhsd plain"});
  cases.push_back({.name = "bshd plain", .layout = "bshd", .b = 3, .hq = 12, .hkv = 12, .sq = 17, .sk = 17, .d = 32, .dv = 32});
  cases.push_back({.name = "bshd bert mask", .layout = "bshd", .b = 2, .hq = 12, .hkv = 12, .sq = 40, .sk = 40, .d = 32,
                   .dv = 32, .mask = 1, .mask_shape = {2, 1, 1, 40}});
  // a head dimension that is not a multiple of 16 and a key count that is not either: the
  // direct path's K^T transpose covers partial blocks in both directions
  cases.push_back({.name = "bshd partial transpose blocks", .layout = "bshd", .b = 2, .hq = 3, .hkv = 3, .sq = 33,
                   .sk = 33, .d = 24, .dv = 24, .mask = 1, .mask_shape = {2, 1, 1, 33}});
  cases.push_back({.name = "bhsd long blocks", .b = 1, .hq = 2, .hkv = 2, .sq = 150, .sk = 150, .d = 16, .dv = 16,
                   .mask = 1, .mask_shape = {1, 1, 1, 150}});
  cases.push_back({.name = "gqa causal prefill", .layout = "bshd", .b = 2, .hq = 8, .hkv = 2, .sq = 9, .sk = 9, .d = 16,
                   .dv = 16, .causal = true});
  cases.push_back({.name = "gqa decode kv cache", .layout = "bshd", .b = 2, .hq = 8, .hkv = 2, .sq = 1, .sk = 23, .d = 16,
                   .dv = 16, .causal = true});
  cases.push_back({.name = "gqa decode padding mask", .b = 2, .hq = 6, .hkv = 3, .sq = 1, .sk = 19, .d = 8, .dv = 8,
                   .mask = 1, .mask_shape = {2, 1, 1, 19}});
  cases.push_back({.name = "chunked prefill sq<sk causal", .b = 1, .hq = 4, .hkv = 1, .sq = 6, .sk = 21, .d = 8, .dv = 12,
                   .causal = true});
  cases.push_back({.name = "f32 additive full mask", .b = 2, .hq = 3, .hkv = 3, .sq = 7, .sk = 11, .d = 8, .dv = 8,
                   .mask = 2, .mask_shape = {2, 3, 7, 11}});
  cases.push_back({.name = "mask rank 2 broadcast", .b = 2, .hq = 3, .hkv = 3, .sq = 7, .sk = 11, .d = 8, .dv = 8,
                   .mask = 2, .mask_shape = {7, 11}});
  cases.push_back({.name = "bool per-head mask", .layout = "bshd", .b = 1, .hq = 4, .hkv = 2, .sq = 5, .sk = 5, .d = 8,
                   .dv = 8, .mask = 1, .mask_shape = {1, 4, 5, 5}});
  cases.push_back({.name = "explicit scale", .b = 1, .hq = 2, .hkv = 2, .sq = 4, .sk = 4, .d = 8, .dv = 8, .scale = 0.37});
  cases.push_back({.name = "fully masked row", .b = 1, .hq = 2, .hkv = 2, .sq = 3, .sk = 6, .d = 8, .dv = 8, .mask = 1,
                   .mask_shape = {1, 1, 3, 6}, .mask_row_empty = true});
  cases.push_back({.name = "f32 padding mask shared by rows", .layout = "bshd", .b = 2, .hq = 4, .hkv = 4, .sq = 9,
                   .sk = 9, .d = 8, .dv = 8, .mask = 2, .mask_shape = {2, 1, 1, 9}});
  cases.push_back({.name = "shared mask that hides every key", .b = 1, .hq = 2, .hkv = 2, .sq = 3, .sk = 6, .d = 8,
                   .dv = 8, .mask = 1, .mask_shape = {1, 1, 1, 6}, .mask_row_empty = true});
  // blocks of 8 or more query rows with head dimensions up to 32 take the direct AVX-512 path
  // (where the CPU has it): tails of keys (not a multiple of 16), of value columns (one and
  // two vectors, not a multiple of 16), of rows (not a multiple of 4 or 8), odd head
  // dimensions, and grouped decode with 8 query heads
  cases.push_back({.name = "direct bert shape", .layout = "bshd", .b = 2, .hq = 12, .hkv = 12, .sq = 128, .sk = 128,
                   .d = 32, .dv = 32, .mask = 1, .mask_shape = {2, 1, 1, 128}});
  cases.push_back({.name = "direct tails causal f32 mask", .b = 1, .hq = 2, .hkv = 1, .sq = 29, .sk = 45, .d = 20,
                   .dv = 27, .mask = 2, .mask_shape = {1, 2, 29, 45}, .causal = true});
  cases.push_back({.name = "direct 13 rows wide keys", .layout = "bshd", .b = 2, .hq = 3, .hkv = 3, .sq = 13, .sk = 83,
                   .d = 31, .dv = 13, .scale = 0.21});
  cases.push_back({.name = "direct grouped decode", .b = 2, .hq = 16, .hkv = 2, .sq = 1, .sk = 37, .d = 24, .dv = 32,
                   .mask = 1, .mask_shape = {2, 1, 1, 37}});
  cases.push_back({.name = "direct causal shared mask", .layout = "bshd", .b = 2, .hq = 4, .hkv = 2, .sq = 19, .sk = 19,
                   .d = 16, .dv = 16, .mask = 1, .mask_shape = {2, 1, 1, 19}, .causal = true});
  cases.push_back({.name = "direct fully masked row", .b = 1, .hq = 2, .hkv = 2, .sq = 9, .sk = 17, .d = 8, .dv = 8,
                   .mask = 1, .mask_shape = {1, 1, 9, 17}, .mask_row_empty = true});
  // decoder masks over long prompts (blocks of 64 rows): the kernel skips the keys no row of a
  // block sees, before causality and the window and after the left padding
  cases.push_back({.name = "prefill mask, window 40", .b = 2, .hq = 4, .hkv = 2, .sq = 150, .sk = 160, .d = 16,
                   .dv = 16, .mask = 1, .mask_shape = {2, 1, 150, 160}, .window = 40});
  cases.push_back({.name = "prefill mask, no window, causal", .layout = "bshd", .b = 2, .hq = 2, .hkv = 1, .sq = 200,
                   .sk = 200, .d = 64, .dv = 64, .mask = 1, .mask_shape = {2, 1, 200, 200}, .causal = true,
                   .window = 1000});
  cases.push_back({.name = "prefill f32 mask, window 7", .b = 2, .hq = 2, .hkv = 2, .sq = 140, .sk = 141, .d = 48,
                   .dv = 40, .mask = 2, .mask_shape = {2, 1, 140, 141}, .window = 7});
  for (const Case& c : cases) run_case(c);
}

// bf16 q, k and v with out_type f32 against the reference's widened decomposition: the direct
// path (vdpbf16ps where the CPU has AVX-512 BF16, and with it switched off the widened
// operands) with heads up to 64, an odd head dimension and one over 64 (widened, then the f32
// paths), and decode.
TEST(CpuAttention, Bf16OperandsWithF32ResultMatchReference) {
  std::vector<Case> cases;
  cases.push_back({.name = "bf16 direct bert shape", .layout = "bshd", .b = 2, .hq = 12, .hkv = 12, .sq = 128,
                   .sk = 128, .d = 32, .dv = 32, .mask = 1, .mask_shape = {2, 1, 1, 128}, .bf16 = true,
                   .bf16_direct = true});
  cases.push_back({.name = "bf16 direct tails causal", .b = 1, .hq = 4, .hkv = 2, .sq = 29, .sk = 45, .d = 20,
                   .dv = 27, .causal = true, .bf16 = true, .bf16_direct = true});
  cases.push_back({.name = "bf16 direct 13 rows, 2 pairs, per-row mask", .layout = "bshd", .b = 2, .hq = 3, .hkv = 3,
                   .sq = 13, .sk = 83, .d = 4, .dv = 13, .mask = 1, .mask_shape = {2, 3, 13, 83}, .scale = 0.21,
                   .bf16 = true, .bf16_direct = true});
  // heads of 64 (32 pairs: two blocks of the pair transpose; value columns in blocks of 32) and
  // of 48 with 40 value columns (a partial block of each)
  cases.push_back({.name = "bf16 direct heads of 64", .layout = "bshd", .b = 1, .hq = 2, .hkv = 1, .sq = 70, .sk = 70,
                   .d = 64, .dv = 64, .causal = true, .bf16 = true, .bf16_direct = true});
  cases.push_back({.name = "bf16 direct 48 / 40", .b = 2, .hq = 2, .hkv = 2, .sq = 9, .sk = 37, .d = 48, .dv = 40,
                   .mask = 1, .mask_shape = {2, 1, 1, 37}, .bf16 = true, .bf16_direct = true});
  cases.push_back({.name = "bf16 odd head dimension (widened)", .b = 1, .hq = 2, .hkv = 2, .sq = 16, .sk = 17, .d = 31,
                   .dv = 8, .bf16 = true});
  cases.push_back({.name = "bf16 head dimension 80 (widened, GEMM path)", .layout = "bshd", .b = 1, .hq = 2, .hkv = 1,
                   .sq = 70, .sk = 70, .d = 80, .dv = 80, .causal = true, .bf16 = true});
  cases.push_back({.name = "bf16 decode (widened)", .b = 2, .hq = 4, .hkv = 2, .sq = 1, .sk = 23, .d = 16, .dv = 16,
                   .mask = 1, .mask_shape = {2, 1, 1, 23}, .bf16 = true});
  cases.push_back({.name = "bf16 grouped decode of 8 heads (direct)", .b = 2, .hq = 16, .hkv = 2, .sq = 1, .sk = 23,
                   .d = 16, .dv = 16, .mask = 1, .mask_shape = {2, 1, 1, 23}, .bf16 = true, .bf16_direct = true});
  for (const Case& c : cases) run_case(c);
  if (cpu::gemm_bf16_dot()) {
    ASSERT_TRUE(cpu::set_gemm_bf16_dot(false));
    for (const Case& c : cases) run_case(c);
    cpu::set_gemm_bf16_dot(true);
  } else {
    std::printf("this CPU has no AVX-512 BF16: the bf16 cases ran the widened path only\n");
  }
}

// int8 scores (q and k quantized per row) against the reference's decomposition: the direct
// path (vpdpbusd where the CPU has AVX-512 VNNI) with heads of 32 and 64, tails of keys, value
// columns and rows, 5 quads, grouped decode; and the dequantized f32 paths: a head dimension not
// a multiple of 4, one over 64 (GEMM path), few rows, decode. Then everything again on the
// dequantized paths with the avx2 qgemm family selected.
TEST(CpuAttention, Int8ScoresMatchReference) {
  std::vector<Case> cases;
  cases.push_back({.name = "int8 direct bert shape", .layout = "bshd", .b = 2, .hq = 12, .hkv = 12, .sq = 128,
                   .sk = 128, .d = 32, .dv = 32, .mask = 1, .mask_shape = {2, 1, 1, 128}, .int8 = true,
                   .int8_direct = true});
  cases.push_back({.name = "int8 direct heads of 64, causal gqa", .layout = "bshd", .b = 1, .hq = 4, .hkv = 2, .sq = 70,
                   .sk = 70, .d = 64, .dv = 64, .causal = true, .int8 = true, .int8_direct = true});
  cases.push_back({.name = "int8 direct tails, 5 quads, f32 mask", .b = 1, .hq = 2, .hkv = 1, .sq = 29, .sk = 45, .d = 20,
                   .dv = 27, .mask = 2, .mask_shape = {1, 2, 29, 45}, .scale = 0.3, .int8 = true, .int8_direct = true});
  cases.push_back({.name = "int8 direct grouped decode", .b = 2, .hq = 16, .hkv = 2, .sq = 1, .sk = 37, .d = 24,
                   .dv = 32, .mask = 1, .mask_shape = {2, 1, 1, 37}, .int8 = true, .int8_direct = true});
  cases.push_back({.name = "int8 head dimension 18 (dequantized)", .layout = "bshd", .b = 2, .hq = 3, .hkv = 3, .sq = 13,
                   .sk = 30, .d = 18, .dv = 13, .int8 = true});
  cases.push_back({.name = "int8 head dimension 80 (dequantized, GEMM path)", .b = 1, .hq = 2, .hkv = 1, .sq = 40,
                   .sk = 40, .d = 80, .dv = 80, .causal = true, .int8 = true});
  cases.push_back({.name = "int8 few rows (dequantized, GEMM path)", .b = 2, .hq = 2, .hkv = 2, .sq = 5, .sk = 9, .d = 16,
                   .dv = 16, .mask = 1, .mask_shape = {2, 1, 5, 9}, .int8 = true});
  cases.push_back({.name = "int8 decode (dequantized)", .b = 2, .hq = 4, .hkv = 2, .sq = 1, .sk = 23, .d = 16, .dv = 16,
                   .causal = true, .int8 = true});
  for (const Case& c : cases) run_case(c);
  if (__builtin_cpu_supports("avx512vnni") && std::string(cpu::qgemm_kernel_name()) == "avx512" &&
      cpu::set_qgemm_isa(cpu::GemmIsa::avx2)) {
    for (const Case& c : cases) run_case(c);
    ASSERT_TRUE(cpu::set_qgemm_isa(cpu::GemmIsa::avx512));
  } else {
    std::printf("this CPU has no AVX-512 VNNI (or the avx512 qgemm family is not selected): the int8 cases ran "
                "the dequantized paths only\n");
  }
}

TEST(CpuAttention, RefusesWithReason) {
  // f16 attention: the native kernel computes f32 only; the node decomposes instead
  Graph g;
  const TensorType t{DType::f16, to_shape(Sizes{1, 2, 4, 8})};
  ValueId q = g.add_input("q", t), k = g.add_input("k", t), v = g.add_input("v", t);
  GraphBuilder gb(g);
  OpBuilder o(gb);
  g.outputs = {o.op(Op::Attention, {q, k, v}, Attrs{})};
  ASSERT_TRUE(o.ok());
  auto r = explain(g, "cpu", DispatchPolicy{});
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  const NodeDecision* d = find_op(*r, Op::Attention);
  ASSERT_NE(d, nullptr);
  EXPECT_NE(d->path, DispatchPath::native);
  EXPECT_NE(d->native_refused.find("bf16 with out_type f32"), std::string::npos) << d->native_refused;

  // bf16 operands with a bf16 result: the kernel writes f32 only
  Graph h;
  const TensorType b16{DType::bf16, to_shape(Sizes{1, 2, 4, 8})};
  ValueId qb = h.add_input("q", b16), kb = h.add_input("k", b16), vb = h.add_input("v", b16);
  GraphBuilder hb(h);
  OpBuilder ho(hb);
  h.outputs = {ho.op(Op::Attention, {qb, kb, vb}, Attrs{})};
  ASSERT_TRUE(ho.ok());
  auto rh = explain(h, "cpu", DispatchPolicy{});
  ASSERT_TRUE(rh.has_value()) << rh.status().to_string();
  d = find_op(*rh, Op::Attention);
  ASSERT_NE(d, nullptr);
  EXPECT_NE(d->path, DispatchPath::native);
  EXPECT_NE(d->native_refused.find("need out_type f32"), std::string::npos) << d->native_refused;

  // out_type is f32 for 16-bit operands only
  Graph e;
  const TensorType f{DType::f32, to_shape(Sizes{1, 2, 4, 8})};
  ValueId qe = e.add_input("q", f), ke = e.add_input("k", f), ve = e.add_input("v", f);
  GraphBuilder eb(e);
  OpBuilder eo(eb);
  (void)eo.op(Op::Attention, {qe, ke, ve}, Attrs{{"out_type", DType::f64}});
  ASSERT_FALSE(eo.ok());
  EXPECT_NE(eo.status().message().find("out_type f64 is not allowed for f32 operands"), std::string::npos)
      << eo.status().to_string();
}

}  // namespace
}  // namespace rlx
