#include "cuda_device.h"

#include <algorithm>
#include <mutex>

#include "cuda_codegen.h"
#include "cuda_runtime.h"
#include "rlx/compile.h"

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

// A compiled program: one device allocation per buffer (views share their target's),
// weights and constants uploaded once, launch arguments prepared once; a run copies the
// inputs in, launches the kernels and cuBLAS calls in order on the runtime's stream, copies
// the outputs out and waits. Nothing returns to the host between steps.
class CudaExecutable final : public Executable {
 public:
  CudaExecutable(std::shared_ptr<Runtime> rt, kir::KernelProgram prog) : rt_(std::move(rt)), prog_(std::move(prog)) {}
  ~CudaExecutable() override {
    for (size_t i = 0; i < mem_.size(); ++i)
      if (mem_[i] && owns_[i]) cudaFree(mem_[i]);
  }
  Status init(const Graph& g);
  Expected<std::vector<Tensor>> run(std::span<const Tensor> inputs) override;
  Status run_into(std::span<const Tensor> inputs, std::span<Tensor> outputs) override;
  const ExecStats& stats() const override { return stats_; }

 private:
  int root(int b) const {
    while (prog_.buffers[b].alias_of >= 0) b = prog_.buffers[b].alias_of;
    return b;
  }
  Status init_natives();
  Status gemm(const kir::NativeKernel& nk, const backends::GemmPlan& p);

  // One generated kernel's launch: cudaLaunchKernel reads each argument through args[i].
  struct Launch {
    cudaKernel_t kernel = nullptr;
    std::vector<void*> ptrs;  // device pointers of the buffer arguments
    long long rows = 0, cols = 0;
    std::vector<void*> args;
    unsigned blocks = 0, threads = 0;  // 0 blocks: nothing to do (empty, or a copy onto itself)
  };
  std::shared_ptr<Runtime> rt_;
  kir::KernelProgram prog_;
  std::vector<void*> mem_;
  std::vector<char> owns_;
  std::vector<std::unique_ptr<Launch>> launches_;
  std::vector<backends::GemmPlan> plans_;
  ExecStats stats_;
  std::mutex mu_;
};

Status CudaExecutable::init(const Graph& g) {
  const size_t nb = prog_.buffers.size();
  mem_.assign(nb, nullptr);
  owns_.assign(nb, 0);
  for (size_t i = 0; i < nb; ++i) {
    const kir::Buffer& b = prog_.buffers[i];
    if (b.alias_of >= 0) continue;
    const Tensor* data = nullptr;
    if (b.kind == kir::BufferKind::weight) {
      auto it = g.weights.find(b.name);
      if (it == g.weights.end() || !it->second.storage())
        return error(ErrorCode::invalid_argument, "weight '", b.name, "' has no data");
      if (it->second.dtype() != b.dtype || it->second.sizes() != b.sizes)
        return error(ErrorCode::shape_error, "weight '", b.name, "' is ", it->second.type().to_string(),
                     ", the graph expects ", dtype_name(b.dtype), sizes_to_string(b.sizes));
      data = &it->second;
      stats_.weight_bytes += b.bytes();
    } else if (b.kind == kir::BufferKind::constant) {
      data = &b.data;
    } else if (b.kind == kir::BufferKind::intermediate) {
      stats_.arena_bytes += b.bytes();
    }
    const std::string what = cat(" bytes for buffer b", i, b.name.empty() ? "" : " '" + b.name + "'");
    const size_t bytes = std::max<size_t>(b.bytes(), 4);  // never a null pointer, even when empty
    RLX_TRY(cuda_check(cudaMalloc(&mem_[i], bytes), cat("cudaMalloc of ", bytes, what)));
    owns_[i] = 1;
    if (data && b.bytes() > 0)
      RLX_TRY(cuda_check(cudaMemcpy(mem_[i], data->bytes(), b.bytes(), cudaMemcpyHostToDevice),
                         cat("cudaMemcpy uploading ", b.bytes(), what)));
  }
  for (size_t i = 0; i < nb; ++i)
    if (prog_.buffers[i].alias_of >= 0) mem_[i] = mem_[root(static_cast<int>(i))];
  RLX_TRY(init_natives());
  if (!prog_.generated.empty()) {
    RLX_ASSIGN_OR_RETURN(std::string kernels, render_kernels(prog_, "rlx_"));
    const std::string source = translation_unit(kernels);
    for (const kir::GeneratedKernel& k : prog_.generated) {
      auto l = std::make_unique<Launch>();
      RLX_ASSIGN_OR_RETURN(l->kernel, rt_->kernel(source, "rlx_" + k.name));
      for (int b : k.args) l->ptrs.push_back(mem_[b]);
      l->rows = k.rows();
      l->cols = k.cols();
      for (void*& p : l->ptrs) l->args.push_back(&p);
      l->args.push_back(&l->rows);
      l->args.push_back(&l->cols);
      // a copy onto the same memory (a donated buffer) is nothing to do
      const bool aliased = k.skip_if_aliased && k.args.size() >= 2 && mem_[k.args[0]] == mem_[k.args[1]];
      const long long n = l->rows * l->cols;
      if (k.serial) {
        l->blocks = n > 0 && !aliased ? 1 : 0;
        l->threads = 1;
      } else if (n > 0 && !aliased) {
        l->threads = static_cast<unsigned>(std::min<long long>(kThreadsPerBlock, n));
        const long long blocks = (n + l->threads - 1) / l->threads;
        if (blocks > INT32_MAX)
          return error(ErrorCode::unsupported, "cuda: kernel ", k.name, " has ", n, " elements, more than one launch covers");
        l->blocks = static_cast<unsigned>(blocks);
      }
      launches_.push_back(std::move(l));
    }
  }
  stats_.generated_kernels = static_cast<int>(prog_.generated.size());
  stats_.native_kernels = static_cast<int>(prog_.natives.size());
  stats_.kernel_listing = prog_.listing();
  for (const kir::Step& s : prog_.steps)
    stats_.kernel_origins.push_back(s.native ? std::make_pair(prog_.natives[s.index].name, prog_.natives[s.index].origins)
                                             : std::make_pair(prog_.generated[s.index].name, prog_.generated[s.index].origins));
  return Status::ok();
}

Status CudaExecutable::init_natives() {
  for (const kir::NativeKernel& nk : prog_.natives) {
    NodeDesc d{nk.op, nk.attrs, nk.input_types, nk.output_types, nk.name};
    RLX_ASSIGN_OR_RETURN(backends::GemmPlan p, gemm_plan(d, rt_->gpu().cc));
    plans_.push_back(p);
  }
  return Status::ok();
}

// One cuBLAS call in column-major terms (column_major_gemm: B is the first operand).
Status CudaExecutable::gemm(const kir::NativeKernel& nk, const backends::GemmPlan& p) {
  void* c = mem_[nk.outputs[0]];
  const DType t = nk.output_types[0].dtype;
  if (p.m == 0 || p.n == 0 || p.batch == 0) return Status::ok();
  if (p.k == 0)  // an empty sum: zeros (cuBLAS may leave C untouched)
    return cuda_check(cudaMemsetAsync(c, 0, dtype_bytes(t, static_cast<size_t>(p.batch * p.m * p.n)), rt_->stream()),
                      "cudaMemsetAsync for empty GEMM " + nk.name);
  RLX_ASSIGN_OR_RETURN(cudaDataType_t dt, cuda_dtype(t));
  RLX_ASSIGN_OR_RETURN(cublasHandle_t handle, rt_->cublas());
  RLX_ASSIGN_OR_RETURN(const CublasApi* api, cublas_api());
  const ColumnMajorGemm g = column_major_gemm(p);
  const bool f64 = t == DType::f64;
  const float alpha32 = p.alpha, beta32 = 0.f;
  const double alpha64 = p.alpha, beta64 = 0.0;
  const void* alpha = f64 ? static_cast<const void*>(&alpha64) : &alpha32;
  const void* beta = f64 ? static_cast<const void*>(&beta64) : &beta32;
  return cublas_check(
      api->gemm_strided_batched(handle, g.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N,
                                static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(g.k), alpha,
                                mem_[nk.inputs[1]], dt, static_cast<int>(g.ld_first), g.stride_first, mem_[nk.inputs[0]],
                                dt, static_cast<int>(g.ld_second), g.stride_second, beta, c, dt, static_cast<int>(g.ldc),
                                g.stride_c, static_cast<int>(g.batch), f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT),
      cat("cublasGemmStridedBatchedEx for ", nk.name, " (m=", p.m, " n=", p.n, " k=", p.k, " batch=", p.batch, ")"));
}

Status CudaExecutable::run_into(std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  std::lock_guard<std::mutex> lock(mu_);
  RLX_TRY(kir::check_run_io(prog_, inputs, outputs));
  cudaStream_t s = rt_->stream();
  // All inputs are copied in before any step runs and outputs copied out after the last, so
  // an output may share host memory with an input (a donated cache) safely.
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].nbytes() == 0) continue;
    RLX_TRY(cuda_check(cudaMemcpyAsync(mem_[prog_.inputs[i]], inputs[i].bytes(), inputs[i].nbytes(), cudaMemcpyHostToDevice, s),
                       cat("cudaMemcpyAsync writing input ", i)));
  }
  for (const kir::Step& st : prog_.steps) {
    if (st.native) {
      RLX_TRY(gemm(prog_.natives[st.index], plans_[st.index]));
      continue;
    }
    Launch& l = *launches_[st.index];
    if (l.blocks == 0) continue;
    RLX_TRY(cuda_check(cudaLaunchKernel(reinterpret_cast<const void*>(l.kernel), dim3(l.blocks), dim3(l.threads),
                                        l.args.data(), 0, s),
                       "cudaLaunchKernel " + prog_.generated[st.index].name));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].nbytes() == 0) continue;
    RLX_TRY(cuda_check(cudaMemcpyAsync(outputs[i].bytes(), mem_[prog_.outputs[i]], outputs[i].nbytes(), cudaMemcpyDeviceToHost, s),
                       cat("cudaMemcpyAsync reading output ", i)));
  }
  // a fault in any kernel surfaces here, named by the CUDA error
  return cuda_check(cudaStreamSynchronize(s), "cudaStreamSynchronize after running the program");
}

Expected<std::vector<Tensor>> CudaExecutable::run(std::span<const Tensor> inputs) {
  std::vector<Tensor> outs = kir::allocate_outputs(prog_);
  RLX_TRY(run_into(inputs, outs));
  return outs;
}

class CudaDevice final : public Device {
 public:
  CudaDevice() {
    info_.name = "cuda";
    auto rt = Runtime::create();
    if (!rt) {
      info_.available = false;
      info_.reason = rt.status().message();
      return;
    }
    rt_ = *rt;
    info_.available = true;
    info_.description = rt_->description();
    info_.dtypes = {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i8,  DType::u8,  DType::i16,
                    DType::u16, DType::i32, DType::u32,  DType::i64, DType::u64, DType::boolean};
  }
  const DeviceInfo& info() const override { return info_; }
  Claim claim_native(const NodeDesc& n) const override { return cuda::claim_native(n, rt_ ? rt_->gpu().cc : 0); }
  Claim supports_primitive(const NodeDesc& n) const override { return cuda::supports_primitive(n); }

  Expected<std::unique_ptr<Executable>> compile(const Graph& g, const CompileOptions& options) const override {
    if (!rt_) return error(ErrorCode::unavailable, "cuda: ", info_.reason);
    RLX_ASSIGN_OR_RETURN(kir::KernelProgram prog, schedule_program(g, options));
    auto e = std::make_unique<CudaExecutable>(rt_, std::move(prog));
    RLX_TRY(e->init(g));
    return std::unique_ptr<Executable>(std::move(e));
  }

 private:
  DeviceInfo info_;
  std::shared_ptr<Runtime> rt_;
};

}  // namespace

std::shared_ptr<const Device> make_cuda_device() { return std::make_shared<CudaDevice>(); }

Status load_cublas() { return cublas_api().status(); }

}  // namespace rlx::cuda
