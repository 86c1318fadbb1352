// The null device: the skeleton to copy when adding a device (docs/adding-a-device.md). It is
// available and runs on the device runtime layer like every GPU-class device, through its
// skeleton runtime (null_runtime.h), but it claims nothing and renders nothing, so every node
// on it is illegal with a reason for each path (tests use it to exercise the illegal-node
// report) and a program never gets as far as its runtime.
#include "null_device.h"

#include "hal/program_executable.h"
#include "null_runtime.h"

namespace rlx::null_device {
namespace {

class NullDevice final : public Device {
 public:
  NullDevice() : rt_(std::make_shared<NullRuntime>()) {
    info_.name = "null";
    info_.kind = DeviceKind::skeleton;
    info_.available = true;
    info_.description = "skeleton device: no kernels, no renderer (every node is illegal)";
    // A real device names the dialect its generated kernels are rendered in (its row in
    // codegen's dialect table) and the native kernel families it runs (kernels/gpu_natives.h
    // and its own), e.g. {kernels::tiled_gemm_family(t), kernels::csr_family(t)}.
    target_.dialect = codegen::CTarget::opencl;
  }
  // A stand-in for a GPU-class device rlx was built without: listed, unavailable, with the reason.
  NullDevice(std::string name, std::string reason) {
    info_.name = std::move(name);
    info_.available = false;
    info_.reason = std::move(reason);
  }
  const DeviceInfo& info() const override { return info_; }
  // 1. Native claims: judge op, attributes, dtypes and shapes through the native table; say
  //    why not.
  Claim claim_native(const NodeDesc& n) const override { return Claim::no("null has no native kernels"); }
  // 2. Primitive support for generated code: which dtypes and ops the dialect handles (a real
  //    device starts from codegen::c_renderer_supports and adds its dtype limits).
  Claim supports_primitive(const NodeDesc& n) const override { return Claim::no("null has no code renderer"); }
  // 3. Compile: the one program executor does the rest (schedule, buffers, kernels, commands).
  Expected<std::unique_ptr<Executable>> compile(const Graph& g, const CompileOptions& options) const override {
    if (!rt_) return error(ErrorCode::unavailable, info_.name, ": ", info_.reason);
    return hal::compile_program(rt_, target_, g, options);
  }

 private:
  DeviceInfo info_;
  std::shared_ptr<NullRuntime> rt_;
  hal::Target target_;
};

}  // namespace

std::shared_ptr<const Device> make_null_device() { return std::make_shared<NullDevice>(); }

std::shared_ptr<const Device> make_unavailable_device(std::string name, std::string reason) {
  return std::make_shared<NullDevice>(std::move(name), std::move(reason));
}

}  // namespace rlx::null_device
