#include "opencl_runtime.h"

#include <algorithm>
#include <vector>

namespace rlx::opencl {

std::string cl_error_name(cl_int code) {
  const char* n = nullptr;
  switch (code) {
    case CL_DEVICE_NOT_FOUND: n = "CL_DEVICE_NOT_FOUND"; break;
    case CL_DEVICE_NOT_AVAILABLE: n = "CL_DEVICE_NOT_AVAILABLE"; break;
    case CL_COMPILER_NOT_AVAILABLE: n = "CL_COMPILER_NOT_AVAILABLE"; break;
    case CL_MEM_OBJECT_ALLOCATION_FAILURE: n = "CL_MEM_OBJECT_ALLOCATION_FAILURE"; break;
    case CL_OUT_OF_RESOURCES: n = "CL_OUT_OF_RESOURCES"; break;
    case CL_OUT_OF_HOST_MEMORY: n = "CL_OUT_OF_HOST_MEMORY"; break;
    case CL_BUILD_PROGRAM_FAILURE: n = "CL_BUILD_PROGRAM_FAILURE"; break;
    case CL_INVALID_VALUE: n = "CL_INVALID_VALUE"; break;
    case CL_INVALID_PLATFORM: n = "CL_INVALID_PLATFORM"; break;
    case CL_INVALID_DEVICE: n = "CL_INVALID_DEVICE"; break;
    case CL_INVALID_CONTEXT: n = "CL_INVALID_CONTEXT"; break;
    case CL_INVALID_COMMAND_QUEUE: n = "CL_INVALID_COMMAND_QUEUE"; break;
    case CL_INVALID_MEM_OBJECT: n = "CL_INVALID_MEM_OBJECT"; break;
    case CL_INVALID_BUFFER_SIZE: n = "CL_INVALID_BUFFER_SIZE"; break;
    case CL_INVALID_PROGRAM: n = "CL_INVALID_PROGRAM"; break;
    case CL_INVALID_PROGRAM_EXECUTABLE: n = "CL_INVALID_PROGRAM_EXECUTABLE"; break;
    case CL_INVALID_KERNEL_NAME: n = "CL_INVALID_KERNEL_NAME"; break;
    case CL_INVALID_KERNEL: n = "CL_INVALID_KERNEL"; break;
    case CL_INVALID_ARG_INDEX: n = "CL_INVALID_ARG_INDEX"; break;
    case CL_INVALID_ARG_VALUE: n = "CL_INVALID_ARG_VALUE"; break;
    case CL_INVALID_ARG_SIZE: n = "CL_INVALID_ARG_SIZE"; break;
    case CL_INVALID_KERNEL_ARGS: n = "CL_INVALID_KERNEL_ARGS"; break;
    case CL_INVALID_WORK_DIMENSION: n = "CL_INVALID_WORK_DIMENSION"; break;
    case CL_INVALID_WORK_GROUP_SIZE: n = "CL_INVALID_WORK_GROUP_SIZE"; break;
    case CL_INVALID_GLOBAL_WORK_SIZE: n = "CL_INVALID_GLOBAL_WORK_SIZE"; break;
    case -1001: n = "CL_PLATFORM_NOT_FOUND_KHR (no OpenCL driver is installed)"; break;
    default: break;
  }
  return cat(n ? n : "OpenCL error", " (", code, ")");
}

Status cl_check(cl_int code, const std::string& what) {
  if (code == CL_SUCCESS) return Status::ok();
  return error(ErrorCode::runtime_error, "opencl: ", what, ": ", cl_error_name(code));
}

namespace {
std::string device_string(cl_device_id d, cl_device_info what) {
  size_t n = 0;
  if (clGetDeviceInfo(d, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "";
  std::string s(n, '\0');
  clGetDeviceInfo(d, what, n, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}
}  // namespace

Expected<std::shared_ptr<Runtime>> Runtime::create() {
  cl_uint np = 0;
  cl_int rc = clGetPlatformIDs(0, nullptr, &np);
  if (rc != CL_SUCCESS || np == 0)
    return error(ErrorCode::unavailable, "no OpenCL platform (",
                 rc == CL_SUCCESS ? std::string("the loader lists none") : cl_error_name(rc),
                 "); on Debian install pocl-opencl-icd for the CPU, or a GPU vendor's ICD");
  std::vector<cl_platform_id> platforms(np);
  RLX_TRY(cl_check(clGetPlatformIDs(np, platforms.data(), nullptr), "clGetPlatformIDs"));
  cl_device_id chosen = nullptr;
  for (cl_device_type type : {static_cast<cl_device_type>(CL_DEVICE_TYPE_GPU), static_cast<cl_device_type>(CL_DEVICE_TYPE_ALL)}) {
    for (cl_platform_id p : platforms) {
      cl_device_id d = nullptr;
      cl_uint nd = 0;
      if (clGetDeviceIDs(p, type, 1, &d, &nd) == CL_SUCCESS && nd > 0) {
        chosen = d;
        break;
      }
    }
    if (chosen) break;
  }
  if (!chosen) return error(ErrorCode::unavailable, "OpenCL platforms are installed but list no device");
  std::shared_ptr<Runtime> r(new Runtime());
  r->device_ = chosen;
  cl_int err = CL_SUCCESS;
  r->context_ = clCreateContext(nullptr, 1, &chosen, nullptr, nullptr, &err);
  RLX_TRY(cl_check(err, "clCreateContext"));
  r->queue_ = clCreateCommandQueue(r->context_, chosen, 0, &err);
  RLX_TRY(cl_check(err, "clCreateCommandQueue"));
  cl_device_fp_config fp64 = 0;
  clGetDeviceInfo(chosen, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof fp64, &fp64, nullptr);
  r->fp64_ = fp64 != 0;
  cl_uint units = 0;
  clGetDeviceInfo(chosen, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, nullptr);
  r->units_ = std::max<cl_uint>(units, 1);
  cl_ulong mem = 0;
  clGetDeviceInfo(chosen, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, nullptr);
  const std::string ext = device_string(chosen, CL_DEVICE_EXTENSIONS);
  r->int64_atomics_ = ext.find("cl_khr_int64_base_atomics") != std::string::npos;
  size_t group = 1;
  clGetDeviceInfo(chosen, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof group, &group, nullptr);
  r->max_group_ = std::max<size_t>(group, 1);
  r->description_ = cat(device_string(chosen, CL_DEVICE_NAME), " (", device_string(chosen, CL_DEVICE_VERSION), "), ",
                        units, " compute units, ", mem >> 20, " MiB, fp64 ", r->fp64_ ? "yes" : "no", ", fp16 ",
                        ext.find("cl_khr_fp16") != std::string::npos ? "yes" : "no (f16 stored, computed in f32)",
                        ", generated OpenCL C");
  return r;
}

Runtime::~Runtime() {
  for (auto& [key, k] : kernels_) clReleaseKernel(k);
  for (auto& [src, p] : programs_) clReleaseProgram(p);
  if (queue_) clReleaseCommandQueue(queue_);
  if (context_) clReleaseContext(context_);
}

Expected<cl_program> Runtime::program(const std::string& source) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = programs_.find(source);
  if (it != programs_.end()) return it->second;
  const char* text = source.c_str();
  const size_t len = source.size();
  cl_int err = CL_SUCCESS;
  cl_program p = clCreateProgramWithSource(context_, 1, &text, &len, &err);
  RLX_TRY(cl_check(err, "clCreateProgramWithSource"));
  err = clBuildProgram(p, 1, &device_, "-cl-std=CL1.2 -w", nullptr, nullptr);
  if (err != CL_SUCCESS) {
    size_t n = 0;
    clGetProgramBuildInfo(p, device_, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
    std::string log(n, '\0');
    if (n) clGetProgramBuildInfo(p, device_, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
    clReleaseProgram(p);
    if (log.size() > 4000) log = log.substr(0, 4000) + "\n...";
    return error(ErrorCode::runtime_error, "opencl: building the generated kernels failed (", cl_error_name(err),
                 "):\n", log);
  }
  programs_.emplace(source, p);
  return p;
}

}  // namespace rlx::opencl

namespace rlx::opencl {
namespace {
cl_mem mem(const hal::BufferRange& r) { return reinterpret_cast<cl_mem>(r.buffer.id); }
}  // namespace

Expected<hal::Buffer> Runtime::allocate(uint64_t bytes, const std::string& what) {
  cl_int err = CL_SUCCESS;
  cl_mem m = clCreateBuffer(context_, CL_MEM_READ_WRITE, bytes, nullptr, &err);
  RLX_TRY(cl_check(err, cat("allocating ", bytes, " bytes for ", what)));
  return hal::Buffer{reinterpret_cast<uint64_t>(m), bytes};
}

void Runtime::release(hal::Buffer b) {
  if (b.id) clReleaseMemObject(reinterpret_cast<cl_mem>(b.id));
}

Status Runtime::upload(const hal::BufferRange& r, const void* data, uint64_t bytes) {
  return cl_check(clEnqueueWriteBuffer(queue_, mem(r), CL_TRUE, r.offset, bytes, data, 0, nullptr, nullptr), "uploading");
}

Status Runtime::download(const hal::BufferRange& r, void* data, uint64_t bytes) {
  return cl_check(clEnqueueReadBuffer(queue_, mem(r), CL_TRUE, r.offset, bytes, data, 0, nullptr, nullptr), "downloading");
}

Expected<std::vector<hal::Kernel>> Runtime::build(const hal::KernelModule& module) {
  RLX_ASSIGN_OR_RETURN(cl_program p, program(module.source));
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<hal::Kernel> out;
  for (const hal::KernelEntry& e : module.entries) {
    cl_kernel& k = kernels_[{p, e.name}];
    if (!k) {
      cl_int err = CL_SUCCESS;
      k = clCreateKernel(p, e.name.c_str(), &err);
      RLX_TRY(cl_check(err, "clCreateKernel " + e.name));
    }
    out.push_back({reinterpret_cast<uint64_t>(k)});
  }
  return out;
}

Status Runtime::write(const hal::BufferRange& r, const void* data, uint64_t bytes) {
  return cl_check(clEnqueueWriteBuffer(queue_, mem(r), CL_FALSE, r.offset, bytes, data, 0, nullptr, nullptr), "writing an input");
}

Status Runtime::read(const hal::BufferRange& r, void* data, uint64_t bytes) {
  return cl_check(clEnqueueReadBuffer(queue_, mem(r), CL_FALSE, r.offset, bytes, data, 0, nullptr, nullptr), "reading an output");
}

Status Runtime::finish() { return cl_check(clFinish(queue_), "waiting for the queue"); }

Status Runtime::enqueue(const hal::Command& c) {
  if (c.kind == hal::Command::Kind::zero) {
    const cl_int zero = 0;
    return cl_check(clEnqueueFillBuffer(queue_, mem(c.range), &zero, sizeof zero, c.range.offset, c.range.bytes, 0, nullptr, nullptr),
                    c.name);
  }
  const hal::Dispatch& d = c.dispatch;
  cl_kernel k = reinterpret_cast<cl_kernel>(d.kernel.id);
  std::lock_guard<std::mutex> lock(launch_mu_);
  cl_uint a = 0;
  for (const hal::BufferRange& r : d.buffers) {
    if (r.offset) return error(ErrorCode::internal, "opencl: kernel ", d.name, " binds a buffer at an offset");
    const cl_mem m = mem(r);
    RLX_TRY(cl_check(clSetKernelArg(k, a, sizeof m, &m), cat("binding argument ", a, " of ", d.name)));
    ++a;
  }
  for (int64_t v : d.scalars) {
    const cl_long x = v;
    RLX_TRY(cl_check(clSetKernelArg(k, a, sizeof x, &x), cat("binding argument ", a, " of ", d.name)));
    ++a;
  }
  if (d.items > 0) {
    // Work-groups of up to 64 items, but at least four groups per compute unit when the
    // domain allows (a group runs on one unit); the kernel ignores the items past its domain.
    // Left to itself, a driver given a global size with no good divisor may pick groups of one.
    const size_t global = static_cast<size_t>(d.items);
    size_t local = 64;
    while (local > 1 && global / local < 4 * units_) local /= 2;
    const size_t padded = (global + local - 1) / local * local;
    return cl_check(clEnqueueNDRangeKernel(queue_, k, 1, nullptr, &padded, &local, 0, nullptr, nullptr), "running kernel " + d.name);
  }
  const size_t global[3] = {size_t{d.groups[0]} * d.local[0], size_t{d.groups[1]} * d.local[1], size_t{d.groups[2]} * d.local[2]};
  const size_t local[3] = {d.local[0], d.local[1], d.local[2]};
  return cl_check(clEnqueueNDRangeKernel(queue_, k, 3, nullptr, global, local, 0, nullptr, nullptr), "running native kernel " + d.name);
}

}  // namespace rlx::opencl
