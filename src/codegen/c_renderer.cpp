// C renderer: kernel-level loop nests to C99 that gcc/clang vectorize. Expressions are
// placed at the loop level of their deepest dependency (loop-invariant code motion by
// construction), reductions become their own loops with OpenMP simd reductions.
#include "c_renderer.h"

#include "dialect.h"
#include "rlx/unary_math.h"
#include "hlsl_prelude.h"

#include <algorithm>
#include <array>
#include <functional>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

namespace rlx::codegen {
namespace {

using kir::Expr;
using kir::ExprKind;

bool is_f64(DType t) { return t == DType::f64; }
std::string sfx(DType t) { return is_f64(t) ? "_f64" : "_f32"; }

struct IntRange {
  const char* lo;
  const char* hi;
};
IntRange int_range(DType t) {
  switch (t) {
    case DType::i8: return {"-128.0", "127.0"};
    case DType::u8: return {"0.0", "255.0"};
    case DType::i16: return {"-32768.0", "32767.0"};
    case DType::u16: return {"0.0", "65535.0"};
    case DType::i32: return {"-2147483648.0", "2147483647.0"};
    case DType::u32: return {"0.0", "4294967295.0"};
    default: return {"", ""};
  }
}

class Renderer {
 public:
  Renderer(const kir::GeneratedKernel& k, const std::vector<DType>& args, CTarget target,
           const std::vector<GlslArgPlace>& places)
      : k_(k), args_(args), d_(dialect(target)), places_(places) {}
  Expected<std::string> render(const std::string& symbol);
  // whether the kernel binds the range-check word (see range_checked in c_renderer.h)
  bool range_checked() {
    analyze();
    return range_checked_;
  }

 private:
  void analyze();
  std::string ref(int e);  // how an operand is written
  Expected<std::string> value_of(int e);
  Status emit_region(int region, int indent);
  Status emit_expr(int e, int indent);
  Status emit_reduce(int e, int indent);
  std::map<size_t, std::string> plan_staged_rows();
  std::string pad(int n) const { return std::string(static_cast<size_t>(n) * 2, ' '); }
  std::string cast_expr(const std::string& v, DType from, DType to);
  Status emit_glsl_signature(const std::string& symbol);
  Status emit_wgsl_signature(const std::string& symbol);
  Status emit_hlsl_signature(const std::string& symbol);
  Expected<int> emit_emulated_bindings(const std::array<const char*, 7>& names,
                                       const std::function<void(int, const std::string&)>& declare);

  // Spellings: each helper writes one construct as the dialect (d_) says.
  std::string ct(DType t) const { return c_compute_type(t, d_.strict_types); }
  // `type name = value;` (or `var name: type = value;`)
  std::string decl(const std::string& type, const std::string& name, const std::string& value) const {
    return d_.var_declarations ? "var " + name + ": " + type + " = " + value + ";" : type + " " + name + " = " + value + ";";
  }
  // `c ? a : b`, in parentheses unless `bare` (or select(b, a, c), which evaluates both)
  std::string sel(const std::string& c, const std::string& a, const std::string& b, bool bare = false) const {
    if (d_.select_function) return "select(" + b + ", " + a + ", " + c + ")";
    const std::string e = c + " ? " + a + " : " + b;
    return bare ? e : "(" + e + ")";
  }
  // the head of a counted loop over `var` (index type) from `from` while below `to`
  std::string loop(const std::string& var, const std::string& from, const std::string& to) const {
    const std::string init = d_.var_declarations ? "var " + var + ": " + d_.loop_index + " = " + from
                                                 : d_.loop_index + std::string(" ") + var + " = " + from;
    return "for (" + init + "; " + var + " < " + to + "; " + (d_.postfix_increment ? var + "++" : "++" + var) + ") {";
  }
  std::string inc(const std::string& var) const { return d_.postfix_increment ? var + "++;" : "++" + var + ";"; }
  // NaN as a value of float type `t`
  std::string nan(DType) const { return d_.nan; }
  // a field of `bits` bits at `offset` of int (signed) or uint `v` (GLSL's bitfieldExtract)
  std::string extract(const std::string& v, const std::string& offset, int bits, bool is_signed) const {
    if (!d_.builtin_bitfield_extract)
      return std::string(is_signed ? "rlx_extract_i(" : "rlx_extract_u(") + v + ", " + offset + ", " + std::to_string(bits) + ")";
    return "bitfieldExtract(" + v + ", " + offset + ", " + std::to_string(bits) + ")";
  }
  std::string conv(const std::string& type, const std::string& v) const {
    return d_.strict_types ? type + "(" + v + ")" : "(" + type + ")(" + v + ")";
  }
  std::string flit(double v, DType t) const { return d_.float_literal(v, t); }
  std::string ilit(int64_t v, DType t) const {
    if (d_.emulates_int64 && past_32_bits(v, t)) return t == DType::u64 ? "rlx_const_out_of_range_u64()" : "rlx_const_out_of_range_i64()";
    return d_.int_literal(v, t);
  }
  // emulates_int64: a 64-bit integer constant that 32 bits do not hold (it sets the check word)
  static bool past_32_bits(int64_t v, DType t) {
    if (t == DType::u64) return v < 0 || v > int64_t{UINT32_MAX};
    return t == DType::i64 && (v < INT32_MIN || v > INT32_MAX);
  }
  std::string i64lit(int64_t v) const { return std::to_string(v) + d_.i64_suffix; }
  std::string zero(DType t) const { return d_.strict_types ? ct(t) + "(0)" : "0"; }
  std::string nan_test(const std::string& a) const { return d_.builtin_isnan ? "isnan(" + a + ")" : "(" + a + " != " + a + ")"; }
  // an operand of a 64-bit integer helper (strict typing widens only explicitly)
  std::string wide(const std::string& a, DType t) const {
    if (!d_.strict_types) return a;
    if (t == DType::i32 || (packed(t) && (t == DType::i8 || t == DType::i16))) return "rlx_i32_to_i64(" + a + ")";
    return std::string(is_unsigned_int(t) ? "uint64_t(" : "int64_t(") + a + ")";
  }
  // A dialect without 8/16-bit types (packs_narrow_types) keeps bool, i8, u8 (4 a word) and
  // i16, u16, f16, bf16 (2 a word) packed in 32-bit words, computes them in int/uint (the
  // prelude names int8_t as int and so on) and wraps each value to its width like C's
  // assignment to a narrow type.
  bool packed(DType t) const {
    if (!d_.packs_narrow_types) return false;
    switch (t) {
      case DType::boolean: case DType::i8: case DType::u8: case DType::i16: case DType::u16: case DType::f16: case DType::bf16:
        return true;
      default: return false;
    }
  }
  static int packed_bits(DType t) { return dtype_bits(t); }
  // the array holding argument `a` and an element index of it there
  std::string arr(int a) const { return "b" + std::to_string(places_.empty() ? a : places_[a].binding); }
  std::string placed(int a, const std::string& index) const {
    if (places_.empty() || places_[a].offset == 0) return index;
    return "(" + index + " + " + i64lit(places_[a].offset) + ")";
  }
  // the packed element `index` of `buffer` as int (i8, i16: sign-extended) or uint
  std::string packed_load(int buffer, const std::string& index, DType t) const {
    const int bits = packed_bits(t), per = 32 / bits;
    const std::string at = placed(buffer, index);
    std::string word = arr(buffer) + "[int((" + at + ") / " + i64lit(per) + ")]";
    if (d_.explicit_atomic_loads) word = "atomicLoad(&" + word + ")";  // the words are atomics
    const std::string off = "int((" + at + ") % " + i64lit(per) + ") * " + std::to_string(bits);
    if (t == DType::i8 || t == DType::i16) return extract("int(" + word + ")", off, bits, true);
    return extract(word, off, bits, false);
  }
  // a statement storing `value` (int or uint) into packed element `index` (Dialect::packed_store)
  std::string packed_store(int buffer, const std::string& index, DType t, const std::string& value) const {
    return d_.packed_store(arr(buffer), index, packed_bits(t), value);
  }
  // a value of small integer type `t` wrapped to its width (glsl_gl)
  std::string wrap_small(const std::string& v, DType t) const {
    switch (t) {
      case DType::i8: return extract("int(" + v + ")", "0", 8, true);
      case DType::i16: return extract("int(" + v + ")", "0", 16, true);
      case DType::u8: return "(uint(" + v + ") & 0xffu)";
      case DType::u16: return "(uint(" + v + ") & 0xffffu)";
      default: return v;
    }
  }
  // a buffer element: strict typing indexes with int (no implicit narrowing of the index)
  std::string element(int buffer, const std::string& index) {
    if (!d_.strict_types) return "b" + std::to_string(buffer) + "[" + index + "]";
    return arr(buffer) + "[int(" + placed(buffer, index) + ")]";
  }
  Expected<std::string> unary(const Expr& e);
  Expected<std::string> binary(const Expr& e);

  Status emit_signature(const std::string& symbol);
  // `#pragma omp simd` for the host compiler; OpenCL runs one work item per element instead
  std::string simd(const std::string& clauses = "") const {
    return d_.omp_simd ? "#pragma omp simd" + (clauses.empty() ? "" : " " + clauses) + "\n" : "\n";
  }

  const kir::GeneratedKernel& k_;
  const std::vector<DType>& args_;
  const Dialect& d_;  // the language rendered in: every spelling below reads it
  const std::vector<GlslArgPlace>& places_;  // GLSL: where each argument lives (empty: a at binding a)
  std::ostringstream out_;
  // Regions: 0 = function top, 1 = row, 2 = column, 3 + r = inside reduce expr r's loops.
  std::vector<int> home_;
  std::map<int, std::vector<int>> region_exprs_;
  std::vector<std::vector<int>> loops_;  // per expr: loops it depends on
  std::vector<int> owner_;               // loop -> reduce expr owning it (-1 for domain loops)
  std::vector<int> depth_;               // per reduce expr: nesting depth
  // per expr: computed from tensor data (a load, reduce or random below it), not index math only
  std::vector<char> data_;
  std::map<int, std::string> staged_loads_;  // host: 16-bit row loads read from a row buffer (render)
  std::map<int, std::string> staged_rounds_;  // host: f32 row loads rounded to f16, from a row buffer
  std::set<size_t> rounded_stores_;           // host: staged f32 stores of values rounded to f16
  bool range_checked_ = false;  // WGSL: 64-bit integer data, computed in 32 bits with checks
  bool analyzed_ = false;
  // WGSL: a 64-bit integer value of tensor data (checked arithmetic, narrowed loads)
  bool wide_data(int e, DType t) const { return d_.emulates_int64 && data_[e] && (t == DType::i64 || t == DType::u64); }
};

void Renderer::analyze() {
  if (analyzed_) return;
  analyzed_ = true;
  const int n = static_cast<int>(k_.exprs.size());
  data_.assign(n, 0);
  auto wide = [](DType t) { return t == DType::i64 || t == DType::u64; };
  for (DType t : args_) range_checked_ |= d_.emulates_int64 && wide(t);
  for (int i = 0; i < n; ++i) {
    const Expr& e = k_.exprs[i];
    data_[i] = e.kind == ExprKind::load || e.kind == ExprKind::reduce || e.kind == ExprKind::random;
    for (int o : {e.a, e.b, e.c})
      if (o >= 0 && data_[o]) data_[i] = 1;
    if (d_.emulates_int64 && wide(e.dtype) && (e.kind == ExprKind::cast || (data_[i] && e.kind != ExprKind::select))) range_checked_ = true;
    if (d_.emulates_int64 && e.kind == ExprKind::iconst && past_32_bits(e.ival, e.dtype)) range_checked_ = true;
  }
  owner_.assign(k_.loops.size(), -1);
  for (int i = 0; i < n; ++i)
    if (k_.exprs[i].kind == ExprKind::reduce)
      for (int l : k_.exprs[i].loops) owner_[l] = i;
  loops_.assign(n, {});
  depth_.assign(n, 0);
  home_.assign(n, 0);
  const int col = k_.domain_rank - 1;
  for (int i = 0; i < n; ++i) {
    const Expr& e = k_.exprs[i];
    std::vector<int> s;
    if (e.kind == ExprKind::loop_var) s.push_back(e.loop);
    for (int o : {e.a, e.b, e.c})
      if (o >= 0) s.insert(s.end(), loops_[o].begin(), loops_[o].end());
    std::sort(s.begin(), s.end());
    s.erase(std::unique(s.begin(), s.end()), s.end());
    if (e.kind == ExprKind::reduce)
      s.erase(std::remove_if(s.begin(), s.end(), [&](int l) { return owner_[l] == i; }), s.end());
    loops_[i] = s;
    // home: the innermost reduce region among its loops, else column, row or top
    int best = -1;
    for (int l : s)
      if (owner_[l] >= 0 && (best < 0 || depth_[owner_[l]] > depth_[best])) best = owner_[l];
    if (best >= 0) {
      home_[i] = 3 + best;
    } else if (std::find(s.begin(), s.end(), col) != s.end()) {
      home_[i] = 2;
    } else if (!s.empty()) {
      home_[i] = 1;
    } else {
      home_[i] = 0;  // loop-invariant: computed once per call
    }
    if (e.kind == ExprKind::reduce) depth_[i] = best >= 0 ? depth_[best] + 1 : 1;
    region_exprs_[home_[i]].push_back(i);
  }
}

std::string Renderer::ref(int e) {
  const Expr& x = k_.exprs[e];
  switch (x.kind) {
    case ExprKind::loop_var: return "i" + std::to_string(x.loop);
    case ExprKind::iconst:
      return x.dtype == DType::i64 && !(d_.emulates_int64 && past_32_bits(x.ival, x.dtype)) ? i64lit(x.ival) : ilit(x.ival, x.dtype);
    case ExprKind::fconst:
      if (is_complex(x.dtype)) return "rlx_cplx(" + flit(x.fval, DType::f64) + ", " + flit(x.fval2, DType::f64) + ")";
      return flit(x.fval, x.dtype);
    default: return "e" + std::to_string(e);
  }
}

std::string Renderer::cast_expr(const std::string& v_in, DType from, DType to) {
  if (from == to) return v_in;
  // where NaN may compare as ordered (NaN != 0 false), a float is true unless equal to 0
  if (to == DType::boolean && d_.ordered_not_equal && is_float(from)) return "(!((" + v_in + ") == " + zero(from) + "))";
  if (to == DType::boolean) return "((" + v_in + ") != " + zero(from) + ")";  // c64: re != 0 || im != 0
  std::string v = v_in;
  if (to == DType::c64) {
    // imaginary part 0; an integer rounds once, directly to f32, as the reference does
    if (is_float(from)) return "rlx_cplx((double)(" + v + "), 0.0)";
    return "rlx_cplx((double)(float)(" + v + "), 0.0)";
  }
  if (from == DType::c64) {  // the real part (NumPy), then as a double to the target
    v = "rlx_creal(" + v + ")";
    from = DType::f64;
  }
  // strict typing converts a bool by selecting
  if (d_.strict_types && from == DType::boolean) return sel("(" + v + ")", ct(to) + "(1)", ct(to) + "(0)");
  // f16 and bf16 values are computed in float registers, so a cast to them must round here:
  // otherwise cast(cast(x, bf16), f32) fused into one kernel would leave x unchanged (mixed
  // precision relies on it, passes/autocast.h). Stores round again, which changes nothing.
  if (to == DType::f16 || to == DType::bf16) {
    const std::string n = to == DType::f16 ? "f16" : "bf16";
    // C: the prelude's rounding in 32-bit lanes, which vectorizes (c_prelude.cpp)
    if (d_.narrow_rounding_helpers) return "rlx_round_" + n + "(" + conv("float", v) + ")";
    return "rlx_" + n + "_to_f32(rlx_f32_to_" + n + "(" + conv("float", v) + "))";
  }
  // where integer -> f32 may not round (SwiftShader truncates), the prelude converts in two
  // exact halves and one rounded add
  if (!d_.exact_int_to_f32 && to == DType::f32 && (from == DType::i32 || from == DType::u32 || from == DType::i64 || from == DType::u64))
    return std::string(is_unsigned_int(from) ? "rlx_u32_to_f32(" : "rlx_i32_to_f32(") + v + ")";
  if (d_.emulates_int64 && (to == DType::i64 || to == DType::u64)) {  // a value past 32 bits is flagged
    if (is_float(from)) return "rlx_" + std::string(is_f64(from) ? "f64" : "f32") + (to == DType::i64 ? "_to_i64c(" : "_to_u64c(") + v + ")";
    if (to == DType::i64 && is_unsigned_int(from)) return "rlx_u32_to_i64c(" + conv("uint", v) + ")";
    if (to == DType::u64 && !is_unsigned_int(from)) return "rlx_i32_to_u64c(" + conv("int", v) + ")";
  }
  if (is_float(to)) return conv(ct(to), v);
  // to an integer type
  if (is_float(from)) {
    std::string f = is_f64(from) ? "f64" : "f32";
    switch (to) {
      case DType::i8: return "rlx_" + f + "_to_i8_sat(" + v + ")";
      case DType::u8: return "rlx_" + f + "_to_u8_sat(" + v + ")";
      case DType::i32: return "rlx_" + f + "_to_i32_sat(" + v + ")";
      case DType::i64: return "rlx_" + f + "_to_i64_sat(" + v + ")";
      case DType::u64: return "rlx_f64_to_u64_sat(" + conv("double", v) + ")";
      // (WGSL's own conversion clamps to the largest f32 below 2^32, 4294967040)
      case DType::u32: if (d_.own_f32_to_u32) return "rlx_f32_to_u32_sat(" + v + ")"; [[fallthrough]];
      default: {
        IntRange r = int_range(to);
        // double literals: in GLSL a bare 4294967295.0 is a float (4294967296.0f), whose
        // conversion to uint overflows (0 on llvmpipe's OpenGL)
        const std::string d = d_.f64_suffix;
        return conv(ct(to), "rlx_f64_to_range_sat(" + conv("double", v) + ", " + r.lo + d + ", " + r.hi + d + ")");
      }
    }
  }
  if (d_.strict_types && (from == DType::i32 || (packed(from) && (from == DType::i8 || from == DType::i16))) &&
      (to == DType::i64 || to == DType::u64))
    return conv(ct(to), "rlx_i32_to_i64(" + v + ")");
  return conv(ct(to), v);
}

Expected<std::string> Renderer::unary(const Expr& e) {
  const DType t = k_.exprs[e.a].dtype;
  const std::string a = ref(e.a);
  const std::string s = sfx(t);
  const bool fl = is_float(t);
  if (is_complex(t)) {  // in double _Complex, as the reference's std::complex<double> (c_prelude.cpp)
    switch (e.op) {
      case Op::Neg: return "(-" + a + ")";
      case Op::Conj: return "rlx_conj(" + a + ")";
      case Op::Real: return "rlx_creal(" + a + ")";
      case Op::Imag: return "rlx_cimag(" + a + ")";
      case Op::Abs: return "rlx_cabs(" + a + ")";   // hypot(re, im)
      case Op::Angle: return "rlx_carg(" + a + ")";  // atan2(im, re)
      default: return error(ErrorCode::unsupported, "C renderer: unary ", op_name(e.op), " on c64");
    }
  }
  if (is_f64(t) && !d_.f64_builtins && (e.op == Op::Floor || e.op == Op::Ceil))
    return std::string(e.op == Op::Floor ? "rlx_floor_f64(" : "rlx_ceil_f64(") + a + ")";
  if (const UnaryMathOp* row = unary_math(e.op)) return unary_math_call(*row, t, a);  // rlx/unary_math.h
  switch (e.op) {
    case Op::Neg:
      if (wide_data(e.a, t)) return std::string(t == DType::i64 ? "rlx_sub_i64(0, " : "rlx_sub_u64(0u, ") + a + ")";
      if (!d_.negates_unsigned && is_unsigned_int(t)) return "(" + zero(t) + " - " + a + ")";
      return "(-" + a + ")";
    case Op::Abs:
      if (fl) return std::string(is_f64(t) ? "fabs(" : "fabsf(") + a + ")";
      if (is_unsigned_int(t)) return a;
      if (wide_data(e.a, t)) return sel(a + " < " + zero(t), "rlx_sub_i64(0, " + a + ")", a);
      return sel(a + " < " + zero(t), "-" + a, a);
    case Op::Sign:
      if (fl) return "rlx_sign" + s + "(" + a + ")";
      if (!d_.negates_unsigned && is_unsigned_int(t)) return sel(a + " > " + zero(t), ct(t) + "(1)", zero(t));
      if (d_.strict_types) return sel(a + " > " + zero(t), ct(t) + "(1)", sel(a + " < " + zero(t), ct(t) + "(-1)", zero(t)));
      return "((" + a + " > 0) - (" + a + " < 0))";
    case Op::Not:
      if (t == DType::boolean) return "(!" + a + ")";
      // bitwise on integers. Emulated 64-bit values hold in 32 bits, where ~, &, | and ^ agree
      // for i64 (sign-extended); ~ of a u64 that fits in 32 bits never does: the check word
      // reports it at run time, as for any 64-bit value past 32 bits
      if (wide_data(e.a, t) && t == DType::u64) return "rlx_const_out_of_range_u64()";
      return conv(ct(t), "~" + a);
    case Op::IsNan: return nan_test(a);
    case Op::IsInf: {
      std::string inf = d_.strict_types ? flit(INFINITY, t) : (is_f64(t) ? "(double)INFINITY" : "INFINITY");
      std::string pos = "(" + a + " == " + inf + ")", neg = "(" + a + " == -" + inf + ")";
      if (e.ival && e.ival2) return "(" + pos + " || " + neg + ")";
      if (e.ival) return pos;
      if (e.ival2) return neg;
      return std::string(d_.strict_types ? "false" : "0");
    }
    default: break;
  }
  return error(ErrorCode::unsupported, "C renderer: unary ", op_name(e.op));
}

Expected<std::string> Renderer::binary(const Expr& e) {
  const DType t = k_.exprs[e.a].dtype;
  const std::string a = ref(e.a), b = ref(e.b);
  const bool fl = is_float(t);
  const std::string ct = this->ct(t);
  if (e.op == Op::Complex) return "rlx_cplx(" + a + ", " + b + ")";  // f32 parts, widened exactly
  if (is_complex(t)) {
    switch (e.op) {
      case Op::Add: return "(" + a + " + " + b + ")";
      case Op::Sub: return "(" + a + " - " + b + ")";
      case Op::Mul: return "(" + a + " * " + b + ")";
      case Op::Div: return "(" + a + " / " + b + ")";  // C99 Annex G (libgcc __divdc3), as std::complex
      case Op::Equal: return "(" + a + " == " + b + ")";
      case Op::NotEqual: return "(" + a + " != " + b + ")";
      default: return error(ErrorCode::unsupported, "C renderer: binary ", op_name(e.op), " on c64");
    }
  }
  if (d_.strict_types && t == DType::boolean) {  // strict typing orders no bools: as ints, false < true
    switch (e.op) {
      case Op::Max: return "(" + a + " || " + b + ")";
      case Op::Min: return "(" + a + " && " + b + ")";
      case Op::Less: return "(int(" + a + ") < int(" + b + "))";
      case Op::LessEqual: return "(int(" + a + ") <= int(" + b + "))";
      case Op::Greater: return "(int(" + a + ") > int(" + b + "))";
      case Op::GreaterEqual: return "(int(" + a + ") >= int(" + b + "))";
      default: break;
    }
  }
  if (wide_data(e.a, t) || wide_data(e.b, t)) {  // emulated 64-bit data: in 32 bits, overflow checked
    const std::string w = t == DType::i64 ? "_i64(" : "_u64(";
    switch (e.op) {
      case Op::Add: return "rlx_add" + w + a + ", " + b + ")";
      case Op::Sub: return "rlx_sub" + w + a + ", " + b + ")";
      case Op::Mul: return "rlx_mul" + w + a + ", " + b + ")";
      case Op::Div: if (t == DType::i64) return "rlx_div_i64c(" + a + ", " + b + ")"; break;
      case Op::Pow: return "rlx_ipow" + std::string(t == DType::i64 ? "_i64c(" : "_u64c(") + a + ", " + b + ")";
      default: break;
    }
  }
  switch (e.op) {
    case Op::Add: return "(" + a + " + " + b + ")";
    case Op::Sub: return "(" + a + " - " + b + ")";
    case Op::Mul: return "(" + a + " * " + b + ")";
    case Op::Div:
      if (fl) return "(" + a + " / " + b + ")";
      if (is_unsigned_int(t)) return sel(b + " == " + zero(t), conv(ct, "0"), conv(ct, a + " / " + b));
      return conv(ct, "rlx_tdiv_i64(" + wide(a, t) + ", " + wide(b, t) + ")");
    case Op::Pow:
      if (fl) return "rlx_pow" + sfx(t) + "(" + a + ", " + b + ")";
      if (is_unsigned_int(t)) return conv(ct, "rlx_ipow_u64(" + wide(a, t) + ", " + wide(b, t) + ")");
      return conv(ct, "rlx_ipow_i64(" + wide(a, t) + ", " + wide(b, t) + ")");
    case Op::Max:
      if (fl) return sel("(" + a + " > " + b + " || " + nan_test(a) + ")", a, b);
      return sel(a + " > " + b, a, b);
    case Op::Min:
      if (fl) return sel("(" + a + " < " + b + " || " + nan_test(a) + ")", a, b);
      return sel(a + " < " + b, a, b);
    case Op::Mod:
      if (fl) {
        std::string f = is_f64(t) ? "fmod(" : "fmodf(";
        if (!e.ival) return f + a + ", " + b + ")";
        return "rlx_fmod_floor" + sfx(t) + "(" + a + ", " + b + ")";
      }
      if (is_unsigned_int(t)) return sel(b + " == " + zero(t), conv(ct, "0"), conv(ct, a + " % " + b));
      if (e.ival) return conv(ct, "rlx_mod_i64(" + wide(a, t) + ", " + wide(b, t) + ")");
      return conv(ct, "rlx_trem_i64(" + wide(a, t) + ", " + wide(b, t) + ")");
    case Op::Equal: return "(" + a + " == " + b + ")";
    case Op::NotEqual:
      if (d_.ordered_not_equal && fl) return "(!(" + a + " == " + b + "))";  // NaN != x must be true
      return "(" + a + " != " + b + ")";
    case Op::Less: return "(" + a + " < " + b + ")";
    case Op::LessEqual: return "(" + a + " <= " + b + ")";
    case Op::Greater: return "(" + a + " > " + b + ")";
    case Op::GreaterEqual: return "(" + a + " >= " + b + ")";
    case Op::And:
      if (is_int(t)) return conv(ct, a + " & " + b);  // bitwise on integers
      return "(" + a + " && " + b + ")";
    case Op::Or:
      if (is_int(t)) return conv(ct, a + " | " + b);
      return "(" + a + " || " + b + ")";
    case Op::Xor:
      if (is_int(t)) return conv(ct, a + " ^ " + b);
      if (d_.strict_types && t == DType::boolean) return "(" + a + " != " + b + ")";
      return "((" + a + " != " + zero(t) + ") != (" + b + " != " + zero(t) + "))";
    default: break;
  }
  return error(ErrorCode::unsupported, "C renderer: binary ", op_name(e.op));
}

Expected<std::string> Renderer::value_of(int i) {
  const Expr& e = k_.exprs[i];
  switch (e.kind) {
    case ExprKind::load: {
      const DType t = args_[e.buffer];
      if (staged_loads_.count(i)) return "rlx_l" + std::to_string(i) + "[i" + std::to_string(k_.domain_rank - 1) + " - rlx_cb]";
      // a guarded load reads only where its guard holds: C's `?:` evaluates one side, so the
      // host reads at the index itself (GCC vectorizes it as a masked load); languages that
      // may evaluate both sides (WGSL's select, HLSL) read element 0 where the guard fails
      std::string index = ref(e.a);
      if (e.c >= 0 && !d_.short_circuit_guards) index = sel(ref(e.c), index, i64lit(0));
      std::string acc = packed(t) ? packed_load(e.buffer, index, t) : element(e.buffer, index);
      if (t == DType::f16) acc = "rlx_f16_to_f32(" + acc + ")";
      else if (t == DType::bf16) acc = "rlx_bf16_to_f32(" + acc + ")";
      else if (t == DType::boolean) acc = d_.strict_types ? "(" + acc + " != uint8_t(0))" : "(int)" + acc;
      else if (d_.emulates_int64 && t == DType::i64) acc = "rlx_narrow_i64(" + acc + ")";
      else if (d_.emulates_int64 && t == DType::u64) acc = "rlx_narrow_u64(" + acc + ")";
      return e.c >= 0 ? sel(ref(e.c), acc, zero(e.dtype)) : acc;
    }
    case ExprKind::unary: return unary(e);
    case ExprKind::binary: return binary(e);
    case ExprKind::select: return sel(ref(e.a), ref(e.b), ref(e.c));
    case ExprKind::cast:
      if (staged_rounds_.count(i)) return "rlx_r" + std::to_string(i) + "[i" + std::to_string(k_.domain_rank - 1) + " - rlx_cb]";
      return cast_expr(ref(e.a), k_.exprs[e.a].dtype, e.dtype);
    case ExprKind::idiv: return "(" + ref(e.a) + " / " + ref(e.b) + ")";
    case ExprKind::imod: return "(" + ref(e.a) + " % " + ref(e.b) + ")";
    case ExprKind::clamp: {
      std::string a = ref(e.a);
      return sel(a + " < " + i64lit(e.ival), i64lit(e.ival), sel(a + " > " + i64lit(e.ival2), i64lit(e.ival2), a));
    }
    case ExprKind::random: {
      std::string seed = std::to_string(static_cast<uint64_t>(e.ival)) + d_.u64_suffix;
      std::string args = seed + ", " + conv("uint64_t", ref(e.a)) + ", " + flit(e.fval, DType::f64) + ", " + flit(e.fval2, DType::f64) + ")";
      std::string v = e.op == Op::Mul ? "rlx_random_normal(" + args : "rlx_random_uniform(" + args;
      return conv(ct(e.dtype), v);
    }
    default: break;
  }
  return error(ErrorCode::internal, "C renderer: unexpected expression kind ", expr_kind_name(e.kind));
}

Status Renderer::emit_reduce(int i, int indent) {
  const Expr& e = k_.exprs[i];
  const DType t = e.dtype;
  const DType bt = k_.exprs[e.a].dtype;
  const std::string acc = "acc" + std::to_string(i);
  const bool cplx = is_complex(t);
  const bool fl = is_float(t);
  const bool arg = op_info(e.op).family == OpFamily::argreduce;
  if (cplx && e.op != Op::ReduceSum && e.op != Op::ReduceProd)
    return error(ErrorCode::unsupported, "C renderer: ", op_name(e.op), " on c64 (complex values have no order)");
  std::string at = ct(arg ? bt : t);
  // strict typing has no arithmetic on bool: a bool reduction accumulates in int64_t
  if (!arg && !fl && !cplx && (t != DType::boolean || d_.strict_types)) at = is_unsigned_int(t) ? "uint64_t" : "int64_t";
  std::string init;
  switch (e.op) {
    case Op::ReduceSum: init = fl ? flit(0.0, t) : "0"; break;
    case Op::ReduceProd: init = fl ? flit(1.0, t) : "1"; break;
    case Op::ReduceMax:
      init = fl ? flit(-INFINITY, t) : (is_unsigned_int(t) ? "0" : "INT64_MIN");
      break;
    case Op::ReduceMin:
      init = fl ? flit(INFINITY, t) : (is_unsigned_int(t) ? "UINT64_MAX" : "INT64_MAX");
      break;
    default: break;
  }
  // nested reduce regions inside this one prevent a simd pragma on its loop
  bool nested = false;
  for (int j : region_exprs_[3 + i])
    if (k_.exprs[j].kind == ExprKind::reduce) nested = true;
  const bool float_minmax = fl && (e.op == Op::ReduceMax || e.op == Op::ReduceMin);
  if (arg) {
    out_ << pad(indent) << decl(at, acc, d_.strict_types ? at + "(0)" : "0") << " " << decl("int64_t", acc + "_i", "-1") << " "
         << decl("int64_t", acc + "_k", "0") << "\n";
  } else {
    out_ << pad(indent) << decl(at, acc, init) << "\n";
    if (float_minmax) out_ << pad(indent) << decl(ct(DType::boolean), acc + "_nan", d_.strict_types ? "false" : "0") << "\n";
  }
  int depth = indent;
  for (size_t li = 0; li < e.loops.size(); ++li) {
    int l = e.loops[li];
    bool innermost = li + 1 == e.loops.size();
    // no simd reduction of complex accumulators: OpenMP's reductions are for real scalars
    if (innermost && !nested && !arg && !cplx) {
      std::string red;
      switch (e.op) {
        case Op::ReduceSum: red = "reduction(+:" + acc + ")"; break;
        case Op::ReduceProd: red = "reduction(*:" + acc + ")"; break;
        case Op::ReduceMax: red = "reduction(max:" + acc + ")"; break;
        case Op::ReduceMin: red = "reduction(min:" + acc + ")"; break;
        default: break;
      }
      if (float_minmax) red += " reduction(|:" + acc + "_nan)";
      out_ << pad(depth) << simd(red);
    }
    out_ << pad(depth) << loop("i" + std::to_string(l), "0", std::to_string(k_.loops[l].extent)) << "\n";
    ++depth;
  }
  RLX_TRY(emit_region(3 + i, depth));
  std::string x = ref(e.a);
  if (d_.strict_types && !arg && ct(bt) != at)
    x = bt == DType::boolean ? sel(x, at + "(1)", at + "(0)") : conv(at, bt == DType::i32 ? wide(x, bt) : x);
  const std::string nan_or = d_.strict_types ? " = " + acc + "_nan || isnan(" + x + ");\n" : " |= " + x + " != " + x + ";\n";
  const bool wide_acc = d_.emulates_int64 && !arg && (t == DType::i64 || t == DType::u64);
  const std::string w = t == DType::i64 ? "_i64(" : "_u64(";
  switch (e.op) {
    case Op::ReduceSum:
      if (wide_acc) out_ << pad(depth) << acc << " = rlx_add" << w << acc << ", " << x << ");\n";
      else out_ << pad(depth) << acc << " += " << x << ";\n";
      break;
    case Op::ReduceProd:
      if (wide_acc) out_ << pad(depth) << acc << " = rlx_mul" << w << acc << ", " << x << ");\n";
      else out_ << pad(depth) << acc << " *= " << x << ";\n";
      break;
    case Op::ReduceMax:
      out_ << pad(depth) << acc << " = " << sel(x + " > " + acc, x, acc, true) << ";\n";
      if (float_minmax) out_ << pad(depth) << acc << "_nan" << nan_or;
      break;
    case Op::ReduceMin:
      out_ << pad(depth) << acc << " = " << sel(x + " < " + acc, x, acc, true) << ";\n";
      if (float_minmax) out_ << pad(depth) << acc << "_nan" << nan_or;
      break;
    case Op::ArgMax:
    case Op::ArgMin: {
      // numpy semantics: NaN is the extreme; ties keep the first index unless select_last
      const char* cmp = e.op == Op::ArgMax ? " > " : " < ";
      std::string better = "(" + x + cmp + acc + ")";
      if (is_float(bt)) better = "(" + nan_test(x) + " || " + better + ")";
      if (e.ival) better = "(" + better + " || " + x + " == " + acc + ")";
      std::string stop = is_float(bt) ? "(" + acc + "_i >= 0 && " + nan_test(acc) + ")" : (d_.strict_types ? "false" : "0");
      out_ << pad(depth) << "if (" << acc << "_i < 0 || (!" << stop << " && " << better << ")) { " << acc << " = " << x
           << "; " << acc << "_i = " << acc << "_k; }\n";
      out_ << pad(depth) << inc(acc + "_k") << "\n";
      break;
    }
    default: return error(ErrorCode::unsupported, "C renderer: reduction ", op_name(e.op));
  }
  for (size_t li = 0; li < e.loops.size(); ++li) {
    --depth;
    out_ << pad(depth) << "}\n";
  }
  if (float_minmax) out_ << pad(indent) << "if (" << acc << "_nan) " << (d_.braced_if_bodies ? "{ " : "") << acc << " = " << nan(t) << ";" << (d_.braced_if_bodies ? " }" : "") << "\n";
  const std::string result = arg ? acc + "_i" : acc;
  const std::string value = d_.strict_types && t == DType::boolean ? "(" + result + " != int64_t(0))" : conv(ct(t), result);
  out_ << pad(indent) << decl(ct(t), "e" + std::to_string(i), packed(t) ? wrap_small(value, t) : value) << "\n";
  return Status::ok();
}

Status Renderer::emit_expr(int i, int indent) {
  const Expr& e = k_.exprs[i];
  if (e.kind == ExprKind::loop_var || e.kind == ExprKind::iconst || e.kind == ExprKind::fconst) return Status::ok();
  if (e.kind == ExprKind::reduce) return emit_reduce(i, indent);
  RLX_ASSIGN_OR_RETURN(std::string v, value_of(i));
  if (packed(e.dtype) && e.kind != ExprKind::load) v = wrap_small(v, e.dtype);
  out_ << pad(indent) << decl(ct(e.dtype), "e" + std::to_string(i), v) << "\n";
  return Status::ok();
}

Status Renderer::emit_region(int region, int indent) {
  auto it = region_exprs_.find(region);
  if (it == region_exprs_.end()) return Status::ok();
  for (int i : it->second) RLX_TRY(emit_expr(i, indent));
  return Status::ok();
}

// GLSL compute: the buffers are std430 storage buffers at bindings 0..n-1 and the domain size
// comes from push constants (Vulkan) or uniforms at locations 0 and 1 (OpenGL). An invocation
// computes one (row, column) element; a serial kernel runs its whole domain in invocation 0.
// Invocations are numbered over a 2D grid of work groups (x fastest), so a big domain is not
// held to the 65535 groups one dimension guarantees.
Status Renderer::emit_glsl_signature(const std::string& symbol) {
  const bool vk = d_.push_constants;
  out_ << "// kernel " << symbol << "\nlayout(local_size_x = " << kGlslWorkgroupSize << ") in;\n";
  std::vector<char> declared(args_.size(), 0);
  for (size_t a = 0; a < args_.size(); ++a) {
    const int bind = places_.empty() ? static_cast<int>(a) : places_[a].binding;
    if (bind < 0 || bind >= static_cast<int>(args_.size()))
      return error(ErrorCode::internal, "GLSL renderer: argument ", a, " placed at binding ", bind);
    if (declared[bind]) continue;  // arguments sharing a binding share its dtype
    declared[bind] = 1;
    RLX_ASSIGN_OR_RETURN(std::string st, c_storage_type(args_[a]));
    if (packed(args_[a])) st = "uint";
    out_ << "layout(std430, binding = " << bind << ") buffer RlxBuf" << bind << " { " << st << " b" << bind << "[]; };\n";
  }
  out_ << (vk ? "layout(push_constant) uniform RlxDomain { int64_t rows; int64_t cols; } rlx_domain;\n"
              : "layout(location = 0) uniform int64_t rlx_rows;\nlayout(location = 1) uniform int64_t rlx_cols;\n");
  out_ << "void main() {\n";
  out_ << (vk ? "  int64_t rows = rlx_domain.rows, cols = rlx_domain.cols;\n" : "  int64_t rows = rlx_rows, cols = rlx_cols;\n");
  out_ << "  int64_t gid = int64_t(gl_GlobalInvocationID.x) + int64_t(gl_GlobalInvocationID.y) * "
          "int64_t(gl_NumWorkGroups.x) * int64_t(gl_WorkGroupSize.x);\n";
  if (k_.serial) {
    out_ << "  if (gid != 0) return;\n  int64_t r0 = 0, r1 = rows, c0 = 0, c1 = cols;\n";
  } else {
    out_ << "  if (gid >= rows * cols) return;\n  int64_t r0 = gid / cols, r1 = r0 + 1, c0 = gid % cols, c1 = c0 + 1;\n";
  }
  return Status::ok();
}

// The storage buffers of a dialect that emulates 64-bit integers (WGSL, HLSL): each binding
// declared once by `declare` with its element type, spelled from `names` (f32, i32, u32, i64's
// and u64's word pairs, packed words, f64 or null where the dialect has no doubles); returns how
// many bindings the arguments use.
Expected<int> Renderer::emit_emulated_bindings(const std::array<const char*, 7>& names,
                                               const std::function<void(int, const std::string&)>& declare) {
  std::vector<char> declared(args_.size(), 0);
  int bindings = 0;
  for (size_t a = 0; a < args_.size(); ++a) {
    const int bind = places_.empty() ? static_cast<int>(a) : places_[a].binding;
    if (bind < 0 || bind >= static_cast<int>(args_.size()))
      return error(ErrorCode::internal, d_.name, " renderer: argument ", a, " placed at binding ", bind);
    bindings = std::max(bindings, bind + 1);
    if (declared[bind]) continue;  // arguments sharing a binding share its dtype
    declared[bind] = 1;
    const DType t = args_[a];
    const char* st = t == DType::f32   ? names[0]
                     : t == DType::i32 ? names[1]
                     : t == DType::u32 ? names[2]
                     : t == DType::i64 ? names[3]
                     : t == DType::u64 ? names[4]
                     : packed(t)       ? names[5]
                     : t == DType::f64 ? names[6]
                                       : nullptr;
    if (!st) return error(ErrorCode::unsupported, d_.name, " has no ", dtype_name(t), " values (no 64-bit floats)");
    declare(bind, st);
  }
  return bindings;
}

// WGSL compute: as glsl_gl, with the domain size as i32 in a uniform buffer after the storage
// buffers, and packed (8/16-bit, bool) buffers as atomic<u32> words.
Status Renderer::emit_wgsl_signature(const std::string& symbol) {
  out_ << "// kernel " << symbol << "\n";
  // i64/u64 as (low, high) words; packed (8/16-bit, bool) buffers as atomic words
  RLX_ASSIGN_OR_RETURN(int bindings, emit_emulated_bindings({"f32", "i32", "u32", "vec2<i32>", "vec2<u32>", "atomic<u32>", nullptr},
                                                            [&](int bind, const std::string& st) {
                                                              out_ << "@group(0) @binding(" << bind
                                                                   << ") var<storage, read_write> b" << bind << ": array<"
                                                                   << st << ">;\n";
                                                            }));
  if (range_checked_) {
    out_ << "@group(0) @binding(" << bindings++ << ") var<storage, read_write> rlx_check: array<atomic<u32>>;\n";
    out_ << d_.range_check_helpers();
  }
  out_ << "@group(0) @binding(" << bindings << ") var<uniform> rlx_domain: array<vec4<i32>, 1>;\n";
  out_ << "@compute @workgroup_size(" << kGlslWorkgroupSize << ")\n";
  out_ << "fn " << symbol << "(@builtin(global_invocation_id) rlx_id: vec3<u32>, @builtin(num_workgroups) rlx_groups: vec3<u32>) {\n";
  out_ << "  let rows = rlx_domain[0][0];\n  let cols = rlx_domain[0][1];\n";
  out_ << "  let gid = i32(rlx_id.x + rlx_id.y * rlx_groups.x * " << kGlslWorkgroupSize << "u);\n";
  if (k_.serial) {
    out_ << "  if (gid != 0) { return; }\n  let r0 = 0;\n  let r1 = rows;\n  let c0 = 0;\n  let c1 = cols;\n";
  } else {
    out_ << "  if (gid >= rows * cols) { return; }\n  let r0 = gid / cols;\n  let r1 = r0 + 1;\n  let c0 = gid % cols;\n"
            "  let c1 = c0 + 1;\n";
  }
  return Status::ok();
}

// HLSL compute: as WGSL, with RWStructuredBuffers at registers u0..n-1 (i64/u64 as int2/uint2
// words), the check word after them, and the domain size as a constant buffer of int64 words.
// HLSL has no built-in for the dispatch's group count: the runtime lays out grids of more than
// kHlslMaxGroupsX groups as rows of exactly that many.
Status Renderer::emit_hlsl_signature(const std::string& symbol) {
  out_ << "// kernel " << symbol << "\n";
  RLX_ASSIGN_OR_RETURN(int bindings, emit_emulated_bindings({"float", "int", "uint", "int2", "uint2", "uint", "double"},
                                                            [&](int bind, const std::string& st) {
                                                              out_ << "RWStructuredBuffer<" << st << "> b" << bind
                                                                   << " : register(u" << bind << ");\n";
                                                            }));
  if (range_checked_) {
    out_ << "RWStructuredBuffer<uint> rlx_check : register(u" << bindings++ << ");\n";
    out_ << d_.range_check_helpers();
  }
  out_ << "struct RlxDomain { int2 rows; int2 cols; };\n[[vk::push_constant]] ConstantBuffer<RlxDomain> rlx_domain;\n";
  out_ << "[numthreads(" << kGlslWorkgroupSize << ", 1, 1)]\n";
  out_ << "void main(uint3 rlx_id : SV_DispatchThreadID) {\n";
  out_ << "  int rows = rlx_domain.rows.x, cols = rlx_domain.cols.x;\n";
  out_ << "  int gid = int(rlx_id.x) + int(rlx_id.y) * " << kHlslMaxGroupsX * kGlslWorkgroupSize << ";\n";
  if (k_.serial) {
    out_ << "  if (gid != 0) return;\n  int r0 = 0, r1 = rows, c0 = 0, c1 = cols;\n";
  } else {
    out_ << "  if (gid >= rows * cols) return;\n  int r0 = gid / cols, r1 = r0 + 1, c0 = gid % cols, c1 = c0 + 1;\n";
  }
  return Status::ok();
}

Status Renderer::emit_signature(const std::string& symbol) {
  if (d_.frame == KernelFrame::wgsl_shader) return emit_wgsl_signature(symbol);
  if (d_.frame == KernelFrame::hlsl_shader) return emit_hlsl_signature(symbol);
  if (d_.frame == KernelFrame::glsl_shader) return emit_glsl_signature(symbol);
  if (d_.frame == KernelFrame::host_function) {
    out_ << "void " << symbol << "(void* const* restrict bufs, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {\n";
    for (size_t a = 0; a < args_.size(); ++a) {
      RLX_ASSIGN_OR_RETURN(std::string st, c_storage_type(args_[a]));
      out_ << "  " << st << "* restrict b" << a << " = (" << st << "*)bufs[" << a << "];\n";
    }
    return Status::ok();
  }
  if (d_.frame == KernelFrame::msl_kernel) {
    // Metal: device buffers and the domain size as arguments at [[buffer(i)]]; a thread of the
    // 2D grid computes one (row, column) element, a serial kernel runs in thread (0, 0)
    out_ << "kernel void " << symbol << "(";
    for (size_t a = 0; a < args_.size(); ++a) {
      RLX_ASSIGN_OR_RETURN(std::string st, c_storage_type(args_[a]));
      out_ << "device " << st << "* b" << a << " [[buffer(" << a << ")]], ";
    }
    out_ << "constant int64_t& rows [[buffer(" << args_.size() << ")]], constant int64_t& cols [[buffer(" << args_.size() + 1
         << ")]], uint3 rlx_gid [[thread_position_in_grid]], uint3 rlx_grid [[threads_per_grid]]) {\n";
    if (k_.serial) {
      out_ << "  if (rlx_gid.x != 0 || rlx_gid.y != 0) return;\n  const int64_t r0 = 0, r1 = rows, c0 = 0, c1 = cols;\n";
    } else {
      out_ << "  const int64_t gid = (int64_t)rlx_gid.x + (int64_t)rlx_gid.y * (int64_t)rlx_grid.x;\n";
      out_ << "  if (gid >= rows * cols) return;\n";
      out_ << "  const int64_t r0 = gid / cols, r1 = r0 + 1, c0 = gid % cols, c1 = c0 + 1;\n";
    }
    return Status::ok();
  }
  // OpenCL and CUDA: buffers are kernel arguments; a work item (CUDA thread) computes one
  // (row, column) element, a serial kernel runs its whole domain in one work item.
  const bool cuda = d_.frame == KernelFrame::cuda_kernel;
  out_ << (cuda ? "extern \"C\" __global__ void " : "__kernel void ") << symbol << "(";
  for (size_t a = 0; a < args_.size(); ++a) {
    RLX_ASSIGN_OR_RETURN(std::string st, c_storage_type(args_[a]));
    out_ << (cuda ? st + "* __restrict__ b" : "__global " + st + "* restrict b") << a << ", ";
  }
  out_ << (cuda ? "const long long rows, const long long cols) {\n" : "const long rows, const long cols) {\n");
  if (k_.serial) {
    // CUDA launches a serial kernel as one thread; the guard keeps a wider launch correct
    if (cuda) out_ << "  if (blockIdx.x != 0 || threadIdx.x != 0) return;\n";
    out_ << "  const int64_t r0 = 0, r1 = rows, c0 = 0, c1 = cols;\n";
  } else {
    // 64-bit index math: rows * cols may exceed 2^31 elements
    out_ << (cuda ? "  const int64_t gid = (int64_t)blockIdx.x * (int64_t)blockDim.x + (int64_t)threadIdx.x;\n"
                  : "  const int64_t gid = (int64_t)get_global_id(0);\n");
    out_ << "  if (gid >= rows * cols) return;\n";
    out_ << "  const int64_t r0 = gid / cols, r1 = r0 + 1, c0 = gid % cols, c1 = c0 + 1;\n";
  }
  return Status::ok();
}

// Staged 16-bit rows (Dialect::staged_16_bit_rows): an f16 or bf16 store into a contiguous row
// (its index is the column variable, plus an offset computed outside the column loop) keeps its
// f32 values in a row buffer of kStageColumns, and rlx_store_f16_n (the CPU's own instruction) or
// rlx_store_bf16_n (the prelude's conversion, in a loop of its own) converts the buffer after
// the loop; in a loop that gathers, a 16-bit load of a contiguous row is widened into a row
// buffer by rlx_load_f16_n / rlx_load_bf16_n before it. Converting in the loop made GCC
// vectorize the whole loop in 16-bit lanes (a bias + ReLU + f16 store over 128 x 128 took 6.2 us
// instead of 1.5; a 10-wide loop ran entirely in its scalar remainder, 16 us for 128 x 10
// instead of 2.3), and a loop GCC does not vectorize at all (gathers with 64-bit indices:
// max-pool's backward) converted each value in scalar code. The helpers give the prelude's
// bits. Returns the staged stores (store -> the offset of its row, "" for none) and fills
// staged_loads_ (load expression -> the same).
constexpr int kStageColumns = 256;  // a row buffer: 1 KiB of floats on the stack
// At most this many row buffers a kernel (16 KiB of stack); further 16-bit rows convert in the
// loop, so a kernel with many outputs cannot grow a pool thread's stack without bound.
constexpr size_t kMaxStagedRows = 16;
std::map<size_t, std::string> Renderer::plan_staged_rows() {
  const int col = k_.domain_rank - 1;
  auto is_col = [&](int e) { return k_.exprs[e].kind == ExprKind::loop_var && k_.exprs[e].loop == col; };
  auto is_16_bit_float = [&](DType t) { return (t == DType::f16 || t == DType::bf16) && !packed(t); };
  // whether index expression `ix` is the column plus an offset known outside the column loop
  auto row_offset = [&](int ix, std::string* base) {
    const Expr& x = k_.exprs[ix];
    if (is_col(ix)) {
      *base = "";
      return true;
    }
    if (x.kind != ExprKind::binary || x.op != Op::Add || x.dtype != DType::i64) return false;
    for (auto [c, o] : {std::pair{x.a, x.b}, std::pair{x.b, x.a}})
      if (is_col(c) && home_[o] <= 1) {
        *base = ref(o);
        return true;
      }
    return false;
  };
  // an f32 value rounded to f16 and kept in a float (autocast's widened form): e is
  // cast(f16) of an f32 expression
  auto rounds_to_f16 = [&](int e) {
    const Expr& x = k_.exprs[e];
    return x.kind == ExprKind::cast && x.dtype == DType::f16 && k_.exprs[x.a].dtype == DType::f32;
  };
  std::map<size_t, std::string> stores;
  std::string base;
  rounded_stores_.clear();
  for (size_t i = 0; i < k_.stores.size(); ++i) {
    const kir::Store& s = k_.stores[i];
    if (stores.size() >= kMaxStagedRows || s.accumulate || !row_offset(s.index, &base)) continue;
    const Expr& v = k_.exprs[s.value];
    // an f32 store of an f16 round trip: its source is staged and rlx_round_f16_n rounds the
    // row (the integer rounding in the loop cost as much again as the copy)
    const bool rounded = args_[s.buffer] == DType::f32 && v.kind == ExprKind::cast && v.dtype == DType::f32 && rounds_to_f16(v.a);
    if (!is_16_bit_float(args_[s.buffer]) && !rounded) continue;
    stores[i] = base;
    if (rounded) rounded_stores_.insert(i);
  }
  // 16-bit loads only in a loop that also gathers (a load neither of the row nor invariant in
  // the loop), which GCC leaves scalar: in a vector loop the prelude's conversion is nearly
  // free, and the row buffer cost more than it saved (an SGD update over 784 x 128 f16
  // gradients: 29 us against 22)
  bool gathers = false;
  for (int i : region_exprs_[2])
    if (k_.exprs[i].kind == ExprKind::load && home_[k_.exprs[i].a] == 2 && !row_offset(k_.exprs[i].a, &base)) gathers = true;
  staged_loads_.clear();
  staged_rounds_.clear();
  // the f16 roundings whose one reader is the widening of a rounded store, itself read once
  std::vector<int> uses(k_.exprs.size(), 0);
  for (const Expr& e : k_.exprs)
    for (int o : {e.a, e.b, e.c})
      if (o >= 0 && e.kind != ExprKind::loop_var && e.kind != ExprKind::iconst && e.kind != ExprKind::fconst) ++uses[o];
  for (const kir::Store& st : k_.stores) {
    ++uses[st.value];
    ++uses[st.index];
  }
  std::set<int> only_rounded_stores;
  for (size_t si : rounded_stores_) {
    const int widen = k_.stores[si].value, round = k_.exprs[widen].a;
    if (uses[widen] == 1 && uses[round] == 1) only_rounded_stores.insert(round);
  }
  for (int i : region_exprs_[2]) {
    const Expr& e = k_.exprs[i];
    if (stores.size() + staged_loads_.size() + staged_rounds_.size() >= kMaxStagedRows) break;
    // (a guarded load may not read its whole row)
    if (gathers && e.kind == ExprKind::load && e.c < 0 && is_16_bit_float(args_[e.buffer]) && row_offset(e.a, &base))
      staged_loads_[i] = base;
    // a row of f32 loaded and rounded to f16 (an SGD update reading the rounded gradient) is
    // rounded by rlx_round_f16_n into a row buffer before the loop, unless a rounded store
    // is all that reads it (that store rounds its own row)
    if (!rounds_to_f16(i) || only_rounded_stores.count(i)) continue;
    const Expr& a = k_.exprs[e.a];
    if (a.kind == ExprKind::load && a.c < 0 && args_[a.buffer] == DType::f32 && row_offset(a.a, &base)) staged_rounds_[i] = base;
  }
  return stores;
}

Expected<std::string> Renderer::render(const std::string& symbol) {
  // c64 values: host C only (C99 _Complex); OpenCL C, CUDA and GLSL have no complex type
  bool cplx = false;
  for (DType t : args_) cplx |= is_complex(t);
  for (const Expr& e : k_.exprs) cplx |= is_complex(e.dtype);
  if (cplx && !d_.complex_values)
    return error(ErrorCode::unsupported, "C renderer: complex (c64) values are rendered in the host C dialect only");
  // a kernel the device was never asked about (a copy into an output) may still hold f64
  bool f64 = false;
  for (DType t : args_) f64 |= t == DType::f64;
  for (const Expr& e : k_.exprs) f64 |= e.dtype == DType::f64;
  if (f64 && !d_.f64_values) return error(ErrorCode::unsupported, d_.name, " has no 64-bit floats (f64 values)");
  analyze();
  RLX_TRY(emit_signature(symbol));
  for (const Expr& e : k_.exprs)
    if (e.kind == ExprKind::cast || e.kind == ExprKind::load || e.kind == ExprKind::reduce)
      RLX_TRY(c_storage_type(e.dtype).status());
  RLX_TRY(emit_region(0, 1));
  const int dr = k_.domain_rank;
  out_ << "  " << loop("r", "r0", "r1") << "\n";
  // unravel the row index into the outer domain loops
  int64_t stride = 1;
  for (int l = dr - 2; l >= 0; --l) {
    const std::string v = "(r / " + i64lit(stride) + ") % " + i64lit(k_.loops[l].extent);
    out_ << "    " << (!d_.const_locals ? decl("int64_t", "i" + std::to_string(l), v) : "const int64_t i" + std::to_string(l) + " = " + v + ";") << "\n";
    stride *= k_.loops[l].extent;
  }
  if (d_.const_locals) out_ << "    (void)r;\n";
  RLX_TRY(emit_region(1, 2));
  bool col_has_reduce = false;
  for (int i : region_exprs_[2])
    if (k_.exprs[i].kind == ExprKind::reduce) col_has_reduce = true;
  bool accumulate = false;
  for (const kir::Store& s : k_.stores) accumulate |= s.accumulate;
  // no simd loop over complex values: gcc's complex multiply and divide call libgcc
  // (__muldc3, __divdc3) on special values, and the simd clauses are for real scalars
  const bool vector_loop = !col_has_reduce && !accumulate && !cplx;
  auto narrow_name = [](DType t) { return t == DType::f16 ? "f16" : "bf16"; };
  const int col = dr - 1;
  const std::string cv = "i" + std::to_string(col);
  std::map<size_t, std::string> staged;  // store -> the offset of its row ("" for none)
  staged_loads_.clear();
  staged_rounds_.clear();
  rounded_stores_.clear();
  if (d_.staged_16_bit_rows && vector_loop) staged = plan_staged_rows();
  const bool chunked = !staged.empty() || !staged_loads_.empty() || !staged_rounds_.empty();
  auto at_row = [&](int buffer, const std::string& base) {
    return "b" + std::to_string(buffer) + " + " + (base.empty() ? "" : "(" + base + ") + ") + "rlx_cb";
  };
  if (chunked) {
    out_ << "    for (int64_t rlx_cb = c0; rlx_cb < c1; rlx_cb += " << kStageColumns << ") {\n";
    out_ << "    const int64_t rlx_ce = c1 - rlx_cb < " << kStageColumns << " ? c1 : rlx_cb + " << kStageColumns << ";\n";
    for (const auto& [i, base] : staged) out_ << "    float rlx_s" << i << "[" << kStageColumns << "];\n";
    for (const auto& [i, base] : staged_loads_)
      out_ << "    float rlx_l" << i << "[" << kStageColumns << "];\n    rlx_load_" << narrow_name(args_[k_.exprs[i].buffer])
           << "_n(rlx_l" << i << ", " << at_row(k_.exprs[i].buffer, base) << ", rlx_ce - rlx_cb);\n";
    for (const auto& [i, base] : staged_rounds_) {
      const int load_buffer = k_.exprs[k_.exprs[i].a].buffer;
      out_ << "    float rlx_r" << i << "[" << kStageColumns << "];\n    rlx_round_f16_n(rlx_r" << i << ", "
           << at_row(load_buffer, base) << ", rlx_ce - rlx_cb);\n";
    }
  }
  if (vector_loop) out_ << "    " << simd();
  out_ << "    " << (chunked ? loop(cv, "rlx_cb", "rlx_ce") : loop(cv, "c0", "c1")) << "\n";
  RLX_TRY(emit_region(2, 3));
  for (size_t si = 0; si < k_.stores.size(); ++si) {
    const kir::Store& s = k_.stores[si];
    const DType t = args_[s.buffer];
    const DType vt = k_.exprs[s.value].dtype;
    std::string v = ref(s.value);
    if (vt != t && !(is_float(vt) && is_float(t))) v = cast_expr(v, vt, t);
    std::string target = element(s.buffer, ref(s.index));
    if (d_.strict_types && is_float(vt) && is_float(t) && ct(vt) != ct(t)) v = conv(ct(t), v);
    if (packed(t)) {  // read-modify-write of the packed element
      const std::string idx = ref(s.index), old = packed_load(s.buffer, idx, t);
      std::string nv;
      if (t == DType::f16) nv = s.accumulate ? "rlx_f32_to_f16(rlx_f16_to_f32(" + old + ") + " + v + ")" : "rlx_f32_to_f16(" + v + ")";
      else if (t == DType::bf16) nv = s.accumulate ? "rlx_f32_to_bf16(rlx_bf16_to_f32(" + old + ") + " + v + ")" : "rlx_f32_to_bf16(" + v + ")";
      else if (t == DType::boolean) nv = s.accumulate ? sel("((" + old + ") != 0u) || (" + v + ")", "1u", "0u") : sel("(" + v + ")", "1u", "0u");
      else nv = s.accumulate ? "(" + old + " + " + v + ")" : v;
      out_ << "      " << packed_store(s.buffer, idx, t, nv) << "\n";
      continue;
    }
    if (d_.emulates_int64 && (t == DType::i64 || t == DType::u64)) {  // two words: the value, its sign extension
      const std::string w = t == DType::i64 ? "_i64(" : "_u64(";
      if (s.accumulate) v = "rlx_add" + w + "rlx_narrow" + w + target + "), " + v + ")";
      out_ << "      " << target << " = rlx_widen" << w << v << ");\n";
      continue;
    }
    if (s.accumulate) {
      if (t == DType::f16) {
        out_ << "      " << target << " = rlx_f32_to_f16(rlx_f16_to_f32(" << target << ") + " << v << ");\n";
      } else if (t == DType::bf16) {
        out_ << "      " << target << " = rlx_f32_to_bf16(rlx_bf16_to_f32(" << target << ") + " << v << ");\n";
      } else if (t == DType::boolean) {  // a bool sum is a logical or
        if (d_.strict_types)
          out_ << "      " << target << " = ((" << target << " != uint8_t(0)) || (" << v << ")) ? uint8_t(1) : uint8_t(0);\n";
        else
          out_ << "      " << target << " = (uint8_t)(" << target << " | ((" << v << ") != 0));\n";
      } else {
        out_ << "      " << target << " += " << v << ";\n";
      }
      continue;
    }
    // a value rounded to the stored 16-bit type (a cast kept in a float) is stored from its f32
    // source: the conversion rounds the same way and rounding twice gives the same bits, NaN
    // included; the separate rounding doubled the time of a GELU epilogue storing bf16
    if ((t == DType::f16 || t == DType::bf16) && k_.exprs[s.value].kind == ExprKind::cast && vt == t &&
        k_.exprs[k_.exprs[s.value].a].dtype == DType::f32)
      v = ref(k_.exprs[s.value].a);
    if (staged.count(si)) {
      if (rounded_stores_.count(si)) v = ref(k_.exprs[k_.exprs[s.value].a].a);  // the f32 source of the round trip
      out_ << "      rlx_s" << si << "[" << cv << " - rlx_cb] = " << v << ";\n";
      continue;
    }
    if (t == DType::f16) v = "rlx_f32_to_f16(" + v + ")";
    else if (t == DType::bf16) v = "rlx_f32_to_bf16(" + v + ")";
    else if (t == DType::boolean) v = d_.strict_types ? "((" + v + ") ? uint8_t(1) : uint8_t(0))" : "(uint8_t)((" + v + ") != 0)";
    else if (t == DType::f32 && vt == DType::f64) v = conv("float", v);
    out_ << "      " << target << " = " << v << ";\n";
  }
  out_ << "    }\n";
  if (chunked) {
    for (const auto& [i, base] : staged)
      out_ << "    " << (rounded_stores_.count(i) ? std::string("rlx_round_f16") : "rlx_store_" + std::string(narrow_name(args_[k_.stores[i].buffer])))
           << "_n(" << at_row(k_.stores[i].buffer, base) << ", rlx_s" << i << ", rlx_ce - rlx_cb);\n";
    out_ << "    }\n";
  }
  out_ << "  }\n}\n";
  return out_.str();
}

}  // namespace

bool range_checked(const kir::GeneratedKernel& k, const std::vector<DType>& arg_dtypes, CTarget target) {
  return Renderer(k, arg_dtypes, target, {}).range_checked();
}

Expected<std::string> render_c_kernel(const kir::GeneratedKernel& k, const std::vector<DType>& arg_dtypes,
                                      const std::string& symbol, CTarget target,
                                      const std::vector<GlslArgPlace>& places) {
  if (!places.empty() && places.size() != arg_dtypes.size())
    return error(ErrorCode::internal, "render_c_kernel: ", places.size(), " argument places for ", arg_dtypes.size(), " arguments");
  Renderer r(k, arg_dtypes, target, places);
  return r.render(symbol);
}

namespace {

Claim supports(const NodeDesc& n, bool host) {
  auto check = [&](const TensorType& t) -> std::string {
    if (t.dtype == DType::c64) {
      if (!host)
        return "complex (c64) arithmetic is generated for the host C dialect only (the cpu device); OpenCL C, "
               "CUDA and GLSL kernels have no complex type yet";
      if (!defined_on_complex(n.op)) {  // the reference interpreter's c64 list too
        const OpFamily f = op_info(n.op).family;
        const bool ordering = f == OpFamily::compare || f == OpFamily::argreduce || n.op == Op::Max ||
                              n.op == Op::Min || n.op == Op::ReduceMax || n.op == Op::ReduceMin;
        return cat("the C renderer does not compute ", op_name(n.op), " on c64",
                   ordering ? " (complex values have no order)" : " (nor does the reference interpreter)");
      }
    }
    if (is_packed(t.dtype) && n.op != Op::Param && n.op != Op::Constant)
      return cat("packed ", dtype_name(t.dtype), " values are storage only (they need qmatmul)");
    return "";
  };
  for (const TensorType& t : n.inputs)
    if (auto why = check(t); !why.empty()) return Claim::no(why);
  for (const TensorType& t : n.outputs)
    if (auto why = check(t); !why.empty()) return Claim::no(why);
  return Claim::yes("generated C");
}

}  // namespace

Claim c_renderer_supports(const NodeDesc& n) { return supports(n, false); }

Claim c_host_renderer_supports(const NodeDesc& n) { return supports(n, true); }

Claim c_renderer_supports_32_bit(const NodeDesc& n, const char* language, std::string_view no_f64,
                                 std::string_view no_random) {
  if (!no_f64.empty())
    for (std::span<const TensorType> ts : {n.inputs, n.outputs})
      for (const TensorType& t : ts)
        if (t.dtype == DType::f64) return Claim::no(std::string(no_f64));
  if (n.op == Op::Random) return Claim::no(std::string(no_random));
  Claim c = c_renderer_supports(n);
  if (c.ok) c.text = cat("generated ", language);
  return c;
}

std::string_view c_runtime_helpers() {
  return R"C(
/* ---- rlx runtime helpers ---- */
static inline uint64_t rlx_splitmix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}
static inline double rlx_random01(uint64_t seed, uint64_t counter) {
  uint64_t h = rlx_splitmix64(seed + (counter + 1) * 0x9E3779B97F4A7C15ULL);
  return (double)(h >> 11) * 0x1.0p-53;
}
static inline double rlx_random_uniform(uint64_t seed, uint64_t i, double a, double b) {
  return a + (b - a) * rlx_random01(seed, i);
}
static inline double rlx_random_normal(uint64_t seed, uint64_t i, double mean, double std) {
  double u1 = rlx_random01(seed, 2 * i), u2 = rlx_random01(seed, 2 * i + 1);
  if (u1 < 0x1.0p-53) u1 = 0x1.0p-53;
  return mean + std * sqrt(-2.0 * log(u1)) * cos(6.283185307179586476925286766559 * u2);
}
static inline int64_t rlx_tdiv_i64(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return (int64_t)(0ULL - (uint64_t)a);
  return a / b;
}
static inline int64_t rlx_trem_i64(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;
  return a % b;
}
static inline int64_t rlx_ipow_i64(int64_t base, int64_t e) {
  if (e < 0) return base == 1 ? 1 : (base == -1 ? ((e & 1) ? -1 : 1) : 0);
  uint64_t r = 1, b = (uint64_t)base;
  while (e) { if (e & 1) r *= b; b *= b; e >>= 1; }
  return (int64_t)r;
}
static inline uint64_t rlx_ipow_u64(uint64_t b, uint64_t e) {
  uint64_t r = 1;
  while (e) { if (e & 1) r *= b; b *= b; e >>= 1; }
  return r;
}
static inline float rlx_fmod_floor_f32(float a, float b) {
  float r = fmodf(a, b);
  return (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) ? r + b : r;
}
static inline double rlx_fmod_floor_f64(double a, double b) {
  double r = fmod(a, b);
  return (r != 0.0 && ((r < 0.0) != (b < 0.0))) ? r + b : r;
}
static inline double rlx_f64_to_range_sat(double x, double lo, double hi) {
  if (x != x) return 0.0;
  if (x < lo) return lo;
  if (x > hi) return hi;
  return trunc(x);
}
static inline uint64_t rlx_f64_to_u64_sat(double x) {
  if (x != x || x <= 0.0) return 0;
  if (x >= 18446744073709551615.0) return UINT64_MAX;
  return (uint64_t)x;
}
)C";
}

}  // namespace rlx::codegen
