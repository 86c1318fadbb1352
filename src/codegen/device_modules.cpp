#include "device_modules.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "dialect.h"

namespace rlx::codegen {

std::string translation_unit(CTarget target, std::string_view kernels) { return dialect(target).prelude() + std::string(kernels); }

Expected<std::string> render_unit_kernels(const kir::KernelProgram& prog, const std::string& prefix, CTarget target) {
  std::string src;
  for (const kir::GeneratedKernel& k : prog.generated) {
    std::vector<DType> dts;
    for (int b : k.args) dts.push_back(prog.buffers[b].dtype);
    RLX_ASSIGN_OR_RETURN(std::string fn, render_c_kernel(k, dts, prefix + k.name, target));
    src += "\n" + fn;
  }
  return src;
}

Expected<std::vector<KernelModule>> render_device_modules(const kir::KernelProgram& prog, CTarget target,
                                                              const std::vector<std::vector<GlslArgPlace>>& places) {
  if (target == CTarget::host) return error(ErrorCode::internal, "render_device_modules: host C is not a device dialect");
  const Dialect& d = dialect(target);
  const bool per_kernel = d.module_per_kernel;  // a shader each (GLSL, WGSL), else one unit
  const bool dump = per_kernel && std::getenv("RLX_DUMP_GLSL");
  if (dump) std::fprintf(stderr, "%s\n", prog.to_text().c_str());
  std::vector<KernelModule> modules;
  std::string unit;  // OpenCL C / CUDA: every kernel in one
  const std::string prelude = d.prelude();
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
    if (d.emulates_int64 && range_checked(k, dts, target)) ++e.buffers;  // the check word, bound last
    if (per_kernel) {
      if (dump) std::fprintf(stderr, "%s\n", fn.c_str());  // the kernel, without the prelude
      modules.push_back({prelude + fn, {e}});
    } else {
      unit += "\n" + fn;
      if (modules.empty()) modules.emplace_back();
      modules[0].entries.push_back(e);
    }
  }
  if (!per_kernel && !modules.empty()) modules[0].source = prelude + unit;
  return modules;
}

}  // namespace rlx::codegen
