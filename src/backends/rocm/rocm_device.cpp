#include "rocm_device.h"

#include "codegen/dialect.h"
#include "hal/program_executable.h"
#include "rocm_codegen.h"
#include "rocm_runtime.h"

namespace rlx::rocm {
namespace {

class RocmDevice final : public hal::RuntimeDevice {
 public:
  RocmDevice() {
    auto rt = open("rocm", Runtime::create());
    if (!rt) return;
    info_.description = rt->description();
    info_.dtypes = {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i8,  DType::u8,  DType::i16,
                    DType::u16, DType::i32, DType::u32,  DType::i64, DType::u64, DType::boolean};
    target_.dialect = codegen::CTarget::hip;
  }
  Claim claim_native(const NodeDesc& n) const override { return rocm::claim_native(n); }
  Claim supports_primitive(const NodeDesc& n) const override { return rocm::supports_primitive(n); }
};

}  // namespace

std::shared_ptr<const Device> make_rocm_device() { return std::make_shared<RocmDevice>(); }

}  // namespace rlx::rocm
