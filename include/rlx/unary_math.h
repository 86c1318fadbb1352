// rlx/unary_math.h: the elementwise math functions of one float argument (exp, log, sqrt, tanh,
// erf, sin, floor, ...), one row each. Everything that knows such an op reads its row: the
// reference interpreter (the scalar it computes in double), the C-family renderer (the prelude
// function generated code calls), the scheduler (whether it is costly enough to materialize
// rather than recompute), the ONNX importer (the ONNX op it maps from one to one), autodiff
// (its derivative) and the Python module (rlx.<name>). A new such op is its enum entry in
// RLX_OP_LIST (rlx/ops.h, family unary), its row here, its functions in the preludes
// (src/codegen/*_prelude.cpp) and its conformance case.
//
// Neg, Abs and Sign (defined on integers too), Not, IsNan and IsInf (bool results) and the
// complex parts are unary ops without a row: their semantics differ per dtype.
#pragma once

#include <span>

#include "rlx/op_builder.h"
#include "rlx/ops.h"

namespace rlx {

struct UnaryMathOp {
  Op op;
  // The value in double: what the reference interpreter computes (then rounds to the dtype).
  double (*reference)(double x);
  // The generated C, OpenCL C, CUDA, GLSL and WGSL text for an f32 and an f64 operand: `%`
  // stands for the operand; the functions are the preludes' (or the language's own).
  const char* f32_call;
  const char* f64_call;
  // The GLSL prelude computes it in double (GLSL's transcendental built-ins are float-only).
  bool glsl_f64;
  // Costly enough that a value read many times broadcast is materialized once (sched).
  bool transcendental;
  // The ONNX op imported one to one as this op (nullptr: none).
  const char* onnx;
  // The gradient of the input from the output's gradient g, input x and output y (a value of
  // dtype t); nullptr: piecewise constant, zero almost everywhere (as PyTorch and JAX).
  ValueId (*vjp)(OpBuilder& o, ValueId g, ValueId x, ValueId y, DType t);
};

// Every row, in RLX_OP_LIST order.
std::span<const UnaryMathOp> unary_math_ops();
// The row of `op`; nullptr when `op` has none.
const UnaryMathOp* unary_math(Op op);
// `row`'s generated call for `operand` of float dtype `t` (f64 or a 32-bit compute type).
std::string unary_math_call(const UnaryMathOp& row, DType t, const std::string& operand);

}  // namespace rlx
