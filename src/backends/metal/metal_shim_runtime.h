// The runtime that checks the metal device's MSL on Linux, where there is no Metal: a
// hal::Runtime over host memory that compiles each MSL module as C++ against rlx's shim of the
// Metal built-ins the MSL prelude and the renderer use (a `metal_stdlib` header written to the
// kernel cache: address-space words, as_type, the vector types and math functions the kernels
// call, built on compiler built-ins so that nothing of the C library's math leaks in), and runs
// every kernel over its grid, one thread after another, on the CPU.
//
// What this checks: that the generated MSL is well-formed C++ of the subset Metal takes
// (no double, no recursion, address spaces on every pointer), and that its kernels compute what
// the reference does. What it cannot: Metal's own compiler, its fast-math defaults, threads
// running concurrently, and any GPU. New buffers are filled with 0xAB bytes, so a kernel that
// reads memory nothing wrote shows it.
#pragma once

#include <memory>

#include "hal/hal.h"
#include "rlx/status.h"

namespace rlx::metal {

// The runtime ("metal"); an error when the kernel cache folder cannot be written.
Expected<std::shared_ptr<hal::Runtime>> create_shim_runtime();

}  // namespace rlx::metal
