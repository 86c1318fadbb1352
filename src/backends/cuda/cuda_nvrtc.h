// NVRTC: CUDA C++ to a GPU binary at run time, without a GPU. Results are cached in memory
// and on disk (the kernel cache folder of codegen::kernel_cache_dir(), subfolder cuda/),
// keyed by the source, the target architecture, the options and the NVRTC version, so a
// later process skips the compiler. This header needs no CUDA headers (the NVRTC check in
// tests/cuda/ uses it on machines without a GPU).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "rlx/status.h"

namespace rlx::cuda {

struct NvrtcImage {
  std::vector<char> bytes;  // a CUBIN for "sm_XY", PTX text (with its NUL) for "compute_XY"
  bool ptx = false;
  bool from_cache = false;  // found in memory or on disk
  double compile_seconds = 0;
};

// The NVRTC options every program is compiled with (besides -arch): device functions by
// default (the prelude's static functions), C++17, no fast math (the prelude's accuracy).
std::vector<std::string> nvrtc_options();

// "13.0" and so on.
std::string nvrtc_version();

// Compute capabilities NVRTC can target (sm_XY as XY), ascending.
std::vector<int> nvrtc_supported_archs();

// Compiles `source` for `arch` ("sm_90": a CUBIN; "compute_90": PTX for the driver to JIT).
// Errors carry NVRTC's log (trimmed) and name the call that failed.
Expected<std::shared_ptr<const NvrtcImage>> nvrtc_compile(const std::string& source, const std::string& arch);

}  // namespace rlx::cuda
