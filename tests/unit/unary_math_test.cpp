// The rows of rlx/unary_math.h against what reads them: every unary op of the ops table is
// either a row or one of the ops whose semantics differ per dtype; every row's generated call
// names a function each dialect's prelude defines; and the renderer writes the row's call.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <string>

#include "codegen/c_renderer.h"
#include "codegen/dialect.h"
#include "rlx/unary_math.h"

namespace rlx {
namespace {

// The function a row's call names ("rlx_exp_f32" of "rlx_exp_f32(%)"); empty for an operator.
std::string function_of(const char* call) {
  std::string s(call);
  size_t n = 0;
  while (n < s.size() && (std::isalnum(static_cast<unsigned char>(s[n])) || s[n] == '_')) ++n;
  return n < s.size() && s[n] == '(' ? s.substr(0, n) : "";
}

TEST(UnaryMath, EveryUnaryOpHasARowOrASemanticsOfItsOwn) {
  // defined on integers too (neg, abs, sign), bool results (not, isnan, isinf), complex parts
  const std::set<Op> own = {Op::Neg, Op::Abs,  Op::Sign, Op::Not,  Op::IsNan,
                            Op::IsInf, Op::Real, Op::Imag, Op::Conj, Op::Angle};
  std::set<Op> rows;
  for (const UnaryMathOp& r : unary_math_ops()) {
    EXPECT_TRUE(rows.insert(r.op).second) << op_name(r.op) << " has two rows";
    EXPECT_EQ(op_info(r.op).family, OpFamily::unary) << op_name(r.op);
    EXPECT_EQ(unary_math(r.op), &r);
  }
  for (int i = 0; i < kNumOps; ++i) {
    const Op op = static_cast<Op>(i);
    if (op_info(op).family != OpFamily::unary || op_info(op).cls != OpClass::primitive) continue;
    EXPECT_TRUE(rows.count(op) || own.count(op))
        << op_name(op) << " is a primitive unary op without a row in rlx/unary_math.h";
  }
}

TEST(UnaryMath, EveryPreludeDefinesTheFunctionsRowsCall) {
  for (const UnaryMathOp& r : unary_math_ops()) {
    for (codegen::CTarget t : {codegen::CTarget::host, codegen::CTarget::opencl, codegen::CTarget::cuda, codegen::CTarget::hip, codegen::CTarget::glsl_vulkan,
                              codegen::CTarget::glsl_gl, codegen::CTarget::wgsl, codegen::CTarget::hlsl}) {
      const codegen::Dialect& d = codegen::dialect(t);
      const std::string prelude = d.prelude();
      std::vector<const char*> calls = {r.f32_call};
      // f64: not in WGSL (no 64-bit floats), and in GLSL and HLSL only where the prelude
      // computes it (shader_f64_math)
      const bool emulated_f64 = codegen::is_glsl(t) || t == codegen::CTarget::hlsl;
      if (t != codegen::CTarget::wgsl && (!emulated_f64 || r.glsl_f64)) calls.push_back(r.f64_call);
      for (const char* call : calls) {
        const std::string fn = function_of(call);
        if (fn.empty() || (d.frame != codegen::KernelFrame::glsl_shader && d.frame != codegen::KernelFrame::wgsl_shader &&
                           (fn == "floorf" || fn == "floor" || fn == "ceilf" || fn == "ceil")))
          continue;  // an operator, or C's own <math.h> function
        EXPECT_NE(prelude.find(fn), std::string::npos) << d.name << "'s prelude lacks " << fn << " (" << op_name(r.op) << ")";
      }
    }
  }
}

TEST(UnaryMath, TheRendererWritesTheRowsCall) {
  for (const UnaryMathOp& r : unary_math_ops()) {
    kir::GeneratedKernel k;
    k.name = "k";
    k.domain_rank = 1;
    k.loops.push_back({4});
    k.args = {0, 1};
    kir::Expr i{.kind = kir::ExprKind::loop_var, .dtype = DType::i64, .loop = 0};
    kir::Expr load{.kind = kir::ExprKind::load, .dtype = DType::f32, .a = 0, .buffer = 0};
    kir::Expr f{.kind = kir::ExprKind::unary, .dtype = DType::f32, .op = r.op, .a = 1};
    k.exprs = {i, load, f};
    k.stores.push_back({.buffer = 1, .index = 0, .value = 2});
    auto text = codegen::render_c_kernel(k, {DType::f32, DType::f32}, "k");
    ASSERT_TRUE(text.has_value()) << text.status().to_string();
    EXPECT_NE(text->find(unary_math_call(r, DType::f32, "e1")), std::string::npos) << op_name(r.op) << ":\n" << *text;
    EXPECT_EQ(unary_math_call(r, DType::f64, "x").find('%'), std::string::npos);
  }
}

TEST(UnaryMath, ReferenceValues) {
  EXPECT_EQ(unary_math(Op::Round)->reference(2.5), 2.0);   // half to even
  EXPECT_EQ(unary_math(Op::Round)->reference(-3.5), -4.0);
  EXPECT_TRUE(std::signbit(unary_math(Op::Round)->reference(-0.25)));
  EXPECT_DOUBLE_EQ(unary_math(Op::Sigmoid)->reference(0.0), 0.5);
  EXPECT_DOUBLE_EQ(unary_math(Op::Rsqrt)->reference(4.0), 0.5);
  EXPECT_EQ(unary_math(Op::Relu), nullptr);
}

}  // namespace
}  // namespace rlx
