// Renders generated kernels of the kernel-level IR to C. Each kernel becomes
//   void <symbol>(void* const* bufs, int64_t r0, int64_t r1, int64_t c0, int64_t c1)
// computing domain rows [r0, r1) and innermost-loop columns [c0, c1), so the runtime can
// split the work over threads (and a GEMM can run it on one finished tile as an epilogue).
#pragma once

#include <string>
#include <vector>

#include "rlx/device.h"
#include "rlx/kernel_ir.h"

namespace rlx::codegen {

// Which C dialect: C99 for the host compiler, or OpenCL C 1.2 (a __kernel over one work item
// per domain element, buffers as __global arguments followed by `long rows, long cols`), or
// CUDA C++ for NVRTC (an `extern "C" __global__` kernel, one thread per domain element from
// blockIdx/threadIdx with 64-bit index math, `__restrict__` buffer pointers followed by
// `long long rows, long long cols`; a serial kernel runs in one thread). The CUDA dialect
// needs the prelude compiled with RLX_CUDA defined and NVRTC's -default-device.
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
// (wgsl_supports, wgsl_range_checked).
enum class CTarget { host, opencl, cuda, glsl_vulkan, glsl_gl, wgsl };

// Whether `t` is one of the GLSL dialects (a shader per kernel, bindings, the GLSL prelude).
inline bool is_glsl(CTarget t) { return t == CTarget::glsl_vulkan || t == CTarget::glsl_gl; }
// Whether `t` renders one shader per kernel with its buffers at numbered bindings (GLSL, WGSL),
// so that a device with few bindings may pack a kernel's arguments (GlslArgPlace).
inline bool is_shader(CTarget t) { return is_glsl(t) || t == CTarget::wgsl; }

// Work-group size (local_size_x) of shaders in the GLSL dialects.
inline constexpr int kGlslWorkgroupSize = 64;

// Where a GLSL kernel finds buffer argument i: storage buffer `binding`, from element
// `offset` on. Arguments of one dtype may share a binding: a device with few storage blocks
// (OpenGL on llvmpipe has 16) packs a kernel's read-only constants into one buffer.
struct GlslArgPlace {
  int binding = 0;
  int64_t offset = 0;
};

// The C function for one kernel. `arg_dtypes[i]` is the element type of the kernel's i-th
// buffer argument. Returns unsupported for dtypes the dialect does not handle (c64 outside
// CTarget::host). In host C, c64 values are stored as float _Complex (the 8 bytes re, im of
// rlx's c64 tensors) and computed as double _Complex, as the reference interpreter does.
// `places` (GLSL dialects only; empty: argument i at binding i, offset 0) says where each
// argument lives.
Expected<std::string> render_c_kernel(const kir::GeneratedKernel& k, const std::vector<DType>& arg_dtypes,
                                      const std::string& symbol, CTarget target = CTarget::host,
                                      const std::vector<GlslArgPlace>& places = {});

// Whether a kernel rendered in CTarget::wgsl binds the range-check word: one more storage
// buffer after its arguments (and before its uniform), a u32 the kernel sets to nonzero when a
// 64-bit integer value it loads or computes does not fit the 32 bits WGSL computes in. True
// for kernels with i64/u64 data (wgsl_prelude.h).
bool wgsl_range_checked(const kir::GeneratedKernel& k, const std::vector<DType>& arg_dtypes);

// Whether generated code in the device dialects (OpenCL C, CUDA, GLSL) computes strict
// primitive `n`: every dtype but c64 (complex arithmetic is host C only) and packed i4/u4
// outside weights and constants.
Claim c_renderer_supports(const NodeDesc& n);
// The same for host C (the cpu device): c64 too, for the ops the reference interpreter runs on
// c64 (arithmetic, equal/not_equal, where, cast, reduce_sum/prod, dot, movement, and abs, real,
// imag, conj, angle, complex).
Claim c_host_renderer_supports(const NodeDesc& n);

// Helpers every rendered file needs beyond the math prelude (random numbers, integer
// division without traps, saturating casts).
std::string_view c_runtime_helpers();

}  // namespace rlx::codegen
