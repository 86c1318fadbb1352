// Round trips of the text IR: a corpus of canonical graphs that together use every op in the
// ops table, graphs built in code, every attribute kind and dtype, symbolic and unknown dims,
// multi-output nodes, loc() and comments. Canonical text must print back byte for byte.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ir/text/text_format.h"
#include "rlx/graph.h"
#include "rlx/ir_text.h"
#include "rlx/op_builder.h"
#include "rlx/verify.h"

namespace rlx {
namespace {

// Canonical text: exactly what print_graph writes for the graph it parses to.
const std::vector<std::string>& corpus() {
  static const std::vector<std::string> c = {
      // sources
      R"(graph @sources() -> (f32[2, 3], i32[4], f32[2, 2], f16[3], f32[4]) {
  %w = param "encoder.layer.0.weight" : f32[2, 3]
  %i = iota() {axis = 0, dtype = i32, shape = [4]} : i32[4]
  %r = random() {a = 0.0, b = 1.0, dist = "uniform", dtype = f32, seed = 7, shape = [2, 2]} : f32[2, 2]
  %n = random() {a = 0.0, b = 0.02, dist = "normal", dtype = f16, shape = [3]} : f16[3]
  %c = constant dense<[1.5, -2.25, 0.0, 3.0]> : f32[4]
  return %w, %i, %r, %n, %c
}
)",
      // elementwise unary, with a symbolic dim
      R"(graph @unary(%x: f32[batch, 4], %m: bool[batch, 4]) -> (f32[batch, 4], bool[batch, 4], bool[batch, 4], bool[batch, 4]) {
  %0 = neg(%x) : f32[batch, 4]
  %1 = abs(%0) : f32[batch, 4]
  %2 = exp(%1) : f32[batch, 4]
  %3 = log(%2) : f32[batch, 4]
  %4 = sqrt(%3) : f32[batch, 4]
  %5 = rsqrt(%4) : f32[batch, 4]
  %6 = reciprocal(%5) : f32[batch, 4]
  %7 = tanh(%6) : f32[batch, 4]
  %8 = sigmoid(%7) : f32[batch, 4]
  %9 = erf(%8) : f32[batch, 4]
  %10 = sin(%9) : f32[batch, 4]
  %11 = cos(%10) : f32[batch, 4]
  %12 = floor(%11) : f32[batch, 4]
  %13 = ceil(%12) : f32[batch, 4]
  %14 = round(%13) : f32[batch, 4]
  %15 = sign(%14) : f32[batch, 4]
  %nan = isnan(%15) : bool[batch, 4]
  %inf = isinf(%x) {detect_negative = 0, detect_positive = 1} : bool[batch, 4]
  %not = not(%m) : bool[batch, 4]
  return %15, %nan, %inf, %not
}
)",
      // complex values: parts, modulus and argument are f32; complex broadcasts its f32 parts
      R"(graph @complex(%re: f32[batch, 4], %im: f32[4], %z: c64[batch, 4]) -> (c64[batch, 4], f32[batch, 4], f32[batch, 4], f32[batch, 4], f32[batch, 4]) {
  %c = complex(%re, %im) : c64[batch, 4]
  %cj = conj(%c) : c64[batch, 4]
  %prod = mul(%cj, %z) : c64[batch, 4]
  %r = real(%prod) : f32[batch, 4]
  %i = imag(%prod) : f32[batch, 4]
  %a = angle(%z) : f32[batch, 4]
  %m = abs(%z) : f32[batch, 4]
  return %prod, %r, %i, %a, %m
}
)",
      // elementwise binary with broadcasting, comparisons, logic, where, cast
      R"(graph @binary(%a: f32[batch, 4], %b: f32[4], %i: i32[batch, 4], %j: i32[batch, 4]) -> (f32[batch, 4], i32[batch, 4], bool[batch, 4], f16[batch, 4]) {
  %add = add(%a, %b) : f32[batch, 4]
  %sub = sub(%add, %b) : f32[batch, 4]
  %mul = mul(%sub, %a) : f32[batch, 4]
  %div = div(%mul, %b) : f32[batch, 4]
  %pow = pow(%div, %b) : f32[batch, 4]
  %max = max(%pow, %a) : f32[batch, 4]
  %min = min(%max, %b) : f32[batch, 4]
  %mod = mod(%i, %j) {fmod = 1} : i32[batch, 4]
  %eq = equal(%a, %b) : bool[batch, 4]
  %ne = not_equal(%a, %b) : bool[batch, 4]
  %lt = less(%a, %b) : bool[batch, 4]
  %le = less_equal(%a, %b) : bool[batch, 4]
  %gt = greater(%a, %b) : bool[batch, 4]
  %ge = greater_equal(%i, %j) : bool[batch, 4]
  %and = and(%eq, %ne) : bool[batch, 4]
  %or = or(%and, %lt) : bool[batch, 4]
  %xor = xor(%or, %le) : bool[batch, 4]
  %sel = where(%xor, %min, %a) : f32[batch, 4]
  %h = cast(%sel) {to = f16} : f16[batch, 4]
  %any = and(%gt, %ge) : bool[batch, 4]
  return %sel, %mod, %any, %h
}
)",
      // reductions, with an unknown dim
      R"(graph @reduce(%x: f32[?, 8, 6]) -> (f32[?, 1, 6], f32[?, 6], f32[?, 8, 1], f32[], i64[?, 6], i64[?, 1, 6], f32[?, 8]) {
  %s = reduce_sum(%x) {axes = [1], keepdims = 1} : f32[?, 1, 6]
  %m = reduce_max(%x) {axes = [-2], keepdims = 0} : f32[?, 6]
  %n = reduce_min(%x) {axes = [2]} : f32[?, 8, 1]
  %p = reduce_prod(%x) {axes = [], keepdims = 0} : f32[]
  %am = argmax(%x) {axis = 1, keepdims = 0} : i64[?, 6]
  %an = argmin(%x) {axis = 1, select_last_index = 1} : i64[?, 1, 6]
  %mean = reduce_mean(%x) {axes = [2], keepdims = 0} : f32[?, 8]
  return %s, %m, %n, %p, %am, %an, %mean
}
)",
      // movement
      R"(graph @movement(%x: f32[batch, 4, 2], %y: f32[4, 6], %z: f32[1, 4], %idx: i64[3], %upd: f32[4, 3]) -> (f32[batch, 8], f32[6, 4], f32[3, 4], f32[2, 3], f32[4, 9], f32[6, 5], f32[4, 3], f32[4, 6]) {
  %r = reshape(%x) {shape = [0, -1]} : f32[batch, 8]
  %t = transpose(%y) {perm = [1, 0]} : f32[6, 4]
  %e = expand(%z) {shape = [3, 4]} : f32[3, 4]
  %ss = strided_slice(%y) {sizes = [2, 3], starts = [0, 1], steps = [2, 2]} : f32[2, 3]
  %p = pad(%y) {mode = "constant", pads = [0, 1, 0, 2], value = 0.5} : f32[4, 9]
  %pr = pad(%y) {mode = "reflect", pads = [1, 0, 1, 0]} : f32[6, 6]
  %pe = pad(%pr) {mode = "edge", pads = [0, 1, 0, 0]} : f32[6, 7]
  %pn = pad(%pe) {pads = [0, 0, 0, -2]} : f32[6, 5]
  %g = gather(%y, %idx) {axis = 1} : f32[4, 3]
  %sa = scatter_add(%y, %idx, %upd) {axis = 1} : f32[4, 6]
  %sc = scatter(%sa, %idx, %upd) {axis = 1} : f32[4, 6]
  %cat = concat(%y, %p) {axis = 1} : f32[4, 15]
  return %r, %t, %e, %ss, %p, %pn, %g, %sc
}
)",
      // contraction and linear algebra
      R"(graph @linear(%a: f32[2, 3, 4], %b: f32[2, 4, 5], %m: f32[4, 3], %n: f32[4, 5], %c: f32[5]) -> (f32[2, 3, 5], f32[2, 3, 5], f32[3, 5]) {
  %d = dot(%a, %b) {lhs_batch = [0], lhs_contract = [2], rhs_batch = [0], rhs_contract = [1]} : f32[2, 3, 5]
  %mm = matmul(%a, %b) : f32[2, 3, 5]
  %gm = gemm(%m, %n, %c) {alpha = 0.5, beta = 1.0, trans_a = 1} : f32[3, 5]
  return %d, %mm, %gm
}
)",
      // activations and normalizations
      R"(graph @activations(%x: f32[batch, seq, 8], %scale: f32[8], %bias: f32[8]) -> (f32[batch, seq, 8], f32[batch, seq, 8], f32[batch, seq, 8]) {
  %relu = relu(%x) : f32[batch, seq, 8]
  %gelu = gelu(%relu) : f32[batch, seq, 8]
  %gelu.tanh = gelu(%gelu) {approximate = "tanh"} : f32[batch, seq, 8]
  %silu = silu(%gelu.tanh) : f32[batch, seq, 8]
  %leaky = leaky_relu(%silu) {alpha = 0.1} : f32[batch, seq, 8]
  %softplus = softplus(%leaky) : f32[batch, seq, 8]
  %sm = softmax(%softplus) {axis = -1} : f32[batch, seq, 8]
  %lsm = log_softmax(%sm) {axis = 2} : f32[batch, seq, 8]
  %ln = layer_norm(%lsm, %scale, %bias) {axis = -1, epsilon = 1e-05} loc("/encoder/LayerNorm") : f32[batch, seq, 8]
  %rms = rms_norm(%ln, %scale) {axis = 2, epsilon = 1e-06} : f32[batch, seq, 8]
  %ln2 = layer_norm(%rms) : f32[batch, seq, 8]
  return %sm, %rms, %ln2
}
)",
      // structure: embedding, slice, split (multi-output), squeeze, unsqueeze
      R"(graph @structure(%table: f32[100, 8], %ids: i32[batch, seq], %x: f32[10, 8], %y: f32[2, 1, 3]) -> (f32[batch, seq, 8], f32[4, 8], f32[10, 3], f32[10, 5], f32[2, 3], f32[1, 2, 1, 3]) {
  %emb = embedding(%table, %ids) : f32[batch, seq, 8]
  %sl = slice(%x) {axes = [0, 1], ends = [-1, 8], starts = [1, 0], steps = [2, 1]} : f32[4, 8]
  %lo, %hi = split(%x) {axis = 1, sizes = [3, 5]} : f32[10, 3], f32[10, 5]
  %sq = squeeze(%y) {axes = [1]} : f32[2, 3]
  %sq.all = squeeze(%y) : f32[2, 3]
  %un = unsqueeze(%y) {axes = [0]} : f32[1, 2, 1, 3]
  return %emb, %sl, %lo, %hi, %sq, %un
}
)",
      // convolution and pooling
      R"(graph @conv(%x: f32[n, 3, 8, 8], %w: f32[4, 3, 3, 3], %b: f32[4]) -> (f32[n, 4, 4, 4], f32[n, 4, 4, 4]) {
  %c = conv2d(%x, %w, %b) {dilations = [1, 1], group = 1, pads = [1, 1, 1, 1], strides = [1, 1]} : f32[n, 4, 8, 8]
  %mp = max_pool2d(%c) {kernel = [2, 2], strides = [2, 2]} : f32[n, 4, 4, 4]
  %ap = avg_pool2d(%c) {ceil_mode = 0, count_include_pad = 1, kernel = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]} : f32[n, 4, 4, 4]
  return %mp, %ap
}
)",
      // transformer blocks
      R"(graph @attention(%q: f32[1, 4, seq, 16], %k: f32[1, 2, seq, 16], %v: f32[1, 2, seq, 16], %mask: bool[seq, seq], %pos: i64[seq]) -> (f32[1, 4, seq, 16]) {
  %qr = rope(%q, %pos) {interleaved = 0, theta = 10000.0} : f32[1, 4, seq, 16]
  %kr = rope(%k, %pos) {theta = 1e+06} : f32[1, 2, seq, 16]
  %o = attention(%qr, %kr, %v, %mask) {causal = 1, scale = 0.25} : f32[1, 4, seq, 16]
  %o2 = attention(%o, %kr, %v) : f32[1, 4, seq, 16]
  return %o2
}
)",
      R"(graph @paged(%q: f32[batch, 4, 1, 16], %kp: f32[2, 64, 16], %vp: f32[2, 64, 16], %table: i64[batch, 3], %mask: bool[batch, 1, 1, 48]) -> (f32[batch, 4, 1, 16]) {
  %o = paged_attention(%q, %kp, %vp, %table, %mask) {block_size = 16, scale = 0.25} : f32[batch, 4, 1, 16]
  return %o
}
)",
      // block-quantized weights
      R"(graph @quant(%x: f32[batch, 64], %wq: u8[16, 68], %tq: u8[10, 72]) -> (f32[batch, 16], f32[10, 128]) {
  %y = qmatmul(%x, %wq) {format = "q8_0"} : f32[batch, 16]
  %t = dequantize(%tq) {cols = 128, format = "q4_0"} : f32[10, 128]
  return %y, %t
}
)",
      // int8 weights with per-channel scales and a bias
      R"(graph @int8(%x: f32[batch, 64], %w8: i8[16, 64], %ws: f32[16], %b: f32[16]) -> (f32[batch, 16]) {
  %z = int8_matmul(%x, %w8, %ws, %b) : f32[batch, 16]
  return %z
}
)",
      // fake quantization (quantization-aware training): per tensor, and per channel along an axis
      R"(graph @fake_quant(%x: f32[batch, 8], %s: f32[], %z: f32[], %w: f32[8, 4], %ws: f32[4], %wz: f32[4]) -> (f32[batch, 8], f32[8, 4]) {
  %xq = fake_quantize(%x, %s, %z) : f32[batch, 8]
  %wq = fake_quantize(%w, %ws, %wz) {axis = 1, qmax = 127, qmin = -127} : f32[8, 4]
  return %xq, %wq
}
)",
      // dense linear algebra (multi-output factorizations)
      R"(graph @linalg(%a: f64[b, 4, 4], %r: f64[b, 4, 2], %t: f32[6, 4]) -> (f64[b, 4, 4], i64[b, 4], f64[b, 4, 4], f32[6, 4], f32[4, 4], f32[6, 4], f32[4], f32[4, 4], f64[b, 4], f64[b, 4, 4], f64[b, 4, 2], f64[b, 4, 2], f64[b], f64[b], f64[b], f32[4, 2]) {
  %lu, %perm = lu(%a) : f64[b, 4, 4], i64[b, 4]
  %l = cholesky(%a) : f64[b, 4, 4]
  %q, %rr = qr(%t) : f32[6, 4], f32[4, 4]
  %u, %s, %vh = svd(%t) : f32[6, 4], f32[4], f32[4, 4]
  %w, %v = eigh(%a) : f64[b, 4], f64[b, 4, 4]
  %x = triangular_solve(%l, %r) {lower = 1, transpose = 1, unit_diagonal = 0} : f64[b, 4, 2]
  %y = solve(%a, %r) : f64[b, 4, 2]
  %d = det(%a) : f64[b]
  %sg, %ld = slogdet(%a) : f64[b], f64[b]
  %z = lstsq(%t, %q) : f32[4, 4]
  %z2 = strided_slice(%z) {sizes = [4, 2], starts = [0, 0], steps = [1, 1]} : f32[4, 2]
  return %lu, %perm, %l, %q, %rr, %u, %s, %vh, %w, %v, %x, %y, %d, %sg, %ld, %z2
}
)",
      // 3D Gaussian splatting: projection, rasterization and their backward ops
      R"(graph @splat(%m: f32[n, 3], %ls: f32[n, 3], %q: f32[n, 4], %sh: f32[n, 4, 3], %o: f32[n], %bg: f32[3], %gi: f32[8, 16, 3]) -> (f32[8, 16, 3], f32[n, 3], f32[n, 2], f32[3]) {
  %xy, %con, %dep, %rad, %col = splat_project(%m, %ls, %q, %sh) {cx = 8.0, cy = 4.0, fx = 10.0, fy = 10.0, height = 8, near = 0.2, viewmat = [1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 3.0, 0.0, 0.0, 0.0, 1.0], width = 16} : f32[n, 2], f32[n, 3], f32[n], f32[n], f32[n, 3]
  %img = splat_rasterize(%xy, %con, %col, %o, %dep, %rad, %bg) {height = 8, tile = 8, width = 16} : f32[8, 16, 3]
  %gxy, %gcon, %gcol, %go, %gbg = splat_rasterize_backward(%xy, %con, %col, %o, %dep, %rad, %bg, %gi) {height = 8, width = 16} : f32[n, 2], f32[n, 3], f32[n, 3], f32[n], f32[3]
  %gm, %gls, %gq, %gsh = splat_project_backward(%m, %ls, %q, %sh, %gxy, %gcon, %dep, %gcol) {cx = 8.0, cy = 4.0, fx = 10.0, fy = 10.0, height = 8, viewmat = [1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 3.0, 0.0, 0.0, 0.0, 1.0], width = 16} : f32[n, 3], f32[n, 3], f32[n, 4], f32[n, 4, 3]
  return %img, %gm, %gxy, %gbg
}
)",
      // CSR matrices as three tensors: SpMM, its transpose, SDDMM, a sparse solve and its
      // adjoint, and a matrix assembled from COO triplets
      R"(graph @sparse(%rp: i32[5], %ci: i32[nnz], %v: f64[nnz], %x: f64[6, 2], %b: f64[4], %cr: i32[7], %cc: i32[7], %cv: f64[7]) -> (f64[4, 2], f64[6, 2], f64[nnz], f64[4], f64[nnz], f64[4], f64[4, 2], i64[7]) {
  %y = spmv_csr(%rp, %ci, %v, %x) : f64[4, 2]
  %arp, %aci, %av, %pos = coo_to_csr(%cr, %cc, %cv) {cols = 6, rows = 4} : i32[5], i32[7], f64[7], i64[7]
  %ay = spmv_csr(%arp, %aci, %av, %x) : f64[4, 2]
  %t = spmv_csr(%rp, %ci, %v, %y) {cols = 6, transpose = 1} : f64[6, 2]
  %s = sddmm_csr(%rp, %ci, %y, %x) : f64[nnz]
  %z = sparse_solve(%rp, %ci, %v, %b) {method = "cholesky"} : f64[4]
  %gv, %gb = sparse_solve_backward(%rp, %ci, %v, %z, %b) {method = "cholesky"} : f64[nnz], f64[4]
  return %y, %t, %s, %z, %gv, %gb, %ay, %pos
}
)",
      // collectives (a tensor-parallel layer's communication)
      R"(graph @collectives(%x: f32[batch, 8]) -> (f32[batch, 8], f32[batch, 16], f32[batch, 4], f32[batch, 8]) {
  %s = all_reduce(%x) {reduce = "max"} : f32[batch, 8]
  %g = all_gather(%x) {axis = 1, ranks = 2} : f32[batch, 16]
  %r = reduce_scatter(%x) {axis = -1, ranks = 2} : f32[batch, 4]
  %b = broadcast(%x) {root = 1} : f32[batch, 8]
  return %s, %g, %r, %b
}
)",
      // data-dependent output sizes: each node's count symbol is bound when it runs
      R"(graph @data_dependent(%x: f32[4, 5], %b: f32[1, 6, 4], %s: f32[1, 2, 6], %k: i64[]) -> (i64[2, nz], f32[4, u], i64[kept, 3], i64[len], f32[k, 5]) {
  %n = nonzero(%x) {count = "nz"} : i64[2, nz]
  %y, %i, %inv, %c = unique(%x) {axis = 1, count = "u", sorted = 0} : f32[4, u], i64[u], i64[5], i64[u]
  %keep = non_max_suppression(%b, %s, %k) {center_point_box = 1, count = "kept"} : i64[kept, 3]
  %r = range(%k, %k, %k) {count = "len"} : i64[len]
  %tv, %ti = top_k(%x, %k) {axis = 0, count = "k", largest = 0} : f32[k, 5], i64[k, 5]
  return %n, %y, %keep, %r, %tv
}
)",
      // a loop run by the host: its body a graph in text IR, its iteration count a symbol
      R"(graph @loop(%m: i64[], %c: bool[], %x: f32[3], %w: f32[3]) -> (f32[3], f32[it, 3]) {
  %y, %s = loop(%m, %c, %x, %w) {body = "graph @body(%i: i64[], %c: bool[], %v: f32[3], %w: f32[3]) -> (bool[], f32[3], f32[3]) {\n  %v2 = mul(%v, %w) : f32[3]\n  %c2 = not(%c) : bool[]\n  return %c2, %v2, %v2\n}\n", count = "it", num_state = 1} : f32[3], f32[it, 3]
  return %y, %s
}
)",
      // primitive level: strict primitives plus a natively claimed composite with static shapes
      R"(primitive @strict(%x: f32[2, 3], %y: f32[3]) -> (f32[2, 3], f32[2, 4]) {
  %y2 = reshape(%y) {shape = [1, 3]} : f32[1, 3]
  %yb = expand(%y2) {shape = [2, 3]} : f32[2, 3]
  %s = add(%x, %yb) : f32[2, 3]
  %w = param "w" : f32[3, 4]
  %mm = matmul(%s, %w) : f32[2, 4]
  %r = reduce_sum(%mm) {axes = [1], keepdims = 1} : f32[2, 1]
  return %s, %mm
}
)",
      // names that need care: quoted graph name, quoted dims, numeric-looking value names
      R"(graph @"my model/v2"(%input.0: f32["batch size", 3], %0: f32[3]) -> (f32["batch size", 3]) {
  %1 = add(%input.0, %0) loc("node with \"quotes\"\nand a newline") : f32["batch size", 3]
  %out-1 = mul(%1, %1) : f32["batch size", 3]
  return %out-1
}
)",
      // no inputs, no outputs
      R"(graph @empty() -> () {
  return
}
)",
  };
  return c;
}

::testing::AssertionResult round_trips(const std::string& text) {
  auto g = parse_graph(text, "corpus");
  if (!g) return ::testing::AssertionFailure() << "parse failed: " << g.status().message() << "\n" << text;
  Status v = verify_graph(*g);
  if (!v) return ::testing::AssertionFailure() << "verify failed: " << v.message() << "\n" << text;
  std::string printed = print_graph(*g);
  if (printed != text)
    return ::testing::AssertionFailure() << "printed text differs:\n--- expected\n" << text << "--- got\n" << printed;
  auto g2 = parse_graph(printed, "reprinted");
  if (!g2) return ::testing::AssertionFailure() << "reparse failed: " << g2.status().message();
  if (print_graph(*g2) != printed) return ::testing::AssertionFailure() << "second print differs";
  return ::testing::AssertionSuccess();
}

// Structural equality of what the text carries.
void expect_same_structure(const Graph& a, const Graph& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.level, b.level);
  ASSERT_EQ(a.inputs.size(), b.inputs.size());
  ASSERT_EQ(a.outputs.size(), b.outputs.size());
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  for (size_t k = 0; k < a.inputs.size(); ++k) EXPECT_EQ(a.type(a.inputs[k]), b.type(b.inputs[k]));
  for (size_t k = 0; k < a.outputs.size(); ++k) EXPECT_EQ(a.type(a.outputs[k]), b.type(b.outputs[k]));
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    const Node& x = a.nodes[i];
    const Node& y = b.nodes[i];
    EXPECT_EQ(x.op, y.op) << "node " << i;
    EXPECT_TRUE(x.attrs == y.attrs) << "node " << i << " (" << op_name(x.op) << ")";
    EXPECT_EQ(x.name, y.name) << "node " << i;
    EXPECT_EQ(x.native, y.native) << "node " << i;
    ASSERT_EQ(x.outputs.size(), y.outputs.size());
    for (size_t k = 0; k < x.outputs.size(); ++k) EXPECT_EQ(a.type(x.outputs[k]), b.type(y.outputs[k]));
    ASSERT_EQ(x.inputs.size(), y.inputs.size());
  }
}

TEST(TextRoundTrip, CorpusPrintsBackExactly) {
  for (const std::string& text : corpus()) EXPECT_TRUE(round_trips(text));
}

TEST(TextRoundTrip, CorpusCoversEveryOp) {
  std::set<Op> used;
  for (const std::string& text : corpus()) {
    auto g = parse_graph(text);
    ASSERT_TRUE(g) << g.status().message();
    for (const Node& n : g->nodes) used.insert(n.op);
  }
  std::string missing;
#define RLX_CHECK_OP(id, name, cls, family) \
  if (!used.count(Op::id)) missing += std::string(" ") + name;
  RLX_OP_LIST(RLX_CHECK_OP)
#undef RLX_CHECK_OP
  EXPECT_EQ(missing, "") << "ops with no text example:" << missing;
  EXPECT_EQ(static_cast<int>(used.size()), kNumOps);
  for (int i = 0; i < kNumOps; ++i) EXPECT_EQ(op_from_name(op_info(static_cast<Op>(i)).name), static_cast<Op>(i));
}

TEST(TextRoundTrip, SpecExampleWithCommentsAndInferredTypes) {
  const char* src = R"(
# comment to end of line
graph @mlp(%x: f32[batch, 784]) -> (f32[batch]) {   # trailing comment
  %w1 = param "fc1.weight" : f32[784, 128]
  %b1 = constant dense<[0.5, -1.0]> : f32[2]
  %s  = constant dense<1.0> : f32[]
  %h  = matmul(%x, %w1)                       # type inferred
  %a  = gelu(%h) {approximate = "tanh"} : f32[batch, 128]
  %p0, %p1 = split(%a) {axis = 1, sizes = [64, 64]}
  %r  = reduce_sum(%a) {keepdims = 0, axes = [1]} loc("/encoder/ReduceSum") : f32[batch]
  return %r
}
)";
  const char* canonical = R"(graph @mlp(%x: f32[batch, 784]) -> (f32[batch]) {
  %w1 = param "fc1.weight" : f32[784, 128]
  %b1 = constant dense<[0.5, -1.0]> : f32[2]
  %s = constant dense<1.0> : f32[]
  %h = matmul(%x, %w1) : f32[batch, 128]
  %a = gelu(%h) {approximate = "tanh"} : f32[batch, 128]
  %p0, %p1 = split(%a) {axis = 1, sizes = [64, 64]} : f32[batch, 64], f32[batch, 64]
  %r = reduce_sum(%a) {axes = [1], keepdims = 0} loc("/encoder/ReduceSum") : f32[batch]
  return %r
}
)";
  auto g = parse_graph(src, "mlp");
  ASSERT_TRUE(g) << g.status().message();
  EXPECT_TRUE(verify_graph(*g));
  EXPECT_EQ(print_graph(*g), canonical);
  EXPECT_TRUE(round_trips(canonical));
  // What the parser records.
  EXPECT_EQ(g->name, "mlp");
  EXPECT_EQ(g->level, IrLevel::graph);
  ASSERT_EQ(g->inputs.size(), 1u);
  EXPECT_EQ(g->values[g->inputs[0]].name, "x");
  EXPECT_EQ(g->nodes[0].op, Op::Param);
  EXPECT_EQ(g->nodes[0].attrs.s("name"), "fc1.weight");
  EXPECT_EQ(g->nodes[4].outputs.size(), 1u);
  EXPECT_EQ(g->nodes[5].outputs.size(), 2u);
  EXPECT_EQ(g->values[g->nodes[5].outputs[1]].name, "p1");
  EXPECT_EQ(g->nodes[6].name, "/encoder/ReduceSum");
  EXPECT_EQ(g->type(g->outputs[0]), (TensorType{DType::f32, {Dim::symbol("batch")}}));
}

TEST(TextRoundTrip, GenericFormsPrintShort) {
  // The generic spellings of constant and param parse to the same nodes as the short forms.
  const char* src = R"(graph @g() -> (f32[2], f32[3]) {
  %c = constant() {value = dense<f32[2], [1.0, 2.0]>}
  %w = param() {dtype = f32, name = "w", shape = [3]} : f32[3]
  %d = constant dense<i32[2, 2], [1, 2, 3, 4]>
  return %c, %w
}
)";
  auto g = parse_graph(src);
  ASSERT_TRUE(g) << g.status().message();
  EXPECT_EQ(print_graph(*g), R"(graph @g() -> (f32[2], f32[3]) {
  %c = constant dense<[1.0, 2.0]> : f32[2]
  %w = param "w" : f32[3]
  %d = constant dense<[[1, 2], [3, 4]]> : i32[2, 2]
  return %c, %w
}
)");
  // A float attribute written as an int is accepted (the table reads ints as floats).
  auto h = parse_graph("graph @h(%x: f32[2]) {\n  %y = leaky_relu(%x) {alpha = 1}\n  return %y\n}\n");
  ASSERT_TRUE(h) << h.status().message();
  EXPECT_DOUBLE_EQ(h->nodes[0].attrs.f("alpha"), 1.0);
  EXPECT_TRUE(verify_graph(*h));
  EXPECT_TRUE(round_trips(print_graph(*h)));
}

TEST(TextRoundTrip, SymbolicParamKeepsItsType) {
  const char* text = R"(graph @p() -> (f32[vocab, 8], f32[?, 2]) {
  %emb = param "embed.weight" : f32[vocab, 8]
  %u = param "u" : f32[?, 2]
  return %emb, %u
}
)";
  EXPECT_TRUE(round_trips(text));
  auto g = parse_graph(text);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->nodes[0].attrs.ints("shape"), (std::vector<int64_t>{0, 8}));
  EXPECT_EQ(g->type(g->outputs[0]).shape[0], Dim::symbol("vocab"));
  EXPECT_TRUE(g->type(g->outputs[1]).shape[0].is_unknown());
}

// Every dtype, extreme values, and splats: the tensor bytes survive the round trip.
TEST(TextRoundTrip, ConstantsOfEveryDtype) {
  const char* text = R"(graph @consts() -> () {
  %f32 = constant dense<[0.1, -0.0, 3.4028235e+38, 1e-45, inf, -inf]> : f32[6]
  %f16 = constant dense<[0.099975586, 65504.0, -2.0, 5.9604645e-08]> : f16[4]
  %bf16 = constant dense<[0.100097656, -3.3895314e+38, 1.0]> : bf16[3]
  %f64 = constant dense<[0.1, 5e-324, 1.7976931348623157e+308, -1e-300, 123456789012345680.0]> : f64[5]
  %c64 = constant dense<[(1.0, -2.5), (0.0, 0.1)]> : c64[2]
  %i8 = constant dense<[-128, 127, 0]> : i8[3]
  %u8 = constant dense<[0, 255]> : u8[2]
  %i16 = constant dense<[-32768, 32767]> : i16[2]
  %u16 = constant dense<[0, 65535]> : u16[2]
  %i32 = constant dense<[-2147483648, 2147483647]> : i32[2]
  %u32 = constant dense<[0, 4294967295]> : u32[2]
  %i64 = constant dense<[-9223372036854775808, 9223372036854775807, 9007199254740993]> : i64[3]
  %u64 = constant dense<[0, 18446744073709551615]> : u64[2]
  %bool = constant dense<[[true, false], [false, true]]> : bool[2, 2]
  %i4 = constant dense<[-8, 7, 0]> : i4[3]
  %u4 = constant dense<[[0, 15], [3, 4]]> : u4[2, 2]
  %splat = constant dense<0.5> : f32[2, 3]
  %scalar = constant dense<7> : i64[]
  %empty = constant dense<[]> : f32[0, 3]
  %nan = constant dense<nan> : f64[]
  %one = constant dense<1.0> : f32[1]
  %ints = constant dense<[[[1, 2], [3, 4]], [[5, 6], [7, 8]]]> : i32[2, 2, 2]
  return
}
)";
  ASSERT_TRUE(round_trips(text));
  auto g = parse_graph(text);
  ASSERT_TRUE(g);
  auto tensor = [&](size_t node) { return g->nodes[node].attrs.tensor("value"); };
  EXPECT_EQ(tensor(11)->data<int64_t>()[2], 9007199254740993);  // not representable as a double
  EXPECT_EQ(tensor(12)->data<uint64_t>()[1], std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(tensor(3)->data<double>()[1], std::numeric_limits<double>::denorm_min());
  EXPECT_TRUE(std::signbit(tensor(0)->data<float>()[1]));
  EXPECT_EQ(tensor(0)->data<float>()[0], 0.1f);
  EXPECT_EQ(tensor(4)->get_imag(0), -2.5);
  EXPECT_EQ(tensor(16)->numel(), 6);
  EXPECT_EQ(tensor(16)->get_f64(5), 0.5);
  EXPECT_EQ(tensor(14)->get_f64(0), -8.0);
  EXPECT_EQ(tensor(15)->get_f64(1), 15.0);
  EXPECT_EQ(tensor(13)->get_f64(3), 1.0);

  // Built in code from random bits: bytes are preserved exactly.
  Graph h;
  GraphBuilder b(h);
  OpBuilder o(b);
  std::mt19937_64 rng(1234);
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64, DType::u64, DType::i32, DType::c64}) {
    Tensor t = Tensor::zeros(dt, {3, 5});
    for (size_t k = 0; k < t.nbytes(); ++k) t.bytes()[k] = static_cast<uint8_t>(rng());
    // NaN payloads are not text; replace NaNs with a number.
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (std::isnan(t.get_f64(i))) t.set_f64(i, 1.25);
      if (dt == DType::c64 && std::isnan(t.get_imag(i))) t.set_imag(i, 2.5);
    }
    o.constant(t);
  }
  ASSERT_TRUE(o.ok()) << o.status().message();
  auto h2 = parse_graph(print_graph(h));
  ASSERT_TRUE(h2) << h2.status().message();
  expect_same_structure(h, *h2);
}

TEST(TextRoundTrip, FloatAttributesAreExact) {
  std::mt19937_64 rng(42);
  std::vector<double> values = {0.1, 1.0 / 3.0, 1e-300, 5e-324, 1.7976931348623157e308, -0.0, 1e22, 123456.0,
                                std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()};
  for (int i = 0; i < 200; ++i) {
    uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, 8);
    if (std::isfinite(d)) values.push_back(d);
  }
  for (double v : values) {
    Graph g;
    ValueId x = g.add_input("x", TensorType{DType::f32, {4}});
    auto y = g.add_node(Op::LeakyRelu, {x}, Attrs{{"alpha", v}});
    ASSERT_TRUE(y);
    g.outputs = {(*y)[0]};
    std::string text = print_graph(g);
    auto g2 = parse_graph(text);
    ASSERT_TRUE(g2) << g2.status().message() << "\n" << text;
    const AttrValue* a = g2->nodes[0].attrs.find("alpha");
    ASSERT_TRUE(a && std::holds_alternative<double>(*a)) << text;
    double back = std::get<double>(*a);
    EXPECT_EQ(std::memcmp(&back, &v, 8), 0) << text;
    EXPECT_EQ(print_graph(*g2), text);
  }
  // NaN reads back as NaN.
  Graph g;
  ValueId x = g.add_input("x", TensorType{DType::f32, {4}});
  g.outputs = {(*g.add_node(Op::LeakyRelu, {x}, Attrs{{"alpha", std::nan("")}}))[0]};
  auto g2 = parse_graph(print_graph(g));
  ASSERT_TRUE(g2);
  EXPECT_TRUE(std::isnan(g2->nodes[0].attrs.f("alpha")));
}

TEST(TextRoundTrip, EveryAttributeKindFormats) {
  using text::format_attr_value;
  EXPECT_EQ(format_attr_value(AttrValue(int64_t{-3})), "-3");
  EXPECT_EQ(format_attr_value(AttrValue(2.0)), "2.0");
  EXPECT_EQ(format_attr_value(AttrValue(1e-05)), "1e-05");
  EXPECT_EQ(format_attr_value(AttrValue(std::string("a\"b\\c\nd\x01"))), R"("a\"b\\c\nd\x01")");
  EXPECT_EQ(format_attr_value(AttrValue(std::vector<int64_t>{1, -2})), "[1, -2]");
  EXPECT_EQ(format_attr_value(AttrValue(std::vector<int64_t>{})), "[]");
  EXPECT_EQ(format_attr_value(AttrValue(std::vector<double>{1.0, 2.5})), "[1.0, 2.5]");
  EXPECT_EQ(format_attr_value(AttrValue(DType::bf16)), "bf16");
  EXPECT_EQ(format_attr_value(AttrValue(Tensor::from_vector<double>(DType::f32, {2}, {1.0, 2.0}))),
            "dense<f32[2], [1.0, 2.0]>");
  EXPECT_EQ(format_attr_value(AttrValue(Tensor::from_vector<double>(DType::i8, {2, 2}, {3, 3, 3, 3}))),
            "dense<i8[2, 2], 3>");
  EXPECT_EQ(text::format_type(TensorType{DType::f32, {Dim::symbol("n"), Dim::unknown(), 3, Dim::symbol("a b")}}),
            R"(f32[n, ?, 3, "a b"])");

  // Each kind through the parser, on ops that take it: int, float, string, ints, dtype and
  // tensor here; float lists have no op in the table today, so their text form is covered by
  // the formatter above and the parser's list reader by the error table.
  const char* text = R"(graph @kinds(%x: f32[4, 6], %b: bool[4, 6]) -> (f16[4, 6], f32[2, 6], f32[4, 6]) {
  %c = cast(%x) {to = f16} : f16[4, 6]
  %s = slice(%x) {ends = [2], starts = [0]} : f32[2, 6]
  %g = gelu(%x) {approximate = "none"} : f32[4, 6]
  %l = leaky_relu(%g) {alpha = 0.2} : f32[4, 6]
  %k = constant dense<[1, 2]> : i64[2]
  %m = argmax(%l) {axis = 1, keepdims = 1} : i64[4, 1]
  return %c, %s, %l
}
)";
  EXPECT_TRUE(round_trips(text));
}

TEST(TextRoundTrip, GraphsBuiltInCode) {
  Graph g;
  g.name = "built";
  GraphBuilder b(g);
  OpBuilder o(b);
  ValueId x = g.add_input("x", TensorType{DType::f32, {Dim::symbol("batch"), 16}});
  ValueId w = o.param("fc.weight", TensorType{DType::f32, {16, 8}});
  ValueId bias = o.param("fc.bias", TensorType{DType::f32, {8}});
  b.set_next_name("/fc/MatMul");
  ValueId h = o.add(o.matmul(x, w), bias);
  ValueId a = o.gelu(h, "tanh");
  ValueId s = o.softmax(a, -1);
  auto parts = o.split(s, 1, {3, 5});
  ValueId r = o.reduce_sum(parts[1], {1}, false);
  ValueId c = o.scalar(2.5, DType::f32);
  ValueId m = o.mul(r, c);
  ASSERT_TRUE(o.ok()) << o.status().message();
  g.values[a].name = "act";                 // valid, unique: kept
  g.values[s].name = "act";                 // duplicate: numbered
  g.values[r].name = "has space";           // invalid: numbered
  g.values[m].name = "3";                   // looks like a number: kept, others avoid it
  g.values[h].name = "";                    // unnamed
  g.outputs = {m, parts[0], x};
  ASSERT_TRUE(verify_graph(g));

  std::string text = print_graph(g);
  auto g2 = parse_graph(text, "built");
  ASSERT_TRUE(g2) << g2.status().message() << "\n" << text;
  ASSERT_TRUE(verify_graph(*g2)) << verify_graph(*g2).message();
  expect_same_structure(g, *g2);
  EXPECT_EQ(print_graph(*g2), text);
  EXPECT_EQ(g2->values[g2->outputs[0]].name, "3");
  EXPECT_EQ(g2->values[g2->inputs[0]].name, "x");
  EXPECT_NE(text.find("%act = gelu"), std::string::npos) << text;
  EXPECT_EQ(text.find("has space"), std::string::npos) << text;
  EXPECT_NE(text.find("loc(\"/fc/MatMul\")"), std::string::npos) << text;
  // Weight names travel through param.
  std::vector<std::string> weights;
  for (const Node& n : g2->nodes)
    if (n.op == Op::Param) weights.push_back(n.attrs.s("name"));
  EXPECT_EQ(weights, (std::vector<std::string>{"fc.weight", "fc.bias"}));

  // The primitive level prints with its own keyword and round-trips too.
  Graph p;
  p.level = IrLevel::primitive;
  GraphBuilder pb(p);
  OpBuilder po(pb);
  ValueId px = p.add_input("x", TensorType{DType::f32, {2, 3}});
  ValueId py = po.exp(po.add(px, po.full(1.0, DType::f32, {2, 3})));
  ASSERT_TRUE(po.ok()) << po.status().message();
  p.outputs = {py};
  p.nodes.back().native = true;  // the device claimed the exp
  ASSERT_TRUE(verify_graph(p)) << verify_graph(p).message();
  std::string ptext = print_graph(p);
  EXPECT_EQ(ptext.rfind("primitive @main(", 0), 0u) << ptext;
  auto p2 = parse_graph(ptext);
  ASSERT_TRUE(p2) << p2.status().message() << "\n" << ptext;
  expect_same_structure(p, *p2);
  EXPECT_EQ(print_graph(*p2), ptext);
}

TEST(TextRoundTrip, ExamplesParseAndVerify) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(RLX_SOURCE_DIR) / "examples";
  int count = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".rlx") continue;
    ++count;
    auto g = parse_graph_file(entry.path().string());
    ASSERT_TRUE(g) << g.status().message();
    EXPECT_TRUE(verify_graph(*g)) << entry.path() << ": " << verify_graph(*g).message();
    EXPECT_TRUE(round_trips(print_graph(*g))) << entry.path();
  }
  EXPECT_GE(count, 2);
  auto mlp = parse_graph_file((dir / "mlp.rlx").string());
  ASSERT_TRUE(mlp) << mlp.status().message();
  auto paths = parse_graph_file((dir / "three_paths.rlx").string());
  ASSERT_TRUE(paths) << paths.status().message();
  std::set<Op> ops;
  for (const Node& n : paths->nodes) ops.insert(n.op);
  EXPECT_TRUE(ops.count(Op::MatMul) && ops.count(Op::Softmax) && ops.count(Op::Gelu));
  bool tanh_gelu = false;
  for (const Node& n : paths->nodes)
    if (n.op == Op::Gelu && n.attrs.s("approximate") == "tanh") tanh_gelu = true;
  EXPECT_TRUE(tanh_gelu);
}

// Every graph in docs/ir.md's code blocks parses, verifies and round-trips.
TEST(TextRoundTrip, DocsExamplesParse) {
  const std::string path = std::string(RLX_SOURCE_DIR) + "/docs/ir.md";
  std::FILE* f = std::fopen(path.c_str(), "rb");
  ASSERT_NE(f, nullptr) << path;
  std::string doc;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) doc.append(buf, n);
  std::fclose(f);
  int count = 0;
  for (size_t at = doc.find("```\n"); at != std::string::npos; at = doc.find("```\n", at)) {
    size_t start = at + 4;
    size_t end = doc.find("```", start);
    ASSERT_NE(end, std::string::npos);
    std::string block = doc.substr(start, end - start);
    at = end + 3;
    size_t first = block.find_first_not_of(" \n");
    std::string head = block.substr(first == std::string::npos ? 0 : first);
    // Graph blocks start with a comment or a graph keyword; grammar and error blocks do not,
    // and schematic blocks elide with "...".
    if (head.rfind("graph @", 0) != 0 && head.rfind("primitive @", 0) != 0 && head.rfind("# ", 0) != 0) continue;
    if (block.find("...") != std::string::npos) continue;
    ++count;
    auto g = parse_graph(block, "ir.md");
    ASSERT_TRUE(g) << g.status().message() << "\n" << block;
    EXPECT_TRUE(verify_graph(*g)) << verify_graph(*g).message();
    EXPECT_TRUE(round_trips(print_graph(*g)));
  }
  EXPECT_GE(count, 2);
}

TEST(TextRoundTrip, NativeFlag) {
  const char* text = R"(primitive @p(%x: f32[2, 3], %w: f32[3, 4]) -> (f32[2, 4]) {
  %y = native matmul(%x, %w) : f32[2, 4]
  %e = exp(%y) : f32[2, 4]
  return %e
}
)";
  ASSERT_TRUE(round_trips(text));
  auto g = parse_graph(text);
  ASSERT_TRUE(g);
  EXPECT_TRUE(g->nodes[0].native);
  EXPECT_FALSE(g->nodes[1].native);
}

// Truncations and byte mutations of valid text: the parser returns (a graph or an error that
// names the source) and never crashes or hangs.
TEST(TextRoundTrip, MutatedTextNeverCrashes) {
  std::mt19937 rng(7);
  const char bytes[] = "%@\"#[]{}()<>,:=-?0123456789.e_ax\n\t\\\x01\xff";
  int parsed = 0, failed = 0;
  for (const std::string& text : corpus()) {
    for (size_t cut = 0; cut < text.size(); cut += 3) {
      auto g = parse_graph(std::string_view(text).substr(0, cut), "cut");
      if (g) {
        ++parsed;
      } else {
        ++failed;
        EXPECT_EQ(g.status().message().rfind("cut:", 0), 0u) << g.status().message();
      }
    }
    for (int k = 0; k < 300; ++k) {
      std::string m = text;
      size_t at = rng() % m.size();
      switch (rng() % 3) {
        case 0: m[at] = bytes[rng() % (sizeof bytes - 1)]; break;
        case 1: m.erase(at, 1 + rng() % 8); break;
        default: m.insert(at, 1, bytes[rng() % (sizeof bytes - 1)]); break;
      }
      auto g = parse_graph(m, "mut");
      if (g) {
        ++parsed;
        // Whatever parses prints and parses back to the same text.
        std::string p = print_graph(*g);
        auto g2 = parse_graph(p);
        ASSERT_TRUE(g2) << g2.status().message() << "\n" << p;
        EXPECT_EQ(print_graph(*g2), p);
      } else {
        ++failed;
        EXPECT_EQ(g.status().message().rfind("mut:", 0), 0u) << g.status().message();
      }
    }
  }
  EXPECT_GT(failed, 0);
  EXPECT_GT(parsed, 0);
}

}  // namespace
}  // namespace rlx
