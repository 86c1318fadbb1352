// The null device: the skeleton to copy when adding a device. It is available, claims
// nothing and renders nothing, so every node on it is illegal with a reason for each path;
// tests use it to exercise the illegal-node report.
#include "null_device.h"

namespace rlx::null_device {
namespace {

class NullDevice final : public Device {
 public:
  NullDevice() {
    info_.name = "null";
    info_.available = true;
    info_.description = "skeleton device: no kernels, no renderer (every node is illegal)";
  }
  // A stand-in for a device rlx was built without: listed, unavailable, with the reason.
  NullDevice(std::string name, std::string reason) {
    info_.name = std::move(name);
    info_.available = false;
    info_.reason = std::move(reason);
  }
  const DeviceInfo& info() const override { return info_; }
  // 1. Native claims: judge op, attributes, dtypes and shapes; say why not.
  Claim claim_native(const NodeDesc& n) const override { return Claim::no("null has no native kernels"); }
  // 2. Primitive support for generated code: which dtypes and ops the renderer handles.
  Claim supports_primitive(const NodeDesc& n) const override { return Claim::no("null has no code renderer"); }
  // 3. Compile a legalized primitive graph (schedule, render, build an executable).
  Expected<std::unique_ptr<Executable>> compile(const Graph&, const CompileOptions&) const override {
    return error(ErrorCode::unsupported, "the null device cannot run anything");
  }

 private:
  DeviceInfo info_;
};

}  // namespace

std::shared_ptr<const Device> make_null_device() { return std::make_shared<NullDevice>(); }

std::shared_ptr<const Device> make_unavailable_device(std::string name, std::string reason) {
  return std::make_shared<NullDevice>(std::move(name), std::move(reason));
}

}  // namespace rlx::null_device
