// rlx/ops.h: the single ops table. One row per op: its text name, whether it is a primitive
// (valid at both IR levels) or a composite (graph level only), its family, arity, attributes
// and the type-inference rule that checks attributes, dtypes and shapes.
//
// Primitives are the closed set the scheduler and renderers understand. At the primitive
// level their operands are strict: elementwise inputs have identical shapes (broadcasts are
// explicit `expand`s), slices and reshapes are fully normalized. At the graph level the same
// ops accept numpy broadcasting and ONNX-style attributes, and legalization makes them strict.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/attrs.h"
#include "rlx/shape.h"
#include "rlx/status.h"

namespace rlx {

// X(Enum, "text-name", class, family)
#define RLX_OP_LIST(X)                                              \
  /* sources */                                                     \
  X(Constant, "constant", primitive, source)                        \
  X(Param, "param", primitive, source)                              \
  X(Iota, "iota", primitive, source)                                \
  X(Random, "random", primitive, source)                            \
  /* elementwise unary */                                           \
  X(Neg, "neg", primitive, unary)                                   \
  X(Abs, "abs", primitive, unary)                                   \
  X(Exp, "exp", primitive, unary)                                   \
  X(Log, "log", primitive, unary)                                   \
  X(Sqrt, "sqrt", primitive, unary)                                 \
  X(Rsqrt, "rsqrt", primitive, unary)                               \
  X(Reciprocal, "reciprocal", primitive, unary)                     \
  X(Tanh, "tanh", primitive, unary)                                 \
  X(Sigmoid, "sigmoid", primitive, unary)                           \
  X(Erf, "erf", primitive, unary)                                   \
  X(Sin, "sin", primitive, unary)                                   \
  X(Cos, "cos", primitive, unary)                                   \
  X(Floor, "floor", primitive, unary)                               \
  X(Ceil, "ceil", primitive, unary)                                 \
  X(Round, "round", primitive, unary)                               \
  X(Sign, "sign", primitive, unary)                                 \
  X(Not, "not", primitive, unary)                                   \
  X(IsNan, "isnan", primitive, unary)                               \
  X(IsInf, "isinf", primitive, unary)                               \
  /* complex parts (c64 -> f32; conj c64 -> c64) */                 \
  X(Real, "real", primitive, unary)                                 \
  X(Imag, "imag", primitive, unary)                                 \
  X(Conj, "conj", primitive, unary)                                 \
  X(Angle, "angle", primitive, unary)                               \
  /* elementwise binary (numpy broadcasting at the graph level) */  \
  X(Add, "add", primitive, binary)                                  \
  X(Sub, "sub", primitive, binary)                                  \
  X(Mul, "mul", primitive, binary)                                  \
  X(Div, "div", primitive, binary)                                  \
  X(Pow, "pow", primitive, binary)                                  \
  X(Max, "max", primitive, binary)                                  \
  X(Min, "min", primitive, binary)                                  \
  X(Mod, "mod", primitive, binary)                                  \
  X(Complex, "complex", primitive, binary)                          \
  X(Equal, "equal", primitive, compare)                             \
  X(NotEqual, "not_equal", primitive, compare)                      \
  X(Less, "less", primitive, compare)                               \
  X(LessEqual, "less_equal", primitive, compare)                    \
  X(Greater, "greater", primitive, compare)                         \
  X(GreaterEqual, "greater_equal", primitive, compare)              \
  X(And, "and", primitive, logical)                                 \
  X(Or, "or", primitive, logical)                                   \
  X(Xor, "xor", primitive, logical)                                 \
  X(Where, "where", primitive, ternary)                             \
  X(Cast, "cast", primitive, cast)                                  \
  /* reductions */                                                  \
  X(ReduceSum, "reduce_sum", primitive, reduce)                     \
  X(ReduceMax, "reduce_max", primitive, reduce)                     \
  X(ReduceMin, "reduce_min", primitive, reduce)                     \
  X(ReduceProd, "reduce_prod", primitive, reduce)                   \
  X(ArgMax, "argmax", primitive, argreduce)                         \
  X(ArgMin, "argmin", primitive, argreduce)                         \
  /* movement */                                                    \
  X(Reshape, "reshape", primitive, movement)                        \
  X(Transpose, "transpose", primitive, movement)                    \
  X(Expand, "expand", primitive, movement)                          \
  X(StridedSlice, "strided_slice", primitive, movement)             \
  X(Pad, "pad", primitive, movement)                                \
  X(Concat, "concat", primitive, movement)                          \
  X(Gather, "gather", primitive, movement)                          \
  X(ScatterAdd, "scatter_add", primitive, movement)                 \
  X(Scatter, "scatter", primitive, movement)                         \
  /* contraction */                                                 \
  X(Dot, "dot", primitive, contraction)                             \
  /* composites: activations */                                     \
  X(Relu, "relu", composite, activation)                            \
  X(Gelu, "gelu", composite, activation)                            \
  X(Silu, "silu", composite, activation)                            \
  X(LeakyRelu, "leaky_relu", composite, activation)                 \
  X(Softplus, "softplus", composite, activation)                    \
  /* composites: reductions and normalizations */                   \
  X(ReduceMean, "reduce_mean", composite, reduce)                   \
  X(Softmax, "softmax", composite, normalization)                   \
  X(LogSoftmax, "log_softmax", composite, normalization)            \
  X(LayerNorm, "layer_norm", composite, normalization)              \
  X(RmsNorm, "rms_norm", composite, normalization)                  \
  /* composites: linear algebra and structure */                    \
  X(MatMul, "matmul", composite, contraction)                       \
  X(Gemm, "gemm", composite, contraction)                           \
  X(Embedding, "embedding", composite, movement)                    \
  X(Slice, "slice", composite, movement)                            \
  X(Split, "split", composite, movement)                            \
  X(Squeeze, "squeeze", composite, movement)                        \
  X(Unsqueeze, "unsqueeze", composite, movement)                    \
  /* composites: convolution and pooling (NCHW) */                  \
  X(Conv2d, "conv2d", composite, conv)                              \
  X(MaxPool2d, "max_pool2d", composite, conv)                       \
  X(AvgPool2d, "avg_pool2d", composite, conv)                       \
  /* composites: transformer blocks */                              \
  X(Attention, "attention", composite, attention)                   \
  X(Rope, "rope", composite, attention)                             \
  X(PagedAttention, "paged_attention", composite, attention)        \
  /* composites: block-quantized weights (GGUF formats) */          \
  X(Dequantize, "dequantize", composite, quant)                     \
  X(QMatMul, "qmatmul", composite, quant)                           \
  X(Int8MatMul, "int8_matmul", composite, quant)                    \
  X(FakeQuantize, "fake_quantize", composite, quant)                \
  /* composites: dense linear algebra (native kernels only) */      \
  X(Lu, "lu", composite, linalg)                                    \
  X(Cholesky, "cholesky", composite, linalg)                        \
  X(Qr, "qr", composite, linalg)                                    \
  X(Svd, "svd", composite, linalg)                                  \
  X(Eigh, "eigh", composite, linalg)                                \
  X(TriangularSolve, "triangular_solve", composite, linalg)         \
  X(Solve, "solve", composite, linalg)                              \
  X(Det, "det", composite, linalg)                                  \
  X(Slogdet, "slogdet", composite, linalg)                          \
  X(Lstsq, "lstsq", composite, linalg)                              \
  /* composites: 3D Gaussian splatting (native kernels only, docs/splatting.md) */ \
  X(SplatProject, "splat_project", composite, splat)                \
  X(SplatProjectBackward, "splat_project_backward", composite, splat) \
  X(SplatRasterize, "splat_rasterize", composite, splat)            \
  X(SplatRasterizeBackward, "splat_rasterize_backward", composite, splat) \
  /* composites: sparse matrices as three CSR tensors (docs/scientific.md) */ \
  X(CooToCsr, "coo_to_csr", composite, sparse)                      \
  X(SpmvCsr, "spmv_csr", composite, sparse)                         \
  X(SddmmCsr, "sddmm_csr", composite, sparse)                       \
  X(SparseSolve, "sparse_solve", composite, sparse)                 \
  X(SparseSolveBackward, "sparse_solve_backward", composite, sparse) \
  /* composites: collectives over the compiled model's communicator (docs/distributed.md) */ \
  X(AllReduce, "all_reduce", composite, collective)                 \
  X(AllGather, "all_gather", composite, collective)                 \
  X(ReduceScatter, "reduce_scatter", composite, collective)         \
  X(Broadcast, "broadcast", composite, collective)                 \
  /* composites: outputs whose shape depends on the data (run on the host by Model::run) */ \
  X(NonZero, "nonzero", composite, data_dependent)                  \
  X(Unique, "unique", composite, data_dependent)                    \
  X(NonMaxSuppression, "non_max_suppression", composite, data_dependent) \
  X(Range, "range", composite, data_dependent)                     \
  X(TopK, "top_k", composite, data_dependent)                      \
  X(Loop, "loop", composite, data_dependent)

enum class Op : uint16_t {
#define RLX_OP_ENUM(id, name, cls, family) id,
  RLX_OP_LIST(RLX_OP_ENUM)
#undef RLX_OP_ENUM
};

inline constexpr int kNumOps = 0
#define RLX_OP_COUNT(id, name, cls, family) +1
    RLX_OP_LIST(RLX_OP_COUNT)
#undef RLX_OP_COUNT
    ;

enum class OpClass : uint8_t { primitive, composite };
enum class OpFamily : uint8_t {
  source, unary, binary, compare, logical, ternary, cast, reduce, argreduce, movement,
  contraction, activation, normalization, conv, attention, quant,
  linalg,  // dense factorizations and solves: no primitive decomposition, native kernels only
  splat,   // 3D Gaussian splatting (rlx/splat.h): no primitive decomposition, native kernels only
  sparse,  // CSR matrix ops (rlx/sparse.h): no primitive decomposition, native kernels only
  collective,  // communication between ranks (rlx/comm.h): run natively by host devices
  // outputs with a dimension known only from the input values (nonzero, unique, nms, range,
  // top_k with a run-time k, loop's iteration count): the
  // `count` attribute names that dimension's symbol; Model::run computes such a node on the
  // host, binds the symbol and runs the rest on the device (docs/ir.md, "Data-dependent shapes")
  data_dependent,
};
std::string_view op_family_name(OpFamily f);

// What type inference sees of a node: input types, attributes, and a name for errors.
struct NodeSig {
  std::span<const TensorType> inputs;
  const Attrs& attrs;
  std::string_view node_name;  // for messages; may be empty
};

using InferFn = Expected<std::vector<TensorType>> (*)(Op op, const NodeSig& sig);

struct AttrSpec {
  std::string_view name;
  AttrKind kind;
  bool required = false;
};

struct OpInfo {
  Op op;
  std::string_view name;
  OpClass cls;
  OpFamily family;
  int min_inputs;
  int max_inputs;   // -1: any number
  int num_outputs;  // -1: decided by attributes (split)
  std::vector<AttrSpec> attrs;
  InferFn infer;
  std::string_view doc;
};

const OpInfo& op_info(Op op);
inline std::string_view op_name(Op op) { return op_info(op).name; }
std::optional<Op> op_from_name(std::string_view name);
inline bool is_primitive(Op op) { return op_info(op).cls == OpClass::primitive; }
// Elementwise primitives (unary, binary, compare, logical, ternary, cast).
bool is_elementwise(Op op);
// Whether `op` is defined on complex (c64) values: source, movement, contraction, ternary and
// cast ops, and the arithmetic that needs no order (neg, abs, real, imag, conj, angle, add,
// sub, mul, div, complex, equal, not_equal, reduce_sum, reduce_prod). Complex numbers have no
// order: no max/min, less/greater, argmax, sign, relu. The reference interpreter and the cpu's
// generated C compute exactly these.
bool defined_on_complex(Op op);

// Checks arity and attribute names/kinds against the table, then runs the op's inference.
// Errors name the node and say what was expected.
Expected<std::vector<TensorType>> infer_types(Op op, const NodeSig& sig);

// A block-quantized weight format (llama.cpp's GGUF types): `block_elems` values are stored
// in `block_bytes` bytes; a row of n values (n a multiple of block_elems) takes
// n / block_elems * block_bytes bytes.
struct QuantFormat {
  std::string_view name;   // "q8_0", "q4_k", ...
  int64_t block_elems;
  int64_t block_bytes;
};
// The format called `name`, or nullopt.
std::optional<QuantFormat> quant_format(std::string_view name);

// ONNX Slice semantics for one axis of size `dim`: negative indices count from the end,
// the range is clamped. Returns the first index read and the number of elements.
struct SliceRange {
  int64_t start;
  int64_t size;
};
SliceRange resolve_slice_range(int64_t start, int64_t end, int64_t step, int64_t dim);

// Verifies that a primitive node is in strict (primitive-level) form: identical elementwise
// shapes, fully normalized movement attributes, static shapes. Composites are not strict.
Status check_strict_primitive(Op op, const NodeSig& sig, std::span<const TensorType> outputs);

}  // namespace rlx
