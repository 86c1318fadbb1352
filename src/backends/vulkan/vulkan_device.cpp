#include "vulkan_device.h"

#include "codegen/glsl_prelude.h"
#include "hal/program_executable.h"
#include "kernels/gpu_natives.h"
#include "rlx/compile_options.h"
#include "vulkan_runtime.h"

namespace rlx::vulkan {
namespace {

class VulkanDevice final : public hal::RuntimeDevice {
 public:
  VulkanDevice() {
    auto rt = open("vulkan", Runtime::create());
    if (!rt) return;
    const Caps& c = rt->caps();
    info_.description = rt->description();
    info_.dtypes = {DType::f32, DType::i32, DType::u32, DType::i64, DType::u64};
    if (c.int16) info_.dtypes.insert(info_.dtypes.end(), {DType::f16, DType::bf16, DType::i16, DType::u16});
    if (c.int8) info_.dtypes.insert(info_.dtypes.end(), {DType::i8, DType::u8, DType::boolean});
    if (c.fp64) info_.dtypes.push_back(DType::f64);
    caps_ = {c.fp64, c.int8, c.int16,
             "this Vulkan device has no 8-bit storage and arithmetic (storageBuffer8BitAccess, shaderInt8)",
             "this Vulkan device has no 16-bit storage and arithmetic (storageBuffer16BitAccess, shaderInt16)"};
    target_ = kernels::common_target({"vulkan", codegen::CTarget::glsl_vulkan, c.fp64});
  }
  Claim supports_primitive(const NodeDesc& n) const override { return codegen::glsl_supports(n, caps_); }

 private:
  codegen::GlslCaps caps_;
};

}  // namespace

std::shared_ptr<const Device> make_vulkan_device() { return std::make_shared<VulkanDevice>(); }

}  // namespace rlx::vulkan
