#include "opengl_device.h"

#include "codegen/glsl_prelude.h"
#include "hal/program_executable.h"
#include "kernels/gpu_natives.h"
#include "opengl_runtime.h"
#include "rlx/compile.h"

namespace rlx::opengl {
namespace {

class OpenGlDevice final : public Device {
 public:
  OpenGlDevice() {
    info_.name = "opengl";
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
    // 8/16-bit dtypes are stored packed in uint words (GLSL 4.50 has no such types; see
    // c_renderer.h), so every dtype but f64 is there on any OpenGL 4.5 driver
    info_.dtypes = {DType::f32, DType::f16, DType::bf16, DType::i8, DType::u8, DType::i16, DType::u16, DType::boolean,
                    DType::i32, DType::u32, DType::i64, DType::u64};
    if (c.fp64) info_.dtypes.push_back(DType::f64);
    caps_.fp64 = c.fp64;
    caps_.int8 = true;
    caps_.int16 = true;
    const kernels::GpuTarget t{"opengl", codegen::CTarget::glsl_gl, c.fp64};
    target_.dialect = t.dialect;
    target_.natives = {kernels::tiled_gemm_family(t), kernels::csr_family(t)};
  }
  const DeviceInfo& info() const override { return info_; }
  Claim claim_native(const NodeDesc& n) const override { return hal::claim_native(target_.natives, n, "opengl"); }
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

std::shared_ptr<const Device> make_opengl_device() { return std::make_shared<OpenGlDevice>(); }

}  // namespace rlx::opengl
