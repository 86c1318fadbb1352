#include "cpu_device.h"

#include <thread>

#include "codegen/c_renderer.h"
#include "cpu_executable.h"
#include "kernels/gemm.h"
#include "native_contraction.h"
#include "rlx/compile_options.h"
#include "rlx/thread_pool.h"

namespace rlx::cpu {
namespace {

class CpuDevice final : public Device {
 public:
  CpuDevice() {
    info_.name = "cpu";
    info_.available = true;
    info_.kind = DeviceKind::host;
    std::string isa = __builtin_cpu_supports("avx512f") ? "avx512" : __builtin_cpu_supports("avx2") ? "avx2" : "baseline";
    info_.description = cat("x86-64 ", isa, ", ", ThreadPool::global().size(), " threads, gemm ", gemm_kernel_name(),
                            ", generated C");
    info_.dtypes = {DType::f32, DType::f16, DType::bf16, DType::f64, DType::c64, DType::i8, DType::u8, DType::i16,
                    DType::u16, DType::i32, DType::u32, DType::i64, DType::u64, DType::boolean};
    // bf16 products beat the f32 GEMM on vdpbf16ps (two multiply-adds per f32 lane, about 2x
    // on Zen 4) and on AMX tiles (4-6x); f16 products only on the tiles (each operand as hi + lo
    // bf16 parts: 1.3-1.9x f32 from 128 rows on), elsewhere they widen to f32 on load, no faster
    // than the widened form (docs/precision.md)
    if (gemm_amx())
      info_.fast_narrow_products = {DType::bf16, DType::f16};
    else if (gemm_bf16_dot())
      info_.fast_narrow_products = {DType::bf16};
    // f16 convolutions stay widened: their per-image products have 8 to 72 rows, where the f16
    // tiles lose (tinyconv's f16 step on a Sapphire Rapids core 0.89x f32's rate narrow,
    // 0.99x widened; bf16 1.09x narrow, 1.00x widened)
    if (gemm_amx() || gemm_bf16_dot()) info_.fast_narrow_convolutions = {DType::bf16};
  }
  const DeviceInfo& info() const override { return info_; }

  Claim claim_native(const NodeDesc& n) const override {
    return claim_cpu_native(n);  // the cpu's native families (native_contraction.h)
  }

  Claim supports_primitive(const NodeDesc& n) const override { return codegen::c_host_renderer_supports(n); }

  Expected<std::unique_ptr<Executable>> compile(const Graph& g, const CompileOptions& options) const override {
    return compile_host_program(g, options);
  }

 private:
  DeviceInfo info_;
};

}  // namespace

std::shared_ptr<const Device> make_cpu_device() { return std::make_shared<CpuDevice>(); }

}  // namespace rlx::cpu
