#include "cuda_device.h"

#include <algorithm>
#include <mutex>

#include "backends/csr_spmv.h"
#include "cuda_codegen.h"
#include "cuda_runtime.h"
#include "cuda_splat.h"
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
// inputs in, launches the kernels, cuBLAS calls, CSR and splatting kernels in order on the runtime's
// stream, copies the outputs (and the CSR kernels' index-check flags) out and waits. Nothing
// returns to the host between steps.
class CudaExecutable final : public Executable {
 public:
  CudaExecutable(std::shared_ptr<Runtime> rt, kir::KernelProgram prog) : rt_(std::move(rt)), prog_(std::move(prog)) {}
  ~CudaExecutable() override {
    for (size_t i = 0; i < mem_.size(); ++i)
      if (mem_[i] && owns_[i]) cudaFree(mem_[i]);
    for (const auto& c : csr_)
      if (c && c->flags) cudaFree(c->flags);
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
  struct CsrLaunch;
  Status csr(const kir::NativeKernel& nk, CsrLaunch& c);

  // One generated kernel's launch: cudaLaunchKernel reads each argument through args[i].
  struct Launch {
    cudaKernel_t kernel = nullptr;
    std::vector<void*> ptrs;  // device pointers of the buffer arguments
    long long rows = 0, cols = 0;
    std::vector<void*> args;
    unsigned blocks = 0, threads = 0;  // 0 blocks: nothing to do (empty, or a copy onto itself)
  };
  // One CSR kernel's launch (backends/csr_spmv.h): kernel(rp, ci, va|a, x|b, y|out, flags, n,
  // m, k, nnz), one thread per work item, with its index-check flag word in device memory.
  struct CsrLaunch {
    cudaKernel_t kernel = nullptr;
    void* ptrs[6] = {};
    long long scalars[4] = {};  // n, m, k, nnz
    void* args[10] = {};
    unsigned blocks = 0, threads = 0;  // 0 blocks: no work items
    void* flags = nullptr;             // int, cleared before each launch, read after the run
    size_t zero_bytes = 0;             // the transposed form's output, zeroed before the launch
    int flags_host = 0;
  };
  std::shared_ptr<Runtime> rt_;
  kir::KernelProgram prog_;
  std::vector<void*> mem_;
  std::vector<char> owns_;
  std::vector<std::unique_ptr<Launch>> launches_;
  std::vector<backends::GemmPlan> plans_;             // per native; unused but for a GEMM
  std::vector<std::unique_ptr<CsrLaunch>> csr_;      // per native; null for a GEMM
  std::vector<std::unique_ptr<SplatLaunches>> splat_;  // per native; null but for a splatting node
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
  const bool f64_scatter = has_f64_atomic_add(rt_->gpu().cc);
  for (const kir::NativeKernel& nk : prog_.natives) {
    NodeDesc d{nk.op, nk.attrs, nk.input_types, nk.output_types, nk.name};
    if (op_info(nk.op).family == OpFamily::splat) {
      std::vector<void*> in, out;
      for (int b : nk.inputs) in.push_back(mem_[b]);
      for (int b : nk.outputs) out.push_back(mem_[b]);
      plans_.emplace_back();
      csr_.push_back(nullptr);
      RLX_ASSIGN_OR_RETURN(std::unique_ptr<SplatLaunches> sl, SplatLaunches::create(*rt_, d, in, out));
      splat_.push_back(std::move(sl));
      continue;
    }
    splat_.push_back(nullptr);
    if (!backends::csr_kernel_op(nk.op)) {
      RLX_ASSIGN_OR_RETURN(backends::GemmPlan p, gemm_plan(d, rt_->gpu().cc));
      plans_.push_back(p);
      csr_.push_back(nullptr);
      continue;
    }
    RLX_ASSIGN_OR_RETURN(backends::CsrSpmvPlan p, backends::plan_csr_spmv(d, f64_scatter));
    plans_.emplace_back();
    csr_.push_back(std::make_unique<CsrLaunch>());
    CsrLaunch& c = *csr_.back();  // owned from here on: the destructor frees its flag word
    RLX_ASSIGN_OR_RETURN(c.kernel, rt_->kernel(backends::csr_spmv_cuda_source(f64_scatter), p.kernel));
    RLX_TRY(cuda_check(cudaMalloc(&c.flags, sizeof(int)), "cudaMalloc of the CSR index-check flag of " + nk.name));
    const int bufs[5] = {nk.inputs[0], nk.inputs[1], nk.inputs[2], nk.inputs[3], nk.outputs[0]};
    for (int a = 0; a < 5; ++a) c.ptrs[a] = mem_[bufs[a]];
    c.ptrs[5] = c.flags;
    c.scalars[0] = p.n;
    c.scalars[1] = p.m;
    c.scalars[2] = p.k;
    c.scalars[3] = p.nnz;
    for (int a = 0; a < 6; ++a) c.args[a] = &c.ptrs[a];
    for (int a = 0; a < 4; ++a) c.args[6 + a] = &c.scalars[a];
    if (p.zero_output) c.zero_bytes = static_cast<size_t>(prog_.buffers[nk.outputs[0]].bytes());
    if (p.work_items > 0) {
      c.threads = static_cast<unsigned>(std::min<int64_t>(kThreadsPerBlock, p.work_items));
      const int64_t blocks = (p.work_items + c.threads - 1) / c.threads;
      if (blocks > INT32_MAX)
        return error(ErrorCode::unsupported, "cuda: CSR kernel ", nk.name, " has ", p.work_items,
                     " work items, more than one launch covers");
      c.blocks = static_cast<unsigned>(blocks);
    }
  }
  return Status::ok();
}

// One CSR kernel: the transposed form's output zeroed (the kernel adds into it; zeros also
// when A has no rows), its flag word cleared, then the launch.
Status CudaExecutable::csr(const kir::NativeKernel& nk, CsrLaunch& c) {
  cudaStream_t s = rt_->stream();
  if (c.zero_bytes)
    RLX_TRY(cuda_check(cudaMemsetAsync(mem_[nk.outputs[0]], 0, c.zero_bytes, s),
                       "cudaMemsetAsync zeroing the output of " + nk.name));
  if (c.blocks == 0) return Status::ok();
  RLX_TRY(cuda_check(cudaMemsetAsync(c.flags, 0, sizeof(int), s),
                     "cudaMemsetAsync clearing the CSR index-check flag of " + nk.name));
  return cuda_check(
      cudaLaunchKernel(reinterpret_cast<const void*>(c.kernel), dim3(c.blocks), dim3(c.threads), c.args, 0, s),
      "cudaLaunchKernel " + nk.name);
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
      if (SplatLaunches* sp = splat_[st.index].get()) RLX_TRY(sp->enqueue(s));
      else if (CsrLaunch* c = csr_[st.index].get()) RLX_TRY(csr(prog_.natives[st.index], *c));
      else RLX_TRY(gemm(prog_.natives[st.index], plans_[st.index]));
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
  for (const auto& c : csr_)
    if (c && c->blocks)
      RLX_TRY(cuda_check(cudaMemcpyAsync(&c->flags_host, c->flags, sizeof(int), cudaMemcpyDeviceToHost, s),
                         "cudaMemcpyAsync reading a CSR index-check flag"));
  // a fault in any kernel surfaces here, named by the CUDA error
  RLX_TRY(cuda_check(cudaStreamSynchronize(s), "cudaStreamSynchronize after running the program"));
  // the CSR kernels' index checks (after the run: a bad index was skipped, never followed)
  for (size_t i = 0; i < csr_.size(); ++i)
    if (csr_[i] && csr_[i]->blocks && csr_[i]->flags_host)
      return backends::csr_spmv_flag_error(csr_[i]->flags_host, prog_.natives[i].name, prog_.natives[i].op);
  return Status::ok();
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
