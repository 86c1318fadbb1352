#include "device_modules.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "c_prelude.h"
#include "glsl_prelude.h"
#include "wgsl_prelude.h"

namespace rlx::codegen {

std::string cuda_translation_unit(std::string_view kernels) {
  std::string src = "#define RLX_CUDA 1\n";
  src += c_prelude();
  src += c_runtime_helpers();
  src += kernels;
  return src;
}

Expected<std::vector<KernelModule>> render_device_modules(const kir::KernelProgram& prog, CTarget target,
                                                              const std::vector<std::vector<GlslArgPlace>>& places) {
  if (target == CTarget::host) return error(ErrorCode::internal, "render_device_modules: host C is not a device dialect");
  const bool glsl = is_shader(target);  // a module per kernel (GLSL, WGSL)
  const bool dump = glsl && std::getenv("RLX_DUMP_GLSL");
  if (dump) std::fprintf(stderr, "%s\n", prog.to_text().c_str());
  std::vector<KernelModule> modules;
  std::string unit;  // OpenCL C / CUDA: every kernel in one
  const std::string prelude = target == CTarget::wgsl ? std::string(wgsl_prelude()) : glsl ? glsl_prelude(target) : std::string();
  for (size_t i = 0; i < prog.generated.size(); ++i) {
    const kir::GeneratedKernel& k = prog.generated[i];
    std::vector<DType> dts;
    for (int b : k.args) dts.push_back(prog.buffers[b].dtype);
    const std::vector<GlslArgPlace> none;
    const std::vector<GlslArgPlace>& at = i < places.size() ? places[i] : none;
    RLX_ASSIGN_OR_RETURN(std::string fn, render_c_kernel(k, dts, "rlx_" + k.name, target, at));
    KernelEntry e{"rlx_" + k.name, static_cast<int>(k.args.size()), {"rlx_rows", "rlx_cols"}};
    if (!at.empty()) {
      int bindings = 0;
      for (const GlslArgPlace& p : at) bindings = std::max(bindings, p.binding + 1);
      e.buffers = bindings;
    }
    if (target == CTarget::wgsl && wgsl_range_checked(k, dts)) ++e.buffers;  // the check word, bound last
    if (glsl) {
      if (dump) std::fprintf(stderr, "%s\n", fn.c_str());  // the kernel, without the prelude
      modules.push_back({prelude + fn, {e}});
    } else {
      unit += "\n" + fn;
      if (modules.empty()) modules.emplace_back();
      modules[0].entries.push_back(e);
    }
  }
  if (!glsl && !modules.empty()) {
    if (target == CTarget::opencl)
      modules[0].source = "#define RLX_OPENCL 1\n" + std::string(c_prelude()) + std::string(c_runtime_helpers()) + unit;
    else
      modules[0].source = cuda_translation_unit(unit);
  }
  return modules;
}

}  // namespace rlx::codegen
