#include "cuda_device.h"

#include "hal/program_executable.h"
#include "kernels/gpu_natives.h"
#include "cuda_codegen.h"
#include "cuda_runtime.h"
#include "cuda_splat.h"
#include "rlx/compile_options.h"

namespace rlx::cuda {
namespace {

Expected<cudaDataType_t> cuda_dtype(DType t) {
  switch (t) {
    case DType::f32: return CUDA_R_32F;
    case DType::f64: return CUDA_R_64F;
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    default: break;
  }
  return error(ErrorCode::unsupported, "cuBLAS has no ", dtype_name(t), " GEMM here");
}

void* device_ptr(const hal::BufferRange& r) { return hal::device_address(r); }

// One cuBLAS call in column-major terms (column_major_gemm: B is the first operand).
Status gemm(Runtime& rt, const std::string& name, const kernels::GemmPlan& p, DType t, const void* a, const void* b, void* c) {
  if (p.m == 0 || p.n == 0 || p.batch == 0) return Status::ok();
  if (p.k == 0)  // an empty sum: zeros (cuBLAS may leave C untouched)
    return cuda_check(cudaMemsetAsync(c, 0, dtype_bytes(t, static_cast<size_t>(p.batch * p.m * p.n)), rt.stream()),
                      "cudaMemsetAsync for empty GEMM " + name);
  RLX_ASSIGN_OR_RETURN(cudaDataType_t dt, cuda_dtype(t));
  RLX_ASSIGN_OR_RETURN(cublasHandle_t handle, rt.cublas());
  RLX_ASSIGN_OR_RETURN(const CublasApi* api, cublas_api());
  const ColumnMajorGemm g = column_major_gemm(p);
  const bool f64 = t == DType::f64;
  const float alpha32 = p.alpha, beta32 = 0.f;
  const double alpha64 = p.alpha, beta64 = 0.0;
  const void* alpha = f64 ? static_cast<const void*>(&alpha64) : &alpha32;
  const void* beta = f64 ? static_cast<const void*>(&beta64) : &beta32;
  return cublas_check(
      api->gemm_strided_batched(handle, g.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N,
                                static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(g.k), alpha, b, dt,
                                static_cast<int>(g.ld_first), g.stride_first, a, dt, static_cast<int>(g.ld_second),
                                g.stride_second, beta, c, dt, static_cast<int>(g.ldc), g.stride_c, static_cast<int>(g.batch),
                                f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      cat("cublasGemmStridedBatchedEx for ", name, " (m=", p.m, " n=", p.n, " k=", p.k, " batch=", p.batch, ")"));
}

// The device's own families: dot as one cuBLAS call, and the splatting launches
// (cuda_splat.h), each run as one command on the runtime's stream. Claims go through
// cuda::claim_native, which needs no GPU.
hal::NativeFamily cublas_family(std::shared_ptr<Runtime> rt) {
  auto plan = [rt](hal::NativeBuilder& b, const kir::NativeKernel& nk) -> Status {
    RLX_ASSIGN_OR_RETURN(kernels::GemmPlan p, gemm_plan(hal::node_desc(nk), rt->gpu().cc));
    const void *x = device_ptr(b.range(nk.inputs[0])), *y = device_ptr(b.range(nk.inputs[1]));
    void* out = device_ptr(b.range(nk.outputs[0]));
    b.add(hal::call_command(nk.name, [rt, p, name = nk.name, t = nk.output_types[0].dtype, x, y, out]() {
      return gemm(*rt, name, p, t, x, y, out);
    }));
    return Status::ok();
  };
  return {"cublas", [](Op op) { return op == Op::Dot; }, [rt](const NodeDesc& n) { return claim_native(n, rt->gpu().cc); },
          plan};
}

hal::NativeFamily splat_family(std::shared_ptr<Runtime> rt) {
  auto plan = [rt](hal::NativeBuilder& b, const kir::NativeKernel& nk) -> Status {
    std::vector<void*> in, out;
    for (int i : nk.inputs) in.push_back(device_ptr(b.range(i)));
    for (int o : nk.outputs) out.push_back(device_ptr(b.range(o)));
    RLX_ASSIGN_OR_RETURN(std::shared_ptr<SplatLaunches> s, SplatLaunches::create(*rt, hal::node_desc(nk), in, out));
    b.add(hal::call_command(nk.name, [rt, s]() { return s->enqueue(rt->stream()); }));
    return Status::ok();
  };
  return {"splat", [](Op op) { return op_info(op).family == OpFamily::splat; },
          [rt](const NodeDesc& n) { return claim_native(n, rt->gpu().cc); }, plan};
}

class CudaDevice final : public hal::RuntimeDevice {
 public:
  CudaDevice() {
    rt_ = open("cuda", Runtime::create());
    if (!rt_) return;
    info_.description = rt_->description();
    info_.dtypes = {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i8,  DType::u8,  DType::i16,
                    DType::u16, DType::i32, DType::u32,  DType::i64, DType::u64, DType::boolean};
    const ComputeCapability cc = rt_->gpu().cc;
    target_.dialect = codegen::CTarget::cuda;
    target_.natives = {cublas_family(rt_), kernels::csr_family({"cuda", codegen::CTarget::cuda, true, has_f64_atomic_add(cc)}),
                       splat_family(rt_)};
  }
  Claim claim_native(const NodeDesc& n) const override { return cuda::claim_native(n, rt_ ? rt_->gpu().cc : 0); }
  Claim supports_primitive(const NodeDesc& n) const override { return cuda::supports_primitive(n); }

  // the scheduled program of cuda_codegen.h, the one the NVRTC check of tests/cuda/ renders
  Expected<std::unique_ptr<Executable>> compile(const Graph& g, const CompileOptions& options) const override {
    if (!rt_) return error(ErrorCode::unavailable, "cuda: ", info_.reason);
    RLX_ASSIGN_OR_RETURN(kir::KernelProgram prog, schedule_program(g, options));
    return hal::make_executable(rt_, target_, std::move(prog), g);
  }

 private:
  std::shared_ptr<Runtime> rt_;
};

}  // namespace

std::shared_ptr<const Device> make_cuda_device() { return std::make_shared<CudaDevice>(); }

Status load_cublas() { return cublas_api().status(); }

}  // namespace rlx::cuda
