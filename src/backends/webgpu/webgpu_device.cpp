#include "webgpu_device.h"

#include "codegen/wgsl_prelude.h"
#include "hal/program_executable.h"
#include "kernels/gpu_natives.h"
#include "webgpu_runtime.h"

namespace rlx::webgpu {
namespace {

class WebGpuDevice final : public hal::RuntimeDevice {
 public:
  WebGpuDevice() {
    auto rt = open("webgpu", Runtime::create());
    if (!rt) return;
    const api::Limits& l = rt->device_limits();
    info_.description = cat(rt->description(), ", ", l.max_storage_buffers_per_shader_stage, " storage buffers per kernel of up to ",
                            l.max_storage_buffer_binding_size >> 20, " MiB, 32-bit sizes, native tiled GEMM, generated WGSL");
    // (SwiftShader does flush subnormals.) The tiled GEMM natively; the CSR kernels have no WGSL
    // text, so sparse ops are refused
    declare_32_bit_shaders(codegen::CTarget::wgsl, {kernels::tiled_gemm_family({"webgpu", codegen::CTarget::wgsl})});
  }
  Claim supports_primitive(const NodeDesc& n) const override { return codegen::wgsl_supports(n); }
};

}  // namespace

std::shared_ptr<const Device> make_webgpu_device() { return std::make_shared<WebGpuDevice>(); }

}  // namespace rlx::webgpu
