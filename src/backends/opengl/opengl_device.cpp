#include "opengl_device.h"

#include "codegen/glsl_prelude.h"
#include "hal/program_executable.h"
#include "kernels/gpu_natives.h"
#include "opengl_runtime.h"
#include "rlx/compile_options.h"

namespace rlx::opengl {
namespace {

class OpenGlDevice final : public hal::RuntimeDevice {
 public:
  OpenGlDevice() {
    auto rt = open("opengl", Runtime::create());
    if (!rt) return;
    const bool fp64 = rt->caps().fp64;
    info_.description = rt->description();
    // 8/16-bit dtypes are stored packed in uint words (GLSL 4.50 has no such types; see
    // c_renderer.h), so every dtype but f64 is there on any OpenGL 4.5 driver
    info_.dtypes = {DType::f32, DType::f16, DType::bf16, DType::i8, DType::u8, DType::i16, DType::u16, DType::boolean,
                    DType::i32, DType::u32, DType::i64, DType::u64};
    if (fp64) info_.dtypes.push_back(DType::f64);
    caps_ = {fp64, true, true, "", ""};
    target_ = kernels::common_target({"opengl", codegen::CTarget::glsl_gl, fp64});
  }
  Claim supports_primitive(const NodeDesc& n) const override { return codegen::glsl_supports(n, caps_); }

 private:
  codegen::GlslCaps caps_;
};

}  // namespace

std::shared_ptr<const Device> make_opengl_device() { return std::make_shared<OpenGlDevice>(); }

}  // namespace rlx::opengl
