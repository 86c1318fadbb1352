// Renders generated kernels of the kernel-level IR to C. Each kernel becomes
//   void <symbol>(void* const* bufs, int64_t r0, int64_t r1, int64_t c0, int64_t c1)
// computing domain rows [r0, r1) and innermost-loop columns [c0, c1), so the runtime can
// split the work over threads (and a GEMM can run it on one finished tile as an epilogue).
#pragma once

#include <string>
#include <vector>

#include "codegen/dialect.h"
#include "rlx/device.h"
#include "rlx/kernel_ir.h"

namespace rlx::codegen {

// Whether `t` is one of the GLSL dialects (the GLSL prelude and native kernel header).
inline bool is_glsl(CTarget t) { return t == CTarget::glsl_vulkan || t == CTarget::glsl_gl; }

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

// Whether a kernel rendered in `target`, a dialect that emulates 64-bit integers (WGSL, HLSL),
// binds the range-check word: one more storage buffer after its arguments, a u32 the kernel
// sets to nonzero when a 64-bit integer value it loads or computes does not fit the 32 bits it
// computes in. True for kernels with i64/u64 data (wgsl_prelude.h, hlsl_prelude.h); false in
// the other dialects.
bool range_checked(const kir::GeneratedKernel& k, const std::vector<DType>& arg_dtypes, CTarget target);

// Whether generated code in the device dialects (OpenCL C, CUDA, GLSL) computes strict
// primitive `n`: every dtype but c64 (complex arithmetic is host C only) and packed i4/u4
// outside weights and constants.
Claim c_renderer_supports(const NodeDesc& n);
// The same for host C (the cpu device): c64 too, for the ops the reference interpreter runs on
// c64 (arithmetic, equal/not_equal, where, cast, reduce_sum/prod, dot, movement, and abs, real,
// imag, conj, angle, complex).
Claim c_host_renderer_supports(const NodeDesc& n);

// c_renderer_supports for a dialect that computes in 32 bits: f64 values are refused with
// `no_f64` (where it is not empty: HLSL computes some f64 ops), random numbers (rlx's generator
// is 64-bit) with `no_random`, and a claim reads "generated <language>".
Claim c_renderer_supports_32_bit(const NodeDesc& n, const char* language, std::string_view no_f64,
                                 std::string_view no_random);

// Helpers every rendered file needs beyond the math prelude (random numbers, integer
// division without traps, saturating casts).
std::string_view c_runtime_helpers();

}  // namespace rlx::codegen
