// rlx/kernel_ir.h: the kernel level. A KernelProgram is a list of steps over buffers:
//   - native kernels: one graph-level or primitive node run by a library or hand-written
//     kernel (GEMM, fused attention), optionally with a generated epilogue;
//   - generated kernels: a fused group of primitives as a loop nest, described by scalar
//     expressions over loop variables (loads, arithmetic, reductions) and stores;
// plus the buffer plan (inputs, outputs, weights, constants, intermediates at arena offsets).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/attrs.h"
#include "rlx/ops.h"
#include "rlx/shape.h"
#include "rlx/status.h"
#include "rlx/tensor.h"

namespace rlx::kir {

enum class BufferKind : uint8_t { input, output, weight, constant, intermediate };
std::string_view buffer_kind_name(BufferKind k);

struct Buffer {
  DType dtype = DType::f32;
  Sizes sizes;             // logical shape; storage is contiguous row-major
  BufferKind kind = BufferKind::intermediate;
  std::string name;        // weight name or value label
  int io_index = -1;       // position among graph inputs / outputs
  int64_t arena_offset = -1;  // intermediates: byte offset in the arena
  int alias_of = -1;       // a view of the same bytes as another buffer (reshape)
  Tensor data;             // constants (and weights once bound)
  size_t bytes() const { return dtype_bytes(dtype, static_cast<size_t>(numel(sizes))); }
};

// Scalar expressions of a generated kernel, in SSA form (operands precede users).
enum class ExprKind : uint8_t {
  loop_var,   // value of loop `loop`
  iconst,     // integer constant `ival` (index math and integer dtypes)
  fconst,     // float constant `fval`
  load,       // buffer `buffer` at element index `a` (an i64 expression); with a guard c (a
              // boolean expression; -1: none) it reads only where c holds and is 0 elsewhere,
              // where its index may lie outside the buffer (a pad's bounds test)
  unary,      // `op` applied to a
  binary,     // `op` applied to a, b (arithmetic, comparisons, logical)
  select,     // a ? b : c
  cast,       // a converted to `dtype`
  idiv,       // floor division of a by b (index math, non-negative operands)
  imod,       // remainder of a by b (index math, non-negative operands)
  clamp,      // a clamped into [ival, ival2] (index math)
  reduce,     // `op` (reduce_sum/max/min/prod, argmax/argmin) of a over loops `loops`
  random,     // counter-based random number: seed `ival`, counter a; `fval` = a param, `fval2` = b
};
std::string_view expr_kind_name(ExprKind k);

struct Expr {
  ExprKind kind;
  DType dtype;          // result type (i64 for index math)
  Op op = Op::Add;      // unary/binary/reduce/random(dist as Op::Add uniform, Op::Mul normal)
  int a = -1, b = -1, c = -1;
  int64_t ival = 0, ival2 = 0;
  double fval = 0, fval2 = 0;
  int buffer = -1;      // load
  int loop = -1;        // loop_var
  std::vector<int> loops;  // reduce: the reduction loops it iterates
  bool operator==(const Expr& o) const;
};

struct Store {
  int buffer;
  int index;  // i64 expression
  int value;
  bool accumulate = false;  // buffer[index] += value (scatter); the kernel then runs serially
};

struct Loop {
  int64_t extent;
};

struct GeneratedKernel {
  std::string name;
  std::vector<Loop> loops;   // all loops: the first `domain_rank` are the output domain, in
                             // nesting order; the rest belong to reductions
  int domain_rank = 0;
  std::vector<Expr> exprs;
  std::vector<Store> stores;
  std::vector<int> args;     // program buffer ids in the order the kernel receives them
  std::vector<int> origins;  // graph-level nodes fused into this kernel (for the report)
  bool serial = false;       // must run on one thread (accumulating stores may collide)
  bool skip_if_aliased = false;  // a copy whose source and destination may be the same memory

  // Domain viewed as rows x cols: cols is the innermost domain loop, rows the rest.
  int64_t rows() const;
  int64_t cols() const;
};

struct NativeKernel {
  std::string name;
  Op op;
  Attrs attrs;
  std::vector<int> inputs;    // buffer ids
  std::vector<int> outputs;   // buffer ids
  std::vector<TensorType> input_types, output_types;
  std::string how;            // the device's description of the kernel
  int epilogue = -1;          // a generated kernel over the output's [rows, cols] run on each
                              // finished tile, or -1
  std::vector<int> origins;
};

struct Step {
  bool native;
  int index;  // into natives or generated
};

struct KernelProgram {
  std::vector<Buffer> buffers;
  std::vector<GeneratedKernel> generated;
  std::vector<NativeKernel> natives;
  std::vector<Step> steps;
  std::vector<int> inputs;    // buffer per graph input
  std::vector<int> outputs;   // buffer per graph output
  std::vector<std::pair<int, int>> donations;  // (output, input): may share memory
  size_t arena_bytes = 0;

  // The text form of the kernel level, complete and lossless (docs/ir.md, "The kernel
  // level"): every buffer (kind, io index, type, name, arena offset, view, constant data), the
  // program inputs and outputs, every native and generated kernel with every field (floats
  // in the shortest text that reads back exactly), the steps in order, donations and the
  // arena size. Kernels print in the order the steps first run them. Never fails, even on a
  // program that does not verify (ids that are unset print as negative numbers).
  // parse_kernel_program(p.to_text()) reproduces p for every p that passes verify_program.
  std::string to_text() const;
  // The same text for people (the executables' kernel listing, `rlx explain`): a buffer's data
  // of more than 64 values is summarised as `dense<N values not listed>` (not parseable), so
  // that a program with folded weight constants lists in microseconds, not seconds.
  std::string listing() const;

  // The buffer whose bytes b is (following views, alias_of, to the end).
  int root(int b) const;
  // The root buffers step `step` reads (a native's inputs and its epilogue's arguments, a
  // generated kernel's arguments) and writes (a native's outputs and its epilogue's stores, a
  // generated kernel's stores); a buffer may be listed more than once.
  std::vector<int> step_reads(size_t step) const;
  std::vector<int> step_writes(size_t step) const;
};

// Parses the text that KernelProgram::to_text() writes; print(parse(print(p))) == print(p).
// The result passes verify_program: a program that does not verify is an error with that
// verifier's code (verify_error). Every other error is ErrorCode::parse_error with a message
// "<source_name>:<line>:<col>: " naming the offending token; it never throws or aborts.
// Not carried exactly: NaN payloads and signs (NaN reads back as a quiet NaN) and constant
// data over 1 GiB (the text IR's limit on a dense literal).
Expected<KernelProgram> parse_kernel_program(std::string_view text, std::string_view source_name = "<text>");

// Checks buffer ids (views and their chains, which may not form a cycle; program inputs and
// outputs; the buffers of native kernels and generated kernels' arguments), kernel ids (steps,
// epilogues), expression operands (SSA order, dtypes of index math), loop ids, that
// every store and load index is an i64 expression, and that the arena plan has no overlap
// between buffers whose lifetimes intersect.
Status verify_program(const KernelProgram& p);

// What every device's Executable::run_into checks first: as many inputs and outputs as the
// program has, each with its buffer's dtype and shape and holding the bytes they need. Errors
// name the input or output (and its buffer's name).
Status check_run_io(const KernelProgram& p, std::span<const Tensor> inputs, std::span<const Tensor> outputs);
// Fresh tensors for the program's outputs (what Executable::run returns after run_into).
std::vector<Tensor> allocate_outputs(const KernelProgram& p);

}  // namespace rlx::kir
