#include "rocm_codegen.h"

#include "codegen/c_renderer.h"
#include "codegen/device_modules.h"
#include "hal/program_executable.h"

namespace rlx::rocm {

Claim claim_native(const NodeDesc& n) {
  return Claim::no(cat("rocm has no native ", op_name(n.op),
                       " kernel (Debian 12 packages no rocBLAS or rocSPARSE; every node is generated HIP C++)"));
}

Claim supports_primitive(const NodeDesc& n) {
  // every dtype the C renderer handles: AMD GPUs have fp64, and f16/bf16 are computed in f32
  Claim c = codegen::c_renderer_supports(n);
  if (c.ok) c.text = "generated HIP C++ (hipRTC)";
  return c;
}

Expected<std::string> render_kernels(const kir::KernelProgram& prog, const std::string& prefix) {
  return codegen::render_unit_kernels(prog, prefix, codegen::CTarget::hip);
}

std::string translation_unit(std::string_view kernels) { return codegen::translation_unit(codegen::CTarget::hip, kernels); }

std::shared_ptr<const Device> make_codegen_device() {
  return hal::make_codegen_device("rocm", "code generation only (legalizes and renders HIP C++; runs nothing)", claim_native,
                                  supports_primitive);
}

}  // namespace rlx::rocm
