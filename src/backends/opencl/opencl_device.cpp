#include "opencl_device.h"

#include <algorithm>

#include "hal/program_executable.h"
#include "kernels/gpu_natives.h"
#include "opencl_runtime.h"
#include "opencl_splat.h"
#include "rlx/compile.h"

namespace rlx::opencl {
namespace {

// The splatting kernels (opencl_splat.h): one node's launch sequence, run as one command.
hal::NativeFamily splat_family(std::shared_ptr<Runtime> rt) {
  return {"splat", [](Op op) { return op_info(op).family == OpFamily::splat; },
          [rt](const NodeDesc& n) { return claim_splat(n, *rt); },
          [rt](hal::NativeBuilder& b, const kir::NativeKernel& nk) -> Status {
            NodeDesc d{nk.op, nk.attrs, nk.input_types, nk.output_types, nk.name};
            std::vector<cl_mem> in, out;
            for (int i : nk.inputs) in.push_back(reinterpret_cast<cl_mem>(b.range(i).buffer.id));
            for (int o : nk.outputs) out.push_back(reinterpret_cast<cl_mem>(b.range(o).buffer.id));
            RLX_ASSIGN_OR_RETURN(std::shared_ptr<SplatLaunches> s, SplatLaunches::create(*rt, d, in, out));
            hal::Command c;
            c.kind = hal::Command::Kind::call;
            c.name = nk.name;
            c.call = [rt, s]() { return s->enqueue(rt->queue()); };
            b.add(std::move(c));
            return Status::ok();
          }};
}

class OpenclDevice final : public Device {
 public:
  OpenclDevice() {
    info_.name = "opencl";
    auto rt = Runtime::create();
    if (!rt) {
      info_.available = false;
      info_.reason = rt.status().message();
      return;
    }
    rt_ = *rt;
    info_.available = true;
    info_.description = rt_->description();
    info_.dtypes = {DType::f32, DType::f16, DType::bf16, DType::i8, DType::u8, DType::i16, DType::u16,
                    DType::i32, DType::u32, DType::i64, DType::u64, DType::boolean};
    if (rt_->fp64()) info_.dtypes.push_back(DType::f64);
    const kernels::GpuTarget t{"opencl", codegen::CTarget::opencl, rt_->fp64()};
    target_.dialect = t.dialect;
    target_.natives = {kernels::tiled_gemm_family(t), kernels::csr_family(t), splat_family(rt_)};
  }
  const DeviceInfo& info() const override { return info_; }

  Claim claim_native(const NodeDesc& n) const override { return hal::claim_native(target_.natives, n, "opencl"); }

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

  Expected<std::unique_ptr<Executable>> compile(const Graph& g, const CompileOptions& options) const override {
    return hal::compile_program(rt_, target_, g, options);
  }

 private:
  DeviceInfo info_;
  std::shared_ptr<Runtime> rt_;
  hal::Target target_;
};

}  // namespace

std::shared_ptr<const Device> make_opencl_device() { return std::make_shared<OpenclDevice>(); }

}  // namespace rlx::opencl
