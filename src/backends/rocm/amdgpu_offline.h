// HIP C++ compiled ahead of time for AMD GPUs by clang's AMDGPU backend, without a GPU or
// hipRTC (Debian's hipRTC, ROCm 5.2, crashes in its code-object manager on machines without
// one): what checks the rocm device's generated code in CI. The clang, the HIP headers and the
// ROCm device libraries (ocml, ockl) are those CMake found at configure time; the device
// libraries of Debian's ROCm 5.2 predate gfx942 and gfx1100, so the build folder holds a copy
// of their folder with the two one-constant ISA-version files those targets select
// (oclc_isa_version_942.bc, _1100.bc), as later ROCm releases ship them.
#pragma once

#include <string>
#include <vector>

#include "rlx/status.h"

namespace rlx::rocm {

// Whether rlx was configured with a clang that can compile HIP for AMD GPUs; why not otherwise.
Status amdgpu_offline_available();

// The targets CI compiles for: CDNA 2 (MI200), CDNA 3 (MI300) and RDNA 3.
inline const std::vector<std::string>& amdgpu_check_targets() {
  static const std::vector<std::string> t = {"gfx90a", "gfx942", "gfx1100"};
  return t;
}

// What a kernel of a code object uses, from its AMDGPU metadata note.
struct AmdgpuKernelResources {
  std::string name;
  int vgpr_count = 0, sgpr_count = 0, agpr_count = 0;
  int vgpr_spill_count = 0, sgpr_spill_count = 0;
  int64_t lds_bytes = 0;      // .group_segment_fixed_size
  int64_t scratch_bytes = 0;  // .private_segment_fixed_size
  int wavefront_size = 0;
};

struct AmdgpuCodeObject {
  std::vector<char> bytes;  // the ELF code object (hipModuleLoadData loads it)
  std::vector<AmdgpuKernelResources> kernels;
};

// Compiles a HIP translation unit (rocm::translation_unit) for `gfx` ("gfx90a", ...) at -O3,
// linking the device libraries, and reads its kernels' resources. Errors carry clang's
// message (trimmed) and name the target.
Expected<AmdgpuCodeObject> compile_amdgpu_offline(const std::string& source, const std::string& gfx);

}  // namespace rlx::rocm
