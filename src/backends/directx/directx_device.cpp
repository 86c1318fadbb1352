#include "directx_device.h"

#include <cstdlib>
#include <cstring>

#include "codegen/hlsl_prelude.h"
#include "hal/program_executable.h"
#include "kernels/gpu_natives.h"
#ifdef RLX_HAVE_D3D12
#include "d3d12_runtime.h"
#endif
#ifdef RLX_HAVE_VULKAN
#include "backends/vulkan/vulkan_runtime.h"
#endif

namespace rlx::directx {
namespace {

// Which runtime runs the HLSL: D3D12 where RLX_DIRECTX_RUNTIME=d3d12 asks for it (it has never
// run in rlx's tests: no test machine has D3D12), else the Vulkan runtime's HLSL mode.
bool wants_d3d12() {
  const char* e = std::getenv("RLX_DIRECTX_RUNTIME");
  return e && std::strcmp(e, "d3d12") == 0;
}

class DirectXDevice final : public hal::RuntimeDevice {
 public:
  DirectXDevice() {
    if (wants_d3d12()) {
#ifdef RLX_HAVE_D3D12
      auto rt = open("directx", create_d3d12_runtime());
      if (!rt) return;
      info_.description = d3d12_description(*rt);
      // (doubles stay off on D3D12 until its DoublePrecisionFloatShaderOps is queried and run)
#else
      open("directx", Expected<std::shared_ptr<hal::Runtime>>(error(
                          ErrorCode::unavailable, "RLX_DIRECTX_RUNTIME=d3d12, but rlx was built without the D3D12 headers "
                                                  "(install directx-headers-dev, then rebuild)")));
      return;
#endif
    } else {
#ifdef RLX_HAVE_VULKAN
      auto rt = open("directx", vulkan::Runtime::create(vulkan::ShaderLanguage::hlsl));
      if (!rt) {
        info_.reason = "no Vulkan device to verify rlx's HLSL on (D3D12 is used only with RLX_DIRECTX_RUNTIME=d3d12): " + info_.reason;
        return;
      }
      info_.description = cat("HLSL (Shader Model 6) through glslang's HLSL front end on Vulkan: ", rt->description(),
                              "; no D3D12 here, 32-bit sizes, native tiled GEMM, generated HLSL");
      fp64_ = rt->caps().fp64;
#else
      open("directx", Expected<std::shared_ptr<hal::Runtime>>(error(
                          ErrorCode::unavailable, "rlx was built without Vulkan to verify its HLSL on (install libvulkan-dev "
                                                  "and libshaderc-dev, then rebuild), and RLX_DIRECTX_RUNTIME=d3d12 is not set")));
      return;
#endif
    }
    // the tiled GEMM natively; the CSR kernels have no HLSL text, so sparse ops are refused
    declare_32_bit_shaders(codegen::CTarget::hlsl, {kernels::tiled_gemm_family({"directx", codegen::CTarget::hlsl})});
    if (fp64_) info_.dtypes.push_back(DType::f64);
  }
  Claim supports_primitive(const NodeDesc& n) const override { return codegen::hlsl_supports(n, fp64_); }

 private:
  bool fp64_ = false;  // the device has doubles
};

}  // namespace

std::shared_ptr<const Device> make_directx_device() { return std::make_shared<DirectXDevice>(); }

}  // namespace rlx::directx
