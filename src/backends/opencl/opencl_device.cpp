#include "opencl_device.h"

#include <algorithm>

#include "hal/program_executable.h"
#include "kernels/gpu_natives.h"
#include "opencl_runtime.h"
#include "opencl_splat.h"
#include "rlx/compile_options.h"

namespace rlx::opencl {
namespace {

// The splatting kernels (opencl_splat.h): one node's launch sequence, run as one command.
hal::NativeFamily splat_family(std::shared_ptr<Runtime> rt) {
  auto plan = [rt](hal::NativeBuilder& b, const kir::NativeKernel& nk) -> Status {
    std::vector<cl_mem> in, out;
    for (int i : nk.inputs) in.push_back(reinterpret_cast<cl_mem>(b.range(i).buffer.id));
    for (int o : nk.outputs) out.push_back(reinterpret_cast<cl_mem>(b.range(o).buffer.id));
    RLX_ASSIGN_OR_RETURN(std::shared_ptr<SplatLaunches> s, SplatLaunches::create(*rt, hal::node_desc(nk), in, out));
    b.add(hal::call_command(nk.name, [rt, s]() { return s->enqueue(rt->queue()); }));
    return Status::ok();
  };
  return {"splat", [](Op op) { return op_info(op).family == OpFamily::splat; },
          [rt](const NodeDesc& n) { return claim_splat(n, *rt); }, plan};
}

class OpenclDevice final : public hal::RuntimeDevice {
 public:
  OpenclDevice() {
    rt_ = open("opencl", Runtime::create());
    if (!rt_) return;
    info_.description = rt_->description();
    info_.dtypes = {DType::f32, DType::f16, DType::bf16, DType::i8, DType::u8, DType::i16, DType::u16,
                    DType::i32, DType::u32, DType::i64, DType::u64, DType::boolean};
    if (rt_->fp64()) info_.dtypes.push_back(DType::f64);
    const kernels::GpuTarget t{"opencl", codegen::CTarget::opencl, rt_->fp64()};
    target_.dialect = t.dialect;
    target_.natives = {kernels::tiled_gemm_family(t), kernels::csr_family(t), splat_family(rt_)};
  }

  Claim supports_primitive(const NodeDesc& n) const override {
    if (!rt_->fp64()) {
      auto f64 = [](const TensorType& t) { return t.dtype == DType::f64; };
      if (std::any_of(n.inputs.begin(), n.inputs.end(), f64) || std::any_of(n.outputs.begin(), n.outputs.end(), f64))
        return Claim::no("this OpenCL device has no fp64");
    }
    Claim c = codegen::c_renderer_supports(n);
    if (c.ok) c.text = "generated OpenCL C";
    return c;
  }

 private:
  std::shared_ptr<Runtime> rt_;
};

}  // namespace

std::shared_ptr<const Device> make_opencl_device() { return std::make_shared<OpenclDevice>(); }

}  // namespace rlx::opencl
