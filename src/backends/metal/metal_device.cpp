#include "metal_device.h"

#include <cstdlib>
#include <cstring>

#include "codegen/msl_prelude.h"
#include "hal/program_executable.h"
#include "metal_shim_runtime.h"

namespace rlx::metal {
namespace {

bool shim_requested() {
  const char* e = std::getenv("RLX_METAL_SHIM");
  return e && std::strcmp(e, "1") == 0;
}

class MetalDevice final : public hal::RuntimeDevice {
 public:
  MetalDevice() {
    if (!shim_requested()) {
      open("metal", Expected<std::shared_ptr<hal::Runtime>>(error(
                        ErrorCode::unavailable,
                        "no Metal here (macOS only), and rlx has no Metal host runtime yet: its MSL is checked by compiling it "
                        "as C++ against a shim of the Metal built-ins (RLX_METAL_SHIM=1 runs it on the CPU); on macOS, use "
                        "the vulkan device through MoltenVK")));
      return;
    }
    auto rt = open("metal", create_shim_runtime());
    if (!rt) return;
    info_.description = "MSL through rlx's C++ shim of the Metal built-ins, run on the CPU one thread at a time "
                        "(a check of the generated MSL, not a GPU; RLX_METAL_SHIM=1), generated MSL";
    info_.dtypes = {DType::f32, DType::f16, DType::bf16, DType::i8, DType::u8, DType::i16, DType::u16,
                    DType::i32, DType::u32, DType::i64, DType::u64, DType::boolean};
    target_ = {codegen::CTarget::msl, {}};  // no native kernels: dot is generated too
  }
  Claim supports_primitive(const NodeDesc& n) const override { return codegen::msl_supports(n); }
};

}  // namespace

std::shared_ptr<const Device> make_metal_device() { return std::make_shared<MetalDevice>(); }

}  // namespace rlx::metal
