// The C-family languages generated kernels are rendered in, as data: one Dialect value per
// language says how it spells what the renderer writes (types, casts, literals, declarations,
// selects, loops, buffer access, the kernel's frame) and what it lacks and must emulate
// (narrow types, 64-bit integers, complex values). The renderer (c_renderer.cpp) reads these
// fields and never asks which language it renders; device_modules.cpp reads the rest (the
// prelude, one module per kernel or one for all). A new C-like language is a new value here,
// its prelude, and its kernel frame if none of the existing frames fits.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "rlx/dtype.h"
#include "rlx/status.h"

namespace rlx::codegen {

// The dialects (a Dialect value each, below): C99 for the host compiler, or OpenCL C 1.2 (a __kernel over one work item
// per domain element, buffers as __global arguments followed by `long rows, long cols`), or
// CUDA C++ for NVRTC (an `extern "C" __global__` kernel, one thread per domain element from
// blockIdx/threadIdx with 64-bit index math, `__restrict__` buffer pointers followed by
// `long long rows, long long cols`; a serial kernel runs in one thread). The CUDA dialect
// needs the prelude compiled with RLX_CUDA defined and NVRTC's -default-device. HIP C++ (for
// hipRTC or clang's AMDGPU target) is the CUDA dialect with a prelude that includes
// hip/hip_runtime.h and makes the prelude's functions device functions.
//
// The GLSL dialects render a compute shader's body (the GLSL prelude, glsl_prelude.h, goes
// first): buffers as std430 storage buffers at bindings 0..n-1, one invocation per domain
// element in work groups of kGlslWorkgroupSize over a 2D grid of groups (the id is
// x + y * groups_x * size), a serial kernel in invocation 0. glsl_vulkan takes the domain
// size (int64 rows, cols) as push constants; glsl_gl as uniforms at locations 0 and 1.
// OpenGL 4.5 GLSL has no 8/16-bit types, so glsl_gl declares buffers of bool, i8, u8, i16, u16,
// f16 and bf16 as uint arrays with 4 (or 2) elements a word: loads use bitfieldExtract,
// stores clear and set their bits with atomicAnd/atomicOr (neighbouring elements belong to
// other invocations), and such values are computed in int/uint and wrapped to their width.
//
// The WGSL dialect renders a WebGPU compute shader after the WGSL prelude (wgsl_prelude.h),
// shaped like glsl_gl: storage buffers at bindings 0..n-1 (8/16-bit values and bools packed in
// u32 words, stored with atomics), the domain size (rows, cols) as i32 in a uniform buffer at
// binding n, work groups of kGlslWorkgroupSize over a 2D grid, the GLSL dialects' strict
// typing (bool comparisons, explicit conversions), and WGSL's own syntax for declarations,
// selects, loops and atomics. WGSL has no 64-bit types: index arithmetic is 32-bit, and
// f64 values are refused and i64/u64 values computed in 32 bits with range checks
// (wgsl_supports, range_checked).
//
// The HLSL dialect renders a compute shader for D3D12 (Shader Model 6) after the HLSL prelude
// (hlsl_prelude.h), verified here through glslang's HLSL front end on Vulkan: WGSL's semantics
// (32-bit index math, packed 8/16-bit values stored with Interlocked atomics, i64/u64 in 32 bits
// with range checks) in C's syntax, RWStructuredBuffers at registers u0..n-1 and the domain size
// in a constant buffer (root constants on D3D12, push constants on Vulkan).
//
// The MSL dialect renders Metal kernels after the MSL prelude (msl_prelude.h): C's semantics
// (64-bit integers, native 8/16-bit types) without double, buffers as `device T*` arguments at
// [[buffer(i)]], the domain size as `constant int64_t&` after them, one thread per domain
// element of a 2D grid (x + y * grid width).
enum class CTarget { host, opencl, cuda, hip, glsl_vulkan, glsl_gl, wgsl, hlsl, msl };

// The frame around a kernel's body: its signature, where its buffers and domain size come
// from, and how an invocation finds its (row, column).
enum class KernelFrame : uint8_t {
  host_function,  // void f(void* const* bufs, int64_t r0, int64_t r1, int64_t c0, int64_t c1)
  opencl_kernel,  // __kernel, buffers as __global arguments, then long rows, long cols
  cuda_kernel,    // extern "C" __global__, __restrict__ buffers, then long long rows, cols
  glsl_shader,    // std430 storage buffers at bindings 0..n-1, main(), a 2D grid of work groups
  wgsl_shader,    // storage buffers at bindings, the domain size in a uniform buffer after them
  hlsl_shader,    // RWStructuredBuffers at registers u0..n-1, the domain size in a constant buffer
  msl_kernel,     // Metal: device buffers at [[buffer(i)]], then constant rows, cols; a 2D grid
};

struct Dialect {
  CTarget target;
  const char* name;  // as error messages and docs name it
  KernelFrame frame;
  // glsl_shader: the domain size as push constants (Vulkan), else uniforms at locations 0, 1
  bool push_constants = false;

  // ---- what the language has
  // No implicit conversions: a cast is a constructor `T(v)`, comparisons compute in bool, which
  // has no arithmetic or order, and 64-bit operands widen only explicitly (GLSL, WGSL).
  bool strict_types = false;
  // No 8/16-bit types: bool, i8, u8 (4 a word) and i16, u16, f16, bf16 (2 a word) stay packed
  // in 32-bit words, computed in int/uint and wrapped to their width, stored with atomics.
  bool packs_narrow_types = false;
  // No 64-bit integers: i64/u64 are (low, high) words, computed in 32 bits with range checks
  // that set a check word the executor reads (range_checked): the helpers that do so follow
  // the word's declaration.
  bool emulates_int64 = false;
  std::string_view (*range_check_helpers)() = nullptr;
  bool complex_values = false;  // c64 as C99 _Complex
  bool f64_values = true;       // false: the language has no double (WGSL, MSL)
  // false: floor and ceil take no doubles (HLSL under glslang converts them to float), so f64
  // Floor and Ceil call the prelude's rlx_floor_f64 and rlx_ceil_f64
  bool f64_builtins = true;
  bool omp_simd = false;        // `#pragma omp simd` before vectorizable loops
  // Locals of run-time values may be `const`, and `(void)x;` marks one unused (GLSL's const
  // is a compile-time constant).
  bool const_locals = true;
  // The prelude rounds a float to f16/bf16 in place (rlx_round_f16/bf16, vectorizable); else
  // through the conversions there and back.
  bool narrow_rounding_helpers = true;
  // f16 / bf16 stores of contiguous rows (and such loads in loops that gather) go through f32
  // row buffers and the prelude's rlx_store_f16_n / rlx_load_f16_n (F16C / AVX-512
  // conversions) and their bf16 twins (c_renderer.cpp says why). Host C only.
  bool staged_16_bit_rows = false;
  // `c ? a : b` evaluates only the side it picks, and the compiler turns a guarded load into a
  // masked one (kir::ExprKind::load's guard): the load reads at its index as it is. Else the
  // index is 0 where the guard fails. Host C only (the GPU languages' selects may evaluate
  // both sides, or index with no bounds check).
  bool short_circuit_guards = false;
  // ---- what its implementations get wrong (each handled by a spelling that avoids it)
  bool exact_int_to_f32 = true;      // false: integer -> f32 through the prelude (may truncate)
  bool ordered_not_equal = false;    // NaN != x may be false: write !(a == b)
  bool own_f32_to_u32 = false;       // f32 -> u32 saturates through the prelude (WGSL clamps)
  bool negates_unsigned = true;      // false: -x only on signed types, 0 - x on unsigned

  // ---- spellings
  bool var_declarations = false;     // `var name: type = value;` (else `type name = value;`)
  bool select_function = false;      // `select(else, then, cond)` (else `cond ? then : else`)
  bool postfix_increment = false;    // `i++;` (else `++i;`)
  bool braced_if_bodies = false;     // `if (c) { s }`: a body must be a block
  bool explicit_atomic_loads = false;  // packed words are atomic<u32>: read with atomicLoad
  bool builtin_isnan = false;        // isnan(x) (else x != x)
  bool builtin_bitfield_extract = true;  // bitfieldExtract (else the prelude's rlx_extract_i/u)
  const char* loop_index = "int64_t";    // the type of a counted loop's index
  const char* i64_suffix = "LL";     // an int64_t literal's suffix
  const char* u64_suffix = "ULL";    // a uint64_t literal's suffix
  const char* f64_suffix = "";       // a double literal's suffix (GLSL: lf)
  const char* nan = "NAN";           // NaN as a value
  // A float constant of dtype t (f32 or f64; NaN and infinities too), and an integer constant
  // of dtype t (a bool: 0 or 1) as a value of t's compute type.
  std::string (*float_literal)(double v, DType t) = nullptr;
  std::string (*int_literal)(int64_t v, DType t) = nullptr;
  // A statement that stores `value` (int or uint, already in range) into packed element
  // `index` of buffer `array` of `bits`-bit elements (packs_narrow_types): other elements of
  // the word belong to other invocations, so its bits are cleared and set atomically.
  std::string (*packed_store)(const std::string& array, const std::string& index, int bits,
                              const std::string& value) = nullptr;

  // The text before the kernels of a module: the prelude and helpers rendered kernels call.
  std::string (*prelude)() = nullptr;
  // One module per kernel (a shader each), else one translation unit for every kernel.
  bool module_per_kernel = false;
  // Buffers at numbered bindings 0..n-1: arguments of one dtype may share a binding
  // (GlslArgPlace), so a device with few bindings packs a kernel's arguments.
  bool binds_buffers = false;
};

// The dialect of `target`.
const Dialect& dialect(CTarget target);

// The C type a buffer of dtype `t` holds (float, int8_t, uint16_t for f16/bf16, float _Complex
// for c64...); unsupported for dtypes no dialect stores.
Expected<std::string> c_storage_type(DType t);
// The C type a value of dtype `t` is computed in: float for f16/bf16/f32, double _Complex for
// c64, bool for booleans where `strict_types` (else int), else the storage type.
std::string c_compute_type(DType t, bool strict_types);

}  // namespace rlx::codegen
