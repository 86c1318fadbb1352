#include "opencl_device.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "../../codegen/c_prelude.h"
#include "backends/csr_spmv.h"
#include "backends/gemm_plan.h"
#include "../../codegen/c_renderer.h"
#include "../../passes/schedule.h"
#include "opencl_runtime.h"
#include "opencl_splat.h"
#include "rlx/compile.h"

namespace rlx::opencl {
namespace {

// The native f32 product: 16x16 output tiles, A and B staged through local memory a 16-wide
// slice of K at a time. Element (b, m, k) of A is at b*sab + m*sam + k*sak (and likewise for
// B), so transposed operands need no copy.
constexpr const char* kGemmSource = R"CL(
#define RLX_TS 16
__kernel void rlx_native_gemm_f32(__global const float* A, __global const float* B, __global float* C,
                                  const long M, const long N, const long K,
                                  const long sab, const long sam, const long sak,
                                  const long sbb, const long sbk, const long sbn, const long scb) {
  __local float as[RLX_TS][RLX_TS];
  __local float bs[RLX_TS][RLX_TS + 1];
  const int lm = (int)get_local_id(1), ln = (int)get_local_id(0);
  const long m = (long)get_group_id(1) * RLX_TS + lm, n = (long)get_group_id(0) * RLX_TS + ln;
  const long b = (long)get_global_id(2);
  A += b * sab;
  B += b * sbb;
  float acc = 0.0f;
  for (long k0 = 0; k0 < K; k0 += RLX_TS) {
    const long ka = k0 + ln, kb = k0 + lm;
    as[lm][ln] = (m < M && ka < K) ? A[m * sam + ka * sak] : 0.0f;
    bs[lm][ln] = (kb < K && n < N) ? B[kb * sbk + n * sbn] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int kk = 0; kk < RLX_TS; ++kk) acc = fma(as[lm][kk], bs[kk][ln], acc);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (m < M && n < N) C[b * scb + m * N + n] = acc;
}
)CL";

// A dot the tiled kernel computes: f32, one contracting dim, batch dims leading (the CPU's
// GEMM planner decides the layout; its plan is device-independent).

// A compiled program: one cl_mem per buffer (views share their target's), weights and
// constants uploaded once, kernel arguments bound once; a run writes the inputs, enqueues the
// kernels in order on the in-order queue and reads the outputs back.
class OpenclExecutable final : public Executable {
 public:
  OpenclExecutable(std::shared_ptr<Runtime> rt, kir::KernelProgram prog) : rt_(std::move(rt)), prog_(std::move(prog)) {}
  ~OpenclExecutable() override {
    if (profile_ && !kernel_ms_.empty()) {
      std::vector<int> order(kernel_ms_.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
      std::sort(order.begin(), order.end(), [&](int a, int b) { return kernel_ms_[a] > kernel_ms_[b]; });
      for (size_t i = 0; i < std::min<size_t>(order.size(), 12); ++i) {
        const kir::GeneratedKernel& k = prog_.generated[order[i]];
        std::fprintf(stderr, "opencl profile: %-6s %10.3f ms total  %lldx%lld%s\n", k.name.c_str(), kernel_ms_[order[i]],
                     static_cast<long long>(k.rows()), static_cast<long long>(k.cols()), k.serial ? " serial" : "");
      }
    }
    for (cl_kernel k : kernels_)
      if (k) clReleaseKernel(k);
    for (Native& n : natives_) {
      if (n.kernel) clReleaseKernel(n.kernel);
      if (n.flags) clReleaseMemObject(n.flags);
    }
    for (size_t i = 0; i < mem_.size(); ++i)
      if (mem_[i] && owns_[i]) clReleaseMemObject(mem_[i]);
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

  struct Native {
    cl_kernel kernel = nullptr;
    size_t global[3] = {0, 0, 0};
    bool spmv = false;         // the CSR kernel (csr_spmv.h): 1-D, with an index-check flag word
    cl_mem flags = nullptr;
    cl_mem zero = nullptr;     // an output zeroed before the launch (the transposed SpMV's)
    size_t zero_bytes = 0;
    std::shared_ptr<SplatLaunches> splat;  // a splatting node's kernels (opencl_splat.h)
  };
  std::vector<Native> natives_;
  std::shared_ptr<Runtime> rt_;
  kir::KernelProgram prog_;
  std::vector<cl_mem> mem_;
  std::vector<char> owns_;
  std::vector<cl_kernel> kernels_;
  std::vector<size_t> global_;  // work items per generated kernel (0: skipped at run time)
  ExecStats stats_;
  std::mutex mu_;
  // RLX_PROFILE=1: wait for each kernel and print the slowest ones when the executable ends
  bool profile_ = std::getenv("RLX_PROFILE") != nullptr;
  std::vector<double> kernel_ms_;
};

Status OpenclExecutable::init(const Graph& g) {
  const size_t nb = prog_.buffers.size();
  mem_.assign(nb, nullptr);
  owns_.assign(nb, 0);
  cl_int err = CL_SUCCESS;
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
    // OpenCL has no empty buffers: an empty tensor gets one unused word
    const size_t bytes = std::max<size_t>(b.bytes(), 4);
    const bool upload = data && b.bytes() > 0;
    mem_[i] = clCreateBuffer(rt_->context(), CL_MEM_READ_WRITE | (upload ? CL_MEM_COPY_HOST_PTR : 0), bytes,
                             upload ? const_cast<uint8_t*>(data->bytes()) : nullptr, &err);
    RLX_TRY(cl_check(err, cat("allocating ", bytes, " bytes for buffer b", i, b.name.empty() ? "" : " '" + b.name + "'")));
    owns_[i] = 1;
  }
  for (size_t i = 0; i < nb; ++i)
    if (prog_.buffers[i].alias_of >= 0) mem_[i] = mem_[root(static_cast<int>(i))];
  RLX_TRY(init_natives());
  // one OpenCL program for all generated kernels of the graph
  std::string src = "#define RLX_OPENCL 1\n";
  src += codegen::c_prelude();
  src += codegen::c_runtime_helpers();
  for (const kir::GeneratedKernel& k : prog_.generated) {
    std::vector<DType> dts;
    for (int b : k.args) dts.push_back(prog_.buffers[b].dtype);
    RLX_ASSIGN_OR_RETURN(std::string fn, codegen::render_c_kernel(k, dts, "rlx_" + k.name, codegen::CTarget::opencl));
    src += "\n" + fn;
  }
  cl_program program = nullptr;
  if (!prog_.generated.empty()) {
    RLX_ASSIGN_OR_RETURN(program, rt_->program(src));
  }
  for (const kir::GeneratedKernel& k : prog_.generated) {
    cl_kernel kern = clCreateKernel(program, ("rlx_" + k.name).c_str(), &err);
    RLX_TRY(cl_check(err, "clCreateKernel " + k.name));
    kernels_.push_back(kern);
    for (size_t a = 0; a < k.args.size(); ++a)
      RLX_TRY(cl_check(clSetKernelArg(kern, static_cast<cl_uint>(a), sizeof(cl_mem), &mem_[k.args[a]]),
                       cat("binding argument ", a, " of ", k.name)));
    const cl_long rows = k.rows(), cols = k.cols();
    RLX_TRY(cl_check(clSetKernelArg(kern, static_cast<cl_uint>(k.args.size()), sizeof rows, &rows), "rows"));
    RLX_TRY(cl_check(clSetKernelArg(kern, static_cast<cl_uint>(k.args.size() + 1), sizeof cols, &cols), "cols"));
    // a copy onto the same memory (a donated buffer) is nothing to do
    const bool aliased = k.skip_if_aliased && k.args.size() >= 2 && mem_[k.args[0]] == mem_[k.args[1]];
    global_.push_back(aliased ? 0 : (k.serial ? 1 : static_cast<size_t>(rows * cols)));
  }
  stats_.generated_kernels = static_cast<int>(prog_.generated.size());
  stats_.kernel_listing = prog_.listing();
  stats_.native_kernels = static_cast<int>(prog_.natives.size());
  for (const kir::Step& s : prog_.steps)
    stats_.kernel_origins.push_back(s.native ? std::make_pair(prog_.natives[s.index].name, prog_.natives[s.index].origins)
                                             : std::make_pair(prog_.generated[s.index].name, prog_.generated[s.index].origins));
  return Status::ok();
}

Status OpenclExecutable::init_natives() {
  if (prog_.natives.empty()) return Status::ok();
  bool any_spmv = false;
  for (const kir::NativeKernel& nk : prog_.natives) any_spmv |= backends::csr_kernel_op(nk.op);
  RLX_ASSIGN_OR_RETURN(cl_program program,
                       rt_->program(std::string(kGemmSource) + (any_spmv ? backends::csr_spmv_opencl_source(rt_->fp64()) : "")));
  for (const kir::NativeKernel& nk : prog_.natives) {
    NodeDesc d{nk.op, nk.attrs, nk.input_types, nk.output_types, nk.name};
    cl_int err = CL_SUCCESS;
    if (op_info(nk.op).family == OpFamily::splat) {
      std::vector<cl_mem> in, out;
      for (int b : nk.inputs) in.push_back(mem_[b]);
      for (int b : nk.outputs) out.push_back(mem_[b]);
      Native n;
      RLX_ASSIGN_OR_RETURN(n.splat, SplatLaunches::create(*rt_, d, in, out));
      n.global[0] = n.global[1] = n.global[2] = 1;
      natives_.push_back(std::move(n));
      continue;
    }
    if (backends::csr_kernel_op(nk.op)) {
      RLX_ASSIGN_OR_RETURN(backends::CsrSpmvPlan p, backends::plan_csr_spmv(d));
      Native n;
      n.spmv = true;
      n.kernel = clCreateKernel(program, p.kernel.c_str(), &err);
      RLX_TRY(cl_check(err, "clCreateKernel " + p.kernel));
      n.flags = clCreateBuffer(rt_->context(), CL_MEM_READ_WRITE, sizeof(cl_int), nullptr, &err);
      RLX_TRY(cl_check(err, "allocating the CSR index-check flag"));
      if (p.zero_output) {
        n.zero = mem_[nk.outputs[0]];
        n.zero_bytes = static_cast<size_t>(prog_.buffers[nk.outputs[0]].bytes());
      }
      natives_.push_back(n);
      const cl_mem bufs[6] = {mem_[nk.inputs[0]], mem_[nk.inputs[1]], mem_[nk.inputs[2]],
                              mem_[nk.inputs[3]], mem_[nk.outputs[0]], n.flags};
      for (cl_uint a = 0; a < 6; ++a) RLX_TRY(cl_check(clSetKernelArg(n.kernel, a, sizeof(cl_mem), &bufs[a]), "spmv buffer"));
      const cl_long scalars[4] = {p.n, p.m, p.k, p.nnz};
      for (cl_uint a = 0; a < 4; ++a)
        RLX_TRY(cl_check(clSetKernelArg(n.kernel, 6 + a, sizeof(cl_long), &scalars[a]), "spmv scalar"));
      natives_.back().global[0] = static_cast<size_t>(p.work_items);
      natives_.back().global[1] = natives_.back().global[2] = 1;
      continue;
    }
    RLX_ASSIGN_OR_RETURN(backends::GemmPlan p, backends::plan_tiled_gemm(d));
    Native n;
    n.kernel = clCreateKernel(program, "rlx_native_gemm_f32", &err);
    RLX_TRY(cl_check(err, "clCreateKernel rlx_native_gemm_f32"));
    natives_.push_back(n);
    const cl_long sab = p.stride_a, sam = p.trans_a ? 1 : p.lda, sak = p.trans_a ? p.lda : 1;
    const cl_long sbb = p.stride_b, sbk = p.trans_b ? 1 : p.ldb, sbn = p.trans_b ? p.ldb : 1;
    const cl_long m = p.m, nn = p.n, k = p.k, scb = p.stride_c;
    const cl_mem bufs[3] = {mem_[nk.inputs[0]], mem_[nk.inputs[1]], mem_[nk.outputs[0]]};
    for (cl_uint a = 0; a < 3; ++a) RLX_TRY(cl_check(clSetKernelArg(n.kernel, a, sizeof(cl_mem), &bufs[a]), "gemm buffer"));
    const cl_long scalars[10] = {m, nn, k, sab, sam, sak, sbb, sbk, sbn, scb};
    for (cl_uint a = 0; a < 10; ++a)
      RLX_TRY(cl_check(clSetKernelArg(n.kernel, 3 + a, sizeof(cl_long), &scalars[a]), "gemm scalar"));
    natives_.back().global[0] = static_cast<size_t>((p.n + 15) / 16 * 16);
    natives_.back().global[1] = static_cast<size_t>((p.m + 15) / 16 * 16);
    natives_.back().global[2] = static_cast<size_t>(p.batch);
  }
  return Status::ok();
}

Status OpenclExecutable::run_into(std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  std::lock_guard<std::mutex> lock(mu_);
  RLX_TRY(kir::check_run_io(prog_, inputs, outputs));
  cl_command_queue q = rt_->queue();
  // Inputs are copied to the device before any kernel runs and outputs copied back after the
  // last, so an output may share host memory with an input (a donated cache) safely.
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].nbytes() == 0) continue;
    RLX_TRY(cl_check(clEnqueueWriteBuffer(q, mem_[prog_.inputs[i]], CL_FALSE, 0, inputs[i].nbytes(), inputs[i].bytes(), 0,
                                          nullptr, nullptr),
                     cat("writing input ", i)));
  }
  for (const kir::Step& s : prog_.steps) {
    if (s.native) {
      const Native& n = natives_[s.index];
      if (n.splat) {
        RLX_TRY(n.splat->enqueue(q));
        continue;
      }
      if (n.spmv) {
        const cl_int zero = 0;
        // zeroed even when A has no rows: y = A^T x is then all zeros
        if (n.zero && n.zero_bytes)
          RLX_TRY(cl_check(clEnqueueFillBuffer(q, n.zero, &zero, sizeof zero, 0, n.zero_bytes, 0, nullptr, nullptr),
                           "zeroing the output of " + prog_.natives[s.index].name));
        if (n.global[0] == 0) continue;
        RLX_TRY(cl_check(clEnqueueFillBuffer(q, n.flags, &zero, sizeof zero, 0, sizeof zero, 0, nullptr, nullptr),
                         "clearing the CSR index-check flag"));
        RLX_TRY(cl_check(clEnqueueNDRangeKernel(q, n.kernel, 1, nullptr, n.global, nullptr, 0, nullptr, nullptr),
                         "running native kernel " + prog_.natives[s.index].name));
        continue;
      }
      if (n.global[0] * n.global[1] * n.global[2] == 0) continue;  // an empty product
      const size_t local[3] = {16, 16, 1};
      RLX_TRY(cl_check(clEnqueueNDRangeKernel(q, n.kernel, 3, nullptr, n.global, local, 0, nullptr, nullptr),
                       "running native kernel " + prog_.natives[s.index].name));
      continue;
    }
    const size_t global = global_[s.index];
    if (global == 0) continue;
    // Work-groups of up to 64 items, but at least four groups per compute unit when the domain
    // allows (a group runs on one unit); the kernel ignores the items past its domain. Left to
    // itself, a driver given a global size with no good divisor may pick groups of one item.
    size_t local = 64;
    while (local > 1 && global / local < 4 * rt_->compute_units()) local /= 2;
    const size_t padded = (global + local - 1) / local * local;
    RLX_TRY(cl_check(clEnqueueNDRangeKernel(q, kernels_[s.index], 1, nullptr, &padded, &local, 0, nullptr, nullptr),
                     "running kernel " + prog_.generated[s.index].name));
    if (profile_) {
      const auto t0 = std::chrono::steady_clock::now();
      RLX_TRY(cl_check(clFinish(q), "profiling"));
      kernel_ms_.resize(prog_.generated.size(), 0.0);
      kernel_ms_[s.index] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].nbytes() == 0) continue;
    RLX_TRY(cl_check(clEnqueueReadBuffer(q, mem_[prog_.outputs[i]], CL_FALSE, 0, outputs[i].nbytes(), outputs[i].bytes(), 0,
                                         nullptr, nullptr),
                     cat("reading output ", i)));
  }
  RLX_TRY(cl_check(clFinish(q), "waiting for the queue"));
  // the CSR kernels' index checks (after the run: a bad index was skipped, never followed)
  for (size_t i = 0; i < natives_.size(); ++i) {
    if (!natives_[i].spmv || natives_[i].global[0] == 0) continue;
    cl_int flags = 0;
    RLX_TRY(cl_check(clEnqueueReadBuffer(q, natives_[i].flags, CL_TRUE, 0, sizeof flags, &flags, 0, nullptr, nullptr),
                     "reading the CSR index-check flag"));
    if (flags) return backends::csr_spmv_flag_error(flags, prog_.natives[i].name, prog_.natives[i].op);
  }
  return Status::ok();
}

Expected<std::vector<Tensor>> OpenclExecutable::run(std::span<const Tensor> inputs) {
  std::vector<Tensor> outs = kir::allocate_outputs(prog_);
  RLX_TRY(run_into(inputs, outs));
  return outs;
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
  }
  const DeviceInfo& info() const override { return info_; }

  Claim claim_native(const NodeDesc& n) const override {
    if (op_info(n.op).family == OpFamily::sparse) return backends::claim_csr_spmv(n, "opencl", rt_->fp64());
    if (op_info(n.op).family == OpFamily::splat) return claim_splat(n, *rt_);
    return backends::claim_tiled_gemm(n, "opencl");
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

  Expected<std::unique_ptr<Executable>> compile(const Graph& g, const CompileOptions& options) const override {
    RLX_ASSIGN_OR_RETURN(kir::KernelProgram prog, sched::schedule(g));
    RLX_TRY(sched::apply_donations(prog, options.donate));  // a donated output shares its input's cl_mem
    RLX_TRY(kir::verify_program(prog));
    auto e = std::make_unique<OpenclExecutable>(rt_, std::move(prog));
    RLX_TRY(e->init(g));
    return std::unique_ptr<Executable>(std::move(e));
  }

 private:
  DeviceInfo info_;
  std::shared_ptr<Runtime> rt_;
};

}  // namespace

std::shared_ptr<const Device> make_opencl_device() { return std::make_shared<OpenclDevice>(); }

}  // namespace rlx::opencl
