// rlx/device.h: the interface a device implements, and the device registry.
//
// A device answers three questions for the legalizer (can it run this graph-level node as
// one native kernel; can its renderer run this primitive), compiles a legalized
// primitive-level graph into an Executable, and reports honestly whether it is available here.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "rlx/graph.h"
#include "rlx/status.h"
#include "rlx/tensor.h"

namespace rlx {

// Everything a device sees of one node when deciding: op, attributes, types, and a name.
struct NodeDesc {
  Op op;
  const Attrs& attrs;
  std::span<const TensorType> inputs;
  std::span<const TensorType> outputs;
  std::string_view name;
};

// A device's answer: yes with a description of how, or no with the reason.
struct Claim {
  bool ok = false;
  std::string text;  // how (when ok) or why not (when refused)
  static Claim yes(std::string how) { return Claim{true, std::move(how)}; }
  static Claim no(std::string why) { return Claim{false, std::move(why)}; }
};

// What runs a device's programs: the host's own executor (cpu), the reference interpreter
// (ref), the device runtime layer of the GPU-class devices (src/hal/: opencl, vulkan, opengl,
// cuda), or nothing (null, the skeleton). Tests that compare a device with the cpu select by it.
enum class DeviceKind : uint8_t { host, reference, gpu, skeleton };
std::string_view device_kind_name(DeviceKind k);

struct DeviceInfo {
  std::string name;
  DeviceKind kind = DeviceKind::gpu;
  bool available = false;
  std::string reason;       // why it is unavailable; empty when available
  std::string description;  // e.g. "x86-64, 2 threads, avx512"
  std::vector<DType> dtypes;  // dtypes its renderer computes in
  // 16-bit dtypes whose matrix products run on native kernels faster than the same product
  // widened onto the f32 ones (so autocast's narrow form pays for inference there; e.g. bf16
  // on a CPU with AVX-512 BF16). Empty where only the widened form is fast.
  std::vector<DType> fast_narrow_products;
  // Those of fast_narrow_products whose convolutions pay in the narrow form as well: a
  // convolution is one small product per image (as many rows as output channels), and some
  // narrow kernels beat widening only on many rows (f16 on a CPU's AMX tiles).
  std::vector<DType> fast_narrow_convolutions;
  // Whether f32 arithmetic may read and write subnormal values as zero (WGSL allows it, and
  // SwiftShader does it): results then match the op on inputs with subnormals flushed.
  bool flushes_subnormals = false;
  // Whether i64/u64 values are computed in 32 bits (WGSL has no 64-bit integers): a value past
  // them stops the run with an out_of_range error instead of a wrong answer.
  bool int64_in_32_bits = false;
};

struct ExecStats {
  size_t arena_bytes = 0;         // peak intermediate memory from the memory planner
  size_t weight_bytes = 0;        // bytes of weights held (after packing)
  int native_kernels = 0;
  int generated_kernels = 0;
  std::string kernel_listing;     // human-readable list of kernels
  // Each kernel's name and the graph-level nodes fused into it (for the dispatch report).
  std::vector<std::pair<std::string, std::vector<int>>> kernel_origins;
};

// A compiled, runnable program for fixed input shapes.
class Executable {
 public:
  virtual ~Executable() = default;
  // Runs on host inputs (in graph input order) and returns fresh output tensors.
  virtual Expected<std::vector<Tensor>> run(std::span<const Tensor> inputs) = 0;
  // Runs writing into caller-allocated outputs of the right types; allocates nothing.
  virtual Status run_into(std::span<const Tensor> inputs, std::span<Tensor> outputs) = 0;
  virtual const ExecStats& stats() const = 0;
};

struct CompileOptions;

class Device {
 public:
  virtual ~Device() = default;
  virtual const DeviceInfo& info() const = 0;
  const std::string& name() const { return info().name; }
  // Whether the device runs graph-level node `n` as one native kernel, judged on op,
  // attributes, dtypes and shapes. Primitives may be claimed too (e.g. dot as a GEMM).
  virtual Claim claim_native(const NodeDesc& n) const = 0;
  // Whether generated code for strict primitive `n` runs on this device (dtype support...).
  virtual Claim supports_primitive(const NodeDesc& n) const = 0;
  // Compiles a verified primitive-level graph with static shapes.
  virtual Expected<std::unique_ptr<Executable>> compile(const Graph& primitive_graph,
                                                        const CompileOptions& options) const = 0;
};

// All devices rlx was built with, available or not (with the reason).
std::vector<DeviceInfo> list_devices();
// Their names, in the same order, without making the devices.
std::vector<std::string> device_names();
// The device called `name`; error if unknown or unavailable (with the reason).
Expected<std::shared_ptr<const Device>> get_device(const std::string& name);
// The default device: "cpu".
std::string default_device_name();

}  // namespace rlx
