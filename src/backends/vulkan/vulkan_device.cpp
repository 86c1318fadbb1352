#include "vulkan_device.h"

#include "codegen/glsl_prelude.h"
#include "hal/program_executable.h"
#include "kernels/gpu_natives.h"
#include "rlx/compile.h"
#include "vulkan_runtime.h"

namespace rlx::vulkan {
namespace {

class VulkanDevice final : public Device {
 public:
  VulkanDevice() {
    info_.name = "vulkan";
    auto rt = Runtime::create();
    if (!rt) {
      info_.available = false;
      info_.reason = rt.status().message();
      return;
    }
    rt_ = *rt;
    const Caps& c = rt_->caps();
    info_.available = true;
    info_.description = rt_->description();
    info_.dtypes = {DType::f32, DType::i32, DType::u32, DType::i64, DType::u64};
    if (c.int16) info_.dtypes.insert(info_.dtypes.end(), {DType::f16, DType::bf16, DType::i16, DType::u16});
    if (c.int8) info_.dtypes.insert(info_.dtypes.end(), {DType::i8, DType::u8, DType::boolean});
    if (c.fp64) info_.dtypes.push_back(DType::f64);
    caps_.fp64 = c.fp64;
    caps_.int8 = c.int8;
    caps_.int16 = c.int16;
    caps_.why_no_int8 = "this Vulkan device has no 8-bit storage and arithmetic (storageBuffer8BitAccess, shaderInt8)";
    caps_.why_no_int16 = "this Vulkan device has no 16-bit storage and arithmetic (storageBuffer16BitAccess, shaderInt16)";
    const kernels::GpuTarget t{"vulkan", codegen::CTarget::glsl_vulkan, c.fp64};
    target_.dialect = t.dialect;
    target_.natives = {kernels::tiled_gemm_family(t), kernels::csr_family(t)};
  }
  const DeviceInfo& info() const override { return info_; }
  Claim claim_native(const NodeDesc& n) const override { return hal::claim_native(target_.natives, n, "vulkan"); }
  Claim supports_primitive(const NodeDesc& n) const override { return codegen::glsl_supports(n, caps_); }
  Expected<std::unique_ptr<Executable>> compile(const Graph& g, const CompileOptions& options) const override {
    return hal::compile_program(rt_, target_, g, options);
  }

 private:
  DeviceInfo info_;
  codegen::GlslCaps caps_;
  std::shared_ptr<Runtime> rt_;
  hal::Target target_;
};

}  // namespace

std::shared_ptr<const Device> make_vulkan_device() { return std::make_shared<VulkanDevice>(); }

}  // namespace rlx::vulkan
