#include "directx_device.h"

#include "codegen/hlsl_prelude.h"
#include "hal/program_executable.h"
#include "kernels/gpu_natives.h"
#include "backends/null/null_device.h"
#ifdef RLX_HAVE_VULKAN
#include "backends/vulkan/vulkan_runtime.h"
#endif

namespace rlx::directx {
namespace {

#ifdef RLX_HAVE_VULKAN
class DirectXDevice final : public hal::RuntimeDevice {
 public:
  DirectXDevice() {
    auto rt = open("directx", vulkan::Runtime::create(vulkan::ShaderLanguage::hlsl));
    if (!rt) {
      info_.reason = "no D3D12 on this host, and no Vulkan device to verify rlx's HLSL on: " + info_.reason;
      return;
    }
    info_.description = cat("HLSL (Shader Model 6) through glslang's HLSL front end on Vulkan: ", rt->description(),
                             "; no D3D12 here (Windows), 32-bit sizes, native tiled GEMM, generated HLSL");
    // i64/u64 are computed in 32 bits with range checks (a value past them fails the run)
    info_.dtypes = {DType::f32, DType::i32, DType::u32, DType::i64, DType::u64, DType::f16,
                    DType::bf16, DType::i16, DType::u16, DType::i8, DType::u8, DType::boolean};
    info_.flushes_subnormals = true;  // D3D12 may flush f32 subnormals in arithmetic
    info_.int64_in_32_bits = true;
    // the tiled GEMM natively; the CSR kernels have no HLSL text, so sparse ops are refused
    target_ = {codegen::CTarget::hlsl, {kernels::tiled_gemm_family({"directx", codegen::CTarget::hlsl})}};
  }
  Claim supports_primitive(const NodeDesc& n) const override { return codegen::hlsl_supports(n); }
};
#endif

}  // namespace

std::shared_ptr<const Device> make_directx_device() {
#ifdef RLX_HAVE_VULKAN
  return std::make_shared<DirectXDevice>();
#else
  return null_device::make_unavailable_device(
      "directx", "no D3D12 on this host, and rlx was built without Vulkan to verify its HLSL on (install libvulkan-dev and libshaderc-dev, then rebuild)");
#endif
}

}  // namespace rlx::directx
