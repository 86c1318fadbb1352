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
    // i64/u64 are computed in 32 bits with range checks (a value past them fails the run)
    info_.dtypes = {DType::f32, DType::i32, DType::u32, DType::i64, DType::u64, DType::f16,
                    DType::bf16, DType::i16, DType::u16, DType::i8, DType::u8, DType::boolean};
    info_.flushes_subnormals = true;  // WGSL allows it, SwiftShader does it
    info_.int64_in_32_bits = true;
    // the tiled GEMM natively; the CSR kernels have no WGSL text, so sparse ops are refused
    target_ = {codegen::CTarget::wgsl, {kernels::tiled_gemm_family({"webgpu", codegen::CTarget::wgsl})}};
  }
  Claim supports_primitive(const NodeDesc& n) const override { return codegen::wgsl_supports(n); }
};

}  // namespace

std::shared_ptr<const Device> make_webgpu_device() { return std::make_shared<WebGpuDevice>(); }

}  // namespace rlx::webgpu
