// ref/interpreter.h: the reference interpreter, the ground truth every rlx device is tested
// against. It evaluates the primitive ops of the ops table on host Tensors with plain scalar code.
//
// What it runs
//   A Graph at either IR level holding only primitive ops (sources constant/param/iota/random,
//   elementwise unary/binary/compare/logical, where, cast, reduce_sum/max/min/prod,
//   argmax/argmin, reshape, transpose, expand, strided_slice, pad, concat, gather, scatter_add,
//   dot). Both the strict primitive forms and the graph-level forms are accepted: numpy
//   broadcasting for elementwise ops and where, reductions with empty axes (= all axes) and
//   negative axes, expand with rank extension, reshape with 0 / -1, transpose without perm
//   (= reversed axes), pad modes constant / reflect / edge (and negative constant pads, which
//   crop). A composite op (relu, softmax, matmul, ...) is an ErrorCode::unsupported error naming
//   the node: the legalizer decomposes composites before the interpreter runs. The exception is
//   the linalg family (lu, cholesky, qr, svd, eigh, triangular_solve, solve, det, slogdet,
//   lstsq), which has no primitive decomposition: the interpreter runs those whole, with plain
//   loops in double (interp_linalg.cpp; conventions in src/linalg/conventions.h), the splat
//   family (splat_project, splat_rasterize and their backward ops), through the host kernels
//   of src/splat/ at the node's dtype (interp_splat.cpp), and so are the collectives
//   (all_reduce, all_gather, reduce_scatter, broadcast) over the communicator
//   given to interpret() (src/dist/collective_ops.h).
//
// Shapes
//   Graph inputs may have symbolic dims; they are bound from the given tensors (a symbol seen
//   twice must get the same size). Every node's output type is then re-derived from its
//   concrete input types with the ops table's inference rule and checked against the type
//   recorded in the graph (after binding): a static recorded dim must agree, an unknown one
//   (`?`) takes the inferred size, a symbol not bound by the inputs is bound on first sight.
//   So graph-level reshape with 0/-1 works, and a graph whose recorded types lie is an error
//   (ErrorCode::verify_error naming the node), never an out-of-bounds access.
//
// Numerics (the contract other devices are tested against)
//   - Float dtypes (f16, bf16, f32, f64) compute in double and convert when stored (f16/bf16
//     through f32 with rlx/dtype.h's round-to-nearest-even conversions). Reductions and dot
//     accumulate in double.
//   - Integer dtypes compute in 64 bits (int64 for signed, uint64 for unsigned; the arithmetic
//     itself is done in uint64 so it wraps and never has UB) and wrap to the dtype's width when
//     stored. Integer reductions, dot and scatter_add accumulate in 64-bit wrapping arithmetic,
//     which equals wrapping at the dtype's width throughout.
//     div truncates toward zero; x / 0 = 0; INT_MIN / -1 wraps (= INT_MIN).
//     mod with fmod=0 (default) is Python's %: the result has the divisor's sign; fmod=1 is C's
//     truncated remainder (the dividend's sign); x mod 0 = 0 for integers.
//     pow by repeated squaring (wrapping); a negative exponent gives 0 unless the base is 1
//     (-> 1) or -1 (-> +-1 by parity); 0 ** negative = 0.
//   - Floats follow IEEE: x / 0 = +-inf or NaN; float mod uses fmod (fmod=1) or
//     fmod + divisor-sign correction (fmod=0, a zero result takes the divisor's sign, as Python);
//     max/min propagate NaN (either operand NaN -> NaN); round is half to even; sign(+-0) = 0,
//     sign(NaN) = NaN; isinf honours detect_positive / detect_negative (default 1 each).
//     Comparisons with NaN are false except not_equal, which is true.
//   - bool values are 0/1; compare/logical ops on bool compare 0/1.
//   - cast: float -> int truncates toward zero, NaN -> 0, and saturates to the target's range
//     (+-inf too; negative -> 0 for unsigned targets). int -> int wraps (two's complement
//     truncation, as C and numpy). int -> float rounds to nearest (directly to f32/f64; to
//     f16/bf16 through f32). anything -> bool is x != 0 (NaN -> true). bool -> number is 0/1.
//     c64 -> real takes the real part (then as float -> target); real -> c64 has imaginary 0;
//     c64 -> bool is (re != 0 || im != 0).
//   - c64 (pair of f32, computed as complex<double>): neg, add, sub, mul, div, equal,
//     not_equal, where, cast, reduce_sum, reduce_prod, dot, and every movement op; conj;
//     real, imag, abs (std::abs: hypot(re, im)) and angle (std::arg: atan2(im, re)) give f32;
//     complex(re, im) builds c64 from two f32 values. Any other op on c64 is
//     ErrorCode::unsupported naming the op and dtype.
//   - Reductions over an empty axis: sum 0, prod 1 (max/min of empty are rejected by
//     inference). argmax/argmin give the first index of the extreme (the last with
//     select_last_index=1); NaN counts as the extreme for both (numpy); an empty axis with a
//     non-empty output is an ErrorCode::shape_error.
//   - gather / scatter_add indices (any integer dtype): a negative index wraps once (i + n),
//     then the index is clamped into [0, n-1], so no access is ever out of bounds. Gathering
//     from (or scattering into) an empty axis with a non-empty index set is an
//     ErrorCode::out_of_range error. scatter_add: out = base, then each update is added
//     (repeated indices accumulate); bool scatter_add is a logical or.
//   - dot: XLA dot_general with lhs_batch/rhs_batch/lhs_contract/rhs_contract; output dims are
//     batch dims, lhs free dims (in order), rhs free dims (in order).
//   - iota: each element is its index along `axis`. random: see random.h (counter i for
//     element i in row-major order; normal uses counters 2i and 2i + 1).
//   - Data movement ops and where copy elements bit for bit (NaN payloads, -0.0 and packed
//     i4/u4 nibbles are preserved).
//
// Inputs and outputs
//   Inputs come in g.inputs order and must match the graph input types (dtype, rank, static
//   dims, consistent symbols) and hold enough bytes: otherwise ErrorCode::invalid_argument
//   naming the input. Params are read from g.weights by their `name` attribute; a missing
//   weight is ErrorCode::invalid_argument naming it, a weight of the wrong dtype or shape is a
//   dtype_error / shape_error naming it. The outputs are fresh Tensors (never aliasing an
//   input, a weight, a constant attribute or another output) with the recorded output types,
//   in g.outputs order.
//
// Performance: scalar code with precomputed strides and no per-element allocation; a
// [64,128]x[128,256] dot or a 1M-element elementwise op takes a few milliseconds. Intermediate
// values are released after their last use.
#pragma once

#include <span>
#include <vector>

#include "backends/ref/random.h"
#include "rlx/graph.h"
#include "rlx/status.h"
#include "rlx/tensor.h"

namespace rlx::dist {
class Communicator;
}

namespace rlx::ref {

// Runs `g` on `inputs` (in g.inputs order) and returns the values of g.outputs. See the file
// comment for the exact semantics of every op.
Expected<std::vector<Tensor>> interpret(const Graph& g, std::span<const Tensor> inputs);
// The same, running the graph's collectives (all_reduce, ...) over `comm` (null: one process).
Expected<std::vector<Tensor>> interpret(const Graph& g, std::span<const Tensor> inputs, dist::Communicator* comm);

// Whether interpret() implements `op` on inputs of these types (for a device's capability
// query): false for composites and for c64 inputs to ops outside the c64 list above. The ops
// table's dtype rules still apply on top (interpret() re-checks them).
bool implements(Op op, std::span<const TensorType> inputs);

}  // namespace rlx::ref
