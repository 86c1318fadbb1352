// The translation units a GPU-class device builds for a kernel program's generated kernels,
// assembled in one place for every device dialect: OpenCL C and CUDA C++ put every kernel of
// the program into one unit after the C prelude (entry `rlx_<kernel name>`); GLSL gets one
// compute shader per kernel, each starting with the GLSL prelude (entry `main`). Every entry
// binds the kernel's buffer arguments in order and takes the domain size as two int64
// scalars, rows and cols (named rlx_rows and rlx_cols where the dialect names them).
#pragma once

#include <vector>

#include "c_renderer.h"
#include "kernel_module.h"
#include "rlx/kernel_ir.h"

namespace rlx::codegen {

// The modules of `prog`'s generated kernels in `target`'s dialect (not host): one module with
// an entry per kernel (OpenCL, CUDA), or module i for kernel i (GLSL). `places[i]`, when given
// (GLSL only), says where kernel i's arguments live; a kernel without one binds argument j at
// binding j, and its entry's buffer count is then its argument count, else the bindings used;
// a WGSL kernel with 64-bit integer data binds the range-check word after them (range_checked).
Expected<std::vector<KernelModule>> render_device_modules(const kir::KernelProgram& prog, CTarget target,
                                                              const std::vector<std::vector<GlslArgPlace>>& places = {});

// The translation unit of a dialect that puts every kernel in one unit (CUDA, HIP, OpenCL)
// around `kernels`: the dialect's prelude (the C prelude and runtime helpers) first.
std::string translation_unit(CTarget target, std::string_view kernels);

// The generated kernels of `prog` in `target`'s dialect, kernel i named `prefix +
// generated[i].name`, one after the other (what translation_unit wraps).
Expected<std::string> render_unit_kernels(const kir::KernelProgram& prog, const std::string& prefix, CTarget target);

}  // namespace rlx::codegen
