// The ops table: one row per op with arity, attributes and the inference rule.
#include <array>
#include <unordered_map>

#include <algorithm>

#include "infer_util.h"
#include "rlx/ops.h"

namespace rlx {
namespace {

using K = AttrKind;
using infer::Types;

OpInfo row(Op op, std::string_view name, OpClass cls, OpFamily family) {
  OpInfo r{op, name, cls, family, 1, 1, 1, {}, nullptr, ""};
  switch (family) {
    case OpFamily::source: r.min_inputs = r.max_inputs = 0; r.infer = infer::infer_source; break;
    case OpFamily::unary:
    case OpFamily::activation:
    case OpFamily::cast: r.infer = infer::infer_elementwise; break;
    case OpFamily::binary:
    case OpFamily::compare:
    case OpFamily::logical: r.min_inputs = r.max_inputs = 2; r.infer = infer::infer_elementwise; break;
    case OpFamily::ternary: r.min_inputs = r.max_inputs = 3; r.infer = infer::infer_elementwise; break;
    case OpFamily::reduce:
    case OpFamily::argreduce: r.infer = infer::infer_reduce; break;
    case OpFamily::movement: r.infer = infer::infer_movement; break;
    case OpFamily::contraction: r.min_inputs = r.max_inputs = 2; r.infer = infer::infer_contraction; break;
    case OpFamily::normalization: r.infer = infer::infer_normalization; break;
    case OpFamily::conv: r.infer = infer::infer_conv; break;
    case OpFamily::attention: r.infer = infer::infer_attention; break;
    case OpFamily::quant: r.infer = infer::infer_quant; break;
    case OpFamily::linalg: r.infer = infer::infer_linalg; break;
    case OpFamily::splat: r.infer = infer::infer_splat; break;
    case OpFamily::sparse: r.infer = infer::infer_sparse; break;
    case OpFamily::collective: r.infer = infer::infer_collective; break;
    case OpFamily::data_dependent: r.infer = infer::infer_data_dependent; break;
  }
  return r;
}

// Dense linear algebra (docs/scientific.md): f32/f64, batched over leading dims.
template <class AttrsFn, class ArityFn, class AtFn>
void add_linalg_rows(AttrsFn attrs, ArityFn arity, AtFn at) {
  attrs(Op::Lu, {}, "LU with partial pivoting of a square A [..., n, n]: outputs lu (unit-lower L below the "
        "diagonal, U on and above it) and perm (i64 [..., n]) with A[perm, :] = L U");
  at(Op::Lu).num_outputs = 2;
  attrs(Op::Cholesky, {}, "lower Cholesky factor L of the SPD matrix (A + A^T) / 2, A [..., n, n]");
  attrs(Op::Qr, {}, "reduced QR of A [..., m, n]: q [..., m, k], r [..., k, n], k = min(m, n), diag(r) >= 0");
  at(Op::Qr).num_outputs = 2;
  attrs(Op::Svd, {}, "reduced SVD of A [..., m, n]: u [..., m, k], s [..., k] descending, vh [..., k, n]; "
        "each column of u has its largest-magnitude entry positive");
  at(Op::Svd).num_outputs = 3;
  attrs(Op::Eigh, {}, "eigendecomposition of the symmetric (A + A^T) / 2: w [..., n] ascending and v [..., n, n] "
        "(columns are eigenvectors, each with its largest-magnitude entry positive)");
  at(Op::Eigh).num_outputs = 2;
  attrs(Op::TriangularSolve, {{"lower", K::i64}, {"transpose", K::i64}, {"unit_diagonal", K::i64}},
        "X with op(A) X = B, A [..., n, n] triangular (lower=1 default reads the lower triangle), "
        "B [..., n, k]; op(A) = A^T when transpose=1; unit_diagonal=1 takes diag(A) as ones");
  arity(Op::TriangularSolve, 2, 2);
  attrs(Op::Solve, {}, "X with A X = B (LU with partial pivoting), A [..., n, n], B [..., n, k]");
  arity(Op::Solve, 2, 2);
  attrs(Op::Det, {}, "determinant of A [..., n, n]");
  attrs(Op::Slogdet, {}, "sign and log|det| of A [..., n, n] (sign 0 and log|det| -inf when singular)");
  at(Op::Slogdet).num_outputs = 2;
  attrs(Op::Lstsq, {}, "least squares: X minimizing ||A X - B||, A [..., m, n] with m >= n and full column rank, "
        "B [..., m, k] -> [..., n, k]");
  arity(Op::Lstsq, 2, 2);
}

// 3D Gaussian splatting (docs/splatting.md): f32/f64, one camera per node given as attributes.
template <class AttrsFn, class ArityFn, class AtFn>
void add_splat_rows(AttrsFn attrs, ArityFn arity, AtFn at) {
  const std::vector<AttrSpec> camera = {{"viewmat", K::f64s, true}, {"fx", K::f64, true}, {"fy", K::f64, true},
                                        {"cx", K::f64, true},       {"cy", K::f64, true}, {"width", K::i64, true},
                                        {"height", K::i64, true},   {"near", K::f64}};
  attrs(Op::SplatProject, camera,
        "3D Gaussians means [N, 3], log_scales [N, 3], quats [N, 4] (w x y z, normalized here), sh [N, K, 3] "
        "(K = 1, 4, 9 or 16: SH degree 0..3) through the pinhole camera (viewmat: 16 values, row-major "
        "world-to-camera) -> means2d [N, 2], conics [N, 3] (inverse EWA covariance J W S W^T J^T + 0.3 I: a b c), "
        "depths [N], radii [N] (3 sigma in pixels, 0 = culled), colors [N, 3] (SH + 0.5, clamped at 0)");
  arity(Op::SplatProject, 4, 4);
  at(Op::SplatProject).num_outputs = 5;
  attrs(Op::SplatProjectBackward, camera,
        "splat_project's vector-Jacobian product: means, log_scales, quats, sh, and the gradients of means2d, "
        "conics, depths, colors -> gradients of means, log_scales, quats, sh");
  arity(Op::SplatProjectBackward, 8, 8);
  at(Op::SplatProjectBackward).num_outputs = 4;
  attrs(Op::SplatRasterize, {{"width", K::i64, true}, {"height", K::i64, true}, {"tile", K::i64}},
        "tile binning (tile x tile pixels, default 16), depth sorting and front-to-back alpha compositing of "
        "means2d [N, 2], conics [N, 3], colors [N, 3], opacities [N], depths [N], radii [N] over background [3] "
        "-> image [height, width, 3]; alpha = min(0.99, o exp(-d^T conic d / 2)), skipped below 1/255, stops "
        "before transmittance falls under 1e-4 (as the original 3DGS)");
  arity(Op::SplatRasterize, 7, 7);
  attrs(Op::SplatRasterizeBackward, {{"width", K::i64, true}, {"height", K::i64, true}, {"tile", K::i64}},
        "splat_rasterize's vector-Jacobian product: its 7 inputs and the image gradient [height, width, 3] -> "
        "gradients of means2d, conics, colors, opacities, background");
  arity(Op::SplatRasterizeBackward, 8, 8);
  at(Op::SplatRasterizeBackward).num_outputs = 5;
}

// Sparse matrices given as three CSR tensors (docs/scientific.md): row_ptr [n+1] and col_idx
// [nnz] (i32 or i64, one dtype), values [nnz] (f32 or f64).
template <class AttrsFn, class ArityFn, class AtFn>
void add_sparse_rows(AttrsFn attrs, ArityFn arity, AtFn at) {
  attrs(Op::CooToCsr, {{"rows", K::i64, true}, {"cols", K::i64, true}},
        "the CSR arrays of the rows x cols matrix given as COO triplets: rows [nnz], cols [nnz] (i32 or i64, one "
        "dtype), values [nnz] (f32 or f64) -> row_ptr [rows+1], col_idx [nnz], values [nnz] (entries ordered by row, "
        "then column, then their COO position; duplicates kept side by side, which the other sparse ops read as their "
        "sum), position i64 [nnz] "
        "(where each COO entry went: csr_values[position[k]] = values[k]); indices checked at run time");
  arity(Op::CooToCsr, 3, 3);
  at(Op::CooToCsr).num_outputs = 4;
  attrs(Op::SpmvCsr, {{"transpose", K::i64}, {"cols", K::i64}},
        "y = A x for the CSR matrix A (row_ptr [n+1], col_idx [nnz], values [nnz]) and x [m] or [m, k] "
        "(SpMV / SpMM) -> [n] or [n, k]; transpose=1: y = A^T x with x [n] or [n, k] -> [cols] or [cols, k] "
        "(cols required); index data is checked at run time (row_ptr monotone from 0 to nnz, columns in range)");
  arity(Op::SpmvCsr, 4, 4);
  attrs(Op::SddmmCsr, {},
        "sampled dense-dense product on A's pattern: out[p] = sum_j a[i, j] b[c, j] for each stored entry p at "
        "(i, c) of the CSR pattern (row_ptr [n+1], col_idx [nnz]), a [n] or [n, k], b [m] or [m, k] -> [nnz] "
        "(the values gradient of spmv_csr)");
  arity(Op::SddmmCsr, 4, 4);
  attrs(Op::SparseSolve, {{"method", K::str}},
        "x with A x = b for the square CSR matrix A (row_ptr [n+1], col_idx [nnz], values [nnz]) and b [n] or "
        "[n, k], by a sparse direct factorization (method: lu (UMFPACK, default) or cholesky (CHOLMOD, A SPD, "
        "reads the upper triangle, entries (i, c) with c >= i, mirrored)); columns increasing within a row, a repeated "
        "column (coo_to_csr keeps duplicates) counting as the sum of its entries");
  arity(Op::SparseSolve, 4, 4);
  attrs(Op::SparseSolveBackward, {{"method", K::str}},
        "sparse_solve's vector-Jacobian product (the adjoint solve): row_ptr, col_idx, values, x, g = dloss/dx "
        "-> dloss/dvalues [nnz] (-(A^-T g)[i] x[c] on the pattern), dloss/db = A^-T g");
  arity(Op::SparseSolveBackward, 5, 5);
  at(Op::SparseSolveBackward).num_outputs = 2;
}

std::vector<OpInfo> build_table() {
  std::vector<OpInfo> t;
#define RLX_OP_ROW(id, name, cls, family) t.push_back(row(Op::id, name, OpClass::cls, OpFamily::family));
  RLX_OP_LIST(RLX_OP_ROW)
#undef RLX_OP_ROW
  auto at = [&](Op op) -> OpInfo& { return t[static_cast<size_t>(op)]; };
  auto attrs = [&](Op op, std::vector<AttrSpec> a, std::string_view doc) {
    at(op).attrs = std::move(a);
    at(op).doc = doc;
  };
  auto arity = [&](Op op, int lo, int hi) { at(op).min_inputs = lo; at(op).max_inputs = hi; };

  attrs(Op::Constant, {{"value", K::tensor, true}}, "a tensor given inline");
  attrs(Op::Param, {{"name", K::str, true}, {"dtype", K::dtype, true}, {"shape", K::i64s, true}},
        "a named weight from the graph's weight store");
  attrs(Op::Iota, {{"dtype", K::dtype, true}, {"shape", K::i64s}, {"axis", K::i64, true}},
        "each element is its index along `axis`; the shape is the `shape` attribute, or the shape of "
        "the optional input (whose values are not read), so iota follows symbolic dims");
  arity(Op::Iota, 0, 1);
  attrs(Op::Random,
        {{"dtype", K::dtype, true}, {"shape", K::i64s, true}, {"dist", K::str, true},
         {"seed", K::i64}, {"a", K::f64}, {"b", K::f64}},
        "counter-based random numbers: uniform in [a, b) or normal(mean a, std b)");
  attrs(Op::Mod, {{"fmod", K::i64}}, "remainder: fmod=1 takes the dividend's sign (C fmod), "
        "fmod=0 the divisor's (Python %)");
  attrs(Op::IsInf, {{"detect_positive", K::i64}, {"detect_negative", K::i64}}, "");
  attrs(Op::Cast, {{"to", K::dtype, true}}, "convert to another dtype (C conversion; float to "
        "int truncates; to bool is x != 0; c64 to a real type takes the real part, as NumPy; a real "
        "type to c64 has imaginary part 0)");
  attrs(Op::Abs, {}, "absolute value; for c64 the modulus hypot(re, im), as f32");
  attrs(Op::Real, {}, "real part of a c64 value, as f32");
  attrs(Op::Imag, {}, "imaginary part of a c64 value, as f32");
  attrs(Op::Conj, {}, "complex conjugate of a c64 value (re, -im)");
  attrs(Op::Angle, {}, "argument of a c64 value, atan2(im, re) in [-pi, pi], as f32");
  attrs(Op::Complex, {}, "the c64 value re + i im from f32 real and imaginary parts (numpy broadcasting)");
  for (Op op : {Op::ReduceSum, Op::ReduceMax, Op::ReduceMin, Op::ReduceProd, Op::ReduceMean})
    attrs(op, {{"axes", K::i64s}, {"keepdims", K::i64}},
          "reduce over `axes` (all axes when empty); keepdims defaults to 1");
  for (Op op : {Op::ArgMax, Op::ArgMin})
    attrs(op, {{"axis", K::i64}, {"keepdims", K::i64}, {"select_last_index", K::i64}},
          "index (i64) of the extreme along `axis`; ties take the first index unless select_last_index");
  attrs(Op::Reshape, {{"shape", K::i64s, true}, {"allowzero", K::i64}},
        "same elements, new shape; 0 copies the input dim (unless allowzero), -1 is inferred");
  attrs(Op::Transpose, {{"perm", K::i64s}}, "permute axes (reverses them when perm is absent)");
  attrs(Op::Expand, {{"shape", K::i64s, true}}, "numpy broadcast to `shape`");
  attrs(Op::StridedSlice, {{"starts", K::i64s, true}, {"steps", K::i64s, true}, {"sizes", K::i64s, true}},
        "out[i] = in[starts + i * steps] on every axis; sizes is the output shape");
  attrs(Op::Slice,
        {{"starts", K::i64s, true}, {"ends", K::i64s, true}, {"axes", K::i64s}, {"steps", K::i64s}},
        "ONNX Slice: negative indices count from the end, ranges are clamped");
  attrs(Op::Pad, {{"pads", K::i64s, true}, {"value", K::f64}, {"mode", K::str}},
        "pads = [begin_0..begin_n, end_0..end_n]; mode constant|reflect|edge");
  attrs(Op::Concat, {{"axis", K::i64, true}}, "join along `axis`");
  arity(Op::Concat, 1, -1);
  attrs(Op::Gather, {{"axis", K::i64}},
        "out = data[..., indices, ...] along axis; negative indices wrap, out-of-range clamp");
  arity(Op::Gather, 2, 2);
  attrs(Op::ScatterAdd, {{"axis", K::i64}},
        "out = base; out[..., indices[j], ...] += updates[..., j, ...] (inverse of gather)");
  arity(Op::ScatterAdd, 3, 3);
  attrs(Op::Scatter, {{"axis", K::i64}, {"batch_dims", K::i64}},
        "out = base; out[..., indices[j], ...] = updates[..., j, ...] (the last write of an index wins); "
        "with batch_dims = n the first n dims of indices are base's first n (n <= axis) and each "
        "batch has its own indices: out[b, ..., indices[b, j], ...] = updates[b, ..., j, ...] (per-"
        "sequence KV-cache slots); with the output donated to base it writes only the updated slots");
  arity(Op::Scatter, 3, 3);
  attrs(Op::Dot,
        {{"lhs_batch", K::i64s}, {"rhs_batch", K::i64s}, {"lhs_contract", K::i64s, true},
         {"rhs_contract", K::i64s, true}, {"out_type", K::dtype}},
        "general contraction: out = [batch..., lhs free..., rhs free...]; out_type (optional; f32 "
        "for f16 or bf16 operands) is the result's dtype: the products are summed in it and never "
        "rounded to the operands' type (StableHLO's preferred_element_type)");
  attrs(Op::Gelu, {{"approximate", K::str}}, "approximate = none (erf) | tanh");
  attrs(Op::LeakyRelu, {{"alpha", K::f64}}, "alpha defaults to 0.01");
  attrs(Op::Softmax, {{"axis", K::i64}}, "axis defaults to -1");
  attrs(Op::LogSoftmax, {{"axis", K::i64}}, "axis defaults to -1");
  attrs(Op::LayerNorm, {{"axis", K::i64}, {"epsilon", K::f64}},
        "normalize over axes [axis, rank); inputs x, optional scale and bias");
  arity(Op::LayerNorm, 1, 3);
  attrs(Op::RmsNorm, {{"axis", K::i64}, {"epsilon", K::f64}},
        "x / sqrt(mean(x^2) + eps) * scale over axes [axis, rank)");
  arity(Op::RmsNorm, 1, 2);
  attrs(Op::MatMul, {{"out_type", K::dtype}},
        "numpy matmul: batched, broadcast, 1-D operands promoted; out_type (optional; f32 for f16 or "
        "bf16 operands) is the result's dtype, as dot's");
  attrs(Op::Gemm, {{"alpha", K::f64}, {"beta", K::f64}, {"trans_a", K::i64}, {"trans_b", K::i64}},
        "alpha * op(A) op(B) + beta * C");
  arity(Op::Gemm, 2, 3);
  attrs(Op::Embedding, {}, "rows of table [V, D] selected by integer ids");
  arity(Op::Embedding, 2, 2);
  attrs(Op::Split, {{"axis", K::i64}, {"sizes", K::i64s, true}}, "one output per size");
  at(Op::Split).num_outputs = -1;
  attrs(Op::Squeeze, {{"axes", K::i64s}}, "drop size-1 axes (all of them when empty)");
  attrs(Op::Unsqueeze, {{"axes", K::i64s, true}}, "insert size-1 axes at output positions");
  attrs(Op::Conv2d,
        {{"strides", K::i64s}, {"pads", K::i64s}, {"dilations", K::i64s}, {"group", K::i64}, {"out_type", K::dtype}},
        "NCHW convolution; x, w [M, C/group, kh, kw], optional bias [M]; pads [t, l, b, r]; out_type "
        "(optional; f32 for f16 or bf16 x and w) is the result's dtype and the bias's: the products "
        "are summed in it and never rounded to the operands' type, as dot's");
  arity(Op::Conv2d, 2, 3);
  attrs(Op::MaxPool2d,
        {{"kernel", K::i64s, true}, {"strides", K::i64s}, {"pads", K::i64s}, {"dilations", K::i64s},
         {"ceil_mode", K::i64}},
        "NCHW max pooling");
  attrs(Op::AvgPool2d,
        {{"kernel", K::i64s, true}, {"strides", K::i64s}, {"pads", K::i64s},
         {"count_include_pad", K::i64}, {"ceil_mode", K::i64}},
        "NCHW average pooling");
  attrs(Op::Attention,
        {{"causal", K::i64}, {"scale", K::f64}, {"layout", K::str}, {"softcap", K::f64}, {"out_type", K::dtype},
         {"int8_scores", K::i64}},
        "softmax(q k^T * scale + mask) v; q [B,Hq,Sq,D], k/v [B,Hkv,Sk,D]; optional mask (bool: "
        "true attends, or additive float); causal aligns the last query with the last key; layout "
        "bhsd (default) or bshd gives q/k/v/out as [B,S,H,D] (the mask stays [B,H,Sq,Sk]); softcap c > 0 "
        "soft-caps the scaled scores to c * tanh(s / c) before the mask (Gemma 2); scores, softmax and the "
        "value product sum in f32 for f16/bf16 operands, the value product taking the unnormalized probabilities "
        "exp(s - max) rounded to the operands' type and the result divided by their f32 sum, and out_type (optional; f32 for f16/bf16 operands) "
        "keeps the result in f32 instead of rounding it to the operands' type; int8_scores 1 quantizes each row of q "
        "and of k (over the head dimension) to int8 before the score product, as int8_matmul quantizes x: scale "
        "max(max|row| / 127, 1e-30), q = clamp(round_half_even(row / scale), -127, 127)");
  arity(Op::Attention, 3, 4);
  attrs(Op::Rope, {{"theta", K::f64}, {"interleaved", K::i64}, {"layout", K::str}, {"inv_freq", K::f64s}},
        "rotary position embedding of x [B,H,S,D] (layout bshd: [B,S,H,D]) at integer positions [S] or [B,S]; "
        "pair i rotates by pos * theta^(-2i/D), or by pos * inv_freq[i] when given (D/2 scaled frequencies)");
  arity(Op::Rope, 2, 2);
  attrs(Op::PagedAttention,
        {{"block_size", K::i64, true}, {"scale", K::f64}, {"layout", K::str}, {"softcap", K::f64}},
        "attention over a KV cache kept in blocks: q [B,Hq,S,D] (layout bshd: [B,S,Hq,D]), k_pool/v_pool "
        "[Hkv, N*block_size, D] (N blocks of block_size slots per head), block_table int [B, T] (sequence b's "
        "logical key j is slot block_table[b, j / block_size] * block_size + j % block_size), mask [B,1|Hq,S,"
        "T*block_size] (bool: true attends, or additive float); = attention(q, K_b, V_b, mask) with K_b the "
        "gathered keys; scale and softcap as attention's; block ids outside [0, N) are an error");
  arity(Op::PagedAttention, 5, 5);
  attrs(Op::Dequantize, {{"format", K::str, true}, {"cols", K::i64, true}},
        "u8 rows of quantized blocks [..., row_bytes] to f32 [..., cols]");
  attrs(Op::QMatMul, {{"format", K::str, true}},
        "x [..., K] times a quantized weight w [N, row_bytes(K)] (rows are output features) -> [..., N]");
  arity(Op::QMatMul, 2, 2);
  attrs(Op::Int8MatMul, {{"x_scale", K::f64}},
        "int8 linear layer: x f32 [..., K] quantized to int8 (per token: scale max|row| / 127, or per tensor: "
        "the x_scale attribute), times w i8 [N, K] (rows are output features) with int32 sums, then "
        "* x scale * w_scale (f32 [N] or []) + optional bias f32 [N] -> f32 [..., N]");
  arity(Op::Int8MatMul, 3, 4);
  attrs(Op::FakeQuantize, {{"axis", K::i64}, {"qmin", K::i64}, {"qmax", K::i64}},
        "quantize-dequantize (quantization-aware training): (clamp(round_half_even(x / scale) + zero_point, "
        "qmin, qmax) - zero_point) * scale, same type as x; scale and zero_point (integral values) have x's "
        "dtype and shape [] (per tensor) or [C] with C = x.shape[axis] (per channel, axis given); qmin/qmax "
        "default -128/127 (int8); its gradient is straight-through: dy where round(x / scale) + zero_point is "
        "inside [qmin, qmax], zero outside, none for scale and zero_point");
  arity(Op::FakeQuantize, 3, 3);
  add_linalg_rows(attrs, arity, at);
  add_splat_rows(attrs, arity, at);
  add_sparse_rows(attrs, arity, at);
  // group: which of the compiled graph's communicator groups the node runs over (default 0,
  // dist::CommunicatorGroups); grad=identity: Megatron's all-reduce after a row-split product,
  // whose gradient is the output gradient as it is (the replicated loss counts once per group)
  attrs(Op::AllReduce, {{"reduce", K::str}, {"group", K::i64}, {"grad", K::str}},
        "every rank's x reduced elementwise over the ranks (reduce: sum (default), max, min, prod); "
        "every rank gets the result; group selects the communicator group (default 0); grad: sum (default, "
        "the adjoint) or identity (Megatron's row-parallel all-reduce: the output gradient passes unreduced)");
  attrs(Op::AllGather, {{"axis", K::i64}, {"ranks", K::i64, true}, {"group", K::i64}},
        "every rank's x concatenated along axis (default 0) in rank order; ranks is the group size");
  attrs(Op::ReduceScatter, {{"axis", K::i64}, {"ranks", K::i64, true}, {"reduce", K::str}, {"group", K::i64}},
        "x reduced over the ranks (reduce: sum default) and split along axis into ranks equal blocks; "
        "rank r gets block r");
  attrs(Op::Broadcast, {{"root", K::i64}, {"group", K::i64}}, "the root rank's x (default rank 0), on every rank");
  // count: the symbol of the output dimension the values decide (one per node)
  attrs(Op::NonZero, {{"count", K::str, true}},
        "indices of the non-zero elements of x (any rank, row-major order) -> i64 [rank(x), count]");
  attrs(Op::Unique, {{"count", K::str, true}, {"axis", K::i64}, {"sorted", K::i64}},
        "the distinct elements of x (flattened when axis is absent) or distinct slices along axis -> y "
        "([count], or x's shape with count at axis), indices i64 [count] (first occurrences), inverse i64 "
        "[numel(x) or x.shape[axis]] (each element's or slice's index in y), counts i64 [count]; sorted=1 "
        "(default) orders y ascending (slices lexicographically), sorted=0 by first occurrence");
  at(Op::Unique).num_outputs = 4;
  attrs(Op::NonMaxSuppression, {{"count", K::str, true}, {"center_point_box", K::i64}},
        "ONNX NonMaxSuppression: boxes f32 [B, N, 4] (corners y1, x1, y2, x2 in either order, or with "
        "center_point_box=1 x_center, y_center, width, height), scores f32 [B, C, N], optional "
        "max_output_boxes_per_class (i64, one value; absent or 0: no boxes), iou_threshold (f32, one value; "
        "default 0), score_threshold (f32, one value; absent: none) -> i64 [count, 3] rows (batch, class, box): "
        "per batch and class, boxes by descending score (ties: lower index first) with a score above the "
        "threshold, each kept unless its IoU with a kept box exceeds iou_threshold");
  arity(Op::NonMaxSuppression, 2, 5);
  attrs(Op::Range, {{"count", K::str, true}},
        "ONNX Range of run-time values: start, limit, delta (one value each, one real dtype) -> [count] with "
        "count = max(ceil((limit - start) / delta), 0), element i = start + i * delta (floats accumulate the "
        "additions in the element type); a delta of 0 is an error");
  arity(Op::Range, 3, 3);
  attrs(Op::TopK, {{"count", K::str, true}, {"axis", K::i64}, {"largest", K::i64}},
        "the k largest (largest=1, default) or smallest elements of x along axis (default -1), k a run-time "
        "integer (one value, 0 <= k <= the axis' size) -> values (x's shape with count at axis) and their indices "
        "(i64), sorted (largest: descending, NaN first; smallest: ascending, NaN last), ties by lower index");
  arity(Op::TopK, 2, 2);
  at(Op::TopK).num_outputs = 2;
  attrs(Op::Loop, {{"count", K::str, true}, {"body", K::str, true}, {"num_state", K::i64, true}, {"bounded", K::i64}},
        "a loop run by the host, iteration by iteration, while i < M and cond (ONNX Loop with a trip count or "
        "condition known only at run time; bounded=0: no trip count, M is ignored and cond alone ends it): "
        "inputs M (i64, one value), cond (bool, one value), num_state "
        "loop-carried values, then values the body reads from outside; body: a graph in text IR taking "
        "(i: i64[], cond: bool[], the carried values, the outside values) and returning (cond: bool, the "
        "carried values with their input types, per-iteration scan values) -> the final carried values, "
        "then each scan value stacked as [count, ...]");
  arity(Op::Loop, 2, -1);
  at(Op::Loop).num_outputs = -1;
  return t;
}

const std::vector<OpInfo>& table() {
  static const std::vector<OpInfo> t = build_table();
  return t;
}

}  // namespace

std::string_view op_family_name(OpFamily f) {
  switch (f) {
    case OpFamily::source: return "source";
    case OpFamily::unary: return "unary";
    case OpFamily::binary: return "binary";
    case OpFamily::compare: return "compare";
    case OpFamily::logical: return "logical";
    case OpFamily::ternary: return "ternary";
    case OpFamily::cast: return "cast";
    case OpFamily::reduce: return "reduce";
    case OpFamily::argreduce: return "argreduce";
    case OpFamily::movement: return "movement";
    case OpFamily::contraction: return "contraction";
    case OpFamily::activation: return "activation";
    case OpFamily::normalization: return "normalization";
    case OpFamily::conv: return "conv";
    case OpFamily::attention: return "attention";
    case OpFamily::quant: return "quant";
    case OpFamily::linalg: return "linalg";
    case OpFamily::splat: return "splat";
    case OpFamily::sparse: return "sparse";
    case OpFamily::collective: return "collective";
    case OpFamily::data_dependent: return "data-dependent";
  }
  return "?";
}

const OpInfo& op_info(Op op) { return table()[static_cast<size_t>(op)]; }

std::optional<Op> op_from_name(std::string_view name) {
  static const auto* index = [] {
    auto* m = new std::unordered_map<std::string_view, Op>();
    for (const OpInfo& r : table()) (*m)[r.name] = r.op;
    return m;
  }();
  auto it = index->find(name);
  if (it == index->end()) return std::nullopt;
  return it->second;
}

bool defined_on_complex(Op op) {
  switch (op_info(op).family) {
    case OpFamily::source:
    case OpFamily::movement:
    case OpFamily::contraction:
    case OpFamily::ternary:
    case OpFamily::cast: return true;
    default: break;
  }
  switch (op) {
    case Op::Neg: case Op::Abs: case Op::Real: case Op::Imag: case Op::Conj: case Op::Angle:
    case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Complex:
    case Op::Equal: case Op::NotEqual: case Op::ReduceSum: case Op::ReduceProd: return true;
    default: return false;
  }
}

bool is_elementwise(Op op) {
  switch (op_info(op).family) {
    case OpFamily::unary:
    case OpFamily::binary:
    case OpFamily::compare:
    case OpFamily::logical:
    case OpFamily::ternary:
    case OpFamily::cast: return is_primitive(op);
    default: return false;
  }
}

Expected<std::vector<TensorType>> infer_types(Op op, const NodeSig& sig) {
  const OpInfo& info = op_info(op);
  const int n = static_cast<int>(sig.inputs.size());
  if (n < info.min_inputs || (info.max_inputs >= 0 && n > info.max_inputs)) {
    std::string want = info.max_inputs < 0 ? cat("at least ", info.min_inputs)
                       : info.min_inputs == info.max_inputs ? cat(info.min_inputs)
                                                            : cat(info.min_inputs, " to ", info.max_inputs);
    return infer::fail(ErrorCode::verify_error, op, sig, "takes ", want, " inputs, got ", n);
  }
  for (const auto& [name, value] : sig.attrs.items()) {
    const AttrSpec* spec = nullptr;
    for (const AttrSpec& s : info.attrs)
      if (s.name == name) spec = &s;
    if (!spec)
      return infer::fail(ErrorCode::verify_error, op, sig, "unknown attribute '", name, "'");
    AttrKind k = attr_kind(value);
    bool ok = k == spec->kind || (spec->kind == AttrKind::f64 && k == AttrKind::i64) ||
              (spec->kind == AttrKind::f64s && k == AttrKind::i64s) ||
              (spec->kind == AttrKind::i64s && k == AttrKind::i64);
    if (!ok)
      return infer::fail(ErrorCode::verify_error, op, sig, "attribute '", name, "' must be ",
                         attr_kind_name(spec->kind), ", got ", attr_kind_name(k));
  }
  for (const AttrSpec& s : info.attrs)
    if (s.required && !sig.attrs.has(s.name))
      return infer::fail(ErrorCode::verify_error, op, sig, "missing required attribute '", s.name, "'");
  return info.infer(op, sig);
}

namespace infer {

std::string where(Op op, const NodeSig& sig) {
  if (sig.node_name.empty()) return cat(op_name(op));
  return cat("node '", sig.node_name, "' (", op_name(op), ")");
}

Status expect_float(Op op, const NodeSig& sig, int i) {
  DType t = sig.inputs[i].dtype;
  if (is_float(t)) return Status::ok();
  return fail(ErrorCode::dtype_error, op, sig, "input ", i, " must be a float type, got ", dtype_name(t));
}
Status expect_int(Op op, const NodeSig& sig, int i) {
  DType t = sig.inputs[i].dtype;
  if (is_int(t) && !is_packed(t)) return Status::ok();
  return fail(ErrorCode::dtype_error, op, sig, "input ", i, " must be an integer type, got ", dtype_name(t));
}
Status expect_bool(Op op, const NodeSig& sig, int i) {
  DType t = sig.inputs[i].dtype;
  if (t == DType::boolean) return Status::ok();
  return fail(ErrorCode::dtype_error, op, sig, "input ", i, " must be bool, got ", dtype_name(t));
}
Status expect_numeric(Op op, const NodeSig& sig, int i) {
  DType t = sig.inputs[i].dtype;
  if (t != DType::boolean && !is_packed(t)) return Status::ok();
  return fail(ErrorCode::dtype_error, op, sig, "input ", i, " must be numeric, got ", dtype_name(t));
}
Status expect_same_dtype(Op op, const NodeSig& sig, int a, int b) {
  if (sig.inputs[a].dtype == sig.inputs[b].dtype) return Status::ok();
  return fail(ErrorCode::dtype_error, op, sig, "inputs ", a, " and ", b, " must have the same dtype, got ",
              dtype_name(sig.inputs[a].dtype), " and ", dtype_name(sig.inputs[b].dtype));
}

Expected<std::vector<int>> normalize_axes(Op op, const NodeSig& sig, std::vector<int64_t> axes,
                                          int rank, bool all_if_empty) {
  std::vector<int> r;
  if (axes.empty() && all_if_empty) {
    for (int i = 0; i < rank; ++i) r.push_back(i);
    return r;
  }
  for (int64_t a : axes) {
    if (a < -rank || a >= rank)
      return fail(ErrorCode::out_of_range, op, sig, "axis ", a, " is out of range for rank ", rank);
    r.push_back(static_cast<int>(a < 0 ? a + rank : a));
  }
  std::sort(r.begin(), r.end());
  if (std::adjacent_find(r.begin(), r.end()) != r.end())
    return fail(ErrorCode::verify_error, op, sig, "axes repeat");
  return r;
}

}  // namespace infer
}  // namespace rlx
