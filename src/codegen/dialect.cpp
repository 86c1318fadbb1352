// The dialect values: host C, OpenCL C, CUDA C++, HIP C++, GLSL for Vulkan and for OpenGL, WGSL, HLSL, MSL.
#include "codegen/dialect.h"

#include <cmath>
#include <cstdio>

#include "codegen/c_prelude.h"
#include "codegen/glsl_prelude.h"
#include "codegen/hlsl_prelude.h"
#include "codegen/msl_prelude.h"
#include "codegen/wgsl_prelude.h"

namespace rlx::codegen {

Expected<std::string> c_storage_type(DType t) {
  switch (t) {
    case DType::f32: return std::string("float");
    case DType::f64: return std::string("double");
    case DType::f16:
    case DType::bf16: return std::string("uint16_t");
    case DType::i8: return std::string("int8_t");
    case DType::u8:
    case DType::boolean: return std::string("uint8_t");
    case DType::i16: return std::string("int16_t");
    case DType::u16: return std::string("uint16_t");
    case DType::i32: return std::string("int32_t");
    case DType::u32: return std::string("uint32_t");
    case DType::i64: return std::string("int64_t");
    case DType::u64: return std::string("uint64_t");
    // host C only (dialects without complex_values refuse c64): the 8 bytes (re, im) of rlx's
    // c64 tensors are exactly a C99 float _Complex
    case DType::c64: return std::string("float _Complex");
    default: break;
  }
  return error(ErrorCode::unsupported, "the C renderer does not handle ", dtype_name(t));
}

std::string c_compute_type(DType t, bool strict_types) {
  switch (t) {
    case DType::f32:
    case DType::f16:
    case DType::bf16: return "float";
    case DType::f64: return "double";
    // c64 computes in double _Complex, as the reference interpreter's complex<double>: products
    // of f32 parts are exact there, so results round once, when stored (as f16 computes in float)
    case DType::c64: return "double _Complex";
    case DType::boolean: return strict_types ? "bool" : "int";
    default: return *c_storage_type(t);
  }
}

namespace {

bool is_f64(DType t) { return t == DType::f64; }

std::string digits(double v, const char* format) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  std::string s(buf);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

// C: NAN and INFINITY are <math.h> macros (float); an f32 constant is a cast double literal.
std::string c_float_literal(double v, DType t) {
  if (std::isnan(v)) return is_f64(t) ? "((double)NAN)" : "NAN";
  if (std::isinf(v)) return v > 0 ? (is_f64(t) ? "((double)INFINITY)" : "INFINITY") : (is_f64(t) ? "(-(double)INFINITY)" : "(-INFINITY)");
  const std::string s = digits(v, "%.17g");
  return is_f64(t) ? s : "(float)" + s;
}

// GLSL: NAN and INFINITY are macros of the GLSL prelude, `lf` marks a double literal.
std::string glsl_float_literal(double v, DType t) {
  if (!std::isfinite(v)) {
    std::string s = std::isnan(v) ? "NAN" : "INFINITY";
    if (is_f64(t)) s = "double(" + s + ")";
    return std::isinf(v) && v < 0 ? "(-" + s + ")" : s;
  }
  const std::string s = digits(v, "%.17g");
  return is_f64(t) ? s + "lf" : s;
}

// WGSL: an abstract float; NaN and infinity are run-time values of the prelude (a constant may
// not be either), and so is an f32 constant past f32's range (C rounds it to infinity).
std::string wgsl_float_literal(double v, DType) {
  if (std::isnan(v)) return "rlx_nan()";
  if (std::isinf(v) || std::fabs(v) > 3.4028234663852886e38) return v > 0 ? "rlx_inf()" : "(-rlx_inf())";
  return digits(static_cast<double>(static_cast<float>(v)), "%.9g");
}

// HLSL: f32 as WGSL's, NaN and infinity through the prelude's macros; f64 with the L suffix
// (a bare literal is a float)
std::string hlsl_float_literal(double v, DType t) {
  if (is_f64(t)) {
    if (std::isnan(v)) return "double(NAN)";
    if (std::isinf(v)) return v > 0 ? "double(INFINITY)" : "(-double(INFINITY))";
    return digits(v, "%.17g") + "L";
  }
  if (std::isnan(v)) return "NAN";
  if (std::isinf(v) || std::fabs(v) > 3.4028234663852886e38) return v > 0 ? "INFINITY" : "(-INFINITY)";
  return digits(static_cast<double>(static_cast<float>(v)), "%.9g");
}

std::string c_int_literal(int64_t v, DType t) {
  if (v == INT64_MIN) return "INT64_MIN";
  if (t == DType::u64) return std::to_string(v) + "ULL";
  return "(" + c_compute_type(t, false) + ")" + std::to_string(v) + "LL";
}

// GLSL: `l`/`ul` mark 64-bit literals, casts are constructors, a bool constant is true/false.
std::string glsl_int_literal(int64_t v, DType t) {
  if (v == INT64_MIN) return "INT64_MIN";
  if (t == DType::u64) return std::to_string(v) + "ul";
  if (t == DType::boolean) return v ? "true" : "false";
  return c_compute_type(t, true) + "(" + std::to_string(v) + "l)";
}

// WGSL: an abstract integer, converted (INT64_MIN's digits would be a compile error: WGSL's
// 64-bit values are computed in 32 bits, and the renderer flags constants past them)
std::string wgsl_int_literal(int64_t v, DType t) {
  if (t == DType::boolean) return v ? "true" : "false";
  return c_compute_type(t, true) + "(" + std::to_string(v) + ")";
}

// HLSL: 32-bit values (64-bit integers are emulated in 32 bits, and the renderer flags
// constants past them), unsigned literals marked `u`, the least int as an expression
std::string hlsl_int_literal(int64_t v, DType t) {
  if (t == DType::boolean) return v ? "true" : "false";
  if (is_unsigned_int(t)) return c_compute_type(t, true) + "(" + std::to_string(static_cast<uint32_t>(v)) + "u)";
  if (v == INT32_MIN) return c_compute_type(t, true) + "(-2147483647 - 1)";
  return c_compute_type(t, true) + "(" + std::to_string(v) + ")";
}

const char* lane_mask(int bits) { return bits == 8 ? "0xffu" : "0xffffu"; }

// The value first: it may read the element (an accumulating store), which the atomicAnd clears.
std::string glsl_packed_store(const std::string& b, const std::string& index, int bits, const std::string& value) {
  const std::string mask = lane_mask(bits), per = std::to_string(32 / bits);
  return "{ uint rlx_v = uint(" + value + ") & " + mask + "; int rlx_w = int((" + index + ") / " + per +
         "l); uint rlx_s = uint((" + index + ") % " + per + "l) * " + std::to_string(bits) + "u; atomicAnd(" + b +
         "[rlx_w], ~(" + mask + " << rlx_s)); atomicOr(" + b + "[rlx_w], rlx_v << rlx_s); }";
}

std::string wgsl_packed_store(const std::string& b, const std::string& index, int bits, const std::string& value) {
  const std::string mask = lane_mask(bits), per = std::to_string(32 / bits);
  return "{ let rlx_v = u32(" + value + ") & " + mask + "; let rlx_w = i32((" + index + ") / " + per +
         "); let rlx_s = u32((" + index + ") % " + per + ") * " + std::to_string(bits) + "u; atomicAnd(&" + b +
         "[rlx_w], ~(" + mask + " << rlx_s)); atomicOr(&" + b + "[rlx_w], rlx_v << rlx_s); }";
}

std::string hlsl_packed_store(const std::string& b, const std::string& index, int bits, const std::string& value) {
  const std::string mask = lane_mask(bits), per = std::to_string(32 / bits);
  return "{ uint rlx_v = uint(" + value + ") & " + mask + "; int rlx_w = int((" + index + ") / " + per +
         "); uint rlx_s = uint((" + index + ") % " + per + ") * " + std::to_string(bits) + "u; InterlockedAnd(" + b +
         "[rlx_w], ~(" + mask + " << rlx_s)); InterlockedOr(" + b + "[rlx_w], rlx_v << rlx_s); }";
}

std::string host_prelude() { return std::string(c_prelude()) + std::string(c_runtime_helpers()); }
std::string opencl_prelude() { return "#define RLX_OPENCL 1\n" + host_prelude(); }
std::string cuda_prelude() { return "#define RLX_CUDA 1\n" + host_prelude(); }
// hipRTC includes hip_runtime.h itself (the include is then a no-op); an offline clang needs it
std::string hip_prelude() {
  return "#define RLX_HIP 1\n#include <hip/hip_runtime.h>\n#pragma clang force_cuda_host_device begin\n" + host_prelude() +
         "#pragma clang force_cuda_host_device end\n";
}
std::string vulkan_prelude() { return glsl_prelude(CTarget::glsl_vulkan); }
std::string gl_prelude() { return glsl_prelude(CTarget::glsl_gl); }
std::string webgpu_prelude() { return std::string(wgsl_prelude()); }
std::string directx_prelude() { return std::string(hlsl_prelude()); }
std::string metal_prelude() { return std::string(msl_prelude()); }

Dialect c_family(CTarget target, const char* name, KernelFrame frame, std::string (*prelude)()) {
  Dialect d{target, name, frame};
  d.float_literal = c_float_literal;
  d.int_literal = c_int_literal;
  d.prelude = prelude;
  return d;
}

// What the shading languages share: strict typing, no const run-time locals, isnan, and a
// shader per kernel with its buffers at numbered bindings.
Dialect shader(CTarget target, const char* name, KernelFrame frame, std::string (*prelude)()) {
  Dialect d{target, name, frame};
  d.strict_types = true;
  d.const_locals = false;
  d.narrow_rounding_helpers = false;
  d.builtin_isnan = true;
  d.u64_suffix = "ul";
  d.prelude = prelude;
  d.module_per_kernel = true;
  d.binds_buffers = true;
  return d;
}

Dialect glsl(CTarget target, const char* name, bool vulkan) {
  Dialect d = shader(target, name, KernelFrame::glsl_shader, vulkan ? vulkan_prelude : gl_prelude);
  d.push_constants = vulkan;
  d.packs_narrow_types = !vulkan;  // OpenGL 4.5 GLSL has no 8/16-bit types
  d.i64_suffix = "l";
  d.f64_suffix = "lf";
  d.float_literal = glsl_float_literal;
  d.int_literal = glsl_int_literal;
  d.packed_store = glsl_packed_store;
  return d;
}

// What the shading languages that compute in 32 bits share (WGSL, and HLSL as glslang takes
// it): no doubles, 8/16-bit values packed in words, 64-bit integers emulated with range checks,
// f32 -> u32 saturated by the prelude (WGSL's own conversion clamps at 4294967040; HLSL's C
// path bound 4294967295.0 rounds up in float), bit fields extracted by the prelude.
Dialect shader_32_bit(CTarget target, const char* name, KernelFrame frame, std::string (*prelude)(),
                      std::string_view (*range_check_helpers)()) {
  Dialect d = shader(target, name, frame, prelude);
  d.f64_values = false;
  d.packs_narrow_types = true;
  d.emulates_int64 = true;
  d.range_check_helpers = range_check_helpers;
  d.own_f32_to_u32 = true;
  d.builtin_bitfield_extract = false;
  d.i64_suffix = "";
  return d;
}

Dialect wgsl() {
  Dialect d = shader_32_bit(CTarget::wgsl, "WGSL", KernelFrame::wgsl_shader, webgpu_prelude, wgsl_range_check_helpers);
  // SwiftShader truncates integer -> f32 and compares NaN as ordered in !=
  d.exact_int_to_f32 = false;
  d.ordered_not_equal = true;
  d.negates_unsigned = false;
  d.var_declarations = true;
  d.select_function = true;
  d.postfix_increment = true;
  d.braced_if_bodies = true;
  d.explicit_atomic_loads = true;
  d.loop_index = "i32";
  d.nan = "rlx_nan()";
  d.float_literal = wgsl_float_literal;
  d.int_literal = wgsl_int_literal;
  d.packed_store = wgsl_packed_store;
  return d;
}

// WGSL's semantics in C's spelling (hlsl_prelude.h says why)
Dialect hlsl() {
  Dialect d = shader_32_bit(CTarget::hlsl, "HLSL", KernelFrame::hlsl_shader, directx_prelude, hlsl_range_check_helpers);
  d.loop_index = "int";
  d.u64_suffix = "u";
  d.float_literal = hlsl_float_literal;
  d.int_literal = hlsl_int_literal;
  d.packed_store = hlsl_packed_store;
  d.f64_values = true;  // arithmetic in doubles, transcendentals from the prelude (shader_f64_math)
  d.f64_builtins = false;
  d.f64_suffix = "L";
  return d;
}

}  // namespace

const Dialect& dialect(CTarget target) {
  static const Dialect host = [] {
    Dialect d = c_family(CTarget::host, "C", KernelFrame::host_function, host_prelude);
    d.complex_values = true;
    d.omp_simd = true;
    d.staged_16_bit_rows = true;
    d.short_circuit_guards = true;
    return d;
  }();
  static const Dialect opencl = c_family(CTarget::opencl, "OpenCL C", KernelFrame::opencl_kernel, opencl_prelude);
  static const Dialect cuda = c_family(CTarget::cuda, "CUDA C++", KernelFrame::cuda_kernel, cuda_prelude);
  static const Dialect hip = c_family(CTarget::hip, "HIP C++", KernelFrame::cuda_kernel, hip_prelude);
  static const Dialect vulkan = glsl(CTarget::glsl_vulkan, "GLSL (Vulkan)", true);
  static const Dialect gl = glsl(CTarget::glsl_gl, "GLSL (OpenGL)", false);
  static const Dialect webgpu = wgsl();
  static const Dialect directx = hlsl();
  static const Dialect metal = [] {
    Dialect d = c_family(CTarget::msl, "MSL", KernelFrame::msl_kernel, metal_prelude);
    d.f64_values = false;
    d.builtin_isnan = true;   // x != x is no NaN test under fast math
    d.own_f32_to_u32 = true;  // `double` is float in MSL: the C path's 4294967295.0 bound rounds up
    return d;
  }();
  switch (target) {
    case CTarget::host: return host;
    case CTarget::opencl: return opencl;
    case CTarget::cuda: return cuda;
    case CTarget::hip: return hip;
    case CTarget::glsl_vulkan: return vulkan;
    case CTarget::glsl_gl: return gl;
    case CTarget::wgsl: return webgpu;
    case CTarget::hlsl: return directx;
    case CTarget::msl: return metal;
  }
  return host;
}

}  // namespace rlx::codegen
