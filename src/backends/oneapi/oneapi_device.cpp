#include "oneapi_device.h"

#include "backends/null/null_device.h"
#ifdef RLX_HAVE_ONEDNN
#include "backends/cpu/cpu_executable.h"
#include "backends/cpu/native_contraction.h"
#include "codegen/c_renderer.h"
#include "kernels/onednn_families.h"
#endif

namespace rlx::oneapi {
namespace {

#ifdef RLX_HAVE_ONEDNN
class OneApiDevice final : public Device {
 public:
  OneApiDevice() {
    info_.name = "oneapi";
    info_.available = true;
    info_.kind = DeviceKind::host;
    info_.description = kernels::onednn_engine_summary() +
                        ": matmul, convolution, pooling, softmax, layer norm; the cpu's kernels and generated C for the rest";
    info_.dtypes = {DType::f32, DType::f16, DType::bf16, DType::f64, DType::c64, DType::i8, DType::u8, DType::i16,
                    DType::u16, DType::i32, DType::u32, DType::i64, DType::u64, DType::boolean};
  }
  const DeviceInfo& info() const override { return info_; }

  // oneDNN where it takes the node, else the cpu's own native kernel, else the refusals of both
  Claim claim_native(const NodeDesc& n) const override {
    std::string why;
    if (const kernels::HostFamily* f = kernels::onednn_family(op_info(n.op).family)) {
      Claim c = f->claim(n);
      if (c.ok) return c;
      why = c.text;
    }
    Claim c = cpu::claim_cpu_native(n);
    if (!c.ok && !why.empty()) c.text = why + "; " + c.text;
    return c;
  }
  Claim supports_primitive(const NodeDesc& n) const override { return codegen::c_host_renderer_supports(n); }
  Expected<std::unique_ptr<Executable>> compile(const Graph& g, const CompileOptions& options) const override {
    return cpu::compile_host_program(g, options, kernels::onednn_families());
  }

 private:
  DeviceInfo info_;
};
#endif

}  // namespace

std::shared_ptr<const Device> make_oneapi_device() {
#ifdef RLX_HAVE_ONEDNN
  return std::make_shared<OneApiDevice>();
#else
  return null_device::make_unavailable_device("oneapi", "rlx was built without oneDNN (install libdnnl-dev, then rebuild)");
#endif
}

}  // namespace rlx::oneapi
